"""Answer generation (§4.1 stage 7): the answer styles, their prompts, and what is done to a reply.

Styles (``style=``):

* ``"short"`` — a few words from the top-12 passages (the evaluation's style: EM/F1 against short
  gold answers), 48 tokens at most. Its citations are the passages whose text contains the answer.
* ``"paragraph"`` — one paragraph that cites the passages it uses as ``[n]`` (n = the passage's
  1-based position in the answer's hits), 256 tokens at most. Markers naming no passage are dropped
  from the text; the rest are the answer's citations.
* ``"extractive"`` — no generation: the sentence(s) of the top passages that answer, chosen by the
  question's type, the link between passages and relevance (query/extractive.py). The default with
  no LLM, and when the only model is the tiny embedded one (``LLMClient.small_model``), which cannot
  write a useful answer.
* ``"span"`` — no generation: the name, date, number or option that answers (query/extractive.py),
  citing the passage of the sentence that holds it; the extractive sentences are its ``support``.

A reply that stops at the token cap (``finish_reason == "length"``) is ended at its last complete
sentence (contextrag/sentences.py), so an answer never stops mid-word. ``prompt=`` replaces the user
message's template (``{question}`` and ``{passages}`` are filled in).

``Answer.cost`` is this query's LLM cost, read from the client's CostLedger as the difference between
a snapshot before the query and after it (per stage: calls, cached_calls, prompt/completion tokens,
seconds, plus "total"), and ``Answer.seconds`` the wall time of the whole query. Two queries running at
once on one client see each other's calls in that difference; give each its own client (or ledger)
when exact per-query figures matter under concurrency.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .. import sentences

if TYPE_CHECKING:
    from .hybrid import Hit

STYLES = ("short", "paragraph", "extractive", "span")
NO_LLM_STYLES = ("extractive", "span")      # the styles written without an LLM
MAX_TOKENS = 48                        # the short style's cap (and the evaluation's)
STYLE_MAX_TOKENS = {"short": MAX_TOKENS, "paragraph": 256}
PASSAGE_WORDS = 120
SYSTEM = "You answer questions from the given passages. Answer with a few words only, no explanation."
PROMPT = ("Passages:\n{passages}\n\nQuestion: {q}\n"
          "Answer the question in a few words, using only the passages. "
          "If they do not contain the answer, reply: unknown.\nAnswer:")
PARAGRAPH_SYSTEM = "You answer questions from numbered passages and cite the passages you use."
PARAGRAPH_PROMPT = ("Passages:\n{passages}\n\nQuestion: {q}\n"
                    "Answer the question in one short paragraph, using only the passages. After each "
                    "sentence, cite the passages it uses by their numbers in brackets, like [1] or [2][3]. "
                    "If they do not contain the answer, reply: unknown.")
UNKNOWN = "unknown"


@dataclass
class Answer:
    """An answer and what it rests on.

    Attributes:
        text: The answer ("unknown" when the passages do not hold it).
        hits: The passages the answer was written from, numbered 1.. in this order.
        cost: This query's LLM cost per stage (calls, cached_calls, prompt/completion tokens,
            seconds) and "total".
        seconds: Wall time of the whole query.
        rewrites: The LLM's rewrites of the question that were searched.
        reranked: Whether the LLM reranked the hits.
        style: "short", "paragraph", "extractive" or "span".
        citations: 1-based numbers of the hits the answer cites.
        rewrite_calls: Per rewrite call: {kind, reply, used}.
        support: Extractive and span styles: the sentences the answer rests on.
    """

    text: str
    hits: list[Hit]
    cost: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0
    rewrites: list[str] = field(default_factory=list)
    reranked: bool = False
    style: str = "short"
    citations: list[int] = field(default_factory=list)   # 1-based numbers of the hits the answer cites
    rewrite_calls: list[dict[str, Any]] = field(default_factory=list)   # per rewrite call: {kind, reply, used}
    support: list[Any] = field(default_factory=list)   # extractive / span: the sentences the answer rests on

    @property
    def cited_hits(self) -> list[Hit]:
        """The hits the answer cites, in citation order."""
        return [self.hits[n - 1] for n in self.citations if 1 <= n <= len(self.hits)]

    def to_dict(self) -> dict[str, Any]:
        """The answer as JSON-ready values (the server's and the CLI's form)."""
        return {"answer": self.text, "style": self.style, "citations": list(self.citations),
                "hits": [h.to_dict() for h in self.hits], "cost": self.cost,
                "seconds": self.seconds, "rewrites": self.rewrites, "rewrite_calls": self.rewrite_calls,
                "reranked": self.reranked, "support": list(self.support)}


def _short(text: str, words: int) -> str:
    w = text.split()
    return " ".join(w[:words]) + (" …" if len(w) > words else "")


def check_style(style: str) -> str:
    if style not in STYLES:
        raise ValueError(f"style must be one of {STYLES} (or None for the default), got {style!r}")
    return style


def check_max_tokens(max_tokens, style: str) -> int:
    """The generation cap: ``max_tokens`` when given (an int >= 1), else the style's default."""
    if max_tokens is None:
        return STYLE_MAX_TOKENS.get(style, MAX_TOKENS)
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
        raise ValueError(f"max_tokens must be an int >= 1 or None, got {max_tokens!r}")
    return max_tokens


