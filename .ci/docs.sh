#!/usr/bin/env bash
# CI: the API reference site (mkdocs.yml) built with warnings as errors: a broken link, a missing page,
# a docstring mkdocstrings cannot parse or an object it cannot find fails CI. The packages are the
# `docs-site` extra's pins (read from pyproject.toml), in a small virtual environment of their own:
# mkdocstrings reads the source without importing it, so the project itself is not installed there.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS
WORK=$(mktemp -d "${TMPDIR:-/tmp}/contextrag-docs.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
PY=$(command -v python3)
[ -x .venv/bin/python ] && PY=$(.venv/bin/python -c 'import sys; print(sys._base_executable)')
"$PY" - "$WORK/requirements.txt" <<'PYEOF'
import sys, tomllib
extra = tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]["docs-site"]
open(sys.argv[1], "w").write("\n".join(extra) + "\n")
PYEOF
"$PY" -m venv "$WORK/venv"
PIP_DISABLE_PIP_VERSION_CHECK=1 "$WORK/venv/bin/python" -m pip install -q -r "$WORK/requirements.txt"
echo "CI: docs: mkdocs ready after $((SECONDS - start)) s"
"$WORK/venv/bin/mkdocs" build --strict --site-dir "$WORK/site"
test -s "$WORK/site/reference/ops/index.html" && grep -q 'id="contextrag.ops.kmeans.kmeans_fit"' "$WORK/site/reference/ops/index.html"
echo "CI: docs took $((SECONDS - start)) s"
