"""What the query mixins of `Graph` rely on: its `query` and `copy_rows`."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any


class Atomic:
    """The one shape of a graph's `transaction()`: BEGIN, the block, COMMIT, or ROLLBACK on
    any error; a nested block joins the outer one. `commit` rolls back itself if it fails."""

    _in_tx: bool = False

    @contextlib.contextmanager
    def _atomic(
        self,
        begin: Callable[[], Any],
        rollback: Callable[[], Any],
        commit: Callable[[], None],
        after: Callable[[], None] | None = None,
    ) -> Iterator[None]:
        from ..files import crash

        if self._in_tx:
            yield
            return
        begin()
        self._in_tx = True
        try:
            yield
            crash.point("graph.before-commit")
        except BaseException:
            self._in_tx = False
            with contextlib.suppress(Exception):
                rollback()
            raise
        self._in_tx = False
        commit()
        crash.point("graph.committed")
        if after is not None:
            after()


class Queries:
    """Base of the mixins that hold the graph's named queries; `Graph` supplies `query`."""

    if TYPE_CHECKING:

        def query(
            self, cypher: str, params: dict[str, Any] | None = None
        ) -> list[dict[str, Any]]: ...

        def copy_rows(
            self,
            table: str,
            rows: dict[str, Sequence[Any]],
            types: dict[str, Any] | None = None,
            rel_from_to: tuple[str, str] | None = None,
        ) -> None: ...
