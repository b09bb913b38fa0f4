#!/usr/bin/env bash
# An end-to-end tour on the example documents: init, ingest, note, search, grep, cypher.
# Run from the repository root:  uv run bash examples/demo.sh
# Each command is shown as a shell line before it runs; the lines can be pasted back.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
dir="${1:-$(mktemp -d "${TMPDIR:-/tmp}/openkl-demo.XXXXXX")}"
export OK_ROOT="$dir/kb"
# bold on a terminal; plain in a log, so that it can be copied from there too
if [ -t 1 ]; then say() { printf '\n\033[1m$ %s\033[0m\n' "$1"; }; else say() { printf '\n$ %s\n' "$1"; }; fi
# show the command quoted for the shell (as Python's shlex.join), then run it
run() {
  say "$(python3 -c 'import shlex, sys; print(shlex.join(sys.argv[1:]))' "$@")"
  "$@"
}
# a pipeline is shown as written and run as shown
pipe() {
  say "$1"
  eval "$1"
}

say "$(python3 -c 'import shlex, sys; print("export OK_ROOT=" + shlex.quote(sys.argv[1]))' "$OK_ROOT")"
run ok init "$OK_ROOT"
run ok store ingest "$here/docs"
run ok mem add "Kùzu allows one writer at a time; open it per call." --tags kuzu,concurrency
run ok search "who wrote the first computer program" -k 3
run ok search "can two processes write the graph at once" -k 3 --explain
pipe "ok search 'gene editing' --json -k 1 | python3 -c 'import json, sys; h = json.load(sys.stdin)[0]; print(h[\"id\"], h[\"path\"], h[\"loc\"])'"
run ok grep -i "analytical engine"
run ok graph cypher "MATCH (d:Doc) RETURN d.title AS title ORDER BY title"
run ok status
printf '\nThe folder is at %s — plain files you can grep, edit and commit.\n' "$OK_ROOT"
