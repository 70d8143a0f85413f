"""Concept nodes over the lexical context (index/lexical/nodes.py): joins are exactly the chunks that
hold a rare linking attribute, meets exact intersections of two of them; both checked against a
brute-force reference on real HotpotQA text, then as retrievable items of an index (build, save/load,
add/delete, stats)."""
from __future__ import annotations

import hashlib
import json
import math
import re
import warnings

import numpy as np
import pytest

from shared_data import hotpot_file  # noqa: E402

N_PARAS = 240


@pytest.fixture(scope="module")
def paragraphs():
    data = json.loads(hotpot_file().read_text())
    seen: dict[str, str] = {}
    for q in data:
        for title, sents in q["context"]:
            seen.setdefault(title, "".join(sents))
        if len(seen) >= N_PARAS:
            break
    return [{"id": f"p{i}", "title": t, "text": x} for i, (t, x) in enumerate(list(seen.items())[:N_PARAS])]


@pytest.fixture(scope="module")
def corpus(paragraphs):
    """Chunks of several per document (sentences in pairs), so the document rules are exercised."""
    titles, texts, docs = [], [], []
    for p in paragraphs:
        sents = re.split(r"(?<=[.!?])\s+", p["text"])
        for s in range(0, len(sents), 2):
            titles.append(p["title"])
            texts.append(" ".join(sents[s:s + 2]))
            docs.append(p["id"])
    from contextrag.index.lexical.families import lexical_families
    return lexical_families(titles, texts, ["title", "term"]), docs


# ---- brute-force reference -------------------------------------------------------------------

def _reference_candidates(ctx, docs):
    """[(label, members set, degree dict, link, n_docs, rank position)] of every rare linking attribute."""
    n = len(docs)
    out = []
    for name, fam in ctx.families.items():
        I = fam.incidence.tocsc()
        for j, a in enumerate(fam.attributes):
            rows = I.indices[I.indptr[j]:I.indptr[j + 1]]
            w = math.log(n / len(rows)) / math.log(n)
            if len(rows) < 2 or not w > 0.5:
                continue
            deg = {int(r): float(v) for r, v in zip(rows, I.data[I.indptr[j]:I.indptr[j + 1]])}
            best: dict = {}
            for r, v in deg.items():
                best[docs[r]] = max(best.get(docs[r], 0.0), v)
            if len(best) < 2:
                continue
            d = sorted(best.values(), reverse=True)
            out.append((f"{name}:{a}", frozenset(deg), deg, max(d[0] + d[1] - 1.0, 0.0), len(best), w))
    return out


def _reference_joins(cands, n_join):
    order = sorted(range(len(cands)), key=lambda i: (-round(cands[i][3], 5), -cands[i][4], i))
    picked, seen = [], set()
    for i in order:
        if cands[i][1] in seen:
            continue
        seen.add(cands[i][1])
        if len(picked) < n_join:
            picked.append(cands[i][1])
    return picked


# ---- construction ----------------------------------------------------------------------------

def test_joins_are_the_chunks_holding_a_rare_linking_attribute(corpus):
    from contextrag.index.lexical.nodes import JOIN, select_lexical_nodes
    ctx, docs = corpus
    n = len(docs)
    nodes = select_lexical_nodes(ctx, docs, n_join=40, n_meet=0)
    assert len(nodes) == 40 and all(x.kind == JOIN for x in nodes)
    for x in nodes:
        assert np.all(np.diff(x.members) > 0)
        for label in x.attributes:                      # every attribute with this chunk set
            fam, a = label.split(":", 1)
            f = ctx.families[fam]
            col = f.incidence.tocsc()[:, f.vocab[a]]
            np.testing.assert_array_equal(x.members, np.sort(col.indices))
            if label == x.attributes[0]:                # the degrees: those of the ranking attribute
                np.testing.assert_array_equal(x.degrees, col.toarray().ravel()[x.members])
            assert math.log(n / f.df[f.vocab[a]]) / math.log(n) > 0.5       # rare: df < sqrt(N)
        assert len({docs[c] for c in x.members}) >= 2                      # linking: two documents at least
    assert len({x.members.tobytes() for x in nodes}) == len(nodes)         # one node per chunk set
    # the selection is the reference's: the strongest links first
    ref = _reference_joins(_reference_candidates(ctx, docs), 40)
    assert [frozenset(x.members.tolist()) for x in nodes] == ref
    links = [x.score for x in nodes]
    assert links == sorted(links, reverse=True) and links[0] > 0.5


