"""Benchmark `aotipre diff OLD NEW` on two ~100 MB packages against `python -c "import torch"`
(the static lane's budget: at most 0.1x of it). Results go to BENCHMARKS.md by hand.

    python scripts/bench_diff.py [--runs 7] [--mb 100]

The two packages are built once, in a fresh interpreter, through the public API: the same
model (one Linear layer of about `--mb` MB of float32 weights) exported twice with other
weight values, saved with torch.export.save. aotipre's modules are compiled to bytecode first
(`compileall`), as `pip install` compiles them: in a working tree whose modules were just edited,
under PYTHONDONTWRITEBYTECODE, every run would compile them from source again (0.15 s for ten
modules on the shared VM), which no installed aotipre pays.
"""

from __future__ import annotations

import argparse
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_static import timed  # noqa: E402

BUILD = """
import sys, torch
out, mb = sys.argv[1], float(sys.argv[2])
n = int((mb * 2**20 / 4) ** 0.5)
for name, seed in (("old", 0), ("new", 1)):
    torch.manual_seed(seed)
    model = torch.nn.Linear(n, n, bias=False)
    ep = torch.export.export(model, (torch.randn(2, n),))
    torch.export.save(ep, f"{out}/{name}.pt2")
"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--mb", type=float, default=100.0)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, "-c", BUILD, tmp, str(args.mb)], check=True)
        old, new = Path(tmp) / "old.pt2", Path(tmp) / "new.pt2"
        sizes = f"{old.stat().st_size / 2**20:.0f} MB + {new.stat().st_size / 2**20:.0f} MB"
        package = Path(__file__).resolve().parents[1] / "aotipre"
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(package)], check=True)
        diff_s, diff_mb = timed(
            [sys.executable, "-m", "aotipre", "diff", str(old), str(new), "-f", "json"], args.runs
        )
        torch_s, torch_mb = timed([sys.executable, "-c", "import torch"], args.runs)
    print(f"machine: {platform.machine()}, {platform.python_version()}; packages: {sizes}")
    print(f"aotipre diff     {diff_s:6.3f} s  peak RSS {diff_mb:6.1f} MiB")
    print(f"import torch     {torch_s:6.3f} s  peak RSS {torch_mb:6.1f} MiB")
    print(f"ratio            {diff_s / torch_s:6.3f}x")


if __name__ == "__main__":
    main()
