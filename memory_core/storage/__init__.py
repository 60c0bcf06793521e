"""The databases and what they hold: the storage interfaces (`interfaces.py`, protocols
and the values they pass), the SQLite database (`db.py`) and PostgreSQL (`pg/`), what
their SQL does differently (`dialects.py`), the backend object that opens either
(`backends.py`), the table owners (history, audit, activations, schedules, deliveries,
journal) and the vector store (`vectors/`)."""