def test_title_entity_links_its_own_chunk_and_its_mentions(corpus):
    """A title attribute's join holds the titled document's chunks (degree 1) and the chunks that
    mention it (degree w(a)); its link is w(a)."""
    from contextrag.index.lexical.nodes import select_lexical_nodes
    ctx, docs = corpus
    nodes = select_lexical_nodes(ctx, docs, n_join=10 ** 6, n_meet=0)
    titled = [x for x in nodes if x.attributes[0].startswith("title:")]
    assert titled
    f = ctx.families["title"]
    checked = False
    for x in titled:
        a = x.attributes[0].split(":", 1)[1]
        w = float(f.weight[f.vocab[a]])
        own = {docs[c] for c, d in zip(x.members.tolist(), x.degrees) if d == 1.0}
        if len(own) == 1:        # one titled document (two "X (film)", "X (novel)" would link with 1)
            assert x.score == pytest.approx(w, abs=1e-6)
            checked = True
    assert checked
    # every rare linking attribute is in exactly one node when the budget is unbounded
    labels = [a for x in nodes for a in x.attributes]
    assert len(labels) == len(set(labels)) == len(_reference_candidates(ctx, docs))


@pytest.mark.parametrize("min_support", [2, 3])
def test_meets_are_exact_intersections(corpus, min_support):
    from contextrag.index.lexical.nodes import MEET, select_lexical_nodes
    ctx, docs = corpus
    nodes = select_lexical_nodes(ctx, docs, n_join=0, n_meet=30, min_support=min_support)
    assert 0 < len(nodes) <= 30 and all(x.kind == MEET for x in nodes)
    cands = {c[0]: c for c in _reference_candidates(ctx, docs)}
    single = {c[1] for c in cands.values()}
    scores = []
    for x in nodes:
        a, b = (cands[lab] for lab in x.attributes)
        inter = a[1] & b[1]
        assert frozenset(x.members.tolist()) == inter                    # exactly the intersection
        assert len(inter) >= min_support and len(inter) < len(a[1]) and len(inter) < len(b[1])
        assert len({docs[c] for c in inter}) >= 2 and inter not in single
        np.testing.assert_array_equal(x.degrees, [min(a[2][c], b[2][c]) for c in x.members.tolist()])
        assert x.score == pytest.approx(len(inter) / math.sqrt(len(a[1]) * len(b[1])))
        scores.append(x.score)
    assert scores == sorted(scores, reverse=True)
    assert len({x.members.tobytes() for x in nodes}) == len(nodes)
    # nothing better was left out: every eligible pair scores at most the last kept meet
    labs = list(cands)
    worst = scores[-1]
    kept = {x.members.tobytes() for x in nodes}
    for i in range(len(labs)):
        for j in range(i + 1, len(labs)):
            a, b = cands[labs[i]], cands[labs[j]]
            inter = a[1] & b[1]
            if len(inter) < min_support or len(inter) >= min(len(a[1]), len(b[1])) or inter in single \
                    or len({docs[c] for c in inter}) < 2:
                continue
            s = len(inter) / math.sqrt(len(a[1]) * len(b[1]))
            assert s <= worst + 1e-12 or np.asarray(sorted(inter), np.int64).tobytes() in kept


