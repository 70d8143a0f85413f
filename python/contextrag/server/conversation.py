"""The question a chat asks: the last user message, read in the light of the conversation.

With an LLM, the system message and earlier turns condense the last message into a standalone
question (one short call, stage "rewrite"). Without one, the names of the earlier user turns (runs of
capitalised words, as "Mara Veldt" or "Halvorsen Labs") are carried into the query, so "Where did she
study?" after a turn about a person still retrieves that person's passages."""
from __future__ import annotations

import re

from fastapi import HTTPException

CONDENSE = ("Rewrite the user's last message as one standalone question that can be understood without "
            "the conversation: replace pronouns and references to earlier turns by what they refer to. "
            "Reply with the question only.")
MAX_TURNS = 8               # earlier turns shown to the condensing call
MAX_CARRIED = 6             # names carried into the query without an LLM
_NAME = re.compile(r"\b[A-Z][\w'’-]*(?:\s+(?:of\s+|de\s+|van\s+)?[A-Z][\w'’-]*)*")
_NOT_NAMES = frozenset("""a an and are as at be but by can could did do does for from had has have he her hers him
his how i if in is it its me my no not of on or our she so tell that the their them then there these they this
those to was we were what when where which who whom whose why will with would you your yes please thanks thank
give show list explain describe""".split())


def text_of(m) -> str:
    if m.content is None:
        return ""
    if isinstance(m.content, str):
        return m.content.strip()
    return " ".join(p.get("text", "") for p in m.content if isinstance(p, dict) and p.get("type") == "text").strip()


def split_turns(messages):
    """(system text, earlier turns [(role, text)], last user question)."""
    last = None
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].role == "user" and text_of(messages[i]):
            last = i
            break
    if last is None:
        raise HTTPException(400, "messages must hold a user message with text content")
    system = "\n".join(text_of(m) for m in messages if m.role in ("system", "developer") and text_of(m))
    turns = [(m.role, text_of(m)) for m in messages[:last] if m.role in ("user", "assistant") and text_of(m)]
    return system, turns, text_of(messages[last])


def names(text: str) -> list[str]:
    """Runs of capitalised words, leading function words dropped ("Who founded Halvorsen Labs" →
    ["Halvorsen Labs"])."""
    out = []
    for m in _NAME.finditer(text):
        words = m.group(0).split()
        while words and words[0].lower() in _NOT_NAMES:
            words = words[1:]
        if words:
            out.append(" ".join(words))
    return out


def carried(turns, question: str) -> str:
    """The question with the names of the earlier user turns (newest first) it does not already hold."""
    have = question.lower()
    extra: list[str] = []
    for role, text in reversed(turns):
        if role != "user":
            continue
        for n in names(text):
            if n.lower() not in have and n not in extra:
                extra.append(n)
    extra = extra[:MAX_CARRIED]
    return f"{question} ({'; '.join(extra)})" if extra else question


def condense_messages(system: str, turns, question: str) -> list[dict]:
    instructions = CONDENSE + (f"\n\nThe application's instructions to the assistant:\n{system}" if system else "")
    convo = "\n".join(f"{role}: {' '.join(text.split())[:1000]}" for role, text in turns[-MAX_TURNS:])
    return [{"role": "system", "content": instructions},
            {"role": "user", "content": f"Conversation:\n{convo}\n\nLast message: {question}\n\nStandalone question:"}]


def standalone_question(messages, llm) -> str:
    """The query for the last user message (see the module docstring). Blocking: the LLM call."""
    system, turns, question = split_turns(messages)
    if not turns:
        return question
    if llm is None:
        return carried(turns, question)
    c = llm.complete(condense_messages(system, turns, question), stage="rewrite", max_tokens=96)
    lines = [ln.strip() for ln in (c.text or "").strip().splitlines() if ln.strip()]
    q = lines[0].removeprefix("Standalone question:").strip().strip('"') if lines else ""
    return q or carried(turns, question)
