"""Every setting `ok` reads, declared once: key, default, type, environment variable, help.

A setting comes from the first of: a command-line flag (where one exists), its `OK_*`
environment variable, `.ok/config.yml` (nested by the dotted key), the default below.
`Folder.setting(key)` reads one; `ok config` shows and changes them; `docs/config.md` is
generated from this registry (`python -m openkl.settings --markdown > docs/config.md`).

Env-only entries (keyed by their variable, e.g. `OK_NOW`) are read from the environment
only, through `env()`, and never from the config file.
"""

from __future__ import annotations

import math
import os
import re
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from .errors import BadInput, UsageError
from .records import SettingValue


@dataclass(frozen=True)
class McpTool:
    """A tool `ok mcp` serves: `name` is the `KnowledgeServer` method it runs (whose
    docstring describes it and whose arguments are its schema); `does` what it does to a
    folder: `read`, `read-out` (reads, and may call out: the LLM), `persist` (writes only
    when asked to; a read-only server refuses that), `add` (writes something new at each
    call) or `write` (writes; the same call twice is one write); `timeout` the default of its time cap `mcp.timeouts.<name>`
    (None: mcp.timeout). Writing tools are left out of a read-only server."""

    name: str
    does: str = "read"
    timeout: float | None = None


# the tools `ok mcp` serves, in the order it lists them: a tool is registered here alone
MCP_TOOL_TABLE = (
    McpTool("list_stacks"),
    McpTool("search"),
    McpTool("mem_search"),
    McpTool("store_search"),
    McpTool("cite_verify"),
    McpTool("graph_cypher"),
    McpTool("entities"),
    McpTool("traverse"),
    McpTool("context", "read-out", 60.0),
    McpTool("ask", "read-out", 120.0),
    McpTool("fs_list"),
    McpTool("fs_read"),
    McpTool("sh_grep"),
    McpTool("cite_make", "persist"),
    McpTool("mem_add", "add"),
    McpTool("distill_create", "add"),
    McpTool("store_ingest", "write", 300.0),
    McpTool("graph_add_entity", "write"),
    McpTool("graph_add_relationship", "write"),
)
MCP_TOOLS = tuple(t.name for t in MCP_TOOL_TABLE)

SEARCH_MODES = ("hybrid", "vector", "fts")

# keys of the config file that are structure, not settings
FILE_KEYS = ("version", "metadata")  # metadata: the stack's own fields, any mapping
# keys an older `ok init` wrote that no longer mean anything: ignored without a warning
RETIRED = ("search.vector_index",)

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")
_TYPE_NAMES = {int: "int", float: "float", bool: "bool", str: "str"}
_EXPECTED = {int: "an integer", float: "a number", bool: "true or false", str: "a string"}


def env_name(key: str) -> str:
    """The environment variable that overrides a config key: `search.k` → `OK_SEARCH_K`."""
    return "OK_" + key.replace(".", "_").upper()


@dataclass(frozen=True)
class Setting:
    """One declared setting. `nullable`: unset (None) is a valid value with a meaning of its
    own, told in `help`. `env_only`: read from the environment variable `key` only."""

    key: str
    default: Any
    type: type
    help: str
    env: str = ""
    choices: tuple[str, ...] = ()
    nullable: bool = False
    env_only: bool = False

    def __post_init__(self) -> None:
        if not self.env:
            object.__setattr__(self, "env", self.key if self.env_only else env_name(self.key))

    @property
    def type_name(self) -> str:
        name = "|".join(self.choices) if self.choices else _TYPE_NAMES[self.type]
        return name + "|null" if self.nullable else name

    @property
    def expected(self) -> str:
        if self.choices:
            return "one of " + ", ".join(self.choices)
        return _EXPECTED[self.type] + (" (or empty for unset)" if self.nullable else "")

    def example(self) -> str:
        value = self.default if self.default is not None else _EXAMPLES[self.type]
        return render(value)

    def parse(self, value: Any, origin: str, hint: str) -> Any:
        """`value` (text from the environment or a command line, or a YAML value) as this
        setting's type; anything else is one error naming the key, the value, where it came
        from and what was expected."""
        out = _convert(self, value)
        if out is _BAD or (self.choices and out is not None and out not in self.choices):
            where = f" ({origin})" if origin else ""
            raise BadInput(f"{self.key} = {value!r}{where} is not {self.expected}", hint)
        return out


_BAD = object()
_EXAMPLES: dict[type, Any] = {int: 10, float: 1.5, bool: True, str: "text"}


