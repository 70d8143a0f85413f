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


def _item_counts(corpus, stem):
    """(items × terms counts, term names, item texts, questions) of the test corpus's items."""
    from contextrag.index.bm25_index import chunk_counts, item_counts, word_terms
    from contextrag.index.lexical import words as lw
    if stem:
        pytest.importorskip("Stemmer")
    titles, texts, questions = corpus
    W = lw.from_chunks(titles, texts)
    kinds, S, summaries, item_texts = _items(titles, texts)
    counts, names = item_counts(chunk_counts(W, stem), kinds, S, summaries, word_terms(W, stem)[1], stem)
    return counts, names, item_texts, questions


@pytest.mark.parametrize("stem", [None, "english"])
def test_bm25_from_counts_equals_bm25s(corpus, stem):
    import bm25s
    from contextrag.index.bm25_index import bm25_from_counts
    from contextrag.index.core import bm25_tokenize, bm25_tokenize_ids
    counts, names, item_texts, questions = _item_counts(corpus, stem)
    mine = bm25_from_counts(counts, names)
    ref = bm25s.BM25()
    ref.index(bm25_tokenize_ids(item_texts, stem), show_progress=False)
    assert set(mine.vocab_dict) == set(ref.vocab_dict)
    assert mine.scores["num_docs"] == ref.scores["num_docs"] == len(item_texts)
    n_checked = 0
    for q in questions + ["derrickson films"]:
        toks = bm25_tokenize([q], stem)[0]
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


# ---- BM25 scored at query time from stored counts (bm25_index.CountBM25) ---------------------------

def _bm25s_of(texts, stem=None):
    import bm25s
    from contextrag.index.core import bm25_tokenize_ids
    ref = bm25s.BM25()
    ref.index(bm25_tokenize_ids(texts, stem), show_progress=False)
    return ref


def _queries(questions, stem=None):
    """Tokenised queries, with a repeated token, a token no item holds, and an empty one."""
    from contextrag.index.core import bm25_tokenize
    out = [bm25_tokenize([q], stem)[0] for q in questions]
    out = [t for t in out if t]
    return out + [out[0] + out[0][:1], ["zzzqqxnotaword"], out[1] + ["zzzqqxnotaword"], []]


def _assert_scores(mine, ref, queries):
    for toks in queries:
        want = ref.get_scores(toks) if toks else np.zeros(ref.scores["num_docs"], np.float32)
        np.testing.assert_array_equal(mine.get_scores(toks), want, err_msg=str(toks))


@pytest.mark.parametrize("stem", [None, "english"])
def test_count_bm25_equals_bm25s(corpus, stem):
    from contextrag.index.bm25_index import from_counts
    counts, names, item_texts, questions = _item_counts(corpus, stem)
    texts = corpus[1]
    mine = from_counts(counts, names, len(texts))
    assert mine.n_items == len(item_texts) and mine.n_chunks == len(texts)
    _assert_scores(mine, _bm25s_of(item_texts, stem), _queries(questions, stem))


