#!/usr/bin/env python
"""What the first touch of fresh memory costs on this machine -> bench/results/fresh_memory.json.

    python bench/bench_fresh_memory.py [--gb 1] [--rounds 4] [--advice numpy|off] [--key NAME]
    python bench/bench_fresh_memory.py --pairs 3 [--pause 15] [--key NAME]

An update at a million chunks makes gigabytes of new arrays; on some machines the kernel's work to
give a process fresh pages outweighs the copying. In one fresh process, ``--rounds`` times: fill a
new ``--gb`` GB float32 array (``np.ones``), then free it. The first round's pages are new to the
process; the later ones are most likely the pages the previous round freed. Per round: wall, user
and system CPU seconds, minor faults, and the kernel's counters of huge-page faults, compaction
stalls and direct reclaim (system-wide, so other processes' count too). A virtual machine whose
host takes back the guest's free memory (a balloon, free page reporting) shows a first round many
times the later ones; bare metal shows them alike.

``--advice``: ``numpy`` leaves NumPy's transparent-huge-page advice as it is (on by default on
Linux), ``off`` turns it off, as an index write does where the kernel follows the advice
(contextrag.index.hugepages). ``--pairs N`` runs N pairs of fresh processes, one each way,
alternating which goes first, ``--pause`` seconds apart (so that each starts from memory the
machine has had time to take back, as a command run now and then does).
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_scale import machine  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"


def _usage() -> tuple[float, float, int]:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime, r.ru_stime, r.ru_minflt


_VMSTAT = ("thp_fault_alloc", "compact_stall", "compact_migrate_scanned", "pgsteal_direct")


def _vmstat() -> dict:
    """The kernel's counters of huge-page faults, compaction and direct reclaim (system-wide)."""
    try:
        d = dict(ln.split() for ln in open("/proc/vmstat"))
    except OSError:
        return {}
    return {k: int(d.get(k, 0)) for k in _VMSTAT}


def _rounds(gb: float, n_rounds: int, advice: str) -> list:
    if advice == "off":
        from contextrag.index.hugepages import _setter
        _setter()(False)
    n = int(gb * (1 << 30)) // 4
    rounds = []
    for _ in range(n_rounds):
        u0, s0, f0 = _usage()
        v0, t = _vmstat(), time.perf_counter()
        x = np.ones(n, np.float32)
        wall = time.perf_counter() - t
        u1, s1, f1 = _usage()
        v1 = _vmstat()
        rounds.append({"wall_s": round(wall, 3), "user_s": round(u1 - u0, 3), "system_s": round(s1 - s0, 3),
                       "minor_faults": f1 - f0, "vmstat": {k: v1[k] - v0[k] for k in v1}})
        del x
    return rounds


def _pairs(a) -> list:
    runs = []
    for i in range(a.pairs):
        for advice in (("numpy", "off") if i % 2 == 0 else ("off", "numpy")):
            time.sleep(a.pause)
            la = os.getloadavg()[0]
            out = subprocess.run([sys.executable, __file__, "--child", "--gb", str(a.gb), "--rounds", str(a.rounds),
                                  "--advice", advice], capture_output=True, text=True, check=True).stdout
            runs.append({"pair": i + 1, "advice": advice, "loadavg_1min": la, "rounds": json.loads(out)})
            print(runs[-1])
    return runs


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--gb", type=float, default=1.0)
    p.add_argument("--rounds", type=int, default=4)
    p.add_argument("--advice", choices=("numpy", "off"), default="numpy")
    p.add_argument("--pairs", type=int, default=0)
    p.add_argument("--pause", type=float, default=15.0)
    p.add_argument("--key", default="fresh_memory")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.gb <= 0 or a.rounds < 1 or a.pairs < 0 or a.pause < 0:
        p.error("--gb must be > 0, --rounds >= 1, --pairs and --pause >= 0")
    if a.child:
        print(json.dumps(_rounds(a.gb, a.rounds, a.advice)))
        return 0
    la0 = os.getloadavg()
    out = {"machine": machine(), "gb": a.gb}
    if a.pairs:
        out["pause_s"] = a.pause
        out["runs"] = _pairs(a)
    else:
        out["advice"] = a.advice
        out["rounds"] = _rounds(a.gb, a.rounds, a.advice)
        for i, r in enumerate(out["rounds"]):
            print(f"round {i + 1}: {r}")
    out.update(loadavg_start=la0, loadavg_end=os.getloadavg())
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / "fresh_memory.json"
    data = json.loads(path.read_text()) if path.exists() else {"benchmark": "fresh_memory"}
    data[a.key] = out
    path.write_text(json.dumps(data, indent=2, default=str))
    print(f"wrote {path} [{a.key}]")
    return 0


if __name__ == "__main__":
    sys.exit(main())
