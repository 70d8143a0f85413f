"""Distributed RQ-KMeans, memberships and closures on a local 2-worker Ray cluster equal the
single-process results on ~2,000 real HotpotQA paragraph embeddings; killed workers change nothing."""
from __future__ import annotations

import numpy as np
import pytest

from contextrag import ops
from contextrag.config import Config

SIZES = (96, 24, 12)
SEED = 7


def _shardset(tmp, X, fault=None, metas=None, doc_ids=None):
    from contextrag.distributed.cluster import ShardSet, write_shards
    specs = write_shards(X, str(tmp), 2, doc_ids=doc_ids)
    if metas is not None:
        metas = [metas(s) for s in specs]
    # half a CPU each: the fault tests start a second set while the module's set is alive
    return ShardSet(specs, len(X), str(tmp / "state"), num_cpus=0.5, fault=fault, metas=metas)


def _codes(shards, L):
    return np.concatenate(shards.get(shards.map("codes", L)))


@pytest.fixture(scope="module")
def shards(ray_cluster, embeddings, tmp_path_factory):
    ss = _shardset(tmp_path_factory.mktemp("shards"), embeddings)
    yield ss
    ss.shutdown()


@pytest.fixture(scope="module")
def single(embeddings):
    return ops.rq_kmeans(embeddings, SIZES, seed=SEED)


@pytest.fixture(scope="module")
def dist(shards):
    from contextrag.distributed.kmeans import rq_kmeans
    return rq_kmeans(shards, SIZES, seed=SEED)


def test_embeddings_are_real(embeddings):
    assert embeddings.shape == (2000, 384) and embeddings.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(embeddings, axis=1), 1.0, atol=1e-5)


def test_rq_kmeans_equals_single_process(shards, single, dist):
    """Same seed (k-means++ from all rows, as the single process): identical labels at every level,
    bit-identical codebooks."""
    assert tuple(dist.sizes) == tuple(single.sizes) == SIZES
    codes = _codes(shards, len(SIZES))
    assert codes.shape == (2000, 3)
    assert np.array_equal(codes, single.codes)
    for a, b in zip(dist.codebooks, single.codebooks):
        assert np.array_equal(a, b)
    np.testing.assert_allclose(dist.inertia, single.inertia, rtol=1e-5)
    assert all(1 <= it <= 25 for it in dist.n_iter)
    # every cluster of level 0 is used, and the counts agree with the codes
    assert np.array_equal(dist.counts[0], np.bincount(single.codes[:, 0], minlength=96))


def test_given_initial_centroids_and_training_subsample(shards, embeddings):
    """Explicit per-level initial centroids and a training subsample (8 points per centroid, then a
    full assignment pass), as ops.rq_kmeans takes them."""
    from contextrag.distributed.kmeans import rq_kmeans
    rng = np.random.default_rng(11)
    inits = [embeddings[rng.choice(2000, k, replace=False)] * s for k, s in zip(SIZES, (1.0, 0.3, 0.1))]
    ref = ops.rq_kmeans(embeddings, SIZES, seed=3, init=inits, max_points_per_centroid=8, n_iter=12)
    got = rq_kmeans(shards, SIZES, seed=3, init=inits, max_points_per_centroid=8, n_iter=12)
    assert np.array_equal(_codes(shards, 3), ref.codes)
    for a, b in zip(got.codebooks, ref.codebooks):
        assert np.array_equal(a, b)


def test_tree_reduction_agrees_to_rounding(shards, single):
    """Float64 partial sums added on the driver: parallel, not bitwise; centroids agree to rounding."""
    from contextrag.distributed.kmeans import rq_kmeans
    got = rq_kmeans(shards, SIZES, seed=SEED, reduce="tree")
    for a, b in zip(got.codebooks, single.codebooks):
        np.testing.assert_allclose(a, b, atol=1e-5)
    assert (_codes(shards, 3) == single.codes).mean() > 0.99


