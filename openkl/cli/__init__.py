"""The `ok` command line: parses, calls the library, renders. No logic of its own."""
