"""What every reader returns (:class:`Extracted`), the text assembler that records where pages and
sections start, and :class:`Unreadable`, the reason a file is skipped."""
from __future__ import annotations

import datetime as _dt
import re
from dataclasses import dataclass, field


class Unreadable(Exception):
    """A file that cannot be read as a document; the message is the reason, said to the user."""


class MissingReader(Unreadable):
    """A file whose format's reader cannot be imported (its optional package is missing or broken).
    Every file of that format is skipped; the folder walk warns once per format, naming the extra."""

    def __init__(self, kind: str, error: BaseException, extra: str = "docs"):
        self.kind, self.extra = kind, extra
        detail = " ".join(str(error).split())[:160]
        super().__init__(f"reading {kind} files needs the '{extra}' extra: pip install 'contextrag[{extra}]' "
                         f"({type(error).__name__}: {detail})")


def reader_import(kind: str, load, extra: str = "docs"):
    """``load()`` (a reader's imports), with any ImportError as :class:`MissingReader` for ``kind``.
    lxml, for one, raises ImportError from inside trafilatura when lxml_html_clean is absent."""
    try:
        return load()
    except ImportError as e:
        raise MissingReader(kind, e, extra) from None


@dataclass
class Extracted:
    text: str
    title: str | None = None
    metadata: dict = field(default_factory=dict)
    segments: dict = field(default_factory=dict)    # key -> [[start_char, value], ...] (index/segments.py)


class TextBuilder:
    """Blocks of text joined by blank lines; ``mark`` records that a segment (a page, a section)
    starts with the next block, at the character where that block will start."""

    def __init__(self):
        self.parts: list[str] = []
        self.n = 0
        self.segments: dict[str, list] = {}
        self._pending: list[tuple[str, object]] = []

    def mark(self, key: str, value) -> None:
        self._pending.append((key, value))

    def block(self, text: str, *, tight: bool = False) -> None:
        """Append ``text`` after a blank line (``tight``: after a line break: list items, table rows)."""
        text = text.strip()
        if not text:
            return
        if self.parts:
            sep = "\n" if tight and not self._pending else "\n\n"
            self.parts.append(sep)
            self.n += len(sep)
        for key, value in self._pending:
            segs = self.segments.setdefault(key, [])
            if segs and segs[-1][0] == self.n:
                segs[-1][1] = value          # an empty segment (a heading with nothing under it)
            else:
                segs.append([self.n, value])
        self._pending.clear()
        self.parts.append(text)
        self.n += len(text)

    def result(self, title=None, metadata=None) -> Extracted:
        segs = {}
        for key, rows in self.segments.items():
            if rows and rows[0][0] != 0:
                rows = [[0, None]] + rows
            segs[key] = rows
        return Extracted("".join(self.parts), title, dict(metadata or {}), segs)


_YEAR = re.compile(r"^\s*(\d{4})(?:\b|-)")


def scalar_metadata(d: dict) -> dict:
    """The filterable part of a metadata dict: str/int/float/bool values; dates as ISO strings,
    with ``year`` derived from a ``date`` when there is none."""
    out = {}
    for k, v in (d or {}).items():
        if not isinstance(k, str) or v is None:
            continue
        if isinstance(v, (_dt.date, _dt.datetime)):
            v = v.isoformat()
        if isinstance(v, str):
            v = " ".join(v.split())
            if not v:
                continue
        if isinstance(v, (str, int, float, bool)):
            out[k] = v
    date = out.get("date")
    if "year" not in out and isinstance(date, str):
        m = _YEAR.match(date)
        if m and 1000 <= int(m.group(1)) <= 2999:
            out["year"] = int(m.group(1))
    return out


def skipped_summary(skipped, total: int | None = None, *, shown: int = 3) -> str:
    """One line for every skipped file, ``skipped`` being (file, reason) pairs: files that share a
    reason (all the HTML files of a missing reader, say) are said together, once."""
    by_reason: dict[str, list[str]] = {}
    for name, reason in skipped:
        by_reason.setdefault(str(reason), []).append(str(name))
    parts = []
    for reason, names in by_reason.items():
        listed = ", ".join(names[:shown]) + (f" and {len(names) - shown} more" if len(names) > shown else "")
        parts.append(f"{listed}: skipped, {reason}")
    n = len(skipped)
    of = f" of {total}" if total is not None else ""
    files = "file" if (total if total is not None else n) == 1 else "files"
    return f"{n}{of} {files} unreadable — " + "; ".join(parts)
