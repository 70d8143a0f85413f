"""Reading user text files safely: binary files are detected and skipped, text in another encoding
is decoded by detection (charset-normalizer) or skipped, never turned into mojibake.

:func:`read_text` returns the decoded text or None (the file was skipped); every skip and every
non-UTF-8 decoding is reported with ``warnings.warn`` (one line naming the file), which the CLI
prints as a plain ``contextrag: warning: ...`` line.
"""
from __future__ import annotations

import codecs
import os
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


def _control_share(text: str) -> float:
    sample = text[:_SNIFF]
    if not sample:
        return 0.0
    bad = sum(1 for ch in sample if (ord(ch) < 32 and ch not in "\t\n\r\f\v") or 0x7f <= ord(ch) < 0xa0
              or ch == "\ufffd")
    return bad / len(sample)


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
        text = None
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
