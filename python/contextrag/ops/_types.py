"""The array types of the public op signatures.

Every op takes NumPy arrays, torch tensors (CPU or CUDA) or CuPy arrays and returns the kind it was
given. CuPy is optional and ships no type information, so a CuPy argument type-checks as ``Any``;
the aliases name NumPy and torch only. torch is imported here for type checkers alone: the ops that
run on NumPy input without torch stay torch-free at run time.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, TypeVar, Union

import numpy as np

if TYPE_CHECKING:
    import scipy.sparse
    import torch

__all__ = ["Array", "ArrayT", "Incidence"]

#: A dense array an op accepts: ``numpy.ndarray`` or ``torch.Tensor`` (CPU or CUDA); a CuPy array too.
Array = Union[np.ndarray, "torch.Tensor"]

#: A dense array whose kind (NumPy or torch) the op's result repeats.
ArrayT = TypeVar("ArrayT", np.ndarray, "torch.Tensor")

#: A fuzzy incidence matrix: dense (:data:`Array`) or sparse (``scipy.sparse`` matrix or array, or a
#: torch sparse tensor); a missing sparse entry is degree 0.
Incidence = Union[np.ndarray, "torch.Tensor", "scipy.sparse.sparray", "scipy.sparse.spmatrix"]
