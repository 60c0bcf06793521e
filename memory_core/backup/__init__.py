"""A consistent copy of a live workspace (`chatmem backup`) and putting one back
(`chatmem restore DIR`): the files, the databases and a manifest of checksums."""
