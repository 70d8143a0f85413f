"""Entity seeds and the later spreading steps (query/spread.py) on small hand-checked corpora."""
from __future__ import annotations

import weakref

import numpy as np
import pytest

from contextrag import ref
from contextrag.config import Config
from contextrag.index.lexical.families import title_family
from contextrag.query._view import CorpusView
from contextrag.query import spread as SP

# a three-hop chain: the question reaches A; A names B; B names C (the answer); D, E are fillers
TITLES = ["Alpha Corp", "Bob Smith", "Carl Jones", "Dora Lee", "Evan Moss"]
TEXTS = [
    "Alpha Corp is a shipping company founded by Bob Smith in Rotterdam.",
    "Bob Smith is a businessman who was mentored by Carl Jones.",
    "Carl Jones was a banker born in Paris.",
    "Dora Lee is a painter who lives in Lyon.",
    "Evan Moss is a sailor who works for a shipping company.",
]
CHAIN_Q = "Where was the mentor of the founder of the shipping company Alpha Corp born?"
TITLE_ONLY = {"title": 1.0}


class FakeIndex:
    def __init__(self, titles, texts):
        self.chunk_texts, self.chunk_titles = texts, titles


def make_view(titles, texts, bm25):
    ix = FakeIndex(titles, texts)
    n = len(texts)
    E = np.eye(n, dtype=np.float32)
    v = CorpusView(ids=[f"c{i}" for i in range(n)], texts=texts, kinds=np.array(["chunk"] * n, dtype=object),
                   doc_ids=[f"d{i}" for i in range(n)], E=E, embed=lambda qs: np.zeros((1, n), np.float32),
                   bm25_raw=lambda q: np.asarray(bm25, np.float32), source=weakref.ref(ix))
    v._ix = ix
    return v


@pytest.fixture
def chain():
    return make_view(TITLES, TEXTS, [10.0, 1.0, 0.5, 0.2, 3.0])


def hop_of(view, question, cfg):
    base = 0.3 * view.bm25_raw(question) / view.bm25_raw(question).max()
    return SP.spread_view(view, question, base.astype(np.float32), cfg)[1], base


def test_second_step_reaches_the_third_passage(chain):
    one, _ = hop_of(chain, CHAIN_Q, Config(spread_families=TITLE_ONLY, spread_seeds=2, spread_steps=1,
                                           spread_mentions=False))
    two, _ = hop_of(chain, CHAIN_Q, Config(spread_families=TITLE_ONLY, spread_seeds=2, spread_steps=2,
                                           spread_mentions=False))
    assert one[2] == 0.0                     # one step: C shares no attribute with any seed
    assert two[2] > 0.0                      # two steps: A -> "bob smith" -> B -> "carl jones" -> C
    assert np.all(two >= one - 1e-7)         # a later step only adds (max)
    # the degree is the t-norm composition of the two steps: hop1(B) ⊗ I(B, carl jones) ⊗ I(C, carl jones)
    st = SP.lexical_state(chain, TITLE_ONLY)
    I = st.I.toarray()
    j = st.ctx.families["title"].vocab["carl jones"]
    assert two[2] == pytest.approx(max(0.0, one[1] + I[1, j] + I[2, j] - 2.0), abs=1e-6)


def test_steps_equal_two_reference_hops(chain):
    """Step 2 is ops.spread_hop again from the frontier: check against the float64 reference."""
    cfg = Config(spread_families=TITLE_ONLY, spread_seeds=2, spread_steps=2, spread_mentions=False,
                 spread_self=True)   # the reference hop counts every seed's path to itself
    st = SP.lexical_state(chain, TITLE_ONLY)
    base = (0.3 * chain.bm25_raw(CHAIN_Q) / 10.0).astype(np.float32)
    (r, hop, seeds, degs, fired), = SP._spread_batch(st, [CHAIN_Q], [base], cfg, None)
    I = st.I.toarray().astype(np.float64)
    doc = st.doc
    mu = st.mu(CHAIN_Q)[None, :]
    n1 = np.unique(np.concatenate([SP._seeds_of(st, base, cfg, None)[1], SP.entity_seeds(st, CHAIN_Q, base)])).size
    h1 = ref.spread_hop(I, seeds[None, :n1], degs[None, :n1], mu, doc)[0]
    h2 = ref.spread_hop(I, seeds[None, n1:], degs[None, n1:], None, doc)[0]
    assert seeds[n1:].size > 0 and fired == 1
    np.testing.assert_allclose(degs[n1:], h1[seeds[n1:]], atol=1e-6)   # frontier degree = its step-1 degree
    np.testing.assert_allclose(hop, np.maximum(h1, h2), atol=1e-6)


