"""Concept nodes over the lexical context: joins and meets of rare linking attributes.

The RQ concept graph's joins and meets (graph.py) are built from topic clusters. This module builds
the same two node kinds over the lexical families the index already stores (lexical.py: ``title``
entities and ``term`` rare terms, each a CSR incidence chunks x attributes with degrees
w(a) = log(N/df)/log(N), the titled chunk itself with degree 1):

* **join**: the attribute concept of one *rare linking* attribute a: the chunks that hold a, with
  extent degrees I(c, a). "Rare" is not a tuned range: a is rare when w(a) > 1/2, i.e.
  df(a) < sqrt(N), which is exactly when two chunks that hold a are linked by the spreading's
  Łukasiewicz step (I(s, a) ⊗ I(c, a) = 2 w(a) − 1 > 0). "Linking": its chunks come from at least two
  documents (the chunks of one document are not a bridge, and the spreading never links siblings).
  Attributes with the same chunk set give one node (the same concept extent; all of them are its
  ``attributes``). Ranked by the strongest cross-document link the attribute carries: the two largest
  per-document degrees d1 >= d2, link = d1 ⊗ d2 = d1 + d2 − 1 (a title's own chunk has degree 1, so
  an entity and a passage that mentions it link with w(a); two mentions with 2 w(a) − 1); ties by more
  documents, then by family and column order.
* **meet**: the intersection of two joins' chunk sets (eq. 9 with crisp supports), degrees
  min(I(c, a), I(c, b)). Eligible when the intersection holds >= ``min_support`` chunks of at least two
  documents, is strictly smaller than both parents (a real specialisation) and is not the chunk set of
  any single candidate attribute (that concept is a join, selected or not). Ranked by the
  normalised cardinality |A ∩ B| / sqrt(|A| |B|), as the RQ meets; ties by the rarer pair.

The candidate pairs for meets are counted by one sparse product over the rare linking attributes:
O(sum over chunks of r(c)^2) for r(c) the chunk's rare linking attributes: on HotpotQA-500's 5,522
chunks, 15,907 candidate attributes and 1.9 M chunk-level pairs; the whole selection takes about a
second on the shared 2-core machine.

Each node becomes a retrievable virtual item exactly like an RQ join/meet item (build.compose_items):
kind join/meet, text = its ``node_text_chunks`` members of highest degree (one per document first),
embedding = the normalised mean of those chunks' embeddings, an entry in the BM25 index. It belongs
to no RQ concept-graph node (``item_node`` = −1) and is re-selected from the exact families on every
add/delete (the families' df and w(a) change with the corpus; see build.add_docs).
"""
from __future__ import annotations

import operator
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

JOIN, MEET = "join", "meet"


@dataclass
class LexicalNode:
    """One lexical concept node: kind, the attributes whose chunk sets define it, its members."""
    kind: str                 # JOIN or MEET
    attributes: tuple         # "family:attribute" labels (a join: all attributes with this chunk set;
    #                           a meet: its two parents' first labels)
    members: np.ndarray       # int64 sorted chunk indices (the crisp extent)
    degrees: np.ndarray       # float32 extent degree of each member: I(c, a), or min over the two parents
    score: float              # the selection score (join: link degree; meet: normalised cardinality)

    @property
    def label(self) -> str:
        return "&".join(self.attributes[:1] if self.kind == JOIN else self.attributes[:2])


@dataclass
class _Columns:
    """The rare linking attributes of all families as one crisp CSC (chunks x candidates)."""
    I: sp.csc_matrix          # (n, C) float32 degrees of the candidates
    labels: list              # "family:attribute" per candidate column
    weight: np.ndarray        # (C,) w(a)
    n_docs: np.ndarray        # (C,) distinct documents holding the candidate
    link: np.ndarray          # (C,) strongest cross-document link degree


