"""The index pipeline: build (stages 1-4), add, delete, rebuild. See core.Index for the fields."""
from __future__ import annotations

import logging
import os
import time
import warnings

import numpy as np
import scipy.sparse as sp

from ..llm.ledger import CostLedger
from . import summaries as summ
from .chunking import Chunker, Document, doc_entry
from .. import ops
from .context import FAMILIES, ChunkView, build_context, extend_context
from .core import CHUNK, ITEM_KINDS, JOIN_ITEM, MEET_ITEM, SUMMARY, Index
from .deferred import DeferredRows, settled
from .graph import JOIN, MEET, build_graph, compute_intents, node_members, set_edges
from .lanes import lanes, two_lanes

log = logging.getLogger("contextrag.index")


class _Timer:
    def __init__(self, timings: dict, stage: str):
        self.timings, self.stage = timings, stage

    def __enter__(self):
        self.t = time.perf_counter()

    def __exit__(self, *exc):
        self.timings[self.stage] = self.timings.get(self.stage, 0.0) + time.perf_counter() - self.t


def make_chunker(config, embedder) -> Chunker:
    tok = None
    if config.chunk_tokenizer == "model" and embedder is not None:
        tok = getattr(embedder, "tokenizer", None)
        limit = getattr(embedder, "max_tokens", None)
        if limit is not None and config.chunk_tokens > limit:
            warnings.warn(f"Config.chunk_tokens={config.chunk_tokens} exceeds the embedder's window of "
                          f"{limit} tokens: chunk ends will be truncated at embedding time", RuntimeWarning)
    return Chunker(config.chunk_tokens, config.chunk_overlap, tok)


def embed_inputs(titles, texts, config) -> list[str]:
    if config.embed_title:
        return [f"{ti}\n{tx}" if ti else tx for ti, tx in zip(titles, texts)]
    return list(texts)


def _view(ix_or_lists) -> ChunkView:
    ix = ix_or_lists
    return ChunkView(ix.chunk_texts, ix.chunk_titles, ix.chunk_doc_ids, ix.chunk_positions)


def _unit_rows(X: np.ndarray) -> np.ndarray:
    X = np.asarray(X, dtype=np.float32)
    return X / np.maximum(np.linalg.norm(X, axis=1, keepdims=True), 1e-12)


def member_sums(mem: sp.csr_matrix, E: np.ndarray) -> np.ndarray:
    """``mem @ E`` as float32 (each attribute's members' embeddings summed, members ascending), its
    rows split over the cores: scipy's product releases the GIL and computes each row alone, so the
    blocks give the same bits as one call (tested) on every core (a delete at a million chunks sums
    every member of the touched attributes: a pass over 1.5 GB of embeddings)."""
    from concurrent.futures import ThreadPoolExecutor
    n_threads = max(1, min(os.cpu_count() or 1, mem.shape[0]))
    if n_threads == 1 or mem.nnz < 1 << 16:
        return np.asarray(mem @ E, dtype=np.float32)
    cuts = np.searchsorted(mem.indptr, np.linspace(0, mem.nnz, n_threads + 1)[1:-1])
    bounds = list(zip([0, *cuts.tolist()], [*cuts.tolist(), mem.shape[0]]))
    out = np.empty((mem.shape[0], E.shape[1]), np.float32)

    def block(b):
        a, z = b
        if z > a:
            out[a:z] = mem[a:z] @ E
    with ThreadPoolExecutor(max_workers=n_threads, thread_name_prefix="contextrag-sums") as pool:
        list(pool.map(block, bounds))
    return out


def attr_centroids(ix: Index, E: np.ndarray) -> np.ndarray:
    """Unit mean embedding of each attribute's crisp members. The sums before the normalisation are
    kept (``ix._attr_sums``, stored with the index) so that an add extends them (see
    :func:`_centroids_after_update`)."""
    mem = ix.context.members().T.tocsr().astype(np.float32)     # (M, n)
    S = member_sums(*E.product_operands(mem)) if isinstance(E, DeferredRows) else member_sums(mem, E)
    ix._attr_sums = S
    return _unit_rows(S)


def _centroids_after_update(ix: Index, E: np.ndarray, touched: np.ndarray, appended=None) -> np.ndarray:
    """The attribute centroids once the chunks of ``E`` are the corpus, where only the attributes
    ``touched`` gained or lost a member (the others' members and embeddings are as before, so their
    centroids are). ``appended`` (an add: the new rows, at the end, and the old rows unchanged): each
    touched sum is extended by its new members' embeddings, one after another in row order, which is
    the order and the float32 arithmetic of the sparse product :func:`attr_centroids` computes (its
    members ascending; the new rows come last), so the result is the same bit for bit. Otherwise the
    touched attributes' sums are recomputed by that product."""
    old = getattr(ix, "attr_centroids", None)
    sums = getattr(ix, "_attr_sums", None)
    M = ix.context.n_attributes
    if old is None or old.shape != (M, E.shape[1]) or sums is None or sums.shape != old.shape:
        return attr_centroids(ix, E)
    touched = np.unique(np.asarray(touched, np.int64))
    out = np.array(old, dtype=np.float32, copy=True)
    S = np.array(sums, dtype=np.float32, copy=True)
    if touched.size and appended is not None:
        memT = _member_rows(ix.context, appended).T.tocsr()      # (M, new): each attribute's new members
        E_new = E[np.asarray(appended)]
        for m in touched:
            for r in memT.indices[memT.indptr[m]:memT.indptr[m + 1]]:
                S[m] += E_new[r]
        out[touched] = _unit_rows(S[touched])
    elif touched.size:
        mem = ix.context.members()[:, touched].T.tocsr().astype(np.float32)
        S[touched] = member_sums(*E.product_operands(mem)) if isinstance(E, DeferredRows) else member_sums(mem, E)
        out[touched] = _unit_rows(S[touched])
    ix._attr_sums = S
    return out


# ---- virtual items -------------------------------------------------------------------------

class _RowReader:
    """``I[rows, col]`` of the context, read from the rows asked for (no dense n × M copy)."""

    def __init__(self, ctx):
        self.ctx = ctx

    def __getitem__(self, key):
        rows, col = key
        if self.ctx._dense is not None:
            return self.ctx._dense[rows, col]
        return _context_rows(self.ctx, np.asarray(rows, np.int64))[:, col]