def test_degenerate_inputs():
    from contextrag.index.lexical.families import lexical_families
    from contextrag.index.lexical.nodes import select_lexical_nodes
    assert select_lexical_nodes(None, ["d"], 5, 5) == []
    one = lexical_families(["Paris"], ["Paris is the capital of France."], ["title", "term"])
    assert select_lexical_nodes(one, ["d0"], 5, 5) == []                      # N = 1
    same = lexical_families(["", ""], ["alpha beta gamma", "alpha beta gamma"], ["title", "term"])
    assert select_lexical_nodes(same, ["d0", "d1"], 5, 5) == []               # df = N: nothing is rare
    sib = lexical_families(["X", "X", "Y", "Z", "W"], ["zeta eta", "zeta eta", "a b", "c d", "e f"],
                           ["title", "term"])
    assert select_lexical_nodes(sib, ["d0", "d0", "d1", "d2", "d3"], 5, 5) == []   # one document only
    assert select_lexical_nodes(sib, ["d0", "d0", "d1", "d2", "d3"], 0, 0) == []
    with pytest.raises(ValueError, match="n_join"):
        select_lexical_nodes(sib, ["d0"] * 5, -1, 0)
    with pytest.raises(ValueError, match="min_support"):
        select_lexical_nodes(sib, ["d0"] * 5, 1, 1, min_support=0)
    with pytest.raises(ValueError, match="rows"):
        select_lexical_nodes(sib, ["d0"] * 4, 1, 1)


def test_sources_prefer_distinct_documents():
    from contextrag.index.lexical.nodes import JOIN, LexicalNode, node_sources
    nd = LexicalNode(JOIN, ("term:x",), np.array([0, 1, 2, 5]), np.array([1.0, 1.0, 0.7, 0.9], np.float32), 0.7)
    docs = ["a", "a", "b", "a", "c", "c"]
    np.testing.assert_array_equal(node_sources(nd, docs, 2), [0, 5])      # best of "a", then best of "c"
    np.testing.assert_array_equal(node_sources(nd, docs, 3), [0, 2, 5])
    np.testing.assert_array_equal(node_sources(nd, docs, 4), [0, 1, 2, 5])


def test_paper_config_keeps_the_literal_construction():
    from contextrag import Config
    p = Config.paper()
    assert (p.n_join, p.n_meet, p.lexical_joins, p.lexical_meets) == (64, 64, 0, 0)
    with pytest.raises(ValueError, match="lexical_joins"):
        Config(lexical_joins=-1)


# ---- as retrievable items of an index --------------------------------------------------------

class _HashEmbedder:
    """Words hashed into 64 signed dimensions: deterministic, no model to load."""
    dim = 64
    name = "hash-64"
    query_prefix = passage_prefix = ""

    def _one(self, text):
        v = np.zeros(self.dim, np.float32)
        for w in re.findall(r"\w+", text.lower()):
            h = int.from_bytes(hashlib.blake2b(w.encode(), digest_size=4).digest(), "little")
            v[h % self.dim] += 1.0 if (h >> 16) & 1 else -1.0
        v[0] += 1e-3
        return v / np.linalg.norm(v)

    def embed_passages(self, texts):
        return np.stack([self._one(t) for t in texts]) if len(texts) else np.zeros((0, self.dim), np.float32)

    embed_queries = embed_passages


def _config(**kw):
    from contextrag import Config
    return Config(rq_sizes=(8, 3), n_join=4, n_meet=4, n_summaries=0, seed=0, chunk_tokenizer="regex",
                  chunk_tokens=60, chunk_overlap=10, lexical_joins=12, lexical_meets=12, **kw)


def _lexical_items(ix):
    from contextrag.index.core import JOIN_ITEM, MEET_ITEM
    sel = np.flatnonzero(np.isin(ix.item_kinds, [JOIN_ITEM, MEET_ITEM]) & (ix.item_node < 0))
    return {ix.item_ids[i]: (ix.item_members[i].indices.tolist(), ix.item_texts[i]) for i in sel}


def _expected(ix):
    from contextrag.index.build import _render
    from contextrag.index.lexical.nodes import node_sources, select_lexical_nodes
    nodes = select_lexical_nodes(ix.lexical, ix.chunk_doc_ids, ix.config.lexical_joins, ix.config.lexical_meets,
                                 ix.config.min_support)
    return {f"{x.kind}:{x.label}": (x.members.tolist(),
                                   _render(ix, node_sources(x, ix.chunk_doc_ids, ix.config.node_text_chunks)))
            for x in nodes}


