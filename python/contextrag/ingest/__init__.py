"""contextrag.ingest: real documents in. A folder, files or a list of both become documents for
``ContextRAG.build``/``add``: text, title, metadata (source, sha256, format, pages, author, date,
year, ...) and pages/sections as segments. See files.py for the rules and docs/INGEST.md for why.

    from contextrag.ingest import read_documents
    got = read_documents("reports/")          # Ingested(docs, files, skipped, ignored)
    rag = ContextRAG.build(got.docs, path="idx")
"""
from __future__ import annotations

from .base import Extracted, MissingReader, Unreadable
from .files import KINDS, Ingested, Listing, Source, as_paths, list_files, read_documents, read_source, sha256_hex
from .records import Fields, read_records

__all__ = ["read_documents", "read_source", "list_files", "read_records", "Fields", "Ingested", "Listing",
           "Source", "Extracted", "Unreadable", "MissingReader", "KINDS", "as_paths", "sha256_hex"]
