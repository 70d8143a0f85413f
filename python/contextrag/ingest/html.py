"""HTML through trafilatura: the main text of the page (navigation, footers and ads dropped), kept as
Markdown so its headings become ``section`` segments (read back by ingest/markdown.py), plus the
title, author and date trafilatura finds. A page trafilatura finds no main text in falls back to
all of its visible text."""
from __future__ import annotations

import logging

from .base import Extracted, MissingReader, Unreadable, reader_import, scalar_metadata
from .markdown import markdown_to_text


def _trafilatura():
    import markdown_it  # noqa: F401 - the main text is read back by the Markdown reader
    import trafilatura
    return trafilatura


def read_html(data: bytes) -> Extracted:
    trafilatura = reader_import("HTML", _trafilatura)

    quiet = logging.getLogger("trafilatura")
    level = quiet.level
    quiet.setLevel(logging.CRITICAL)
    try:
        try:
            md = trafilatura.extract(data, output_format="markdown", include_links=False,
                                     include_images=False, include_tables=True, include_formatting=True,
                                     include_comments=False, favor_recall=True)
            meta = trafilatura.extract_metadata(data, extensive=False)
        except ImportError as e:  # a module trafilatura imports on first use (lxml's cleaner)
            raise MissingReader("HTML", e) from None
        except Exception as e:   # noqa: BLE001 - lxml raises many types for broken markup
            raise Unreadable(f"it is not readable HTML ({type(e).__name__}: {e})"[:200]) from None
        if not (md and md.strip()):
            md = trafilatura.html2txt(data) or ""
    finally:
        quiet.setLevel(level)
    ex = markdown_to_text(md)
    info = {}
    if meta is not None:
        m = meta.as_dict()
        info = {k: m.get(k) for k in ("author", "date", "sitename", "url") if m.get(k)}
        title = m.get("title")
        if title:
            ex.title = title
    ex.metadata = scalar_metadata({**ex.metadata, **info})
    return ex
