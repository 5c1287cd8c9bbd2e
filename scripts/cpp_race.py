"""How often N C++ loaders constructed at once fail, and with what (torch issue #194128).

    python scripts/cpp_race.py PACKAGE.pt2 INPUTS.pt [--runs 15] [--threads 4] [--device cuda]

Builds aotipre's C++ harness for the installed torch (in a temp dir), then runs its `loaders`
mode RUNS times on the package in one worker, and as many times again with construction
serialized (--serial-construct, the workaround), and prints for each how many runs failed and
each failure's phase and first line of error, tallied, with the machine.
"""

from __future__ import annotations

import argparse
import collections
import os
import platform
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from aotipre.cpp import harness as cpp  # noqa: E402
from aotipre.doctor.canary import run_worker_job  # noqa: E402
from aotipre.runner.stages import DynamicOptions  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("package")
    ap.add_argument("inputs")
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--device", default="cpu")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="aotipre-race-") as tmp:
        flat = os.path.join(tmp, "flat.pt")
        common = {"package": os.path.abspath(a.package), "model": "model", "inputs": flat}
        steps = [cpp.build_step(os.path.join(tmp, "harness")), cpp.inputs_step(flat)]
        for i in range(a.runs):
            loaders = cpp.run_step(f"at_once{i}", mode="loaders", threads=a.threads, **common)
            serial = {**loaders, "id": f"serial{i}", "serial_construct": True}
            steps += [loaders, serial]
        job = {
            "package": common["package"],
            "source_package": common["package"],
            "inputs": {"kind": "file", "path": os.path.abspath(a.inputs)},
        }
        options = DynamicOptions(cache_dir=os.path.join(tmp, "cache"), timeout_s=600.0)
        run = run_worker_job(steps, options, tmp, tag="race", device=a.device, job=job)
        build = run.ok("cpp_build")
        if build is None:
            print("harness build failed:", run.why_not("cpp_build"))
            return 2
        print(f"{platform.node()} {platform.machine()}; torch race flag {build.get('loader_race')}")
        for kind in ("at_once", "serial"):
            tally: collections.Counter[str] = collections.Counter()
            failed = 0
            for i in range(a.runs):
                h = cpp.HarnessRun.from_entry(run.ok(f"{kind}{i}") or {}, mode="loaders")
                if h is None:
                    tally[f"step failed: {run.why_not(f'{kind}{i}')}"] += 1
                    failed += 1
                    continue
                if h.ok:
                    continue
                failed += 1
                rows = [t for t in (h.result or {}).get("per_thread") or () if t.get("error")]
                if h.signal or h.timed_out or not rows:
                    tally[f"exit {h.returncode} {h.signal or ''} in {h.phase}"] += 1
                for t in rows:
                    lines = str((t["error"] or {}).get("message", "")).strip().splitlines()
                    tally[f"{t.get('error_phase')}: {lines[0] if lines else '?'}"] += 1
            print(f"{kind}: {failed} of {a.runs} runs of {a.threads} loaders failed")
            for what, n in tally.most_common():
                print(f"  {n:3d} x {what[:300]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