def _seed_extent(ix, I, p, rows):
    """Extent of seed node p ({m}↓ = column m of I) on the given chunk rows."""
    return I[rows, ix.graph.attr[p]]


def _join_sources(ix, I, v, k):
    """Bridge text: from each parent, its member chunk closest to the other parent."""
    g = ix.graph
    a, b = (int(p) for p in g.parents[v])
    out = []
    for own, other in ((a, b), (b, a)):
        mem = np.setdiff1d(g.members[own].indices, out)
        if len(mem):
            deg = _seed_extent(ix, I, other, mem)
            out.append(int(mem[np.lexsort((mem, -deg))[0]]))
    return np.asarray(sorted(out)[:max(k, 1)], dtype=np.int64)


def _meet_sources(ix, I, v, k):
    """Meet text: the node's member chunks with the highest meet degree min(A_a, A_b)."""
    g = ix.graph
    mem = g.members[v].indices
    if not len(mem):
        return mem
    a, b = (int(p) for p in g.parents[v])
    deg = np.minimum(_seed_extent(ix, I, a, mem), _seed_extent(ix, I, b, mem))
    return np.sort(mem[np.lexsort((mem, -deg))[:k]])


def _render(ix, sources) -> str:
    parts = []
    for c in sources:
        t = ix.chunk_titles[c]
        parts.append(f"{t}: {ix.chunk_texts[c]}" if t else ix.chunk_texts[c])
    return "\n\n".join(parts)


def _csr_rows(rows: list, n: int, n_identity: int = 0) -> sp.csr_matrix:
    """Boolean CSR (n_identity + len(rows), n): row i < n_identity holds column i alone (the chunk
    items), then one row per entry of ``rows``."""
    lens = np.fromiter(map(len, rows), np.int64, len(rows))
    indptr = np.zeros(n_identity + len(rows) + 1, np.int64)
    indptr[1:n_identity + 1] = np.arange(1, n_identity + 1)
    indptr[n_identity + 1:] = n_identity + np.cumsum(lens)
    idx = np.concatenate([np.arange(n_identity, dtype=np.int64)] + [np.asarray(r, np.int64) for r in rows])
    return sp.csr_matrix((np.ones(len(idx), bool), idx.astype(np.int32), indptr), shape=(n_identity + len(rows), n))


def compose_items(ix: Index, chunk_E: np.ndarray, summary_items: list[dict], lexical_nodes=()) -> None:
    """items = chunks, then summaries (kept as given), then one item per join/meet node, then one per
    lexical concept node (index/lexical/nodes.py; kinds join/meet, no graph node: item_node = -1)."""
    n = ix.n_chunks
    k = ix.config.node_text_chunks
    I = _RowReader(ix.context)   # extents are read on member rows only: O(members), not O(V·n)
    # the chunk items' members and sources are themselves (_csr_rows' identity rows): lists for the rest
    from .columns import LazyStrings
    lazy = isinstance(ix.chunk_texts, LazyStrings)     # a stored index's texts: never decoded here
    ids, kinds, texts, node, members, sources, embs = (list(ix.chunk_ids), [CHUNK] * n,
                                                        [] if lazy else list(ix.chunk_texts),
                                                        [-1] * n, [], [], [chunk_E])
    for s in summary_items:
        v = int(s["node"])
        ids.append(f"summary:{v}")
        kinds.append(SUMMARY)
        texts.append(s["text"])
        node.append(v)
        members.append(ix.graph.members[v].indices)
        sources.append(s["sources"])
        embs.append(s["embedding"][None, :].astype(np.float32))
    for v in np.flatnonzero((ix.graph.kind == JOIN) | (ix.graph.kind == MEET)):
        src = _join_sources(ix, I, v, k) if ix.graph.kind[v] == JOIN else _meet_sources(ix, I, v, k)
        if not len(src):
            continue  # a meet emptied by deletes: no text to show until rebuild
        kind = JOIN_ITEM if ix.graph.kind[v] == JOIN else MEET_ITEM
        ids.append(f"{ITEM_KINDS[kind]}:{v}")
        kinds.append(kind)
        texts.append(_render(ix, src))
        node.append(int(v))
        members.append(ix.graph.members[v].indices)
        sources.append(src)
        embs.append(_unit_rows(chunk_E[src].mean(axis=0, keepdims=True)))
    from .lexical.nodes import JOIN as LJOIN, node_sources
    for nd in lexical_nodes:
        src = node_sources(nd, ix.chunk_doc_ids, k)
        kind = JOIN_ITEM if nd.kind == LJOIN else MEET_ITEM
        ids.append(f"{ITEM_KINDS[kind]}:{nd.label}")
        kinds.append(kind)
        texts.append(_render(ix, src))
        node.append(-1)
        members.append(nd.members)
        sources.append(src)
        embs.append(_unit_rows(chunk_E[src].mean(axis=0, keepdims=True)))
    ix.item_ids, ix.item_texts = ids, (ix.chunk_texts + texts if lazy else texts)
    ix.item_kinds = np.asarray(kinds, np.int8)
    ix.item_node = np.asarray(node, np.int32)
    ix.item_members = _csr_rows(members, n, n_identity=n)
    ix.item_sources = _csr_rows(sources, n, n_identity=n)
    # no virtual items: the chunks' embeddings as they are when the array is an in-memory one of its
    # own (an update's), not a second n × d copy
    own = len(embs) == 1 and type(chunk_E) is np.ndarray and chunk_E.flags.owndata
    if isinstance(chunk_E, DeferredRows) and chunk_E.dtype == np.float32:
        # an update's rows, gathered when the save writes them (index/deferred.py)
        ix.embeddings = chunk_E if len(embs) == 1 else DeferredRows(
            [*chunk_E.parts, (np.concatenate(embs[1:], axis=0), None)])
    else:
        ix.embeddings = np.ascontiguousarray(chunk_E if own else np.concatenate(embs, axis=0), dtype=np.float32)


def summary_items_of(ix: Index) -> list[dict]:
    out = []
    for i in np.flatnonzero(ix.item_kinds == SUMMARY):
        out.append({"node": int(ix.item_node[i]), "text": ix.item_texts[i],
                    "sources": ix.item_sources[i].indices.astype(np.int64), "embedding": ix.embeddings[i]})
    return out


