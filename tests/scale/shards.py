"""Helpers of the shard and merge tests: a zoo of real fixture packages in a project folder, and
the CLI run in-process on it (fixtures are defined in the test modules)."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from aotipre.cli import main

Pkg = Callable[[str], Path]
ZOO = ("aoti", "both", "multi", "broken_crc", "dtypes", "strides", "kwargs")
"""Seven packages (one fails the gate: broken_crc); the manifest lists aoti.pt2 twice."""


def enter_project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Make `tmp_path` the working directory: a fresh project (its `.git` stops the
    configuration search), with no CI shard variable and no GitHub step summary set."""
    (tmp_path / ".git").mkdir()
    monkeypatch.chdir(tmp_path)
    for name in ("GITHUB_STEP_SUMMARY", "COLUMNS", *SHARD_VARIABLES):
        monkeypatch.delenv(name, raising=False)
    return tmp_path


SHARD_VARIABLES = (
    "AOTIPRE_SHARD",
    "AOTIPRE_SHARD_COUNT",
    "BUILDKITE_PARALLEL_JOB",
    "BUILDKITE_PARALLEL_JOB_COUNT",
    "JOB_COMPLETION_INDEX",
    "SLURM_ARRAY_TASK_ID",
    "SLURM_ARRAY_TASK_MIN",
    "SLURM_ARRAY_TASK_STEP",
    "SLURM_ARRAY_TASK_COUNT",
)


def write_zoo(folder: Path, pkg: Pkg, names: tuple[str, ...] = ZOO) -> Path:
    """`folder/zoo.toml` listing copies of the fixture packages `names` (in that order), plus
    aoti.pt2 a second time with fail-on warning; static checks only."""
    folder.mkdir(parents=True, exist_ok=True)
    lines = ["[defaults]", "static-only = true", ""]
    for name in names:
        shutil.copy(pkg(name), folder / f"{name}.pt2")
        lines += ["[[package]]", f'path = "{name}.pt2"', ""]
    if "aoti" in names:
        lines += ["[[package]]", 'path = "aoti.pt2"', 'fail-on = "warning"', ""]
    manifest = folder / "zoo.toml"
    manifest.write_text("\n".join(lines))
    return manifest


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """`aotipre ARGS` in this process: (exit code, stdout, stderr)."""
    rc = main(list(args))
    out, err = capsys.readouterr()
    return rc, out, err


def one_error_line(err: str) -> str:
    """stderr that is exactly one `aotipre: error:` line, no traceback."""
    assert "Traceback" not in err, err
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("aotipre: error: "), err
    return lines[0]
