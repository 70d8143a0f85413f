"""An update's embeddings named as rows of other arrays (index/deferred.py): equal to the array they
stand for in every way they are read, written byte for byte like it, and mapped from the snapshot
once saved."""
from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from contextrag.index import store
from contextrag.index.build import member_sums
from contextrag.index.deferred import DeferredRows, settled

N_BASE = 160  # = conftest.N_BASE (test modules here are not a package)

RNG = np.random.default_rng(7)


def _parts(dtype=np.float32):
    a = RNG.standard_normal((37, 5)).astype(dtype)
    b = RNG.standard_normal((11, 5)).astype(dtype)
    c = RNG.standard_normal((4, 5)).astype(dtype)
    keep = np.array([0, 1, 2, 9, 10, 30, 36])
    parts = [(a, keep), (b, None), (c, slice(1, 3)), (a, np.array([], np.int64))]
    want = np.concatenate([a[keep], b, c[1:3]])
    return parts, want


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int16])
def test_made_equal_to_the_rows_it_names(dtype):
    parts, want = _parts(dtype)
    d = DeferredRows(parts)
    assert d.shape == want.shape and d.dtype == want.dtype and len(d) == len(want)
    assert d.nbytes == want.nbytes and d.size == want.size and d.ndim == 2
    got = np.asarray(d)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(settled(d), want)
    assert settled(want) is want
    np.testing.assert_array_equal(np.asarray(d, dtype=np.float64), want.astype(np.float64))


def test_rows_read_as_the_array_reads_them():
    parts, want = _parts()
    d = DeferredRows(parts)
    n = len(want)
    for i in (0, 6, 7, 17, n - 1, -1, -n):
        np.testing.assert_array_equal(d[i], want[i])
    for idx in ([0, 19, 3, 3, n - 1], np.array([], np.int64), [-1, -2], np.arange(n)[::-1]):
        np.testing.assert_array_equal(d[np.asarray(idx)], want[np.asarray(idx)])
    mask = RNG.random(n) < 0.5
    np.testing.assert_array_equal(d[mask], want[mask])
    np.testing.assert_array_equal(d[2, 3], want[2, 3])
    for a, b in ((0, n), (3, 9), (6, 8), (n - 2, n + 5), (5, 5), (9, 2)):
        np.testing.assert_array_equal(np.asarray(d[a:b]), want[a:b])
    np.testing.assert_array_equal(d[1:n:3], want[1:n:3])
    with pytest.raises(IndexError, match="out of range"):
        d[n]
    with pytest.raises(IndexError, match="out of range"):
        d[np.array([0, n])]


@pytest.mark.parametrize("nbytes", [1, 20, 64, 1 << 20])
def test_blocks_are_the_arrays_bytes(nbytes):
    parts, want = _parts()
    blocks = [bytes(b) for b in DeferredRows(parts).blocks(nbytes)]    # each valid until the next
    assert b"".join(blocks) == want.tobytes()
    row = want.shape[1] * want.itemsize
    assert all(len(b) <= max(row, nbytes - nbytes % row) for b in blocks)


def test_one_dimensional_rows_and_views():
    """The stored words' arrays: 1-D, their runs named as slices; a slice inside one such run is a
    view of its source (an add reads its old rows and its new ones so)."""
    src = np.arange(100, dtype=np.int32)
    new = np.arange(7, dtype=np.int32) + 1000
    runs = DeferredRows([(src, slice(0, 30)), (src, slice(42, 100)), (new, None)])
    want = np.concatenate([src[:30], src[42:], new])
    assert runs.shape == want.shape and runs.ndim == 1 and runs.nbytes == want.nbytes
    np.testing.assert_array_equal(np.asarray(runs), want)
    assert b"".join(bytes(b) for b in runs.blocks(12)) == want.tobytes()
    view = runs[30:80]
    assert isinstance(view, np.ndarray) and np.shares_memory(view, src)
    np.testing.assert_array_equal(view, want[30:80])
    tail = runs[88:]
    assert isinstance(tail, np.ndarray) and np.shares_memory(tail, new)
    across = runs[20:40]
    assert isinstance(across, DeferredRows)
    np.testing.assert_array_equal(np.asarray(across), want[20:40])
    i = np.array([0, 29, 30, 87, 88, 94])
    np.testing.assert_array_equal(runs[i], want[i])
    np.testing.assert_array_equal(np.arange(2000)[runs], want)     # a NumPy index takes it as an array
    assert runs[5] == want[5] and runs[-1] == want[-1]


