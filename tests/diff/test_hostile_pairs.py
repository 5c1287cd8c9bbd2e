"""`aotipre diff` on hostile pairs: one side not a package, a FIFO, a zip bomb, a folder that is
not a package, the same file twice, two links to one file. Each gets one clear line on stderr and
exit 2 (a side that cannot be read is never a clean diff); no traceback, nothing blocks."""

from __future__ import annotations

import json
import os
import shutil
import zipfile
from pathlib import Path

import pytest

from aotipre.cli import main

GOOD = Path(__file__).resolve().parents[1] / "data" / "torch211" / "ep_only.pt2"


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["diff", *args], fast_lane=False)
    out, err = capsys.readouterr()
    return code, out, err


def _one_line_error(err: str) -> str:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith("aotipre: error: ") and "Traceback" not in err
    return lines[0]


def _bomb(path: Path) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("pkg/archive_format", b"pt2")
        zf.writestr("pkg/archive_version", b"0")
        with zf.open("pkg/models/model.json", "w", force_zip64=True) as fh:
            chunk = b" " * (1 << 20)
            for _ in range(300):  # 300 MiB of spaces, well under 2 MiB on disk
                fh.write(chunk)
    return path


@pytest.mark.parametrize("side", ["old", "new"])
@pytest.mark.parametrize(
    ("kind", "said"),
    [
        ("text", "not a zip archive"),
        ("fifo", "not a regular file"),
        ("bomb", "zip bomb"),
        ("missing", "no such file"),
        ("folder", "not an extracted .pt2 package"),
    ],
)
def test_a_side_that_cannot_be_read_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], side: str, kind: str, said: str
) -> None:
    bad = tmp_path / f"bad-{kind}.pt2"
    if kind == "text":
        bad.write_text("hello")
    elif kind == "fifo":
        os.mkfifo(bad)
    elif kind == "bomb":
        _bomb(bad)
    elif kind == "folder":
        bad.mkdir()
        (bad / "x.txt").write_text("x")
    good = tmp_path / "good.pt2"
    shutil.copy(GOOD, good)
    pair = (str(bad), str(good)) if side == "old" else (str(good), str(bad))
    report = tmp_path / "r.json"
    code, _, err = _run(capsys, *pair, "--report", f"json:{report}")
    assert code == 2
    line = _one_line_error(err)
    label = "OLD" if side == "old" else "NEW"
    assert line.startswith(f"aotipre: error: {label} {bad}")
    assert said in line
    data = json.loads(report.read_text())  # the JSON report is complete: error, no findings
    assert data["exit_code"] == 2 and data["verdict"] == "error" and data["findings"] == []


def test_the_same_file_twice_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = tmp_path / "good.pt2"
    shutil.copy(GOOD, good)
    code, out, err = _run(capsys, str(good), str(good))
    assert code == 2 and out == ""
    assert "OLD and NEW are one file (the same path twice)" in _one_line_error(err)


@pytest.mark.parametrize("link", ["symlink", "hardlink"])
def test_two_links_to_one_file_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], link: str
) -> None:
    good = tmp_path / "good.pt2"
    shutil.copy(GOOD, good)
    other = tmp_path / "other.pt2"
    (os.symlink if link == "symlink" else os.link)(good, other)
    code, _, err = _run(capsys, str(good), str(other))
    assert code == 2
    assert "are links to one file" in _one_line_error(err)


def test_a_copy_is_compared_and_has_no_changes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two files with the same bytes are two packages: compared, nothing changed, exit 0."""
    a, b = tmp_path / "a.pt2", tmp_path / "b.pt2"
    shutil.copy(GOOD, a)
    shutil.copy(GOOD, b)
    code, out, err = _run(capsys, str(a), str(b), "-f", "json")
    assert code == 0, err
    data = json.loads(out)
    assert data["findings"] == [] and data["verdict"] == "pass"


def test_an_output_onto_an_input_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a, b = tmp_path / "a.pt2", tmp_path / "b.pt2"
    shutil.copy(GOOD, a)
    shutil.copy(GOOD, b)
    code, _, err = _run(capsys, str(a), str(b), "-o", str(b))
    assert code == 2 and "refusing to overwrite it" in _one_line_error(err)
    assert b.read_bytes() == GOOD.read_bytes()


def test_a_bad_fail_on_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = tmp_path / "a.pt2", tmp_path / "b.pt2"
    shutil.copy(GOOD, a)
    shutil.copy(GOOD, b)
    code, _, err = _run(capsys, str(a), str(b), "--fail-on", "warning")
    assert code == 2 and "--fail-on" in _one_line_error(err)
