#!/usr/bin/env bash
# An end-to-end tour on the example documents: init, ingest, note, search, grep, cypher.
# Run from the repository root:  uv run bash examples/demo.sh
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
dir="${1:-$(mktemp -d "${TMPDIR:-/tmp}/openkl-demo.XXXXXX")}"
export OK_ROOT="$dir/kb"
say() { printf '\n\033[1m$ %s\033[0m\n' "$*"; }

say ok init "$OK_ROOT"
ok init "$OK_ROOT"

say ok store ingest examples/docs
ok store ingest "$here/docs"

say ok mem add "Kùzu allows one writer at a time; open it per call." --tags kuzu,concurrency
ok mem add "Kùzu allows one writer at a time; open it per call." --tags kuzu,concurrency

say ok search "who wrote the first computer program" -k 3
ok search "who wrote the first computer program" -k 3

say ok search "can two processes write the graph at once" -k 3 --explain
ok search "can two processes write the graph at once" -k 3 --explain

say "ok search 'gene editing' --json | jq-style: first hit's id, path and span"
ok search "gene editing" --json -k 1 | python3 -c \
  'import json,sys; h=json.load(sys.stdin)[0]; print(h["id"], h["path"], h["loc"])'

say ok grep -i "analytical engine"
ok grep -i "analytical engine"

say ok graph cypher "MATCH (d:Doc) RETURN d.title AS title ORDER BY title"
ok graph cypher "MATCH (d:Doc) RETURN d.title AS title ORDER BY title"

say ok status
ok status
printf '\nThe folder is at %s — plain files you can grep, edit and commit.\n' "$OK_ROOT"