def test_deferred_sources_are_flattened():
    """A delete, then an add, of one change not yet saved: the add's rows name the delete's sources."""
    parts, want = _parts()
    inner = DeferredRows(parts)
    extra = RNG.standard_normal((3, 5)).astype(np.float32)
    outer = DeferredRows([(inner, None), (extra, None)])
    assert all(not isinstance(s, DeferredRows) for s, _ in outer.parts)
    np.testing.assert_array_equal(np.asarray(outer), np.concatenate([want, extra]))
    keep = np.array([0, 4, 5, 6, 7, 12, 17])
    kept = DeferredRows([(outer, keep)])
    np.testing.assert_array_equal(np.asarray(kept), np.concatenate([want, extra])[keep])
    np.testing.assert_array_equal(np.asarray(DeferredRows([(inner, slice(2, 9))])), want[2:9])


def test_product_operands_give_the_product_of_the_array():
    a = RNG.standard_normal((500, 24)).astype(np.float32)
    keep = np.sort(RNG.choice(500, 333, replace=False))
    M = sp.random(9, 333, density=0.3, format="csr", random_state=3, dtype=np.float32)
    one = DeferredRows([(a, keep)])
    # one source: the same operations in the same order as the product of the made array
    A, B = one.product_operands(M)
    assert B is a and np.array_equal(member_sums(A, B), member_sums(M, a[keep]))
    two = DeferredRows([(a, keep[:200]), (a[::-1].copy(), slice(0, 133))])
    assert np.array_equal(member_sums(*two.product_operands(M)), member_sums(M, np.asarray(two)))
    with pytest.raises(ValueError, match="columns"):
        one.product_operands(sp.csr_matrix((2, 5), dtype=np.float32))


def test_product_operands_of_a_mapped_source(tmp_path):
    """A memory-mapped source (a delete's old embeddings): the same bits."""
    a = RNG.standard_normal((3001, 7)).astype(np.float32)
    a.tofile(tmp_path / "e.bin")
    mapped = np.memmap(tmp_path / "e.bin", dtype=np.float32, mode="r", shape=a.shape)
    keep = np.sort(RNG.choice(3001, 2500, replace=False))
    M = sp.random(5, 2500, density=0.2, format="csr", random_state=4, dtype=np.float32)
    assert np.array_equal(member_sums(*DeferredRows([(mapped, keep)]).product_operands(M)), member_sums(M, a[keep]))


def test_bad_parts_are_named():
    a = np.zeros((4, 3), np.float32)
    with pytest.raises(ValueError, match="1-D or 2-D"):
        DeferredRows([(np.zeros((2, 2, 2)), None)])
    with pytest.raises(ValueError, match="row shape and dtype"):
        DeferredRows([(a, None), (np.zeros((2, 4), np.float32), None)])
    with pytest.raises(ValueError, match="row shape and dtype"):
        DeferredRows([(a, None), (np.zeros((2, 3), np.float64), None)])
    with pytest.raises(ValueError, match="row shape and dtype"):
        DeferredRows([(np.zeros(3, np.float32), None), (a, None)])
    with pytest.raises(ValueError, match="2-D"):
        DeferredRows([(np.zeros(3, np.float32), None)]).product_operands(np.eye(3))
    for rows in ([1, 1], [2, 1], [-1, 2], [0, 4]):
        with pytest.raises(ValueError, match="ascending"):
            DeferredRows([(a, np.asarray(rows))])
    with pytest.raises(ValueError, match="step 1"):
        DeferredRows([(a, slice(0, 4, 2))])
    with pytest.raises(ValueError, match="at least one"):
        DeferredRows([])
    with pytest.raises(ValueError, match="without a copy"):
        np.asarray(DeferredRows([(a, None)]), copy=False)


