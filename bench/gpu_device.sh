#!/usr/bin/env bash
# Everything a fresh GPU machine needs for the GPU check, in one command (for the device tool):
#   1. build contextrag._C with the CUDA kernels for the local GPU (sm_90 on an H200) into the
#      machine's python (bench/gpu/build.py: nvcc found or the reason recorded, a timeout per step);
#      if that build fails, build without CUDA so Triton is still measured;
#   2. launch one trivial CUDA kernel from the extension (a toolkit newer than the driver fails
#      here, not in the middle of the tests); if it cannot run, the check skips the CUDA groups;
#   3. run bench/gpu_check.py into OUTDIR (default: $OUT/gc when $OUT is set) within what is left of
#      a 9-minute total (GPU_CHECK_TOTAL_S), slow groups last.
# Every step's status lands in OUTDIR/build_status.json and gpu_check.json; the last lines printed
# name each group's status and every failure.
#   bench/gpu_device.sh [OUTDIR] [gpu_check.py options...]
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1
PY="${PYTHON:-python3}"
if [[ $# -ge 1 && "$1" != --* ]]; then DEST="$1"; shift; else DEST="${OUT:-bench/results}/gc"; fi
mkdir -p "$DEST"
ARCH="${CUDA_ARCH:-90}"
TOTAL="${GPU_CHECK_TOTAL_S:-540}"
t0=$(date +%s)

# guarded build (bench/gpu/build.py): nvcc looked for, a timeout per step, pip's version check off;
# without nvcc or when the CUDA build fails, built without CUDA so Triton is still measured
export PIP_DISABLE_PIP_VERSION_CHECK=1
"$PY" bench/gpu/build.py "$DEST" --arch "$ARCH" --timeout-s "${GPU_BUILD_TIMEOUT_S:-300}" || {
  printf '{"cuda_build": "failed", "fallback_build": "failed"}\n' >"$DEST/build_status.json"; exit 1; }
cuda_build=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["cuda_build"])' "$DEST/build_result.json")
build_s=$(( $(date +%s) - t0 ))

# one trivial kernel from the extension, and torch's own view of the device
"$PY" - "$DEST/probe.json" <<'EOF'
import json, sys
out = {}
try:
    import torch
    out["torch_cuda"] = torch.version.cuda
    out["device"] = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    import contextrag._C as C
    out["cuda_compiled"] = bool(C.cuda_compiled())
    if out["cuda_compiled"]:
        out["probe"] = C.cuda.probe()
except Exception as e:  # the check still runs; the reason is recorded
    out["error"] = f"{type(e).__name__}: {e}"
json.dump(out, open(sys.argv[1], "w"))
print("[gpu_device] probe", json.dumps(out))
EOF
reason=$("$PY" - "$DEST/probe.json" "$cuda_build" <<'EOF'
import json, sys
p = json.load(open(sys.argv[1]))
if sys.argv[2] != "ok":
    print(f"the CUDA build did not run: {sys.argv[2]} (see build_result.json)")
elif p.get("error"):
    print("probe: " + p["error"])
elif not p.get("cuda_compiled"):
    print("contextrag._C was built without CUDA")
elif not p.get("probe", {}).get("kernel_ran"):
    print("a trivial kernel did not run: " + p.get("probe", {}).get("error", "?"))
EOF
)
if [[ -n "$reason" ]]; then
  echo "[gpu_device] CUDA kernels cannot run ($reason): the CUDA groups are skipped, Triton is measured"
  export CONTEXTRAG_CHECK_NO_CUDA="$reason"
fi
"$PY" - "$DEST" "$cuda_build" "$build_s" "$reason" <<'EOF'
import json, sys
dest, cuda_build, build_s, reason = sys.argv[1:5]
probe = json.load(open(f"{dest}/probe.json"))
build = json.load(open(f"{dest}/build_result.json"))
json.dump({**build, "build_s": int(build_s), "probe": probe, "cuda_skipped": reason or None},
          open(f"{dest}/build_status.json", "w"), indent=2)
EOF

left=$(( TOTAL - ($(date +%s) - t0) - 15 ))
(( left < 60 )) && left=60
echo "[gpu_device] running the check with a budget of ${left}s"
exec "$PY" bench/gpu_check.py "$DEST" --budget-s "$left" "$@"
