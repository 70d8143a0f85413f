"""`contextrag index` on the three corpus forms and `contextrag inspect` (stats + picture)."""
import json

import pytest

from contextrag.cli import main
from contextrag.index import store
from contextrag.embed.embedder import Embedder


@pytest.fixture
def cached_embedder(embedder, monkeypatch):
    monkeypatch.setattr(Embedder, "from_config", classmethod(lambda cls, config, **kw: embedder))
    return embedder


@pytest.fixture
def paras(hotpot_paragraphs):
    return hotpot_paragraphs[:12]


def _cfg(tmp_path):
    p = tmp_path / "config.json"
    p.write_text(json.dumps({"rq_sizes": [4, 2], "n_join": 3, "n_meet": 3, "n_summaries": 0}))
    return str(p)


def test_index_folder_then_inspect(tmp_path, paras, cached_embedder, capsys):
    folder = tmp_path / "corpus"
    (folder / "sub").mkdir(parents=True)
    for i, p in enumerate(paras):
        (folder / ("sub" if i % 2 else "") / f"{p['title'].replace('/', '_')}.{'md' if i % 3 == 0 else 'txt'}").write_text(p["text"])
    (folder / "ignored.csv").write_text("a,b")
    out = tmp_path / "idx"
    assert main(["index", str(folder), "--out", str(out), "--config", _cfg(tmp_path)]) == 0
    ix = store.load(out)
    assert len(ix.docs) == len(paras) and all(d.endswith((".txt", ".md")) for d in ix.docs)
    assert "graph-construction LLM tokens: 0" in capsys.readouterr().out
    png = tmp_path / "g.png"
    assert main(["inspect", str(out), "--plot", str(png)]) == 0
    text = capsys.readouterr().out
    assert "occupancy" in text and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    html = tmp_path / "g.html"
    assert main(["inspect", str(out), "--plot", str(html), "--json"]) == 0
    stats = json.loads(capsys.readouterr().out.split("\nconcept graph picture")[0])
    assert stats["chunks"] == ix.n_chunks and "<table" in html.read_text()


def test_index_jsonl_and_json_fields(tmp_path, paras, cached_embedder):
    jl = tmp_path / "c.jsonl"
    jl.write_text("\n".join(json.dumps({"key": f"k{i}", "body": p["text"], "name": p["title"], "year": 2000 + i})
                            for i, p in enumerate(paras)) + "\n")
    out = tmp_path / "i1"
    assert main(["index", str(jl), "--out", str(out), "--text-field", "body", "--id-field", "key",
                 "--title-field", "name", "--config", _cfg(tmp_path)]) == 0
    ix = store.load(out)
    assert list(ix.docs)[:2] == ["k0", "k1"] and ix.docs["k1"]["title"] == paras[1]["title"]
    assert ix.docs["k1"]["metadata"] == {"year": 2001}
    js = tmp_path / "c.json"
    js.write_text(json.dumps([p["text"] for p in paras]))
    out2 = tmp_path / "i2"
    assert main(["index", str(js), "--out", str(out2), "--config", _cfg(tmp_path)]) == 0
    assert list(store.load(out2).docs)[:3] == ["0", "1", "2"]


def test_index_bad_corpus_reports_errors(tmp_path, cached_embedder, capsys):
    jl = tmp_path / "bad.jsonl"
    jl.write_text(json.dumps({"body": "x"}) + "\n")
    assert main(["index", str(jl), "--out", str(tmp_path / "o")]) == 2
    assert "--text-field" in capsys.readouterr().err
    assert main(["index", str(tmp_path / "missing"), "--out", str(tmp_path / "o")]) == 2
    (tmp_path / "c.csv").write_text("x")
    assert main(["index", str(tmp_path / "c.csv"), "--out", str(tmp_path / "o")]) == 2
    cfg = tmp_path / "cfg.json"
    cfg.write_text(json.dumps({"no_such_field": 1}))
    jl.write_text(json.dumps({"text": "hello world"}) + "\n")
    assert main(["index", str(jl), "--out", str(tmp_path / "o"), "--config", str(cfg)]) == 2
    assert "no_such_field" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()
