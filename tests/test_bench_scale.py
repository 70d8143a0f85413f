"""The scale benchmark's ablation of the lexical weights' N and its count of where the top 5 comes from
(bench/bench_scale.py)."""
from __future__ import annotations

import importlib.util
import math
import sys

import numpy as np
import pytest

from shared_data import REPO


@pytest.fixture
def bs(monkeypatch):
    from contextrag.index.lexical import families, incremental
    monkeypatch.setattr(families, "idf_weight", families.idf_weight)       # put back after the test
    monkeypatch.setattr(incremental, "idf_weight", incremental.idf_weight)
    monkeypatch.setattr(sys, "path", list(sys.path))
    spec = importlib.util.spec_from_file_location("bench_scale", REPO / "bench" / "bench_scale.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod, families, incremental


def test_weights_as_if_sets_the_n_of_every_family_builder(bs):
    mod, families, incremental = bs
    texts = ["Paris is a city.", "Paris in spring.", "Lyon is a city too.", "Nothing here.", "More text."]
    before = families.title_family(["Paris", "", "Lyon", "", ""], texts)
    mod.weights_as_if(1_000_000)
    assert incremental.idf_weight is families.idf_weight
    w = families.idf_weight(np.array([1, 5, 1000]), 5000)
    np.testing.assert_allclose(w, [1.0, math.log(2e5) / math.log(1e6), 0.5], rtol=1e-12)
    np.testing.assert_allclose(families.idf_weight(np.array([5]), 4_000_000),
                               [math.log(8e5) / math.log(4e6)], rtol=1e-12)    # a bigger N is kept
    after = families.title_family(["Paris", "", "Lyon", "", ""], texts)
    j = after.vocab["paris"]
    assert after.df[j] == before.df[j] == 2
    # the mention's degree (chunk 1 names Paris; chunk 0 is its page, degree 1)
    assert after.incidence[1, j] == pytest.approx(math.log(1e6 / 2) / math.log(1e6), rel=1e-6)
    assert before.incidence[1, j] == pytest.approx(math.log(5 / 2) / math.log(5), rel=1e-6)
    assert after.incidence[0, j] == before.incidence[0, j] == 1.0


def test_weights_as_if_none_changes_nothing(bs):
    mod, families, _ = bs
    real = families.idf_weight
    mod.weights_as_if(None)
    assert families.idf_weight is real


def test_others_top5_counts_the_non_gold_documents_by_source(bs):
    mod, _, _ = bs
    ranked = ["A", "rc:1", "B", "rc:7", "C", "rc:9"]
    assert mod._others_top5(ranked, ["B", "Z"]) == {"hotpotqa": 2, "recombined": 2}
    assert mod._others_top5([], ["B"]) == {"hotpotqa": 0, "recombined": 0}


@pytest.mark.parametrize("which", ["linking", "added"])
def test_weights_as_if_one_part_of_the_attributes(bs, which):
    mod, families, _ = bs
    real = families.idf_weight
    df = np.array([5, 1000])                  # at 5,000 chunks: 0.81 links (w > 1/2), 0.19 does not
    own, big = real(df, 5000), real(df, 1_000_000)
    mod.weights_as_if(1_000_000, which)
    got = families.idf_weight(df, 5000)
    want = [big[0], own[1]] if which == "linking" else [own[0], big[1]]
    np.testing.assert_allclose(got, want, rtol=1e-12)
    assert own[0] > 0.5 >= own[1] and big[0] > own[0] and big[1] > own[1]


def test_weights_as_if_names_a_bad_part(bs):
    mod, families, _ = bs
    real = families.idf_weight
    with pytest.raises(ValueError, match="which must be one of"):
        mod.weights_as_if(1_000_000, "some")
    assert families.idf_weight is real


def test_weights_as_if_exact_is_a_fixed_unit_for_any_size(bs):
    mod, families, _ = bs
    real = families.idf_weight
    df = np.array([1, 5, 6000])
    mod.weights_as_if(5522, exact=True)
    for n_docs in (1000, 5522, 1_000_000):     # the same weights whatever the index holds
        np.testing.assert_allclose(families.idf_weight(df, n_docs), real(df, 5522), rtol=1e-12)
    assert families.idf_weight(df, 1_000_000)[2] == 0.0      # more chunks than the unit: clipped at 0


def test_set_values_take_the_type_the_config_field_wants(bs):
    mod, _, _ = bs
    conv = mod._number_or_text
    assert conv("1") == 1 and isinstance(conv("1"), int)      # spread_steps=1 (Config wants an int)
    assert conv("0.5") == 0.5 and conv("0") == 0
    assert conv("False") is False and conv("true") is True     # spread_entities=False
    assert conv("exhaustive") == "exhaustive"
    from contextrag import Config
    Config(spread_steps=conv("1"), spread_entities=conv("False"), w_spread=conv("0"), scoring=conv("exhaustive"))


class _Lexical:
    def __init__(self, families):
        self.families = families


class _Index:
    """What ``reweight`` reads of an index: its chunk count, lexical families and stored spreading."""
    def __init__(self, families, n_chunks):
        self.lexical, self.n_chunks, self._spread_prepared = _Lexical(families), n_chunks, ("stored", {})


TEXTS = ["Paris is a city on the Seine.", "Paris in spring, by the Seine.", "Lyon is a city too.",
         "Nothing here.", "More text about Lyon and Paris."]
TITLES = ["Paris", "", "Lyon", "", ""]


def _small_index(families):
    return _Index({"title": families.title_family(TITLES, TEXTS), "term": families.term_family(TITLES, TEXTS)},
                  len(TEXTS))


@pytest.mark.parametrize("part", ["both", "df", "n"])
def test_reweight_takes_the_other_index_df_and_n(bs, part):
    mod, families, _ = bs
    ix = _small_index(families)
    title, term = ix.lexical.families["title"], ix.lexical.families["term"]
    jp, js = title.vocab["paris"], term.vocab["seine"]
    own_df_p, own_df_s = int(title.df[jp]), int(term.df[js])
    # the other index: a million chunks, Paris in 200 of them, the Seine in 50; Lyon not there at all
    mod.reweight(ix, 1_000_000, {"title": {"paris": 200}, "term": {"seine": 50}}, part)
    n = 1_000_000 if part in ("both", "n") else len(TEXTS)
    df_p = 200 if part in ("both", "df") else own_df_p
    df_s = 50 if part in ("both", "df") else own_df_s
    w_p = max(0.0, math.log(n / df_p) / math.log(n))
    w_s = max(0.0, math.log(n / df_s) / math.log(n))
    assert title.weight[jp] == pytest.approx(w_p, rel=1e-6) and term.weight[js] == pytest.approx(w_s, rel=1e-6)
    jl = title.vocab["lyon"]                               # absent there: its own df, the new N
    assert title.weight[jl] == pytest.approx(math.log(n / title.df[jl]) / math.log(n), rel=1e-6)
    I = title.incidence.tocsr()
    assert I[0, jp] == 1.0                                  # Paris's own page keeps degree 1
    assert I[1, jp] == pytest.approx(w_p, rel=1e-6)         # a mention: the new weight
    assert term.incidence.tocsr()[0, js] == pytest.approx(w_s, rel=1e-6)
    assert ix._spread_prepared is None                      # the stored spreading is not used again


def test_reweight_with_a_fixed_unit_and_bad_arguments(bs):
    mod, families, _ = bs
    ix = _small_index(families)
    term = ix.lexical.families["term"]
    j = term.vocab["city"]
    mod.reweight(ix, 1_000_000, {"term": {"city": 40}}, "both", unit=100)
    assert term.weight[j] == pytest.approx(math.log(100 / 40) / math.log(100), rel=1e-6)
    mod.reweight(ix, 1_000_000, {"term": {"city": 400}}, "both", unit=100)
    assert term.weight[j] == 0.0 and term.incidence.tocsr()[0, j] == 0.0      # rarer than the unit: 0
    with pytest.raises(ValueError, match="part must be one of"):
        mod.reweight(ix, 10, {}, "some")
    with pytest.raises(ValueError, match="unit must be at least 2"):
        mod.reweight(ix, 10, {}, "both", unit=1)


def test_weights_distinct_equal_the_librarys_distinct_text_weights(bs):
    """``--weights-distinct`` (the ablation that measured them at a million chunks) gives the weights
    and degrees the library now builds with (index/distinct.py)."""
    mod, families, _ = bs
    from contextrag.index.distinct import ChunkSentences
    from contextrag.index.lexical.families import LexicalContext, counted_over
    texts = TEXTS + ["Lyon is a city too. Nothing here.", "Paris in spring, by the Seine."]
    titles = TITLES + ["", "Paris"]
    ix = _Index({"title": families.title_family(titles, texts), "term": families.term_family(titles, texts)},
                len(texts))
    ix.chunk_texts = texts
    rows = ChunkSentences.of_texts(texts).new_text()
    assert rows.tolist() == [True] * 5 + [False, False]
    lib = counted_over(LexicalContext(dict(ix.lexical.families)), rows)
    n, df, facts = mod.distinct_statistics(ix)
    assert n == lib.distinct == 5 and facts["chunks_with_new_text"] == 5
    mod.reweight(ix, max(n, 2), df, "both")
    for name, f in lib.families.items():
        g = ix.lexical.families[name]
        np.testing.assert_array_equal(f.weight, g.weight)
        np.testing.assert_array_equal(f.incidence.toarray(), g.incidence.toarray())


def test_bm25_distinct_counts_the_chunks_of_new_text(bs):
    """``--bm25-distinct``: BM25's idf as bm25s computes it over the chunks of new text alone (and the
    virtual items), the item lengths unchanged; an index without sentence hashes is refused."""
    import types

    import scipy.sparse as sp

    from contextrag.index.bm25_index import from_counts
    from contextrag.index.distinct import ChunkSentences
    mod, _, _ = bs
    texts = ["Paris is a city.", "Lyon is a city.", "Paris is a city.", "Paris is a city. Nice too."]
    # terms: paris, city, lyon, nice; chunk 2 repeats chunk 0; one virtual item holding "city"
    counts = sp.csr_matrix(np.array([[1, 1, 0, 0], [0, 1, 1, 0], [1, 1, 0, 0], [1, 1, 0, 1], [0, 2, 0, 0]]))
    bm = from_counts(counts, ["paris", "city", "lyon", "nice"], 4)
    ix = types.SimpleNamespace(bm25=bm, n_chunks=4, chunk_sentences=ChunkSentences.of_texts(texts))
    lengths = bm._stats()[1]
    assert mod.bm25_distinct(ix) == {"n": 4, "terms": 4}
    idf, got_lengths = bm._stats()
    N, d = 4, np.array([2.0, 4.0, 1.0, 1.0])          # chunks 0, 1, 3 and the virtual item
    np.testing.assert_allclose(idf, np.log(1.0 + (N - d + 0.5) / (d + 0.5)), rtol=1e-6)
    assert got_lengths is lengths
    ix.chunk_sentences = None
    with pytest.raises(ValueError, match="no sentence hashes"):
        mod.bm25_distinct(ix)


@pytest.mark.parametrize("side", ["question", "links"])
def test_reweight_one_side_only(bs, side):
    mod, families, _ = bs
    ix = _small_index(families)
    term = ix.lexical.families["term"]
    j = term.vocab["seine"]
    w0, i0 = float(term.weight[j]), float(term.incidence.tocsr()[0, j])
    mod.reweight(ix, 1_000_000, {"term": {"seine": 50}}, "both", side=side)
    w = math.log(1e6 / 50) / math.log(1e6)
    got_w, got_i = float(term.weight[j]), float(term.incidence.tocsr()[0, j])
    if side == "question":
        assert got_w == pytest.approx(w, rel=1e-6) and got_i == i0 != pytest.approx(w, rel=1e-3)
    else:
        assert got_i == pytest.approx(w, rel=1e-6) and got_w == w0 != pytest.approx(w, rel=1e-3)
    with pytest.raises(ValueError, match="side must be one of"):
        mod.reweight(ix, 10, {}, "both", side="seeds")


def test_per_question_and_the_paired_gap(bs):
    mod, _, _ = bs
    golds = [2, 2, 2, 2]
    a = mod.per_question([{2: 2, 5: 2}, {2: 1, 5: 2}, {2: 0, 5: 1}, {2: 2, 5: 2}], golds)
    b = mod.per_question([{2: 1, 5: 2}, {2: 1, 5: 2}, {2: 0, 5: 0}, {2: 2, 5: 2}], golds)
    assert a == {"gold": "2222", "found_at": {"2": "2102", "5": "2212"}}
    gap = mod.paired_gap(a, b, resamples=2000)
    assert gap["2"]["gap_points"] == 12.5 and gap["5"]["gap_points"] == 12.5      # (0.5 + 0 + 0 + 0) / 4
    assert gap["2"]["questions_a_better"] == 1 and gap["2"]["questions_b_better"] == 0
    lo, hi = gap["5"]["ci95_points"]
    assert 0.0 <= lo <= 12.5 <= hi <= 50.0           # a resample of the one question differing: 50
    same = mod.paired_gap(a, a, resamples=100)
    assert same["2"] == {"gap_points": 0.0, "ci95_points": [0.0, 0.0], "questions_a_better": 0,
                         "questions_b_better": 0}
    with pytest.raises(ValueError, match="same questions"):
        mod.paired_gap(a, mod.per_question([{2: 1}] * 3, [2, 2, 2]))
    with pytest.raises(ValueError, match="one digit per question"):
        mod.per_question([{2: 10}], [12])


def test_onnx_spinning_ablation_keeps_the_other_session_entries(bs, monkeypatch):
    ort = pytest.importorskip("onnxruntime")
    mod, _, _ = bs
    monkeypatch.setattr(ort, "SessionOptions", ort.SessionOptions)      # put back after the test
    mod.onnx_spinning()
    opts = ort.SessionOptions()
    opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
    opts.add_session_config_entry("session.inter_op.allow_spinning", "0")
    assert opts.get_session_config_entry("session.inter_op.allow_spinning") == "0"
    with pytest.raises(Exception):                                       # never set: ORT's default (spin)
        opts.get_session_config_entry("session.intra_op.allow_spinning")


def test_attribute_and_cluster_facts(bs):
    mod, families, _ = bs
    ix = _small_index(families)
    got = mod.attribute_facts(ix, ["term:seine", "title:paris", "term:absent"])
    assert got["term:seine"] == {"df": 2, "weight": round(math.log(5 / 2) / math.log(5), 4)}
    assert got["title:paris"]["df"] == 3 and got["term:absent"] is None
    with pytest.raises(ValueError, match="FAMILY:ATTRIBUTE"):
        mod.attribute_facts(ix, ["phrase:x"])
    # clusters 0 (two own chunks of four), 1 (recombined only), 2 (one own of one)
    codes = [0, 0, 0, 0, 1, 1, 2]
    docs = ["a", "b", "rc:1", "rc:2", "rc:3", "rc:4", "c"]
    f = mod.cluster_facts(codes, docs)
    assert f["clusters"] == 3 and f["holding_hotpotqa"] == 2
    assert f["hotpotqa_share"]["median"] == 0.75        # of the shares 0.5 and 1.0
