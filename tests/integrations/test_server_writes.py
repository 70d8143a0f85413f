"""Server writes through the one batching writer: concurrent clients all land and are told their ids,
ids are never handed out twice, folder-indexed ids (with '/') are listed and deleted, files upload
through the ingest readers, non-finite metadata is refused at the door."""
from __future__ import annotations

import shutil
import threading

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
pytest.importorskip("multipart")
httpx = pytest.importorskip("httpx")

from integration_corpus import DOCS  # noqa: E402
from live_server import LiveServer  # noqa: E402

from contextrag import ContextRAG  # noqa: E402
from contextrag.server import create_app  # noqa: E402


@pytest.fixture(scope="module")
def served(index_dir, tmp_path_factory):
    dst = tmp_path_factory.mktemp("writes") / "idx"
    shutil.copytree(index_dir, dst)
    app = create_app(ContextRAG.load(dst))
    with LiveServer(app) as s:
        s.path, s.holder = dst, app.state.holder
        yield s


def test_eight_concurrent_clients_all_land_with_their_ids(served):
    replies = [None] * 8

    def post(i):
        body = {"documents": [{"text": f"Client {i} writes about the marsh heron number {i}.",
                               "metadata": {"client": i}}]}
        replies[i] = httpx.post(served.url + "/documents", json=body, timeout=300)

    threads = [threading.Thread(target=post, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert [r.status_code for r in replies] == [201] * 8, [r.text for r in replies if r.status_code != 201]
    ids = [r.json()["ids"] for r in replies]
    assert all(len(x) == 1 for x in ids) and len({x[0] for x in ids}) == 8
    docs = ContextRAG.load(served.path).index.docs
    for i, (doc_id,) in enumerate(ids):      # each client was told the id of its own document
        assert docs[doc_id]["metadata"] == {"client": i}
    assert served.holder.batches < 8 + 1       # batched: fewer saves than writes is allowed, never more


def test_an_id_is_never_handed_out_twice(served):
    first = httpx.post(served.url + "/documents", json={"documents": [{"text": "A note on owls."}]},
                       timeout=120).json()["ids"][0]
    assert httpx.delete(f"{served.url}/documents/{first}", timeout=120).status_code == 200
    again = httpx.post(served.url + "/documents", json={"documents": [{"text": "A note on larks."}]},
                       timeout=120).json()["ids"][0]
    assert again != first


def test_folder_ids_with_slashes_list_and_delete(served, tmp_path):
    from contextrag.ingest import read_documents
    (tmp_path / "people").mkdir()
    (tmp_path / "people" / "oskar-berg.txt").write_text("Oskar Berg is a glassblower from Tessaly.")
    (tmp_path / "people" / "lena-dahl.txt").write_text("Lena Dahl restores painted boats.")
    docs = read_documents(tmp_path).docs
    assert {d["id"] for d in docs} == {"people/oskar-berg.txt", "people/lena-dahl.txt"}
    r = httpx.post(served.url + "/documents", json={"documents": docs}, timeout=120)
    assert r.status_code == 201 and sorted(r.json()["ids"]) == sorted(d["id"] for d in docs)
    listed, offset = [], 0
    while offset is not None:                   # paginated, two at a time
        page = httpx.get(served.url + "/documents", params={"offset": offset, "limit": 2}).json()
        assert len(page["documents"]) <= 2
        listed += page["documents"]
        offset = page["next_offset"]
    assert page["total"] == len(listed) and len({d["id"] for d in listed}) == len(listed)
    berg = next(d for d in listed if d["id"] == "people/oskar-berg.txt")
    assert berg["source"] == "people/oskar-berg.txt" and len(berg["sha256"]) == 64 and berg["chunks"] >= 1
    assert next(d for d in listed if d["id"] == "kettle")["title"] == "Copper kettles"
    assert httpx.delete(served.url + "/documents/people/oskar-berg.txt", timeout=120).status_code == 200
    assert httpx.delete(served.url + "/documents/people%2Flena-dahl.txt", timeout=120).status_code == 200
    r = httpx.delete(served.url + "/documents/people/oskar-berg.txt")
    assert r.status_code == 404 and "people/oskar-berg.txt" in r.text
    assert not {d["id"] for d in docs} & set(ContextRAG.load(served.path).index.docs)


def test_upload_reads_files_through_the_ingest_readers(served):
    files = [("files", ("notes/gull.md", b"# Herring gulls\n\nHerring gulls nest on the harbour roofs.", "text/markdown")),
             ("files", ("empty.txt", b"   ", "text/plain"))]
    r = httpx.post(served.url + "/documents/upload", files=files, timeout=120)
    assert r.status_code == 201, r.text
    j = r.json()
    assert j["ids"] == ["notes/gull.md"] and j["skipped"] == [["empty.txt", "it is empty"]]
    doc = ContextRAG.load(served.path).index.docs["notes/gull.md"]
    assert doc["title"] == "Herring gulls" and doc["metadata"]["format"] == "markdown"
    bad = httpx.post(served.url + "/documents/upload", files=[("files", ("x.png", b"\x89PNG", "image/png"))])
    assert bad.status_code == 400 and "x.png" in bad.text and ".md" in bad.text
    up = httpx.post(served.url + "/documents/upload", files=[("files", ("../etc/x.txt", b"text", "text/plain"))])
    assert up.status_code == 400 and "relative file name" in up.text


@pytest.mark.parametrize("value", ["NaN", "Infinity", "-Infinity"])
def test_non_finite_metadata_is_refused_naming_the_field(served, value):
    body = '{"documents": [{"text": "A note on terns.", "metadata": {"year": 2020, "s": [1, %s]}}]}' % value
    r = httpx.post(served.url + "/documents", content=body, headers={"Content-Type": "application/json"})
    assert r.status_code == 400 and "documents[0].metadata.s[1]" in r.text
    assert httpx.post(served.url + "/retrieve", json={"question": "terns", "k": 3}).status_code == 200
    assert len(ContextRAG.load(served.path).index.docs) >= len(DOCS)
