"""Index updates: POST /documents, DELETE /documents/{doc_id}."""
from __future__ import annotations

from fastapi import APIRouter, HTTPException

from .answering import bad_request
from .schemas import AddRequest
from .state import WriteInProgress


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


def router(s) -> APIRouter:
    api = APIRouter()
    holder = s.holder

    def _write(change):
        """One write through the holder: 409 while another runs, 400 for a change the index refuses."""
        try:
            return holder.write(change)
        except WriteInProgress as e:
            raise HTTPException(409, str(e)) from None
        except (ValueError, TypeError) as e:
            raise bad_request(e) from None

    @api.post("/documents", dependencies=s.guarded, status_code=201)
    def add_documents(req: AddRequest):
        docs = [{k: v for k, v in d.model_dump().items() if v is not None} for d in req.documents]
        out = _write(lambda r: r.add(docs))
        return {"added": jsonable(out), "generation": holder.generation, "docs": len(holder.rag.index.docs)}

    @api.delete("/documents/{doc_id}", dependencies=s.guarded)
    def delete_document(doc_id: str):
        if doc_id not in holder.rag.index.docs:
            raise HTTPException(404, f"no document {doc_id!r} in the index")
        out = _write(lambda r: r.delete([doc_id]))
        return {"deleted": jsonable(out), "generation": holder.generation, "docs": len(holder.rag.index.docs)}

    return api
