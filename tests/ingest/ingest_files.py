"""Real files written by the ingestion tests: PDF by fpdf2, an encrypted PDF by pypdf, DOCX by
python-docx, HTML and Markdown as text; and the tiny index configuration they build with."""
from __future__ import annotations

import datetime as dt
import html
import importlib.util
from pathlib import Path


def _load_hash_embedder():
    """tests/reliability/hash_embedder.py, loaded by path: putting that folder on sys.path would let
    its conftest.py shadow the one other test modules import by name."""
    path = Path(__file__).parents[1] / "reliability" / "hash_embedder.py"
    spec = importlib.util.spec_from_file_location("ingest_hash_embedder", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


HashEmbedder = _load_hash_embedder().HashEmbedder


def tiny_config():
    from contextrag import Config
    return Config(rq_sizes=(4, 2), n_join=2, n_meet=2, n_summaries=0, seed=0, chunk_tokenizer="regex",
                  chunk_tokens=60, chunk_overlap=10)


def write_pdf(path, pages, *, title=None, author=None, created=None):
    from fpdf import FPDF
    pdf = FPDF()
    if title:
        pdf.set_title(title)
    if author:
        pdf.set_author(author)
    if created:
        pdf.set_creation_date(dt.datetime(*created))
    pdf.set_font("Helvetica", size=11)
    for text in pages:
        pdf.add_page()
        if text:
            pdf.multi_cell(0, 6, text)
    pdf.output(str(path))
    return path


def encrypt_pdf(src, dst, *, user_password="secret", owner_password="owner"):
    from pypdf import PdfWriter
    w = PdfWriter(clone_from=str(src))
    w.encrypt(user_password=user_password, owner_password=owner_password)
    with open(dst, "wb") as f:
        w.write(f)
    return dst


def write_html(path, title, sections, *, date=None, author=None):
    """A page with navigation and a footer around an <article> of (heading, paragraph) sections."""
    meta = (f'<meta name="date" content="{date}">' if date else "") + \
        (f'<meta name="author" content="{html.escape(author)}">' if author else "")
    body = "".join(f"<h2>{html.escape(h)}</h2><p>{html.escape(t)}</p>" for h, t in sections)
    path.write_text(f"<!doctype html><html><head><title>{html.escape(title)}</title>{meta}</head><body>"
                    f'<nav><a href="/">Home</a> <a href="/archive">Archive</a> <a href="/login">Log in</a></nav>'
                    f"<article><h1>{html.escape(title)}</h1>{body}</article>"
                    f"<footer>Subscribe to our newsletter. All rights reserved.</footer></body></html>")
    return path


def write_markdown(path, title, sections, *, front=None):
    """A README-like page: badges under the title, sections with links, raw HTML and an image."""
    fm = ("---\n" + "".join(f"{k}: {v}\n" for k, v in front.items()) + "---\n") if front else ""
    parts = [f"{fm}# {title}\n",
             "[![CI](https://img.shields.io/github/actions/workflow/status/acme/x/ci.yml)](https://github.com/acme/x)"
             " [![PyPI](https://img.shields.io/pypi/v/x.svg)](https://pypi.org/project/x/)\n",
             '<p align="center"><img src="logo.png" width="200"></p>\n']
    for h, t in sections:
        parts.append(f"## {h}\n\n{t} See [the notes](https://example.org/notes) or <https://example.org/raw>.\n"
                     f"\n![diagram](https://example.org/diagram.png)\n")
    path.write_text("\n".join(parts))
    return path


def write_docx(path, title, sections, *, author="Ada Writer", created=(2021, 6, 1)):
    import docx
    d = docx.Document()
    d.core_properties.title = title
    d.core_properties.author = author
    d.core_properties.created = dt.datetime(*created)
    d.add_heading(title, 0)
    for h, t in sections:
        d.add_heading(h, 1)
        d.add_paragraph(t)
    table = d.add_table(rows=2, cols=2)
    for (r, c), v in {(0, 0): "item", (0, 1): "count", (1, 0): "anvils", (1, 1): "12"}.items():
        table.cell(r, c).text = v
    d.save(str(path))
    return path
