"""Reading user text files safely: binary files are detected and skipped, text in another encoding
is decoded by detection (charset-normalizer) or skipped, never turned into mojibake.

:func:`read_text` returns the decoded text or None (the file was skipped); every skip and every
non-UTF-8 decoding is reported with ``warnings.warn`` (one line naming the file), which the CLI
prints as a plain ``contextrag: warning: ...`` line.
"""
from __future__ import annotations

import codecs
import os
import re
import warnings
from pathlib import Path

# Signatures of common binary formats that may carry a text suffix by mistake.
_MAGIC = (b"\x89PNG", b"GIF8", b"\xff\xd8\xff", b"%PDF", b"PK\x03\x04", b"\x1f\x8b", b"BZh", b"\xfd7zXZ",
          b"7z\xbc\xaf", b"\x7fELF", b"MZ", b"RIFF", b"OggS", b"fLaC", b"ID3", b"SQLite format 3")
_BOMS = ((codecs.BOM_UTF32_LE, "utf-32"), (codecs.BOM_UTF32_BE, "utf-32"), (codecs.BOM_UTF8, "utf-8-sig"),
         (codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16"))
_SNIFF = 8192
_MAX_CONTROL = 0.05   # share of control characters (not tab/newline/CR/FF) above which a text is binary


class TextFileWarning(UserWarning):
    """A corpus file was skipped or decoded from a non-UTF-8 encoding."""


_CONTROL = re.compile(r"[\x00-\x08\x0e-\x1f\x7f-\x9f\ufffd]")
# format characters that draw nothing: a text of only these (and whitespace) holds no words
_INVISIBLE = re.compile(r"[\s\u00ad\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\u206a-\u206f\ufeff]+")


_NON_ASCII = re.compile(r"[^\x00-\x7f]")


def _control_share(text: str) -> float:
    """The share of control characters over the whole text (binary data may start after 8 KiB)."""
    if not text:
        return 0.0
    return len(_CONTROL.findall(text)) / len(text)


def has_visible_text(text: str) -> bool:
    """True when ``text`` holds something besides whitespace and zero-width/format characters."""
    return bool(_INVISIBLE.sub("", text))


_SURROGATE = re.compile(r"[\ud800-\udfff]")


def lone_surrogate(text: str) -> int | None:
    """The position of the first lone surrogate in ``text`` (JSON's "\\ud800" escape gives one; no
    UTF-8 encoder takes it), or None."""
    m = _SURROGATE.search(text)
    return None if m is None else m.start()


def shown_name(name: str) -> str:
    """``name`` safe to print: a file name that is not UTF-8 reaches Python as lone surrogates
    (os.fsdecode), which no terminal or JSON encoder takes; those bytes are shown as \\xNN."""
    try:
        name.encode("utf-8")
        return name
    except UnicodeEncodeError:
        return os.fsencode(name).decode("utf-8", "backslashreplace")


def _mostly_utf8(data: bytes) -> str | None:
    """``data`` decoded as UTF-8 with its invalid bytes replaced, when that is what it mostly is: a
    UTF-8 text with a few stray bytes (a cut multi-byte sequence, one Latin-1 character pasted in)
    would otherwise go to detection, which reads the whole text in a legacy code page (mojibake). A
    legacy-encoded text rarely forms valid multi-byte sequences, so it still goes to detection."""
    text = data.decode("utf-8", "replace")
    bad = text.count("\ufffd")
    good = len(_NON_ASCII.findall(text)) - bad
    return text if good >= 1 and bad * 4 <= good else None


# Short texts often decode cleanly in several code pages (charset-normalizer then scores them equal);
# among the cleanest candidates the most widely used legacy encoding of each script wins.
_PREFERRED = ("cp1252", "latin_1", "iso8859_15", "cp1251", "koi8_r", "cp1250", "iso8859_2", "cp1253",
              "cp1254", "cp1255", "cp1256", "cp1257", "shift_jis", "cp932", "euc_jp", "gb18030", "gbk",
              "big5", "euc_kr", "cp949", "tis_620")
_MAX_CHAOS = 0.2      # charset-normalizer's mess ratio above which no decoding is trusted


def _best_match(matches):
    cands = [m for m in matches if m.encoding and m.chaos <= _MAX_CHAOS]
    if not cands:
        return None
    low = min(m.chaos for m in cands)
    tied = [m for m in cands if m.chaos <= low + 0.01]
    rank = {e: i for i, e in enumerate(_PREFERRED)}
    return min(tied, key=lambda m: (rank.get(m.encoding, len(rank)), -m.coherence))


def looks_binary(data: bytes) -> bool:
    """True for a known binary signature or a NUL byte in the first 8 KiB (BOM-marked UTF-16/32 aside)."""
    if any(data.startswith(b) for b, _ in _BOMS):
        return False
    return data.startswith(_MAGIC) or b"\x00" in data[:_SNIFF]


def sniff(data: bytes) -> tuple[str | None, str]:
    """(text, note) for ``data``: (None, why it was skipped), or (text, "") / (text, "not UTF-8; decoded
    as X"). Warns about nothing: :func:`decode` and the ingest readers say it their way."""
    if looks_binary(data):
        return None, "skipped, it is a binary file"
    for bom, enc in _BOMS:
        if data.startswith(bom):
            try:
                return data.decode(enc), ""
            except UnicodeDecodeError:
                break
    note = ""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = _mostly_utf8(data)
        if text is not None:
            note = f"not valid UTF-8; {text.count(chr(0xfffd))} invalid byte(s) replaced with U+FFFD"
    if text is None:
        try:
            from charset_normalizer import from_bytes
        except ImportError:
            return None, ("skipped, it is not UTF-8 and charset-normalizer is not installed "
                          "(pip install 'contextrag[index]')")
        best = _best_match(from_bytes(data))
        if best is None:
            return None, "skipped, it is not UTF-8 and its encoding cannot be detected"
        text = str(best)
        note = f"not UTF-8; decoded as {best.encoding}"
    if _control_share(text) > _MAX_CONTROL:
        return None, "skipped, it holds binary data (control characters)"
    if "\x00" in text:            # a few NULs past the first 8 KiB: dropped, as no text holds them
        nuls = text.count("\x00")
        text = text.replace("\x00", "")
        note = "; ".join(filter(None, (note, f"{nuls} NUL character(s) removed")))
    return text, note


def decode(data: bytes, what: str) -> str | None:
    """``data`` as text, or None with a warning (binary, or an encoding that cannot be told)."""
    text, note = sniff(data)
    if note:
        warnings.warn(f"{what}: {note}", TextFileWarning, stacklevel=3)
    return text


def read_text(path: str | os.PathLike, what: str | None = None) -> str | None:
    """The text of the file at ``path`` (see :func:`decode`); OSError for an unreadable file."""
    p = Path(path)
    return decode(p.read_bytes(), what or str(p))