def test_count_bm25_updates_equal_a_fresh_index(corpus, tmp_path):
    """Chunks appended, then some deleted (the first, a middle run, the last), with virtual items
    rebuilt from their sources each time: every score equals bm25s over the new item texts, and the
    saved postings load (memory-mapped) to the same scores."""
    from contextrag.index import bm25_index as bi
    from contextrag.index.lexical import incremental as inc
    from contextrag.index.lexical import words as lw
    titles, texts, questions = corpus
    n0 = 70
    W = lw.from_chunks(titles[:n0], texts[:n0])
    kinds, S, summaries, _ = _items(titles[:n0], texts[:n0])
    counts, names = bi.item_counts(bi.chunk_counts(W), kinds, S, summaries, bi.word_terms(W)[1])
    bm = bi.from_counts(counts, names, n0)
    queries = _queries(questions)

    def check(bm, W, ti, tx):
        kinds, S, summaries, item_texts = _items(ti, tx)
        vc, vn = bi.virtual_counts(W, kinds, S, summaries, len(tx))
        full = bm.with_virtual(vc, vn)
        _assert_scores(full, _bm25s_of(item_texts), queries)
        return full

    W2, _, _ = inc.append_chunks(W, titles[n0:], texts[n0:])
    bm2 = bm.with_chunks_added(bi.rows_counts(W2, np.arange(n0, len(texts))), bi.word_terms(W2)[1])
    assert len(bm2.names) > len(bm.names)       # the new chunks brought new terms
    full = check(bm2, W2, titles, texts)
    keep = np.setdiff1d(np.arange(len(texts)), np.r_[0, 30:45, len(texts) - 1])
    W3 = inc.keep_chunks(W2, keep)
    bm3 = bm2.with_chunks_kept(keep)
    ti, tx = [titles[i] for i in keep], [texts[i] for i in keep]
    full3 = check(bm3, W3, ti, tx)
    assert any(np.diff(full3.c_indptr) == 0)    # terms only the deleted chunks held: empty postings
    full3.save(tmp_path)
    back = bi.load(tmp_path)
    assert isinstance(back, bi.CountBM25) and not back.c_rows.flags.owndata    # a view of the file's map
    _assert_scores(back, _bm25s_of(_items(ti, tx)[3]), queries)
    np.testing.assert_array_equal(full.get_scores(queries[0]), check(bm2, W2, titles, texts).get_scores(queries[0]))


def test_count_bm25_rejects_inconsistent_arrays(tmp_path):
    from contextrag.index import bm25_index as bi
    z = np.zeros
    with pytest.raises(ValueError, match="indptr"):
        bi.CountBM25(["a", "b"], z(2, np.int64), z(0), z(0), z(3, np.int64), z(0), z(0), z(0), 0)
    with pytest.raises(ValueError, match="length"):
        bi.CountBM25(["a"], np.array([0, 2]), z(1), z(1), z(2, np.int64), z(0), z(0), z(1), 1)
    ok = bi.CountBM25(["a"], np.array([0, 1]), z(1), np.ones(1), z(2, np.int64), z(0), z(0), np.ones(1), 1)
    ok.save(tmp_path)
    (tmp_path / bi.TERMS_FILE).write_text('{"a": 1}')
    with pytest.raises(ValueError, match="list of terms"):
        bi.load(tmp_path)


def test_count_bm25_updates_on_edge_cases():
    """Rows without a term, a term that only new rows hold, every chunk kept, one chunk kept: the
    updated postings score as a fresh index of the same counts."""
    from contextrag.index import bm25_index as bi
    C = sp.csr_matrix(np.array([[1, 0, 2], [0, 3, 0], [1, 1, 0]], float))
    bm = bi.from_counts(C, ["a", "b", "c"], 3)
    new = sp.csr_matrix(np.array([[0, 0, 0, 0], [2, 0, 0, 1]], float))
    added = bm.with_chunks_added(new, ["a", "b", "c", "d"])
    ref = bi.from_counts(sp.vstack([sp.hstack([C, sp.csr_matrix((3, 1))]), new]).tocsr(), ["a", "b", "c", "d"], 5)
    empty = bm.with_chunks_added(sp.csr_matrix((2, 3)), ["a", "b", "c"])
    ref_empty = bi.from_counts(sp.vstack([C, sp.csr_matrix((2, 3))]).tocsr(), ["a", "b", "c"], 5)
    for q in (["a"], ["d"], ["a", "c", "a"], ["b"], ["zz"]):
        np.testing.assert_array_equal(added.get_scores(q), ref.get_scores(q), err_msg=str(q))
        np.testing.assert_array_equal(empty.get_scores(q), ref_empty.get_scores(q), err_msg=str(q))
    np.testing.assert_array_equal(added.with_chunks_kept(np.arange(5)).get_scores(["a", "b"]),
                                  added.get_scores(["a", "b"]))
    one = added.with_chunks_kept(np.array([4]))
    np.testing.assert_array_equal(one.get_scores(["a", "d", "b"]),
                                  bi.from_counts(sp.csr_matrix(new[1]), ["a", "b", "c", "d"], 1)
                                  .get_scores(["a", "d", "b"]))


