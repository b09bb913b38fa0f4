"""Open the folder's graph and feed it: the embedder, the one way to open the graph (a
writer's changes form one transaction), and embedding with progress.

Everything that writes the graph goes through `open_graph`; what is derived from the files
and how (chunks, entities, versions) is `indexer`'s business.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np

from ..errors import DiskFull, IndexMismatch, OkError
from ..files.folder import Folder, stack_name
from ..files.progress import progress
from ..text.embeddings import Embedder, embedder_for, remote_from
from ..text.llm import describe as llm_describe
from ..text.rerank import endpoint_url
from . import Graph
from .postgres import PgGraph, who_am_i

EMBED_BLOCK = 256


def embedder(folder: Folder) -> Embedder:
    return embedder_for(
        folder.setting("embedding.model"),
        folder.cache_dir,
        folder.setting("embedding.batch_size"),
        remote_from(folder),
    )


def inference_line(folder: Folder) -> str:
    """Which models the folder uses, in one line and without asking any of them:
    `embeddings: local all-MiniLM-L6-v2-int8 (384 dimensions); chat: none; extraction:
    local rules; rerank: off`. A setting that cannot be used is named with what is wrong."""
    try:
        parts = [f"embeddings: {embedder(folder).label}"]
    except OkError as e:
        parts = [f"embeddings: {e.message}"]
    parts.append(llm_describe(folder))
    url = folder.setting("search.rerank")
    if url:
        top, budget = folder.setting("search.rerank_top"), folder.setting("search.rerank_budget")
        parts.append(f"rerank: top {top} @ {endpoint_url(str(url))} within {budget:g}s")
    else:
        parts.append("rerank: off")
    return "; ".join(parts)


@contextlib.contextmanager
def open_graph(
    folder: Folder, write: bool = False, check: bool = True, kuzu_dir: Path | None = None
) -> Iterator[Graph]:
    """The one way to open the folder's graph. Writers must hold `folder.write_lock`.

    A writer's changes form one transaction: a command that fails or is killed half way
    leaves the graph as it was, and `ok status` sees the files it did write as not indexed.
    `kuzu_dir` points a rebuild at its new database.
    """
    if not Graph.is_resident(folder.kuzu_dir if kuzu_dir is None else kuzu_dir):
        folder.refuse_if_served()
    if write:
        room_to_write(folder)
    emb = embedder(folder)
    ident = emb.identity if write else _cheap_identity(folder, emb)
    live = kuzu_dir is None
    if kuzu_dir is None:
        kuzu_dir = folder.kuzu_dir
        if not Graph.is_resident(kuzu_dir):  # a resident one finished any swap on opening
            Graph.finish_swap(kuzu_dir, writer=write)

    def opened(check: bool = check) -> contextlib.AbstractContextManager[Graph]:
        return Graph.open(
            kuzu_dir,
            write=write,
            embedder_identity=ident,
            dim=emb.dim if write else None,
            timeout=folder.setting("lock_timeout"),
            check=check,
            buffer_pool_mb=folder.setting("graph.buffer_pool_mb"),
            recover=None if write else lambda: _replay_log(folder),
            kuzu_fts=folder.setting("graph.kuzu_fts"),
        )

    with contextlib.ExitStack() as held:
        try:
            g = held.enter_context(opened())
        except IndexMismatch:
            # another embedder than the index was made with: an index that holds nothing
            # yet is made anew for it; any other waits for `ok index --rebuild`
            if not (write and live and _made_anew_if_empty(folder, emb, opened)):
                raise
            g = held.enter_context(opened())
        with g.transaction() if write else contextlib.nullcontext():
            yield g
        if write:
            g.fit_vector_index(folder.setting("search.hnsw_min_chunks"))
    if write:
        _stamp(folder).parent.mkdir(parents=True, exist_ok=True)
        _stamp(folder).touch()


def _made_anew_if_empty(
    folder: Folder, emb: Embedder, opened: Callable[..., contextlib.AbstractContextManager[Graph]]
) -> bool:
    """Replace the live index with an empty one stamped with `emb` when it holds nothing
    (no documents, chunks, notes, entities or topics); whether it did."""
    with opened(check=False) as g:
        if any(g.counts().values()):
            return False
    target = Graph.start_rebuild(folder.kuzu_dir)
    with Graph.open(
        target,
        write=True,
        embedder_identity=emb.identity,
        dim=emb.dim,
        timeout=folder.setting("lock_timeout"),
        buffer_pool_mb=folder.setting("graph.buffer_pool_mb"),
    ):
        pass  # the schema and its stamps
    Graph.swap_in(folder.kuzu_dir)
    return True


@contextlib.contextmanager
def open_postgres(
    folder: Folder, uri: str, write: bool = False, who: str | None = None
) -> Iterator[PgGraph]:
    """The folder's stack in the PostgreSQL graph at `uri`; a writer's changes form one
    transaction, as with `open_graph`, and a writer is the stack's one writer: it waits up
    to lock_timeout for another (`who` names it to others)."""
    emb = embedder(folder)
    with (
        PgGraph.open(
            uri,
            stack=stack_name(folder),
            write=write,
            dim=emb.dim if write else None,
            embedder_identity=emb.identity if write else _cheap_identity(folder, emb),
            check=not write,  # a writer builds the stack anew (`publish`)
            who=who_am_i(who or ("ok writer" if write else "ok reader")),
            lock=folder.setting("lock_timeout") if write else None,
        ) as g,
        g.transaction() if write else contextlib.nullcontext(),
    ):
        yield g


def room_to_write(folder: Folder, need: int = 0) -> None:
    """Refuse to write the graph on a nearly full disk: it needs `graph.min_free_mb` free,
    and `need` bytes more for what the write is about to add (`GraphStore.room_needed`).

    Kùzu aborts the process or spins when a write or checkpoint runs out of space, which
    leaves no error to show and can stop a sync from finishing; a clear refusal, before
    the graph is written or between the commits of a large load, with the files already
    saved, leaves the folder for `ok sync` to catch up.
    """
    floor = folder.setting("graph.min_free_mb") * (1 << 20)
    where = folder.kuzu_dir if folder.kuzu_dir.exists() else folder.ok_dir
    try:
        free = shutil.disk_usage(where).free
    except OSError:
        return
    if free < floor + need:
        if need:
            what = (
                f"about {(floor + need) / (1 << 20):.0f} MB free for this load "
                f"({floor / (1 << 20):g} of them graph.min_free_mb)"
            )
        else:
            what = f"{floor / (1 << 20):g} MB free to write safely (graph.min_free_mb)"
        raise DiskFull(f"the disk is nearly full: the graph needs {what}", path=where)


def _stamp(folder: Folder) -> Path:
    return folder.cache_dir / "graph-written"


def files_newer_than_index(folder: Folder) -> bool:
    """A cheap hint that files changed after the graph was last written (by an editor, git
    pull …): any note or normalized doc, or a folder holding them, with a newer mtime.
    `ok status` is the exact check."""

    try:
        since = _stamp(folder).stat().st_mtime
    except FileNotFoundError:
        return False
    todo = [p for p in (folder.normalized_dir, folder.by_date_dir) if p.exists()]
    while todo:
        d = todo.pop()
        if d.stat().st_mtime > since:
            return True
        with os.scandir(d) as it:
            for e in it:
                if e.is_dir(follow_symlinks=False):
                    todo.append(Path(e.path))
                elif e.stat(follow_symlinks=False).st_mtime > since:
                    return True
    return False


def _replay_log(folder: Folder) -> bool:
    """Complete a killed writer's checkpoint by opening the graph read-write for a moment.

    Only when no one holds the writer lock; returns whether it did.
    """
    try:
        with (
            folder.write_lock("replaying the graph log", timeout=0),
            Graph.open(folder.kuzu_dir, write=True, check=False, timeout=2.0),
        ):
            return True
    except OkError:  # a writer is active (it will finish the job), or the open failed
        return False


def _cheap_identity(folder: Folder, emb: Embedder) -> str | None:
    # the default model's identity is known without loading it; others need the model,
    # and an endpoint's model its dimension (embedding.dim, remembered, or asked once)
    return emb.identity if emb.dim or emb.remote is not None else None


def embed_all(emb: Embedder, texts: list[str], what: str = "embedding") -> np.ndarray:
    """Embed with a progress bar, one model batch at a time: the bar moves as each batch
    finishes, and the cache is filled as we go."""
    if not texts:
        return np.zeros((0, emb.dim), dtype=np.float32)
    emb.ensure_dim()  # a model not loaded yet (an endpoint's) knows it once asked
    out = np.zeros((len(texts), emb.dim), dtype=np.float32)
    # shortest first across all blocks, so each model batch holds texts of similar length
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    step = max(1, min(EMBED_BLOCK, emb.batch_size))
    with progress(what, emb.missing(texts)) as advance:
        for i in range(0, len(order), step):
            idx = order[i : i + step]
            block = [texts[j] for j in idx]
            todo = emb.missing(block)
            out[idx] = emb.embed(block)
            advance(todo)
    return out
