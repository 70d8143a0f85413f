"""Diagnostics in the shape of the paper's tables, plus the ablation the paper lacks.

* :func:`activation` – §7 / Table 3: the share of queries with at least one lattice-derived item
  (cluster summary, bridge/join or meet node: any non-chunk hit) in the top 5, and the metrics of
  activated against non-activated queries (correlational, as the paper says).
* :func:`graph_effect` – what the graph changes against flat hybrid on the *same* questions and index:
  how often the top 5 differs, gold passages promoted into / pushed out of the top 5, questions won
  and lost at recall@5. This is the causal comparison §7 cannot make.
* :func:`score_parts` – mean and spread of each score component over the top-5 hits (is the fuzzy term
  informative at all, or a near-constant?).
* :func:`occupancy` – §8.1 / Table 4: per-level cluster occupancy, read from ``rag.stats()``.
* :func:`token_breakdown` – Appendix B / Table 6: LLM calls and tokens per stage, index and queries.
* :func:`per_type` – every metric per question type (bridge/comparison, 2hop/3hop, inference/temporal…).
"""
from __future__ import annotations

from collections import defaultdict
from typing import Any, Iterable

from . import metrics as M

PCT_METRICS = tuple(f"{m}@{k}" for m in ("recall", "complete", "strict_recall") for k in M.K_VALUES) + (
    "em", "f1", "answer_context_recall")


def _pct(v):
    return None if v is None else round(100.0 * v, 2)


def aggregate(rows: list[dict]) -> dict[str, Any]:
    """Metrics of one system over its rows: percentages for recall/EM/F1, milliseconds for latency."""
    out: dict[str, Any] = {"n": len(rows), "n_with_gold": sum(1 for r in rows if r.get("gold"))}
    for m in PCT_METRICS:
        vals = [r.get(m) for r in rows if r.get(m) is not None]
        if vals:
            out[m] = _pct(M.mean(vals))
    lat = [r["latency_ms"] for r in rows if r.get("latency_ms") is not None]
    if lat:
        out["latency_p50_ms"] = round(M.percentile(lat, 50), 3)
        out["latency_p95_ms"] = round(M.percentile(lat, 95), 3)
        out["latency_mean_ms"] = round(M.mean(lat), 3)
    noemb = [r["latency_ms"] - r["embed_ms"] for r in rows
             if r.get("latency_ms") is not None and r.get("embed_ms") is not None]
    if noemb:
        out["latency_no_embed_p50_ms"] = round(M.percentile(noemb, 50), 3)
        out["latency_no_embed_p95_ms"] = round(M.percentile(noemb, 95), 3)
        out["embed_p50_ms"] = round(M.percentile([r["embed_ms"] for r in rows if r.get("embed_ms") is not None], 50), 3)
    alat = [r["answer_latency_ms"] for r in rows if r.get("answer_latency_ms") is not None]
    if alat:
        out["answer_latency_p50_ms"] = round(M.percentile(alat, 50), 3)
        out["answer_latency_p95_ms"] = round(M.percentile(alat, 95), 3)
    llm_rows = [r["llm"] for r in rows if isinstance(r.get("llm"), dict)]
    if llm_rows:
        n = len(llm_rows)
        tot = defaultdict(float)
        for led in llm_rows:
            for stage, c in led.items():
                if stage == "total":
                    continue
                for f in ("calls", "cached_calls", "prompt_tokens", "completion_tokens", "seconds"):
                    tot[f] += float(c.get(f, 0) or 0)
        out["llm_calls_per_query"] = round(tot["calls"] / n, 3)
        # calls answered by the on-disk cache (e.g. a question's rewrites, made once and shared by
        # every system of the run): they cost no new tokens, so they are counted apart
        out["llm_cached_calls_per_query"] = round(tot["cached_calls"] / n, 3)
        out["llm_prompt_tokens_per_query"] = round(tot["prompt_tokens"] / n, 1)
        out["llm_completion_tokens_per_query"] = round(tot["completion_tokens"] / n, 1)
        out["llm_tokens_per_query"] = round((tot["prompt_tokens"] + tot["completion_tokens"]) / n, 1)
        out["llm_seconds_per_query"] = round(tot["seconds"] / n, 3)
    out["virtual_top5_share"] = _pct(M.mean([float(r.get("virtual_top5", 0) > 0) for r in rows])) if rows else None
    return out


def recall_curve(rows: list[dict], ks: Iterable[int] = M.CURVE_KS) -> dict[int, float]:
    out = {}
    gold_rows = [r for r in rows if r.get("gold")]
    for k in ks:
        v = M.mean(M.recall_at_k(r.get("ranked", []), r["gold"], k) for r in gold_rows)
        if v is not None:
            out[k] = _pct(v)
    return out


def per_type(rows: list[dict]) -> dict[str, dict]:
    by = defaultdict(list)
    for r in rows:
        by[r.get("type") or "-"].append(r)
    keep = ("n", "recall@2", "recall@5", "recall@10", "complete@5", "em", "f1")
    return {t: {k: v for k, v in aggregate(rs).items() if k in keep} for t, rs in sorted(by.items())}


