"""The package's layering, read from its source: no import cycles (counting imports inside
functions, which hide cycles rather than break them), heavy libraries imported only by the
module that wraps them, and the layers in their order."""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from pathlib import Path

import pytest
from helpers.run import REPO

PKG = REPO / "openkl"

# each heavy library is imported by one module only
OWNERS: dict[str, str | list[str]] = {
    # the graph layer, and the process it runs callers' queries in
    "kuzu": ["openkl.graph", "openkl.graph.query_worker"],
    "tantivy": "openkl.graph.keyword",
    "Stemmer": "openkl.graph.keyword",
    "psycopg": "openkl.graph.postgres",
    "pgvector": "openkl.graph.postgres",
    "onnxruntime": "openkl.text.embeddings",
    "kreuzberg": "openkl.text.normalize",
    "mcp": "openkl.mcp.tools",
    "boto3": "openkl.collect.s3",
    "botocore": "openkl.collect.s3",
}

# lower layers never import higher ones (a module may import its own layer or below); a
# module's layer is that of the longest entry naming it or a package above it, so most
# layers are a folder of openkl/
LAYERS = [
    # what every layer speaks, the folder and its files, text and models, the derived graph
    {
        "openkl.records",
        "openkl.settings",
        "openkl.errors",
        "openkl.files",
        "openkl.text",
        "openkl.graph",
    },
    # opening and feeding the graph
    {"openkl.graph.indexing"},
    # entity extraction (rules or an LLM), and the files entities are consolidated from
    # besides the documents: approved backfeed items and imported AKS bundles
    {
        "openkl.entities.lexicon",
        "openkl.entities.kinds",
        "openkl.entities.local",
        "openkl.entities.llm_extractor",
        "openkl.knowledge.aks",
        "openkl.knowledge.backfeed",
    },
    # what is derived from the files, and what reads it
    {"openkl.entities", "openkl.knowledge"},
    # keeping the graph in line with the files
    {"openkl.sync"},
    # collecting, keeping fresh, distilling, checking
    {"openkl.collect"},
    # the operations the adapters share
    {"openkl.ops"},
    # the adapters
    {"openkl.cli", "openkl.mcp", "openkl.server"},
]


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(path: Path, modules: frozenset[str] = frozenset()) -> set[str]:
    """Every module this file imports, wherever the import statement stands
    (`from pkg import mod` imports `pkg.mod`; it counts `pkg` only when a name is not a
    module of it)."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            subs = {f"{mod}.{a.name}" for a in node.names}
            out |= subs
            if not subs <= modules:
                out.add(mod)
    return out


def graph() -> dict[str, set[str]]:
    mods = {module_name(p): p for p in PKG.rglob("*.py")}
    known = frozenset(mods)
    return {
        name: {t for t in imports_of(p, known) if t in mods and t != name}
        for name, p in mods.items()
    }


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def layer_of(mod: str) -> int | None:
    best: tuple[int, int] | None = None  # (length of the entry, layer)
    for i, layer in enumerate(LAYERS):
        for m in layer:
            if (mod == m or mod.startswith(m + ".")) and (best is None or len(m) > best[0]):
                best = (len(m), i)
    return None if best is None else best[1]


def test_no_import_cycles() -> None:
    found = cycles(graph())
    assert not found, "import cycles (break them, don't hide them in functions): " + "; ".join(
        " <-> ".join(c) for c in found
    )


def test_the_cycle_finder_finds_cycles() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


@pytest.mark.parametrize("lib", sorted(OWNERS))
def test_heavy_libraries_have_one_owner(lib: str) -> None:
    users = sorted(
        module_name(p)
        for p in PKG.rglob("*.py")
        if any(m == lib or m.startswith(lib + ".") for m in imports_of(p))
    )
    owners = OWNERS[lib]
    allowed = owners if isinstance(owners, list) else [owners]
    assert users == allowed, f"{lib} is imported by {users}; only {allowed} may"


def test_every_module_has_a_layer() -> None:
    missing = sorted(m for m in graph() if m != "openkl" and layer_of(m) is None)
    assert not missing, f"add these modules to a layer in LAYERS: {missing}"


def test_lower_layers_do_not_import_higher_ones() -> None:
    wrong = defaultdict(list)
    for mod, targets in graph().items():
        mine = layer_of(mod)
        for t in targets:
            theirs = layer_of(t)
            if mine is not None and theirs is not None and theirs > mine:
                wrong[mod].append(t)
    assert not wrong, f"imports that point up the layers: {dict(wrong)}"


# -- Cypher lives in the graph layer ----------------------------------------------------------
# entity queries that move into openkl/graph/entities.py in a change of their own; this set
# is emptied when it lands
# SQLite caches beside the graph: their `execute` runs SQL on their own files
_SQLITE_NOT_THE_GRAPH = {"openkl.text.cache", "openkl.text.embeddings"}

CYPHER = re.compile(r"\b(?:MATCH|MERGE|DETACH DELETE|RETURN)\b|\bCREATE \(")


def _docs_and_help(tree: ast.AST) -> set[int]:
    """ids of the string nodes that document rather than run: docstrings and `help=` texts
    (the examples in `ok graph cypher --help` are Cypher for the user to type)."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            first = node.body[0] if node.body else None
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                out.add(id(first.value))
        elif isinstance(node, ast.keyword) and node.arg == "help":
            out.update(id(n) for n in ast.walk(node.value))
    return out


