"""A load maps what the save stored and rebuilds nothing: the string columns, the concept nodes'
extents and the spreading incidence; an index in the previous format (SQLite rows, nothing
prepared) still loads, and queries give the same hits either way."""
from __future__ import annotations

import json
import sqlite3

import numpy as np
import pytest

from contextrag import ContextRAG
from contextrag.index import columns, prepared, store
from contextrag.index.store import IndexFormatError
from threads import wait_for_threads

N_BASE = 160  # = conftest.N_BASE (test modules here are not a package)


# ---- the string columns ----------------------------------------------------------------------

@pytest.mark.parametrize("values", [[], [""], ["a", "", "ü€𝄞", "x y"], ["has\x00nul", "b"], ["t", None]])
def test_columns_round_trip(values):
    raw, enc = columns.encode(values)
    assert enc == ("nul" if all(type(v) is str and "\x00" not in v for v in values) else "json")
    assert columns.decode(raw, enc, len(values)) == values
    if values:        # (no strings and one empty string are one byte string: the count tells them apart)
        with pytest.raises(ValueError, match="expected"):
            columns.decode(raw, enc, len(values) + 1)


def test_lazy_strings_read_like_a_list():
    texts = ["alpha", "", "ünïcode 𝄞", "a\x00b", "last"]
    buf, off = columns.encode_texts(texts)
    s = columns.LazyStrings(buf, off, tail=["virtual"])
    ref = texts + ["virtual"]
    assert len(s) == len(ref) and list(s) == ref and s == ref and ref == s
    assert s[2] == ref[2] and s[-1] == "virtual" and s[-2] == "last" and s[1:4] == ref[1:4]
    with pytest.raises(IndexError):
        s[len(ref)]
    t = s
    t += ["more"]                       # a new one: the first is left as it was
    assert isinstance(t, columns.LazyStrings) and t == ref + ["more"] and len(s) == len(ref)
    assert list(t.take([0, 2, 4, 6])) == [ref[0], ref[2], ref[4], "more"]
    assert t.take([]) == [] and t.take([5]) == ["virtual"]
    b2, o2 = t.encoded()                # the stored bytes as they are, the tail encoded
    assert list(columns.LazyStrings(b2, o2)) == ref + ["more"]
    assert ["x"] + s == ["x"] + ref
    import copy
    import pickle
    assert copy.deepcopy(s) is s and pickle.loads(pickle.dumps(s)) == ref
    with pytest.raises(ValueError, match="offsets"):
        columns.LazyStrings(buf, off[:-1])


# ---- a load rebuilds nothing -------------------------------------------------------------------

def _count_calls(monkeypatch):
    """Counters on what prepare() derives when nothing is stored: the nodes' extents and the
    spreading incidence (ops.SpreadIncidence validates and transposes in its constructor)."""
    from contextrag.index.graph import ConceptGraph
    from contextrag.ops import spread as ops_spread
    calls = {"extents": 0, "incidence": 0}
    real_ext, real_fill = ConceptGraph.extents, ops_spread.SpreadIncidence._fill

    def ext(self, *a, **k):
        calls["extents"] += 1
        return real_ext(self, *a, **k)

    def fill(self, *a, **k):       # both constructors (from I, from I and its transpose) fill through it
        calls["incidence"] += 1
        return real_fill(self, *a, **k)
    monkeypatch.setattr(ConceptGraph, "extents", ext)
    monkeypatch.setattr(ops_spread.SpreadIncidence, "_fill", fill)
    return calls


def _questions(rag, n=6):
    return [" ".join(rag.index.chunk_texts[i].split()[:8]) for i in range(0, 6 * n, 6)]


def _hits(rag, qs):
    return [[(h.id, round(h.score, 5)) for h in rag.retrieve(q, k=8)] for q in qs]


def test_load_maps_prepared_state_and_rebuilds_nothing(fresh, embedder, monkeypatch):
    path = fresh.path
    snap = store.snapshot_dir(path)
    m = store.read_manifest(snap)
    assert m["format_version"] == store.FORMAT_VERSION == 4
    assert m["prepared"]["extents"] and m["prepared"]["spread_families"]
    assert {columns.FILE, prepared.FILE} <= set(m["files"])
    con = sqlite3.connect(snap / store.META)       # no row per chunk or document any more
    assert con.execute("SELECT count(*) FROM chunks").fetchone()[0] == 0
    assert con.execute("SELECT count(*) FROM docs").fetchone()[0] == 0
    con.close()
    qs = _questions(fresh)
    want = _hits(ContextRAG.load(path, embedder=embedder), qs)      # (this one may derive nothing either)
    calls = _count_calls(monkeypatch)
    rag = ContextRAG.load(path, embedder=embedder)                  # load + prepare()
    assert isinstance(rag.index.chunk_texts, columns.LazyStrings)
    assert _hits(rag, qs) == want
    assert calls == {"extents": 0, "incidence": 0}
    _same_as_rebuilt(rag.index)          # what was stored is what a rebuild gives
    # the term family by columns is its block of the union's transpose: stored once, loaded as views
    assert m["prepared"]["csc_in_spread"] == ["term"]
    assert "csc.term.data" not in store.map_arrays(snap / prepared.FILE)
    parts = prepared.stored_spread(rag.index, prepared.config_key(rag.index.config))
    assert np.shares_memory(parts["term_csc"].data, parts["G"].t_data)
    assert np.shares_memory(parts["term_csc"].indices, parts["G"].t_indices)


