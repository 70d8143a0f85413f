"""PDF through pypdf: the text of each page, one ``page`` segment per page (numbered from 1), the
title/author/creation date of the document information dictionary as title and metadata.

Skipped (:class:`Unreadable`): a file pypdf cannot parse, one encrypted with a password (an empty
user password, which only restricts printing or copying, is opened), and one without extractable
text (scanned pages: OCR them first)."""
from __future__ import annotations

import io
import logging

from .base import Extracted, TextBuilder, Unreadable, reader_import, scalar_metadata


def _info(reader) -> dict:
    try:
        md = reader.metadata
    except Exception:            # noqa: BLE001 - a broken info dictionary costs the metadata only
        return {}
    if not md:
        return {}
    out = {}
    for key, name in (("title", "/Title"), ("author", "/Author"), ("subject", "/Subject")):
        v = md.get(name)
        if isinstance(v, str) and v.strip():
            out[key] = v
    try:
        created = md.creation_date
    except Exception:            # noqa: BLE001 - malformed dates are common
        created = None
    if created is not None:
        out["date"] = created.date().isoformat()
    return out


def _pypdf():
    from pypdf import PdfReader
    from pypdf.errors import FileNotDecryptedError, PdfReadError
    return PdfReader, FileNotDecryptedError, PdfReadError


def read_pdf(data: bytes) -> Extracted:
    PdfReader, FileNotDecryptedError, PdfReadError = reader_import("PDF", _pypdf)

    quiet = logging.getLogger("pypdf")      # pypdf logs every repaired oddity; the skip line says enough
    level = quiet.level
    quiet.setLevel(logging.ERROR)
    try:
        try:
            reader = PdfReader(io.BytesIO(data))
        except (PdfReadError, ValueError, KeyError, TypeError, AttributeError, IndexError) as e:
            raise Unreadable(f"it is not a readable PDF ({type(e).__name__}: {e})"[:200]) from None
        if reader.is_encrypted:
            try:
                ok = reader.decrypt("")
            except Exception:    # noqa: BLE001 - an unsupported algorithm is as closed as a password
                ok = 0
            if not ok:
                raise Unreadable("it is an encrypted PDF (a password is needed)")
        b = TextBuilder()
        try:
            pages = list(reader.pages)
            for n, page in enumerate(pages, start=1):
                b.mark("page", n)
                b.block(page.extract_text() or "")
        except FileNotDecryptedError:
            raise Unreadable("it is an encrypted PDF (a password is needed)") from None
        except (PdfReadError, ValueError, KeyError, TypeError, AttributeError, IndexError) as e:
            raise Unreadable(f"its pages cannot be read ({type(e).__name__}: {e})"[:200]) from None
        if not b.n:
            raise Unreadable("it holds no extractable text (scanned pages? run OCR first)")
        info = _info(reader)
        title = info.pop("title", None)
        info["pages"] = len(pages)
        return b.result(title, scalar_metadata(info))
    finally:
        quiet.setLevel(level)
