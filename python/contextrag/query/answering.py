"""The answer step after retrieval: which style, then the answer text and its citations, streamed or
not (query/answer.py has the styles and what is done to a reply; query/extractive.py the extractive
answer)."""
from __future__ import annotations

from .answer import (UNKNOWN, check_max_tokens, check_prompt, check_style, finish, messages_for,
                     stable_prefix)


def answer_style(style, client) -> str:
    """The style an answer uses: ``style`` when given; else "extractive" when there is no LLM or only
    a tiny embedded one (``client.small_model``), "short" otherwise."""
    if style is None:
        return "extractive" if client is None or getattr(client, "small_model", False) else "short"
    return check_style(style)


def _no_llm(llm) -> bool:
    return isinstance(llm, str) and llm.strip().lower() in ("none", "off", "")


def prepare_answer(llm, style, max_tokens, prompt, resolve):
    """(client or None, style, max_tokens, prompt), checked. ``llm="none"`` gives no client, which only
    the extractive style can answer with; ``resolve`` turns any other ``llm`` into a client."""
    if style is not None:
        check_style(style)
    client = None if _no_llm(llm) and style in (None, "extractive") else resolve(llm)
    style = answer_style(style, client)
    max_tokens = check_max_tokens(max_tokens, style)
    prompt = check_prompt(prompt)
    if prompt is not None and style == "extractive":
        raise ValueError("prompt is for the generated styles (short, paragraph), not style='extractive'")
    return client, style, max_tokens, prompt


def _embedder(index):
    for obj in (index, getattr(index, "index", None)):
        emb = getattr(obj, "embedder", None)
        if emb is not None and callable(getattr(emb, "embed_passages", None)):
            return emb
    raise TypeError("the extractive answer needs the index's embedder (embed_queries and embed_passages)")


def _extract(index, question, hits, cfg):
    from .extractive import extract

    return extract(question, hits, _embedder(index), w_bm25=cfg.w_bm25, w_cos=cfg.w_cos)


def compose(index, question, hits, client, style, max_tokens, prompt, cfg, *, stream: bool):
    """Generator: the answer's text deltas when ``stream`` (none otherwise); returns (text, citations)."""
    if not hits:
        if stream:
            yield UNKNOWN
        return UNKNOWN, []
    if style == "extractive":
        text, cites = _extract(index, question, hits, cfg)
        if stream:
            yield text
        return text, cites
    msgs = messages_for(question, hits, style, prompt)
    if not stream:
        c = client.complete(msgs, stage="answer", max_tokens=max_tokens, temperature=0.0)
        return finish(c.text, style, c.finish_reason == "length", hits)
    raw, shown, final = "", "", None
    for x in client.stream(msgs, stage="answer", max_tokens=max_tokens, temperature=0.0):
        if isinstance(x, str):
            raw += x
            p = stable_prefix(raw, style, hits)
            if len(p) > len(shown) and p.startswith(shown):
                yield p[len(shown):]
                shown = p
        else:
            final = x
    text, cites = finish(final.text, style, final.finish_reason == "length", hits)
    if text.startswith(shown) and len(text) > len(shown):
        yield text[len(shown):]
    return text, cites


async def acompose(index, question, hits, client, style, max_tokens, prompt, cfg):
    """(text, citations) on the client's async path."""
    import asyncio

    if not hits:
        return UNKNOWN, []
    if style == "extractive":
        return await asyncio.to_thread(_extract, index, question, hits, cfg)
    c = await client.acomplete(messages_for(question, hits, style, prompt), stage="answer",
                               max_tokens=max_tokens, temperature=0.0)
    return finish(c.text, style, c.finish_reason == "length", hits)
