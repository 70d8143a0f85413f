"""A folder of HTML, PDF, Markdown, DOCX, a broken file and an id with "/" through index -> query ->
serve -> upload -> list -> delete -> sync (0 changes), as a practitioner runs it. The server part
needs the document routes (POST /documents/upload, GET /documents, DELETE /documents/{id:path});
it is skipped where the app has none of them."""
from __future__ import annotations

import json

import pytest

from contextrag import ContextRAG
from contextrag.cli import main

from ingest_files import HashEmbedder, write_docx, write_html, write_markdown, write_pdf

pytest.importorskip("fastapi")
pytest.importorskip("httpx")


def _ids(obj) -> set:
    """Every document id in a JSON reply, whatever its envelope."""
    out = set()
    if isinstance(obj, dict):
        if isinstance(obj.get("id"), str):
            out.add(obj["id"])
        for k, v in obj.items():
            if k in ("ids", "doc_ids") and isinstance(v, list):
                out.update(x for x in v if isinstance(x, str))
            else:
                out |= _ids(v)
    elif isinstance(obj, list):
        for v in obj:
            out |= _ids(v)
    return out


def _routes(app) -> set:
    """(METHOD, path) of the app's documented routes (its OpenAPI schema: included routers too)."""
    return {(m.upper(), path) for path, ops in app.openapi().get("paths", {}).items() for m in ops}


def test_folder_index_query_serve_upload_list_delete_sync(tmp_path, paras, cfg_file, hash_embedder, capsys):
    from fastapi.testclient import TestClient

    from contextrag.server import create_app
    f = tmp_path / "corpus"
    (f / "people").mkdir(parents=True)
    write_pdf(f / "report.pdf", [paras[0]["text"], paras[1]["text"]], title="Report")
    write_html(f / "news.html", "News", [(paras[2]["title"], paras[2]["text"])])
    write_markdown(f / "guide.md", "Guide", [(paras[3]["title"], paras[3]["text"])])
    write_docx(f / "memo.docx", "Memo", [(paras[4]["title"], paras[4]["text"])])
    (f / "people" / "oskar-berg.txt").write_text(paras[5]["text"])
    (f / "broken.pdf").write_bytes(b"%PDF-1.4\n" + b"\x00garbage" * 40)
    idx = tmp_path / "idx"

    assert main(["index", str(f), "--out", str(idx), "--config", cfg_file]) == 0
    cap = capsys.readouterr()
    assert "broken.pdf: skipped" in cap.err and "Traceback" not in cap.err
    assert main(["query", str(idx), paras[5]["title"], "--no-llm", "--json", "-k", "40"]) == 0
    hits = json.loads(capsys.readouterr().out)["hits"]
    assert {"people/oskar-berg.txt", "report.pdf", "news.html", "guide.md", "memo.docx"} <= \
        {d for h in hits for d in h.get("doc_ids", [h.get("doc_id")])}

    app = create_app(ContextRAG.load(idx, embedder=HashEmbedder()))
    have = _routes(app)
    needed = {("POST", "/documents/upload"), ("GET", "/documents"), ("DELETE", "/documents/{doc_id}")}
    if not needed <= have:
        pytest.skip(f"the server has no {sorted(needed - have)} route(s) yet")
    client = TestClient(app, base_url="http://127.0.0.1")      # a loopback Host, as a local client sends
    upload = paras[6]["text"]
    r = client.post("/documents/upload", files=[("files", ("upload.md", f"# Upload\n\n{upload}\n".encode(),
                                                           "text/markdown"))])
    assert r.status_code in (200, 201), r.text
    new_ids = _ids(r.json())
    assert new_ids, r.json()
    listed = client.get("/documents", params={"limit": 1000})
    assert listed.status_code == 200, listed.text
    assert {"people/oskar-berg.txt", "report.pdf", *new_ids} <= _ids(listed.json())
    gone = client.delete("/documents/people%2Foskar-berg.txt")
    assert gone.status_code == 200, gone.text
    assert "people/oskar-berg.txt" not in _ids(client.get("/documents", params={"limit": 1000}).json())
    r = client.post("/retrieve", json={"question": paras[5]["title"], "k": 40})
    assert r.status_code == 200 and "people/oskar-berg.txt" not in json.dumps(r.json())

    # the folder follows what the server did: the deleted file goes, the uploaded one is saved there
    (f / "people" / "oskar-berg.txt").unlink()
    uploaded = sorted(new_ids)[0]
    (f / uploaded).parent.mkdir(parents=True, exist_ok=True)
    (f / uploaded).write_text(f"# Upload\n\n{upload}\n")
    capsys.readouterr()
    assert main(["sync", str(idx), str(f), "--json"]) == 0
    first = json.loads(capsys.readouterr().out)
    assert "people/oskar-berg.txt" not in first["added"] + first["changed"]
    assert main(["sync", str(idx), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["changes"] == 0
