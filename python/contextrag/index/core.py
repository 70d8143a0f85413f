"""The in-memory index: what stages 1-4 produce and what queries read.

Field names below are stable (the query and evaluation code rely on them).

Chunks (n of them; chunk i is also retrievable item i):
    chunk_ids        list[str]   "doc_id#position"
    chunk_doc_ids    list[str]
    chunk_titles     list[str]
    chunk_texts      list[str]   exact slices of the document text
    chunk_positions  int32 (n,)  position of the chunk inside its document
    chunk_spans      int64 (n, 2) [start, end) characters inside the document
    chunk_fitted     bool (n,)   the chunk was part of the last RQ-KMeans fit (drift, see stats)
    docs             dict doc_id -> {"title": str, "metadata": dict}, in insertion order

Retrievable items (N = n + virtual items; items [0, n) are the chunks, in the same order):
    item_ids         list[str]   chunk ids, then "summary:<node>", "join:<node>", "meet:<node>"
    item_kinds       int8 (N,)   0 chunk, 1 summary, 2 join (bridge), 3 meet   (ITEM_KINDS)
    item_texts       list[str]   the text a reader sees (chunks: the chunk text)
    item_node        int32 (N,)  concept node of a virtual item, -1 for chunks
    item_members     CSR bool (N, n)  member chunks (a chunk: itself)
    item_sources     CSR bool (N, n)  chunks whose text went into item_texts (a chunk: itself)
    embeddings       float32 (N, d)   unit rows; chunks embed "title\\ntext" (Config.embed_title)
    bm25             BM25 over search_texts() (title + text), item order: index/bm25_index.CountBM25
                     (bm25s.BM25 as loaded from an older snapshot); use bm25_scores()
    words            lexical.words.CorpusWords: every chunk's words and word counts (memory-mapped),
                     from which updates recompute BM25 and the lexical families without old text
    chunk_sentences  distinct.ChunkSentences: every chunk's sentence hashes; the lexical weights count
                     the chunks that hold a sentence no earlier chunk holds (index/distinct.py)

Attributes and context (M attributes):
    codebooks        list of float32 (k_ℓ, d) RQ-KMeans codebooks (level ℓ clusters residuals)
    codes            int64 (n, L)     RQ code of each chunk at each level
    context          FuzzyContext: I (n, M) as per-family blocks; .dense(), .attr_names, .attr_group,
                     .attr_family, .family_names, .family_slice(name), .members() (crisp supports)
    attr_centroids   float32 (M, d)   unit mean embedding of each attribute's member chunks

Concept graph (V nodes):
    graph            ConceptGraph: kind (seed/join/meet), parents, attr, intent (V, M), members
                     (V, n), score, edge_src/edge_dst/edge_kind (up/down/cooc)/edge_weight
    node_extents()   (V, n) float32 fuzzy extents (I(c, v) of eq. 16 is node_extents().T)

Other: config (Config), embedder (Embedder, loads lazily), ledger (CostLedger of index-time LLM
calls), timings (seconds per stage), info (build diagnostics: summaries status, fit baseline).
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import scipy.sparse as sp

from ..llm.ledger import CostLedger
from .context import FuzzyContext
from .graph import ConceptGraph

if TYPE_CHECKING:
    from ..config import Config

CHUNK, SUMMARY, JOIN_ITEM, MEET_ITEM = 0, 1, 2, 3
ITEM_KINDS = ("chunk", "summary", "join", "meet")
BM25_STOPWORDS = "en"
_EXTENTS_LOCK = threading.Lock()


def bm25_tokenize(texts: list[str], stemmer: str | None = None) -> list[list[str]]:
    """The tokenizer the BM25 index was built with (lowercase, \\w\\w+ tokens, English stopwords,
    then ``Config.stemmer``'s stems): bm25s.tokenize(texts, stopwords="en", return_ids=False), token
    for token."""
    from .lexical.tokens import query_tokens
    return [query_tokens(t, stemmer) for t in texts]


def bm25_tokenize_ids(texts: list[str], stemmer: str | None = None):
    """bm25s.tokenize(texts, stopwords="en")'s ``Tokenized`` (token ids per text, vocabulary), computed
    with C-level loops (``lexical.tokens.bm25_tokenize``, tested equal), over stems with ``stemmer``:
    what the BM25 index and the lexical "term" family are both built from (one tokenisation pass)."""
    from .lexical.tokens import bm25_tokenize
    return bm25_tokenize(list(texts), stemmer=stemmer)


def index_stemmer(config) -> str | None:
    """The stemmer an index's tokens were made with (None for a config that names none)."""
    return getattr(config, "stemmer", None) or None


@dataclass
class Index:
    config: Config
    docs: dict
    chunk_ids: list
    chunk_doc_ids: list
    chunk_titles: list
    chunk_texts: list
    chunk_positions: np.ndarray
    chunk_spans: np.ndarray
    chunk_fitted: np.ndarray
    context: FuzzyContext
    graph: ConceptGraph
    attr_centroids: np.ndarray
    item_ids: list
    item_kinds: np.ndarray
    item_texts: list
    item_node: np.ndarray
    item_members: sp.csr_matrix
    item_sources: sp.csr_matrix
    embeddings: np.ndarray
    bm25: object = None
    embedder: object = None
    ledger: CostLedger = field(default_factory=CostLedger)
    timings: dict = field(default_factory=dict)
    info: dict = field(default_factory=dict)
    lexical: object = None          # index/lexical/families.py LexicalContext: the spreading families (title, term)
    words: object = None            # index/lexical/words.py CorpusWords: the chunks' stored words (updates read no old text)
    chunk_sentences: object = None  # index/distinct.py ChunkSentences: each chunk's sentence hashes (the distinct text)
    _extents: np.ndarray | None = None

    # ---- sizes
    @property
    def n_chunks(self) -> int:
        return len(self.chunk_ids)

    @property
    def n_items(self) -> int:
        return len(self.item_ids)

    @property
    def dim(self) -> int:
        return int(self.embeddings.shape[1])

    # ---- RQ-KMeans (the "rq" family's state)
    @property
    def codebooks(self) -> list:
        st = self.context.block("rq").state
        return [st[f"codebook_{i}"] for i in range(len(st))]

    @property
    def codes(self) -> np.ndarray:
        return self.context.block("rq").rows["codes"]

    # ---- views
    @property
    def chunk_embeddings(self) -> np.ndarray:
        return self.embeddings[:self.n_chunks]

    def node_extents(self) -> np.ndarray:
        """(V, n) fuzzy extents of all concept nodes (cached until the index changes)."""
        if self._extents is None:
            with _EXTENTS_LOCK:    # threads arriving together compute them once (the query view keys on them)
                if self._extents is None:
                    from .prepared import context_items_major
                    own = context_items_major(self)     # every node the seed of its attribute, in order:
                    self._extents = own.T if own is not None else self.graph.extents(self.context.dense())
        return self._extents

    def invalidate(self) -> None:
        self._extents = None
        self.context.invalidate()

    def search_texts(self) -> list[str]:
        """What BM25 indexes per item: "title\\ntext" for chunks with a title, the item text otherwise."""
        out = []
        for i, t in enumerate(self.item_texts):
            title = self.chunk_titles[i] if i < self.n_chunks else ""
            out.append(f"{title}\n{t}" if title else t)
        return out

    def bm25_scores(self, query: str) -> np.ndarray:
        """(N,) raw BM25 scores of every item for ``query`` (unnormalised)."""
        if not isinstance(query, str):
            raise TypeError(f"query must be a str, got {type(query).__name__}")
        toks = bm25_tokenize([query], index_stemmer(self.config))[0]
        if self.bm25 is None or not toks:
            return np.zeros(self.n_items, np.float32)
        return np.asarray(self.bm25.get_scores(toks), dtype=np.float32)

    def embed_queries(self, texts) -> np.ndarray:
        return self.embedder.embed_queries(texts)

    def chunk_mask(self, doc_ids) -> np.ndarray:
        """(n,) bool: chunks whose document is in ``doc_ids``."""
        allowed = _doc_set(doc_ids)
        return np.fromiter((d in allowed for d in self.chunk_doc_ids), bool, self.n_chunks)

    def item_mask(self, doc_ids) -> np.ndarray:
        """(N,) bool: items all of whose *source* chunks come from ``doc_ids`` (§4.6 filtering).

        A virtual item built from text of a document outside the filter is excluded, so a filtered
        query never sees text from other documents.
        """
        cm = self.chunk_mask(doc_ids)
        src = self.item_sources
        bad = src @ (~cm).astype(np.int32)          # number of sources outside the filter
        has = np.diff(src.indptr) > 0
        return (np.asarray(bad).ravel() == 0) & has

    def item_doc_ids(self, i: int) -> list[str]:
        """Documents of the member chunks of item i."""
        docs = {self.chunk_doc_ids[c] for c in self.item_members[i].indices}
        return sorted(docs)

    def occupancy(self) -> list[dict]:
        """Per RQ level: clusters, non-empty clusters, occupancy (non-empty / k), largest share,
        normalised entropy of cluster sizes (paper Table 4's diagnostic)."""
        out = []
        codes = self.codes
        for lvl, C in enumerate(self.codebooks):
            k = C.shape[0]
            cnt = np.bincount(codes[:, lvl], minlength=k) if len(codes) else np.zeros(k, int)
            p = cnt / max(cnt.sum(), 1)
            nz = p[p > 0]
            ent = float(-(nz * np.log(nz)).sum() / np.log(k)) if k > 1 and len(nz) else 0.0
            out.append({"level": lvl, "clusters": k, "non_empty": int((cnt > 0).sum()),
                        "occupancy": float((cnt > 0).mean()), "largest_share": float(p.max() if k else 0),
                        "outside_largest": float(1 - p.max() if k else 0),
                        "size_entropy": ent, "mean_size": float(cnt.mean()),
                        "mean_max_membership": _mean_max_membership(self, lvl)})
        return out


def _mean_max_membership(ix: Index, lvl: int) -> float:
    b = ix.context.block("rq")
    cols = np.flatnonzero(b.groups == lvl)
    M = b.matrix[:, cols]
    M = M.toarray() if sp.issparse(M) else M
    return float(M.max(axis=1).mean()) if len(M) else 0.0


def _doc_set(doc_ids) -> set:
    if isinstance(doc_ids, (str, int)):
        return {str(doc_ids)}
    try:
        return {str(d) for d in doc_ids}
    except TypeError:
        raise TypeError(f"doc_ids must be a str or an iterable of str, got {type(doc_ids).__name__}") from None
