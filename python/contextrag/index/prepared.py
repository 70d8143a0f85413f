"""What the query stage derives from an index, computed when the index is saved and stored beside
it (``prepared.safetensors``), so a load maps it instead of rebuilding it.

* ``node_extents``: the concept nodes' fuzzy extents (V, n) (``Index.node_extents``; the router's
  item × node degrees of eq. 16). Deriving them reads every membership. From 100,000 items on also
  ``node_extents_items``, the same degrees item-major (n, V): the rows a candidate query reads
  (query/candidates.py). Where every node is the seed of its own attribute, in order, over one dense
  block (the default graph: 132 RQ clusters at a million chunks), the extents are the context's own
  matrix, transposed: ``Index.node_extents`` is then a view of it, neither layout is stored (the
  manifest says ``"extents": false, "extents_items": "context"``; a library that reads only
  ``"extents"`` derives them on the first query), and the router lays the matrix out node-major
  only if a query routes every item. At a million chunks that is 0.53 GB less to make and to write
  at every save, and to map at every load.
* ``spread.*``: the spreading incidence of the index's ``Config.spread_families`` (query/spread.py):
  the families' weighted union over all N items, in CSR and transposed, with each row's document
  code (``ops.SpreadIncidence``, each column in decreasing degree; one stored before that order is
  reordered when the index is saved again); building it stacks, converts and transposes the families. Beside
  it ``own.*``, the title family's own-page entries prepared the same way, and ``csc.<family>.*``,
  the title and term families by columns: what the named-entity and rare-term steps read. A family
  whose by-columns matrix equals its block of the union's transpose entry for entry (weight 1, none
  of its entries moved by the degree order: the term family, 0.29 GB at a million chunks) is not
  stored again: the manifest names it in ``"csc_in_spread"`` and a load takes views of that block.

Both are caches of a pure function of the saved index, so nothing new is decided here: a load takes
them only when they match the index they were saved with (``attach`` checks the shapes; the
spreading incidence also its families' key), an update drops them (``ContextRAG``'s copy of the
index), and a query rebuilds one that is absent, as for an index saved before they were stored.
"""
from __future__ import annotations

import numpy as np

from .layout import transposed

FILE = "prepared.safetensors"
_SPREAD = "spread."


def context_items_major(ix):
    """The context's own (n, V) matrix when the item-major extents equal it by construction (every
    node a seed, node j of attribute j, one dense float32 block: ``Graph.extents`` then transposes
    the context's columns in order), else None."""
    from .graph import SEED
    g, ctx = getattr(ix, "graph", None), getattr(ix, "context", None)
    if g is None or ctx is None or len(ctx.blocks) != 1:
        return None
    M = ctx.blocks[0].matrix
    if not (isinstance(M, np.ndarray) and M.dtype == np.float32 and M.ndim == 2 and M.flags.c_contiguous
            and M.shape == (ix.n_chunks, g.n_nodes)):
        return None
    if not (np.all(np.asarray(g.kind) == SEED) and np.array_equal(np.asarray(g.attr), np.arange(g.n_nodes))):
        return None
    return M


def _context_matrix(ix):
    own = context_items_major(ix)
    if own is None:
        raise ValueError("the stored extents are said to be the context's matrix, which they cannot be "
                         "for this index's graph and context")
    return own


def families_key(families: dict) -> tuple:
    """The spreading families that take part (weight > 0), as (name, weight) pairs in order."""
    return tuple((str(k), float(v)) for k, v in families.items() if v > 0)


def config_key(config) -> tuple:
    """The families key the index's Config spreads over (empty: no spreading)."""
    if not config.w_spread > 0:
        return ()
    return families_key(config.spread_families)


def spread_incidence(lexical, key: tuple, n_items: int, chunk_doc_ids, columns: dict | None = None):
    """The ``ops.SpreadIncidence`` query/spread.py's LexicalState prepares for the families ``key``:
    their weighted union over all ``n_items`` items (virtual items have no attributes), with the
    chunks' document codes and a code of its own for each virtual item. ``columns``: {family: its
    incidence by columns (CSC)}; with every family of ``key`` there, the union's transpose is
    assembled from them instead of transposed again (43 million entries at a million chunks)."""
    cols = [(columns or {}).get(name) for name, _ in key]
    T = _union_transposed(cols, key, n_items) if all(C is not None for C in cols) else None
    return _incidence(lexical, key, *_union_rows(lexical, key, n_items, chunk_doc_ids), T)


