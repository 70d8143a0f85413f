"""CI smoke of one extra in a clean virtual environment (run by .ci/extras): a folder of HTML, PDF,
Markdown, DOCX, text, a broken PDF and an id with "/" is indexed, queried, used through the extra and
synced (0 changes). Without the docs extra the HTML and PDF files must be skipped with one
warning naming it, and the rest indexed. Usage: python .ci/extras_smoke.py EXTRA"""
from __future__ import annotations

import asyncio
import importlib.util
import json
import socket
import sys
import tempfile
import threading
import time
import urllib.request
import warnings
from pathlib import Path

EXTRA = sys.argv[1]
REPO = Path(__file__).resolve().parents[1]
# the docs extra's readers (another extra's requirements could bring them too: then they must work)
DOCS = all(importlib.util.find_spec(m) for m in ("pypdf", "trafilatura", "lxml_html_clean", "docx", "markdown_it"))


def _hash_embedder():
    spec = importlib.util.spec_from_file_location("hash_embedder", REPO / "tests" / "reliability" / "hash_embedder.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.HashEmbedder()


def _pdf(text: str) -> bytes:
    """A one-page PDF showing ``text`` in Helvetica (written by hand: no PDF writer is installed)."""
    stream = f"BT /F1 11 Tf 72 720 Td ({text}) Tj ET".encode()
    objs = [b"<< /Type /Catalog /Pages 2 0 R >>", b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
            b"/Resources << /Font << /F1 5 0 R >> >> >>",
            b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream",
            b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"]
    out, offsets = bytearray(b"%PDF-1.4\n"), []
    for i, body in enumerate(objs, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % i + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objs) + 1)
    out += b"".join(b"%010d 00000 n \n" % o for o in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objs) + 1, xref)
    return bytes(out)


def _folder(root: Path) -> set:
    (root / "people").mkdir(parents=True)
    (root / "people" / "oskar-berg.txt").write_text(
        "Oskar Berg is a Norwegian glassblower who runs the Halvorsen studio in Bergen since 2004.")
    (root / "guide.md").write_text("# Glass guide\n\n## Furnaces\n\nA glass furnace in Bergen runs at 1100 "
                                   "degrees; the Halvorsen studio rebuilt its furnace in 2019.\n")
    (root / "news.html").write_text(
        "<html><head><title>Studio news</title></head><body><nav>Home | About</nav><article>"
        "<h1>Studio news</h1><h2>Exhibition</h2><p>The Halvorsen studio shows the blown glass of Oskar Berg "
        "at the Bergen art museum this spring, with twenty new vessels.</p></article></body></html>")
    (root / "report.pdf").write_bytes(_pdf("The Halvorsen annual report 2023: glass sales in Bergen rose."))
    (root / "broken.pdf").write_bytes(b"%PDF-1.4\n" + b"\x00broken" * 30)
    readable = {"people/oskar-berg.txt", "guide.md"}
    if EXTRA == "docs" and not DOCS:
        raise AssertionError("the docs extra did not install its readers")
    if DOCS:
        import docx
        d = docx.Document()
        d.add_heading("Budget memo", level=1)
        d.add_paragraph("The Halvorsen studio budget for glass furnaces in Bergen grows in 2024.")
        d.save(str(root / "memo.docx"))
        readable |= {"news.html", "report.pdf", "memo.docx"}
    return readable


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _http(method: str, url: str, body=None):
    req = urllib.request.Request(url, method=method, data=None if body is None else json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, None


def _server(rag) -> str:
    import uvicorn

    from contextrag.server import create_app
    app = create_app(rag)
    port = _free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    threading.Thread(target=server.run, daemon=True).start()
    base = f"http://127.0.0.1:{port}"
    for _ in range(100):
        if server.started:
            break
        time.sleep(0.1)
    assert _http("GET", base + "/health")[0] == 200
    status, got = _http("POST", base + "/retrieve", {"question": "Who is Oskar Berg?", "k": 3})
    assert status == 200 and got["hits"], got
    paths = {getattr(r, "path", "") for r in app.routes}
    if "/documents/{doc_id:path}" in paths:      # ids with "/" are deletable through the path parameter
        assert _http("DELETE", base + "/documents/people%2Foskar-berg.txt")[0] == 200
        assert "people/oskar-berg.txt" not in rag.index.docs
        return "health, retrieve, delete of people/oskar-berg.txt"
    server.should_exit = True
    return "health, retrieve"


def _mcp(rag) -> str:
    from mcp.client.client import Client

    from contextrag.server.mcp_tools import create_mcp

    async def go():
        async with Client(create_mcp(rag)) as c:
            return await c.call_tool("retrieve", {"question": "Who is Oskar Berg?", "k": 2})
    res = asyncio.run(go())
    assert not res.is_error and len(res.structured_content["hits"]) == 2, res
    return "MCP retrieve tool"


def main() -> int:
    t0 = time.perf_counter()
    from contextrag import Config, ContextRAG
    from contextrag.textfile import TextFileWarning
    tmp = Path(tempfile.mkdtemp())
    readable = _folder(tmp / "corpus")
    cfg = Config(rq_sizes=(4, 2), n_join=2, n_meet=2, n_summaries=0, seed=0, chunk_tokenizer="regex",
                 chunk_tokens=60, chunk_overlap=10)
    with warnings.catch_warnings(record=True) as ws:
        warnings.simplefilter("always")
        rag = ContextRAG.build(tmp / "corpus", path=tmp / "idx", config=cfg, embedder=_hash_embedder())
    said = [str(w.message) for w in ws if issubclass(w.category, TextFileWarning)]
    assert set(rag.index.docs) == readable, (sorted(rag.index.docs), said)
    assert len(said) == 1 and "broken.pdf" in said[0], said                # one warning for every skip
    if not DOCS:
        assert "pip install 'contextrag[docs]'" in said[0], said          # a missing reader, said once
    hits = rag.retrieve("Who is Oskar Berg?", k=5)
    assert any(h.doc_id == "people/oskar-berg.txt" for h in hits), [h.doc_id for h in hits]
    rep = rag.sync_folder()                                             # the folder the index remembers
    assert (rep["added"], rep["changed"], rep["deleted"]) == ([], [], []), rep
    used = "index, retrieve, sync"
    if EXTRA == "server":
        used = _server(rag)
    elif EXTRA == "langchain":
        from contextrag.integrations.langchain import ContextRAGRetriever
        assert len(ContextRAGRetriever(index=rag, search_kwargs={"k": 2}).invoke("Oskar Berg")) == 2
        used = "LangChain retriever (search_kwargs k=2)"
    elif EXTRA == "llamaindex":
        from contextrag.integrations.llamaindex import ContextRAGRetriever
        assert len(ContextRAGRetriever(rag, k=2).retrieve("Oskar Berg")) == 2
        used = "LlamaIndex retriever"
    elif EXTRA == "mcp":
        used = _mcp(rag)
    print(f"extras smoke [{EXTRA}]: ok: {len(readable)} documents indexed, 0 changes on sync, {used} "
          f"({time.perf_counter() - t0:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
