"""results.json, report.md and PNG plots from the per-question rows."""
from __future__ import annotations

import datetime as _dt
import json
import os
from pathlib import Path
from typing import Any

from . import diagnostics as D
from .env import machine, versions
from .jsonable import jsonable

FLAT_REFERENCE = "hybrid"


def build_results(qa, systems, rows, index_info, client, cfg, backend_name, run_info) -> dict[str, Any]:
    by_sys: dict[str, list[dict]] = {s.name: [] for s in systems}
    for r in rows:                       # latest row per (system, question) wins
        if r.get("system") in by_sys:
            by_sys[r["system"]].append(r)
    for name, rs in by_sys.items():
        last = {r["qid"]: r for r in rs}
        order = {q.id: i for i, q in enumerate(qa.questions)}
        by_sys[name] = sorted((r for r in last.values() if r["qid"] in order), key=lambda r: order[r["qid"]])

    idx_of = {n: key for key, info in index_info.items() for n in info["systems"]}
    res: dict[str, Any] = {
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "dataset": qa.summary(), "backend": backend_name, "config": cfg.to_dict(),
        "llm": getattr(client, "model", None) if client is not None else None,
        "answers": client is not None,
        "systems": {}, "systems_config": {s.name: s.to_dict() for s in systems},
        "per_type": {}, "recall_curve": {}, "diagnostics": {}, "indexes": {}, "run": run_info,
        "versions": versions(), "machine": machine(),
        "definitions": {
            "recall@k": "percent of gold passages among the first k distinct documents of the chunk hits "
                        "(virtual summary/bridge/meet items skipped)",
            "strict_recall@k": "same within the first k items of any kind (virtual items occupy a slot)",
            "complete@k": "percent of questions with every gold passage in the first k documents",
            "em/f1": "SQuAD-normalised exact match / token F1, best over the answer aliases",
            "latency": "wall time of one rag.retrieve call in ms (no LLM), after one warm-up query"},
    }
    for key, info in index_info.items():
        res["indexes"][key[:24]] = {k: v for k, v in info.items()}
    for s in systems:
        rs = by_sys[s.name]
        m = D.aggregate(rs)
        info = index_info.get(idx_of.get(s.name, ""), {})
        led = D.index_cost(info.get("stats", {}))
        tot = led.get("total", {}) if isinstance(led.get("total"), dict) else {}
        m["index_seconds"] = info.get("seconds")
        m["index_from_cache"] = info.get("from_cache")
        m["index_llm_calls"] = tot.get("calls", 0)
        m["index_llm_tokens"] = (tot.get("prompt_tokens", 0) or 0) + (tot.get("completion_tokens", 0) or 0)
        res["systems"][s.name] = m
        res["per_type"][s.name] = D.per_type(rs)
        res["recall_curve"][s.name] = D.recall_curve(rs)
        diag: dict[str, Any] = {"activation": D.activation(rs), "score_parts": D.score_parts(rs),
                                "token_breakdown": D.token_breakdown(led, rs)}
        if not s.flat and by_sys.get(FLAT_REFERENCE):
            diag[f"vs_{FLAT_REFERENCE}"] = D.graph_effect(rs, by_sys[FLAT_REFERENCE])
        res["diagnostics"][s.name] = diag
    res["occupancy"] = {key[:24]: D.occupancy(info.get("stats", {})) for key, info in index_info.items()}
    return jsonable(res)


# ---------------------------------------------------------------------------------------------------

def _fmt(v, nd=1):
    if v is None:
        return "–"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return f"{v:.{nd}f}"
    return str(v)


def _table(header: list[str], rows: list[list[Any]], nd=1) -> str:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    for r in rows:
        out.append("| " + " | ".join(_fmt(v, nd) for v in r) + " |")
    return "\n".join(out)


def render_markdown(res: dict) -> str:
    """report.md: one section after another, each written by its own function below."""
    L: list[str] = []
    for section in SECTIONS:
        L += section(res)
    return "\n".join(L)


def _names(res: dict) -> list[str]:
    return list(res["systems"])