def _same_as_rebuilt(ix):
    np.testing.assert_array_equal(ix.node_extents(), ix.graph.extents(ix.context.dense()))
    key = prepared.config_key(ix.config)
    got = prepared.stored_spread(ix, key)
    assert got is not None
    want = prepared.spread_parts(ix.lexical, key, ix.n_items, ix.chunk_doc_ids)
    assert set(want) == {"G", "own", "title_csc", "term_csc"}
    for part in ("G", "own"):
        for k, v in want[part].to_arrays().items():
            np.testing.assert_array_equal(got[part].to_arrays()[k], v, err_msg=f"{part}.{k}")
    for part in ("title_csc", "term_csc"):
        assert got[part].shape == want[part].shape and (got[part] != want[part]).nnz == 0, part


def test_families_by_columns_stored_either_way_load_the_same(fresh, embedder):
    """A snapshot that stores the term family by columns (as before it was kept as views of the
    union's transpose) attaches to the same parts; a family with a weight below 1 is never a view."""
    snap = store.snapshot_dir(fresh.path)
    meta = dict(store.read_manifest(snap)["prepared"])
    a = store.map_arrays(snap / prepared.FILE)
    ix = ContextRAG.load(fresh.path, prepare=False, embedder=embedder).index
    key = prepared.config_key(ix.config)
    C = ix.lexical.families["term"].incidence.tocsc()
    old = {**a, **{f"csc.term.{k}": v for k, v in prepared._csc_arrays(C).items()}}
    prepared.attach(ix, old, {k: v for k, v in meta.items() if k != "csc_in_spread"})
    got = prepared.stored_spread(ix, key)["term_csc"]
    assert not np.shares_memory(got.data, a["spread.t_data"]) and (got != C).nnz == 0
    prepared.attach(ix, a, meta)
    view = prepared.stored_spread(ix, key)["term_csc"]
    assert np.shares_memory(view.data, a["spread.t_data"]) and (view != C).nnz == 0
    np.testing.assert_array_equal(view.indices, C.indices)
    np.testing.assert_array_equal(view.indptr, C.indptr)
    half = tuple((n, 0.5 if n == "term" else w) for n, w in key)
    parts = prepared.spread_parts(ix.lexical, half, ix.n_items, ix.chunk_doc_ids)
    assert prepared._views_of_transpose(parts, ix.lexical, half) == []
    parts = prepared.spread_parts(ix.lexical, key, ix.n_items, ix.chunk_doc_ids)
    parts["G"] = parts["G"].in_degree_order()
    assert prepared._views_of_transpose(parts, ix.lexical, key) == ["term"]


def test_spreading_parts_from_the_families_by_columns_equal_the_transposed(base):
    """The union's transpose and the own pages assembled from the families by columns are what
    transposing the union (and the own-page entries) gives, entry for entry and in the same order;
    so are the extents of an all-seed graph taken as the context's columns."""
    from contextrag import ops
    from contextrag.index.lexical.families import LexicalContext
    from contextrag.index.lexical.nodes import doc_codes
    ix = base.index
    key = prepared.config_key(ix.config)
    assert {n for n, _ in key} == {"title", "term"}
    for weights in (key, tuple((n, w * 0.37) for n, w in key)):      # scaled families too
        parts = prepared.spread_parts(ix.lexical, weights, ix.n_items, ix.chunk_doc_ids)
        I = LexicalContext({n: ix.lexical.families[n] for n, _ in weights}).incidence(dict(weights)).tocsr()
        I.resize((ix.n_items, I.shape[1]))
        doc = np.concatenate([doc_codes(ix.chunk_doc_ids), -1 - np.arange(ix.n_items - ix.n_chunks)])
        G = ops.SpreadIncidence(I, doc)
        own = prepared.own_pages(ix.lexical, G)              # transposed (no columns given)
        for name in ("title", "term"):        # the families by columns, untouched by the in-place ordering
            C = ix.lexical.families[name].incidence.tocsc()
            assert (parts[f"{name}_csc"] != C).nnz == 0 and np.array_equal(parts[f"{name}_csc"].indices, C.indices)
        for name, want, got in (("G", G, parts["G"]), ("own", own, parts["own"])):
            w, g = want.to_arrays(), got.to_arrays()
            assert set(w) == set(g)
            for k in w:
                np.testing.assert_array_equal(g[k], w[k], err_msg=f"{name}.{k}")
    D = ix.context.dense()
    g = ix.graph
    assert (g.kind == 0).any() and (g.kind != 0).any()     # seeds one by one against the mixed path
    np.testing.assert_array_equal(g.extents(D), np.stack([g.extents(D, [v])[0] for v in range(g.n_nodes)]))


