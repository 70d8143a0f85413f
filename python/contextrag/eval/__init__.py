"""contextrag.eval."""
