#!/usr/bin/env bash
# CI: the public API's types. mypy and the stubs it needs, at the versions the `typecheck` extra pins
# (read from pyproject.toml), in a small virtual environment of their own that sees the packages of
# the project's .venv (numpy, torch, langchain-core, llama-index-core: their types are part of the
# check) through a .pth file; mypy reads its settings and the checked modules from [tool.mypy].
set -euo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS
WORK=$(mktemp -d "${TMPDIR:-/tmp}/contextrag-typecheck.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
.venv/bin/python - "$WORK/requirements.txt" <<'PY'
import sys, tomllib
extra = tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]["typecheck"]
open(sys.argv[1], "w").write("\n".join(extra) + "\n")
PY
"$(.venv/bin/python -c 'import sys; print(sys._base_executable)')" -m venv "$WORK/venv"
PIP_DISABLE_PIP_VERSION_CHECK=1 "$WORK/venv/bin/python" -m pip install -q -r "$WORK/requirements.txt"
SITE=$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
echo "import site; site.addsitedir('$SITE')" \
  > "$("$WORK/venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/zz_project_venv.pth"
echo "CI: typecheck: $("$WORK/venv/bin/mypy" --version) ready after $((SECONDS - start)) s"
"$WORK/venv/bin/mypy" --cache-dir "$WORK/cache"
echo "CI: typecheck took $((SECONDS - start)) s"