def test_steps_stop_at_the_fixpoint(chain):
    """With room for five steps the iteration stops once a step raises nothing: the hop equals
    that of the last step that added something, and the count says how many steps added."""
    cfg2 = Config(spread_families=TITLE_ONLY, spread_seeds=2, spread_steps=2)
    cfg5 = Config(spread_families=TITLE_ONLY, spread_seeds=2, spread_steps=5)
    h2, base = hop_of(chain, CHAIN_Q, cfg2)
    h5, _ = hop_of(chain, CHAIN_Q, cfg5)
    np.testing.assert_allclose(h5, h2, atol=1e-7)
    fired = SP.spread_steps_fired(chain, [CHAIN_Q], [base.astype(np.float32)], cfg5)
    assert fired.tolist() == [1]             # step 2 added C; step 3 added nothing, so it stopped


def test_later_steps_start_from_the_head_of_the_ranking(chain):
    """spread_stop="head" (the default): a later step starts from the raised chunks that reach the
    ranking's head (the spread_seeds best documents). With one seed the head is A alone and B, raised
    but ranked below A, seeds nothing: the second step is not taken. "raised" takes it from B."""
    head = Config(spread_families=TITLE_ONLY, spread_seeds=1, spread_steps=3, spread_mentions=False)
    raised = Config(**{**head.to_dict(), "spread_stop": "raised"})
    one, base = hop_of(chain, CHAIN_Q, Config(**{**head.to_dict(), "spread_steps": 1}))
    h, _ = hop_of(chain, CHAIN_Q, head)
    r, _ = hop_of(chain, CHAIN_Q, raised)
    np.testing.assert_allclose(h, one, atol=1e-7)
    assert r[2] > 0.0 and h[2] == 0.0
    b = [base.astype(np.float32)]
    assert SP.spread_steps_fired(chain, [CHAIN_Q], b, head).tolist() == [0]
    assert SP.spread_steps_fired(chain, [CHAIN_Q], b, raised).tolist() == [1]
    with pytest.raises(ValueError, match="spread_stop"):
        Config(spread_stop="never")


def test_the_frontier_takes_new_documents_of_the_head_only():
    titles = ["Alpha Corp", "Alpha Corp", "Bob Smith", "Carl Jones", "Dora Lee"]
    texts = ["Alpha Corp ships.", "Alpha Corp was founded by Bob Smith.", "Bob Smith knew Carl Jones.",
             "Carl Jones was a banker.", "Dora Lee paints."]
    v = CorpusView(ids=[f"c{i}" for i in range(5)], texts=texts, kinds=np.array(["chunk"] * 5, dtype=object),
                   doc_ids=["a", "a", "b", "c", "d"], E=np.eye(5, dtype=np.float32),
                   embed=lambda qs: np.zeros((1, 5), np.float32), bm25_raw=lambda q: np.ones(5, np.float32))
    st = SP.lexical_state(v, TITLE_ONLY)
    score = np.array([0.9, 1.0, 0.8, 0.7, 0.1], np.float32)
    raised = np.array([True, True, True, True, False])
    taken = np.array([0])                     # a seed of document "a"
    # head of 3 documents: a (chunk 1, its document already seeded), b, c -> new seeds b, c
    assert SP._frontier(st, score, raised, taken, 3).tolist() == [2, 3]
    assert SP._frontier(st, score, raised, taken, 1).tolist() == []          # head: "a" only
    mask = np.array([True, True, False, True, True])
    assert SP._frontier(st, score, raised, taken, 3, mask).tolist() == [3]   # b filtered out; d never raised


def test_named_entities_takes_the_fullest_title():
    fam = title_family(["Cars", "Cars 3", "Smith!", "Pixar"], ["a", "b", "c", "d"])
    cols = SP.named_entities(fam, "Which film was not 3D animation, Cars 3 or Smith!?")
    names = sorted(fam.attributes[j] for j in cols)
    assert names == ["cars 3", "smith"]      # "cars" lies inside "cars 3"
    assert SP.named_entities(fam, "Is \"Pixar\" a studio?").tolist() == [fam.vocab["pixar"]]
    assert SP.named_entities(fam, "nothing named here").size == 0


