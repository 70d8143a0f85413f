#!/usr/bin/env python
"""One prepared GPU check: GPU tests, GPU benchmarks, then the slow checks, JSON written as it goes.

    python bench/gpu_check.py OUTDIR                 # on a CUDA machine (≤ 7 minutes on one H200)
    python bench/gpu_check.py OUTDIR --cpu-smoke     # same logic, tiny shapes, Triton interpreter, CPU

Groups, in run order (bench/gpu/runner.py): tests_cuda, tests_triton, peaks, kmeans, semiring, scale,
sanitizer (memcheck first), graph, rq_kmeans, spread, cupy, compile_sweep; ``embedding`` only when
named. Each runs in its own subprocess (bench/gpu/<group>.py) with a timeout clipped to the budget
left, which it hands down to what it runs itself; a crash (an illegal address poisons a CUDA
context), a hang or a failed assertion in one group is recorded and the next group still runs.
Every group writes its partial results after each measurement; the parent merges them into
OUTDIR/gpu_check.json after every group (atomically), so whatever finished is on disk even if the
machine is taken away mid-run. The exit status is 1 when any group failed or recorded an error.

Timing: triton.testing.do_bench (CUDA events, median) for kernels; one synchronised wall-clock run
for whole pipelines (kmeans_fit, rq_kmeans, graph construction). Under --cpu-smoke: perf_counter.

Reported per benchmark: seconds, the same work done by plain torch on the same device, the ratio,
and the fraction of the bound (HBM bandwidth or bf16 tensor-core rate for k-means; the FP32 add+min
ceiling, SMs × clock × 64 terms/s = half the FP32 FMA issue rate, for semiring products).
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from gpu.embedding import embedding_texts  # noqa: E402,F401
from gpu.runner import (ALIASES, GROUPS, GROUP_TIMEOUT, OPTIONAL_GROUPS, _expand, exit_code,  # noqa: E402,F401
                        main, plan_timeout)
from gpu.sanitizer import parse_sanitizer  # noqa: E402,F401
from gpu.tests import inner_timeout, parse_pytest_verbose  # noqa: E402,F401

if __name__ == "__main__":
    sys.exit(main())
