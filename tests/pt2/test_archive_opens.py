"""One open of each package per command in aotipre's own process: `check` opens its package once
and hands the open archive down (static checks, binary facts, the dynamic stages' session),
`inspect` reads it through one open, `diff` and a batch open each package once. Counted with an
audit hook on every `open` of the file in a fresh `aotipre` process (the workers are other
processes and open what they load)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from aotipre.binaries.source import open_member
from aotipre.pt2.archive import open_archive

_COUNT_OPENS = """
import json, os, sys

counts = {}
pending = [None]  # the frame that called io.open, while its opener may still call os.open


def hook(event, args):
    if event != "open" or not isinstance(args[0], (str, bytes, os.PathLike)):
        return
    path = os.path.realpath(os.fsdecode(args[0]))
    caller = sys._getframe(1)
    if args[1] is not None:  # io.open / builtins.open: one open (any opener's os.open is it)
        pending[0] = caller
    elif pending[0] is not None and caller.f_back is pending[0]:
        pending[0] = None  # os.open called by the opener of the io.open just counted
        return
    counts[path] = counts.get(path, 0) + 1


sys.addaudithook(hook)
from aotipre.cli import main

try:
    code = main(sys.argv[2:])
except SystemExit as exc:
    code = exc.code
with open(sys.argv[1] + ".tmp", "w") as f:
    json.dump({"exit": code, "opens": counts}, f)
os.replace(sys.argv[1] + ".tmp", sys.argv[1])
"""
"""Runs `aotipre ARGS...` in this process (cli.main) and writes how often each file was opened:
an `open()` whose opener calls os.open is one open; every os.open on its own is one."""


def opens_in_cli(tmp_path: Path, *args: str) -> tuple[int, dict[str, int]]:
    """(exit code, {real path: opens}) of one `aotipre ARGS...` process."""
    out = tmp_path / "opens.json"
    proc = subprocess.run(
        [sys.executable, "-c", _COUNT_OPENS, str(out), *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert out.exists(), proc.stderr[-3000:]
    data = json.loads(out.read_text())
    return data["exit"], data["opens"]


def opened(counts: dict[str, int], *packages: Path) -> dict[str, int]:
    """How often each package was opened, by its file name."""
    return {p.name: counts.get(os.path.realpath(p), 0) for p in packages}


@pytest.fixture(scope="module")
def packages(pkg: Callable[[str], Path]) -> tuple[Path, Path, Path]:
    """A package holding both parts, its inputs, and an AOTI-only package (the fixtures)."""
    return pkg("both"), pkg("aoti_inputs"), pkg("aoti")


def test_inspect_opens_the_package_once(tmp_path: Path, packages: tuple[Path, Path, Path]) -> None:
    both, _, _ = packages
    code, counts = opens_in_cli(tmp_path, "inspect", str(both), "-f", "json")
    assert code == 0
    assert opened(counts, both) == {both.name: 1}


def test_a_static_check_opens_the_package_once(
    tmp_path: Path, packages: tuple[Path, Path, Path]
) -> None:
    both, inputs, _ = packages
    args = ("check", str(both), "--inputs", str(inputs), "--static-only", "-f", "json")
    code, counts = opens_in_cli(tmp_path, *args)
    assert code in (0, 1)
    assert opened(counts, both) == {both.name: 1}


def test_a_batch_and_a_diff_open_each_package_once(
    tmp_path: Path, packages: tuple[Path, Path, Path]
) -> None:
    both, _, aoti = packages
    args = ("check", str(both), str(aoti), "--static-only", "-f", "json", "--no-progress")
    code, counts = opens_in_cli(tmp_path, *args)
    assert code in (0, 1)
    assert opened(counts, both, aoti) == {both.name: 1, aoti.name: 1}
    code, counts = opens_in_cli(tmp_path, "diff", str(aoti), str(both), "-f", "json")
    assert code in (0, 1)
    assert opened(counts, both, aoti) == {both.name: 1, aoti.name: 1}


def test_a_static_check_against_a_release_opens_each_package_once(
    tmp_path: Path, packages: tuple[Path, Path, Path]
) -> None:
    both, inputs, aoti = packages
    args = ("check", str(both), "-i", str(inputs), "--against", str(aoti), "--static-only")
    code, counts = opens_in_cli(tmp_path, *args, "-f", "json")
    assert code in (0, 1)
    assert opened(counts, both, aoti) == {both.name: 1, aoti.name: 1}


@pytest.mark.slow
def test_a_full_check_against_a_release_opens_each_package_once(
    tmp_path: Path, packages: tuple[Path, Path, Path]
) -> None:
    """Every stage runs (load, run, perf, compare, probe) and the perf stage measures the
    --against package in its own workers: the diff stage and the perf stage read the one open
    of each package. (A tolerance no timing exceeds: one round of the comparison, whatever
    the host's noise.)"""
    both, inputs, aoti = packages
    args = ("check", str(both), "-i", str(inputs), "--against", str(aoti), "--no-progress")
    code, counts = opens_in_cli(tmp_path, *args, "--perf-tolerance", "1000", "-f", "json")
    assert code == 0
    assert opened(counts, both, aoti) == {both.name: 1, aoti.name: 1}


def test_a_stored_member_is_read_through_the_archives_own_file(tmp_path: Path) -> None:
    """The bytes come from the file the archive opened, even once another file took its name."""
    path = tmp_path / "p.pt2"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("p/data/aotinductor/model/a.so", b"\x7fELF original bytes")
    with open_archive(path) as archive:
        with zipfile.ZipFile(tmp_path / "other.pt2", "w") as zf:
            zf.writestr("p/data/aotinductor/model/a.so", b"\x7fELF another file!!")
        os.replace(tmp_path / "other.pt2", path)
        with open_member(archive, "p/data/aotinductor/model/a.so") as source:
            assert source.read(0, source.size) == b"\x7fELF original bytes"


def test_closing_the_archive_closes_the_package_file(tmp_path: Path) -> None:
    path = tmp_path / "p.pt2"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("p/archive_format", "pt2")
    archive = open_archive(path)
    file = archive.zipfile.fp
    assert file is not None and not file.closed
    archive.close()
    assert file.closed
