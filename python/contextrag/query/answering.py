"""The answer step after retrieval: which style, then the answer text and its citations, streamed or
not (query/answer.py has the styles and what is done to a reply; query/extractive.py the extractive
answer)."""
from __future__ import annotations

from .answer import (NO_LLM_STYLES, UNKNOWN, check_max_tokens, check_prompt, check_style, finish, messages_for,
                     stable_prefix)


def answer_style(style, client) -> str:
    """The style an answer uses: ``style`` when given; else "extractive" when there is no LLM or only
    a tiny embedded one (``client.small_model``), "short" otherwise. The one place this is decided:
    the library, the CLI, the server, the MCP tools and the web page all answer through it."""
    if style is None:
        return "extractive" if client is None or getattr(client, "small_model", False) else "short"
    return check_style(style)


def _no_llm(llm) -> bool:
    return isinstance(llm, str) and llm.strip().lower() in ("none", "off", "")


def prepare_answer(llm, style, max_tokens, prompt, resolve):
    """(client or None, style, max_tokens, prompt), checked. ``llm="none"`` (or None with no
    ``CONTEXTRAG_LLM`` set) gives no client, which only the extractive and span styles can answer
    with; ``resolve`` turns any other ``llm`` into a client (or None)."""
    if style is not None:
        check_style(style)
    client = None if _no_llm(llm) and style in (None, *NO_LLM_STYLES) else resolve(llm)
    if client is None and style is not None and style not in NO_LLM_STYLES:
        raise ValueError(f"style {style!r} needs an LLM (llm=...); without one the styles are "
                         f"{' and '.join(NO_LLM_STYLES)}")
    style = answer_style(style, client)
    max_tokens = check_max_tokens(max_tokens, style)
    prompt = check_prompt(prompt)
    if prompt is not None and style in NO_LLM_STYLES:
        raise ValueError(f"prompt is for the generated styles (short, paragraph), not style={style!r}")
    return client, style, max_tokens, prompt


def _embedder(index):
    for obj in (index, getattr(index, "index", None)):
        emb = getattr(obj, "embedder", None)
        if emb is not None and callable(getattr(emb, "embed_passages", None)):
            return emb
    raise TypeError("the extractive answer needs the index's embedder (embed_queries and embed_passages)")


def _extract(index, question, hits, cfg, style="extractive"):
    """(text, citations, support) of a no-LLM style: the sentences, or the span with its sentence."""
    from ..index.core import index_stemmer
    from .extractive import extract

    ex = extract(question, hits, _embedder(index), w_bm25=cfg.w_bm25, w_cos=cfg.w_cos, stemmer=index_stemmer(cfg))
    if style == "span" and ex.span:
        return ex.span, [ex.span_citation], list(ex.sentences)
    return ex.text, list(ex.citations), list(ex.sentences)


def compose(index, question, hits, client, style, max_tokens, prompt, cfg, *, stream: bool):
    """Generator: the answer's text deltas when ``stream`` (none otherwise); returns (text, citations,
    support)."""
    if not hits:
        if stream:
            yield UNKNOWN
        return UNKNOWN, [], []
    if style in NO_LLM_STYLES:
        text, cites, support = _extract(index, question, hits, cfg, style)
        if stream:
            yield text
        return text, cites, support
    msgs = messages_for(question, hits, style, prompt)
    if not stream:
        c = client.complete(msgs, stage="answer", max_tokens=max_tokens, temperature=0.0)
        return (*finish(c.text, style, c.finish_reason == "length", hits), [])
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
    return text, cites, []


async def acompose(index, question, hits, client, style, max_tokens, prompt, cfg):
    """(text, citations, support) on the client's async path."""
    import asyncio

    if not hits:
        return UNKNOWN, [], []
    if style in NO_LLM_STYLES:
        return await asyncio.to_thread(_extract, index, question, hits, cfg, style)
    c = await client.acomplete(messages_for(question, hits, style, prompt), stage="answer",
                               max_tokens=max_tokens, temperature=0.0)
    return (*finish(c.text, style, c.finish_reason == "length", hits), [])