@pytest.fixture(scope="module")
def built(paragraphs, tmp_path_factory):
    from contextrag import ContextRAG
    path = tmp_path_factory.mktemp("lexnodes") / "idx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        rag = ContextRAG.build(paragraphs[:120], path=path, config=_config(), embedder=_HashEmbedder())
    return rag, path


def test_index_items_stats_and_round_trip(built):
    from contextrag import ContextRAG
    rag, path = built
    ix = rag.index
    items = _lexical_items(ix)
    assert items == _expected(ix)                       # the nodes of the stored families, rendered
    st = rag.stats()
    assert st["lexical_nodes"]["join"]["count"] == 12 and 0 < st["lexical_nodes"]["meet"]["count"] <= 12
    assert sum(v["count"] for v in st["lexical_nodes"].values()) == len(items)
    assert st["items"] == ix.n_chunks + len(items) + int((ix.item_node >= 0).sum())
    # item embedding: the normalised mean of the chunks its text quotes; BM25 has one entry per item
    E = ix.chunk_embeddings
    for i in np.flatnonzero(ix.item_node[ix.n_chunks:] < 0) + ix.n_chunks:
        src = ix.item_sources[i].indices
        m = E[src].mean(axis=0)
        np.testing.assert_allclose(ix.embeddings[i], m / np.linalg.norm(m), atol=1e-6)
        assert set(ix.chunk_doc_ids[c] for c in src) <= set(ix.item_doc_ids(i))
    assert len(ix.bm25_scores("film director")) == ix.n_items
    again = ContextRAG.load(path, embedder=_HashEmbedder())
    assert _lexical_items(again.index) == items and again.stats()["lexical_nodes"] == st["lexical_nodes"]


def test_inspect_reports_lexical_nodes(built, capsys):
    import argparse

    from contextrag.commands import inspect as cmd
    _, path = built
    cmd.run(argparse.Namespace(index=str(path), plot=None, no_plot=True, json=False))
    out = capsys.readouterr().out
    assert "lexical concept nodes (items): join 12" in out


def test_add_and_delete_reselect_the_nodes(paragraphs, tmp_path):
    """add/delete rebuild the families exactly and re-select the lexical nodes from them: the items
    equal a fresh selection over the updated index."""
    from contextrag import ContextRAG
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        rag = ContextRAG.build(paragraphs[:100], path=tmp_path / "idx", config=_config(), embedder=_HashEmbedder())
        before = _lexical_items(rag.index)
        rag.add(paragraphs[100:140])
        added = _lexical_items(rag.index)
        assert added == _expected(rag.index) and added != before
        rag.delete([p["id"] for p in paragraphs[:30]])
        assert _lexical_items(rag.index) == _expected(rag.index)
        assert not any(set(rag.index.chunk_doc_ids[c] for c in m) & {p["id"] for p in paragraphs[:30]}
                       for m, _ in _lexical_items(rag.index).values())


def test_off_by_config_builds_none(paragraphs, tmp_path):
    from contextrag import ContextRAG
    rag = ContextRAG.build(paragraphs[:60], path=tmp_path / "idx",
                           config=_config().replace(lexical_joins=0, lexical_meets=0), embedder=_HashEmbedder())
    assert _lexical_items(rag.index) == {}
    assert rag.stats()["lexical_nodes"] == {"join": {"count": 0, "mean_members": 0.0, "max_members": 0},
                                            "meet": {"count": 0, "mean_members": 0.0, "max_members": 0}}


@pytest.mark.parametrize("ids", [[], ["a"], ["a", "a", "b", "c", "c"], ["a", "b", "a"], ["b", "b", "a", "b"],
                                 ["x", "y", "y", "x", "z", "z", "z"], [""] * 3 + ["d"]])
def test_doc_codes_number_documents_by_first_appearance(ids):
    from contextrag.index.columns import LazyStrings, encode_texts
    from contextrag.index.lexical.nodes import doc_codes
    seen: dict = {}
    want = [seen.setdefault(d, len(seen)) for d in ids]
    got = doc_codes(ids)
    assert got.dtype == np.int64 and got.tolist() == want
    assert doc_codes(LazyStrings(*encode_texts(ids))).tolist() == want     # any sequence of strings
