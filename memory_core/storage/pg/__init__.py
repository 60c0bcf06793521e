"""The PostgreSQL backend: one database that several bot processes share.

`PgDatabase` runs the same table-owner functions as the SQLite `Database` (see
`memory_core/base/sql.py`), on worker threads with pooled psycopg connections; `migrations.py`
makes its schema. Importing this package needs the `postgres` extra (psycopg 3).
"""