def _union_rows(lexical, key: tuple, n_items: int, chunk_doc_ids) -> tuple:
    """(the union of the families ``key`` by rows over ``n_items`` items, the document codes)."""
    from .lexical.families import LexicalContext
    from .lexical.nodes import doc_codes
    ctx = LexicalContext({name: lexical.families[name] for name, _ in key})
    I = ctx.incidence(dict(key)).tocsr()
    I.resize((n_items, I.shape[1]))
    n_chunks = len(chunk_doc_ids)
    doc = np.concatenate([doc_codes(chunk_doc_ids), -1 - np.arange(n_items - n_chunks, dtype=np.int64)])
    return I, doc


def _incidence(lexical, key: tuple, I, doc, T=None):
    """The ``ops.SpreadIncidence`` of the union ``I`` (with its transpose ``T`` when assembled)."""
    from .. import ops
    if T is not None and I.has_canonical_format \
            and all(lexical.families[name].incidence.has_canonical_format for name, _ in key):
        return ops.SpreadIncidence.from_transposed(I, T, doc, t_owned=True)   # T is assembled anew here
    return ops.SpreadIncidence(I, doc)


def _union_transposed(cols: list, key: tuple, n_items: int):
    """The transpose of ``LexicalContext.incidence(dict(key))`` (CSR: the families' columns one after
    the other), from the families by columns ``cols``, each scaled as that union scales it."""
    import scipy.sparse as sp
    indptr, indices, data, off = [np.zeros(1, np.int64)], [], [], 0
    for C, (_, w) in zip(cols, key):
        indptr.append(np.asarray(C.indptr[1:], np.int64) + off)
        off += C.nnz
        indices.append(C.indices)
        s = float(min(1.0, w))       # a product by 1 would copy every entry once more before the concatenation
        data.append((C.data if s == 1.0 else C.data * s).astype(np.float32, copy=False))
    m = sum(C.shape[1] for C in cols)
    T = sp.csr_matrix((np.concatenate(data), np.concatenate(indices), np.concatenate(indptr)), shape=(m, n_items))
    if not T.has_sorted_indices:
        T.sort_indices()
    return T


def _signature(ix, key: tuple) -> tuple:
    fams = ix.lexical.families
    return (key, ix.n_items, ix.n_chunks) + tuple((id(fams[n].incidence), fams[n].incidence.nnz) for n, _ in key)


def stored_spread(ix, key: tuple) -> dict | None:
    """The spreading parts stored with (or prepared for) ``ix`` for the families ``key`` ({"G": the
    incidence, and "own", "title_csc", "term_csc" when present}), or None when it holds none for
    them or the index changed since."""
    got = getattr(ix, "_spread_prepared", None)
    if got is None or ix is None or getattr(ix, "lexical", None) is None:
        return None
    sig, parts = got
    try:
        return parts if sig == _signature(ix, key) else None
    except KeyError:
        return None


def remember_spread(ix, key: tuple, parts: dict) -> None:
    """Keep ``parts`` (prepared by a query for ``ix``) so that saving ``ix`` stores them as they are."""
    if getattr(ix, "lexical", None) is not None and all(n in ix.lexical.families for n, _ in key):
        ix._spread_prepared = (_signature(ix, key), parts)


def own_pages(lexical, G, title_columns=None):
    """The title family's own-page entries (degree 1: the chunk is its document's page) over G's
    items, as an ``ops.SpreadIncidence`` with G's document codes. ``title_columns``: the family by
    columns (CSC), whose own-page entries are then the transpose (nothing is transposed)."""
    import scipy.sparse as sp
    from .. import ops
    O = lexical.families["title"].incidence.tocsr().astype(np.float32)
    O.data = (O.data >= 1.0).astype(np.float32)
    O.eliminate_zeros()
    O.resize((G.n, O.shape[1]))
    C = title_columns
    if C is None or C.shape != lexical.families["title"].incidence.shape or not O.has_canonical_format:
        return ops.SpreadIncidence(O, G.doc)
    keep = np.asarray(C.data) >= 1.0
    t_indptr = np.concatenate([np.zeros(1, np.int64), np.cumsum(keep, dtype=np.int64)])[np.asarray(C.indptr)]
    T = sp.csr_matrix((np.ones(int(t_indptr[-1]), np.float32), np.asarray(C.indices)[keep], t_indptr),
                      shape=(O.shape[1], G.n))
    if not T.has_sorted_indices:
        T.sort_indices()
    return ops.SpreadIncidence.from_transposed(O, T, G.doc, t_owned=True)