def _convert(s: Setting, value: Any) -> Any:
    if value is None or (s.nullable and isinstance(value, str) and not value.strip()):
        return None if s.nullable else _BAD
    if s.type is bool:
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        return True if text in _TRUE else False if text in _FALSE else _BAD
    if isinstance(value, bool):  # YAML's true/false are not numbers or names
        return _BAD
    if s.type is str:
        return str(value) if isinstance(value, str | int | float) else _BAD
    if isinstance(value, str):
        try:
            value = int(value.strip()) if s.type is int else float(value.strip())
        except ValueError:
            return _BAD
    if s.type is int:
        if isinstance(value, float) and value.is_integer():
            return int(value)
        return value if isinstance(value, int) else _BAD
    if isinstance(value, int | float) and math.isfinite(value):
        return float(value)
    return _BAD


def render(value: Any) -> str:
    """A value as a user types it: `true`, `0.5`, `hybrid`, empty for unset."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _s(key: str, default: Any, type_: type, help: str, **kw: Any) -> Setting:
    return Setting(key, default, type_, help, **kw)


DECLARED: tuple[Setting, ...] = (
    _s(
        "domain",
        None,
        str,
        "Name of the folder as an MCP stack and in AKS bundles (unset: the folder's name).",
        nullable=True,
    ),
    _s(
        "description",
        None,
        str,
        "What the folder holds, in a line (shown with its stack by `ok serve`).",
        nullable=True,
    ),
    # embedding and chunking
    _s(
        "embedding.model",
        "default",
        str,
        "Embedding model: `default` (bundled all-MiniLM-L6-v2 int8) or a fastembed model name.",
    ),
    _s(
        "embedding.base_url",
        None,
        str,
        "An OpenAI-compatible endpoint that embeds (`/v1/embeddings`: Ollama, llama.cpp, "
        "vLLM), e.g. http://localhost:11434/v1; embedding.model then names the model there "
        "(unset: the model runs here). A change of model or dimension needs `ok index "
        "--rebuild`, and the index says so.",
        nullable=True,
    ),
    _s(
        "embedding.api_key_env",
        None,
        str,
        "Environment variable holding the embedding endpoint's API key (unset: "
        "llm.api_key_env's). In .ok/config.yml only a name ending in `_API_KEY` or "
        "`OK_EMBEDDING_API_KEY`.",
        nullable=True,
    ),
    _s(
        "embedding.dim",
        None,
        int,
        "Dimension of the endpoint's vectors (unset: asked of the endpoint once and "
        "remembered in .ok/cache/).",
        nullable=True,
    ),
    _s("embedding.timeout", 60.0, float, "Seconds an embedding endpoint's request may take."),
    _s("embedding.batch_size", 32, int, "Texts embedded per model call."),
    _s("chunking.max_tokens", 256, int, "Longest chunk, in model tokens."),
    _s("chunking.overlap", 64, int, "Tokens shared by consecutive chunks."),
    # search
    _s("search.k", 10, int, "Hits `ok search` returns when `-k` is not given."),
    _s("ask.k", 8, int, "Passages `ok ask` retrieves when `-k` is not given."),
    _s(
        "search.mode",
        "hybrid",
        str,
        "Ranking signals when `--mode` is not given.",
        choices=SEARCH_MODES,
    ),
    _s("search.per_doc", 1, int, "Hits per document when `--per-doc` is not given."),
    _s(
        "search.recency",
        None,
        str,
        "Half-life (e.g. 90d) by which search and ask favour newer documents and notes when "
        "`--recency` is not given (unset or `off`: no recency).",
        nullable=True,
    ),
    _s(
        "search.recency_floor",
        0.4,
        float,
        "The least recency factor, however old the item (0-1), so that an old item that "
        "matches well still shows (tuned on bench/recency.py's own facts).",
    ),
    _s(
        "search.drift_penalty",
        0.0,
        float,
        "Weight by which search holds back documents whose latest version drifted far from "
        "the one it replaced: each score times 1 - weight * drift (0: off; 0.1 is the Active "
        "Graph seed's beta; at most 10).",
    ),
    _s(
        "search.fusion",
        "wsum",
        str,
        "How hybrid search fuses BM25 and vector ranks: normalized weighted sum or RRF.",
        choices=("wsum", "rrf"),
    ),
    _s("search.vector_weight", 0.5, float, "Weight of the vector signal in `wsum` fusion (0-1)."),
    _s("search.rrf_k", 60, int, "The k of reciprocal rank fusion (`rrf`)."),
    _s(
        "search.hnsw_min_chunks",
        50000,
        int,
        "From this many chunks, vector search goes through an HNSW index (approximate, "
        "built once by the write that reaches it, kept if the chunks fall below again) "
        "instead of an exact scan; 0: always exact (the next write drops the index).",
    ),
    _s(
        "search.rerank",
        None,
        str,
        "URL of a rerank endpoint (the `/rerank` protocol of llama.cpp's server, Text "
        "Embeddings Inference, Jina, Cohere), e.g. http://localhost:8080/rerank; it reorders "
        "the top search.rerank_top candidates (unset: off).",
        nullable=True,
    ),
    _s("search.rerank_model", None, str, "Model name sent to the rerank endpoint.", nullable=True),
    _s("search.rerank_top", 20, int, "Candidates of the fused ranking that are reranked."),
    _s(
        "search.rerank_budget",
        2.0,
        float,
        "Seconds a search waits for the rerank endpoint; then (or on an error) it keeps the "
        "fused ranking and warns.",
    ),
    _s(
        "search.rerank_api_key_env",
        None,
        str,
        "Environment variable holding the rerank endpoint's API key (unset: none is sent). "
        "In .ok/config.yml only a name ending in `_API_KEY` or `OK_RERANK_API_KEY`.",
        nullable=True,
    ),
    _s("search.diversity", 0.5, float, "How strongly `--diverse` (MMR) favours unlike hits (0-1)."),
    _s(
        "search.min_score",
        0.37,
        float,
        "No good match (no hits; `ok search` exits 1) when none of the query's words occur "
        "and no passage's cosine similarity to it reaches this; `--min-score` overrides, "
        "0 turns it off (tuned on SciFact train: bench/nomatch.py).",
    ),
    _s(
        "search.tail_floor",
        0.37,
        float,
        "Hybrid search lists a hit none of whose query words BM25 found only when its cosine "
        "similarity to the query reaches this (the tail of unrelated neighbours is left out; "
        "0 lists them all; measured: bench/tail.py).",
    ),
    # memory notes
    _s(
        "mem.duplicate_similarity",
        0.9,
        float,
        "A new note whose vector's cosine similarity to a live note reaches this is a "
        "duplicate (`ok mem add` refuses it, `ok mem dedupe` merges it; 0-1).",
    ),
    _s(
        "mem.duplicate_text",
        0.8,
        float,
        "Likewise for the similarity of the texts, case and spacing aside (0-1).",
    ),
    # the writer lock and the graph
    _s("lock_timeout", 30.0, float, "Seconds a writer waits for the folder's writer lock."),
    _s("graph.buffer_pool_mb", 512, int, "Kùzu's page buffer, in MiB."),
    _s(
        "graph.min_free_mb",
        64.0,
        float,
        "Free disk space (MiB) a graph write needs to start; a load of several commits "
        "asks before each for this much more than its estimate.",
    ),
    _s(
        "graph.backend",
        None,
        str,
        "A PostgreSQL connection string (postgresql://…): where `ok index --backend` publishes "
        "by default and what `ok search` reads (unset: the Kùzu graph in .ok/).",
        nullable=True,
    ),
    _s("graph.commit_chunks", 5000, int, "A large load commits the graph every this many chunks."),
    _s(
        "graph.kuzu_fts",
        False,
        bool,
        "Also keep Kùzu's own full-text indexes in the graph, for Cypher's QUERY_FTS_INDEX "
        "(`ok search` uses the keyword index in .ok/keyword/ either way); a writer builds or "
        "drops them when this changes. They cost about as much disk as the text.",
    ),
    _s(
        "graph.query_memory_mb",
        1024,
        int,
        "Memory a caller's Cypher query may use (`ok graph cypher`, HTTP, MCP), in MiB: it "
        "runs in a process of its own that the kernel holds to this (a quarter of it as "
        "Kùzu's page buffer); a query that needs more fails with an error.",
    ),
    _s(
        "graph.query_output_mb",
        16.0,
        float,
        "Largest result of a caller's Cypher query, in MiB (its rows as sent); a larger one "
        "fails with an error (add a LIMIT).",
    ),
    _s(
        "graph.query_timeout",
        60.0,
        float,
        "Seconds `ok graph cypher` may run before it is stopped (0: no limit). Over HTTP "
        "serve.timeout applies, over MCP mcp.timeouts.graph_cypher (and, in `ok serve`, "
        "serve.timeout if it is shorter).",
    ),
    _s(
        "graph.query_workers",
        4,
        int,
        "Cypher queries of callers that one process runs at once (each in a process of its "
        "own, up to graph.query_memory_mb); more wait for a free one.",
    ),
    # ingest and sources
    _s("ingest.max_file_mb", 64.0, float, "Largest file `ok store ingest` accepts, in MiB."),
    _s("web.delay", 1.0, float, "Seconds between two requests of `ok store web`."),
    _s("web.timeout", 20.0, float, "Seconds a web request may take."),
    _s("web.max_mb", 10.0, float, "Largest web response accepted, in MiB."),
    _s("web.max_redirects", 10, int, "Redirects followed per web request."),
    _s("web.max_pages", 50, int, "Pages `ok store web` fetches when `--max-pages` is not given."),
    _s("arxiv.delay", 3.0, float, "Seconds between two arXiv API requests."),
    _s("arxiv.retries", 1, int, "Retries of a failed arXiv API request."),
    _s(
        "arxiv.api_url",
        "https://export.arxiv.org/api/query?{}",
        str,
        "The arXiv API query URL (`{}` takes the query).",
    ),
    _s(
        "s3.endpoint_url",
        None,
        str,
        "Endpoint of an S3-compatible store for `ok store s3` (MinIO, Ceph, R2 …), e.g. "
        "http://127.0.0.1:9000; unset: AWS S3 (or AWS_ENDPOINT_URL_S3). `--endpoint-url` "
        "wins; a document remembers the endpoint it came from.",
        nullable=True,
    ),
    _s(
        "s3.profile",
        None,
        str,
        "AWS profile (in ~/.aws/credentials or ~/.aws/config) `ok store s3` signs with; "
        "unset: the usual chain (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, AWS_PROFILE, the "
        "default profile, an instance role). `--profile` wins.",
        nullable=True,
    ),
    _s(
        "s3.region",
        None,
        str,
        "AWS region of the buckets (unset: AWS_REGION / AWS_DEFAULT_REGION, the profile's, "
        "or us-east-1).",
        nullable=True,
    ),
    _s("s3.timeout", 20.0, float, "Seconds an S3 request may take to connect, and to read."),
    # entities, freshness, citations
    _s(
        "entities.extractor",
        "local",
        str,
        "Entity extractor at ingest: deterministic `local` or the configured `llm`.",
        choices=("local", "llm"),
    ),
    _s("entities.min_confidence", 0.4, float, "Entities below this confidence are left out."),
    _s(
        "entities.cooccurrence_min_sources",
        2,
        int,
        "A co-occurrence (`related_to`) edge with a common word at one end (an entity only "
        "weakly named where the pair is) is kept only when this many documents or notes name "
        "the pair in one sentence; 1 keeps every pair. Pairs of two terms are always kept. "
        "A change applies at the next `ok sync`.",
    ),
    _s(
        "entities.describer",
        "local",
        str,
        "Who writes entity descriptions: `local` takes the best defining sentence of the "
        "evidence, `llm` asks the configured LLM (each description cites its passage).",
        choices=("local", "llm"),
    ),
    _s(
        "refresh.drift_threshold",
        0.1,
        float,
        "Semantic drift (1 - cosine) at which a new version raises a `drifted` event.",
    ),
    _s(
        "refresh.retry_after",
        60.0,
        float,
        "Seconds before a source whose refresh failed is due again; each further failure in "
        "a row doubles the wait, up to a day.",
    ),
    _s(
        "triggers.scan_every",
        0.0,
        float,
        "Seconds between `ok serve`'s full trigger scans of what the folder holds, as `ok "
        "trigger scan` (0: none; new items are checked as they are indexed either way).",
    ),
    _s(
        "cite.min_similarity",
        0.7,
        float,
        "Similarity at which `ok cite verify` finds an edited quote again (0-1).",
    ),
    # the LLM endpoint
    _s(
        "llm.base_url",
        None,
        str,
        "OpenAI-compatible endpoint, e.g. http://localhost:11434/v1 (unset: no LLM).",
        nullable=True,
    ),
    _s("llm.model", None, str, "Model name at the endpoint.", nullable=True),
    _s(
        "llm.api_key_env",
        "OPENAI_API_KEY",
        str,
        "Environment variable holding the API key (unset: no key is sent). In "
        ".ok/config.yml only a name ending in `_API_KEY` or `OK_LLM_API_KEY`; any name from "
        "the environment (`OK_LLM_API_KEY_ENV`).",
        nullable=True,
    ),
    _s("llm.timeout", 60.0, float, "Seconds an LLM request may take."),
    _s("llm.retries", 2, int, "Retries of a failed LLM request."),
    _s(
        "llm.chat.base_url",
        None,
        str,
        "OpenAI-compatible endpoint for answers: `ok ask`, `ok context`, `ok distill` (unset: llm.base_url).",
        nullable=True,
    ),
    _s(
        "llm.chat.model",
        None,
        str,
        "Model for answers: `ok ask`, `ok context`, `ok distill` (unset: llm.model).",
        nullable=True,
    ),
    _s(
        "llm.chat.api_key_env",
        None,
        str,
        "Environment variable holding the key of the chat endpoint (unset: llm.api_key_env's). "
        "In .ok/config.yml only a name ending in `_API_KEY` or `OK_LLM_API_KEY`.",
        nullable=True,
    ),
    _s(
        "llm.extract.base_url",
        None,
        str,
        "OpenAI-compatible endpoint for extraction at ingest: entities (`entities.extractor: llm`) and descriptions (`entities.describer: llm`) (unset: llm.base_url).",
        nullable=True,
    ),
    _s(
        "llm.extract.model",
        None,
        str,
        "Model for extraction at ingest: entities (`entities.extractor: llm`) and descriptions (`entities.describer: llm`) (unset: llm.model).",
        nullable=True,
    ),
    _s(
        "llm.extract.api_key_env",
        None,
        str,
        "Environment variable holding the key of the extract endpoint (unset: llm.api_key_env's). "
        "In .ok/config.yml only a name ending in `_API_KEY` or `OK_LLM_API_KEY`.",
        nullable=True,
    ),
    _s(
        "llm.chat.fallback_model",
        None,
        str,
        "A larger model that answers instead of the chat model when the retrieved evidence "
        "is weak (the best passage's cosine similarity under llm.chat.fallback_below) or "
        "the chat model fails (unset: none).",
        nullable=True,
    ),
    _s(
        "llm.chat.fallback_base_url",
        None,
        str,
        "Endpoint of llm.chat.fallback_model (unset: the chat endpoint); its key is the chat "
        "endpoint's.",
        nullable=True,
    ),
    _s(
        "llm.chat.fallback_below",
        0.5,
        float,
        "Cosine similarity of the best retrieved passage under which the fallback model "
        "answers (0-1; 0: only when the chat model fails).",
    ),
    # the MCP server
    _s("mcp.read_only", False, bool, "Serve MCP without its write tools (as `--read-only`)."),
    _s("mcp.max_k", 50, int, "Most results per MCP call."),
    _s("mcp.max_bytes", 100000, int, "Longest MCP result, in bytes (longer ones are cut)."),
    _s("mcp.timeout", 30.0, float, "Seconds an MCP tool may run (per tool: mcp.timeouts.*)."),
    *(
        _s(
            f"mcp.timeouts.{tool.name}",
            tool.timeout,
            float,
            f"Seconds the MCP tool `{tool.name}` may run (unset: mcp.timeout).",
            nullable=True,
        )
        for tool in MCP_TOOL_TABLE
    ),
    _s("mcp.fs_max_entries", 500, int, "Most entries an MCP `fs_list` returns."),
    _s("mcp.grep_max", 200, int, "Most matches an MCP `sh_grep` returns."),
    _s("mcp.cypher_max_rows", 500, int, "Most rows an MCP `graph_cypher` returns."),
    # the HTTP server
    _s(
        "serve.rate_limit",
        20.0,
        float,
        "Requests a second one caller may make to `ok serve`, on average (0: no limit).",
    ),
    _s("serve.burst", 40, int, "Requests one caller may make to `ok serve` at once."),
    _s(
        "serve.local_rate_limit",
        0.0,
        float,
        "Requests a second each client address may make when `ok serve` asks for no "
        "credentials (loopback or a socket without --auth), bursts of serve.burst; 0: no "
        "limit. Keys and JWTs are held to serve.rate_limit.",
    ),
    _s("serve.access_log", True, bool, "`ok serve` logs each request as a JSON line on stderr."),
    _s(
        "hints.serve",
        True,
        bool,
        "Once per folder, after a command that took over a second without `ok serve`, say on "
        "a terminal (stderr) that `ok serve` keeps the graph and the model loaded; false: "
        "never.",
    ),
    _s(
        "serve.buffer_pool_mb",
        0,
        int,
        "Kùzu's page buffer of a folder `ok serve` keeps open, in MiB; 0: a quarter of the "
        "machine's memory, from 1,024 to 16,384. A command opens the graph with "
        "graph.buffer_pool_mb.",
    ),
    _s(
        "serve.timeout",
        30.0,
        float,
        "Seconds a request's graph queries may run before they are stopped (504).",
    ),
    _s(
        "serve.cors_origins",
        None,
        str,
        "Web origins allowed to call `ok serve` from a browser, comma-separated (unset: none "
        "but the server's own, the explorer at /).",
        nullable=True,
    ),
    _s(
        "serve.allowed_hosts",
        None,
        str,
        "Host names `ok serve` answers besides localhost, 127.0.0.1, [::1] and its --host "
        "address, comma-separated: `name` (any port) or `name:port`; `*`: any (only behind a "
        "proxy that checks Host). Other names get 421, which stops DNS rebinding.",
        nullable=True,
    ),
    _s(
        "serve.header_timeout",
        10.0,
        float,
        "Seconds a client of `ok serve` has to send a request's headers, from connecting or "
        "from the end of its last response; then the connection is closed (408).",
    ),
    _s(
        "serve.watch",
        True,
        bool,
        "`ok serve` syncs shortly after files of its folders change on disk (an editor, a pull).",
    ),
    _s(
        "serve.refresh_every",
        60.0,
        float,
        "Seconds between `ok serve`'s runs of the refreshes that are due (0: none).",
    ),
    _s(
        "serve.jwt_secret_env",
        None,
        str,
        "Environment variable holding the HS256 secret that JWTs are signed with. In "
        ".ok/config.yml only a name ending in `_JWT_SECRET` or `OK_JWT_SECRET`; any name "
        "from the environment (`OK_SERVE_JWT_SECRET_ENV`).",
        nullable=True,
    ),
    _s(
        "serve.jwt_public_key",
        None,
        str,
        "PEM file of the RS256 public key that JWTs are signed with (instead of a secret).",
        nullable=True,
    ),
    _s(
        "serve.stacks_dir",
        None,
        str,
        "Directory where `ok serve` makes the stacks created over HTTP, one folder each "
        "(relative: to the first folder served; unset: stacks cannot be created).",
        nullable=True,
    ),
    _s(
        "serve.auto",
        True,
        bool,
        "The first `ok` command in a folder that no server owns starts a resident process "
        "for it (`ok daemon`), in which later commands run at once; false: each command "
        "runs in its own process. OK_NO_DAEMON=1 turns it off for one environment.",
    ),
    _s(
        "serve.idle_exit",
        600.0,
        float,
        "Seconds a resident process started by a command (`ok daemon`) waits for the next "
        "command before it exits (0: it stays until `ok daemon stop`).",
    ),
    _s("serve.jwt_issuer", None, str, "The `iss` every JWT must carry.", nullable=True),
    _s("serve.jwt_audience", None, str, "The `aud` every JWT must carry.", nullable=True),
    # read from the environment only
    _s(
        "OK_ROOT",
        None,
        str,
        "The knowledge folder (as `--root`); else the nearest parent holding `.ok/`.",
        env_only=True,
        nullable=True,
    ),
    _s(
        "OK_JSON",
        None,
        str,
        "`1`: every command prints JSON (as `--json`).",
        env_only=True,
        nullable=True,
    ),
    _s(
        "OK_NO_ROUTE",
        None,
        str,
        "1: run the command in this process even when an `ok serve` owns the folder "
        "(it is then refused, as the server holds the graph).",
        env_only=True,
        nullable=True,
    ),
    _s(
        "OK_NO_DAEMON",
        None,
        str,
        "1: no command starts a resident process for the folder (as `serve.auto: false`); "
        "one that runs already is still used.",
        env_only=True,
        nullable=True,
    ),
    _s(
        "OK_NO_PROGRESS",
        None,
        str,
        "Any value: no progress bars, even on a terminal.",
        env_only=True,
        nullable=True,
    ),
    _s(
        "OK_NOW",
        None,
        str,
        "Pins the current time (ISO 8601, e.g. 2026-01-31T08:00:00Z) for reproducible runs.",
        env_only=True,
        nullable=True,
    ),
    _s(
        "OK_CRASH_AT",
        None,
        str,
        "Testing: `POINT[:N]` ends the process at a named crash point (its N-th pass).",
        env_only=True,
        nullable=True,
    ),
    _s(
        "XDG_CACHE_HOME",
        None,
        str,
        "User cache for downloaded embedding models (unset: ~/.cache).",
        env_only=True,
        nullable=True,
    ),
    _s(
        "NO_COLOR",
        None,
        str,
        "Any value: no colours in terminal output.",
        env_only=True,
        nullable=True,
    ),
    _s(
        "PAGER",
        None,
        str,
        "Pager for long output on a terminal (`ok store show`, `ok graph page`, "
        "`ok cite open`); unset: `less -FRX`; empty or `cat`: no pager.",
        env_only=True,
        nullable=True,
    ),
    _s(
        "VISUAL",
        None,
        str,
        "Editor for `ok mem add`/`mem edit` and, on a terminal, `ok open` (wins over EDITOR).",
        env_only=True,
        nullable=True,
    ),
    _s(
        "EDITOR",
        None,
        str,
        "Editor when VISUAL is unset; neither set: vi.",
        env_only=True,
        nullable=True,
    ),
)

SETTINGS: dict[str, Setting] = {s.key: s for s in DECLARED}
BY_ENV: dict[str, Setting] = {s.env: s for s in DECLARED}


def spec(key: str) -> Setting:
    """The declaration of a config key; an undeclared or env-only key is a programming error."""
    s = SETTINGS.get(key)
    if s is None or s.env_only:
        raise KeyError(f"{key!r} is not a declared setting (declare it in openkl/settings.py)")
    return s


def lookup(key: str) -> Setting:
    """The declaration of a key a user typed (or of its environment variable); an unknown
    one is refused with close matches."""
    s = SETTINGS.get(key) or BY_ENV.get(key.upper())
    if s is not None:
        return s
    raise UsageError(f"unknown setting {key!r}", suggest(key))


def suggest(key: str) -> str:
    import difflib

    near = difflib.get_close_matches(key, list(SETTINGS), n=3, cutoff=0.6)
    if not near:
        near = [k for k in SETTINGS if k.startswith(key.split(".")[0] + ".")][:3]
    if near:
        listed = ", ".join(near[:-1]) + " or " + near[-1] if len(near) > 1 else near[0]
        return f"did you mean {listed}? `ok config list` shows every setting"
    return "`ok config list` shows every setting"


def default(key: str) -> Any:
    """A config key's default (for code that runs without a folder)."""
    return spec(key).default


