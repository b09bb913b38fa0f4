"""The entity graph's queries: entities, their mentions and relationships."""

from __future__ import annotations


class EntityQueries:
    """Named queries over Entity, MENTIONS and RELATED, mixed into `Graph`."""
