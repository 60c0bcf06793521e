"""What `chatmem scopes` and `stats` show of every scope, answered from the index's
summaries (`storage/scope_summaries.py`): a scope's files are read again only when
their stamp changed since its summary was made."""

from memory_core.scope_listing.figures import ScopeFigures
from memory_core.scope_listing.listing import scope_figures

__all__ = ["ScopeFigures", "scope_figures"]
