import numpy as np


def f64(x) -> np.ndarray:
    """Any array-like or torch tensor as a float64 NumPy array."""
    if hasattr(x, "detach"):
        x = x.detach().cpu().numpy()
    return np.asarray(x, dtype=np.float64)
