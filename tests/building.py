"""Package builders run the way the real tests build their packages: in a fresh interpreter
(torch's state stays out of pytest's process), through the public API."""

from __future__ import annotations

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