def _heading(res: dict) -> list[str]:
    ds, sysm = res["dataset"], res["systems"]
    names = _names(res)
    L = [f"# Evaluation: {ds['name']} ({ds['format']})", "",
         f"{ds['questions']} questions ({ds['with_gold']} with gold passages), corpus of {ds['corpus_docs']} "
         f"documents (deduplicated, shuffled with seed {ds['seed']}, hash {ds['corpus_hash']}). "
         f"Backend: {res['backend']}. LLM: {res['llm'] or 'none (retrieval only)'}. "
         f"Embedder: {res['config'].get('embedding_model')}. Created {res['created']}.", ""]
    if ds.get("types"):
        L += ["Question types: " + ", ".join(f"{k} {v}" for k, v in ds["types"].items()), ""]
    flat = [n for n in names if res["systems_config"].get(n, {}).get("flat")]
    graph = [n for n in names if n not in flat]
    if flat and graph:
        best = max(flat, key=lambda n: sysm[n].get("recall@5") or -1)
        lines = []
        for n in graph:
            a, b = sysm[n].get("recall@5"), sysm[best].get("recall@5")
            if a is not None and b is not None:
                lines.append(f"`{n}` {a:.1f} ({a - b:+.1f})")
        if lines:
            L += [f"**recall@5**: best flat baseline `{best}` {sysm[best]['recall@5']:.1f}; " + ", ".join(lines) + ".", ""]
    return L


def _retrieval(res: dict) -> list[str]:
    sysm, names = res["systems"], _names(res)
    L = ["## Retrieval", "",
         "recall@k: gold passages among the first k distinct documents of the chunk hits (virtual items skipped); "
         "strict: within the first k items of any kind; complete@5: all gold passages in the top 5. "
         "Latency: one `retrieve` call without LLM, including embedding the question once; "
         "'w/o embed' subtracts that question's embedding time (the same for every system).", ""]
    L.append(_table(["system", "recall@2", "recall@5", "recall@10", "complete@5", "strict r@5",
                     "p50 ms", "p95 ms", "p50 ms w/o embed", "p95 ms w/o embed", "virtual in top 5 %"],
                    [[n, sysm[n].get("recall@2"), sysm[n].get("recall@5"), sysm[n].get("recall@10"),
                      sysm[n].get("complete@5"), sysm[n].get("strict_recall@5"), sysm[n].get("latency_p50_ms"),
                      sysm[n].get("latency_p95_ms"), sysm[n].get("latency_no_embed_p50_ms"),
                      sysm[n].get("latency_no_embed_p95_ms"), sysm[n].get("virtual_top5_share")] for n in names]))
    L.append("")
    return L


def _answers(res: dict) -> list[str]:
    if not res.get("answers"):
        return []
    sysm, names = res["systems"], _names(res)
    L = ["## Answers", ""]
    L.append(_table(["system", "EM", "F1", "context recall", "LLM calls/q", "cached calls/q", "tokens/q",
                     "answer p50 ms", "answer p95 ms"],
                    [[n, sysm[n].get("em"), sysm[n].get("f1"), sysm[n].get("answer_context_recall"),
                      sysm[n].get("llm_calls_per_query"), sysm[n].get("llm_cached_calls_per_query"),
                      sysm[n].get("llm_tokens_per_query"),
                      sysm[n].get("answer_latency_p50_ms"), sysm[n].get("answer_latency_p95_ms")] for n in names]))
    L += ["", "Cached calls were answered by the LLM call cache (a question's rewrites are the same for every "
          "system and are generated once per run); they add no tokens.", ""]
    return L


def _cost(res: dict) -> list[str]:
    sysm, names = res["systems"], _names(res)
    L = ["## Cost (paper Table 1)", ""]
    L.append(_table(["system", "index s", "from cache", "index LLM calls", "index LLM tokens", "query LLM calls/q",
                     "query tokens/q", "retrieve p50 ms"],
                    [[n, sysm[n].get("index_seconds"), sysm[n].get("index_from_cache"), sysm[n].get("index_llm_calls"),
                      sysm[n].get("index_llm_tokens"), sysm[n].get("llm_calls_per_query", 0),
                      sysm[n].get("llm_tokens_per_query", 0), sysm[n].get("latency_p50_ms")] for n in names]))
    L.append("")
    return L


def _per_type(res: dict) -> list[str]:
    names = _names(res)
    types = sorted({t for n in names for t in res["per_type"].get(n, {})})
    if len(types) <= 1:
        return []
    L = ["## Per question type (recall@5" + (" / F1" if res.get("answers") else "") + ")", ""]
    rows = []
    for n in names:
        pt = res["per_type"].get(n, {})
        row = [n]
        for t in types:
            v = pt.get(t, {})
            row.append(f"{_fmt(v.get('recall@5'))} / {_fmt(v.get('f1'))}" if res.get("answers")
                       else v.get("recall@5"))
        rows.append(row)
    L.append(_table(["system"] + [f"{t} (n={res['per_type'][names[0]].get(t, {}).get('n', '?')})"
                                  for t in types], rows))
    L.append("")
    return L


