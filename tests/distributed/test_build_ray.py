"""``ContextRAG.build(executor='ray')``: Ray Data embedding into shard files, stages 2-3 on shard
actors, the same index (and on-disk format) as the single-machine build given the same embeddings."""
from __future__ import annotations

import numpy as np
import pytest

from contextrag.config import Config

N_DOCS = 48


def test_cli_accepts_ray_flag():
    from contextrag.cli import build_parser
    p = build_parser()
    a = p.parse_args(["index", "corpus.jsonl", "--out", "idx", "--ray"])
    assert a.ray == "local"
    a = p.parse_args(["index", "corpus.jsonl", "--out", "idx", "--ray", "ray://head:10001"])
    assert a.ray == "ray://head:10001"
    assert p.parse_args(["index", "corpus.jsonl", "--out", "idx"]).ray is None


def test_build_rejects_unknown_executor(paragraphs):
    from contextrag import ContextRAG
    with pytest.raises(ValueError, match="executor"):
        ContextRAG.build(paragraphs[:2], executor="spark")


def test_ray_build_equals_single_machine_build(ray_cluster, paragraphs, embedder, tmp_path):
    from contextrag import ContextRAG
    from contextrag.index.build import build_index, embed_inputs, make_chunker
    from contextrag.index.chunking import normalize_docs
    from contextrag.index.graph import COOC
    docs = paragraphs[:N_DOCS]
    cfg = Config(rq_sizes=(12, 6, 3), seed=5, n_summaries=0)
    rag = ContextRAG.build(docs, path=str(tmp_path / "idx"), config=cfg, embedder=embedder, executor="ray")
    ix = ContextRAG.load(str(tmp_path / "idx"), embedder=embedder).index
    assert ix.info["executor"]["kind"] == "ray" and ix.info["executor"]["shards"] == 2
    # Ray Data embedded every chunk once, in corpus order, as the single-machine embedder does
    norm = normalize_docs(docs)
    chunks = make_chunker(cfg, embedder).split_all(norm)
    assert ix.chunk_ids == [c.chunk_id for c in chunks]
    E_ray = ix.chunk_embeddings
    E_one = embedder.embed_passages(embed_inputs([c.title for c in chunks], [c.text for c in chunks], cfg))
    np.testing.assert_allclose(E_ray, E_one, atol=2e-5, rtol=0)
    # single-machine build from the same embeddings: same codes, context, graph
    ref = build_index(norm, cfg, embedder, None, precomputed=(chunks, E_ray))
    assert np.array_equal(ix.codes, ref.codes)
    np.testing.assert_allclose(ix.context.dense(), ref.context.dense(), atol=1e-6, rtol=0)
    g, h = ix.graph, ref.graph
    assert np.array_equal(g.kind, h.kind) and np.array_equal(g.parents, h.parents)
    np.testing.assert_allclose(g.intent, h.intent, atol=1e-6, rtol=0)
    assert (g.members != h.members).nnz == 0
    m, k = g.edge_kind == COOC, h.edge_kind == COOC
    assert sorted(zip(g.edge_src[m], g.edge_dst[m])) == sorted(zip(h.edge_src[k], h.edge_dst[k]))
    assert ix.item_ids == ref.item_ids
    # the lexical spreading families (map on Ray tasks, reduce in the driver) are the same
    assert "ray_lexical" in rag.index.timings       # built on the Ray tasks, not after them
    assert list(ix.lexical.families) == list(ref.lexical.families)
    for name, f in ref.lexical.families.items():
        assert ix.lexical.families[name].vocab == f.vocab
        assert np.array_equal(ix.lexical.families[name].df, f.df)
        assert (ix.lexical.families[name].incidence != f.incidence).nnz == 0
    # and it answers like the single-machine index
    q = docs[3]["title"]
    assert [h.id for h in rag.retrieve(q, k=3)] == [h.id for h in ContextRAG(ref).retrieve(q, k=3)]


def test_lexical_map_on_ray_equals_single_process(ray_cluster, paragraphs):
    """Three map tasks over runs of blocks, reduce in the driver: the arrays of the one-process build."""
    from contextrag.distributed.build import lexical_on_ray
    from contextrag.index.lexical.families import lexical_families
    docs = paragraphs[:40]
    titles, texts = [d["title"] for d in docs], [d["text"] for d in docs]
    got = lexical_on_ray(titles, texts, ["title", "term"], 3)
    ref = lexical_families(titles, texts, ["title", "term"], workers=1)
    for name, f in ref.families.items():
        g = got.families[name]
        assert g.attributes == f.attributes and np.array_equal(g.df, f.df)
        for part in ("indptr", "indices", "data"):
            assert np.array_equal(getattr(g.incidence, part), getattr(f.incidence, part))
    assert ref.families["title"].incidence.nnz >= len(docs)
