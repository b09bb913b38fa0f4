"""The entity graph's queries: entities, their mentions and relationships."""

from __future__ import annotations

from typing import Protocol


class EntityStore(Protocol):
    """What the rest of openkl asks of the entity graph (part of `GraphStore`)."""


class EntityQueries:
    """Named queries over Entity, MENTIONS and RELATED, mixed into `Graph`."""
