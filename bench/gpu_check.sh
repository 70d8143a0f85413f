#!/usr/bin/env bash
# The GPU check: GPU tests, then GPU benchmarks, JSON under the folder given (default
# bench/results/gpu_<UTC date>). Stays within --budget-s (default 420 s) on one H200.
#   bench/gpu_check.sh [OUTDIR] [--cpu-smoke] [--groups tests,peaks,...]
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python}"
if [[ $# -ge 1 && "$1" != --* ]]; then OUT="$1"; shift; else OUT="bench/results/gpu_$(date -u +%Y%m%dT%H%M%SZ)"; fi
exec "$PY" bench/gpu_check.py "$OUT" "$@"
