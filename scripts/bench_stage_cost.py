"""What the serving-truth stages (issue #27: state, weights, the load proof, the Triton config
and the reference-value checks) cost a package they do not apply to: the same `aotipre check`
run by a checkout of an earlier commit and by this one, interleaved, in one run.

    python scripts/bench_stage_cost.py --base COMMIT [--runs 5] [--fixtures DIR]

The package is the `aoti` fixture (a token model, no buffers mutated, no --weights, no serving
config) with its sample inputs; each side runs `check` (all dynamic stages) and
`check --static-only`. Figures go to BENCHMARKS.md by hand, with the machine.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def wall(cmd: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    elapsed = time.perf_counter() - start
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(cmd)} exited {proc.returncode}:\n{proc.stderr[-2000:]}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--base", required=True, help="the commit to compare with")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--fixtures", default=None)
    args = parser.parse_args()
    fixtures = Path(args.fixtures or next((ROOT / ".fixture-cache").glob("torch-*")))
    pkg, inputs = str(fixtures / "aoti.pt2"), str(fixtures / "aoti_inputs.pt")
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp) / "base"
        subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "add", "--detach", str(base), args.base],
            check=True,
            capture_output=True,
        )
        try:
            sides = {"base": base, "this": ROOT}
            cases = {
                "check": ["check", pkg, "--inputs", inputs, "--no-config"],
                "check --static-only": ["check", pkg, "--inputs", inputs, "--static-only",
                                        "--no-config"],
            }  # fmt: skip
            times: dict[tuple[str, str], list[float]] = {}
            for _ in range(args.runs + 1):  # the first round warms the caches, not counted
                for case, argv in cases.items():
                    for side, root in sides.items():
                        env = {**os.environ, "PYTHONPATH": str(root)}
                        cmd = [sys.executable, "-m", "aotipre", *argv]
                        times.setdefault((case, side), []).append(wall(cmd, env))
        finally:
            subprocess.run(
                ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(base)],
                check=False,
                capture_output=True,
            )
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python "
          f"{platform.python_version()}; base {args.base}; median of {args.runs} runs")  # fmt: skip
    print("| command | base s | this s | this / base |")
    print("| --- | --- | --- | --- |")
    for case in cases:
        b = statistics.median(times[(case, "base")][1:])
        t = statistics.median(times[(case, "this")][1:])
        print(f"| aotipre {case} | {b:.3f} | {t:.3f} | {t / b:.2f} |")


if __name__ == "__main__":
    main()
