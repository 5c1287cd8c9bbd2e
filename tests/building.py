"""Package builders run the way the real tests build their packages: in a fresh interpreter
(torch's state stays out of pytest's process), through the public API."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path


def build(
    builder: str | Path,
    out: Path,
    *args: str,
    timeout: float = 900,
    python: str | Path = sys.executable,
) -> Path:
    """Run `builder` (a script path, or Python code for `-c`) with `out` and `args` in `python`
    (this torch by default; another venv's for its torch); a failed build fails the test with
    the builder's stderr. Returns `out`."""
    code = ["-c", builder] if isinstance(builder, str) else [str(builder)]
    proc = subprocess.run(
        [str(python), *code, str(out), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    return out


def check_json(tmp: Path, *args: str) -> tuple[int, dict]:
    """`aotipre check ARGS --no-config` in a fresh process, its JSON report written under `tmp`
    (a cache there too): (exit code, report)."""
    out = tmp / f"report-{len(list(tmp.glob('report-*')))}.json"
    proc = subprocess.run(
        [
            sys.executable, "-m", "aotipre", "check", *args, "--no-config",
            "--format", "json", "--output", str(out), "--cache-dir", str(tmp / "cache"),
        ],
        capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip
    assert out.is_file(), proc.stderr[-3000:]
    return proc.returncode, json.loads(out.read_text())
