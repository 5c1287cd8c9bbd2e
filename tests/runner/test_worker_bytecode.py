"""The worker run by path (runner/worker/__main__.py) keeps the bytecode of its own modules, so
that each worker of a fresh install does not compile them again; it writes none where the user
turned bytecode off."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from aotipre.runner import launch


def _run_copy(tmp_path: Path, **env: str) -> Path:
    """A copy of the worker's folder, without bytecode, run once over a job that is not there."""
    copy = tmp_path / "worker"
    shutil.copytree(
        os.path.dirname(launch.WORKER_PATH), copy, ignore=shutil.ignore_patterns("__pycache__")
    )
    base = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    subprocess.run(
        [sys.executable, str(copy / "__main__.py"), str(tmp_path / "no-such-job.json")],
        env={**base, **env},
        cwd=tmp_path,
        capture_output=True,
        timeout=300,
        check=False,
    )
    return copy


def test_the_worker_writes_its_own_modules_bytecode_once(tmp_path: Path) -> None:
    copy = _run_copy(tmp_path)
    modules = {p.stem for p in copy.glob("*.py")}
    compiled = {p.name.split(".")[0] for p in (copy / "__pycache__").glob("*.pyc")}
    assert modules <= compiled, sorted(modules - compiled)


def test_the_worker_writes_no_bytecode_when_the_user_turned_it_off(tmp_path: Path) -> None:
    copy = _run_copy(tmp_path, PYTHONDONTWRITEBYTECODE="1")
    assert not (copy / "__pycache__").exists()
