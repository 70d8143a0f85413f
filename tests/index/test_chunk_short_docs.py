"""The chunker's one-chunk path (documents of at most ``size`` tokens) gives the chunks of the
general token-window path, empty token spans included."""
from __future__ import annotations

import re

import pytest

from contextrag.index.chunking import Chunker, Document, windows


class _Offsets:
    """A fast-tokenizer stand-in: words and punctuation, plus an empty span before each word that
    starts with a capital (as some tokenizers give for special markers) and at the ends."""
    is_fast = True

    def __call__(self, text, add_special_tokens=False, return_offsets_mapping=True, **_):
        offs = [(0, 0)]
        for m in re.finditer(r"\w+|[^\w\s]", text):
            if m.group(0)[0].isupper():
                offs.append((m.start(), m.start()))
            offs.append(m.span())
        offs.append((len(text), len(text)))
        return {"input_ids": list(range(len(offs))), "offset_mapping": offs}


def _reference(ch: Chunker, doc: Document):
    """The windows over the non-empty spans (the general path, whatever the length)."""
    toks = ch.spans(doc.text)
    if not toks:
        return [(0, doc.text.strip(), 0, len(doc.text))]
    return [(p, doc.text[toks[s][0]:toks[e - 1][1]], toks[s][0], toks[e - 1][1])
            for p, (s, e) in enumerate(windows(toks, ch.size, ch.overlap))]


@pytest.mark.parametrize("text", ["  Alpha beta, Gamma.  ", "one", "   ", "A " * 7, "x y z " * 4, "",
                                  "Lead: " + "word " * 11 + "End."])
@pytest.mark.parametrize("size,overlap", [(8, 2), (12, 3), (3, 1)])
def test_short_document_path_equals_token_windows(text, size, overlap):
    ch = Chunker(size, overlap, _Offsets())
    doc = Document("d", text, "T")
    got = [(c.position, c.text, c.start_char, c.end_char) for c in ch.split(doc)]
    assert got == _reference(ch, doc)
