"""The "real models" packages (fixtures/real_models.py), built once by
scripts/build_real_models.py with the public API, and plain torch's record of what a deployment
does with each inputs file (plain_torch.json)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
BUILDER = REPO / "scripts" / "build_real_models.py"
REAL_DIR_ENV = "AOTIPRE_REAL_DIR"
"""Set to build into (and read from) another directory than .fixture-cache/real-torch-<v>/."""


@pytest.fixture(scope="session")
def real_dir() -> Path:
    out = os.environ.get(REAL_DIR_ENV)
    proc = subprocess.run(
        [sys.executable, str(BUILDER), *(["--out", out] if out else [])],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )
    if proc.returncode != 0:
        pytest.fail(f"building the real-model packages failed:\n{proc.stderr[-6000:]}")
    return Path(proc.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="session")
def plain_torch(real_dir: Path) -> dict[str, Any]:
    """What plain torch did in a fresh process, per package and inputs file."""
    return json.loads((real_dir / "plain_torch.json").read_text())["packages"]