def test_an_update_stores_the_state_of_the_changed_index(fresh, embedder, hotpot_paragraphs):
    """add and delete change the extents and the incidence: what is stored after each is the new
    index's, never the old one's (the old one, kept in memory, would be stale)."""
    fresh.retrieve("warm the query state", k=3)
    fresh.add(hotpot_paragraphs[N_BASE:N_BASE + 3])
    _same_as_rebuilt(fresh.index)
    _same_as_rebuilt(ContextRAG.load(fresh.path, embedder=embedder, prepare=False).index)
    fresh.delete(["p2", hotpot_paragraphs[N_BASE + 1]["id"]])
    _same_as_rebuilt(fresh.index)
    again = ContextRAG.load(fresh.path, embedder=embedder)
    _same_as_rebuilt(again.index)
    qs = _questions(again)
    assert _hits(again, qs) == _hits(fresh, qs)


def _write_previous_format(path) -> None:
    """Rewrite the index at ``path`` as format 2 wrote it: every document and chunk a SQLite row, no
    columns or prepared arrays, sha256 file checksums, format_version 2."""
    snap = store.snapshot_dir(path)
    ix = ContextRAG.load(path, prepare=False, embedder=object.__new__(_NoEmbedder)).index
    con = sqlite3.connect(snap / store.META)
    con.executemany("INSERT INTO docs VALUES (?,?,?,?)",
                    [(i, d, v["title"], json.dumps(v["metadata"])) for i, (d, v) in enumerate(ix.docs.items())])
    con.executemany("INSERT INTO chunks VALUES (?,?,?,?,?)",
                    zip(range(ix.n_chunks), ix.chunk_ids, ix.chunk_doc_ids, ix.chunk_titles, list(ix.chunk_texts)))
    con.commit()
    con.close()
    m = json.loads((snap / store.MANIFEST).read_text())
    for f in (columns.FILE, prepared.FILE):
        (snap / f).unlink()
        del m["files"][f]
    del m["columns"], m["prepared"]
    m["files"] = {rel: {"sha256": store._sha256(snap / rel), "bytes": (snap / rel).stat().st_size}
                  for rel in m["files"]}
    m["format_version"] = 2
    m[store._SELF_SUM] = store._ZERO_SUM.decode()
    body = json.dumps(m, indent=2).encode()
    import hashlib
    (snap / store.MANIFEST).write_bytes(store._with_self_sum(body, hashlib.sha256(body).hexdigest().encode()))


class _NoEmbedder:
    def embed_passages(self, texts):
        raise AssertionError("not used")

    embed_queries = embed_passages


def test_previous_format_still_loads_and_answers_the_same(fresh, embedder, monkeypatch):
    qs = _questions(fresh)
    want = _hits(ContextRAG.load(fresh.path, embedder=embedder), qs)
    _write_previous_format(fresh.path)
    assert store.read_manifest(store.snapshot_dir(fresh.path))["format_version"] == 2
    calls = _count_calls(monkeypatch)
    old = ContextRAG.load(fresh.path, embedder=embedder)
    assert isinstance(old.index.chunk_texts, list)
    assert _hits(old, qs) == want
    assert calls["extents"] >= 1 and calls["incidence"] >= 1      # derived, as before: nothing was stored
    old.save()                                                     # migrates it to the current format
    m = store.read_manifest(store.snapshot_dir(fresh.path))
    assert m["format_version"] == store.FORMAT_VERSION and m["prepared"]["spread_families"]
    assert all("xxh3_128" in v and "sha256" not in v for v in m["files"].values())
    assert _hits(ContextRAG.load(fresh.path, embedder=embedder), qs) == want


