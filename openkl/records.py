"""The records that pass between the layers, by name: what a mapping entry, a cite object,
a report, an entity or a relationship holds.

They are TypedDicts because they are also the JSON the adapters print: a record is a plain
dict at run time, and mypy checks its keys.
"""

from __future__ import annotations

# -- files, citations and reports --------------------------------------------------------


# -- the entity graph --------------------------------------------------------------------