# settings that name the environment variable holding a secret, and the names a folder's
# config file may give them (name suffixes, exact names): a folder that arrives by a pull
# must not send another of the process's variables to its LLM endpoint, nor have tokens
# checked against a variable anyone can guess (HOME). The environment, the operator's own
# settings, may name any variable.
SECRET_ENV: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "llm.api_key_env": (("_API_KEY",), ("OK_LLM_API_KEY",)),
    "llm.chat.api_key_env": (("_API_KEY",), ("OK_LLM_API_KEY",)),
    "llm.extract.api_key_env": (("_API_KEY",), ("OK_LLM_API_KEY",)),
    "embedding.api_key_env": (("_API_KEY",), ("OK_EMBEDDING_API_KEY",)),
    "search.rerank_api_key_env": (("_API_KEY",), ("OK_RERANK_API_KEY",)),
    "serve.jwt_secret_env": (("_JWT_SECRET",), ("OK_JWT_SECRET",)),
}
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def secret_name_allowed(key: str, name: str) -> bool:
    """Whether a folder's config file may name `name` as the variable of `key`."""
    suffixes, exact = SECRET_ENV[key]
    return bool(_ENV_NAME.match(name)) and (name in exact or name.endswith(suffixes))


def secret_env(v: Value, file_name: str = ".ok/config.yml") -> str | None:
    """The variable a secret's setting (`SECRET_ENV`) names; one that a folder's config file
    names outside the allow-list is refused."""
    name = v.value
    if not name or v.source != "config" or secret_name_allowed(v.setting.key, name):
        return name or None
    suffixes, exact = SECRET_ENV[v.setting.key]
    allowed = " or ".join([*(f"a name ending in {x}" for x in suffixes), *exact])
    raise BadInput(
        f"{v.setting.key} in {file_name} names {name}, and a folder may name only {allowed}",
        f"rename the variable (e.g. {exact[0]}), or name it where the process starts: "
        f"{v.setting.env}={name}",
    )


