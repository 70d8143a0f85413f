import numpy as np


def f64(x) -> np.ndarray:
    """Any array-like, torch tensor (dense or sparse) or scipy.sparse matrix as a dense float64 array.

    Densifying is the reference semantics for a sparse incidence: a missing entry is a 0 degree.
    """
    if hasattr(x, "detach"):
        x = x.detach()
        if x.layout != __import__("torch").strided:
            x = x.to_dense()
        x = x.cpu().numpy()
    elif hasattr(x, "toarray") and hasattr(x, "nnz"):
        x = x.toarray()
    return np.asarray(x, dtype=np.float64)
