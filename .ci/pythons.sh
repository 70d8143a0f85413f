#!/usr/bin/env bash
# CI: every supported Python besides the suite's own. For each interpreter, builds the package from source
# (CPU kernels, CONTEXTRAG_CUDA=OFF) into a venv of that Python and runs the tests that need no torch
# against it: the NumPy kernel path and the native tokeniser (it uses CPython's Unicode tables, whose
# API differs between versions). Interpreters: $CI_PYTHONS (names or paths), default python3.12 and
# python3.13 from PATH or pyenv; a missing one fails CI (set CI_PYTHONS to narrow the list).
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
WORK=$(mktemp -d "${TMPDIR:-/tmp}/contextrag-pythons.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

find_python() {   # a path, a pyenv version, or a name on PATH that runs (a pyenv shim may not)
  local v=$1 p
  for p in "$v" $(ls -d "${PYENV_ROOT:-$HOME/.pyenv}"/versions/"${v#python}".*/bin/"$v" 2>/dev/null | sort -rV) \
           "$(command -v "$v" 2>/dev/null)"; do
    [ -n "$p" ] && [ -x "$p" ] && "$p" -c 'import venv' 2>/dev/null && { echo "$p"; return; }
  done
}

# No torch in these venvs: the tests below must not import it (tests/conftest.py does, so it is left out).
TESTS="tests/kernels/test_numpy_without_torch.py tests/index/test_lexical_build.py
  --deselect tests/kernels/test_numpy_without_torch.py::test_numpy_and_torch_inputs_give_the_same_numbers"
for name in ${CI_PYTHONS:-python3.12 python3.13}; do
  PYX=$(find_python "$name")
  [ -n "$PYX" ] || { echo "CI pythons: $name not found" >&2; exit 1; }
  t0=$SECONDS
  V=$("$PYX" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
  echo "CI pythons: Python $V ($PYX)"
  "$PYX" -m venv "$WORK/$V"
  VPY="$WORK/$V/bin/python"
  "$VPY" -m pip install -q scikit-build-core pybind11 numpy scipy bm25s pyahocorasick pytest hypothesis
  CONTEXTRAG_CUDA=OFF "$VPY" -m pip install -q --no-build-isolation --no-deps "$REPO" > "$WORK/build-$V.log" 2>&1 \
    || { tail -40 "$WORK/build-$V.log"; exit 1; }
  mkdir "$WORK/run-$V"
  cp -r tests "$WORK/run-$V/tests"     # away from the source tree: contextrag comes from the venv
  # shellcheck disable=SC2086
  (cd "$WORK/run-$V" && PYTHONPATH=tests "$VPY" -m pytest -q -p no:cacheprovider --noconftest $TESTS \
     -o addopts="-ra" --import-mode=importlib)
  (cd "$WORK" && "$VPY" -c "
import contextrag, contextrag._C, sys, sysconfig
assert contextrag.__file__.startswith(sysconfig.get_paths()['purelib']), contextrag.__file__
assert 'torch' not in sys.modules
print('CI pythons: Python $V: contextrag', contextrag.__version__, 'native kernels from', contextrag._C.__file__)")
  echo "CI pythons: Python $V took $((SECONDS - t0)) s"
done
