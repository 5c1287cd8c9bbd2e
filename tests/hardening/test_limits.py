"""Unit tests of the limits added for hostile archives (none may refuse a well-formed zip) and of
the shutdown switch of the process layer."""

from __future__ import annotations

import io
import sys
import zipfile
from pathlib import Path

import pytest

from aotipre.pt2 import archive as archive_mod
from aotipre.pt2.archive import CodedPackageError, open_archive
from aotipre.runner.proc import allow_new_children, kill_all_children, run_process
from tests.hardening.craft import RawEntry, many_empty_members, raw_zip


def _open_code(path: Path) -> str | None:
    try:
        with open_archive(path):
            return None
    except CodedPackageError as exc:
        return exc.code


def test_a_zip64_directory_under_the_member_limit_is_accepted(tmp_path: Path) -> None:
    path = tmp_path / "zip64.pt2"
    with zipfile.ZipFile(path, "w") as zf:  # more than 65535 members: a zip64 end record
        for i in range(70_000):
            zf.writestr(f"pkg/m/{i}", b"")
    assert path.read_bytes().find(b"PK\x06\x06") > 0
    assert _open_code(path) is None


def test_one_member_over_the_limit_is_refused_before_zipfile_parses(tmp_path: Path) -> None:
    path = tmp_path / "many.pt2"
    path.write_bytes(many_empty_members(archive_mod.MAX_MEMBERS + 1))
    assert _open_code(path) == "AOT007"
    path.write_bytes(many_empty_members(1000))
    assert _open_code(path) is None


def test_data_descriptors_and_prepended_bytes_are_not_overlaps(tmp_path: Path) -> None:
    buf = io.BytesIO()

    class Unseekable(io.RawIOBase):
        def writable(self) -> bool:
            return True

        def write(self, b: bytes) -> int:  # type: ignore[override]
            return buf.write(b)

    with zipfile.ZipFile(Unseekable(), "w", zipfile.ZIP_DEFLATED) as zf:  # bit 3: descriptors
        for i in range(5):
            zf.writestr(f"pkg/m/{i}", b"abc" * 1000)
    data = buf.getvalue()
    (tmp_path / "dd.pt2").write_bytes(data)
    assert _open_code(tmp_path / "dd.pt2") is None
    # bytes in front are no overlap either, but torch's zip reader refuses such a file
    # (tests/pt2/test_archive.py shows it), so the guard does too
    (tmp_path / "sfx.pt2").write_bytes(b"#!/bin/sh\nexit 0\n" * 50 + data)
    assert _open_code(tmp_path / "sfx.pt2") == "AOT002"


def test_compressible_members_under_the_total_bound_are_accepted(tmp_path: Path) -> None:
    path = tmp_path / "ok.pt2"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:  # ratio ~1000, 48 MiB in all
        for i in range(3):
            zf.writestr(f"pkg/w{i}", bytes(16 << 20))
    assert _open_code(path) is None


def test_a_directory_entry_pointing_into_data_is_ignored(tmp_path: Path) -> None:
    entries = [RawEntry(b"pkg/w", b"x" * 100), RawEntry(b"pkg/d/", b"", offset=10)]
    (tmp_path / "dir.pt2").write_bytes(raw_zip(entries))
    assert _open_code(tmp_path / "dir.pt2") is None


def test_refuse_new_children_until_allowed() -> None:
    kill_all_children(refuse_new=True)
    try:
        outcome = run_process([sys.executable, "-c", "pass"], timeout_s=30)
        assert not outcome.started and outcome.interrupted and not outcome.ok
        assert "shutting down" in (outcome.start_error or "")
    finally:
        allow_new_children()
    assert run_process([sys.executable, "-c", "pass"], timeout_s=30).ok


@pytest.mark.parametrize("name", ["pkg/a\nb", "pkg/\x1b[2J", "pkg/\x7f", "pkg/\x9b31m"])
def test_control_characters_make_a_name_unsafe(name: str) -> None:
    assert archive_mod.unsafe_member_name(name) == "contains a control character"
