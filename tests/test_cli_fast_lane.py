"""The static fast lane of aotipre/cli/__init__.py: it answers exactly as the typer app does (exit code,
stdout, stderr, written files), takes only the argv it fully knows, and imports neither typer nor
pydantic nor torch."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from aotipre import cli

Pkg = Callable[[str], Path]

_TIMES = re.compile(r'\d+\.\d+ ?s\b|"duration_s": [0-9.e-]+|time="[0-9.]+"')


def _answer(
    argv: list[str], fast: bool, capsys: pytest.CaptureFixture[str], out: Path
) -> tuple[int, str, str, dict[str, str]]:
    """Exit code, stdout, stderr and the files written under `out`, with durations masked."""
    for f in out.iterdir():
        f.unlink()
    rc = cli.main(argv, fast_lane=fast)
    captured = capsys.readouterr()
    files = {f.name: _TIMES.sub("T", f.read_text()) for f in sorted(out.iterdir())}
    return rc, _TIMES.sub("T", captured.out), _TIMES.sub("T", captured.err), files


CASES: list[tuple[str, ...]] = [
    ("inspect", "{both}"),
    ("inspect", "{kwargs}", "--format", "json"),
    ("inspect", "-f", "json", "{aoti}"),
    ("inspect", "{broken_truncated}"),
    ("inspect", "{missing}"),
    ("check", "{both}", "--inputs", "{aoti_inputs}", "--static-only"),
    ("check", "--static-only", "{aoti}", "-i", "{aoti_inputs_bad_dtype}", "-f", "json"),
    ("check", "{both}", "-i", "{aoti_inputs}", "--static-only", "--fail-on", "warning"),
    ("check", "{both}", "--inputs={aoti_inputs_out_of_range}", "--static-only", "--no-config"),
    ("check", "{kwargs}", "--static-only", "--format=junit", "--output", "{out}/r.xml"),
    ("check", "{multi}", "--static-only", "--model", "nope"),
    ("check", "{aoti}", "--static-only", "--target", "cuda,cc=9.0", "--format", "markdown"),
    ("check", "{aoti}", "--static-only", "--target", "tpu"),
    ("check", "{both}", "{aoti}", "--static-only", "-i", "{aoti_inputs}", "--format", "json"),
    ("check", "{both}", "-i", "{aoti_inputs_bad_dtype}", "--static-only", "--select", "AOT2"),
    ("check", "{both}", "-i", "{aoti_inputs_bad_dtype}", "--static-only", "--ignore", "AOT2"),
    ("check", "{broken_not_zip}", "--static-only", "--format", "json"),
    ("check", "{both}", "-i", "{inputs_garbage}", "--static-only"),
    ("check", "{strides}", "-i", "{strides_inputs_transposed}", "--static-only", "-f", "sarif"),
    (
        "check",
        "{both}",
        "--static-only",
        "--report",
        "json:{out}/a.json",
        "--report",
        "table:{out}/b",
    ),
    ("check", "{both}", "--static-only", "--report", "yaml:{out}/x"),
    ("check", "{both}", "--static-only", "--write-baseline", "{out}/base.toml"),
    ("check", "{both}", "--static-only", "--config", "{missing}"),
    ("check", "{both}", "-i", "{aoti_inputs}", "--static-only", "--progress", "-f", "json"),
    ("check", "{both}", "{aoti}", "--static-only", "--progress"),
    ("check", "{broken_not_zip}", "--static-only", "--progress"),
    ("check", "{both}", "--static-only", "--no-progress"),
    ("diff", "{both}", "{kwargs}"),
    ("diff", "{kwargs}", "{both}", "-f", "json", "--fail-on", "any"),
    ("diff", "{both}", "{kwargs}", "--format=markdown", "--report", "sarif:{out}/d.sarif"),
    ("diff", "{both}", "{missing}", "-o", "{out}/d.json"),
    ("diff", "{both}", "{both}"),
    ("explain", "AOT613"),
    ("explain", "aot6", "--format", "json"),
    ("explain", "-f", "table", "AOT020"),
    ("explain", "AOT999"),
    ("version",),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: " ".join(c).replace("/", "|"))
def test_fast_lane_answers_as_the_typer_app_does(
    case: tuple[str, ...], pkg: Pkg, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    names = {
        "out": str(out),
        "missing": str(tmp_path / "missing.pt2"),
        **{
            n: str(pkg(n))
            for n in re.findall(r"\{(\w+)\}", " ".join(case))
            if n not in ("out", "missing")
        },
    }
    argv = [word.format(**names) for word in case]
    assert cli._fast_lane(argv) is not None, "this case should take the fast lane"
    fast = _answer(argv, True, capsys, out)
    typer_answer = _answer(argv, False, capsys, out)
    assert fast == typer_answer
    assert fast[1] or fast[2] or fast[3], "the command said nothing"


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["check", "a.pt2"],  # not --static-only: the runs need the typer app's options
        ["check", "a.pt2", "--static-only", "--no-static-only"],
        ["check", "a.pt2", "--static-only", "--static-only"],
        ["check", "a.pt2", "--static-only", "--progress", "--no-progress"],
        ["check", "a.pt2", "--static-only", "--progress", "--progress"],
        ["check", "--static-only"],  # no package (a manifest may come from the config)
        ["check", "a.pt2", "--static-only", "--help"],
        ["check", "a.pt2", "--static-only", "--jobs", "2"],
        ["check", "a.pt2", "--static-only", "--model", "x", "--model", "y"],
        ["check", "a.pt2", "--static-only", "--inputs"],
        ["check", "a.pt2", "--static-only", "--inputs", "--fail-on"],
        ["check", "a.pt2", "--static-only", "--inputs="],
        ["check", "a.pt2", "--static-only", "-ifoo.pt"],
        ["check", "a.pt2", "--static-only", "-i=foo.pt"],
        ["check", "a.pt2", "--static-only", "--format", "yaml"],
        ["check", "a.pt2", "--static-only", "--fail-on", "info"],
        ["check", "a.pt2", "--static-only=yes"],
        ["check", "a.pt2", "--static-only", "--", "-b.pt2"],
        ["check", "", "--static-only"],
        ["diff", "a.pt2"],
        ["diff", "a.pt2", "b.pt2", "--fail-on", "error"],
        ["diff", "a.pt2", "b.pt2", "--format", "yaml"],
        ["inspect"],
        ["inspect", "a.pt2", "b.pt2"],
        ["inspect", "a.pt2", "--format", "junit"],
        ["inspect", "a.pt2", "--static-only"],
        ["doctor"],
        ["codes"],
        ["explain"],
        ["explain", "AOT613", "AOT614"],
        ["explain", "AOT613", "--help"],
        ["explain", "AOT613", "--format", "yaml"],
        ["version", "--help"],
        ["--help"],
    ],
)
def test_anything_else_goes_to_the_typer_app(argv: list[str]) -> None:
    assert cli._fast_lane(argv) is None


def test_fast_lane_imports_neither_typer_nor_torch(pkg: Pkg) -> None:
    code = (
        "import sys\n"
        "from aotipre.cli import main\n"
        f"rc = main(['check', {str(pkg('both'))!r}, '-i', {str(pkg('aoti_inputs'))!r}, "
        "'--static-only'])\n"
        f"main(['inspect', {str(pkg('kwargs'))!r}, '--format', 'json'])\n"
        f"main(['diff', {str(pkg('both'))!r}, {str(pkg('kwargs'))!r}])\n"
        "heavy = sorted({'typer', 'pydantic', 'torch'} & set(sys.modules))\n"
        "assert not heavy, heavy\n"
        "sys.exit(rc)\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "verdict: PASS" in r.stdout
