"""JSON and JSONL corpora: a JSON list of strings or objects, or one object per line.

An object's ``text_field`` is the text, ``id_field`` the id (absent: the record's position),
``title_field`` the title; its other scalar fields are its metadata. Anything malformed is a
ValueError naming the file and the record; a record with an empty text is skipped with a warning.
"""
from __future__ import annotations

import json
import warnings
from dataclasses import dataclass
from pathlib import Path

from ..textfile import TextFileWarning, decode, has_visible_text, lone_surrogate


@dataclass(frozen=True)
class Fields:
    text: str = "text"
    id: str = "id"
    title: str = "title"


def _record(obj, i, f: Fields, where):
    """One corpus record as a document dict, or None (an empty text: skipped with a warning)."""
    if isinstance(obj, str):
        doc = {"id": str(i), "text": obj}
    elif not isinstance(obj, dict):
        raise ValueError(f"{where}: record {i} must be a string or an object, got {type(obj).__name__}")
    else:
        if f.text not in obj:
            raise ValueError(f"{where}: record {i} has no field {f.text!r} (--text-field); "
                             f"fields: {sorted(obj)[:10]}")
        text = obj[f.text]
        if not isinstance(text, str):
            raise ValueError(f"{where}: record {i} field {f.text!r} must be a string, "
                             f"got {type(text).__name__}")
        did = obj.get(f.id, i)
        if isinstance(did, bool) or not isinstance(did, (str, int)) or did == "":
            raise ValueError(f"{where}: record {i} field {f.id!r} must be a non-empty string or an "
                             f"integer, got {did!r}"[:300])
        doc = {"id": str(did), "text": text}
        title = obj.get(f.title)
        if title is not None:
            if not isinstance(title, (str, int, float)) or isinstance(title, bool):
                raise ValueError(f"{where}: record {i} field {f.title!r} must be a string, "
                                 f"got {type(title).__name__}")
            doc["title"] = str(title)
        meta = {k: v for k, v in obj.items() if k not in (f.text, f.id, f.title)
                and isinstance(v, (str, int, float, bool))}
        if meta:
            doc["metadata"] = meta
    for key, value in (("text", doc["text"]), ("id", doc["id"]), ("title", doc.get("title", "")),
                       *doc.get("metadata", {}).items()):
        at = lone_surrogate(value) if isinstance(value, str) else None
        if at is None and lone_surrogate(key) is not None:
            value, at = key, lone_surrogate(key)
        if at is not None:
            raise ValueError(f"{where}: record {i} field {key!r} holds a lone surrogate "
                             f"(\\u{ord(value[at]):04x} at character {at}), which is not valid Unicode")
    if not has_visible_text(doc["text"]):
        warnings.warn(f"{where}: record {i} (id {doc['id']!r}) has an empty text; skipped", TextFileWarning)
        return None
    return doc


def unique(docs, where):
    seen: dict[str, int] = {}
    for i, d in enumerate(docs):
        if d["id"] in seen:
            raise ValueError(f"{where}: records {seen[d['id']]} and {i} share the id {d['id']!r}; "
                             "document ids must be unique")
        seen[d["id"]] = i
    return docs


def _parse_json(text, where):
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"{where} is not valid JSON ({e.msg} at line {e.lineno} column {e.colno})") from None
    except RecursionError:
        raise ValueError(f"{where} is nested too deeply to be a corpus") from None


def read_records(path, fields: Fields = Fields()) -> list[dict]:
    """The documents of a .json or .jsonl corpus file (see the module docstring)."""
    p = Path(path)
    suffix = p.suffix.lower()
    from .base import Unreadable
    from .files import read_file_bytes
    try:
        raw = read_file_bytes(p)          # a regular file, bounded: never a FIFO or a device
    except Unreadable as e:
        raise ValueError(f"corpus {p.name} cannot be read: {e}") from None
    if not raw.strip():
        raise ValueError(f"corpus {p.name} is empty")
    text = decode(raw, f"corpus {p.name}")     # the bytes already read: no second read of the file
    if text is None:
        raise ValueError(f"corpus {p.name} is not a text file (see the warning above)")
    docs = []
    if suffix == ".jsonl":
        # records end at "\n" only: U+2028, U+2029 and U+0085 are valid inside a JSON string
        for ln, line in enumerate(text.split("\n")):
            if line.strip():
                obj = _parse_json(line, f"corpus {p.name}: line {ln + 1}")
                d = _record(obj, len(docs), fields, f"{p.name} line {ln + 1}")
                if d is not None:
                    docs.append(d)
    else:
        data = _parse_json(text, f"corpus {p.name}")
        if not isinstance(data, list):
            raise ValueError(f"corpus {p.name} must hold a JSON list of strings or objects, "
                             f"got a JSON {type(data).__name__}")
        docs = [d for d in (_record(o, i, fields, p.name) for i, o in enumerate(data)) if d is not None]
    if not docs:
        raise ValueError(f"corpus {p.name} holds no documents with text")
    return unique(docs, f"corpus {p.name}")
