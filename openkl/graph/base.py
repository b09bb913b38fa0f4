"""What the query mixins of `Graph` rely on: its `query` and `copy_rows`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any


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
