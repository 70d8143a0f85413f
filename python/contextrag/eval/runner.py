"""Run the systems over a QA set: index once (cached by content hash), query, score, resume, report.

Per-question results are appended to ``OUT/questions.jsonl`` as they are produced (one row per system
and question, flushed); a rerun with the same data, systems and config skips the (system, question)
pairs already there, so an interrupted run resumes where it stopped. Rows written under another
configuration (a different fingerprint) are ignored, never mixed in.
"""
from __future__ import annotations

import inspect
import json
import os
import shutil
import sys
import time
import warnings
from pathlib import Path
from typing import Any

from contextrag.config import Config

from . import datasets as ds
from . import metrics as M
from .jsonable import jsonable
from .systems import System, index_key, make_systems, query_fields

RESULTS_FILE = "questions.jsonl"
RETRIEVE_K = 20          # hits requested per query: enough distinct documents for recall@10 and the curve
MAX_DEEP_K = 2000        # deepest untimed retrieve used to reach RETRIEVE_K distinct documents
HITS_KEPT = 10           # hits stored per row (kind, doc_id, score, parts) for diagnostics
# Answers are scored in the short style, whatever the model: EM/F1 compare with short gold answers, and
# the library's default style changes with the model (extractive for the tiny embedded one).
ANSWER_STYLE = "short"


def default_cache_dir() -> Path:
    env = os.environ.get("CONTEXTRAG_EVAL_CACHE")
    if env:
        return Path(env)
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "contextrag" / "eval-indexes"


def _backend():
    """ContextRAG, the index and query code every system runs on."""
    try:
        from contextrag.rag import ContextRAG
    except ImportError as e:
        raise ImportError(f"the evaluation needs contextrag.rag (the index and queries): {e}; "
                          "install contextrag[index]") from e
    return ContextRAG, "contextrag"


def _to_config(config) -> Config:
    if config is None:
        return Config()
    if isinstance(config, Config):
        return config
    if isinstance(config, dict):
        return Config.from_dict(config)
    if isinstance(config, (str, os.PathLike)):
        p = Path(config)
        if not p.exists():
            raise FileNotFoundError(f"config: no such file: {p}")
        try:
            d = json.loads(p.read_text())
        except json.JSONDecodeError as e:
            raise ValueError(f"config: {p} is not valid JSON ({e.msg})") from None
        if not isinstance(d, dict):
            raise ValueError(f"config: {p} must hold a JSON object of Config fields")
        return Config.from_dict(d)
    raise TypeError(f"config must be a Config, a dict, a path to a JSON file or None, got {type(config).__name__}")


def _to_llm(llm, llm_cache: bool = True):
    if llm is None or llm is False:
        return None
    from contextrag.llm import LLMClient, make_client
    if isinstance(llm, LLMClient):
        return llm
    if isinstance(llm, str):
        return make_client(llm, cache=bool(llm_cache))
    raise TypeError(f"llm must be None, an LLMClient or a spec string, got {type(llm).__name__}")


def _field(h, name, default=None):
    return h.get(name, default) if isinstance(h, dict) else getattr(h, name, default)


# ---------------------------------------------------------------------------------------------------
# indexes

