"""Chunk edges fall between words: a window's start and end move to the nearest word boundary within the
overlap, the windows still cover every token, none is longer than ``size``, and their count is that of
the plain token windows."""
from __future__ import annotations

import json

import numpy as np
import pytest

from contextrag.index.chunking import Chunker, Document, windows
from shared_data import data_dir


def _plain(n: int, size: int, overlap: int) -> list[tuple[int, int]]:
    step = size - overlap
    return [(s, min(s + size, n)) for s in range(0, max(n - overlap, 1), step)]


def _layout(rng, n: int, p_glued: float) -> list[tuple[int, int]]:
    """n token spans; each is glued to the one before (no character between) with probability p_glued."""
    out, pos = [], 0
    for i in range(n):
        if i and rng.random() >= p_glued:
            pos += 1
        w = int(rng.integers(1, 4))
        out.append((pos, pos + w))
        pos += w
    return out


def _boundaries(toks) -> set[int]:
    return {0, len(toks)} | {i for i in range(1, len(toks)) if toks[i][0] > toks[i - 1][1]}


@pytest.mark.parametrize("size,overlap", [(5, 0), (5, 1), (7, 3), (8, 2), (10, 8), (6, 5), (200, 40)])
@pytest.mark.parametrize("p_glued", [0.0, 0.4, 0.9, 1.0])
def test_windows_cover_every_token_and_keep_their_size_and_count(size, overlap, p_glued):
    rng = np.random.default_rng(size * 100 + overlap + int(p_glued * 10))
    for n in list(range(1, 3 * size + 3)) + [911]:
        toks = _layout(rng, n, p_glued)
        got, plain = windows(toks, size, overlap), _plain(n, size, overlap)
        assert len(got) == len(plain)
        assert got[0][0] == 0 and got[-1][1] == n
        for (s, e), (ps, pe) in zip(got, plain):
            assert ps <= s < e <= pe and e - s <= size
        for (s0, e0), (s1, e1) in zip(got, got[1:]):
            assert s0 < s1 <= e0 < e1          # no gap between windows, each adds a token
        if p_glued == 0.0:                     # every token starts a word: the plain windows
            assert got == plain


@pytest.mark.parametrize("size,overlap", [(5, 1), (7, 3), (8, 2), (200, 40)])
def test_each_edge_is_a_word_boundary_where_one_lies_within_the_overlap(size, overlap):
    rng = np.random.default_rng(7)
    for n in range(size + 1, 4 * size):
        toks = _layout(rng, n, 0.5)
        words = _boundaries(toks)
        plain, got = _plain(n, size, overlap), windows(toks, size, overlap)
        for k, ((s, e), (ps, pe)) in enumerate(zip(got, plain)):
            nxt = plain[k + 1][0] if k + 1 < len(plain) else n
            reachable = [j for j in range(ps, min(ps + overlap, nxt)) if j in words]
            assert (s in words) == bool(reachable)
            if reachable:
                assert s == reachable[0]       # the nearest boundary: the fewest tokens dropped
            if k + 1 < len(got) and any(j in words for j in range(got[k + 1][0], pe + 1)) and e != pe:
                assert e in words


def test_without_whitespace_the_edges_stay_at_token_boundaries():
    toks = [(i, i + 1) for i in range(50)]   # text without spaces (a URL, CJK): one run of 50 tokens
    assert windows(toks, 10, 3) == _plain(50, 10, 3)


def test_model_tokenizer_chunks_start_and_end_between_words(embedder):
    """News articles through MiniLM's WordPiece tokenizer: plain token windows cut inside words
    ("embedder's", "one-time", numbers); the chunks now start and end at whitespace."""
    tok = embedder.inner.tokenizer
    corpus = json.loads((data_dir() / "multihoprag_small_corpus.json").read_text())
    texts = [d["body"] for d in corpus[:40]]
    ch = Chunker(200, 40, tok)
    plain_cuts = cuts = n_chunks = 0
    for i, text in enumerate(texts):
        chunks = ch.split(Document(f"d{i}", text))
        n_chunks += len(chunks)
        for c in chunks:
            assert text[c.start_char:c.end_char] == c.text
            assert len(tok(c.text, add_special_tokens=False)["input_ids"]) <= 200 + 2   # re-tokenising may merge
            cuts += (c.start_char > 0 and not text[c.start_char - 1].isspace()) \
                + (c.end_char < len(text) and not text[c.end_char].isspace())
        spans = ch.spans(text)
        for s, e in _plain(len(spans), 200, 40):
            a, b = spans[s][0], spans[e - 1][1]
            plain_cuts += (a > 0 and not text[a - 1].isspace()) + (b < len(text) and not text[b].isspace())
    assert n_chunks > 2 * len(texts)          # long documents: many windows
    assert plain_cuts > 10                    # the token windows cut inside words
    assert cuts == 0
