"""Where a chunk sits in its document: pages of a PDF, sections of a Markdown/HTML/DOCX file.

A document may carry ``segments``: ``{key: [[start_char, value], ...]}`` with the starts ascending
from 0, each segment running to the next start (the last to the end of the text). Readers record a
``"page"`` segment per PDF page and a ``"section"`` segment per heading (value None before the first
heading). Chunking cuts token windows over the whole text, ignoring segments (a chunk may cross a
page break or a heading), and a chunk's location is derived from its character span:

* ``page`` is a range key: the chunk gets ``page`` (the page of its first character) and
  ``page_end`` (the page of its last);
* any other key (``section``) gets the value of the segment holding most of the chunk's characters
  (the earlier one on a tie), so a window that starts with the tail of one section and then covers
  the next heading is filed under that next section; and the plural key (``sections``) lists every
  segment value the chunk touches, in order.

The location is merged into ``Hit.metadata`` and is what a ``page``/``section`` filter tests: a page
filter matches a chunk whose pages ``page``..``page_end`` include a matching page, a section filter
one whose ``sections`` include a matching section (contextrag.query.filters).
"""
from __future__ import annotations

from bisect import bisect_right

RANGE_KEYS = ("page",)
LOCATION_KEYS = frozenset({"page", "page_end", "section", "sections"})
_SCALARS = (str, int, float, bool, type(None))


def check_segments(segments, n_chars: int, where: str) -> dict:
    """``segments`` validated (a dict of ascending [start, scalar] lists inside the text); {} for None."""
    if segments is None:
        return {}
    if not isinstance(segments, dict):
        raise TypeError(f"{where} must be a dict of key -> [[start_char, value], ...], "
                        f"got {type(segments).__name__}")
    out = {}
    for key, segs in segments.items():
        if not isinstance(key, str) or not isinstance(segs, (list, tuple)):
            raise TypeError(f"{where}[{key!r}] must be a list of [start_char, value] pairs")
        prev = -1
        rows = []
        for s in segs:
            if not (isinstance(s, (list, tuple)) and len(s) == 2 and isinstance(s[0], int)
                    and not isinstance(s[0], bool) and isinstance(s[1], _SCALARS)):
                raise TypeError(f"{where}[{key!r}]: each segment must be [int start_char, scalar value], "
                                f"got {s!r}"[:300])
            if not prev < s[0] <= n_chars and not (prev == -1 and s[0] == 0):
                raise ValueError(f"{where}[{key!r}]: starts must ascend inside the text (0..{n_chars}), "
                                 f"got {s[0]} after {prev}")
            prev = s[0]
            rows.append([int(s[0]), s[1]])
        if rows:
            if rows[0][0] != 0:
                rows.insert(0, [0, None])
            out[key] = rows
    return out


def locate(segments: dict | None, start: int, end: int) -> dict:
    """The location of the characters [start, end) (see the module docstring); {} without segments."""
    out: dict = {}
    for key, segs in (segments or {}).items():
        if not segs:
            continue
        starts = [s for s, _ in segs]
        i = max(bisect_right(starts, start) - 1, 0)
        if key in RANGE_KEYS:
            j = max(bisect_right(starts, max(start, end - 1)) - 1, 0)
            if segs[i][1] is not None:
                out[key], out[f"{key}_end"] = segs[i][1], segs[j][1]
            continue
        best, best_len, touched = None, -1, []
        for k in range(i, len(segs)):
            a = max(segs[k][0], start)
            if a >= end and k > i:
                break
            b = min(segs[k + 1][0] if k + 1 < len(segs) else end, end)
            if b - a > best_len:
                best, best_len = segs[k][1], b - a
            if segs[k][1] is not None and (b > a or k == i) and segs[k][1] not in touched:
                touched.append(segs[k][1])
        if best is not None:
            out[key] = best
        if touched:
            out[f"{key}s"] = touched
    return out
