"""The compile cache under concurrency and damage: aotipre processes checking one package at once
share it safely (one complete entry, nothing half-written used or left), and an entry damaged on
disk (bytes flipped, truncated, its record garbled) is detected and rebuilt."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from aotipre.findings import StageStatus
from aotipre.runner import cache as cache_mod
from aotipre.runner import loadcost
from aotipre.runner.stages import DynamicOptions, run_dynamic_stages
from tests.fakes.specs import token_model, write_package

FAKES = Path(__file__).resolve().parents[1] / "fakes"
FAKE = str(FAKES / "fake_torch_worker.py")
CLI = str(FAKES / "cli_with_fake_worker.py")


SIDE_FOLDERS = (loadcost.FOLDER, "canary")
"""What else aotipre keeps in the cache folder: the probe records and the doctor's canary."""


def entries(cache_dir: Path) -> list[Path]:
    return sorted(
        p
        for p in cache_dir.iterdir()
        if not p.name.startswith(".tmp-") and p.name not in SIDE_FOLDERS
    )


def assert_one_sound_entry(cache_dir: Path) -> Path:
    """Exactly one entry, nothing half-written left, and its package matches its record."""
    names = sorted(p.name for p in cache_dir.iterdir())
    assert not [n for n in names if n.startswith(".tmp-")], names
    (entry,) = entries(cache_dir)
    meta = json.loads((entry / cache_mod.ENTRY_FILE).read_text())
    assert meta["sha256"] == cache_mod.file_sha256(str(entry / cache_mod.PACKAGE_FILE))
    assert cache_mod.CompileCache(str(cache_dir)).lookup(entry.name) is not None
    return entry


def flip_bytes(path: Path) -> None:
    data = bytearray(path.read_bytes())
    mid = len(data) // 2
    data[mid : mid + 4] = bytes(b ^ 0xFF for b in data[mid : mid + 4])
    path.write_bytes(bytes(data))


