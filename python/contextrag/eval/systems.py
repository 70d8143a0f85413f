"""The systems compared in one run, and which index each needs.

Every system is (a full :class:`Config`, the query-time overrides passed to ``rag.retrieve``/``answer``,
the hit kinds it drops). Systems whose *index-relevant* config is equal share one index: the flat
baselines and the full method read the same index with different query weights, so the comparison
isolates what the query-time use of the graph adds. ``contextrag_paper`` (``Config.paper()``) gets
its own index when its index-time settings differ.

* ``bm25``, ``dense``, ``hybrid`` (0.3/0.5), ``hybrid_renorm`` (0.375/0.625, eq. 13 renormalised
  without the fuzzy term): every retrieval weight other than BM25 and cosine set to 0, boosts to 1,
  and the virtual items (summary/bridge/meet) dropped from the ranking: no graph at all.
* ``contextrag``: the default Config (or the one given).
* ``contextrag_no_summaries``: the same with cluster-summary virtual chunks removed from the ranking
  at query time (same index; with no LLM at build time there are no summaries and it equals
  ``contextrag``).
* ``contextrag_paper``: ``Config.paper()``, the paper's literal configuration.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from contextrag.config import Config

# Config fields that only steer queries (never change what is stored in an index). Fields not listed
# here, including any added later, are treated as index-relevant: a needless rebuild, never a wrong reuse.
_KNOWN_QUERY_FIELDS = {
    "w_bm25", "w_cos", "w_fuzzy", "theta", "candidates", "rerank_top", "boost_summary", "boost_bridge",
    "n_rewrites", "rrf_k", "device", "embed_batch_size",
}
FLAT_KEEP_WEIGHTS = ("w_bm25", "w_cos")
# Bumped when the harness changes what a per-question row means, so older rows are not resumed.
EVAL_VERSION = 2

ALL_SYSTEMS = ("bm25", "dense", "hybrid", "hybrid_renorm", "contextrag", "contextrag_no_summaries",
               "contextrag_paper")
DEFAULT_SYSTEMS = ALL_SYSTEMS
FLAT_SYSTEMS = ("bm25", "dense", "hybrid", "hybrid_renorm")


def query_fields() -> set[str]:
    """Query-only Config fields: what ``contextrag.query`` accepts as overrides (its QUERY_FIELDS), or the
    Config's own declaration, else the known list."""
    try:
        from contextrag.query import QUERY_FIELDS
        return set(QUERY_FIELDS)
    except ImportError:
        pass
    for attr in ("QUERY_FIELDS", "query_fields"):
        v = getattr(Config, attr, None)
        if callable(v):
            v = v()
        if v:
            return set(v)
    return set(_KNOWN_QUERY_FIELDS)


def index_fields(config: Config) -> dict[str, Any]:
    q = query_fields()
    return {k: v for k, v in config.to_dict().items() if k not in q}


def _stable(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, default=str, ensure_ascii=False)


def index_key(config: Config, corpus_hash: str, extra: dict | None = None) -> str:
    """Content hash of (corpus, index-relevant config, library code fingerprint, extra)."""
    from contextrag.eval.env import code_fingerprint
    payload = {"corpus": corpus_hash, "config": index_fields(config), "code": code_fingerprint(),
               "extra": extra or {}}
    return hashlib.sha256(_stable(payload).encode()).hexdigest()


@dataclass
class System:
    name: str
    description: str
    config: Config
    overrides: dict = field(default_factory=dict)     # query fields passed to retrieve/answer
    drop_kinds: tuple = ()        # hit kinds removed from the ranking; "virtual" = every non-chunk kind
    flat: bool = False

    def fingerprint(self, index_key_: str, extra: dict | None = None) -> str:
        from contextrag.eval.env import query_code_fingerprint
        payload = {"name": self.name, "eval_version": EVAL_VERSION, "index": index_key_, "overrides": self.overrides,
                   "query_code": query_code_fingerprint(),
                   "drop": list(self.drop_kinds), "query": {k: v for k, v in self.config.to_dict().items()
                                                            if k in query_fields()}, "extra": extra or {}}
        return hashlib.sha256(_stable(payload).encode()).hexdigest()[:16]

    def to_dict(self) -> dict:
        return {"description": self.description, "overrides": self.overrides, "drop_kinds": list(self.drop_kinds),
                "flat": self.flat, "config": self.config.to_dict()}


def _graph_off(c: Config) -> dict:
    """Overrides that switch every non-flat query feature off: all weights other than BM25/cosine to 0,
    boosts to 1, and boolean graph switches (``use_*``/``*graph*``/``spread*``/``expand*`` flags) off."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(c):
        v = getattr(c, f.name)
        if f.name.startswith("w_") and f.name not in FLAT_KEEP_WEIGHTS and isinstance(v, (int, float)) \
                and not isinstance(v, bool):
            out[f.name] = 0.0
        elif f.name.startswith("boost_") and isinstance(v, (int, float)) and not isinstance(v, bool):
            out[f.name] = 1.0
        elif isinstance(v, bool) and v and any(s in f.name for s in ("graph", "spread", "expand", "use_", "hop")):
            out[f.name] = False
    q = query_fields()
    return {k: v for k, v in out.items() if k in q}


def make_systems(config: Config | None = None, names=None) -> list[System]:
    base = config if config is not None else Config()
    if not isinstance(base, Config):
        raise TypeError(f"config must be a contextrag Config, got {type(base).__name__}")
    names = list(DEFAULT_SYSTEMS if names is None else names)
    bad = [n for n in names if n not in ALL_SYSTEMS]
    if bad:
        raise ValueError(f"systems: unknown {bad}; choose from {list(ALL_SYSTEMS)}")
    off = _graph_off(base)
    virtual = ("virtual",)     # every non-chunk item (summary, bridge/join, meet, ...)
    flat = {
        "bm25": ((1.0, 0.0), "BM25 only (normalised by its per-query maximum)"),
        "dense": ((0.0, 1.0), "dense cosine only"),
        "hybrid": ((0.3, 0.5), "0.3·BM25 + 0.5·cos, no graph (eq. 13 without the fuzzy term)"),
        "hybrid_renorm": ((0.375, 0.625), "0.375·BM25 + 0.625·cos: eq. 13's weights renormalised without fuzzy"),
    }
    out: list[System] = []
    for n in names:
        if n in flat:
            (wb, wc), desc = flat[n]
            ov = dict(off, w_bm25=wb, w_cos=wc)
            # config stays the base one: the flat systems read the same index, only the query differs
            out.append(System(n, desc, base, ov, virtual, True))
        elif n == "contextrag":
            out.append(System(n, "full contextrag, the given (default) Config", base))
        elif n == "contextrag_no_summaries":
            out.append(System(n, "contextrag with cluster-summary virtual chunks removed from the ranking",
                              base, {}, ("summary",)))
        elif n == "contextrag_paper":
            out.append(System(n, "Config.paper(): the paper's literal configuration (Appendix A)", Config.paper()))
    return out