COMP_TITLES = ["Joss Whedon", "Norman Mailer", "Norman Mailer Prize", "J. Michael Lennon", "Whedon projects"]
COMP_TEXTS = [
    "Joss Whedon is an American screenwriter and director.",
    "Norman Mailer was an American novelist and journalist.",
    "The Norman Mailer Prize is awarded to American writers; Norman Mailer founded it.",
    "J. Michael Lennon is an American writer and the biographer of Norman Mailer.",
    "Joss Whedon has many unrealised projects; Joss Whedon wrote scripts.",
]
COMP_Q = "Were Joss Whedon and Norman Mailer both Americans?"


def test_both_entities_of_a_comparison_are_seeded():
    view = make_view(COMP_TITLES, COMP_TEXTS, [2.0, 1.0, 9.0, 10.0, 8.0])   # the own pages rank low
    cfg = Config(spread_seeds=2)
    st = SP.lexical_state(view, cfg.spread_families)
    base = (view.bm25_raw(COMP_Q) / 10.0).astype(np.float32)
    es = SP.entity_seeds(st, COMP_Q, base)
    assert sorted(es.tolist()) == [0, 1]     # each named entity's own page
    tr = SP.spread_trace(view, COMP_Q, base, cfg)
    _, seeds, rho, *_ = tr
    assert {0, 1} <= set(seeds.tolist()) and rho[0] == 1.0 and rho[1] == 1.0
    off = SP.spread_view(view, COMP_Q, base, Config(spread_seeds=2, spread_entities=False, w_residual=0.0, spread_mentions=False))[1]
    on = SP.spread_view(view, COMP_Q, base, Config(spread_seeds=2, w_residual=0.0, spread_mentions=False))[1]
    # a seed of degree 1 reaches itself through its own title (1 ⊗ 1 ⊗ 1); without the entity
    # seeds the pages get only the question's mention μ(q, e) = w(e) < 1
    assert on[0] == pytest.approx(1.0) and on[1] == pytest.approx(1.0)
    assert off[0] < 1.0 and off[1] < 1.0


def test_entity_seeds_respect_the_doc_filter():
    view = make_view(COMP_TITLES, COMP_TEXTS, [2.0, 1.0, 9.0, 10.0, 8.0])
    st = SP.lexical_state(view, Config().spread_families)
    base = (view.bm25_raw(COMP_Q) / 10.0).astype(np.float32)
    mask = np.array([False, True, True, True, True])
    assert SP.entity_seeds(st, COMP_Q, base, mask).tolist() == [1]


def test_spread_steps_is_validated():
    with pytest.raises(ValueError, match="spread_steps"):
        Config(spread_steps=0)
    with pytest.raises(ValueError, match="spread_entities"):
        Config(spread_entities=1)


RES_TITLES = ["Baraki Barak District", "Baraki Rajan", "Logar Province", "Kabul"]
RES_TEXTS = [
    "Baraki Barak District is a district in the western part of Logar Province.",
    "Baraki Rajan is a village in Baraki Barak District.",
    "Logar Province is a province whose capital is Pul-i-Alam.",
    "Kabul is the capital of Afghanistan.",
]
RES_Q = "Baraki Barak District is situated in a province whose capital is what?"


def test_residual_coverage_is_the_weighted_subsethood_of_what_is_left():
    view = make_view(RES_TITLES, RES_TEXTS, [10.0, 8.0, 2.0, 1.0])
    st = SP.lexical_state(view, Config().spread_families)
    fam = st.ctx.families["term"]
    cols, w = fam.query_columns(RES_Q)
    res = SP.residual_coverage(st, RES_Q, 0)
    held = st.ctx.families["term"].incidence.toarray()[:, cols] > 0
    left = ~held[0]
    np.testing.assert_allclose(res, (held[:, left] * w[left]).sum(1) / w.sum(), atol=1e-6)
    assert res[0] == 0.0                      # the best chunk leaves itself nothing
    assert res[2] > res[1]                    # "capital" is left for Logar Province, not the sibling village
    assert res[2] == res[3] > 0.0             # both hold "capital", the one term the best chunk lacks
    off = SP.spread_view(view, RES_Q, (view.bm25_raw(RES_Q) / 10).astype(np.float32), Config(w_residual=0.0))[1]
    on = SP.spread_view(view, RES_Q, (view.bm25_raw(RES_Q) / 10).astype(np.float32), Config())[1]
    np.testing.assert_allclose(on - off, Config().w_residual * res, atol=1e-6)   # added to the spreading part


