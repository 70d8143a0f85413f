"""contextrag.llm."""
