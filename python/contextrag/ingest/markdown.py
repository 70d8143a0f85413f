"""Markdown to plain text with markdown-it-py (CommonMark + tables), the way a reader sees the page.

Kept: headings (each starts a ``section`` segment and stays in the text as its own line), paragraphs,
list items ("- " lines), table rows (cells joined by " | "), code blocks verbatim, link *text*.
Dropped: images (so shield badges vanish, with the links around them), raw HTML, link URLs
(autolinks, whose text is the URL, vanish too) and the YAML front matter, whose scalar fields
become metadata (``title`` becomes the title). The title is the front matter's, else the first
level-1 heading, else None (the caller uses the file name).
"""
from __future__ import annotations

import re

from .base import Extracted, TextBuilder, reader_import, scalar_metadata

_FRONT = re.compile(r"\A(?:\ufeff)?---[ \t]*\r?\n(.*?)\r?\n(?:---|\.\.\.)[ \t]*(?:\r?\n|\Z)", re.S)
_parser = None


def _md():
    global _parser
    if _parser is None:
        def load():
            from markdown_it import MarkdownIt
            return MarkdownIt
        _parser = reader_import("Markdown", load, extra="index")("commonmark").enable("table")
    return _parser


def front_matter(text: str) -> tuple[dict, str]:
    """(fields, the text after the front matter); ({}, text) without one or when it is not YAML."""
    m = _FRONT.match(text)
    if not m:
        return {}, text
    try:
        import yaml
        data = yaml.safe_load(m.group(1))
    except ImportError:
        data = dict(line.split(":", 1) for line in m.group(1).splitlines() if ":" in line)
        data = {k.strip(): v.strip().strip("'\"") for k, v in data.items()}
    except Exception:            # noqa: BLE001 - not YAML after all: keep the text as it is
        return {}, text
    if not isinstance(data, dict):
        return {}, text
    return data, text[m.end():]


def _inline(token) -> str:
    """The visible text of an inline token: images, raw HTML and autolinked URLs dropped."""
    out: list[str] = []
    skip_link = 0
    for c in token.children or []:
        t = c.type
        if t == "link_open":
            href = c.attrGet("href") or ""
            if skip_link or c.markup in ("autolink", "linkify"):
                skip_link += 1
            else:
                out.append(("\0link", href))          # resolved at link_close
        elif t == "link_close":
            if skip_link:
                skip_link -= 1
                continue
            # a link whose text is its own URL says nothing: drop it
            j = max(i for i, x in enumerate(out) if isinstance(x, tuple))
            href = out[j][1]
            inner = "".join(x for x in out[j + 1:] if isinstance(x, str))
            del out[j:]
            if inner.strip() and inner.strip() != href:
                out.append(inner)
        elif skip_link:
            continue
        elif t in ("text", "code_inline"):
            out.append(c.content)
        elif t == "softbreak":
            out.append(" ")      # a wrapped line of one paragraph: Markdown renders it as a space
        elif t == "hardbreak":
            out.append("\n")
        # image, html_inline, em/strong/s open-close: nothing to show
    text = "".join(x for x in out if isinstance(x, str))
    return "\n".join(" ".join(line.split()) for line in text.split("\n")).strip()


def markdown_to_text(text: str) -> Extracted:
    meta, body = front_matter(text)
    tokens = _md().parse(body)
    b = TextBuilder()
    title = meta.pop("title", None)
    title = " ".join(str(title).split()) if title not in (None, "") else None
    row: list[str] = []
    in_item = 0
    pending_heading = None
    prev = None                      # "item" / "row" after a list item / table row: no blank line between
    for i, tok in enumerate(tokens):
        t = tok.type
        if t == "heading_open":
            pending_heading = tok.tag
        elif t == "inline":
            s = _inline(tok)
            if pending_heading is not None:
                if s:
                    if title is None and pending_heading == "h1":
                        title = s
                    b.mark("section", s)
                    b.block(s)
                    prev = None
            elif tokens[i - 1].type in ("th_open", "td_open"):
                row.append(s)
            elif s:
                first_in_item = in_item and tokens[i - 1].type == "paragraph_open" \
                    and tokens[i - 2].type == "list_item_open"
                b.block("- " + s if first_in_item else s, tight=bool(first_in_item) and prev == "item")
                prev = "item" if first_in_item else None
        elif t == "heading_close":
            pending_heading = None
        elif t == "list_item_open":
            in_item += 1
        elif t == "list_item_close":
            in_item -= 1
        elif t == "tr_close":
            if any(c.strip() for c in row):
                b.block(" | ".join(row), tight=prev == "row")
                prev = "row"
            row = []
        elif t in ("fence", "code_block"):
            b.block(tok.content.rstrip("\n"))
            prev = None
        # html_block, hr, blockquote/list open-close: no text of their own
    return b.result(title, scalar_metadata(meta))
