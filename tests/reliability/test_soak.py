"""The soak, short: writes, queries, reloads and LLM faults interleaved for 25 s; nothing fails but the
scripted LLM's own faults, and memory stays flat (the long run: bench/bench_reliability.py --soak)."""
from __future__ import annotations

from hash_embedder import HashEmbedder
from soak import run


def test_soak_short(tiny, paragraphs):
    out = run(tiny, paragraphs[40:], 25, embedder=HashEmbedder())
    assert out["errors"] == [], out["errors"]
    assert out["query_errors"] == out["write_errors"] == out["answer_errors"] == 0
    assert out["steps"] >= 5 and out["queries"] > out["steps"] and out["llm_faults"] >= 1
    assert out["rss_mib_per_step"] < 0.5, out["rss_samples"]      # each index kept alive: 2-3 MiB a step
    assert out["rss_growth_mib"] < 40, out["rss_samples"]
