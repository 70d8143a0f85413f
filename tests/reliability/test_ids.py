"""Document ids: any non-empty string ('#', '/', '..', unicode, whitespace) is an id, chunk ids never
collide, no id becomes a file path, and the evaluation harness survives duplicate titles."""
from __future__ import annotations

import json
import os
import warnings

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contextrag import ContextRAG
from contextrag.index.chunking import chunk_id, normalize_docs, split_chunk_id
from contextrag.textfile import has_visible_text
from hash_embedder import HashEmbedder

ids = st.text(min_size=1, max_size=24).filter(lambda s: "\x00" not in s)
texts = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=300).filter(
    lambda s: has_visible_text(s) and "\x00" not in s)      # zero-width-only text is refused as empty
NASTY = ["a#1", "a", "a#1#0", "../../etc/passwd", "/abs/path", "..", ".", " ", "  lead and trail  ",
         "tab\there", "new\nline", "Henry #2", "http://example.com/page#frag", "Ωμέγα 🚀", "summary:0",
         "join:1", "doc0", "CURRENT", "snap-1-deadbeef", "LOCK", "%s{}", "'; DROP TABLE docs; --"]


@settings(max_examples=400, deadline=None)
@given(st.lists(st.tuples(ids, st.integers(0, 10_000)), min_size=1, max_size=30, unique=True))
def test_chunk_ids_are_injective_and_round_trip(pairs):
    cids = [chunk_id(d, p) for d, p in pairs]
    assert len(set(cids)) == len(cids)
    assert [split_chunk_id(c) for c in cids] == pairs
    assert not {c for c in cids} & {f"{k}:{n}" for k in ("summary", "join", "meet") for n in range(50)}


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(ids, texts), min_size=1, max_size=10, unique_by=lambda t: t[0]))
def test_any_nonempty_string_is_a_document_id(docs):
    out = normalize_docs([{"id": d, "text": t} for d, t in docs])
    assert [d.doc_id for d in out] == [d for d, _ in docs]


def test_empty_and_duplicate_ids_are_refused_clearly():
    with pytest.raises(ValueError, match=r"docs\[0\] has an empty id"):
        normalize_docs([{"id": "", "text": "x"}])
    with pytest.raises(ValueError, match="repeats the id 'a#1'"):
        normalize_docs([{"id": "a#1", "text": "x"}, {"id": "a#1", "text": "y"}])


def test_nasty_ids_round_trip_through_the_index_and_never_touch_the_filesystem(tiny, paragraphs):
    rag = ContextRAG.load(tiny, embedder=HashEmbedder())
    before = sorted(os.listdir(tiny))
    docs = [{"id": d, "title": f"T {i}", "text": paragraphs[40 + i]["text"]} for i, d in enumerate(NASTY)]
    rag.add(docs)
    again = ContextRAG.load(tiny, embedder=HashEmbedder())
    for d in NASTY:
        assert d in again.index.docs
        own = [c for c, di in zip(again.index.chunk_ids, again.index.chunk_doc_ids) if di == d]
        assert own and all(split_chunk_id(c)[0] == d for c in own)
    assert len(set(again.index.item_ids)) == len(again.index.item_ids)
    hits = again.retrieve(paragraphs[40 + 3]["text"][:200], k=5, doc_ids=[NASTY[3]])
    assert hits and all(h.doc_id in (None, NASTY[3]) for h in hits)
    again.delete(NASTY[:11])
    final = ContextRAG.load(tiny, embedder=HashEmbedder()).index
    assert not set(NASTY[:11]) & set(final.docs) and set(NASTY[11:]) <= set(final.docs)
    # the directory holds the same kinds of entries as before: no file named after an id
    from contextrag.index import store
    store.wait_removals()                 # (the replaced snapshots are removed by a thread)
    kinds = lambda names: sorted(n.split("-")[0] for n in names)  # noqa: E731
    assert kinds(os.listdir(tiny)) == kinds(before)
    assert not (tiny.parent / "etc").exists() and not os.path.exists("/abs/path")


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                  HealthCheck.too_slow])
@given(st.lists(st.tuples(ids, texts), min_size=1, max_size=4, unique_by=lambda t: t[0]))
def test_generated_ids_and_texts_survive_add_save_load_delete(tiny, docs):
    rag = ContextRAG.load(tiny, embedder=HashEmbedder())
    fresh = [(d, t) for d, t in docs if d not in rag.index.docs]
    if not fresh:
        return
    rag.add([{"id": d, "text": t} for d, t in fresh])
    ix = ContextRAG.load(tiny, embedder=HashEmbedder()).index
    for d, t in fresh:
        assert ix.docs[d] is not None
        assert t.strip() in t and any(di == d for di in ix.chunk_doc_ids)
    ContextRAG.load(tiny, embedder=HashEmbedder()).delete([d for d, _ in fresh])
    assert not {d for d, _ in fresh} & set(ContextRAG.load(tiny, embedder=HashEmbedder()).index.docs)


def test_eval_runs_on_a_dataset_with_duplicate_titles(tmp_path, paragraphs, capsys):
    """Two different paragraphs titled 'Henry' (ids 'Henry' and 'Henry #2') in one HotpotQA-shaped set."""
    p = paragraphs
    qs = []
    for i in range(4):
        a, b = p[2 * i], p[2 * i + 1]
        ctx = [["Henry", [a["text"]]], [b["title"], [b["text"]]], ["Henry", [p[20 + i]["text"]]]]
        qs.append({"_id": f"q{i}", "question": f"What is said about {b['title']}?", "answer": b["title"],
                   "type": "bridge", "supporting_facts": [["Henry", 0], [b["title"], 0]], "context": ctx})
    data = tmp_path / "dup.json"
    data.write_text(json.dumps(qs))
    from contextrag.eval import datasets as D
    s = D.load(data, "hotpotqa")
    assert "Henry" in {d.id for d in s.corpus} and "Henry #2" in {d.id for d in s.corpus}
    from contextrag.cli import main
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rc = main(["eval", str(data), "--format", "hotpotqa", "--out", str(tmp_path / "out"), "--systems",
                   "bm25,contextrag", "--no-llm", "--no-plots", "--quiet", "--cache-dir", str(tmp_path / "c"),
                   "--config", str(_tiny_config_file(tmp_path))])
    assert rc == 0, capsys.readouterr().err
    rows = [json.loads(x) for x in (tmp_path / "out" / "questions.jsonl").read_text().splitlines()]
    assert len(rows) == 8 and all(r["gold"] for r in rows)


def _tiny_config_file(tmp_path):
    f = tmp_path / "cfg.json"
    f.write_text(json.dumps({"rq_sizes": [4, 2], "n_join": 2, "n_meet": 2, "n_summaries": 0}))
    return f