def cypher_outside_the_graph_layer(path: Path, name: str) -> list[str]:
    """Where a module runs queries itself (`.query(`, `.execute(`) or holds Cypher text."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = _docs_and_help(tree)
    found = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("query", "execute")
            and name not in _SQLITE_NOT_THE_GRAPH
        ):
            found.append(f"{name}:{node.lineno} calls .{node.func.attr}(")
        elif (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and id(node) not in skip
            and "(" in node.value
            and CYPHER.search(node.value)
        ):
            found.append(f"{name}:{node.lineno} holds Cypher {node.value[:60]!r}")
    return found


def test_no_cypher_outside_the_graph_layer() -> None:
    found = [
        hit
        for p in sorted(PKG.rglob("*.py"))
        if not module_name(p).startswith("openkl.graph")
        for hit in cypher_outside_the_graph_layer(p, module_name(p))
    ]
    assert not found, (
        "queries outside openkl/graph/ (give them a named method on a mixin of Graph, "
        "and declare it in GraphStore):\n" + "\n".join(found)
    )


def test_the_cypher_finder_finds_cypher(tmp_path: Path) -> None:
    src = tmp_path / "x.py"
    src.write_text(
        '"""MATCH (d:Doc) RETURN d in a docstring is documentation."""\n'
        "def f(g, label):\n"
        '    """Examples: MATCH (n) RETURN n."""\n'
        '    typer.Option(None, help="e.g. MATCH (d:Doc) RETURN d.title")\n'
        '    rows = g.query(f"MATCH (n:{label}) RETURN n.id AS id")\n'
        '    text = "CREATE (:Doc {id: $id})"\n'
        '    return "match (d) return d in lower case is prose", "RETURN without brackets"\n',
        encoding="utf-8",
    )
    found = cypher_outside_the_graph_layer(src, "openkl.x")
    assert sorted(h.split(" ", 1)[0] for h in found) == ["openkl.x:5", "openkl.x:5", "openkl.x:6"]


TESTS = REPO / "tests"


def imported_test_modules(path: Path, test_modules: set[str]) -> list[str]:
    """The test modules `path` imports, wherever the import statement stands, as
    `line: module`."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            names = [base] + [f"{base}.{a.name}".lstrip(".") for a in node.names]
        for name in names:
            if set(name.split(".")) & test_modules:
                found.append(f"{node.lineno}: {name}")
                break
    return found


def test_no_test_module_imports_another() -> None:
    test_modules = {p.stem for p in TESTS.rglob("test_*.py")}
    found = [
        f"{p.relative_to(REPO)}:{hit}"
        for p in sorted(TESTS.rglob("*.py"))
        for hit in imported_test_modules(p, test_modules)
    ]
    assert not found, (
        "test modules imported (move what they share into tests/helpers/, fixtures into "
        "tests/conftest.py):\n" + "\n".join(found)
    )


def test_the_test_import_finder_finds_them(tmp_path: Path) -> None:
    src = tmp_path / "x.py"
    src.write_text(
        "import test_web\n"
        "from helpers.serve import Server\n"
        "def f():\n"
        "    from test_serve import Server\n"
        "    from tests import test_mcp\n"
        "    from . import test_web as web\n"
        "    import testing, test_someone_else\n",
        encoding="utf-8",
    )
    found = imported_test_modules(src, {"test_web", "test_serve", "test_mcp"})
    assert found == ["1: test_web", "4: test_serve", "5: tests.test_mcp", "6: test_web"]


# the most lines a function may span: in the package, and in the HTTP server (whose routes
# each live in a router module, and whose app is put together, not written, in create_app)
MAX_LINES = 150
MAX_LINES_SERVER = 100
# functions over MAX_LINES still to be split
LONG: set[str] = {
    "openkl/knowledge/aks.py:export",
    "openkl/cli/cmd_serve.py:serve",
    "openkl/entities/consolidation.py:_aggregate",
}


def long_functions(path: Path, limit: int) -> list[str]:
    """The functions (and methods, nested ones too) in `path` over `limit` lines, as
    `name (lines)`."""
    return [
        f"{node.name} ({node.end_lineno - node.lineno + 1})"
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and node.end_lineno is not None
        and node.end_lineno - node.lineno + 1 > limit
    ]


def test_no_function_is_too_long() -> None:
    found = []
    for path in sorted(PKG.rglob("*.py")):
        rel = path.relative_to(REPO).as_posix()
        server = rel.startswith("openkl/server/")
        for hit in long_functions(path, MAX_LINES_SERVER if server else MAX_LINES):
            if f"{rel}:{hit.split(' ')[0]}" not in LONG:
                found.append(f"{rel}: {hit}")
    assert not found, "functions too long to read at once (split them):\n" + "\n".join(found)
    still = {n for n in LONG if not long_functions(REPO / n.split(":")[0], MAX_LINES)}
    assert not still, f"no longer too long (take them off LONG): {sorted(still)}"


def test_the_length_finder_finds_long_functions(tmp_path: Path) -> None:
    src = tmp_path / "x.py"
    body = "".join(f"    x{i} = {i}\n" for i in range(5))
    inner = body.replace("    ", "        ")
    src.write_text(f"def short():\n{body}\nclass A:\n    async def f(self):\n{inner}{inner}")
    assert long_functions(src, 6) == ["f (11)"]
