"""The x86-64-v2 floor of NumPy/PyTorch is said in one sentence, before anything native loads."""
import subprocess
import sys

import pytest

from contextrag import cpu_floor as F

NEHALEM = "fpu sse sse2 ssse3 sse4_1 sse4_2 popcnt cx16 lahf_lm"
CORE2 = "fpu sse sse2 pni ssse3 cx16 lahf_lm"


def test_missing_features_from_cpuinfo_text():
    assert F.cpu_flags(f"processor\t: 0\nflags\t\t: {NEHALEM}\n") == set(NEHALEM.split())
    assert F.cpu_flags("processor\t: 0\n") is None
    assert F.missing_features(set(NEHALEM.split()), "x86_64") == []
    assert F.missing_features(set(CORE2.split()), "x86_64") == ["SSE4.1", "SSE4.2", "POPCNT"]
    assert F.missing_features(set(), "aarch64") == []           # not an x86-64 question
    msg = F.message(["SSE4.2", "POPCNT"])
    assert msg.startswith("This CPU lacks SSE4.2, POPCNT:") and msg.count(".") <= 4 and "\n" not in msg


def test_check_exits_with_the_sentence(monkeypatch):
    monkeypatch.setattr(F, "cpu_flags", lambda cpuinfo=None: set(CORE2.split()))
    monkeypatch.setattr(F.platform, "machine", lambda: "x86_64")
    with pytest.raises(SystemExit, match="This CPU lacks SSE4.1, SSE4.2, POPCNT"):
        F.check()


def test_this_machine_passes_without_importing_numpy():
    code = "import sys, contextrag.cpu_floor as f; f.check(); print('numpy' in sys.modules, 'torch' in sys.modules)"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.split() == ["False", "False"], r.stderr