def doc_codes(doc_ids) -> np.ndarray:
    """An int64 code per entry, numbered by first appearance. A document's chunks are usually one
    run: when no id starts two runs, the codes are the run numbers, found by comparing neighbours
    (one C-level pass instead of a dict lookup per entry)."""
    n = len(doc_ids)
    if n == 0:
        return np.zeros(0, np.int64)
    ids = doc_ids if isinstance(doc_ids, list) else list(doc_ids)
    new_run = np.ones(n, bool)
    new_run[1:] = np.fromiter(map(operator.ne, ids[1:], ids[:-1]), bool, n - 1)
    heads = np.flatnonzero(new_run)
    if len(set(map(ids.__getitem__, heads.tolist()))) == heads.size:
        return np.cumsum(new_run, dtype=np.int64) - 1
    codes: dict = {}
    return np.fromiter((codes.setdefault(d, len(codes)) for d in ids), np.int64, n)


def _candidates(lexical, doc: np.ndarray) -> _Columns:
    """Rare (w > 1/2) attributes held by chunks of >= 2 documents, over every family of ``lexical``."""
    n = len(doc)
    mats, labels, weights, ndocs, links = [], [], [], [], []
    for name, fam in lexical.families.items():
        I = fam.incidence.tocsc()
        if I.shape[0] != n:
            raise ValueError(f"lexical family {name!r} has {I.shape[0]} rows, the index {n} chunks")
        df = np.diff(I.indptr)
        rare = np.flatnonzero((df >= 2) & (np.asarray(fam.weight, np.float64) > 0.5))
        if not rare.size:
            continue
        sub = I[:, rare].tocsc()
        sub.sort_indices()
        col = np.repeat(np.arange(sub.shape[1]), np.diff(sub.indptr))
        row, val = sub.indices.astype(np.int64), sub.data.astype(np.float64)
        # the best degree per (attribute, document), then the two best documents per attribute
        key = col * (int(doc.max()) + 1 if n else 1) + doc[row]
        order = np.lexsort((-val, key))
        first = np.ones(order.size, bool)
        first[1:] = key[order[1:]] != key[order[:-1]]
        pc, pv = col[order[first]], val[order[first]]
        nd = np.bincount(pc, minlength=sub.shape[1])
        o2 = np.lexsort((-pv, pc))
        pc, pv = pc[o2], pv[o2]
        start = np.concatenate([[0], np.cumsum(nd)[:-1]])
        d1 = pv[start]
        d2 = np.where(nd >= 2, pv[np.minimum(start + 1, pv.size - 1)], 0.0)
        keep = np.flatnonzero(nd >= 2)
        if not keep.size:
            continue
        vocab = fam.attributes
        mats.append(sub[:, keep])
        labels += [f"{name}:{vocab[rare[j]]}" for j in keep]
        weights.append(np.asarray(fam.weight, np.float64)[rare[keep]])
        ndocs.append(nd[keep])
        links.append(np.maximum(d1[keep] + d2[keep] - 1.0, 0.0))
    if not mats:
        return _Columns(sp.csc_matrix((n, 0), dtype=np.float32), [], np.zeros(0), np.zeros(0, np.int64),
                        np.zeros(0))
    I = sp.hstack(mats, format="csc", dtype=np.float32)
    I.sort_indices()
    return _Columns(I, labels, np.concatenate(weights), np.concatenate(ndocs), np.concatenate(links))


def _check_budget(name: str, v) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 0:
        raise ValueError(f"{name} must be an int >= 0, got {v!r}")
    return int(v)


