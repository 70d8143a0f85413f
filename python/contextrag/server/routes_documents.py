"""Index updates and the document list: POST /documents, POST /documents/upload (files through the
ingest readers), GET /documents, DELETE /documents/{doc_id} (ids may hold '/': folder-indexed files).
Writes go through the holder's one writer (state.py): concurrent requests are batched, not refused."""
from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import PurePosixPath

from fastapi import APIRouter, File, HTTPException, Query, UploadFile

from .answering import bad_request
from .schemas import AddRequest
from .state import NotInIndex
from .validate import check_finite


def jsonable(x):
    """add()/delete() summaries with NumPy scalars and arrays as plain JSON values."""
    import numpy as np
    if isinstance(x, dict):
        return {str(k): jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [jsonable(v) for v in x]
    if isinstance(x, np.ndarray):
        return x.tolist()
    if isinstance(x, np.generic):
        return x.item()
    return x


def upload_id(name: str | None) -> str:
    """The document id of an uploaded file: its name as sent, a relative POSIX path ('people/a.txt'
    keeps its folder, as the folder reader would name it); '..', absolute paths and empty names are refused."""
    raw = (name or "").replace("\\", "/")
    p = PurePosixPath(raw)
    if not raw.strip() or p.is_absolute() or ".." in p.parts or not p.name:
        raise HTTPException(400, f"files: each upload needs a relative file name, got {name!r}")
    return str(p)


def _read_upload(name: str, data: bytes) -> dict:
    """One uploaded file as a document, by the ingest reader of its suffix (Unreadable: skipped)."""
    from ..ingest import KINDS, Source, read_source
    kind = KINDS.get(PurePosixPath(name).suffix.lower())
    if kind is None:
        raise HTTPException(400, f"files: {name!r} is not a supported document type "
                                 f"(suffixes: {', '.join(sorted(KINDS))})")
    return read_source(Source(PurePosixPath(name), name, kind), data)


def router(s) -> APIRouter:
    api = APIRouter()
    holder = s.holder

    def _write(fn, *args):
        try:
            return fn(*args)
        except NotInIndex as e:
            raise HTTPException(404, str(e)) from None
        except (ValueError, TypeError) as e:
            raise bad_request(e) from None

    def _reply(out, key):
        return {key: jsonable(out), "ids": out["ids"], "generation": holder.generation,
                "docs": len(holder.rag.index.docs)}

    @api.post("/documents", dependencies=s.guarded, status_code=201)
    def add_documents(req: AddRequest):
        docs = [{k: v for k, v in d.model_dump().items() if v is not None} for d in req.documents]
        for i, d in enumerate(docs):
            check_finite(d.get("metadata"), f"documents[{i}].metadata")
        return _reply(_write(holder.add, docs), "added")

    @api.post("/documents/upload", dependencies=s.guarded, status_code=201)
    async def upload_documents(files: list[UploadFile] = File(..., description="document files (txt, md, "
                                                                            "pdf, html, docx)")):
        from ..ingest import Unreadable
        docs, skipped = [], []
        for f in files:
            name = upload_id(f.filename)
            data = await f.read()
            try:
                docs.append(await asyncio.to_thread(_read_upload, name, data))
            except Unreadable as e:
                skipped.append([name, str(e)])
            except ImportError as e:     # a reader's optional dependency is missing
                skipped.append([name, f"its reader needs an extra: pip install 'contextrag[docs]' ({e})"])
        if not docs:
            raise HTTPException(400, "files: nothing readable: " + "; ".join(f"{n}: {r}" for n, r in skipped))
        out = await asyncio.to_thread(_write, holder.add, docs)
        return {**_reply(out, "added"), "skipped": skipped}

    @api.get("/documents", dependencies=s.guarded)
    def list_documents(offset: int = Query(0, ge=0), limit: int = Query(100, ge=1, le=1000)):
        ix = holder.rag.index
        chunks = Counter(ix.chunk_doc_ids)
        ids = list(ix.docs)
        page = []
        for d in ids[offset:offset + limit]:
            info = ix.docs[d] or {}
            meta = info.get("metadata") or {}
            page.append({"id": d, "title": info.get("title") or "", "source": meta.get("source"),
                         "sha256": meta.get("sha256"), "chunks": int(chunks.get(d, 0))})
        nxt = offset + limit if offset + limit < len(ids) else None
        return {"documents": page, "total": len(ids), "offset": offset, "limit": limit, "next_offset": nxt,
                "generation": holder.generation}

    @api.delete("/documents/{doc_id:path}", dependencies=s.guarded)
    def delete_document(doc_id: str):
        return _reply(_write(holder.delete, [doc_id]), "deleted")

    return api
