"""contextrag.query."""
