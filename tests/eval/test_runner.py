"""Runner: one index for all systems, report files, resume after an interruption, CLI.

These use a small lexical backend defined here (real retrieval by word overlap on real HotpotQA
text, with one virtual 'summary' item per query) so the runner's logic is tested in seconds; the
end-to-end test with ContextRAG is in test_end_to_end.py.
"""
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from contextrag.eval import datasets as D
from contextrag.eval import runner as R
from contextrag.eval.systems import FLAT_SYSTEMS, make_systems
from shared_data import hotpot_file


@dataclass
class _Hit:
    id: str
    doc_id: str
    kind: str
    text: str
    score: float
    parts: dict = field(default_factory=dict)


def _words(s):
    return set(re.findall(r"[a-z0-9]+", s.lower())) - {"the", "a", "of", "in", "is", "was", "what", "which", "who"}


class OverlapRAG:
    builds = 0
    calls = 0
    fail_after = None           # raise KeyboardInterrupt after this many retrieve calls
    seen_overrides: list = []

    def __init__(self, docs, config):
        from contextrag.config import Config
        self.docs, self.config = docs, Config.from_dict(config)
        self.words = [_words(d["title"] + " " + d["text"]) for d in docs]

    @classmethod
    def build(cls, docs, path, config=None):
        cls.builds += 1
        Path(path).mkdir(parents=True)
        (Path(path) / "ix.json").write_text(json.dumps({"docs": docs, "config": config.to_dict()}))
        return cls.load(path)

    @classmethod
    def load(cls, path):
        d = json.loads((Path(path) / "ix.json").read_text())
        return cls(d["docs"], d["config"])

    def retrieve(self, question, k=12, doc_ids=None, **overrides):
        from contextrag.query import QUERY_FIELDS
        assert set(overrides) <= set(QUERY_FIELDS), overrides
        cls = type(self)
        cls.calls += 1
        cls.seen_overrides.append(dict(overrides))
        if cls.fail_after is not None and cls.calls > cls.fail_after:
            raise KeyboardInterrupt
        q = _words(question)
        w_cos = overrides.get("w_cos", self.config.w_cos)
        scores = [len(q & w) / (1 + (0.0 if w_cos else 0.1) * len(w)) for w in self.words]
        order = sorted(range(len(scores)), key=lambda i: -scores[i])[:k]   # plus one summary item
        hits = [_Hit("summary:0", None, "summary", "a cluster summary", 9.0, {"boost": 1.2})]
        hits += [_Hit(self.docs[i]["id"], self.docs[i]["id"], "chunk", self.docs[i]["text"], scores[i],
                      {"bm25": scores[i]}) for i in order]
        return hits

    def stats(self):
        return {"docs": len(self.docs), "chunks": len(self.docs),
                "occupancy": [{"level": 0, "clusters": 4, "occupancy": 0.75}],
                "llm_cost": {"total": {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0}}}


@pytest.fixture
def fresh_backend():
    OverlapRAG.builds = OverlapRAG.calls = 0
    OverlapRAG.fail_after = None
    OverlapRAG.seen_overrides = []
    yield OverlapRAG
    OverlapRAG.fail_after = None


def _run(data, out, cache, backend, limit=8, **kw):
    return R.run(hotpot_file(data), format="hotpotqa", out=out, limit=limit, cache_dir=cache,
                 backend=backend, progress=False, **kw)