def env(name: str) -> str | None:
    """An env-only variable's value; the name must be declared as env-only."""
    s = SETTINGS.get(name)
    if s is None or not s.env_only:
        raise KeyError(f"{name!r} is not a declared env-only variable (see openkl/settings.py)")
    return os.environ.get(name)


@dataclass(frozen=True)
class Value:
    """A setting's effective value and where it came from: `default`, `config` or `env`."""

    setting: Setting
    value: Any
    source: str

    def as_dict(self) -> SettingValue:
        s = self.setting
        out: SettingValue = {
            "key": s.key,
            "value": self.value,
            "source": self.source,
            "type": s.type_name,
            "default": s.default,
            "env": s.env,
            "help": s.help,
        }
        if s.choices:
            out["choices"] = list(s.choices)
        if s.env_only:
            out["env_only"] = True
        return out


def file_value(data: Mapping[str, Any], key: str) -> Any:
    """The value `key` has in the config file's mapping; None when it is not set there."""
    node: Any = data
    for part in key.split("."):
        node = node.get(part) if isinstance(node, Mapping) else None
        if node is None:
            return None
    return node


def resolve(
    s: Setting,
    data: Mapping[str, Any],
    environ: Mapping[str, str] | None = None,
    file_name: str = ".ok/config.yml",
) -> Value:
    """`s`'s effective value: its environment variable, else the config file, else the default."""
    environ = os.environ if environ is None else environ
    raw = environ.get(s.env)
    if s.env_only:
        return Value(s, raw, "default" if raw is None else "env")
    if raw is not None:
        hint = f"set {s.env} to {s.expected}, e.g. {s.env}={s.example()}, or unset it"
        return Value(s, s.parse(raw, f"from {s.env}", hint), "env")
    found = file_value(data, s.key)
    if found is not None:
        hint = f"fix it in {file_name}, e.g. `ok config set {s.key} {s.example()}`"
        return Value(s, s.parse(found, f"in {file_name}", hint), "config")
    return Value(s, s.default, "default")


