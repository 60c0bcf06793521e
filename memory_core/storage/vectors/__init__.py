"""Vector storage and search: the vectors' rows (SQL on either database), the backfill
that embeds what is new, one scope's matrix in memory (numpy), and the HNSW graphs of
large scopes. What imports numpy (index.py, matrix.py, graphs.py) is imported only when
an embedder is configured, and in a command only for a search of a scope with vectors
(lazy.py)."""
