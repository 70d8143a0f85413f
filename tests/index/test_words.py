"""The chunks' stored words (index/lexical/words.py) and the BM25 index computed from their counts
(index/bm25_index.py): equal to tokenising the texts and to bm25s's own index."""
from __future__ import annotations

import json

import numpy as np
import pytest
import scipy.sparse as sp


@pytest.fixture(scope="module")
def corpus():
    from shared_data import hotpot_file
    data = json.loads(hotpot_file().read_text())
    titles, texts = [], []
    for q in data[:40]:
        for t, s in q["context"]:
            titles.append(t)
            texts.append("".join(s))
    titles[3] = ""                         # a chunk without a title
    texts[5] = "Ω Σίσυφος ΣΑΣ x I a b"       # 1-character tokens, final sigma, non-ASCII
    texts[6] = ""                          # an empty text
    return titles, texts, [q["question"] for q in data[:60]]


def test_words_equal_the_python_tokens(corpus, monkeypatch):
    from contextrag.index.lexical import tokens as lm
    from contextrag.index.lexical import words as lw
    titles, texts, _ = corpus
    W = lw.from_chunks(titles, texts)
    joined = lw.search_texts(titles, texts)
    for i in (0, 3, 5, 6, len(texts) - 1):
        seq = [W.vocab[j] for j in W.seq_ids[W.seq_indptr[i]:W.seq_indptr[i + 1]]]
        assert seq == lm.WORD.findall(joined[i].lower())
        assert W.title_len[i] == len(lm.WORD.findall(titles[i].lower()))
        u, c = np.unique(W.seq_ids[W.seq_indptr[i]:W.seq_indptr[i + 1]], return_counts=True)
        np.testing.assert_array_equal(u, W.bag_words[W.bag_indptr[i]:W.bag_indptr[i + 1]])
        np.testing.assert_array_equal(c, W.bag_counts[W.bag_indptr[i]:W.bag_indptr[i + 1]])
    assert len(set(W.vocab)) == len(W.vocab)
    # the vocabulary is in order of first occurrence
    firsts = np.unique(W.seq_ids, return_index=True)[1]
    assert (np.diff(firsts) > 0).all()
    # the pure-Python tokenisation (no native extension) gives the same arrays
    monkeypatch.setattr(lm, "native_extension", lambda: None)
    P = lw.from_chunks(titles, texts)
    assert P.vocab == W.vocab
    for k, v in W.arrays().items():
        np.testing.assert_array_equal(P.arrays()[k], v, err_msg=k)


def test_bags_in_small_blocks(corpus):
    from contextrag.index.lexical import words as lw
    titles, texts, _ = corpus
    W = lw.from_chunks(titles, texts)
    b = lw.bags(W.seq_indptr, W.seq_ids, block_tokens=50)
    for x, y in zip(b, (W.bag_indptr, W.bag_words, W.bag_counts)):
        np.testing.assert_array_equal(x, y)


def test_saved_words_load_memory_mapped(corpus, tmp_path):
    from contextrag.index.lexical import words as lw
    titles, texts, _ = corpus
    W = lw.from_chunks(titles, texts)
    lw.save(W, tmp_path / lw.FILE)
    R = lw.load(tmp_path / lw.FILE, len(texts))
    assert isinstance(R.seq_ids, np.memmap) and not R.seq_ids.flags.writeable
    assert R.vocab == W.vocab
    for k, v in W.arrays().items():
        np.testing.assert_array_equal(R.arrays()[k], v, err_msg=k)
    with pytest.raises(ValueError, match="cover"):
        lw.load(tmp_path / lw.FILE, len(texts) + 1)
    (tmp_path / "bad").write_bytes(b"\x01")
    with pytest.raises(ValueError, match="truncated"):
        lw.load(tmp_path / "bad", 0)


def _items(titles, texts):
    """Chunks, two join-like items (their sources' "title: text" joined) and a summary."""
    from contextrag.index.core import CHUNK, JOIN_ITEM, SUMMARY
    from contextrag.index.lexical import words as lw
    n = len(texts)
    srcs = [[0, 5], [7], None, [2, 3, 9]]
    kinds = [CHUNK] * n + [JOIN_ITEM, JOIN_ITEM, SUMMARY, JOIN_ITEM]
    render = (lambda s: "\n\n".join(f"{titles[c]}: {texts[c]}" if titles[c] else texts[c] for c in s))
    extra_texts = lw.search_texts(titles, texts) + [render(s) if s else "A summary: Scott Derrickson's films."
                                                    for s in srcs]
    rows = [[i] for i in range(n)] + [s or [] for s in srcs]
    ptr = np.cumsum([0] + [len(r) for r in rows])
    S = sp.csr_matrix((np.ones(ptr[-1], bool), np.concatenate(rows), ptr), shape=(len(rows), n))
    return np.asarray(kinds, np.int8), S, {n + 2: extra_texts[n + 2]}, extra_texts


def test_bm25_from_counts_equals_bm25s(corpus):
    import bm25s
    from contextrag.index.bm25_index import bm25_from_counts, chunk_counts, item_counts, word_terms
    from contextrag.index.core import bm25_tokenize, bm25_tokenize_ids
    from contextrag.index.lexical import words as lw
    titles, texts, questions = corpus
    W = lw.from_chunks(titles, texts)
    kinds, S, summaries, item_texts = _items(titles, texts)
    counts, names = item_counts(chunk_counts(W), kinds, S, summaries, word_terms(W)[1])
    mine = bm25_from_counts(counts, names)
    ref = bm25s.BM25()
    ref.index(bm25_tokenize_ids(item_texts), show_progress=False)
    assert set(mine.vocab_dict) == set(ref.vocab_dict)
    assert mine.scores["num_docs"] == ref.scores["num_docs"] == len(item_texts)
    n_checked = 0
    for q in questions + ["derrickson films"]:
        toks = bm25_tokenize([q])[0]
        if not toks:
            continue
        np.testing.assert_array_equal(mine.get_scores(toks), ref.get_scores(toks))
        n_checked += 1
    assert n_checked > 50


def test_bm25_from_counts_saves_and_loads(corpus, tmp_path):
    import bm25s
    from contextrag.index.bm25_index import bm25_from_counts, chunk_counts, word_terms
    from contextrag.index.core import bm25_tokenize
    from contextrag.index.lexical import words as lw
    titles, texts, questions = corpus
    W = lw.from_chunks(titles, texts)
    mine = bm25_from_counts(chunk_counts(W), word_terms(W)[1])
    mine.save(str(tmp_path), allow_pickle=False)
    back = bm25s.BM25.load(str(tmp_path), allow_pickle=False)
    toks = bm25_tokenize([questions[0]])[0]
    np.testing.assert_array_equal(back.get_scores(toks), mine.get_scores(toks))
