#!/usr/bin/env bash
# Everything a fresh GPU machine needs for the GPU check, in one command (for the device tool):
# build contextrag._C with the CUDA kernels for the local GPU (sm_90 on an H200) into the machine's
# python, then run bench/gpu_check.py into OUTDIR (default: $OUT/gc when $OUT is set).
#   bench/gpu_device.sh [OUTDIR] [gpu_check.py options...]
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1
PY="${PYTHON:-python3}"
if [[ $# -ge 1 && "$1" != --* ]]; then DEST="$1"; shift; else DEST="${OUT:-bench/results}/gc"; fi
mkdir -p "$DEST"
ARCH="${CUDA_ARCH:-90}"
t0=$(date +%s)
if ! CMAKE_ARGS="-DCMAKE_CUDA_ARCHITECTURES=${ARCH}" CONTEXTRAG_CUDA=ON \
     "$PY" -m pip install -q --no-build-isolation --no-deps -e . >"$DEST/build.log" 2>&1; then
  echo "[gpu_device] build failed; see $DEST/build.log"; tail -40 "$DEST/build.log"; exit 1
fi
echo "[gpu_device] built in $(( $(date +%s) - t0 ))s"
"$PY" -c "import contextrag._C as C, torch; print('[gpu_device] cuda_compiled', C.cuda_compiled(), torch.cuda.get_device_name(0))"
exec "$PY" bench/gpu_check.py "$DEST" "$@"