def make_summaries(ix: Index, llm, chunk_E) -> list[dict]:
    n = int(ix.config.n_summaries)
    if n == 0:
        ix.info["summaries"] = "disabled (Config.n_summaries = 0)"
        return []
    if llm is None:
        ix.info["summaries"] = f"skipped: no LLM configured (Config.n_summaries = {n} requested)"
        # no LLM was given: nothing to warn about (the build's info and `contextrag index` say it)
        log.debug("building without cluster summaries: no LLM given")
        return []
    I = ix.context.dense()
    nodes = summ.select_concepts(ix.graph, ix.context.attr_group, n)
    k = ix.config.summary_chunks
    out, texts, failed = [], [], []
    jobs = [(v, src) for v, src in ((v, summ.central_chunks(ix.graph, I, v, k)) for v in nodes) if len(src)]
    # concurrently, within the client's concurrency limit; a flaky server must not throw away the
    # embeddings and the graph, so a failed call is counted and the build goes on
    results = summ.summarize_many(llm, [[_render(ix, [c]) for c in src] for _, src in jobs], ix.ledger)
    for (v, src), text in zip(jobs, results):
        if isinstance(text, Exception):
            failed.append(f"node {v}: {type(text).__name__}: {text}"[:300])
            continue
        if text:
            out.append({"node": v, "text": text, "sources": np.sort(src)})
            texts.append(text)
    if failed:
        warnings.warn(f"contextrag: {len(failed)} of {len(nodes)} summary calls failed; first: {failed[0]}",
                      RuntimeWarning)
        ix.info["summary_failures"] = failed
    if out:
        E = ix.embedder.embed_passages(texts)
        for s, e in zip(out, E):
            s["embedding"] = e
    ix.info["summaries"] = (f"{len(out)} summaries from {len(nodes)} selected concepts"
                            + (f" ({len(failed)} calls failed)" if failed else ""))
    return out


def build_bm25(ix: Index):
    """The BM25 index over every item, from the chunks' stored word counts (``ix.words``, tokenised
    here when the index has none yet) and the summaries' text (index/bm25_index.py). Returns None:
    the "term" family is built from the chunks by the lexical map."""
    from .bm25_index import chunk_counts, from_counts, item_counts, word_terms
    from .core import SUMMARY, index_stemmer
    from .lexical import words as lw
    if ix.words is None:
        ix.words = lw.from_chunks(ix.chunk_titles, ix.chunk_texts)
    stem = index_stemmer(ix.config)
    C = chunk_counts(ix.words, stem)
    extra = {int(i): ix.item_texts[i] for i in np.flatnonzero(ix.item_kinds == SUMMARY)}
    counts, names = item_counts(C, ix.item_kinds, ix.item_sources, extra, word_terms(ix.words, stem)[1], stem)
    ix.bm25 = from_counts(counts, names, ix.n_chunks)
    return None


def word_terms_of(words, stemmer):
    """The BM25 term strings of the stored words (bm25_index.word_terms)."""
    from .bm25_index import word_terms
    return word_terms(words, stemmer)[1]


def _bm25_with_items(ix: Index, chunks_bm25) -> None:
    """After an update: ``chunks_bm25`` (a CountBM25 whose chunk postings are already those of the
    new corpus) with the virtual items' postings rebuilt from their sources' stored counts."""
    from .bm25_index import virtual_counts
    from .core import SUMMARY, index_stemmer
    extra = {int(i): ix.item_texts[i] for i in np.flatnonzero(ix.item_kinds == SUMMARY)}
    counts, names = virtual_counts(ix.words, ix.item_kinds, ix.item_sources, extra, ix.n_chunks,
                                   index_stemmer(ix.config))
    ix.bm25 = chunks_bm25.with_virtual(counts, names)


def _chunk_bm25(ix: Index, n_before: int):
    """The index's CountBM25 when it holds the ``n_before`` chunks of the index before this update
    (else None: an index loaded from a snapshot that stored bm25s's scores is rebuilt from counts)."""
    from .bm25_index import CountBM25
    bm = getattr(ix, "bm25", None)
    return bm if isinstance(bm, CountBM25) and bm.n_chunks == n_before else None


def title_own_columns(ix: Index, titles=None) -> np.ndarray:
    """int32: the column of each chunk's own title (``titles``: the first chunks', default all) in
    the "title" family, −1 for none."""
    from .lexical.tokens import normalise_title
    titles = ix.chunk_titles if titles is None else titles
    fam = ix.lexical.families.get("title") if getattr(ix, "lexical", None) is not None else None
    if fam is None:
        return np.full(len(titles), -1, np.int32)
    cache: dict = {}
    return np.fromiter((cache[t] if t in cache else cache.setdefault(t, fam.vocab.get(normalise_title(t), -1))
                        for t in titles), np.int32, len(titles))


def build_lexical(ix: Index, tokens=None, prebuilt=None) -> None:
    """The lexical families of ``Config.spread_families`` (title, term by default) over the chunks,
    stored with the index and read by query-time spreading. ``tokens``: the BM25 tokenisation of
    ``ix.search_texts()`` (chunks first), reused for the "term" family. ``prebuilt``: families
    already built over these chunks (a ``LexicalContext``), taken as they are."""
    from .lexical.families import lexical_families
    if prebuilt is None:
        from .core import index_stemmer
        prebuilt = lexical_families(ix.chunk_titles, ix.chunk_texts, lexical_family_names(ix.config),
                                    tokens=tokens, stemmer=index_stemmer(ix.config))
    ix.lexical = distinct_weights(ix, prebuilt)


def distinct_weights(ix: Index, fams):
    """``fams`` (the lexical families of ``ix``'s chunks) with their weights counted over the chunks
    of new text (index/distinct.py); as they are when ``ix`` has no sentence hashes or they are so
    counted already."""
    if fams is None or getattr(fams, "distinct", None) is not None:
        return fams
    from .distinct import distinct_rows
    rows = distinct_rows(ix)
    if rows is None:
        return fams
    from .lexical.families import counted_over
    return counted_over(fams, rows)