@pytest.mark.parametrize("direct", ["0", "1"])
def test_written_like_the_array(tmp_path, monkeypatch, direct):
    monkeypatch.setenv("CONTEXTRAG_DIRECT_IO", direct)
    parts, want = _parts()
    other = np.arange(7, dtype=np.int64)
    e1 = store.write_safetensors(tmp_path / "a.safetensors", {"e": DeferredRows(parts), "o": other})
    e2 = store.write_safetensors(tmp_path / "b.safetensors", {"e": want, "o": other})
    assert e1 == e2
    assert (tmp_path / "a.safetensors").read_bytes() == (tmp_path / "b.safetensors").read_bytes()
    np.testing.assert_array_equal(store.map_arrays(tmp_path / "a.safetensors")["e"], want)


def _mapped(a) -> bool:
    import mmap
    base = a
    while isinstance(base, np.ndarray) and base.base is not None:
        base = base.base
    return isinstance(base, memoryview) and isinstance(base.obj, mmap.mmap)


def _words_of(ix) -> list:
    W = ix.words
    return [np.asarray(W.seq_ids[W.seq_indptr[i]:W.seq_indptr[i + 1]]) for i in range(ix.n_chunks)]


def _words_mapped(ix) -> bool:
    return all(isinstance(getattr(ix.words, f), np.memmap) for f in ("seq_ids", "bag_words", "bag_counts"))


def test_updates_map_their_embeddings_from_the_snapshot(fresh, hotpot_paragraphs):
    """An add's and a delete's embeddings and stored words are the rows they name, read from the
    snapshot they wrote (not a second copy in memory); an upsert (delete and add in one change) too."""
    from contextrag import ContextRAG
    E0 = np.array(fresh.index.chunk_embeddings)
    n0 = fresh.index.n_chunks
    words0 = _words_of(fresh.index)
    fresh.add(hotpot_paragraphs[N_BASE:N_BASE + 2])
    ix = fresh.index
    assert _mapped(ix.embeddings) and ix.embeddings.shape == (ix.n_items, E0.shape[1])
    assert _words_mapped(ix)
    words1 = _words_of(ix)
    assert all(np.array_equal(a, b) for a, b in zip(words1, words0)) and len(words1) > len(words0)
    np.testing.assert_array_equal(ix.embeddings[:n0], E0)
    E1 = np.array(ix.chunk_embeddings)
    ids = np.asarray(ix.chunk_doc_ids)
    fresh.delete(["p3"])
    assert _mapped(fresh.index.embeddings) and _words_mapped(fresh.index)
    np.testing.assert_array_equal(fresh.index.chunk_embeddings, E1[ids != "p3"])
    kept = [w for w, d in zip(words1, ids) if d != "p3"]
    assert all(np.array_equal(a, b) for a, b in zip(_words_of(fresh.index), kept))
    E2 = np.array(fresh.index.chunk_embeddings)
    doc = dict(hotpot_paragraphs[5], text=hotpot_paragraphs[5]["text"] + " It was restored in 1999.")
    fresh.add([doc], replace=True)
    ix = fresh.index
    assert _mapped(ix.embeddings) and _words_mapped(ix)
    ids2 = np.asarray(fresh.index.chunk_doc_ids)
    np.testing.assert_array_equal(ix.embeddings[:int((ids2 != "p5").sum())],
                                  E2[np.asarray([d != "p5" for d in ids[ids != "p3"]])])
    again = ContextRAG.load(fresh.path, embedder=ix.embedder)
    np.testing.assert_array_equal(again.index.embeddings, ix.embeddings)


def test_an_index_without_a_path_holds_its_embeddings(base, hotpot_paragraphs):
    from contextrag import ContextRAG
    rag = ContextRAG(base.index, None)
    E0 = np.array(base.index.chunk_embeddings)
    rag.add(hotpot_paragraphs[N_BASE:N_BASE + 1])
    assert type(rag.index.embeddings) is np.ndarray and not _mapped(rag.index.embeddings)
    assert not rag.index.words.deferred
    np.testing.assert_array_equal(rag.index.embeddings[:len(E0)], E0)
    rag.delete(["p1"])
    assert type(rag.index.embeddings) is np.ndarray and not rag.index.words.deferred
