"""The server's writer (server/state.py ``IndexHolder``) on a saved index: each write copies the
index once, the library's way (``ContextRAG._write``: what updates replace is shared, memory-mapped
arrays are not read into memory), the served object's settings carry over, and the index swapped in
is ready for queries before any query sees it."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hash_embedder import HashEmbedder

from contextrag import ContextRAG
from contextrag.server.state import IndexHolder
from threads import wait_for_threads

NEW = [{"id": "new-a", "title": "Glass River", "text": "The Glass River runs through the old harbour city of Varn."},
       {"id": "new-b", "title": "Varn", "text": "Varn is a harbour city on the Glass River, founded in 1204."}]


@pytest.fixture
def served(tiny):
    rag = ContextRAG.load(tiny, embedder=HashEmbedder(), lock_timeout=7.5)
    rag.retrieve("Who founded the company?", k=3)
    return rag, IndexHolder(rag)


def test_a_write_copies_the_index_once_and_leaves_the_served_one_alone(served, monkeypatch):
    import copy

    from contextrag import rag as rag_module
    rag, holder = served
    old = rag.index
    before = (old.n_chunks, dict(old.docs), np.array(old.embeddings, copy=True))
    copies = []
    real = rag_module._copy_index
    monkeypatch.setattr(rag_module, "_copy_index", lambda ix: copies.append(ix) or real(ix))
    deep = copy.deepcopy
    whole = []

    def counted(x, memo=None, _nil=None):        # every deep copy, its own recursive calls included
        if x is old:
            whole.append(type(x).__name__)
        return deep(x, memo)
    monkeypatch.setattr(copy, "deepcopy", counted)
    holder.add(NEW)
    assert copies == [old]                    # one copy, of the served index, by the library's own write
    assert whole == ["Index"]                 # ... which is the one deep copy of it (with its memo)
    assert holder.rag is not rag and holder.rag.index is not old
    assert (old.n_chunks, dict(old.docs)) == before[:2]
    np.testing.assert_array_equal(np.asarray(old.embeddings), before[2])
    assert {"new-a", "new-b"} <= set(holder.rag.index.docs)
    holder.delete(["new-a"])
    assert "new-a" not in holder.rag.index.docs and "new-b" in holder.rag.index.docs
    assert holder.generation == 2


def test_the_served_object_keeps_its_settings_across_writes(served):
    rag, holder = served
    holder.add(NEW[:1])
    new = holder.rag
    assert new.lock_timeout == 7.5 and new.path == rag.path and new.llm is rag.llm
    assert new._snapshot != rag._snapshot and new._snapshot == Path(new.index.info["path"]).name


def test_the_index_swapped_in_is_ready_before_its_first_query(served, monkeypatch):
    from contextrag.query import _view
    rag, holder = served
    holder.add(NEW)
    built = []
    real = _view._build_view
    monkeypatch.setattr(_view, "_build_view", lambda ix: built.append(ix) or real(ix))
    hits = holder.rag.retrieve("Which city lies on the Glass River?", k=3)
    assert hits and built == []              # the writer built the new index's view before the swap
    assert any(h.doc_id in ("new-a", "new-b") for h in hits)


def test_a_refused_document_fails_only_its_own_request(served):
    rag, holder = served
    with pytest.raises(ValueError, match="already in the index"):
        holder.add([{"id": next(iter(rag.index.docs)), "text": "A clash."}])
    assert holder.rag is rag and holder.generation == 0
    holder.add(NEW[:1])
    assert "new-a" in holder.rag.index.docs and holder.generation == 1


def test_the_bench_ablation_copies_the_whole_index(served, monkeypatch):
    """bench_scale.py --served-copy whole: the served index deep-copied before each batch (the
    embedder shared), which the writer no longer does."""
    import importlib.util
    import sys

    from shared_data import REPO
    monkeypatch.setattr(sys, "path", list(sys.path))          # the bench puts bench/ first
    spec = importlib.util.spec_from_file_location("bench_scale_served", REPO / "bench" / "bench_scale.py")
    bs = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bs)
    rag, holder = served
    whole = bs.whole_copy_holder()(rag)._copy()
    assert whole.index is not rag.index and whole.index.embedder is rag.index.embedder
    assert whole.index.embeddings is not rag.index.embeddings
    np.testing.assert_array_equal(np.asarray(whole.index.embeddings), np.asarray(rag.index.embeddings))
    assert holder._copy().index is rag.index          # the writer's own: the object, not the index
    w = bs.whole_copy_holder()(rag)
    w.add(NEW[:1])
    assert "new-a" in w.rag.index.docs and "new-a" not in rag.index.docs


@pytest.mark.parametrize("on_disk", [True, False])
def test_a_write_frees_the_index_it_replaced_off_the_callers_thread(tiny, paragraphs, on_disk):
    """The index a write replaces is freed on a thread of its own (at a million chunks, freeing it
    held up the write's return); nothing of it is kept once that thread ends."""
    import threading
    import weakref

    from contextrag import Config

    if on_disk:
        rag = ContextRAG.load(tiny, embedder=HashEmbedder())
    else:
        rag = ContextRAG.build(paragraphs[:30], config=Config(rq_sizes=(8, 3), n_join=0, n_meet=0, n_summaries=0),
                               embedder=HashEmbedder())
    freed = []
    weakref.finalize(rag.index, lambda: freed.append(threading.current_thread().name))
    rag.add([dict(paragraphs[60], id="released/1")])
    wait_for_threads("contextrag-index-writer", "contextrag-release")
    assert freed == ["contextrag-release"]
    held = rag.index                                   # the caller keeps this one: not freed by a write
    still = []
    weakref.finalize(held, lambda: still.append(True))
    rag.delete(["released/1"])
    wait_for_threads("contextrag-index-writer", "contextrag-release")
    assert still == [] and "released/1" in held.docs and "released/1" not in rag.index.docs


def test_the_servers_writer_frees_the_replaced_index_after_answering(tiny):
    """The server's writer answers the request, then lets go of the object it replaced on a thread of
    its own: the request does not wait for the old index to be freed."""
    import threading
    import weakref

    holder = IndexHolder(ContextRAG.load(tiny, embedder=HashEmbedder()))
    freed = []
    weakref.finalize(holder.rag.index, lambda: freed.append(threading.current_thread().name))
    holder.add(NEW[:1])
    wait_for_threads("contextrag-index-writer", "contextrag-release")
    assert freed == ["contextrag-release"] and "new-a" in holder.rag.index.docs
