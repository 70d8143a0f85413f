"""NaN and Infinity in metadata: refused where documents come in (rag.add, JSONL records), naming the
field; `query --json` prints valid JSON (null) for an index that already holds one."""
from __future__ import annotations

import json
import math

import pytest

from hash_embedder import HashEmbedder

from contextrag import ContextRAG
from contextrag.cli import main
from contextrag.embed.embedder import Embedder


@pytest.fixture
def hash_embedder(monkeypatch):
    monkeypatch.setattr(Embedder, "from_config", classmethod(lambda cls, config, **kw: HashEmbedder()))


def _strict(text):
    def refuse(c):
        raise ValueError(f"bare {c} in JSON output")
    return json.loads(text, parse_constant=refuse)


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_add_refuses_non_finite_metadata(tiny, hash_embedder, value):
    rag = ContextRAG.load(tiny)
    n = len(rag.index.docs)
    with pytest.raises(ValueError, match=r"docs\[1\]\['metadata'\]\['s'\]\[0\]"):
        rag.add([{"id": "ok", "text": "fine"}, {"id": "bad", "text": "x y z", "metadata": {"s": [value]}}])
    assert len(ContextRAG.load(tiny).index.docs) == n


def test_jsonl_record_with_nan_is_refused(tmp_path, tiny, hash_embedder, capsys):
    f = tmp_path / "more.jsonl"
    f.write_text('{"id": "a", "text": "alpha text", "metadata": {"s": 1}}\n'
                 '{"id": "b", "text": "beta text", "s": NaN}\n')
    assert main(["add", str(tiny), str(f)]) != 0
    assert "'s'" in capsys.readouterr().err
    assert "b" not in ContextRAG.load(tiny).index.docs


def test_query_json_never_prints_a_bare_nan(tiny, hash_embedder, capsys):
    rag = ContextRAG.load(tiny)
    rag._write(lambda ix: [e["metadata"].update(s=math.nan) for e in ix.docs.values()])
    assert main(["query", str(tiny), "who", "--no-llm", "--json", "-k", "3"]) == 0
    out = _strict(capsys.readouterr().out)
    assert out["hits"] and all(h["metadata"].get("s", None) is None for h in out["hits"])