def chunk_sentences_of(ix: Index) -> None:
    """The chunks' sentence hashes (index/distinct.py), once per build."""
    if getattr(ix, "chunk_sentences", None) is None or ix.chunk_sentences.n_chunks != ix.n_chunks:
        from .distinct import ChunkSentences
        ix.chunk_sentences = ChunkSentences.of_texts(ix.chunk_texts)


def lexical_nodes_of(ix: Index, families) -> list:
    """The lexical concept nodes ``Config.lexical_joins``/``lexical_meets`` ask for, over ``families``
    (the index's lexical families of its current chunks); recorded in ``ix.info["lexical_nodes"]``."""
    from .lexical.nodes import describe, select_lexical_nodes
    cfg = ix.config
    nj, nm = cfg.lexical_joins, cfg.lexical_meets
    if not (nj or nm):
        ix.info.pop("lexical_nodes", None)
        return []
    nodes = select_lexical_nodes(families, ix.chunk_doc_ids, nj, nm, cfg.min_support)
    ix.info["lexical_nodes"] = describe(nodes)
    return nodes


def wants_lexical_nodes(config) -> bool:
    return bool(config.lexical_joins or config.lexical_meets)


def lexical_family_names(config) -> list[str]:
    """The lexical families an index stores: those ``Config.spread_families`` names with a weight > 0
    (also when ``w_spread`` is 0: one index serves every query configuration)."""
    return [str(k) for k, v in config.spread_families.items() if v > 0]


# ---- build ---------------------------------------------------------------------------------

EMBED_BLOCK = 512     # texts per embedder call in a build: the bar advances per block
# documents tokenised per batch by the chunker: a batch's encodings are held until its documents are
# split, so memory stays bounded however large the corpus (all at once: GBs at a million documents)
PREFETCH_DOCS = 8192


def embed_all(embedder, texts: list[str], tick=None) -> np.ndarray:
    """Passage embeddings of ``texts`` in blocks of similar length (longest first: the padding of a
    batch is its own longest text), in the input order. Works with any embedder."""
    if not texts:
        return embedder.embed_passages([])
    order = np.argsort([-len(t) for t in texts], kind="stable")
    out = None
    for s in range(0, len(order), EMBED_BLOCK):
        idx = order[s:s + EMBED_BLOCK]
        E = np.asarray(embedder.embed_passages([texts[i] for i in idx]), dtype=np.float32)
        if out is None:
            out = np.empty((len(texts), E.shape[1]), dtype=np.float32)
        out[idx] = E
        if tick is not None:
            tick(len(idx))
    return out


def _chunk_search_texts(chunks) -> list[str]:
    """What BM25 indexes for each chunk (Index.search_texts, chunk rows)."""
    return [f"{c.title}\n{c.text}" if c.title else c.text for c in chunks]


def _lexical_of_index(ix: Index):
    """The lexical families of the index's current chunks, tokenised on their own (the build's
    ``_lexical_of_chunks`` on the chunk table)."""
    from .core import bm25_tokenize_ids, index_stemmer
    from .lexical.families import lexical_families
    names, stem = lexical_family_names(ix.config), index_stemmer(ix.config)
    texts = [f"{ti}\n{tx}" if ti else tx for ti, tx in zip(ix.chunk_titles, ix.chunk_texts)]
    tokens = bm25_tokenize_ids(texts, stem) if "term" in names else None
    return lexical_families(ix.chunk_titles, ix.chunk_texts, names, tokens=tokens, stemmer=stem)


def _lexical_of_chunks(chunks, config):
    """The lexical families from the chunks alone (they need no vectors): run beside the embedder."""
    from .core import bm25_tokenize_ids, index_stemmer
    from .lexical.families import lexical_families
    names, stem = lexical_family_names(config), index_stemmer(config)
    tokens = bm25_tokenize_ids(_chunk_search_texts(chunks), stem) if "term" in names else None
    return lexical_families([c.title for c in chunks], [c.text for c in chunks], names, tokens=tokens,
                            stemmer=stem)


def build_index(docs: list[Document], config, embedder, llm=None, *, precomputed=None,
                progress: bool | None = None) -> Index:
    """Stages 1-4. ``precomputed``: optional (chunks, embeddings) to skip chunking and embedding
    (rebuild and benchmarks). ``progress``: a bar per stage on stderr (see index.progress).

    Pipeline: the embedder loads (its own stage: imports, weights, a first-use export), the documents
    are chunked, then the lexical families and the sentence hashes, which need no vectors, are made
    in threads while the embedder runs (ONNX Runtime and torch release the GIL while they compute)."""
    from .progress import Stages
    timings: dict = {}
    stage = Stages(timings, progress)
    lexical_job = sentences_job = None
    if precomputed is None:
        with stage("load"):
            if callable(getattr(embedder, "load", None)):
                embedder.load()
            chunker = make_chunker(config, embedder)
        with stage("chunk", total=len(docs), unit="doc") as tick:
            prefetch = getattr(chunker.tokenizer, "prefetch", None)
            chunks = []
            for s in range(0, len(docs), PREFETCH_DOCS):
                block = docs[s:s + PREFETCH_DOCS]
                if callable(prefetch):
                    prefetch([d.text for d in block])   # one batch per block, in Rust threads
                for d in block:
                    chunks.extend(chunker.split(d))
                tick(len(block))
        if chunks:
            lexical_job = _start(_lexical_of_chunks, chunks, config)
            sentences_job = _start(_sentences_of_chunks, chunks)
        try:
            with stage("embed", total=len(chunks), unit="chunk") as tick:
                E = embed_all(embedder, embed_inputs([c.title for c in chunks], [c.text for c in chunks], config),
                              tick)
        except BaseException:
            _settle(lexical_job, sentences_job)
            raise
    else:
        chunks, E = precomputed
    if not chunks:
        raise ValueError("docs produced no chunks")
    ix = Index(config=config, docs={d.doc_id: doc_entry(d) for d in docs},
               chunk_ids=[c.chunk_id for c in chunks], chunk_doc_ids=[c.doc_id for c in chunks],
               chunk_titles=[c.title for c in chunks], chunk_texts=[c.text for c in chunks],
               chunk_positions=np.asarray([c.position for c in chunks], np.int32),
               chunk_spans=np.asarray([[c.start_char, c.end_char] for c in chunks], np.int64).reshape(-1, 2),
               chunk_fitted=np.ones(len(chunks), bool), context=None, graph=None,
               attr_centroids=None, item_ids=[], item_kinds=None, item_texts=[], item_node=None,
               item_members=None, item_sources=None, embeddings=None, embedder=embedder,
               ledger=CostLedger(), timings=timings)
    backend = getattr(embedder, "backend", None)
    if isinstance(backend, str):
        ix.info["embedder"] = backend
    try:
        _cluster_and_graph(ix, E, stage)
        finish_items(ix, llm, E, stage, lexical=lexical_job, sentences=sentences_job)
    except BaseException:
        _settle(lexical_job, sentences_job)
        raise
    return ix


