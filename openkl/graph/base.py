"""What the query mixins of `Graph` rely on: its `query`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any


class Queries:
    """Base of the mixins that hold the graph's named queries; `Graph` supplies `query`."""

    if TYPE_CHECKING:

        def query(
            self, cypher: str, params: dict[str, Any] | None = None
        ) -> list[dict[str, Any]]: ...