def unknown_keys(data: Mapping[str, Any], retired: bool = False) -> list[str]:
    """Dotted keys the config file sets that no setting declares (typos, old keys); with
    `retired`, also those older versions wrote."""
    out: list[str] = []

    def walk(node: Mapping[str, Any], prefix: str) -> None:
        for k, v in node.items():
            key = f"{prefix}{k}"
            if key in SETTINGS and not SETTINGS[key].env_only:
                continue
            if isinstance(v, Mapping) and any(d.startswith(key + ".") for d in SETTINGS):
                walk(v, key + ".")
            elif not (prefix == "" and key in FILE_KEYS) and (retired or key not in RETIRED):
                out.append(key)

    walk(data, "")
    return out


def put(data: dict[str, Any], key: str, value: Any) -> None:
    """Set dotted `key` in a nested mapping, making the sections it needs."""
    *parents, leaf = key.split(".")
    node = data
    for p in parents:
        if not isinstance(node.get(p), dict):
            node[p] = {}
        node = node[p]
    node[leaf] = value


def drop(data: dict[str, Any], key: str) -> bool:
    """Remove dotted `key` (and sections it leaves empty); whether it was there."""
    *parents, leaf = key.split(".")
    trail = [data]
    for p in parents:
        nxt = trail[-1].get(p)
        if not isinstance(nxt, dict):
            return False
        trail.append(nxt)
    if leaf not in trail[-1]:
        return False
    del trail[-1][leaf]
    for i in range(len(parents), 0, -1):
        if trail[i]:
            break
        del trail[i - 1][parents[i - 1]]
    return True