def spread_parts(lexical, key: tuple, n_items: int, chunk_doc_ids, have: dict | None = None) -> dict:
    """Every spreading part for the families ``key`` (those in ``have`` are kept). The families by
    columns and the union's transpose assembled from them are made on a second thread while the
    union by rows and the document codes are made here (index/lanes.py)."""
    from .lanes import two_lanes
    parts = dict(have or {})
    names = {n for n, _ in key}

    def by_columns(transpose: bool = True):
        for name in ("title", "term"):
            if name in names and parts.get(f"{name}_csc") is None:
                parts[f"{name}_csc"] = lexical.families[name].incidence.tocsc()
        cols = [parts.get(f"{n}_csc") for n, _ in key]
        return _union_transposed(cols, key, n_items) if transpose and all(C is not None for C in cols) else None
    if parts.get("G") is None:
        (I, doc), T = two_lanes(lambda: _union_rows(lexical, key, n_items, chunk_doc_ids), by_columns)
        parts["G"] = _incidence(lexical, key, I, doc, T)
    else:
        by_columns(transpose=False)
    if "title" in names and parts.get("own") is None:
        parts["own"] = own_pages(lexical, parts["G"], parts.get("title_csc"))
    return parts


def _block_of_transpose(G, lexical, key: tuple, name: str):
    """The family ``name``'s block of the union's transpose ``G`` (its attributes' rows: the
    families' columns one after the other, in ``key`` order) as a CSC matrix over views of G's
    arrays: (indptr, indices, data) of the block, and the family's shape."""
    import scipy.sparse as sp
    r0 = 0
    for n, _ in key:
        if n == name:
            break
        r0 += lexical.families[n].incidence.shape[1]
    shape = lexical.families[name].incidence.shape
    tp = np.asarray(G.t_indptr)
    if r0 + shape[1] >= tp.size or G.shape[0] < shape[0]:      # (G also has rows for virtual items)
        return None
    e0, e1 = int(tp[r0]), int(tp[r0 + shape[1]])
    indices = G.t_indices[e0:e1]
    ptr = tp[r0:r0 + shape[1] + 1] - e0
    ptr = ptr.astype(indices.dtype) if e1 - e0 <= np.iinfo(indices.dtype).max else ptr
    return sp.csc_matrix((G.t_data[e0:e1], indices, ptr), shape=shape)


def _views_of_transpose(parts: dict, lexical, key: tuple) -> list:
    """The families whose by-columns matrices equal their block of the union's transpose, entry for
    entry (weight 1, and the degree order moved none of their entries: the term family, whose degree
    is one weight per attribute); for those the parts take the block's views instead, and a save
    stores them once. One read of each compared family (no copy)."""
    G, same = parts.get("G"), []
    for name, w in key:
        C = parts.get(f"{name}_csc")
        if C is None or G is None or float(min(1.0, w)) != 1.0:
            continue
        B = _block_of_transpose(G, lexical, key, name)
        if B is not None and B.nnz and np.shares_memory(C.data, B.data):      # (its views already)
            same.append(name)
            continue
        if B is None or B.shape != C.shape or B.nnz != C.nnz or B.indices.dtype != C.indices.dtype \
                or B.data.dtype != C.data.dtype:
            continue
        if np.array_equal(np.asarray(C.indptr) - C.indptr[0], B.indptr) and np.array_equal(C.indices, B.indices) \
                and np.array_equal(C.data, B.data):
            parts[f"{name}_csc"] = B
            same.append(name)
    return same


def _csc_arrays(M) -> dict:
    return {"indptr": M.indptr, "indices": M.indices, "data": M.data, "shape": np.asarray(M.shape, np.int64)}


def _csc(a: dict):
    import scipy.sparse as sp
    shape = tuple(int(x) for x in a["shape"])
    if a["indptr"].shape != (shape[1] + 1,) or a["indices"].shape != a["data"].shape:
        raise ValueError("a stored family by columns disagrees with its shape")
    return sp.csc_matrix((a["data"], a["indices"], a["indptr"]), shape=shape)


def _sub(arrays: dict, prefix: str) -> dict:
    return {k[len(prefix):]: v for k, v in arrays.items() if k.startswith(prefix)}