def check_prompt(prompt):
    """A user prompt template must name both fields it is given."""
    if prompt is None:
        return None
    if not isinstance(prompt, str):
        raise TypeError(f"prompt must be a str template or None, got {type(prompt).__name__}")
    missing = [f for f in ("{question}", "{passages}") if f not in prompt]
    if missing:
        raise ValueError(f"prompt must contain {' and '.join(missing)} (the question and the numbered passages)")
    return prompt


def messages_for(question: str, hits, style: str = "short", prompt: str | None = None) -> list[dict]:
    """The answer call's messages: the style's system message, then the passages numbered [1]..[k]
    and the question in the style's template (or ``prompt``)."""
    passages = "\n".join(f"[{i + 1}] {_short(h.text, PASSAGE_WORDS)}" for i, h in enumerate(hits))
    system = PARAGRAPH_SYSTEM if style == "paragraph" else SYSTEM
    if prompt is not None:
        user = prompt.replace("{passages}", passages).replace("{question}", question)
    else:
        user = (PARAGRAPH_PROMPT if style == "paragraph" else PROMPT).format(q=question, passages=passages)
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def clean(text: str) -> str:
    """The answer in a reply: the text after an "Answer:" label when there is one, else the first
    non-empty line that is not an echo of the prompt ("Question: ...", "Passages:", "[1] ...");
    wrapping quotes removed."""
    text = text or ""
    m = re.search(r"(?:^|\n)\s*(?:final\s+)?answer\s*:\s*(.+)", text, flags=re.IGNORECASE)
    lines = [m.group(1)] if m and m.group(1).strip() else text.splitlines()
    for line in lines:
        s = line.strip()
        if re.match(r"^(?:question|passages?)\s*:|^\[\d+\]|^(?:final\s+)?answer\s*:\s*$", s, flags=re.IGNORECASE):
            continue
        s = s.strip("\"'`“” ").strip()
        if s:
            return s
    return ""


def cost_delta(ledger, before) -> dict:
    d = ledger.since(before)
    total: dict = {}
    for v in d.values():
        for f, x in v.items():
            total[f] = total.get(f, 0) + x
    d = {k: v for k, v in d.items() if any(v.values())}
    d["total"] = total
    return d


# ---------------------------------------------------------------- citations
_MARK = re.compile(r"\s?\[(\d+(?:\s*,\s*\d+)*)\]")


def _norm(s: str) -> str:
    return " ".join(re.sub(r"[^\w\s]", " ", s.lower()).split())


def containing(answer: str | None, hits) -> list[int]:
    """1-based numbers of the hits whose text contains ``answer`` (case, punctuation and spacing
    ignored; [] for None, "" or "unknown"): the short style's citations."""
    a = _norm(answer or "")
    if not a or a == UNKNOWN:
        return []
    return [n for n, h in enumerate(hits, 1) if f" {a} " in f" {_norm(h.text)} "]


def resolve_marks(text: str, n_hits: int) -> tuple[str, list[int]]:
    """(text, citations): ``[n]`` and ``[n, m]`` markers rewritten as ``[n][m]`` with only the numbers
    of existing passages (1..n_hits); a marker left with none is removed. Citations are the distinct
    numbers in order of first mention."""
    cites: list[int] = []

    def sub(m):
        nums = [int(x) for x in re.findall(r"\d+", m.group(1))]
        ok = [x for x in nums if 1 <= x <= n_hits]
        for x in ok:
            if x not in cites:
                cites.append(x)
        lead = m.group(0)[0] if m.group(0)[0].isspace() else ""
        return lead + "".join(f"[{x}]" for x in ok) if ok else ""

    out = _MARK.sub(sub, text)
    return re.sub(r"[ \t]+([.,;:!?])", r"\1", out), cites


def finish(raw: str, style: str, cut: bool, hits) -> tuple[str, list[int]]:
    """(answer text, citations) from a model's whole reply. ``cut``: the reply stopped at the token
    cap, so it is ended at its last complete sentence."""
    if style == "paragraph":
        text = _paragraph(raw).rstrip()
        if cut:
            text = sentences.trim(text)
        text, cites = resolve_marks(text, len(hits))
        text = text.strip()
        if not text or _norm(text) == UNKNOWN:
            return UNKNOWN, []
        return text, cites
    text = clean(raw)
    if cut and text:
        text = sentences.trim(text)
    text = text or UNKNOWN
    return text, containing(text, hits)


def _paragraph(raw: str) -> str:
    """A paragraph reply without a leading "Answer:" label or leading space (its end is kept: whether
    a sentence end is followed by a space tells a stream it is complete)."""
    return re.sub(r"^\s*(?:final\s+)?answer\s*:\s*", "", raw or "", flags=re.IGNORECASE).lstrip()


def stable_prefix(raw: str, style: str, hits) -> str:
    """The part of the final answer already fixed by the reply so far (``raw``, still growing): for a
    paragraph, everything up to its last complete sentence; for a short answer, nothing (the whole
    reply decides which line is the answer). What a stream may show before the reply is finished."""
    if style != "paragraph":
        return ""
    text = _paragraph(raw)
    end = sentences.last_end(text)
    if not end or end == len(text):        # a sentence end at the very end may still grow a marker
        m = [x.end() for x in sentences._END.finditer(text) if x.end() < len(text)]
        end = m[-1] if m else 0
    return resolve_marks(text[:end], len(hits))[0].strip() if end else ""