def _sentences_of_chunks(chunks):
    from .distinct import ChunkSentences
    return ChunkSentences.of_texts([c.text for c in chunks])


def _settle(*jobs) -> None:
    for job in jobs:
        if job is not None:
            job.settle()


class _Job:
    """A function run in a thread; ``result()`` joins it and re-raises its exception."""

    def __init__(self, fn, *args):
        import threading
        self._out = self._err = None
        self._t = threading.Thread(target=self._run, args=(fn, args), daemon=True, name="contextrag-build")
        self._t.start()

    def _run(self, fn, args):
        try:
            self._out = fn(*args)
        except BaseException as e:  # handed to the caller by result()
            self._err = e

    def result(self):
        self._t.join()
        if self._err is not None:
            raise self._err
        return self._out

    def settle(self) -> None:
        """Wait for the thread, dropping its result: on the caller's error path (Ctrl-C included), so
        that no daemon thread is inside native code when the interpreter exits (it would abort the
        process instead of exiting with the caller's error)."""
        self._t.join()


def _start(fn, *args) -> _Job:
    return _Job(fn, *args)


def finish_items(ix: Index, llm, E: np.ndarray, stage=None, lexical=None, sentences=None) -> None:
    """Stage 4 and the retrievable items: summaries (when an LLM is given), item table, BM25, and the
    lexical families. ``lexical``: the families already built (by the Ray build's map on the shards),
    or a ``_Job`` building them from the chunks in a thread beside the embedder; ``sentences``: a
    ``_Job`` hashing the chunks' sentences there (else they are hashed here)."""
    from .progress import Stages
    stage = stage or Stages(ix.timings, False)
    with stage("summaries"):
        s_items = make_summaries(ix, llm, E)
    fams, l_nodes = lexical, []
    with stage("sentences"):                  # a job's wait, when it ran beside the embedder
        if isinstance(sentences, _Job):
            ix.chunk_sentences = sentences.result()
        chunk_sentences_of(ix)
    if wants_lexical_nodes(ix.config):
        # the nodes need the families before the items exist (BM25 indexes the items' texts), so the
        # families come from the chunks' own tokenisation here rather than from BM25's afterwards
        with stage("lexical"):
            fams = fams.result() if isinstance(fams, _Job) else fams
            if fams is None:
                fams = _lexical_of_index(ix)
            fams = distinct_weights(ix, fams)
        with stage("lexical_nodes"):
            l_nodes = lexical_nodes_of(ix, fams)
    else:
        ix.info.pop("lexical_nodes", None)
    with stage("items"):
        compose_items(ix, E, s_items, l_nodes)
    with stage("bm25"):
        tokens = build_bm25(ix)
    with stage("lexical"):
        # a job's wait only: its work overlapped the embedder
        build_lexical(ix, tokens, prebuilt=fams.result() if isinstance(fams, _Job) else fams)
    ix.words.title_own = title_own_columns(ix)


def _cluster_and_graph(ix: Index, E: np.ndarray, stage=None) -> None:
    from .progress import Stages
    stage = stage or Stages(ix.timings, False)
    with stage("context"):
        ix.context = build_context(_view(ix), E, ix.config)
    rq = ix.context.block("rq")
    ix.info["fit"] = {"chunks": int(len(E)), "residual_sq_mean": float(rq.rows["residual_sq"].mean()),
                      "rq_sizes": [int(C.shape[0]) for C in ix.codebooks], **rq.info}
    with stage("graph"):
        ix.graph = build_graph(ix.context.dense(), ix.context.members(), ix.context.attr_group,
                               ix.chunk_doc_ids, ix.chunk_positions, ix.config)
        ix.attr_centroids = attr_centroids(ix, E)
    ix.chunk_fitted = np.ones(len(E), bool)
    ix._extents = None


def rebuild(ix: Index, llm=None) -> Index:
    """Re-cluster and rebuild the graph from the stored chunk embeddings (no re-embedding)."""
    E = np.array(settled(ix.chunk_embeddings), copy=True)
    ix.timings = {}
    ix.invalidate()
    _cluster_and_graph(ix, E)
    finish_items(ix, llm, E)
    return ix


# ---- incremental updates -------------------------------------------------------------------

def _context_rows(ctx, rows: np.ndarray) -> np.ndarray:
    """The dense (len(rows), M) float32 rows ``rows`` of the context I (``ctx.dense()[rows]`` without
    densifying every row)."""
    from .context import dense
    if not ctx.blocks:
        return np.zeros((len(rows), 0), np.float32)
    return np.ascontiguousarray(np.concatenate([dense(b.matrix[rows]) for b in ctx.blocks], axis=1),
                                dtype=np.float32)


def _member_rows(ctx, rows: np.ndarray) -> sp.csr_matrix:
    """``ctx.members()[rows]``: the crisp supports of the chunks ``rows``."""
    return sp.hstack([sp.csr_matrix(b.members[rows]) for b in ctx.blocks], format="csr", dtype=bool)


