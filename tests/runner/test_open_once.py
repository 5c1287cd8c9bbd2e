"""One `check` opens the package's archive once in the parent process: the reader, the sample
inputs, the stages (stored inputs, synthesized-input hints, the compile-cache key) and crash
triage all read that one open archive. The worker is the fake torch worker (no torch); what it
opens in its own process does not count."""

from __future__ import annotations

import json
import os
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from aotipre.api import CheckOptions, check
from aotipre.findings import Report, StageStatus
from aotipre.runner.stages import DynamicOptions

FAKE = str(Path(__file__).resolve().parents[1] / "fakes" / "fake_torch_worker.py")


@pytest.fixture
def opened(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The files opened in this process, in order, one entry per open: each os.open (the
    archive's own open, and any reader that opens the file again by its path, e.g. to read a
    member's bytes in place) and each zipfile.ZipFile made over a path (it opens the file
    without os.open). importlib.metadata's look at python3X.zip shows up too."""
    seen: list[str] = []
    real_init = zipfile.ZipFile.__init__
    real_open = os.open

    def counting(self: zipfile.ZipFile, file: Any, *args: Any, **kwargs: Any) -> None:
        if isinstance(file, (str, os.PathLike)):
            seen.append(os.fspath(file))
        real_init(self, file, *args, **kwargs)

    def counting_open(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        seen.append(os.fsdecode(path))
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(zipfile.ZipFile, "__init__", counting)
    monkeypatch.setattr(os, "open", counting_open)
    return seen


def run_check(path: Path, tmp_path: Path, script: dict[str, Any] | None = None) -> Report:
    dynamic = DynamicOptions(
        worker_command=(sys.executable, FAKE),
        extra_env={"AOTIPRE_FAKE_SCRIPT": json.dumps(script or {})},
        cache_dir=str(tmp_path / "cache"),
        timeout_s=30.0,
    )
    return check(str(path), CheckOptions(dynamic=dynamic, canary=False))


def stage(report: Report, name: str) -> StageStatus:
    return next(s.status for s in report.stages if s.name == name)


def test_synthesized_inputs_read_the_one_archive(
    pkg: Callable[[str], Path], tmp_path: Path, opened: list[str]
) -> None:
    path = pkg("aoti")  # no stored sample inputs: synthesized, with index hints from the archive
    report = run_check(path, tmp_path)
    assert stage(report, "run") is StageStatus.PASSED
    assert "synthesized inputs" in next(s.detail for s in report.stages if s.name == "run")
    assert opened.count(str(path)) == 1


def test_stored_inputs_and_the_compile_key_read_the_one_archive(
    pkg: Callable[[str], Path], tmp_path: Path, opened: list[str]
) -> None:
    path = pkg("ep_only")  # stored sample inputs; compiled through the cache (content hash)
    report = run_check(path, tmp_path)
    assert stage(report, "compile") is StageStatus.PASSED
    assert stage(report, "run") is StageStatus.PASSED
    assert opened.count(str(path)) == 1


def test_crash_triage_reads_the_one_archive(
    pkg: Callable[[str], Path], tmp_path: Path, opened: list[str]
) -> None:
    path = pkg("both")  # stored inputs: triage copies them out of the archive
    script = {"run": {"error": {"type": "RuntimeError", "message": "boom in cpp_fused_add_0"}}}
    report = run_check(path, tmp_path, script)
    assert stage(report, "run") is StageStatus.FAILED
    assert any(s.name.startswith("triage:") for s in report.stages)
    assert opened.count(str(path)) == 1