def activation(rows: list[dict], top: int = 5) -> dict[str, Any]:
    """Table 3: queries with a lattice-derived (virtual) item in the top ``top`` vs without."""
    def key(r):  # with answers: the context the LLM saw; retrieval-only: the retrieved top 5
        return r["answer_virtual_top5"] if "answer_virtual_top5" in r else r.get("virtual_top5", 0)
    act = [r for r in rows if (key(r) or 0) > 0]
    non = [r for r in rows if (key(r) or 0) == 0]
    keep = ("n", "recall@2", "recall@5", "recall@10", "em", "f1")
    return {"top": top, "activated_share": _pct(len(act) / len(rows)) if rows else None,
            "activated": {k: v for k, v in aggregate(act).items() if k in keep},
            "not_activated": {k: v for k, v in aggregate(non).items() if k in keep}}


def graph_effect(rows: list[dict], ref_rows: list[dict], k: int = 5) -> dict[str, Any]:
    """Against a flat reference system on the same questions: changes in the top k and who they help."""
    ref = {r["qid"]: r for r in ref_rows}
    n = changed = promoted = demoted = gold_in = gold_out = won = lost = 0
    for r in rows:
        f = ref.get(r["qid"])
        if f is None:
            continue
        n += 1
        a, b = r.get("ranked", [])[:k], f.get("ranked", [])[:k]
        gold = set(r.get("gold") or [])
        ins, outs = set(a) - set(b), set(b) - set(a)
        if ins or outs:
            changed += 1
        promoted += len(ins)
        demoted += len(outs)
        gold_in += len(ins & gold)
        gold_out += len(outs & gold)
        ra, rb = r.get(f"recall@{k}"), f.get(f"recall@{k}")
        if ra is not None and rb is not None:
            won += ra > rb
            lost += ra < rb
    return {"k": k, "questions": n, "top_k_changed_share": _pct(changed / n) if n else None,
            "promoted_per_query": round(promoted / n, 3) if n else None,
            "gold_promoted": gold_in, "gold_demoted": gold_out,
            "promoted_precision": _pct(gold_in / promoted) if promoted else None,
            "questions_won": won, "questions_lost": lost}


def score_parts(rows: list[dict], top: int = 5) -> dict[str, dict]:
    vals = defaultdict(list)
    for r in rows:
        for h in (r.get("hits") or [])[:top]:
            parts = h[3] if len(h) > 3 and isinstance(h[3], dict) else {}
            for name, v in parts.items():
                vals[name].append(float(v))
    out = {}
    for name, v in sorted(vals.items()):
        m = sum(v) / len(v)
        sd = (sum((x - m) ** 2 for x in v) / len(v)) ** 0.5
        out[name] = {"mean": round(m, 4), "std": round(sd, 4), "nonzero_share": _pct(sum(1 for x in v if x) / len(v))}
    return out


def _find(d: Any, names: tuple[str, ...], depth: int = 0):
    """First value under any key in ``names`` (breadth-first through nested dicts)."""
    if not isinstance(d, dict) or depth > 4:
        return None
    for n in names:
        if n in d:
            return d[n]
    for v in d.values():
        got = _find(v, names, depth + 1)
        if got is not None:
            return got
    return None


def occupancy(stats: dict) -> list[dict]:
    """Table 4 rows (one per RQ-KMeans level) from an index's stats, whatever their exact nesting."""
    occ = _find(stats, ("occupancy", "per_level_occupancy", "level_occupancy", "levels"))
    rows: list[dict] = []
    if isinstance(occ, dict):
        occ = [dict(v, level=k) if isinstance(v, dict) else {"level": k, "occupancy": v} for k, v in occ.items()]
    if isinstance(occ, list):
        for i, v in enumerate(occ):
            if isinstance(v, dict):
                rows.append(dict({"level": i}, **v))
            elif isinstance(v, (int, float)):
                rows.append({"level": i, "occupancy": v})
    return rows


def index_cost(stats: dict) -> dict:
    """Index-time LLM ledger (per stage + total) from an index's stats."""
    led = _find(stats, ("llm_cost", "ledger", "llm", "cost"))
    return led if isinstance(led, dict) else {}


def token_breakdown(index_ledger: dict, rows: list[dict]) -> dict[str, dict]:
    """Table 6: per stage, calls and tokens; index stages in total, query stages per query."""
    out: dict[str, dict] = {}
    for stage, c in (index_ledger or {}).items():
        if stage == "total" or not isinstance(c, dict):
            continue
        out[f"index/{stage}"] = {f: c.get(f, 0) for f in ("calls", "cached_calls", "prompt_tokens",
                                                          "completion_tokens", "seconds")}
    llm_rows = [r["llm"] for r in rows if isinstance(r.get("llm"), dict)]
    if llm_rows:
        agg = defaultdict(lambda: defaultdict(float))
        for led in llm_rows:
            for stage, c in led.items():
                for f in ("calls", "cached_calls", "prompt_tokens", "completion_tokens", "seconds"):
                    agg[stage][f] += float(c.get(f, 0) or 0)
        n = len(llm_rows)
        for stage, c in agg.items():
            if stage == "total" or not any(c.values()):
                continue
            out[f"query/{stage} (per query)"] = {f: round(v / n, 3) for f, v in c.items()}
    return out