def _activation(res: dict) -> list[str]:
    L = ["## Activation analysis (paper §7, Table 3)", "",
         "Queries with at least one lattice-derived item (summary, bridge/join or meet node) in the top 5, "
         "against those without. Correlational, as in the paper.", ""]
    arows = []
    for n in _names(res):
        a = res["diagnostics"][n]["activation"]
        arows.append([n, a["activated_share"], a["activated"].get("n"), a["activated"].get("recall@5"),
                      a["not_activated"].get("n"), a["not_activated"].get("recall@5"),
                      a["activated"].get("f1"), a["not_activated"].get("f1")])
    L.append(_table(["system", "activated %", "n act.", "recall@5 act.", "n not", "recall@5 not", "F1 act.",
                     "F1 not"], arows))
    L.append("")
    return L


def _graph_effect(res: dict) -> list[str]:
    eff = [(n, res["diagnostics"][n].get(f"vs_{FLAT_REFERENCE}")) for n in _names(res)]
    eff = [(n, e) for n, e in eff if e]
    if not eff:
        return []
    L = [f"## What the graph changes against `{FLAT_REFERENCE}` (same index, same questions)", "",
         "Top-5 documents that differ from flat hybrid's: how many, how many of them are gold, and the "
         "questions won/lost at recall@5.", ""]
    L.append(_table(["system", "top-5 changed %", "promoted/q", "gold promoted", "gold demoted",
                     "precision of promotions %", "won", "lost"],
                    [[n, e["top_k_changed_share"], e["promoted_per_query"], e["gold_promoted"], e["gold_demoted"],
                      e["promoted_precision"], e["questions_won"], e["questions_lost"]] for n, e in eff]))
    L.append("")
    return L


def _score_parts(res: dict) -> list[str]:
    prow = []
    for n in _names(res):
        for part, v in res["diagnostics"][n]["score_parts"].items():
            prow.append([n, part, v["mean"], v["std"], v["nonzero_share"]])
    if not prow:
        return []
    return ["## Score components over the top-5 hits", "",
            _table(["system", "part", "mean", "std", "nonzero %"], prow, nd=3), ""]


def _occupancy(res: dict) -> list[str]:
    L = []
    for key, rows_ in (res.get("occupancy") or {}).items():
        if rows_:
            L += [f"## Cluster occupancy per level (paper §8.1, Table 4), index {key[:12]}", ""]
            cols = sorted({c for r in rows_ for c in r if c != "level"})
            L.append(_table(["level"] + cols, [[r.get("level")] + [r.get(c) for c in cols] for r in rows_], nd=3))
            L.append("")
    return L


def _tokens(res: dict) -> list[str]:
    tb = [(n, res["diagnostics"][n]["token_breakdown"]) for n in _names(res)]
    tb = [(n, t) for n, t in tb if t]
    L = ["## Token breakdown (paper Appendix B, Table 6)", ""]
    if tb:
        L.append(_table(["system", "stage", "calls", "cached calls", "prompt tokens", "completion tokens", "seconds"],
                        [[n, st, c.get("calls"), c.get("cached_calls", 0), c.get("prompt_tokens"),
                          c.get("completion_tokens"), c.get("seconds")]
                         for n, t in tb for st, c in t.items()], nd=2))
        L += ["", "Cached calls were answered by the on-disk LLM call cache and cost no new tokens; "
              "run with `--no-llm-cache` to measure every call.", ""]
    else:
        L.append("No LLM calls at index or query time in this run (graph construction spends 0 tokens).")
    L.append("")
    return L


def _indexes(res: dict) -> list[str]:
    def emb(v):
        e = v.get("passage_embedding_cache")
        return f"{e['hits']} of {e['hits'] + e['misses']}" if isinstance(e, dict) else "–"

    def timings(v):
        t = D._find(v.get("stats", {}), ("timings",))
        return ", ".join(f"{k} {float(x):.1f}" for k, x in t.items() if isinstance(x, (int, float))) \
            if isinstance(t, dict) else "–"
    return ["## Indexes", "",
            _table(["index", "systems", "built/loaded s", "from cache", "passage embeddings from cache", "chunks",
                    "stage seconds (index stats)"],
                   [[k[:12], ", ".join(v["systems"]), v["seconds"], v["from_cache"], emb(v),
                     D._find(v.get("stats", {}), ("chunks", "n_chunks", "num_chunks")), timings(v)]
                    for k, v in res["indexes"].items()]),
            "",
            "Index seconds are this run's: a build that found its passage embeddings in the cache skipped "
            "the embedder, the slowest stage on a CPU; see the stage seconds of the build that embedded.",
            ""]


