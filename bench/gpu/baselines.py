"""Plain torch baselines: the same work done the way a torch user writes it, on the same device."""
from __future__ import annotations


def torch_lloyd_iter(X, C, Xf=None):
    """One Lloyd iteration in plain torch: matmul + argmin, index_add sums. Returns new centroids.
    ``Xf``: X in fp32 for the sums, converted once by the caller (not on every iteration)."""
    import torch
    k = C.shape[0]
    Cx = C.to(X.dtype)
    cn = (Cx.float() ** 2).sum(1)
    labels = (cn[None, :] - 2.0 * (X @ Cx.t()).float()).argmin(dim=1)
    Xf = X.float() if Xf is None else Xf
    sums = torch.zeros((k, X.shape[1]), dtype=torch.float32, device=X.device).index_add_(0, labels, Xf)
    counts = torch.bincount(labels, minlength=k).clamp_min(1)
    return sums / counts[:, None]


def torch_rq(X, sizes, n_iter):
    """RQ-KMeans in plain torch on every row (the work ``rq_kmeans(..., max_points_per_centroid=None)``
    does): per level one conversion of the residual to the storage dtype (for the matmul) and one
    fp32 copy (for the sums), then ``n_iter`` Lloyd iterations on them."""
    import torch
    R = X.float()
    codes = []
    for lvl, k in enumerate(sizes):
        g = torch.Generator(device=X.device).manual_seed(lvl)
        C = R[torch.randperm(R.shape[0], generator=g, device=X.device)[:k]].clone()
        Rx = R.to(X.dtype)
        for _ in range(n_iter):
            C = torch_lloyd_iter(Rx, C, R)
        cn = (C ** 2).sum(1)
        lab = (cn[None, :] - 2.0 * (Rx @ C.to(X.dtype).t()).float()).argmin(dim=1)
        R = R - C[lab]
        codes.append(lab)
    return codes


def torch_semiring(op, A, B):
    """Broadcasting form (what a user writes in torch), A (M,K) and B (K,N)."""
    import torch
    if op == "luk_up":
        return torch.clamp_max(1.0 + (B[None, :, :] - A[:, :, None]).amin(dim=1), 1.0)
    if op == "fuzzy_route":
        return torch.clamp_min((A[:, :, None] + B[None, :, :]).amax(dim=1) - 1.0, 0.0)
    return torch.minimum(A[:, :, None], B[None, :, :]).sum(dim=1)