def prepared_arrays(ix) -> tuple[dict, dict]:
    """(arrays, manifest entry) of what to store for ``ix``; empty when there is nothing to store."""
    arrays: dict = {}
    meta: dict = {"extents": False, "spread_families": None}
    if getattr(ix, "graph", None) is not None and ix.graph.n_nodes > 0 and ix.n_chunks > 0:
        own = context_items_major(ix)
        if own is not None:          # the extents are the context's matrix, transposed: nothing to store
            meta["extents_items"] = "context"
            ix._extents_items = (ix.node_extents(), own)
        else:
            arrays["node_extents"] = np.ascontiguousarray(ix.node_extents(), dtype=np.float32)
            meta["extents"] = True
            from ..query.candidates import CANDIDATE_MIN_ITEMS
            if ix.n_items >= CANDIDATE_MIN_ITEMS:    # the candidate queries' item-major copy (query/fuzzy.py)
                pair = getattr(ix, "_extents_items", None)
                arrays["node_extents_items"] = pair[1] if pair is not None and pair[0] is ix.node_extents() \
                    else transposed(arrays["node_extents"])
    key = config_key(ix.config)
    lex = getattr(ix, "lexical", None)
    if key and lex is not None and all(n in lex.families for n, _ in key):
        parts = spread_parts(lex, key, ix.n_items, ix.chunk_doc_ids, stored_spread(ix, key))
        for k in ("G", "own"):      # an index stored before the columns were kept in degree order
            if parts.get(k) is not None:
                parts[k] = parts[k].in_degree_order()
        views = _views_of_transpose(parts, lex, key)
        remember_spread(ix, key, parts)
        arrays.update({_SPREAD + k: v for k, v in parts["G"].to_arrays().items()})
        if parts.get("own") is not None:
            arrays.update({"own." + k: v for k, v in parts["own"].to_arrays().items()})
        for name in ("title", "term"):
            if parts.get(f"{name}_csc") is not None and name not in views:
                arrays.update({f"csc.{name}.{k}": v for k, v in _csc_arrays(parts[f"{name}_csc"]).items()})
        meta["spread_families"] = [[n, w] for n, w in key]
        if views:           # (a library that does not read this derives those families by columns)
            meta["csc_in_spread"] = views
    return arrays, meta


def attach(ix, arrays: dict, meta: dict) -> None:
    """Give a loaded ``ix`` the prepared arrays of its snapshot (memory-mapped), after checking that
    they fit it."""
    from ..ops import SpreadIncidence
    if meta.get("extents"):
        ext = arrays["node_extents"]
        want = (int(ix.graph.n_nodes), ix.n_chunks)
        if ext.shape != want or ext.dtype != np.float32:
            raise ValueError(f"stored node extents are {ext.dtype} {ext.shape}, expected float32 {want}")
        ix._extents = ext
        if meta.get("extents_items") == "context":
            ix._extents_items = (ext, _context_matrix(ix))
        items = arrays.get("node_extents_items")
        if items is not None:      # absent: an index saved without it transposes it when a query needs it
            if items.shape != want[::-1] or items.dtype != np.float32:
                raise ValueError(f"stored item-major extents are {items.dtype} {items.shape}, "
                                 f"expected float32 {want[::-1]}")
            ix._extents_items = (ext, items)
    elif meta.get("extents_items") == "context":     # nothing stored: the extents are the context's view
        own = _context_matrix(ix)
        ix._extents_items = (ix.node_extents(), own)
    fams = meta.get("spread_families")
    if fams:
        key = tuple((str(n), float(w)) for n, w in fams)
        if getattr(ix, "lexical", None) is None or not all(n in ix.lexical.families for n, _ in key):
            raise ValueError(f"a stored spreading incidence of families {[n for n, _ in key]} the index lacks")
        G = SpreadIncidence.from_arrays(_sub(arrays, _SPREAD))
        if G.shape[0] != ix.n_items:
            raise ValueError(f"the stored spreading incidence has {G.shape[0]} rows for {ix.n_items} items")
        parts = {"G": G}
        if "own.shape" in arrays:
            parts["own"] = SpreadIncidence.from_arrays(_sub(arrays, "own."))
            if parts["own"].shape[0] != ix.n_items:
                raise ValueError(f"the stored own pages have {parts['own'].shape[0]} rows for {ix.n_items} items")
        for name in ("title", "term"):
            if f"csc.{name}.shape" in arrays:
                M = _csc(_sub(arrays, f"csc.{name}."))
                if M.shape != ix.lexical.families[name].incidence.shape:
                    raise ValueError(f"the stored {name} family by columns has shape {M.shape}")
                parts[f"{name}_csc"] = M
        for name in meta.get("csc_in_spread") or ():
            if name not in ix.lexical.families or name not in dict(key):
                raise ValueError(f"the stored spreading incidence is said to hold the {name!r} family by columns, "
                                 f"which the index or its spreading families lack")
            B = _block_of_transpose(G, ix.lexical, key, name)
            if B is None or B.nnz != ix.lexical.families[name].incidence.nnz:
                raise ValueError(f"the stored spreading incidence does not hold the {name!r} family by columns")
            parts[f"{name}_csc"] = B
        remember_spread(ix, key, parts)