def truncate(path: Path) -> None:
    with open(path, "r+b") as f:
        f.truncate(max(1, path.stat().st_size // 2))


def garble_record(path: Path) -> None:
    (path.parent / cache_mod.ENTRY_FILE).write_text('{"key": ')


DAMAGE: dict[str, Callable[[Path], None]] = {
    "bytes_flipped": flip_bytes,
    "truncated": truncate,
    "record_garbled": garble_record,
    "package_deleted": lambda p: p.unlink(),
}


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_a_damaged_entry_is_detected_and_rebuilt(tmp_path: Path, damage: str) -> None:
    model = token_model(aoti=False)  # an ExportedProgram only: the dynamic stages compile it
    package = write_package(tmp_path / "pkg.pt2", model)
    cache_dir = tmp_path / "cache"
    options = DynamicOptions(
        worker_command=(sys.executable, FAKE), cache_dir=str(cache_dir), probe=False
    )

    def compile_detail() -> str:
        results, findings = run_dynamic_stages(package, model, None, None, options)
        by_name = {r.name: r for r in results}
        assert findings == [] and by_name["run"].status is StageStatus.PASSED
        assert by_name["compile"].status is StageStatus.PASSED
        return by_name["compile"].detail

    assert "compiled into the cache" in compile_detail()
    entry = assert_one_sound_entry(cache_dir)
    good = (entry / cache_mod.PACKAGE_FILE).read_bytes()
    assert "cache hit" in compile_detail()
    DAMAGE[damage](entry / cache_mod.PACKAGE_FILE)
    assert "compiled into the cache" in compile_detail()  # not used: rebuilt
    entry = assert_one_sound_entry(cache_dir)
    assert (entry / cache_mod.PACKAGE_FILE).read_bytes() == good
    assert "cache hit" in compile_detail()


UNUSABLE = {
    "a_regular_file": lambda d: (d.write_text("x"), d)[1],
    "under_a_regular_file": lambda d: (d.write_text("x"), d / "sub")[1],
    "a_full_filesystem": lambda d: d,  # MIN_FREE_BYTES raised above any disk's free space
}


@pytest.mark.parametrize("how", list(UNUSABLE))
def test_an_unusable_cache_is_an_environment_warning_and_the_check_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    if how == "a_full_filesystem":
        monkeypatch.setattr(cache_mod, "MIN_FREE_BYTES", 1 << 62)
    model = token_model(aoti=False)
    package = write_package(tmp_path / "pkg.pt2", model)
    cache_dir = UNUSABLE[how](tmp_path / "cache")
    options = DynamicOptions(
        worker_command=(sys.executable, FAKE), cache_dir=str(cache_dir), probe=False
    )
    results, findings = run_dynamic_stages(package, model, None, None, options)
    by_name = {r.name: r for r in results}
    assert [f.code for f in findings] == ["AOT420"]
    assert findings[0].severity.value == "warning" and findings[0].category.value == "environment"
    assert by_name["compile"].status is StageStatus.PASSED, by_name["compile"].detail
    assert "compiled without the cache" in by_name["compile"].detail
    assert by_name["run"].status is StageStatus.PASSED
    assert not any(p.name.startswith(".tmp-") for p in tmp_path.rglob("*"))


def test_a_read_only_cache_directory_is_not_an_internal_error(
    tmp_path: Path, pkg: Callable[[str], Path]
) -> None:
    from tests.hardening.harness import setpriv_prefix

    prefix = setpriv_prefix()
    if prefix is None:
        pytest.skip("running as root and setpriv cannot drop CAP_DAC_OVERRIDE")
    cache_dir = tmp_path / "cache"
    cache_dir.mkdir()
    cache_dir.chmod(0o555)
    env = dict(os.environ, TMPDIR=str(tmp_path))
    cmd = [
        *prefix,
        *(sys.executable, CLI, FAKE, "check", "--no-config", "--no-probe", "--compile-at-deploy"),
        *(str(pkg("ep_only")), "--cache-dir", str(cache_dir), "--format", "json"),
    ]
    run = _check(cmd, env, tmp_path)
    assert run.returncode == 0, run.stderr  # was exit 3 (PermissionError)
    report = json.loads(run.stdout)
    assert [f["code"] for f in report["findings"]] == ["AOT420"]
    assert "compiled without the cache" in _compile_detail(run.stdout)


def _check(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, env=env, cwd=cwd, capture_output=True, text=True, timeout=600)


def _concurrent(commands: list[list[str]], env: dict[str, str], cwd: Path) -> list[Any]:
    with ThreadPoolExecutor(len(commands)) as pool:
        return list(pool.map(lambda c: _check(c, env, cwd), commands))


def _errors(stdout: str) -> object:
    """What made a run fail, for the assertion message: its error and error findings."""
    try:
        report = json.loads(stdout)
    except ValueError:
        return stdout[-3000:]
    found = [(f["code"], f["message"]) for f in report["findings"] if f["severity"] == "error"]
    return report["error"], found


def _compile_detail(stdout: str) -> str:
    report = json.loads(stdout)
    return next(s["detail"] for s in report["stages"] if s["name"] == "compile")


def test_processes_share_the_cache_with_fake_compiles(
    tmp_path: Path, pkg: Callable[[str], Path]
) -> None:
    cache_dir = tmp_path / "cache"
    env = dict(os.environ, TMPDIR=str(tmp_path))
    cmd = [
        *(sys.executable, CLI, FAKE, "check", "--no-config", "--no-probe", "--compile-at-deploy"),
        *(str(pkg("ep_only")), "--cache-dir", str(cache_dir), "--format", "json"),
        "--compile-at-deploy",  # an ExportedProgram-only archive, compiled by the check
    ]
    for round_ in range(3):
        runs = _concurrent([cmd] * 4, env, tmp_path)
        for r in runs:
            assert r.returncode == 0, r.stderr
            assert "compile" in _compile_detail(r.stdout)
        assert_one_sound_entry(cache_dir)
        if round_ == 1:
            flip_bytes(entries(cache_dir)[0] / cache_mod.PACKAGE_FILE)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache"]  # no temporary folder left


@pytest.mark.slow
def test_two_real_compiles_share_the_cache_and_a_damaged_entry_is_rebuilt(
    tmp_path: Path, pkg: Callable[[str], Path]
) -> None:
    cache_dir = tmp_path / "cache"
    env = dict(os.environ, TMPDIR=str(tmp_path))
    cmd = [
        *(sys.executable, "-m", "aotipre", "check", "--no-config", "--no-probe"),
        *(str(pkg("ep_only")), "--cache-dir", str(cache_dir), "--format", "json"),
        "--compile-at-deploy",  # an ExportedProgram-only archive, compiled by the check
    ]
    first = _concurrent([cmd, cmd], env, tmp_path)
    for r in first:
        assert r.returncode == 0, (_errors(r.stdout), r.stderr[-3000:])
    details = [_compile_detail(r.stdout) for r in first]
    assert all("compile" in d for d in details), details
    entry = assert_one_sound_entry(cache_dir)

    (hit,) = _concurrent([cmd], env, tmp_path)
    assert hit.returncode == 0 and "cache hit" in _compile_detail(hit.stdout)

    flip_bytes(entry / cache_mod.PACKAGE_FILE)
    (rebuilt,) = _concurrent([cmd], env, tmp_path)
    assert rebuilt.returncode == 0, (_errors(rebuilt.stdout), rebuilt.stderr[-3000:])
    assert "compiled into the cache" in _compile_detail(rebuilt.stdout)
    assert_one_sound_entry(cache_dir)
    # nothing of aotipre's left in TMPDIR (torchinductor_<user> is Inductor's own cache)
    left = [p.name for p in tmp_path.iterdir() if not p.name.startswith("torchinductor_")]
    assert left == ["cache"]