def test_previous_format_checksums_still_catch_a_flipped_byte(fresh, embedder):
    """A format-2 snapshot's files are verified by their sha256 entries: one flipped byte fails."""
    _write_previous_format(fresh.path)
    snap = store.snapshot_dir(fresh.path)
    p = snap / store.ARRAYS
    data = bytearray(p.read_bytes())
    data[len(data) // 2] ^= 0x01
    p.write_bytes(bytes(data))
    with pytest.raises(store.IndexFormatError, match="arrays.safetensors fails its sha256 checksum"):
        ContextRAG.load(fresh.path, embedder=embedder)


def test_corrupt_or_mismatched_prepared_state_is_an_index_format_error(fresh, embedder):
    snap = store.snapshot_dir(fresh.path)
    m = store.read_manifest(snap)
    meta = dict(m["prepared"])
    a = store.map_arrays(snap / prepared.FILE)
    ix = ContextRAG.load(fresh.path, prepare=False, embedder=embedder).index
    bad = dict(a)
    bad["node_extents"] = a["node_extents"][:, :-1]
    with pytest.raises(ValueError, match="extents"):
        prepared.attach(ix, bad, meta)
    bad = dict(a)
    bad["spread.shape"] = a["spread.shape"] + 1
    with pytest.raises(ValueError, match="spread"):
        prepared.attach(ix, bad, meta)
    with pytest.raises(ValueError, match="by columns"):      # a family the index does not spread over
        prepared.attach(ix, a, {**meta, "csc_in_spread": ["nope"]})
    short = {**a, "spread.t_indptr": np.minimum(a["spread.t_indptr"], a["spread.t_indptr"][-1] - 1)}
    with pytest.raises(ValueError, match="by columns"):      # a block that cannot hold the family
        prepared.attach(ix, short, meta)
    (snap / prepared.FILE).write_bytes(b"x" * (snap / prepared.FILE).stat().st_size)
    with pytest.raises(IndexFormatError, match="checksum|cannot be read"):
        ContextRAG.load(fresh.path, embedder=embedder)


def test_a_write_builds_the_new_query_state_while_its_files_are_written(fresh, hotpot_paragraphs, monkeypatch):
    """An update of a prepared index builds the new index's query view and spreading state inside the
    save (while the writer threads write), once; a failure there does not fail the save, and the
    state is built again after it."""
    import contextrag.rag as rag_mod
    from contextrag.index.store import LAST_SAVE
    from contextrag.query import _view
    builds, fail = [], [True]
    real_view, real_prepare = _view._build_view, rag_mod._prepare_queries

    def counted(ix):
        builds.append(id(ix))
        return real_view(ix)

    def failing_once(ix):
        if fail[0]:
            fail[0] = False
            raise RuntimeError("injected")
        real_prepare(ix)
    monkeypatch.setattr(_view, "_build_view", counted)
    doc = dict(hotpot_paragraphs[N_BASE])
    fresh.add([doc])
    assert "meanwhile" in LAST_SAVE and builds == [id(fresh.index)]
    assert fresh.retrieve(doc["text"][:80], k=1)[0].doc_id == doc["id"] and builds == [id(fresh.index)]
    monkeypatch.setattr(rag_mod, "_prepare_queries", failing_once)
    fresh.delete([doc["id"]])                      # the first build fails inside the save, the second runs
    assert not fail[0] and doc["id"] not in fresh.index.docs and builds[-1] == id(fresh.index)
    assert ContextRAG.load(fresh.path, embedder=fresh.index.embedder).index.n_chunks == fresh.index.n_chunks


def test_stale_views_and_states_are_dropped_on_another_thread(fresh, hotpot_paragraphs, monkeypatch):
    """The query view and spreading state of an index an update replaced are released by a thread of
    their own (their arrays may map an unlinked snapshot: freeing its pages takes seconds at scale),
    not by the update or query that finds them stale."""
    import gc
    import threading

    from contextrag.query import _once, _view, spread
    dropped: list = []

    def record(objs):
        dropped.extend(type(e[2]).__name__ for e in objs)
        _once.drop_elsewhere(objs)
    monkeypatch.setattr(_view, "drop_elsewhere", record)
    monkeypatch.setattr(spread, "drop_elsewhere", record)
    doc = dict(hotpot_paragraphs[N_BASE])
    fresh.add([doc])
    gc.collect()
    fresh.delete([doc["id"]])                # the loaded index's view and state are stale by now
    assert {"CorpusView", "LexicalState"} <= set(dropped)

    freed = []

    class Tracked:
        def __del__(self):
            freed.append(threading.current_thread().name)
    _once.drop_elsewhere([Tracked()])
    wait_for_threads("contextrag-release")
    assert freed == ["contextrag-release"]
    _once.drop_elsewhere([])                 # nothing to drop: no thread
