"""Entities and their relationships, found in the documents and notes.

- `local`: the rule-based extractor (the default; no network, no model);
- `llm`: extraction by an OpenAI-compatible model (`entities.extractor: llm`);
- `consolidation`: extraction results stored per chunk and note, and consolidated into
  entities and relationships;
- `queries`: reading the entity graph.

Import the submodule you need; this package itself holds nothing.
"""