@pytest.mark.parametrize("dl_dtype", [np.uint16, np.uint32, np.int64])
def test_count_bm25_native_scores_equal_numpy_bit_for_bit(corpus, monkeypatch, dl_dtype):
    """The extension's fused accumulation (csrc/cpu/bm25.cpp) and the NumPy form give the same bits,
    with virtual items, a repeated token and each width of the stored lengths."""
    from contextrag.index.bm25_index import from_counts
    from contextrag.ops import _backend, native
    if native() is None or not hasattr(native(), "bm25_accumulate"):
        pytest.skip("contextrag._C is not built")
    counts, names, item_texts, questions = _item_counts(corpus, None)
    bm = from_counts(counts, names, len(corpus[1]))
    assert bm.n_items > bm.n_chunks and bm.v_rows.size      # virtual items hold terms
    idf, (dl, avg) = bm._stats()
    bm._stats_got = (idf, (bm.doc_len.astype(dl_dtype), avg))
    queries = _queries(questions)
    fast = [bm.get_scores(t) for t in queries]
    monkeypatch.setattr(_backend, "cpu_native", lambda name: None)
    for t, got in zip(queries, fast):
        want = bm.get_scores(t)
        np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32), err_msg=str(t))
    assert any(g[bm.n_chunks:].any() for g in fast)


def test_bm25_accumulate_rejects_bad_arguments():
    from contextrag.ops import native
    C = native()
    if C is None or not hasattr(C, "bm25_accumulate"):
        pytest.skip("contextrag._C is not built")
    out, dl = np.zeros(4, np.float32), np.ones(4, np.uint16)
    rows, tf = np.array([0, 3], np.int32), np.array([1, 2], np.int32)
    C.bm25_accumulate(out, rows, tf, dl, 0, 1.5, 1.0, 1.5, 0.75)
    assert out[0] > 0 and out[3] > out[0] and out[1] == 0
    with pytest.raises(ValueError, match=r"rows \+ row0 must lie in \[0, 4\)"):
        C.bm25_accumulate(out, rows, tf, dl, 1, 1.0, 1.0, 1.5, 0.75)
    with pytest.raises(ValueError, match="same length"):
        C.bm25_accumulate(out, rows, tf[:1], dl, 0, 1.0, 1.0, 1.5, 0.75)
    with pytest.raises(ValueError, match="one length per item"):
        C.bm25_accumulate(out, rows, tf, dl[:3], 0, 1.0, 1.0, 1.5, 0.75)
    with pytest.raises(TypeError, match="dl must be"):
        C.bm25_accumulate(out, rows, tf, dl.astype(np.float32), 0, 1.0, 1.0, 1.5, 0.75)
    with pytest.raises(TypeError):      # no silent copy of the scores: they are written in place
        C.bm25_accumulate(out.astype(np.float64), rows, tf, dl, 0, 1.0, 1.0, 1.5, 0.75)


def test_count_bm25_stats_are_never_read_half_set(corpus):
    """Concurrent first queries on a new index: a query that reads the BM25 statistics while another
    is computing them gets them whole (it computes them itself), never the idf without the lengths."""
    import threading

    from contextrag.index.bm25_index import from_counts
    counts, names, item_texts, questions = _item_counts(corpus, None)
    bm = from_counts(counts, names, len(corpus[1]))
    entered, proceed = threading.Event(), threading.Event()
    first = {}

    class Held(np.ndarray):              # the first thread waits inside the computation
        def max(self, *a, **k):
            if threading.current_thread().name == "first":
                entered.set()
                proceed.wait(30)
            return np.asarray(self).max(*a, **k)
    bm.doc_len = np.asarray(bm.doc_len).view(Held)
    t = threading.Thread(target=lambda: first.setdefault("got", bm._stats()), name="first")
    t.start()
    assert entered.wait(30)
    idf, norm = bm._stats()               # meanwhile, on this thread
    assert norm is not None and idf.shape == (len(names),)
    proceed.set()
    t.join(30)
    idf1, (dl1, avg1) = first["got"]
    np.testing.assert_array_equal(idf1, idf)
    assert avg1 == norm[1] and bm._stats() is not None
    assert bm.get_scores(_queries(questions)[0]).shape == (bm.n_items,)
