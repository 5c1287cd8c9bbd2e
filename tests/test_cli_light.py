"""The light install (no torch at all) and the CLI polish of issue 14: --version, help readable
at 80 columns without `<bool>`, tables that fit the terminal."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from aotipre import __version__
from aotipre.findings import Category, Finding, Report, Severity
from aotipre.report.table import findings_table, render_report
from tests.progress_lines import without_progress

REPO = Path(__file__).resolve().parents[1]
Pkg = Callable[[str], Path]
TORCH_PARTS = ("torch", "functorch", "torchgen")


@pytest.fixture(scope="module")
def no_torch_python(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A venv where torch is not installed: this venv's other packages (linked, not copied)
    and the checkout, through a .pth file. Its workers would start in it too."""
    base = tmp_path_factory.mktemp("no-torch")
    linked = base / "site"
    linked.mkdir()
    # every site-packages this venv sees (one made with --system-site-packages sees two; the
    # first holds the venv's own copy of a package)
    for packages in site_dirs(sys.executable):
        for entry in Path(packages).iterdir():
            name = entry.name.lower()
            if name.startswith(TORCH_PARTS) or name.endswith(".pth") or name.startswith("__"):
                continue
            if not (linked / entry.name).is_symlink():
                (linked / entry.name).symlink_to(entry)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(base / "venv")], check=True)
    python = base / "venv" / "bin" / "python"
    Path(site_dirs(str(python))[0], "aotipre-test.pth").write_text(f"{REPO}\n{linked}\n")
    return str(python)


SITE_DIRS = """
import os, site, sys, sysconfig
seen = {os.path.realpath(p) for p in sys.path}
named = [*site.getsitepackages(), *(sysconfig.get_paths()[k] for k in ("purelib", "platlib"))]
print("\\n".join(p for p in dict.fromkeys(named) if os.path.realpath(p) in seen))
"""


def site_dirs(python: str) -> list[str]:
    """The site-packages folders `python` really reads, in its order: those of the folders
    site and sysconfig name that are on its sys.path. Debian's Python names folders a venv does
    not have (`local/lib/python3.12/dist-packages`, ...); site adds only those that exist."""
    out = subprocess.run(
        [python, "-c", SITE_DIRS], capture_output=True, text=True, check=True, timeout=60
    ).stdout.splitlines()
    assert out, f"{python}: no site-packages folder on its sys.path"
    return out


def run_without_torch(python: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [python, "-m", "aotipre", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "100"},
    )


def test_without_torch_installed_the_static_commands_work(no_torch_python: str, pkg: Pkg) -> None:
    probe = subprocess.run(
        [no_torch_python, "-c", "import torch"], capture_output=True, check=False
    )
    assert probe.returncode != 0, "torch must not be importable in this environment"
    inspect = run_without_torch(no_torch_python, "inspect", str(pkg("both")))
    assert inspect.returncode == 0, inspect.stderr
    fast = run_without_torch(
        no_torch_python, "check", str(pkg("both")), "-i", str(pkg("aoti_inputs")), "--static-only"
    )
    assert fast.returncode == 0 and "verdict: PASS" in fast.stdout, fast.stderr
    # a spelling the fast lane leaves to typer, and the pre-commit hook's entry
    typer_lane = run_without_torch(
        no_torch_python, "check", "--static-only", "--no-config", f"--inputs={pkg('aoti_inputs')}",
        str(pkg("aoti")), "--format", "junit",
    )  # fmt: skip
    assert typer_lane.returncode == 0, typer_lane.stderr
    assert "<testsuite" in typer_lane.stdout


def test_without_torch_a_dynamic_stage_says_how_to_get_one(no_torch_python: str, pkg: Pkg) -> None:
    r = run_without_torch(no_torch_python, "check", str(pkg("aoti")), "--no-config")
    assert r.returncode == 2 and r.stdout == ""
    (line,) = without_progress(r.stderr).splitlines()  # progress lines (default on) aside
    assert line.startswith("aotipre: error: the dynamic stages need torch")
    assert "aotipre[torch]" in line and "--python PATH" in line


def test_version_flag_and_command() -> None:
    for args in (["--version"], ["version"]):
        r = subprocess.run(
            [sys.executable, "-m", "aotipre", *args], capture_output=True, text=True, timeout=60
        )
        assert r.returncode == 0 and r.stdout == f"aotipre {__version__}\n"


@pytest.mark.parametrize(
    "command", [[], ["check"], ["doctor"], ["inspect"], ["codes"], ["explain"]]
)
def test_help_fits_80_columns_and_shows_no_bool(command: list[str]) -> None:
    r = subprocess.run(
        [sys.executable, "-m", "aotipre", *command, "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "COLUMNS": "80", "NO_COLOR": "1", "TERM": "dumb"},
    )
    assert r.returncode == 0, r.stderr
    plain = re.sub(r"\x1b\[[0-9;]*m", "", r.stdout)
    assert max(len(line) for line in plain.splitlines()) <= 80
    assert "<bool>" not in plain and "list[" not in plain


def test_check_help_groups_its_options() -> None:
    r = subprocess.run(
        [sys.executable, "-m", "aotipre", "check", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "COLUMNS": "80", "NO_COLOR": "1", "TERM": "dumb"},
    )
    for panel in ("Package and inputs", "Gate", "Report", "Dynamic stages", "Crash triage"):
        assert f"─ {panel} ─" in r.stdout
    assert "--python" in r.stdout


def _long_report() -> Report:
    finding = Finding(
        code="AOT201",
        severity=Severity.ERROR,
        category=Category.DTYPE,
        message="input 'input_ids' has dtype float32, the package expects int64 " * 3,
        hint="cast it with .to(torch.int64) before calling the model",
        model="model",
        input="input_ids",
        position=0,
    )
    return Report(package_path="classifier.pt2", findings=[finding])


@pytest.mark.parametrize("width", [60, 80, 100])
def test_tables_fit_the_terminal(width: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", str(width))
    text = render_report(_long_report())
    assert max(len(line) for line in text.splitlines() if not line.startswith("verdict")) <= width


def test_without_a_terminal_tables_keep_their_widths(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)
    report = _long_report()
    assert findings_table(report.findings, width=None) == findings_table(report.findings)
    widest = max(len(line) for line in findings_table(report.findings).splitlines())
    assert widest > 100, "natural width: the message column wraps at 70"
