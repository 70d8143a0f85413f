"""quiet_loading imports no transformers, yet quiets it when something inside the block imports it,
and puts its logging back afterwards."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

CODE = """
import json, sys
from contextrag.quiet import quiet_loading
out = {}
with quiet_loading():
    out["imported_by_block"] = "transformers" in sys.modules
    from transformers.utils import logging as tlog         # as a model load inside the block would
    out["inside"] = [tlog.get_verbosity(), tlog.is_progress_bar_enabled()]
out["after"] = [tlog.get_verbosity(), tlog.is_progress_bar_enabled()]
with quiet_loading():                                       # transformers already imported: quieted at once
    out["inside_again"] = [tlog.get_verbosity(), tlog.is_progress_bar_enabled()]
out["after_again"] = [tlog.get_verbosity(), tlog.is_progress_bar_enabled()]
out["hooks_left"] = sum(type(f).__name__ == "_OnImport" for f in sys.meta_path)
print(json.dumps(out))
"""


def test_quiet_loading_waits_for_transformers():
    pytest.importorskip("transformers")
    import logging
    run = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    out = json.loads(run.stdout.strip().splitlines()[-1])
    assert out["imported_by_block"] is False
    assert out["inside"] == out["inside_again"] == [logging.ERROR, False]
    assert out["after"] == out["after_again"] == [logging.WARNING, True]     # transformers' defaults
    assert out["hooks_left"] == 0


def test_quiet_loading_without_transformers_imported_is_a_no_op():
    run = subprocess.run([sys.executable, "-c", "import sys\nfrom contextrag.quiet import quiet_loading\n"
                          "with quiet_loading():\n    pass\nprint('transformers' in sys.modules)"],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.strip() == "False"
