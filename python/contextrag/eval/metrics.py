"""Answer and retrieval metrics.

Answers (paper §5.3): exact match and token F1 after SQuAD normalisation (lower case, punctuation and
the articles a/an/the removed, whitespace collapsed), the best over the gold answer and its aliases.
As in HotpotQA's official script, a yes/no/noanswer prediction or gold scores F1 = 0 unless they are
equal (a "yes" must not earn partial credit against "no").

Retrieval: recall@k of the gold supporting passages, counted over **documents**. Hits are read in
rank order; a chunk hit contributes its ``doc_id`` the first time that document appears (several
chunks of one article count once); **virtual items** (cluster summaries, bridge/join and meet nodes:
every ``kind`` other than ``"chunk"``) are skipped: they are not passages of the corpus, and crediting
them with their member chunks' documents would reward a node for covering half the corpus. So
``recall@k`` = |gold ∩ first k distinct documents of the chunk hits| / |gold|. Because skipped
virtual items take no slot there, :func:`strict_recall_at_k` also reports the budgeted variant: the
first k *items* of any kind, virtual items occupying a slot and counting as misses.
"""
from __future__ import annotations

import math
import re
import string
from collections import Counter
from typing import Any, Iterable, Sequence

K_VALUES = (2, 5, 10)
CURVE_KS = tuple(range(1, 21))

_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)
_PUNCT = set(string.punctuation)
_SPECIAL = ("yes", "no", "noanswer")


def normalize_answer(s: Any) -> str:
    if not isinstance(s, str):
        raise TypeError(f"answer must be a str, got {type(s).__name__}")
    s = s.lower()
    s = "".join(ch for ch in s if ch not in _PUNCT)
    s = _ARTICLES.sub(" ", s)
    return " ".join(s.split())


def _gold_list(gold: str | Sequence[str]) -> list[str]:
    if isinstance(gold, str):
        return [gold]
    if not isinstance(gold, (list, tuple)) or not all(isinstance(g, str) for g in gold):
        raise TypeError("gold must be a str or a list of str (the answer and its aliases)")
    if not gold:
        raise ValueError("gold must hold at least one answer")
    return list(gold)


def exact_match(prediction: str, gold: str | Sequence[str]) -> float:
    p = normalize_answer(prediction)
    return float(max(p == normalize_answer(g) for g in _gold_list(gold)))


def _f1_one(p: str, g: str) -> float:
    if (p in _SPECIAL or g in _SPECIAL) and p != g:
        return 0.0
    pt, gt = p.split(), g.split()
    if not pt or not gt:
        return float(pt == gt)
    common = Counter(pt) & Counter(gt)
    same = sum(common.values())
    if same == 0:
        return 0.0
    prec, rec = same / len(pt), same / len(gt)
    return 2 * prec * rec / (prec + rec)


def token_f1(prediction: str, gold: str | Sequence[str]) -> float:
    p = normalize_answer(prediction)
    return max(_f1_one(p, normalize_answer(g)) for g in _gold_list(gold))


# ---------------------------------------------------------------------------------------------------
# retrieval

def _field(hit: Any, name: str, default=None):
    if isinstance(hit, dict):
        return hit.get(name, default)
    return getattr(hit, name, default)


def is_virtual(hit: Any) -> bool:
    """Summary, bridge (join) and meet nodes: anything whose kind is not a corpus chunk."""
    return (_field(hit, "kind", "chunk") or "chunk") != "chunk"


def ranked_doc_ids(hits: Iterable[Any]) -> list[str]:
    """Distinct documents of the chunk hits, in rank order (virtual items skipped)."""
    out: list[str] = []
    seen: set[str] = set()
    for h in hits:
        if is_virtual(h):
            continue
        d = _field(h, "doc_id")
        if d is None:
            continue
        d = str(d)
        if d not in seen:
            seen.add(d)
            out.append(d)
    return out


def _check_k(k: Any) -> int:
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"k must be an int >= 1, got {k!r}")
    return k


def recall_at_k(ranked: Sequence[str], gold: Iterable[str], k: int) -> float | None:
    """|gold ∩ ranked[:k]| / |gold| over distinct document ids; None when there is no gold."""
    _check_k(k)
    g = set(map(str, gold))
    if not g:
        return None
    return len(g & set(ranked[:k])) / len(g)


def complete_at_k(ranked: Sequence[str], gold: Iterable[str], k: int) -> float | None:
    """1.0 when *every* gold passage is in the first k documents (the multi-hop question is fully
    supported), else 0.0; None when there is no gold."""
    _check_k(k)
    g = set(map(str, gold))
    if not g:
        return None
    return float(g <= set(ranked[:k]))


def strict_recall_at_k(hits: Sequence[Any], gold: Iterable[str], k: int) -> float | None:
    """Recall within the first k items of any kind: virtual items take a slot and count as misses."""
    _check_k(k)
    g = set(map(str, gold))
    if not g:
        return None
    docs = {str(_field(h, "doc_id")) for h in list(hits)[:k] if not is_virtual(h) and _field(h, "doc_id") is not None}
    return len(g & docs) / len(g)


def percentile(values: Sequence[float], q: float) -> float | None:
    """Linear-interpolated percentile (numpy's default), None for no values."""
    if not 0 <= q <= 100:
        raise ValueError(f"q must be in [0, 100], got {q}")
    v = sorted(float(x) for x in values if x is not None)
    if not v:
        return None
    pos = (len(v) - 1) * q / 100.0
    lo, hi = math.floor(pos), math.ceil(pos)
    return v[lo] + (v[hi] - v[lo]) * (pos - lo)


def mean(values: Iterable[float | None]) -> float | None:
    v = [float(x) for x in values if x is not None]
    return sum(v) / len(v) if v else None
