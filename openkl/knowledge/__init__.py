"""Knowledge derived from the files and read from the graph: citations, lineage, links,
drift, triggers, hygiene, conflicts, answers and context, descriptions, entity pages, AKS
bundles, backfeed and the explorer's page. Imports the layers below it, never sync,
collect, ops or the adapters."""
