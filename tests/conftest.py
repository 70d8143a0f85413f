"""Shared fixtures for the kernel tests: backends, instruction sets, input kinds and layouts."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from contextrag.ops._backend import availability, native

CPU_BACKENDS = [b for b in ("ref", "cpu") if availability()[b][0]]  # also in kernels/kernel_helpers.py
ISAS = ("amx", "avx512", "avx2", "generic")   # amx: the AVX-512 dispatch with the AMX tile GEMMs


@pytest.fixture
def rng():
    return np.random.default_rng(12345)


@pytest.fixture(params=CPU_BACKENDS)
def backend(request):
    return request.param


@pytest.fixture(params=ISAS)
def isa(request):
    """Run the native CPU kernels with each instruction set this machine supports, then restore."""
    C = native()
    if C is None or not hasattr(C, "set_cpu_isa"):
        pytest.skip("contextrag._C without ISA control")
    if not C.cpu_isa_supported(request.param):
        pytest.skip(f"{request.param} not supported on this CPU")
    C.set_cpu_isa(request.param)
    yield request.param
    C.set_cpu_isa("auto")
