"""One fresh process: queries while the process's first write runs (which imports torch), over HTTP
(``server``: the FastAPI app under uvicorn on 127.0.0.1, 8 reader threads, one POST /documents) or
in-process (``threads``: 4 reader threads, 4 threads adding). Prints one JSON line: queries run,
failed queries (with the first errors), failed writes, and whether torch was first imported by the write.

Usage: python first_write_race.py server|threads INDEX_DIR
"""
from __future__ import annotations

import json
import sys
import threading
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parents[1] / "integrations"))

QUESTIONS = ["Which magazine was started first?", "Who directed the film?", "Where is the river?",
             "What year was the band formed?", "Which city hosts the university?"]


def main(mode: str, path: str) -> None:
    from hash_embedder import HashEmbedder

    from contextrag import ContextRAG
    from contextrag.index import small_batch
    # a small add runs without torch (index/small_batch.py); the race needs a write that imports it,
    # as a large add does: every add here takes the torch path
    small_batch.MAX_ROWS = 0
    rag = ContextRAG.load(path, embedder=HashEmbedder())
    torch_before = "torch" in sys.modules
    stop = threading.Event()
    errors: dict[str, list[str]] = {"query": [], "write": []}
    counts = {"queries": 0}
    lock = threading.Lock()

    def note(err: str, kind: str = "query") -> None:
        with lock:
            errors[kind].append(err[-600:])

    if mode == "server":
        import httpx
        from live_server import LiveServer

        from contextrag.server.app import create_app
        with LiveServer(create_app(rag)) as srv:
            def reader(i):
                with httpx.Client(base_url=srv.url, timeout=60) as c:
                    while not stop.is_set():
                        r = c.post("/retrieve", json={"question": QUESTIONS[i % len(QUESTIONS)], "k": 5})
                        with lock:
                            counts["queries"] += 1
                        if r.status_code != 200 or not r.json().get("hits"):
                            note(f"HTTP {r.status_code}: {r.text}")
                        i += 1

            readers = [threading.Thread(target=reader, args=(i,)) for i in range(8)]
            [t.start() for t in readers]
            time.sleep(0.2)
            with httpx.Client(base_url=srv.url, timeout=300) as c:
                r = c.post("/documents", json={"documents": [
                    {"id": "new-doc", "text": "The Glass River runs through the old harbour city of Varn."}]})
            if r.status_code != 201:
                note(f"HTTP {r.status_code}: {r.text}", "write")
            time.sleep(0.2)
            stop.set()
            [t.join() for t in readers]
    else:
        def reader(i):
            while not stop.is_set():
                try:
                    hits = rag.retrieve(QUESTIONS[i % len(QUESTIONS)], k=5)
                    assert hits, "no hits"
                except Exception:   # noqa: BLE001 - every failure is the finding
                    note(traceback.format_exc())
                with lock:
                    counts["queries"] += 1
                i += 1

        def adder(j):
            try:
                rag.add([{"id": f"new-{j}", "text": f"Document {j} tells of the Glass River and the city of Varn."}])
            except Exception:       # noqa: BLE001
                note(traceback.format_exc(), "write")

        readers = [threading.Thread(target=reader, args=(i,)) for i in range(4)]
        adders = [threading.Thread(target=adder, args=(j,)) for j in range(4)]
        [t.start() for t in readers]
        time.sleep(0.1)
        [t.start() for t in adders]
        [t.join() for t in adders]
        stop.set()
        [t.join() for t in readers]
    print(json.dumps({"mode": mode, "torch_before_write": torch_before, "torch_after": "torch" in sys.modules,
                      "queries": counts["queries"], "query_errors": len(errors["query"]),
                      "write_errors": len(errors["write"]), "first_errors": (errors["query"] + errors["write"])[:3]}))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
