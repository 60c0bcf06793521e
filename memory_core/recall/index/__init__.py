"""The search index: chunks of every memory file and message, BM25 per scope.

`SearchIndex` (search_index.py) is the SQLite implementation; its jobs are split by
module: schema and writes (writes.py), one search's order of reads (searching.py), search
reads (search.py) and BM25 scoring (ranking.py), a sync of files (file_sync.py), the full
rebuild (rebuild.py), reading files into chunks (files.py), the scope summaries of
`chatmem scopes` made from a rebuild's or a sync's reads (summaries.py).
"""

from memory_core.base.chunks import Appended
from memory_core.recall.index.files import prepare_file, scope_files
from memory_core.recall.index.model import Hit, PreparedFile, SyncStats
from memory_core.recall.index.ranking import (
    K1,
    B,
    CorpusStats,
    bm25_scorer,
    idf,
)
from memory_core.recall.index.search_index import SearchIndex

__all__ = [
    "K1",
    "Appended",
    "B",
    "CorpusStats",
    "Hit",
    "PreparedFile",
    "SearchIndex",
    "SyncStats",
    "bm25_scorer",
    "idf",
    "prepare_file",
    "scope_files",
]
