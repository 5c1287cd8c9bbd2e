"""Benchmark `aotipre check` (dynamic stages) against bare torch scripts doing the minimum.

    python scripts/bench_dynamic.py [--runs 3] [--device cpu|cuda] [--fixtures DIR]

Cases (figures go to BENCHMARKS.md by hand, with the machine):
- AOTI package + inputs: `aotipre check aoti.pt2 --inputs aoti_inputs.pt` vs a script that
  imports torch, loads the package and runs it once (goal: <= 1.25x).
- ExportedProgram: `aotipre check ep_only.pt2 --no-cache` vs a script that loads the
  ExportedProgram, compiles it, loads the package and runs it once (goal: <= 1.15x); and a
  second check with a warm compile cache (goal: <= 0.35x of that script).
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

BARE_AOTI = """
import sys, torch
m = torch._inductor.aoti_load_package(sys.argv[1])
args, kwargs = torch.load(sys.argv[2], weights_only=True)
dev = sys.argv[3]
args = [a.to(dev) for a in args]
out = m(*args, **kwargs)
"""

BARE_EP = """
import sys, tempfile, os, torch
ep = torch.export.load(sys.argv[1])
args, kwargs = ep.example_inputs
with tempfile.TemporaryDirectory() as d:
    path = torch._inductor.aoti_compile_and_package(ep, package_path=os.path.join(d, "m.pt2"))
    m = torch._inductor.aoti_load_package(path)
    out = m(*args, **kwargs)
"""


def wall(cmd: list[str], env: dict[str, str] | None = None) -> float:
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    elapsed = time.perf_counter() - start
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
    return elapsed


def median(cmd: list[str], runs: int, env: dict[str, str] | None = None) -> float:
    return statistics.median(wall(cmd, env) for _ in range(runs))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--fixtures", type=Path, default=None)
    args = ap.parse_args()
    fx = args.fixtures or next((ROOT / ".fixture-cache").glob("torch-*"))
    suffix = "_cuda" if args.device == "cuda" else ""
    aoti, inputs, ep = fx / f"aoti{suffix}.pt2", fx / "aoti_inputs.pt", fx / "ep_only.pt2"
    py = sys.executable
    env = dict(os.environ)
    print(
        f"machine: {platform.node()} {platform.machine()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}, device {args.device}"
    )
    rows = []
    bare = median([py, "-c", BARE_AOTI, str(aoti), str(inputs), args.device], args.runs, env)
    tool = median([py, "-m", "aotipre", "check", str(aoti), "--inputs", str(inputs)], args.runs)
    rows.append(("AOTI + inputs: bare load+run", bare, 1.0))
    rows.append(("AOTI + inputs: aotipre check", tool, tool / bare))
    tool_np = median(
        [py, "-m", "aotipre", "check", str(aoti), "--inputs", str(inputs), "--no-probe"],
        args.runs,
    )
    rows.append(("AOTI + inputs: aotipre check --no-probe", tool_np, tool_np / bare))

    bare_ep = median([py, "-c", BARE_EP, str(ep)], args.runs, env)
    rows.append(("ExportedProgram: bare load+compile+load+run", bare_ep, 1.0))

    def ep_check(cache_dir: str) -> list[str]:
        return [
            py,
            "-m",
            "aotipre",
            "check",
            str(ep),
            "--device",
            args.device,
            "--cache-dir",
            cache_dir,
        ]

    with tempfile.TemporaryDirectory() as cache:
        cold = []
        for _ in range(args.runs):
            with tempfile.TemporaryDirectory() as fresh:
                cold.append(wall(ep_check(fresh)))
        rows.append(
            (
                "ExportedProgram: aotipre check (cold cache)",
                statistics.median(cold),
                statistics.median(cold) / bare_ep,
            )
        )
        warm_cmd = ep_check(cache)
        wall(warm_cmd)  # fill the cache
        warm = median(warm_cmd, args.runs)
        rows.append(("ExportedProgram: aotipre check (warm cache)", warm, warm / bare_ep))
    print(f"\nmedian of {args.runs} runs each")
    print("| case | wall s | x bare script |")
    print("| --- | --- | --- |")
    for label, s, ratio in rows:
        print(f"| {label} | {s:.2f} | {ratio:.2f} |")


if __name__ == "__main__":
    main()
