"""Keeping the graph in line with the files: one sync plan (`plan`) that the Kùzu graph
(`indexer`) and PostgreSQL (`pg_sync`) apply."""