def _refresh_nodes(ix: Index, new_rows: np.ndarray | None) -> int:
    """Members of every node, intents, co-occurrence edges. Returns the number of affected nodes.

    ``new_rows``: chunks appended at the end while every old row of I stayed as it was. Then a
    node's extent and members on old rows are unchanged (seeds are columns of I and of the crisp
    supports, joins/meets their max/min, union/intersection: all row-wise), and A↑(m) = min over
    objects, so the new intent is min(old intent, the same min over the new rows alone); the window
    counts gain the new documents' windows (graph.update_cooc): exact, and O(new chunks) but for
    appending the new rows' columns. Otherwise (a refitted family) everything is recomputed.
    """
    g = ix.graph
    old_ext, ix._extents = ix._extents, None
    if new_rows is None:
        g.members = node_members(g.kind, g.parents, g.attr, ix.context.members())
        I = ix.context.dense()
        g.intent = compute_intents(g, I)     # a refitted family may have added attribute columns
        set_edges(g, ix.chunk_doc_ids, ix.chunk_positions, ix.config)
        return int(g.n_nodes)
    mem_new = node_members(g.kind, g.parents, g.attr, _member_rows(ix.context, new_rows))
    g.members = sp.hstack([sp.csr_matrix(g.members), mem_new], format="csr", dtype=bool)
    I_new = _context_rows(ix.context, new_rows)
    ext_new = g.extents(I_new)                       # (V, new) = extents restricted to new rows
    n_old = ix.n_chunks - len(new_rows)
    from .prepared import context_items_major
    # (every node its attribute's seed: the extents are the context's view, Index.node_extents)
    if (context_items_major(ix) is None and old_ext is not None and old_ext.shape == (g.n_nodes, n_old)
            and np.array_equal(new_rows, np.arange(n_old, ix.n_chunks))):
        ix._extents = np.concatenate([old_ext, ext_new], axis=1)    # old rows' extents are unchanged
    affected = np.flatnonzero((ext_new > 0).any(axis=1))
    if len(affected):
        from . import small_batch
        E_aff = np.ascontiguousarray(ext_new[affected])
        up = small_batch.luk_up(E_aff, I_new) if len(new_rows) <= small_batch.MAX_ROWS else \
            np.asarray(ops.luk_up(E_aff, I_new), dtype=np.float32)
        g.intent[affected] = np.minimum(g.intent[affected], up)
    from .graph import update_cooc
    if not update_cooc(g, mem_new, [ix.chunk_doc_ids[i] for i in new_rows], ix.chunk_positions[new_rows],
                       ix.config, +1):
        set_edges(g, ix.chunk_doc_ids, ix.chunk_positions, ix.config)   # counts not kept yet: all windows once
    return int(len(affected))


def _nodes_after_delete(ix: Index, keep: np.ndarray, gone: dict) -> int:
    """Node members, intents and co-occurrence edges once the chunks not in ``keep`` are gone
    (``ix.context`` already holds the kept rows; ``gone``: the deleted chunks' "I" rows, node
    "members" (V, d), "doc_ids" and "positions", taken before). Members and extents are row-wise,
    so the kept rows' stay. A↑(m) = min(1, 1 + min_g (I(g, m) − A(g))): a deleted row where the
    node's extent A is 0 contributed a term ≥ 1, so only nodes whose extent is positive on a deleted
    row can change, and of those only the ones where such a row's bound equals the intent (it was a
    minimum) below 1; only theirs are recomputed (over the remaining rows). The window counts lose
    the deleted documents' windows. Returns the number of recomputed nodes."""
    from .prepared import context_items_major
    g = ix.graph
    old_ext, ix._extents = ix._extents, None
    g.members = sp.csr_matrix(g.members)[:, keep].tocsr()
    own = context_items_major(ix)
    if own is not None:          # every node its attribute's seed: the extents are the kept context's columns
        ix._extents = own.T      # a view, as Index.node_extents gives it
    elif old_ext is not None and old_ext.shape[1] == keep.size + gone["I"].shape[0]:
        ix._extents = np.take(old_ext, keep, axis=1)     # (a fancy index over a million columns: 7x slower)
    affected = np.zeros(0, np.int64)
    if len(gone["I"]):
        from . import small_batch
        ext = g.extents(gone["I"])
        pos = np.flatnonzero((ext > 0).any(axis=1))
        # the bound the deleted rows gave each (node, attribute): A↑ is the min of the bounds, so only
        # where a deleted row's bound equals the intent (it may have been the minimum) and the intent
        # is below 1 (else every bound is ≥ 1) can the intent rise
        bound = small_batch.luk_up(np.ascontiguousarray(ext[pos]), gone["I"]) if len(pos) else \
            np.zeros((0, g.intent.shape[1]), np.float32)
        cur = g.intent[pos]
        affected = pos[((bound <= cur) & (cur < 1.0)).any(axis=1)]
    if len(affected):
        g.intent[affected] = compute_intents(g, ix.context.dense(), nodes=affected)
        ix.context.invalidate()       # the dense context (n × M float32) is not kept past this step
    from .graph import update_cooc
    if not update_cooc(g, gone["members"], gone["doc_ids"], gone["positions"], ix.config, -1):
        set_edges(g, ix.chunk_doc_ids, ix.chunk_positions, ix.config)
    return int(len(affected))


def _remap_attributes(ix: Index, old_names: list[str]) -> None:
    """A refitted family may append columns, shifting the global index of later families'
    attributes: seeds follow their attribute by name (names are unique: "family:attribute")."""
    new_names = ix.context.attr_names
    if new_names[:len(old_names)] == old_names:
        return
    pos = {n: i for i, n in enumerate(new_names)}
    g = ix.graph
    seeds = g.attr >= 0
    g.attr[seeds] = [pos[old_names[a]] for a in g.attr[seeds]]


def _items_bm25_lexical(ix: Index, chunk_E: np.ndarray, s_items: list, t: dict, fams=None,
                        chunks_bm25=None) -> None:
    """After an update: the items, BM25 and the lexical families of the new corpus. ``fams``: the
    families already updated from the changed chunks (lexical/incremental.py), else they are built
    from the chunk texts. The families are exact (df and w(a) = log(N/df)/log(N) of the new corpus,
    docs/MULTIHOP.md); lexical concept nodes are re-selected from them (their rarity and links change
    with the corpus), so they equal a fresh build's. BM25 is computed from the stored word counts."""
    l_nodes = []
    if fams is None and ix.words is None:
        with _Timer(t, "words"):
            ix.words = _migrated_words(ix, ix.n_chunks)
    if wants_lexical_nodes(ix.config):
        with _Timer(t, "lexical"):
            fams = distinct_weights(ix, fams if fams is not None else _lexical_of_index(ix))
        with _Timer(t, "lexical_nodes"):
            l_nodes = lexical_nodes_of(ix, fams)
    with _Timer(t, "items"):
        compose_items(ix, chunk_E, s_items, l_nodes)
    with _Timer(t, "bm25"):
        if chunks_bm25 is not None:
            _bm25_with_items(ix, chunks_bm25)
        else:
            build_bm25(ix)
    with _Timer(t, "lexical"):
        build_lexical(ix, None, prebuilt=fams)
    if ix.words.title_own is None or fams is None:
        ix.words.title_own = title_own_columns(ix)


