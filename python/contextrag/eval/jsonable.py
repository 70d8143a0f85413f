"""Results to plain JSON values (what results.json and questions.jsonl hold)."""
from __future__ import annotations

from pathlib import Path
from typing import Any


def jsonable(x: Any) -> Any:
    """numpy scalars/arrays, dataclasses, tuples, paths → plain JSON values."""
    import dataclasses
    try:
        import numpy as np
        if isinstance(x, np.generic):
            return x.item()
        if isinstance(x, np.ndarray):
            return x.tolist() if x.size <= 10000 else f"<array {x.shape} {x.dtype}>"
    except ImportError:  # pragma: no cover
        pass
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return jsonable(dataclasses.asdict(x))
    if isinstance(x, dict):
        return {str(k): jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple, set)):
        return [jsonable(v) for v in x]
    if isinstance(x, Path):
        return str(x)
    if isinstance(x, float) and (x != x or x in (float("inf"), float("-inf"))):
        return None
    if x is None or isinstance(x, (str, int, float, bool)):
        return x
    if hasattr(x, "to_dict"):
        return jsonable(x.to_dict())
    return str(x)
