"""Benchmark the static path: `aotipre inspect` / `check --static-only` vs `python -c "import torch"`,
and peak memory on a package with a 1 GB weight member. Results go to BENCHMARKS.md by hand.

    python scripts/bench_static.py [--runs 7] [--package PATH] [--inputs PATH] [--big-gb 1]

aotipre's bytecode is compiled first (as `pip install` does for torch and for a non-editable
aotipre), so that a PYTHONDONTWRITEBYTECODE=1 environment does not make every run recompile
aotipre from source while torch loads its .pyc files. One extra row runs `check --static-only`
through the typer app (the fast lane off), for comparison.
"""

from __future__ import annotations

import argparse
import compileall
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def timed(cmd: list[str], runs: int) -> tuple[float, float]:
    """Median wall seconds and max peak RSS (MiB) over `runs` runs (after one warm-up)."""
    peak_rss(cmd)
    results = [peak_rss(cmd) for _ in range(runs)]
    return statistics.median(r[0] for r in results), max(r[1] for r in results)


def peak_rss(cmd: list[str]) -> tuple[float, float]:
    """Wall seconds and peak RSS (MiB) of one run, measured with a fresh wait4."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) not in (0, 1):
        raise SystemExit(f"{cmd} failed")
    return wall, usage.ru_maxrss / 1024


def with_big_member(src: Path, dst: Path, gib: float) -> None:
    """Copy a .pt2 and add one STORED weight member of `gib` GiB (zeros, written in chunks)."""
    shutil.copy(src, dst)
    root = zipfile.ZipFile(src).namelist()[0].split("/")[0]
    with zipfile.ZipFile(dst, "a", zipfile.ZIP_STORED) as zf:
        with zf.open(f"{root}/data/weights/big_weight", "w", force_zip64=True) as fh:
            chunk = bytes(1 << 24)
            for _ in range(int(gib * 64)):
                fh.write(chunk)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=7)
    cache = ROOT / ".fixture-cache"
    default_pkg = next(cache.glob("torch-*/both.pt2"), None)
    ap.add_argument("--package", type=Path, default=default_pkg)
    ap.add_argument("--inputs", type=Path, default=next(cache.glob("torch-*/aoti_inputs.pt"), None))
    ap.add_argument("--big-gb", type=float, default=1.0)
    args = ap.parse_args()
    if args.package is None:
        raise SystemExit("no package: run scripts/build_fixtures.py first or pass --package")
    compileall.compile_dir(ROOT / "aotipre", quiet=1)
    exe = [sys.executable, "-m", "aotipre"]
    via_typer = [
        sys.executable,
        "-c",
        "import sys; from aotipre.cli import main; sys.exit(main(sys.argv[1:], fast_lane=False))",
    ]
    print(
        f"machine: {platform.node()} {platform.machine()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}"
    )
    torch_s, torch_mb = timed([sys.executable, "-c", "import torch"], args.runs)
    rows = [("python -c 'import torch'", torch_s, torch_mb)]
    for label, cmd in (
        ("aotipre inspect", [*exe, "inspect", str(args.package)]),
        (
            "aotipre check --static-only",
            [*exe, "check", str(args.package), "--inputs", str(args.inputs), "--static-only"],
        ),
        (
            "aotipre check --static-only, through typer",
            [*via_typer, "check", str(args.package), "--inputs", str(args.inputs), "--static-only"],
        ),
    ):
        s, mb = timed(cmd, args.runs)
        rows.append((label, s, mb))
    print(
        f"\npackage: {args.package.name} ({args.package.stat().st_size / 1e6:.1f} MB), "
        f"median of {args.runs} runs"
    )
    print("| command | wall s | x import torch | peak RSS MiB |")
    print("| --- | --- | --- | --- |")
    for label, s, mb in rows:
        print(f"| {label} | {s:.3f} | {s / torch_s:.2f} | {mb:.0f} |")

    with tempfile.TemporaryDirectory() as tmp:
        big = Path(tmp) / "big.pt2"
        with_big_member(args.package, big, args.big_gb)
        size = big.stat().st_size
        small_wall, small_mb = peak_rss([*exe, "inspect", str(args.package)])
        big_wall, big_mb = peak_rss([*exe, "inspect", str(big)])
        check_wall, check_mb = peak_rss(
            [*exe, "check", str(big), "--inputs", str(args.inputs), "--static-only"]
        )
    print(
        f"\nmemory vs package size (one run each; the big package adds a {args.big_gb:g} GiB "
        "STORED weight member)"
    )
    print("| command | package MB | wall s | peak RSS MiB |")
    print("| --- | --- | --- | --- |")
    print(
        f"| inspect | {args.package.stat().st_size / 1e6:.1f} | {small_wall:.2f} | {small_mb:.0f} |"
    )
    print(f"| inspect | {size / 1e6:.1f} | {big_wall:.2f} | {big_mb:.0f} |")
    print(f"| check --static-only | {size / 1e6:.1f} | {check_wall:.2f} | {check_mb:.0f} |")


if __name__ == "__main__":
    main()