def select_lexical_nodes(lexical, doc_ids, n_join: int, n_meet: int, min_support: int = 2) -> list:
    """Up to ``n_join`` join and ``n_meet`` meet :class:`LexicalNode` s (joins first, each kind in rank
    order) over the families of ``lexical`` (a ``LexicalContext``; None or no families: no nodes).
    ``doc_ids``: the document of each chunk. See the module docstring for the rules."""
    n_join = _check_budget("n_join", n_join)
    n_meet = _check_budget("n_meet", n_meet)
    if isinstance(min_support, bool) or not isinstance(min_support, (int, np.integer)) or min_support < 1:
        raise ValueError(f"min_support must be an int >= 1, got {min_support!r}")
    doc_ids = list(doc_ids)
    if lexical is None or not lexical.families or not doc_ids or (n_join == 0 and n_meet == 0):
        return []
    doc = doc_codes(doc_ids)
    cand = _candidates(lexical, doc)
    C = len(cand.labels)
    if not C:
        return []
    I = cand.I
    size = np.diff(I.indptr)
    # one node per distinct chunk set: the first column (in rank order) of each set stands for it
    rank = np.lexsort((np.arange(C), -cand.n_docs, -cand.link))
    seen: dict = {}
    joins = []
    for j in rank:
        rows = I.indices[I.indptr[j]:I.indptr[j + 1]]
        key = rows.tobytes()
        if key in seen:
            node = seen[key]
            if node is not None:
                node.attributes = node.attributes + (cand.labels[j],)
            continue
        node = None
        if len(joins) < n_join:
            node = LexicalNode(JOIN, (cand.labels[j],), rows.astype(np.int64),
                               I.data[I.indptr[j]:I.indptr[j + 1]].astype(np.float32), float(cand.link[j]))
            joins.append(node)
        seen[key] = node      # a set beyond the budget still blocks meets equal to it (below)
    meets = _meets(I, cand, size, doc, seen, n_meet, int(min_support)) if n_meet else []
    return joins + meets


def _meets(I: sp.csc_matrix, cand: _Columns, size: np.ndarray, doc: np.ndarray, seen: dict, n_meet: int,
           min_support: int) -> list:
    B = I.copy()
    B.data = np.ones_like(B.data)
    K = sp.triu((B.T @ B).tocoo(), k=1).tocoo()       # |A ∩ B| for every pair that shares a chunk
    a, b, k = K.row.astype(np.int64), K.col.astype(np.int64), K.data.astype(np.int64)
    ok = (k >= min_support) & (k < size[a]) & (k < size[b])
    a, b, k = a[ok], b[ok], k[ok]
    if not a.size:
        return []
    norm = k / np.sqrt(size[a].astype(np.float64) * size[b])
    order = np.lexsort((b, a, -(cand.weight[a] + cand.weight[b]), -norm))
    out = []
    for p in order:
        x, y = int(a[p]), int(b[p])
        ra, rb = I.indices[I.indptr[x]:I.indptr[x + 1]], I.indices[I.indptr[y]:I.indptr[y + 1]]
        rows, ia, ib = np.intersect1d(ra, rb, assume_unique=True, return_indices=True)
        if len(np.unique(doc[rows])) < 2:
            continue                  # the chunks of one document: not a node of the corpus
        key = rows.tobytes()
        if key in seen:
            continue                  # the same chunk set as a join or an earlier meet
        deg = np.minimum(I.data[I.indptr[x] + ia], I.data[I.indptr[y] + ib]).astype(np.float32)
        node = LexicalNode(MEET, (cand.labels[x], cand.labels[y]), rows.astype(np.int64), deg, float(norm[p]))
        seen[key] = node
        out.append(node)
        if len(out) == n_meet:
            break
    return out


def node_sources(node: LexicalNode, doc_ids, k: int) -> np.ndarray:
    """The chunks an item's text quotes: the ``k`` members of highest degree, one per document before
    any second chunk of a document (ties: lower chunk index); sorted by chunk index."""
    k = max(int(k), 1)
    m, d = node.members, node.degrees
    order = np.lexsort((m, -d))
    picked, docs = [], set()
    for i in order:                       # first pass: distinct documents
        dd = doc_ids[int(m[i])]
        if dd not in docs:
            docs.add(dd)
            picked.append(int(m[i]))
            if len(picked) == k:
                break
    if len(picked) < k:
        rest = [int(m[i]) for i in order if int(m[i]) not in set(picked)]
        picked += rest[:k - len(picked)]
    return np.asarray(sorted(picked), np.int64)


def describe(nodes: list) -> dict:
    """What ``Index.info["lexical_nodes"]`` records (and ``stats()`` reports): counts and sizes per kind."""
    out = {}
    for kind in (JOIN, MEET):
        sizes = [len(x.members) for x in nodes if x.kind == kind]
        out[kind] = {"count": len(sizes), "mean_members": float(np.mean(sizes)) if sizes else 0.0,
                     "max_members": int(max(sizes)) if sizes else 0}
    return out
