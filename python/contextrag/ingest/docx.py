"""DOCX through python-docx: paragraphs in order, headings ("Heading N" styles) as ``section``
segments, tables as rows of cells joined by " | ", the core properties' title/author/created date."""
from __future__ import annotations

import io
import zipfile

from .base import Extracted, TextBuilder, Unreadable, reader_import, scalar_metadata


def _python_docx():
    import docx
    from docx.opc.exceptions import PackageNotFoundError
    from docx.table import Table
    from docx.text.paragraph import Paragraph
    return docx, PackageNotFoundError, Table, Paragraph


def read_docx(data: bytes) -> Extracted:
    docx, PackageNotFoundError, Table, Paragraph = reader_import("DOCX", _python_docx)

    try:
        d = docx.Document(io.BytesIO(data))
    except (PackageNotFoundError, zipfile.BadZipFile, KeyError, ValueError) as e:
        raise Unreadable(f"it is not a readable DOCX file ({type(e).__name__}: {e})"[:200]) from None
    b = TextBuilder()
    title = None
    for child in d.element.body.iterchildren():
        tag = child.tag.rsplit("}", 1)[-1]
        if tag == "p":
            p = Paragraph(child, d)
            text = p.text.strip()
            style = (p.style.name if p.style is not None else "") or ""
            if not text:
                continue
            if style == "Title" and title is None:
                title = text
            elif style.startswith("Heading"):
                b.mark("section", text)
            b.block(text)
        elif tag == "tbl":
            for i, row in enumerate(Table(child, d).rows):
                cells = [c.text.strip() for c in row.cells]
                if any(cells):
                    b.block(" | ".join(cells), tight=i > 0)
    cp = d.core_properties
    info = {"author": cp.author, "date": cp.created.date().isoformat() if cp.created else None}
    return b.result(cp.title or title, scalar_metadata(info))