def test_residual_coverage_edge_cases():
    view = make_view(RES_TITLES, RES_TEXTS, [10.0, 8.0, 2.0, 1.0])
    st = SP.lexical_state(view, Config().spread_families)
    assert not SP.residual_coverage(st, "the of and", 0).any()     # no question terms
    with pytest.raises(ValueError, match="w_residual"):
        Config(w_residual=-1.0)


def test_a_seed_reaches_the_page_it_names_with_its_own_degree(chain):
    """A (the only relevance seed, degree 1) mentions "Bob Smith": B's own page gets 1 with the
    named-title step, w(bob smith) < 1 through the symmetric title path alone."""
    off, _ = hop_of(chain, CHAIN_Q, Config(spread_families=TITLE_ONLY, spread_seeds=1, spread_steps=1,
                                           spread_mentions=False))
    on, _ = hop_of(chain, CHAIN_Q, Config(spread_families=TITLE_ONLY, spread_seeds=1, spread_steps=1))
    st = SP.lexical_state(chain, TITLE_ONLY)
    w = st.ctx.families["title"].weight[st.ctx.families["title"].vocab["bob smith"]]
    assert off[1] == pytest.approx(w, abs=1e-6) and w < 1.0
    assert on[1] == pytest.approx(1.0)
    assert on[2] == off[2] == 0.0            # C is named by B, which is no seed after one step
    two, _ = hop_of(chain, CHAIN_Q, Config(spread_families=TITLE_ONLY, spread_seeds=2, spread_steps=2))
    assert two[2] > 0.0                      # with two steps B seeds, and names C: degree hop₁(B)
    np.testing.assert_allclose(np.delete(on, [1]), np.delete(off, [1]), atol=1e-6)   # only named pages move


def test_a_relevance_seed_gains_nothing_from_its_own_path(chain):
    """spread_self=False (the default): a relevance seed's first-step degree is what the question's
    own activation and the *other* seeds give it (the float64 reference without the seed itself);
    every other item, and every item with spread_self=True, is the reference hop of all seeds."""
    base = (0.3 * chain.bm25_raw(CHAIN_Q) / 10.0).astype(np.float32)
    st = SP.lexical_state(chain, Config().spread_families)
    I, doc, mu = st.I.toarray().astype(np.float64), st.doc, st.mu(CHAIN_Q)[None, :]
    for self_path in (False, True):
        cfg = Config(spread_seeds=3, spread_steps=1, spread_mentions=False, spread_self=self_path)
        (r, hop, seeds, degs, _), = SP._spread_batch(st, [CHAIN_Q], [base], cfg, None)
        full = ref.spread_hop(I, seeds[None], degs[None], mu, doc)[0]
        want = full.copy()
        if not self_path:
            for j, t in enumerate(seeds):
                keep = np.arange(seeds.size) != j
                want[t] = ref.spread_hop(I, seeds[None, keep], degs[None, keep], mu, doc)[0][t]
        np.testing.assert_allclose(hop, want, atol=1e-6)
        if not self_path:
            assert (hop[seeds] < full[seeds] - 1e-6).any()   # some seed's best path was its own
    with pytest.raises(ValueError, match="spread_self"):
        Config(spread_self=1)


def test_the_explanation_leaves_out_the_self_path_too(chain):
    """query/explain.py reports the strongest path into an item; for a relevance seed it skips the
    seed's path to itself, as the hop does, so the reported value is the seed's hop."""
    from contextrag.query.explain import _best_path
    base = (0.3 * chain.bm25_raw(CHAIN_Q) / 10.0).astype(np.float32)
    cfg = Config(spread_seeds=3, spread_steps=1, spread_mentions=False, w_residual=0.0)
    st, seeds, rho, mu, doc, r, res = SP.spread_trace(chain, CHAIN_Q, base, cfg)
    hop = SP.spread_view(chain, CHAIN_Q, base, cfg)[1]
    no_self = SP.self_path_excluded(st, CHAIN_Q, base, cfg)
    assert no_self
    for t in no_self:
        assert _best_path(t, st, seeds, rho, mu, doc, False, no_self)[0] == pytest.approx(float(hop[t]), abs=1e-6)
    # with the self path the explanation would report a value the hop no longer has
    assert any(abs(_best_path(t, st, seeds, rho, mu, doc, False)[0] - float(hop[t])) > 1e-6 for t in no_self)