def _migrated_words(ix: Index, n: int):
    """The stored words of the first ``n`` chunks of an index whose snapshot predates them: its
    chunks are tokenised once (logged); the next save stores them."""
    from .lexical import words as lw
    t0 = time.perf_counter()
    ti, tx = ix.chunk_titles[:n], ix.chunk_texts[:n]
    W = lw.from_chunks(ti, tx)
    W.title_own = title_own_columns(ix, ti)
    log.warning("contextrag: this index's snapshot has no stored words (written by an older version); "
                "tokenised its %d chunks once in %.1f s so that updates read no old text from now on "
                "(stored with this change)", n, time.perf_counter() - t0)
    return W


def _migrate_sentences(ix: Index, n: int, t: dict) -> None:
    """The sentence hashes of the first ``n`` chunks of an index whose snapshot predates them: its
    chunks' sentences are hashed once (logged), so the update counts the distinct text as a build
    of the same corpus would; the next save stores them."""
    cs = getattr(ix, "chunk_sentences", None)
    if cs is not None and cs.n_chunks == n:
        return
    from .distinct import ChunkSentences
    with _Timer(t, "sentences"):
        t0 = time.perf_counter()
        ix.chunk_sentences = ChunkSentences.of_texts(ix.chunk_texts[:n])
    log.warning("contextrag: this index's snapshot has no sentence hashes (written by an older version); "
                "hashed its %d chunks' sentences once in %.1f s, so that its lexical weights count its distinct "
                "text from this change on (stored with it)", n, time.perf_counter() - t0)


def _incremental_names(ix: Index) -> list | None:
    """The lexical families an update can keep up to date from the changed chunks alone (title,
    term), or None when the stored ones do not match the configuration (then they are rebuilt)."""
    names = lexical_family_names(ix.config)
    lex = getattr(ix, "lexical", None)
    if lex is None or list(lex.families) != names or not set(names) <= {"title", "term"}:
        return None
    return names


def _families_after_add(ix: Index, n_old: int, new_ids, new_off):
    from .lexical import incremental as inc
    from .distinct import distinct_rows
    from .lexical.families import LexicalContext
    names = _incremental_names(ix)
    if names is None:
        return None
    rows, fams = distinct_rows(ix), {}         # the weights count the chunks of new text (index/distinct.py)
    for name in names:
        f = ix.lexical.families[name]
        if name == "title":
            fams[name], ix.words.title_own = inc.title_after_add(f, ix.words, n_old, ix.chunk_titles[n_old:], rows)
        else:
            fams[name] = inc.term_after_add(f, ix.words, n_old, new_ids, new_off, rows)
    return LexicalContext(fams, distinct=None if rows is None else int(rows.sum()))


def _families_after_delete(ix: Index, W_old, keep: np.ndarray):
    from .lexical import incremental as inc
    from .distinct import distinct_rows
    from .lexical.families import LexicalContext
    names = _incremental_names(ix)
    if names is None:
        return None
    rows, fams = distinct_rows(ix), {}
    for name in names:
        f = ix.lexical.families[name]
        if name == "title":
            fams[name], ix.words.title_own = inc.title_after_delete(f, W_old.title_own, keep, W_old.n_chunks, rows)
        else:
            fams[name] = inc.term_after_delete(f, W_old, keep, rows)
    return LexicalContext(fams, distinct=None if rows is None else int(rows.sum()))


def add_docs(ix: Index, docs: list[Document]) -> dict:
    """Embed only the new chunks, assign them to the existing codebooks, extend the context and
    refresh the nodes they touch; node selection is kept (``rebuild`` re-selects)."""
    dup = [d.doc_id for d in docs if d.doc_id in ix.docs]
    if dup:
        raise ValueError(f"docs: ids already in the index: {dup[:5]} (delete them first to replace)")
    t: dict = {}
    with _Timer(t, "chunk"):
        chunks = make_chunker(ix.config, ix.embedder).split_all(docs)
    with _Timer(t, "embed"):
        E_new = ix.embedder.embed_passages(embed_inputs([c.title for c in chunks], [c.text for c in chunks],
                                                        ix.config))
    n_old = ix.n_chunks
    s_items = summary_items_of(ix)
    if ix.words is None or ix.words.n_chunks != n_old:
        with _Timer(t, "words"):
            ix.words = _migrated_words(ix, n_old)
    _migrate_sentences(ix, n_old, t)
    # the stored rows, then the new ones: gathered when the save writes them (index/deferred.py)
    chunk_E = DeferredRows([(ix.chunk_embeddings, None), (np.asarray(E_new, np.float32), None)])
    for d in docs:
        ix.docs[d.doc_id] = doc_entry(d)
    ix.chunk_ids += [c.chunk_id for c in chunks]
    ix.chunk_doc_ids += [c.doc_id for c in chunks]
    ix.chunk_titles += [c.title for c in chunks]
    ix.chunk_texts += [c.text for c in chunks]
    ix.chunk_positions = np.concatenate([ix.chunk_positions, [c.position for c in chunks]]).astype(np.int32)
    ix.chunk_spans = np.concatenate([ix.chunk_spans, np.asarray([[c.start_char, c.end_char] for c in chunks],
                                                                  np.int64).reshape(-1, 2)])
    ix.chunk_fitted = np.concatenate([ix.chunk_fitted, np.zeros(len(chunks), bool)])
    new_rows = np.arange(n_old, ix.n_chunks)

    def graph_side():
        with _Timer(t, "context"):
            old_names = ix.context.attr_names
            extend_context(ix.context, _view(ix), new_rows, chunk_E, ix.config)
            _remap_attributes(ix, old_names)
        with _Timer(t, "graph"):
            # a node is affected when its extent is non-zero on a new chunk (its intent can only shrink);
            # a family refitted on add (no transform) may change old rows: then refresh everything
            incremental = all(FAMILIES[b.name].transform is not None for b in ix.context.blocks)
            n_aff = _refresh_nodes(ix, new_rows if incremental else None)
            ix.attr_centroids = (_centroids_after_update(ix, chunk_E, _member_rows(ix.context, new_rows).indices,
                                                         appended=new_rows)
                                 if incremental else attr_centroids(ix, chunk_E))
        return n_aff

    def word_side():
        from .lexical.incremental import append_chunks
        with _Timer(t, "words"):
            ix.words, new_ids, new_off = append_chunks(ix.words, [c.title for c in chunks], [c.text for c in chunks])
        with _Timer(t, "sentences"):
            ix.chunk_sentences = ix.chunk_sentences.appended([c.text for c in chunks])
        with _Timer(t, "lexical"):
            fams = _families_after_add(ix, n_old, new_ids, new_off)
        with _Timer(t, "bm25"):        # the new chunks' postings appended; the old chunks' stay (bm25_index.py)
            bm = _chunk_bm25(ix, n_old)
            if bm is not None:
                from .bm25_index import rows_counts
                from .core import index_stemmer
                stem = index_stemmer(ix.config)
                bm = bm.with_chunks_added(rows_counts(ix.words, new_rows, stem), word_terms_of(ix.words, stem))
        return fams, bm
    n_aff, (fams, bm) = two_lanes(graph_side, word_side)
    _items_bm25_lexical(ix, chunk_E, s_items, t, fams, bm)
    ix.info.setdefault("updates", []).append({"op": "add", "docs": len(docs), "chunks": len(chunks),
                                              "affected_nodes": n_aff,
                                              "seconds": {k: round(v, 4) for k, v in t.items()}})
    return {"docs": len(docs), "chunks": len(chunks), "affected_nodes": n_aff, "timings": t}


