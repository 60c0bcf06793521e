"""Vector storage and search: the vectors' rows (SQL on either database), the backfill
that embeds what is new, one scope's matrix in memory (numpy), and the HNSW graphs of
large scopes. Imported only when an embedder is configured."""
