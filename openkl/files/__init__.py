"""The folder and its files: the folder on disk and its lock, note and mapping files, ids,
the event log, crash points, `--where` filters, `ok grep`, and the process plumbing a routed
command needs (its socket's place, per-thread streams, progress). Imports only the package
root (settings, errors, records) and its own modules."""
