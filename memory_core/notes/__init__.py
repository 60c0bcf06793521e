"""Daily notes (`memory/YYYY-MM-DD.md`) and the raw event log: their file formats and
the service that appends a note and indexes it as it is written."""
