"""Cost ledger: calls, prompt and completion tokens, seconds, per stage (paper Tables 1 and 6)."""
from __future__ import annotations

import threading
from dataclasses import asdict, dataclass


@dataclass
class StageCost:
    calls: int = 0
    cached_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


class CostLedger:
    """Thread-safe per-stage totals. Cached calls are counted separately and cost no new tokens."""

    def __init__(self, data: dict | None = None):
        self._lock = threading.Lock()
        self.stages: dict[str, StageCost] = {}
        for k, v in (data or {}).items():
            self.stages[k] = StageCost(**{f: v.get(f, 0) for f in StageCost.__dataclass_fields__})

    def record(self, stage: str, completion) -> None:
        with self._lock:
            s = self.stages.setdefault(stage, StageCost())
            if getattr(completion, "cached", False):
                s.cached_calls += 1
                return
            s.calls += 1
            s.prompt_tokens += int(completion.prompt_tokens)
            s.completion_tokens += int(completion.completion_tokens)
            s.seconds += float(completion.seconds)

    def to_dict(self) -> dict:
        with self._lock:
            out = {k: asdict(v) for k, v in self.stages.items()}
        total = StageCost()
        for v in out.values():
            for f in StageCost.__dataclass_fields__:
                setattr(total, f, getattr(total, f) + v[f])
        out["total"] = asdict(total)
        return out

    def snapshot(self) -> dict[str, StageCost]:
        with self._lock:
            return {k: StageCost(**asdict(v)) for k, v in self.stages.items()}

    def since(self, before: dict[str, StageCost]) -> dict:
        """Cost accrued since a :meth:`snapshot` (e.g. one query's cost)."""
        now = self.snapshot()
        out = {}
        for k, v in now.items():
            b = before.get(k, StageCost())
            out[k] = {f: getattr(v, f) - getattr(b, f) for f in StageCost.__dataclass_fields__}
        return out
