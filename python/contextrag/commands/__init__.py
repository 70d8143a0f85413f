"""Subcommands of the `contextrag` CLI, one module each."""
