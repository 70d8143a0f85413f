"""contextrag.index: stages 1-4 of the paper (§4.1): chunk, embed, RQ-KMeans attributes, fuzzy
context, concept graph, optional summaries, and the on-disk store. ``core.Index`` documents the
fields queries read; ``context.register_family`` adds attribute families."""
from __future__ import annotations


def __getattr__(name):
    import importlib
    table = {"Index": "core", "ITEM_KINDS": "core", "Chunker": "chunking",
             "register_family": "context", "FamilyResult": "context", "FuzzyContext": "context",
             "ConceptGraph": "graph", "IndexFormatError": "store"}
    if name in table:
        return getattr(importlib.import_module(f"contextrag.index.{table[name]}"), name)
    raise AttributeError(f"module 'contextrag.index' has no attribute {name!r}")
