"""quiet_loading imports no transformers, yet quiets it when something inside the block imports it,
and puts its logging back afterwards."""
from __future__ import annotations

import json
import os
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


# A stand-in transformers (its logging module only) on sys.path: the hook's concurrency is tested
# without the seconds transformers' own import costs.
FAKE_LOGGING = """
import time
time.sleep(0.05)                 # an import that takes a while, as the real one does
_state = {"level": 30, "bars": True}
def get_verbosity(): return _state["level"]
def set_verbosity(level): _state["level"] = level
def set_verbosity_error(): _state["level"] = 40
def is_progress_bar_enabled(): return _state["bars"]
def enable_progress_bar(): _state["bars"] = True
def disable_progress_bar(): _state["bars"] = False
"""

TWO_BLOCKS = """
import json, sys, threading
from contextrag.quiet import quiet_loading
inside, errors = {}, []
both_in = threading.Barrier(2)
def block(name):
    try:
        with quiet_loading():
            both_in.wait()                              # two blocks active at once, two hooks on main
            from transformers.utils import logging as tlog
            inside[name] = [tlog.get_verbosity(), tlog.is_progress_bar_enabled()]
            both_in.wait()
    except BaseException as e:                          # RecursionError on main
        errors.append(type(e).__name__)
        both_in.abort()
threads = [threading.Thread(target=block, args=(n,)) for n in ("embedder", "llm")]
[t.start() for t in threads]
[t.join() for t in threads]
from transformers.utils import logging as tlog
print(json.dumps({"errors": errors, "inside": inside, "after": [tlog.get_verbosity(), tlog.is_progress_bar_enabled()],
                  "hooks_left": sum(type(f).__name__ == "_OnImport" for f in sys.meta_path)}))
"""


def test_two_concurrent_blocks_share_one_hook(tmp_path):
    pkg = tmp_path / "transformers" / "utils"
    pkg.mkdir(parents=True)
    (tmp_path / "transformers" / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "logging.py").write_text(FAKE_LOGGING)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path)] + sys.path)}
    for _ in range(3):
        run = subprocess.run([sys.executable, "-c", TWO_BLOCKS], capture_output=True, text=True, timeout=120,
                             env=env)
        assert run.returncode == 0, run.stderr[-2000:]
        out = json.loads(run.stdout.strip().splitlines()[-1])
        assert out["errors"] == []
        assert out["inside"] == {"embedder": [40, False], "llm": [40, False]}    # quieted in both blocks
        assert out["after"] == [30, True]                                        # restored by the last one out
        assert out["hooks_left"] == 0
