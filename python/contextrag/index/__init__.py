"""contextrag.index."""