def _environment(res: dict) -> list[str]:
    ds, ver, mac = res["dataset"], res["versions"], res["machine"]
    L = ["## Environment", "",
         f"Machine: {mac.get('cpu_model', mac.get('processor'))}, {mac.get('cpus')} CPUs, "
         f"{mac.get('memory_gb', '?')} GB, CUDA: {mac.get('cuda')}, load average at the end "
         f"{mac.get('load_average_1m', '?')} (latencies are wall time on this machine as shared). "
         + ", ".join(f"{k} {v}" for k, v in ver.items()) + ".",
         "", f"Run: {res['run'].get('new_rows')} new rows, {res['run'].get('resumed_rows')} resumed, "
         f"{res['run'].get('seconds')} s.", ""]
    if ds.get("warnings"):
        L += ["Warnings: " + "; ".join(ds["warnings"][:10]), ""]
    return L


# report.md's sections, in order
SECTIONS = (_heading, _retrieval, _answers, _cost, _per_type, _activation, _graph_effect, _score_parts,
            _occupancy, _tokens, _indexes, _environment)


def plot(res: dict, outdir: Path) -> list[str]:
    os.environ.setdefault("MPLBACKEND", "Agg")
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    written = []
    fig, ax = plt.subplots(figsize=(7, 4.5))
    styles = ["-", "--", ":", "-."]
    markers = ["o", "s", "^", "v", "D", "x", "+"]
    for i, (name, curve) in enumerate(res["recall_curve"].items()):
        if curve:   # distinct styles: systems with equal rankings draw on top of each other
            ks = sorted(int(k) for k in curve)
            ax.plot(ks, [curve[str(k)] if str(k) in curve else curve[k] for k in ks], marker=markers[i % 7],
                    ms=4, ls=styles[i % 4], lw=2.2 - 0.2 * (i % 5), label=name)
    ax.set_xlabel("k (distinct documents)")
    ax.set_ylabel("recall@k (%)")
    ax.set_title(f"recall@k — {res['dataset']['name']}")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    p = outdir / "recall_at_k.png"
    fig.savefig(p, dpi=120)
    plt.close(fig)
    written.append(p.name)

    names = list(res["systems"])
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    x = range(len(names))
    p50 = [res["systems"][n].get("latency_p50_ms") or 0 for n in names]
    p95 = [res["systems"][n].get("latency_p95_ms") or 0 for n in names]
    axes[0].bar([i - 0.2 for i in x], p50, width=0.4, label="p50")
    axes[0].bar([i + 0.2 for i in x], p95, width=0.4, label="p95")
    axes[0].set_ylabel("retrieval latency (ms)")
    axes[0].legend()
    idx_tok = [res["systems"][n].get("index_llm_tokens") or 0 for n in names]
    q_tok = [res["systems"][n].get("llm_tokens_per_query") or 0 for n in names]
    if any(idx_tok) or any(q_tok):
        axes[1].bar([i - 0.2 for i in x], idx_tok, width=0.4, label="index LLM tokens")
        axes[1].bar([i + 0.2 for i in x], q_tok, width=0.4, label="query LLM tokens / q")
        axes[1].set_ylabel("LLM tokens")
        axes[1].legend()
    else:
        nemb = [res["systems"][n].get("latency_no_embed_p50_ms") or 0 for n in names]
        axes[1].bar(list(x), nemb, width=0.6, color="tab:green")
        axes[1].set_ylabel("p50 w/o question embedding (ms)")
        axes[1].set_title("0 LLM tokens at index and query time", fontsize=9)
    for ax in axes:
        ax.set_xticks(list(x))
        ax.set_xticklabels(names, rotation=35, ha="right", fontsize=8)
        ax.grid(axis="y", alpha=0.3)
    fig.suptitle(f"cost — {res['dataset']['name']}")
    fig.tight_layout()
    p = outdir / "cost.png"
    fig.savefig(p, dpi=120)
    plt.close(fig)
    written.append(p.name)
    return written


def write_report(res: dict, outdir: Path, plots: bool = True) -> None:
    outdir = Path(outdir)
    if plots:
        res.setdefault("files", {})["plots"] = plot(res, outdir)
    tmp = outdir / "results.json.tmp"
    tmp.write_text(json.dumps(res, indent=1, ensure_ascii=False))
    os.replace(tmp, outdir / "results.json")
    tmp = outdir / "report.md.tmp"
    tmp.write_text(render_markdown(res))
    os.replace(tmp, outdir / "report.md")