def _kept(strings, keep: np.ndarray):
    """The entries ``keep`` (ascending) of a list, or of stored strings (their ``take``)."""
    return strings.take(keep) if hasattr(strings, "take") else [strings[i] for i in keep]


def delete_docs(ix: Index, doc_ids) -> dict:
    """Remove the documents' chunks from every table, the context, node members, item texts and
    BM25. A summary written from any deleted chunk is dropped (its text derives from it)."""
    from .core import _doc_set
    ids = _doc_set(doc_ids)
    missing = sorted(ids - set(ix.docs))
    if missing:
        raise ValueError(f"doc_ids not in the index: {missing[:5]}")
    drop = ix.chunk_mask(ids)
    if drop.all():
        raise ValueError("doc_ids would delete every document; build a new index instead")
    keep = np.flatnonzero(~drop)
    t: dict = {}
    n_old = ix.n_chunks
    if ix.words is None or ix.words.n_chunks != n_old:
        with _Timer(t, "words"):
            ix.words = _migrated_words(ix, n_old)
    _migrate_sentences(ix, n_old, t)
    remap = np.full(ix.n_chunks, -1, np.int64)
    remap[keep] = np.arange(len(keep))
    s_items = []
    for s in summary_items_of(ix):
        if not drop[s["sources"]].any():
            s["sources"] = remap[s["sources"]]
            s_items.append(s)
    E_old = ix.chunk_embeddings                     # (a view: the rows before the delete)
    with _Timer(t, "graph"):
        gone_rows = np.flatnonzero(drop)
        gone = {"I": _context_rows(ix.context, gone_rows), "attrs": _member_rows(ix.context, gone_rows).indices,
                "members": sp.csr_matrix(ix.graph.members)[:, gone_rows].tocsr(),
                "doc_ids": [ix.chunk_doc_ids[i] for i in gone_rows], "positions": ix.chunk_positions[gone_rows]}
    for d in ids:
        del ix.docs[d]
    for name in ("chunk_ids", "chunk_doc_ids", "chunk_titles"):
        setattr(ix, name, _kept(getattr(ix, name), keep))
    ix.chunk_positions, ix.chunk_spans = ix.chunk_positions[keep], ix.chunk_spans[keep]
    ix.chunk_fitted = ix.chunk_fitted[keep]
    texts_before, words_before = ix.chunk_texts, ix.words

    def graph_side():
        chunk_E = DeferredRows([(E_old, keep)])       # gathered when the save writes them (index/deferred.py)
        with _Timer(t, "context"):
            ix.context.keep_rows(keep)
        with _Timer(t, "graph"):
            n_aff = _nodes_after_delete(ix, keep, gone)
            ix.attr_centroids = _centroids_after_update(ix, chunk_E, gone["attrs"])
        return chunk_E, n_aff

    def word_side():
        from .lexical.incremental import keep_chunks
        with _Timer(t, "words"):
            W_old = ix.words
            ix.words = keep_chunks(W_old, keep)
        with _Timer(t, "sentences"):
            ix.chunk_sentences = ix.chunk_sentences.kept(keep)
        with _Timer(t, "lexical"):
            fams = _families_after_delete(ix, W_old, keep)
        return fams

    def bm25_side():                   # the deleted chunks' postings dropped, the rest renumbered
        with _Timer(t, "bm25"):
            bm = _chunk_bm25(ix, n_old)
            return bm.with_chunks_kept(keep) if bm is not None else None

    def texts_side():                  # the kept texts' bytes, run by run (read from the snapshot's map)
        return _kept(texts_before, keep)

    def terms_side():                  # every word's BM25 term (its stem), once a process, for the items' BM25
        from .bm25_index import word_terms
        from .core import index_stemmer
        word_terms(words_before, index_stemmer(ix.config))
    # five pieces on two threads, each started as soon as a thread is free: nothing else reads the
    # chunk texts or the words' terms before the lanes end
    (chunk_E, n_aff), fams, bm, ix.chunk_texts, _ = lanes(graph_side, word_side, bm25_side, texts_side, terms_side)
    if getattr(ix.words, "_terms", None) is None:       # the vocabulary is the one before the delete
        ix.words._terms = getattr(words_before, "_terms", None)
    _items_bm25_lexical(ix, chunk_E, s_items, t, fams, bm)
    ix.info.setdefault("updates", []).append({"op": "delete", "docs": len(ids), "chunks": int(drop.sum()),
                                              "affected_nodes": n_aff, "seconds": {k: round(v, 4) for k, v in t.items()}})
    return {"docs": len(ids), "chunks": int(drop.sum()), "timings": t}


# the names the distributed executor imports (distributed/build.py)
Timer = _Timer
unit_rows = _unit_rows