# -- the reference page -----------------------------------------------------------------
def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _code(value: Any) -> str:
    shown = render(value)
    return f"`{_cell(shown)}`" if shown else "unset"


def markdown(settings: Iterable[Setting] = DECLARED) -> str:
    """docs/config.md: every setting, grouped by section."""
    items = list(settings)
    out = [
        "# Settings",
        "",
        "Generated from `openkl/settings.py` by "
        "`uv run python -m openkl.settings --markdown > docs/config.md`; a test checks it "
        "is current.",
        "",
        "A setting comes from the first of: a command-line flag (where a command has one), "
        "its environment variable, `.ok/config.yml`, the default. In the file a dotted key is "
        "nested: `search.k` is `k:` under `search:`. `ok config list` shows every value and "
        "where it came from; `ok config set KEY VALUE` checks the type and writes the file; "
        "`ok config unset KEY` goes back to the default. The file never holds secrets: an "
        "LLM key is read from the variable `llm.api_key_env` names.",
        "",
        "```sh",
        "ok config list",
        "ok config get search.k",
        "ok config set search.k 5",
        "OK_SEARCH_K=3 ok search 'retry storms'   # the environment wins over the file",
        "```",
        "",
    ]
    sections: dict[str, list[Setting]] = {}
    for s in items:
        if s.env_only:
            continue
        sections.setdefault(s.key.split(".")[0] if "." in s.key else "general", []).append(s)
    for name, group in sections.items():
        out += [f"## {name}", "", "| key | type | default | environment | description |"]
        out.append("|---|---|---|---|---|")
        for s in group:
            out.append(
                f"| `{s.key}` | {_cell(s.type_name)} | {_code(s.default)} | `{s.env}` "
                f"| {_cell(s.help)} |"
            )
        out.append("")
    out += ["## environment only", "", "Read from the environment, never from the file.", ""]
    out += ["| variable | description |", "|---|---|"]
    for s in items:
        if s.env_only:
            out.append(f"| `{s.env}` | {_cell(s.help)} |")
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    if sys.argv[1:] != ["--markdown"]:
        print("usage: python -m openkl.settings --markdown > docs/config.md", file=sys.stderr)
        raise SystemExit(2)
    sys.stdout.write(markdown())