def test_memberships_closures_and_graph_equal_single_process(ray_cluster, embeddings, tmp_path):
    """Stage 3 on the shards (FCM memberships per chunk, intents as a min of per-shard luk_up mins,
    meet cardinalities and co-occurrence counts as sums of partials) equals the single-process context
    and concept graph, although a worker dies in the middle of it."""
    from contextrag.distributed.build import build_index_arrays
    from contextrag.index.context import ChunkView, build_context
    from contextrag.index.graph import COOC, build_graph
    n = len(embeddings)
    doc_ids = [f"d{i // 3}" for i in range(n)]            # three consecutive paragraphs per document
    pos = np.arange(n, dtype=np.int32) % 3
    cfg = Config(rq_sizes=SIZES, seed=SEED, n_summaries=0, n_join=64, n_meet=64)
    ctx = build_context(ChunkView([""] * n, [""] * n, doc_ids, pos), embeddings, cfg)
    g = build_graph(ctx.dense(), ctx.members(), ctx.attr_group, doc_ids, pos, cfg)
    metas = lambda s: {"doc_ids": doc_ids[s.start:s.stop], "positions": pos[s.start:s.stop]}  # noqa: E731
    # and shard 1's process dies in the closure stage (first luk_up call): restarted, recomputed, retried
    fault = {"shard": 1, "where": "up", "marker": str(tmp_path / "died")}
    with _shardset(tmp_path, embeddings, metas=metas, doc_ids=doc_ids, fault=fault) as ss:
        out = build_index_arrays(ss, cfg)
        assert (tmp_path / "died").exists() and [i["starts"] for i in ss.info()] == [1, 2]
        # closures of the attribute concepts as a plain map-reduce: min over shards of partial ↑
        from contextrag.distributed.build import context_spec
        spec = ray_cluster.put(context_spec(out["codebooks"], cfg))
        up = np.min(ss.get(ss.map("up_partial", spec, A="attributes")), axis=0)
        # extents B↓ stay on the shards (luk_down is per chunk); their meet cardinalities are sums
        B = out["graph"].intent[:6]
        meet = np.sum(ss.get(ss.map("meet_partial", spec, B, np.arange(6), np.arange(6))), axis=0)
        ext = np.concatenate(ss.get(ss.map("extents", spec, B)), axis=1)
    rq = ctx.block("rq")
    assert np.array_equal(out["codes"], rq.rows["codes"])
    np.testing.assert_allclose(out["I"], ctx.dense(), atol=1e-6, rtol=0)
    np.testing.assert_allclose(out["residual_sq"], rq.rows["residual_sq"], rtol=1e-6)
    assert (out["members"] != ctx.members()).nnz == 0
    I = ctx.dense()
    np.testing.assert_allclose(up, np.asarray(ops.luk_up(np.ascontiguousarray(I.T), I)), atol=1e-6, rtol=0)
    E = np.asarray(ops.luk_down(out["graph"].intent[:6], I))
    np.testing.assert_allclose(ext, E, atol=1e-6, rtol=0)
    np.testing.assert_allclose(meet, np.asarray(ops.meet_cardinality(E.astype(np.float64), E.astype(np.float64))),
                               rtol=1e-6)
    g2 = out["graph"]
    assert g2.n_nodes == g.n_nodes and g.n_nodes > len(set(g.attr[g.kind == 0])) > 0
    assert np.array_equal(g2.kind, g.kind) and np.array_equal(g2.parents, g.parents)
    assert np.array_equal(g2.attr, g.attr)
    np.testing.assert_allclose(g2.intent, g.intent, atol=1e-6, rtol=0)
    assert (g2.members != g.members).nnz == 0
    np.testing.assert_allclose(g2.score, g.score, rtol=1e-5)

    def edges(gr, kind):
        m = gr.edge_kind == kind
        return sorted(zip(gr.edge_src[m].tolist(), gr.edge_dst[m].tolist(), gr.edge_weight[m].tolist()))
    assert edges(g2, COOC) == edges(g, COOC) and len(edges(g, COOC)) > 0
    a, b = edges(g2, 0), edges(g, 0)
    assert [x[:2] for x in a] == [x[:2] for x in b]
    np.testing.assert_allclose([x[2] for x in a], [x[2] for x in b], rtol=1e-5)


@pytest.mark.parametrize("where", ["assign", "fold"])
def test_worker_exit_mid_iteration_is_retried_with_same_result(ray_cluster, embeddings, single, tmp_path, where):
    """A shard process exits (os._exit) inside an iteration on its first attempt: Ray restarts the
    actor, it reloads its shard file and codes, the call is retried, and the result is unchanged."""
    from contextrag.distributed.kmeans import rq_kmeans
    fault = {"shard": 1, "where": where, "level": 1, "iteration": 2, "marker": str(tmp_path / "died")}
    with _shardset(tmp_path, embeddings, fault=fault) as ss:
        got = rq_kmeans(ss, SIZES, seed=SEED)
        assert (tmp_path / "died").exists()
        info = ss.info()
        assert info[1]["starts"] == 2 and info[0]["starts"] == 1
        assert np.array_equal(_codes(ss, 3), single.codes)
    for a, b in zip(got.codebooks, single.codebooks):
        assert np.array_equal(a, b)


def test_ray_kill_during_iteration_does_not_change_result(ray_cluster, embeddings, single, tmp_path):
    """ray.kill on a shard actor (with restarts) while an iteration is in flight."""
    from contextrag.distributed.kmeans import rq_kmeans
    killed = []

    def kill(level, it, ss):
        if level == 2 and it == 1 and not killed:
            ray_cluster.kill(ss.actors[0], no_restart=False)
            killed.append((level, it))
    with _shardset(tmp_path, embeddings) as ss:
        got = rq_kmeans(ss, SIZES, seed=SEED, on_iteration=kill)
        assert killed == [(2, 1)]
        assert ss.info()[0]["starts"] == 2
        assert np.array_equal(_codes(ss, 3), single.codes)
    for a, b in zip(got.codebooks, single.codebooks):
        assert np.array_equal(a, b)
