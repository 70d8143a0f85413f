"""End to end with the real index and queries: 20 HotpotQA questions, retrieval only, every system,
then the CLI on the same data reusing the cached index."""
import json

import pytest

pytest.importorskip("contextrag.rag", reason="contextrag.rag (the index) is not installed")
pytest.importorskip("bm25s")
pytest.importorskip("sentence_transformers")

from contextrag.eval import run  # noqa: E402
from contextrag.eval.systems import ALL_SYSTEMS  # noqa: E402
from shared_data import hotpot_file  # noqa: E402

N = 20


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("eval-index-cache")


@pytest.fixture(scope="module")
def first(data, cache, tmp_path_factory):
    out = tmp_path_factory.mktemp("e2e")
    res = run(hotpot_file(data), format="hotpotqa", out=out, limit=N, cache_dir=cache, progress=False)
    return out, res


def test_all_systems_from_one_index(first, cache):
    out, res = first
    assert list(res["systems"]) == list(ALL_SYSTEMS)
    assert res["backend"] == "contextrag" and res["answers"] is False
    # the flat baselines and contextrag read the same index; only the paper's config may need another
    shared = [info for info in res["indexes"].values() if "hybrid" in info["systems"]]
    assert len(shared) == 1 and "contextrag" in shared[0]["systems"] and "bm25" in shared[0]["systems"]
    assert len(res["indexes"]) <= 2
    # passage embeddings went to the cache that later rebuilds read
    import sqlite3
    with sqlite3.connect(cache / "embeddings.sqlite") as db:
        n = db.execute("SELECT COUNT(*) FROM emb").fetchone()[0]
    assert n >= 200
    for name, m in res["systems"].items():
        assert m["n"] == N, name
        assert 0 <= m["recall@2"] <= m["recall@5"] <= m["recall@10"] <= 100, name
        assert m["latency_p50_ms"] > 0 and m["latency_p95_ms"] >= m["latency_p50_ms"]
        assert m["index_llm_tokens"] == 0            # no LLM: the graph costs no tokens
    # a 200-paragraph corpus is easy: lexical and dense retrieval find most gold passages
    for name in ("bm25", "dense", "hybrid"):
        assert res["systems"][name]["recall@5"] >= 50, (name, res["systems"][name])


def test_rows_are_consistent_with_the_corpus(first, data):
    out, res = first
    from contextrag.eval import datasets as D
    qa = D.load(hotpot_file(data), "hotpotqa", limit=N)
    ids = {d.id for d in qa.corpus}
    rows = [json.loads(x) for x in (out / "questions.jsonl").read_text().splitlines()]
    assert len(rows) == N * len(ALL_SYSTEMS)
    for r in rows:
        assert set(r["ranked"]) <= ids and len(r["ranked"]) == len(set(r["ranked"]))
        kinds = {h[0] for h in r["hits"]}
        if r["system"] in ("bm25", "dense", "hybrid", "hybrid_renorm"):
            assert kinds <= {"chunk"}, (r["system"], kinds)
        if r["system"] == "contextrag_no_summaries":
            assert "summary" not in kinds
    # Table 4 comes from the index's own stats
    occ = [rows_ for rows_ in res["occupancy"].values() if rows_]
    assert occ and len(occ[0]) >= 2 and all("occupancy" in r for r in occ[0])
    md = (out / "report.md").read_text()
    assert "contextrag_paper" in md and "Table 3" in md


def test_cli_reuses_cached_index_and_reproduces(first, data, cache, tmp_path, capsys):
    from contextrag.cli import main
    out, res = first
    rc = main(["eval", str(hotpot_file(data)), "--format", "hotpotqa", "--out", str(tmp_path / "cli"),
               "--limit", str(N), "--no-llm", "--cache-dir", str(cache), "--systems", "bm25,hybrid", "--quiet"])
    assert rc == 0
    printed = capsys.readouterr().out
    assert "hybrid" in printed and "report:" in printed
    again = json.loads((tmp_path / "cli" / "results.json").read_text())
    assert all(info["from_cache"] for info in again["indexes"].values())
    for name in ("bm25", "hybrid"):
        for k in ("recall@2", "recall@5", "recall@10"):
            assert again["systems"][name][k] == res["systems"][name][k], (name, k)
