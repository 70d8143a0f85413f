"""The one answer function behind /answer and the chat endpoint: (answer text, hits, citations, cost,
extra) for a question on one index. Without an LLM the answer is the extractive one, as in the CLI and
MCP (query.answer_style chooses the style in one place)."""
from __future__ import annotations

from fastapi import HTTPException

def bad_request(e: Exception) -> HTTPException:
    return HTTPException(400, str(e))


def answer_question(r, llm, question, *, k, doc_ids=None, filter=None, explain=False, rewrite=True,
                    rerank=True, style=None, max_tokens=None):
    """(answer text, hits, citations, cost, extra) for one question on index ``r``."""
    from .. import query
    try:
        ans = r.answer(question, llm=llm if llm is not None else "none", k=k, doc_ids=doc_ids, filter=filter, rewrite=rewrite,
                       rerank=rerank, style=style, max_tokens=max_tokens)
        if explain:
            query.explain(r.index, question, ans.hits, doc_ids=r.doc_ids_for(doc_ids, filter))
    except (ValueError, TypeError) as e:
        raise bad_request(e) from None
    return ans.text, ans.hits, ans.citations, ans.cost, {"style": ans.style, "rewrites": ans.rewrites,
                                                          "reranked": ans.reranked}


def hits_payload(hits, explain):
    from ..query import neighbourhood
    out = {"hits": [h.to_dict() for h in hits]}
    if explain:
        out["graph"] = neighbourhood(hits)
    return out
