"""Fuzzing the loaders: random bytes and random JSON into the corpus and QA-set loaders give a result or
a clear ValueError/TypeError naming the file, never another exception; every index file truncated or
with a flipped byte gives IndexFormatError, never a silently different index."""
from __future__ import annotations

import argparse
import json
import warnings
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contextrag.commands.index import read_corpus
from contextrag.eval import datasets as D
from contextrag.index import store
from contextrag.index.store import IndexFormatError
from hash_embedder import HashEmbedder

ARGS = argparse.Namespace(text_field="text", id_field="id", title_field="title")
FUZZ = settings(max_examples=150, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
        st.sampled_from(["id", "text", "title", "question", "answer", "context", "supporting_facts", "_id",
                         "paragraphs", "paragraph_text", "is_supporting", "query", "evidence_list", "body",
                         "url", "gold_ids", "type", "data"]) | st.text(max_size=5), inner, max_size=5),
    max_leaves=25)


def _expect_clear(fn, *a, **k):
    """fn's result, or None after a ValueError/TypeError/FileNotFoundError with a non-empty message."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return fn(*a, **k)
        except (ValueError, TypeError) as e:
            assert str(e).strip(), f"{type(e).__name__} without a message"
            return None


@FUZZ
@given(data=st.binary(max_size=400), suffix=st.sampled_from([".json", ".jsonl"]))
def test_corpus_loader_random_bytes(tmp_path, data, suffix):
    f = tmp_path / f"corpus{suffix}"
    f.write_bytes(data)
    docs = _expect_clear(read_corpus, f, ARGS)
    if docs is not None:
        assert docs and all(isinstance(d["text"], str) and d["text"].strip() for d in docs)


@FUZZ
@given(value=json_values, lines=st.booleans())
def test_corpus_loader_random_json(tmp_path, value, lines):
    f = tmp_path / ("c.jsonl" if lines else "c.json")
    f.write_text("\n".join(json.dumps(v) for v in value) if lines and isinstance(value, list)
                 else json.dumps(value))
    docs = _expect_clear(read_corpus, f, ARGS)
    if docs is not None:
        assert len({d["id"] for d in docs}) == len(docs)


@FUZZ
@given(value=json_values, fmt=st.sampled_from(D.FORMATS), corpus=json_values, raw=st.binary(max_size=200),
       use_raw=st.booleans())
def test_qa_loader_random_input(tmp_path, value, fmt, corpus, raw, use_raw):
    data = tmp_path / "qa.json"
    if use_raw:
        data.write_bytes(raw)
    else:
        data.write_text(json.dumps(value))
    (tmp_path / "qa_corpus.json").write_text(json.dumps(corpus))
    s = _expect_clear(D.load, data, fmt)
    if s is not None:
        assert s.questions and s.corpus and len({d.id for d in s.corpus}) == len(s.corpus)


def test_loaders_name_the_file_for_common_mistakes(tmp_path):
    cases = {"empty.json": b"", "trunc.json": b'[{"id": "a", "text": "hello wor', "trunc.jsonl":
             b'{"id": "a", "text": "ok"}\n{"id": "b", "te', "types.jsonl": b'{"id": "a", "text": 42}\n',
             "dup.jsonl": b'{"id": "a", "text": "x"}\n{"id": "a", "text": "y"}\n',
             "obj.json": b'{"text": "x"}', "png.json": b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"}
    for name, body in cases.items():
        (tmp_path / name).write_bytes(body)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with pytest.raises(ValueError) as e:
                read_corpus(tmp_path / name, ARGS)
        assert name in str(e.value), (name, str(e.value))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with pytest.raises(ValueError) as e:
                D.load(tmp_path / name, "hotpotqa")
        assert name in str(e.value), (name, str(e.value))


# ---- the index files ----------------------------------------------------------------------

def _files(root: Path):
    snap = store.snapshot_dir(root)
    return [root / store.CURRENT] + sorted(p for p in snap.rglob("*") if p.is_file())


@pytest.fixture
def pristine(tiny):
    return {p.relative_to(tiny).as_posix(): p.read_bytes() for p in _files(tiny)}


def _restore(tiny, pristine):
    for rel, body in pristine.items():
        (tiny / rel).write_bytes(body)


def test_every_file_truncated_is_rejected(tiny, pristine):
    n = 0
    for rel, body in pristine.items():
        for cut in sorted({0, 1, len(body) // 2, len(body) - 1}):
            if cut >= len(body):
                continue
            (tiny / rel).write_bytes(body[:cut])
            with pytest.raises(IndexFormatError):
                store.load(tiny, embedder=HashEmbedder())
            n += 1
            _restore(tiny, pristine)
    assert n >= 4 * len(pristine) - 2
    assert store.load(tiny, embedder=HashEmbedder()).n_chunks > 0      # restored: loads again


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(which=st.integers(0, 10_000), where=st.integers(0, 1 << 30), bit=st.integers(0, 7))
def test_any_flipped_byte_is_rejected(tiny, pristine, which, where, bit):
    rels = sorted(pristine)
    rel = rels[which % len(rels)]
    body = bytearray(pristine[rel])
    if not body:
        return
    body[where % len(body)] ^= 1 << bit
    (tiny / rel).write_bytes(bytes(body))
    try:
        with pytest.raises(IndexFormatError):
            store.load(tiny, embedder=HashEmbedder())
    finally:
        (tiny / rel).write_bytes(pristine[rel])


def test_newer_format_and_foreign_paths_are_clear(tiny, tmp_path):
    snap = store.snapshot_dir(tiny)
    m = json.loads((snap / "manifest.json").read_text())
    m["format_version"] = store.FORMAT_VERSION + 1
    (snap / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(IndexFormatError, match="newer contextrag"):
        store.load(tiny)
    f = tmp_path / "file.txt"
    f.write_text("x")
    with pytest.raises(IndexFormatError, match="not a directory"):
        store.load(f)
    with pytest.raises(FileNotFoundError, match="no index"):
        store.load(tmp_path / "absent")