def test_run_writes_report_and_shares_one_index(tmp_path, data, fresh_backend):
    res = _run(data, tmp_path / "out", tmp_path / "cache", fresh_backend)
    # one index for the flat baselines and contextrag; Config.paper() builds its own (it keeps the RQ
    # lattice's join/meet items, the default builds none)
    assert fresh_backend.builds == 2
    shared = [i for i in res["indexes"].values() if "hybrid" in i["systems"]]
    assert len(shared) == 1 and {"bm25", "dense", "hybrid", "contextrag"} <= set(shared[0]["systems"])
    out = tmp_path / "out"
    for f in ("report.md", "results.json", "questions.jsonl", "recall_at_k.png", "cost.png"):
        assert (out / f).stat().st_size > 0, f
    assert (out / "recall_at_k.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    on_disk = json.loads((out / "results.json").read_text())
    assert on_disk["systems"].keys() == res["systems"].keys()
    names = set(on_disk["systems"])
    assert {"bm25", "dense", "hybrid", "hybrid_renorm", "contextrag", "contextrag_no_summaries"} <= names
    for name, m in on_disk["systems"].items():
        for key in ("recall@2", "recall@5", "recall@10", "latency_p50_ms", "latency_p95_ms"):
            assert isinstance(m[key], (int, float)), (name, key)
        assert 0 <= m["recall@2"] <= m["recall@5"] <= m["recall@10"] <= 100
        assert m["n"] == 8
    # virtual items: dropped by the flat systems and by no_summaries, kept (and activated) by contextrag
    assert on_disk["systems"]["contextrag"]["virtual_top5_share"] == 100.0
    assert on_disk["systems"]["hybrid"]["virtual_top5_share"] == 0.0
    assert on_disk["systems"]["contextrag_no_summaries"]["virtual_top5_share"] == 0.0
    # strict recall charges the summary a slot; plain recall skips it
    c = on_disk["systems"]["contextrag"]
    assert c["strict_recall@2"] <= c["recall@2"]
    assert on_disk["diagnostics"]["contextrag"]["activation"]["activated_share"] == 100.0
    assert on_disk["occupancy"] and list(on_disk["occupancy"].values())[0][0]["occupancy"] == 0.75
    assert on_disk["dataset"]["questions"] == 8 and on_disk["machine"]["cpus"] >= 1
    md = (out / "report.md").read_text()
    assert "| hybrid |" in md and "Activation analysis" in md and "Table 4" in md
    assert "**recall@5**: best flat baseline" in md
    rows = [json.loads(x) for x in (out / "questions.jsonl").read_text().splitlines()]
    assert len(rows) == 8 * len(names)
    # per-question recall agrees with the documents recorded for it
    for r in rows:
        got = len(set(r["gold"]) & set(r["ranked"][:5])) / len(r["gold"])
        assert r["recall@5"] == pytest.approx(got)


def test_resume_skips_done_questions(tmp_path, data, fresh_backend):
    out, cache = tmp_path / "out", tmp_path / "cache"
    systems = ["bm25", "contextrag"]
    fresh_backend.fail_after = 1 + 8 + 1 + 3     # warm-up + 8 bm25 questions, warm-up + 3 contextrag ones
    with pytest.raises(KeyboardInterrupt):
        _run(data, out, cache, fresh_backend, systems=systems)
    rows = (out / "questions.jsonl").read_text().splitlines()
    assert len(rows) == 8 + 3
    fresh_backend.fail_after = None
    fresh_backend.calls = 0
    res = _run(data, out, cache, fresh_backend, systems=systems)
    assert fresh_backend.builds == 1                        # the cached index was reused
    assert fresh_backend.calls == 1 + 5                      # warm-up + the 5 missing questions only
    assert res["run"]["resumed_rows"] == 11 and res["run"]["new_rows"] == 5
    rows = [json.loads(x) for x in (out / "questions.jsonl").read_text().splitlines()]
    assert sorted((r["system"], r["qid"]) for r in rows) == sorted({(r["system"], r["qid"]) for r in rows})
    assert res["systems"]["contextrag"]["n"] == 8
    # a third run has nothing left to do
    fresh_backend.calls = 0
    _run(data, out, cache, fresh_backend, systems=systems)
    assert fresh_backend.calls == 0


def test_changed_config_does_not_reuse_rows(tmp_path, data, fresh_backend):
    from contextrag.config import Config
    out, cache = tmp_path / "out", tmp_path / "cache"
    _run(data, out, cache, fresh_backend, systems=["contextrag"], limit=4)
    fresh_backend.calls = 0
    res = _run(data, out, cache, fresh_backend, systems=["contextrag"], limit=4, config=Config(w_fuzzy=0.1))
    assert fresh_backend.calls == 1 + 4 and res["run"]["resumed_rows"] == 0
    assert fresh_backend.builds == 1                         # a query-only change keeps the index
    _run(data, out, cache, fresh_backend, systems=["contextrag"], limit=4, config=Config(n_join=5))
    assert fresh_backend.builds == 2                         # an index-time change rebuilds it


def test_flat_systems_switch_the_graph_off():
    from contextrag.config import Config
    for s in make_systems(Config()):
        if s.name in FLAT_SYSTEMS:
            assert s.overrides.get("w_fuzzy") == 0.0 and s.overrides.get("boost_bridge") == 1.0
            assert s.drop_kinds == ("virtual",)
    w = {s.name: (s.overrides["w_bm25"], s.overrides["w_cos"]) for s in make_systems(Config()) if s.flat}
    assert w == {"bm25": (1.0, 0.0), "dense": (0.0, 1.0), "hybrid": (0.3, 0.5), "hybrid_renorm": (0.375, 0.625)}
    with pytest.raises(ValueError, match="systems"):
        make_systems(Config(), ["bm25", "colbert"])
    with pytest.raises(TypeError, match="config"):
        make_systems({"w_bm25": 1})


def test_run_rejects_bad_arguments(tmp_path, data, fresh_backend):
    with pytest.raises(ValueError, match="format"):
        R.run(hotpot_file(data), format="nq", out=tmp_path, backend=fresh_backend)
    with pytest.raises(TypeError, match="config"):
        _run(data, tmp_path / "o", tmp_path / "c", fresh_backend, config=42)
    with pytest.raises(TypeError, match="llm"):
        _run(data, tmp_path / "o", tmp_path / "c", fresh_backend, llm=3.5)
    with pytest.raises(ValueError, match="retrieve_k"):
        _run(data, tmp_path / "o", tmp_path / "c", fresh_backend, retrieve_k=5)


def test_cli_parses_and_reports_errors(tmp_path, data, capsys):
    from contextrag.cli import main
    with pytest.raises(SystemExit):
        main(["eval", str(hotpot_file(data)), "--format", "squad", "--out", str(tmp_path)])
    rc = main(["eval", str(tmp_path / "missing.json"), "--format", "hotpotqa", "--out", str(tmp_path / "o")])
    assert rc == 2 and "missing.json" in capsys.readouterr().err
    rc = main(["eval", str(hotpot_file(data)), "--format", "hotpotqa", "--out", str(tmp_path / "o"),
               "--limit", "0"])
    assert rc == 2


class _Answer:
    def __init__(self, text, hits):
        self.text, self.hits = text, hits


class AnsweringRAG(OverlapRAG):
    """Answers with the title of its best passage through the LLM client, as one 'answer' stage call."""
    styles: list = []

    def answer(self, question, llm=None, style=None, **overrides):
        AnsweringRAG.styles.append(style)
        hits = self.retrieve(question, k=5, **overrides)
        best = next(h for h in hits if h.kind == "chunk")
        title = next(d["title"] for d in self.docs if d["id"] == best.doc_id)
        c = llm.complete([{"role": "user", "content": f"Say: {title}"}], stage="answer")
        return _Answer(c.text, hits)


def test_answers_with_an_llm_client(tmp_path, data, fresh_backend, hotpot):
    from contextrag.llm import Completion, LLMClient

    class EchoLLM(LLMClient):
        model = "echo"

        def _generate(self, messages, *, max_tokens, temperature):
            text = messages[-1]["content"].removeprefix("Say: ")
            return Completion(text, prompt_tokens=len(messages[-1]["content"].split()), completion_tokens=3)

    llm = EchoLLM()
    AnsweringRAG.styles.clear()
    res = R.run(hotpot_file(data), format="hotpotqa", out=tmp_path / "o", limit=6,
                cache_dir=tmp_path / "c", backend=AnsweringRAG, progress=False, llm=llm,
                systems=["hybrid", "contextrag"])
    rows = [json.loads(x) for x in (tmp_path / "o" / "questions.jsonl").read_text().splitlines()]
    assert len(rows) == 12
    assert AnsweringRAG.styles == ["short"] * 12      # asked for explicitly: the default depends on the model
    from contextrag.eval.metrics import exact_match, token_f1
    for r in rows:
        q = hotpot[[h["_id"] for h in hotpot].index(r["qid"])]
        assert r["em"] == exact_match(r["answer"], q["answer"]) and r["f1"] == token_f1(r["answer"], q["answer"])
        assert r["llm"]["answer"]["calls"] == 1 and r["llm"]["answer"]["completion_tokens"] == 3
    m = res["systems"]["contextrag"]
    assert m["llm_calls_per_query"] == 1.0 and m["llm_completion_tokens_per_query"] == 3.0
    assert 0 <= m["em"] <= m["f1"] <= 100 and "answer_latency_p50_ms" in m
    assert res["answers"] is True and res["llm"] == "echo"
    tb = res["diagnostics"]["contextrag"]["token_breakdown"]
    assert tb["query/answer (per query)"]["calls"] == 1.0
    md = (tmp_path / "o" / "report.md").read_text()
    assert "## Answers" in md and "query/answer" in md and "cached calls" in md


class TwoChunkRAG(OverlapRAG):
    """Every document comes back as two chunks: k hits cover only k/2 documents."""

    def retrieve(self, question, k=12, doc_ids=None, **overrides):
        hits = [h for h in super().retrieve(question, k=k, **overrides) if h.kind == "chunk"]
        out = []
        for h in hits:
            out += [h, _Hit(h.id + "#2", h.doc_id, "chunk", h.text, h.score * 0.99, h.parts)]
        return out[:k]


def test_deeper_calls_fill_the_document_list(tmp_path, data, fresh_backend):
    TwoChunkRAG.calls = 0
    res = R.run(hotpot_file(data), format="hotpotqa", out=tmp_path / "o", limit=4,
                cache_dir=tmp_path / "c", backend=TwoChunkRAG, progress=False, systems=["hybrid"])
    rows = [json.loads(x) for x in (tmp_path / "o" / "questions.jsonl").read_text().splitlines()]
    for r in rows:
        assert len(r["ranked"]) == 20 and len(set(r["ranked"])) == 20
    # one timed call of k=20 (10 documents), then one deeper untimed call, per question and for the warm-up
    assert TwoChunkRAG.calls == 2 + 2 * 4
    assert res["systems"]["hybrid"]["recall@10"] >= res["systems"]["hybrid"]["recall@5"]


def test_shared_query_embeddings_embed_each_question_once():
    import numpy as np
    from contextrag.eval.embed_cache import SharedQueryEmbeddings

    class Counting:
        dim = 3
        calls = 0

        def embed_queries(self, texts):
            Counting.calls += len(texts)
            return np.array([[len(t), 1.0, 0.0] for t in texts], dtype=np.float32)

    s = SharedQueryEmbeddings(Counting())
    a = s.embed_queries(["who?", "where?"])
    assert s.take_reused_ms() == 0.0
    b = s.embed_queries(["where?", "who?", "when?"])
    assert Counting.calls == 3
    assert np.array_equal(b[0], a[1]) and np.array_equal(b[1], a[0]) and b[2][0] == 5
    assert s.take_reused_ms() > 0 and s.take_reused_ms() == 0.0     # taken once
    assert s.dim == 3                                                # everything else delegates


def test_query_threads_validated_and_restored(tmp_path, data, fresh_backend):
    torch = pytest.importorskip("torch")
    before = torch.get_num_threads()
    with pytest.raises(ValueError, match="query_threads"):
        _run(data, tmp_path / "o", tmp_path / "c", fresh_backend, query_threads=0)
    res = _run(data, tmp_path / "o", tmp_path / "c", fresh_backend, limit=2, systems=["bm25"], query_threads=1)
    assert res["run"]["query_threads"] == 1 and torch.get_num_threads() == before


def test_each_system_queries_with_its_own_settings(tmp_path, data, fresh_backend):
    from contextrag.config import Config
    from contextrag.query import QUERY_FIELDS
    cfg = Config(w_fuzzy=0.1, candidates=30)
    _run(data, tmp_path / "o", tmp_path / "c", fresh_backend, limit=2, config=cfg,
         systems=["contextrag", "contextrag_paper", "bm25"])
    per = len(fresh_backend.seen_overrides) // 3
    # systems run index by index (the paper's configuration has its own): tell them apart by w_fuzzy
    by_fuzzy = {o["w_fuzzy"]: o for o in (fresh_backend.seen_overrides[i * per] for i in range(3))}
    mine, paper, bm25 = by_fuzzy[0.1], by_fuzzy[Config.paper().w_fuzzy], by_fuzzy[0.0]
    assert set(mine) == set(QUERY_FIELDS)
    assert mine["w_fuzzy"] == 0.1 and mine["candidates"] == 30
    want = Config.paper()
    assert all(paper[k] == getattr(want, k) for k in QUERY_FIELDS)      # not the index's stored settings
    assert bm25["w_bm25"] == 1.0 and bm25["w_cos"] == 0.0 and bm25["w_fuzzy"] == 0.0
    assert all(v == 0.0 for k, v in bm25.items() if k.startswith("w_") and k not in ("w_bm25", "w_cos"))


def test_shared_embeddings_report_computed_time():
    import numpy as np
    from contextrag.eval.embed_cache import SharedQueryEmbeddings

    class Slow:
        def embed_queries(self, texts):
            import time
            time.sleep(0.01 * len(texts))
            return np.ones((len(texts), 2), dtype=np.float32)

    s = SharedQueryEmbeddings(Slow())
    s.embed_queries(["a"])
    c = s.take_computed_ms()
    assert c >= 10 and s.take_reused_ms() == 0.0
    s.embed_queries(["a"])
    assert s.take_computed_ms() == 0.0 and s.take_reused_ms() == pytest.approx(c)


def test_config_from_a_json_file(tmp_path, data, fresh_backend):
    (tmp_path / "cfg.json").write_text(json.dumps({"w_fuzzy": 0.05, "n_join": 7}))
    res = _run(data, tmp_path / "o", tmp_path / "c", fresh_backend, limit=2, systems=["contextrag"],
               config=str(tmp_path / "cfg.json"))
    assert res["config"]["w_fuzzy"] == 0.05 and res["config"]["n_join"] == 7
    assert fresh_backend.seen_overrides[-1]["w_fuzzy"] == 0.05
    (tmp_path / "bad.json").write_text(json.dumps({"w_fuzz": 1}))
    with pytest.raises(ValueError, match="w_fuzz"):
        _run(data, tmp_path / "o2", tmp_path / "c", fresh_backend, config=str(tmp_path / "bad.json"))
    (tmp_path / "list.json").write_text("[1, 2]")
    with pytest.raises(ValueError, match="config"):
        _run(data, tmp_path / "o2", tmp_path / "c", fresh_backend, config=str(tmp_path / "list.json"))


def test_rows_of_another_configuration_are_dropped_from_the_file(tmp_path, data, fresh_backend):
    from contextrag.config import Config
    out, cache = tmp_path / "out", tmp_path / "cache"
    _run(data, out, cache, fresh_backend, systems=["contextrag"], limit=3)
    _run(data, out, cache, fresh_backend, systems=["contextrag"], limit=3, config=Config(w_fuzzy=0.3))
    rows = [json.loads(x) for x in (out / "questions.jsonl").read_text().splitlines()]
    assert len(rows) == 3 and len({r["fp"] for r in rows}) == 1