class IndexCache:
    """Indexes under ``cache_dir/<content hash>``, built once and reused across runs and systems."""

    def __init__(self, cache_dir, backend, backend_name: str, llm=None, rebuild: bool = False, progress=True,
                 embed_cache: bool = True):
        self.dir = Path(cache_dir)
        self.embed_cache = embed_cache
        self.backend, self.backend_name, self.llm = backend, backend_name, llm
        self.rebuild, self.progress = rebuild, progress
        self.open: dict[str, Any] = {}
        self.info: dict[str, dict] = {}
        self.shared_q: dict[str, Any] = {}
        self.share_queries = True

    def key(self, config: Config, qa: ds.QASet) -> str:
        summ = getattr(self.llm, "model", None) if (self.llm is not None and config.n_summaries) else None
        return index_key(config, qa.corpus_hash(), {"backend": self.backend_name, "summaries_llm": summ})

    def get(self, config: Config, qa: ds.QASet, systems: list[str]):
        key = self.key(config, qa)
        if key in self.open:
            self.info[key]["systems"] += systems
            return key, self.open[key]
        path = self.dir / key[:24]
        rag, from_cache, t = None, False, time.perf_counter()
        emb_info = None
        if path.exists() and not self.rebuild:
            try:
                rag = self.backend.load(path)
                from_cache = True
            except Exception as e:   # corrupt or foreign: rebuild it
                warnings.warn(f"cached index {path} does not load ({e}); rebuilding", RuntimeWarning)
        if rag is None:
            if path.exists():
                shutil.rmtree(path)
            path.parent.mkdir(parents=True, exist_ok=True)
            self._log(f"building index {path.name} over {len(qa.corpus)} documents ({', '.join(systems)})")
            kw = {}
            params = inspect.signature(self.backend.build).parameters
            if "llm" in params:
                kw["llm"] = self.llm
            if "progress" in params:
                kw["progress"] = self.progress
            if "embedder" in params and self.embed_cache:
                from .embed_cache import caching_embedder
                emb = caching_embedder(config, self.dir / "embeddings.sqlite")
                if emb is not None:
                    kw["embedder"] = emb
            rag = self.backend.build(qa.docs_for_index(), path, config=config, **kw)
            emb = kw.get("embedder")
            if emb is not None:
                emb_info = {"hits": emb.hits, "misses": emb.misses}
        seconds = time.perf_counter() - t
        from .embed_cache import share_query_embeddings
        self.shared_q[key] = share_query_embeddings(rag) if self.share_queries else None
        try:
            stats = jsonable(rag.stats())
        except Exception as e:  # stats are diagnostics: never fail the run on them
            stats = {"error": f"{type(e).__name__}: {e}"}
        self.open[key] = rag
        # the cache entry's name, not the machine path of the cache directory (reports are shared)
        self.info[key] = {"path": f"{path.parent.name}/{path.name}", "from_cache": from_cache, "seconds": round(seconds, 3),
                          "passage_embedding_cache": emb_info,
                          "systems": list(systems), "config": config.to_dict(), "stats": stats}
        return key, rag

    def _log(self, msg):
        if self.progress:
            print(f"[eval] {msg}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------------
# one system over the questions

def _overrides_for(system: System, rag=None) -> dict:
    """Every query field of the system's config, then its explicit overrides: the query runs with the
    system's settings whatever the index stored (e.g. ``contextrag_paper`` on the default's index)."""
    import dataclasses
    names = {f.name for f in dataclasses.fields(system.config)}
    ov = {k: getattr(system.config, k) for k in sorted(query_fields()) if k in names}
    ov.update(system.overrides)
    return ov


def _hit_row(h) -> list:
    parts = _field(h, "parts", None) or {}
    return [_field(h, "kind", "chunk"), _field(h, "doc_id"), round(float(_field(h, "score", 0.0) or 0.0), 6),
            {k: round(float(v), 6) for k, v in parts.items() if isinstance(v, (int, float))}]


def score_retrieval(hits, gold: list[str]) -> dict:
    ranked = M.ranked_doc_ids(hits)
    row: dict[str, Any] = {"ranked": ranked[:RETRIEVE_K], "hits": [_hit_row(h) for h in hits[:HITS_KEPT]],
                           "virtual_top5": sum(1 for h in hits[:5] if M.is_virtual(h))}
    for k in M.K_VALUES:
        row[f"recall@{k}"] = M.recall_at_k(ranked, gold, k)
        row[f"complete@{k}"] = M.complete_at_k(ranked, gold, k)
        row[f"strict_recall@{k}"] = M.strict_recall_at_k(hits, gold, k)
    return row


def _run_system(system: System, rag, qa: ds.QASet, fp: str, done: set, fh, llm, retrieve_k: int,
                progress: bool, shared=None) -> int:
    ov = _overrides_for(system, rag)
    todo = [q for q in qa.questions if (system.name, q.id) not in done]
    if not todo:
        return 0
    drop = set(system.drop_kinds)

    def keep(hits):
        if not drop:
            return list(hits)
        virtual = "virtual" in drop
        return [h for h in hits if _field(h, "kind", "chunk") not in drop and not (virtual and M.is_virtual(h))]

    def retrieve(text):
        """(hits, ms): one timed ``retrieve`` at k = retrieve_k; then, untimed, deeper calls that only
        *append* items until the chunk hits cover retrieve_k distinct documents (long documents split
        into many chunks, and dropped virtual items, would otherwise leave recall@10 short)."""
        if shared is not None:
            shared.take_reused_ms()
            shared.take_computed_ms()
        t = time.perf_counter()
        hits = keep(rag.retrieve(text, k=retrieve_k, **ov))
        ms = (time.perf_counter() - t) * 1000.0
        embed_ms = None
        if shared is not None:    # the question's embedding, computed by an earlier system, counts here too
            reused = shared.take_reused_ms()
            embed_ms = reused + shared.take_computed_ms()
            ms += reused
        k_req, n_raw = retrieve_k, None
        while len(M.ranked_doc_ids(hits)) < retrieve_k and k_req < MAX_DEEP_K:
            k_req *= 4
            more = rag.retrieve(text, k=k_req, **ov)
            if n_raw is not None and len(more) <= n_raw:
                break
            n_raw = len(more)
            seen = {(_field(h, "kind", "chunk"), _field(h, "id")) for h in hits}
            hits += [h for h in keep(more) if (_field(h, "kind", "chunk"), _field(h, "id")) not in seen]
            if len(more) < k_req:       # the index has no more items
                break
        return hits, ms, embed_ms

    try:   # warm-up (model load, caches) outside the timed queries; also checks the overrides
        retrieve(todo[0].text)
    except (TypeError, ValueError) as e:
        raise type(e)(f"system {system.name}: rag.retrieve rejected overrides {sorted(ov)}: {e}") from e
    answer_kw = {}
    if llm is not None:
        params = inspect.signature(rag.answer).parameters
        var_kw = any(p.kind == p.VAR_KEYWORD for p in params.values())
        answer_kw = {k: v for k, v in ov.items()} if var_kw else {}
        if var_kw or "style" in params:
            answer_kw["style"] = ANSWER_STYLE
    try:
        from tqdm import tqdm
        it = tqdm(todo, desc=f"{system.name:>24}", disable=not progress, file=sys.stderr, leave=True)
    except ImportError:  # pragma: no cover
        it = todo
    n = 0
    for q in it:
        hits, lat, embed_ms = retrieve(q.text)
        row = {"system": system.name, "fp": fp, "qid": q.id, "type": q.type, "gold": q.gold_ids,
               "latency_ms": round(lat, 3)}
        if embed_ms is not None:
            row["embed_ms"] = round(embed_ms, 3)
        row.update(score_retrieval(hits, q.gold_ids))
        if llm is not None:
            before = llm.ledger.snapshot()
            t = time.perf_counter()
            ans = rag.answer(q.text, llm=llm, **answer_kw)
            row["answer_latency_ms"] = round((time.perf_counter() - t) * 1000.0, 3)
            text = _field(ans, "text", "") or ""
            row["answer"] = text
            row["em"] = M.exact_match(text, q.answers)
            row["f1"] = M.token_f1(text, q.answers)
            ahits = list(_field(ans, "hits", []) or [])
            row["answer_context_recall"] = M.recall_at_k(M.ranked_doc_ids(ahits), q.gold_ids, max(1, len(ahits)))
            row["answer_virtual_top5"] = sum(1 for h in ahits[:5] if M.is_virtual(h))
            row["llm"] = jsonable(llm.ledger.since(before))
        fh.write(json.dumps(jsonable(row), ensure_ascii=False) + "\n")
        fh.flush()
        n += 1
    return n


def _set_torch_threads(n):
    """Set torch's intra-op threads if torch is loaded; returns the previous value (None: untouched)."""
    if n is None:
        return None
    try:
        import torch
    except ImportError:  # pragma: no cover
        return None
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    return before


def load_rows(path: Path) -> list[dict]:
    rows = []
    if path.exists():
        with open(path, encoding="utf-8") as f:
            for line in f:
                line = line.strip()
                if not line:
                    continue
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError:   # a line cut by an interruption: drop it
                    continue
    return rows


# ---------------------------------------------------------------------------------------------------
# the public entry point

def run(data, format: str = "hotpotqa", out: str | os.PathLike = "eval-out", *, corpus=None,
        limit: int | None = None, llm=None, config=None, systems=None, cache_dir=None, seed: int = ds.DEFAULT_SEED,
        retrieve_k: int = RETRIEVE_K, rebuild: bool = False, progress: bool = True, plots: bool = True,
        backend=None, query_threads: int | None = 1, llm_cache: bool = True) -> dict:
    """Evaluate ``systems`` on a QA set; write ``out/report.md``, ``out/results.json``, the per-question
    ``out/questions.jsonl`` and plots; return the results dict. ``data`` is a path or a loaded QASet.
    ``backend``: a class with ContextRAG's ``build(docs, path, config=)``/``load(path)``/``retrieve``/
    ``stats`` (default: ContextRAG itself), to evaluate another retriever with the same harness.
    ``query_threads``: torch intra-op threads while querying (None: leave as is). One by default:
    embedding one short question gains nothing from more, and on a busy machine extra threads stall
    each other (measured here at load 20: 215 ms with one thread, 3.4 s with two, per question).
    ``llm_cache``: with an LLM spec, use the on-disk call cache (cached calls are reported apart and
    cost no tokens); False measures every call."""
    if out is None or not isinstance(out, (str, os.PathLike)):
        raise TypeError(f"out must be a directory path, got {out!r}")
    if isinstance(retrieve_k, bool) or not isinstance(retrieve_k, int) or retrieve_k < max(M.K_VALUES):
        raise ValueError(f"retrieve_k must be an int >= {max(M.K_VALUES)}, got {retrieve_k!r}")
    if query_threads is not None and (isinstance(query_threads, bool) or not isinstance(query_threads, int)
                                      or query_threads < 1):
        raise ValueError(f"query_threads must be an int >= 1 or None, got {query_threads!r}")
    t0 = time.perf_counter()
    try:
        load_start = round(os.getloadavg()[0], 2)
    except OSError:  # pragma: no cover
        load_start = None
    qa = data if isinstance(data, ds.QASet) else ds.load(data, format, corpus=corpus, limit=limit, seed=seed)
    if isinstance(data, ds.QASet) and limit:
        raise ValueError("limit: pass it to datasets.load when data is already a QASet")
    cfg = _to_config(config)
    client = _to_llm(llm, llm_cache)
    syss = make_systems(cfg, systems)
    outdir = Path(out)
    outdir.mkdir(parents=True, exist_ok=True)
    if backend is not None:
        if not (hasattr(backend, "build") and hasattr(backend, "load")):
            raise TypeError("backend must be a class with build(docs, path, config=) and load(path)")
        backend_name = getattr(backend, "__name__", type(backend).__name__)
    else:
        backend, backend_name = _backend()
    cache = IndexCache(cache_dir or default_cache_dir(), backend, backend_name, client, rebuild, progress)

    # one index per distinct index-relevant config
    groups: dict[str, list[System]] = {}
    for s in syss:
        groups.setdefault(cache.key(s.config, qa), []).append(s)
    rags: dict[str, Any] = {}
    for key, members in groups.items():
        build_cfg = next((m.config for m in members if not m.flat), members[0].config)
        k, rag = cache.get(build_cfg, qa, [m.name for m in members])
        rags[key] = rag

    rpath = outdir / RESULTS_FILE
    extra = {"retrieve_k": retrieve_k, "questions": qa.questions_hash()[:16],
             "llm": getattr(client, "model", None) if client else None}
    fps = {s.name: s.fingerprint(k, extra) for k, members in groups.items() for s in members}
    done = {(r.get("system"), r.get("qid")) for r in load_rows(rpath) if fps.get(r.get("system")) == r.get("fp")}
    resumed = len(done)
    new = 0
    threads_before = _set_torch_threads(query_threads)
    try:
        with open(rpath, "a", encoding="utf-8") as fh:
            for key, members in groups.items():
                for s in members:
                    new += _run_system(s, rags[key], qa, fps[s.name], done, fh, client, retrieve_k, progress,
                                       cache.shared_q.get(key))
    finally:
        _set_torch_threads(threads_before)

    from .report import build_results, write_report
    all_rows = load_rows(rpath)
    rows = [r for r in all_rows if fps.get(r.get("system")) == r.get("fp")]
    if len(rows) != len(all_rows):
        # keep the file equal to what the report shows: rows of other configurations are dropped
        tmp = rpath.with_name(rpath.name + ".tmp")
        with open(tmp, "w", encoding="utf-8") as f:
            for r in rows:
                f.write(json.dumps(r, ensure_ascii=False) + "\n")
        os.replace(tmp, rpath)
    results = build_results(qa, syss, rows, cache.info, client, cfg, backend_name,
                            {"resumed_rows": resumed, "new_rows": new, "retrieve_k": retrieve_k, "load_average_start": load_start,
                             "query_threads": query_threads,
                             "seconds": round(time.perf_counter() - t0, 2), "out": str(outdir)})
    write_report(results, outdir, plots=plots)
    return results
