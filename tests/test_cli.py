"""The command line end to end: exit codes, one-line errors, JSON always complete, no torch import."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

Pkg = Callable[[str], Path]


def run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "aotipre", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
    )


def test_pass_exit_0(pkg: Pkg) -> None:
    r = run("check", str(pkg("aoti")), "--inputs", str(pkg("aoti_inputs")), "--static-only")
    assert r.returncode == 0, r.stderr
    assert "verdict: PASS" in r.stdout


def test_gate_failure_exit_1(pkg: Pkg) -> None:
    r = run("check", str(pkg("aoti")), "-i", str(pkg("aoti_inputs_bad_dtype")), "--static-only")
    assert r.returncode == 1
    assert "AOT201" in r.stdout and "int64" in r.stdout


def test_fail_on_warning(pkg: Pkg) -> None:
    args = ["check", str(pkg("both")), "-i", str(pkg("aoti_inputs")), "--static-only"]
    assert run(*args).returncode == 0
    assert run(*args, "--fail-on", "warning").returncode == 1


@pytest.mark.parametrize(
    "name", ["broken_empty", "broken_not_zip", "broken_truncated", "broken_escape", "broken_bomb"]
)
def test_bad_package_one_line_exit_2(pkg: Pkg, name: str) -> None:
    r = run("check", str(pkg(name)), "--static-only")
    assert r.returncode == 2
    assert r.stdout == ""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("aotipre: error: "), r.stderr
    assert "Traceback" not in r.stderr


def test_missing_and_directory(tmp_path: Path) -> None:
    for target in (tmp_path / "missing.pt2", tmp_path):
        r = run("check", str(target), "--static-only")
        assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1
        r = run("inspect", str(target))
        assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1


def test_bad_reference_files_one_line_exit_2(pkg: Pkg, tmp_path: Path) -> None:
    """--exported-program and --expected are checked before any worker starts."""
    garbage = tmp_path / "garbage.pt"
    garbage.write_bytes(b"not a zip")
    fifo = tmp_path / "fifo.pt"
    os.mkfifo(fifo)
    cases = [
        (["--expected", str(tmp_path / "missing.pt")], "--expected", "does not exist"),
        (["--expected", str(fifo)], "--expected", "is not a regular file"),
        (["--exported-program", str(tmp_path)], "--exported-program", "is a directory"),
        (["--expected", str(garbage)], "--expected", "not outputs saved with torch.save"),
        (["--exported-program", str(garbage)], "--exported-program", "not a zip archive"),
        (["--exported-program", str(pkg("aoti"))], "--exported-program", "no ExportedProgram"),
    ]
    for flags, flag, why in cases:
        r = run("check", str(pkg("aoti")), "-i", str(pkg("aoti_inputs")), *flags)
        lines = r.stderr.strip().splitlines()
        assert r.returncode == 2 and r.stdout == "", (flags, r.stderr)
        assert len(lines) == 1 and lines[0].startswith(f"aotipre: error: {flag} "), r.stderr
        assert why in lines[0]


def test_json_is_complete_even_when_it_cannot_check(pkg: Pkg) -> None:
    r = run("check", str(pkg("broken_truncated")), "--format", "json")
    assert r.returncode == 2
    data = json.loads(r.stdout)
    assert data["verdict"] == "error" and data["schema_version"] == 1
    assert data["findings"][0]["code"] == "AOT002"
    assert {"package", "stages", "findings", "summary"} <= set(data)


def test_json_report_fields(pkg: Pkg, tmp_path: Path) -> None:
    out = tmp_path / "report.json"
    r = run(
        "check",
        str(pkg("both")),
        "-i",
        str(pkg("aoti_inputs_out_of_range")),
        "--static-only",
        "--format",
        "json",
        "--output",
        str(out),
    )
    assert r.returncode == 1 and r.stdout == ""
    data = json.loads(out.read_text())
    assert data["verdict"] == "fail"
    assert data["package"]["kind"] == "both"
    model = data["package"]["models"][0]
    assert [i["name"] for i in model["inputs"]] == ["input_ids", "attention_mask"]
    assert sorted((d["min"], d["max"]) for d in model["dynamic_dims"]) == [(1, 64), (2, 128)]
    f = next(f for f in data["findings"] if f["code"] == "AOT304")
    for key in (
        "code",
        "severity",
        "category",
        "subject",
        "message",
        "hint",
        "model",
        "input",
        "position",
        "dim",
        "expected",
        "actual",
    ):
        assert key in f
    assert [s["name"] for s in data["stages"]] == ["inspect", "inputs", "static"]
    assert all({"status", "duration_s"} <= set(s) for s in data["stages"])


def test_inspect_json(pkg: Pkg) -> None:
    r = run("inspect", str(pkg("multi")), "--format", "json")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert [m["name"] for m in data["package"]["models"]] == ["decoder", "encoder"]
    assert all(m["has_aoti"] and m["has_exported_program"] for m in data["package"]["models"])


def test_inspect_table(pkg: Pkg) -> None:
    r = run("inspect", str(pkg("derived")))
    assert r.returncode == 0
    assert "2*s" in r.stdout and "member integrity: all CRCs match" in r.stdout


def test_usage_error_exit_2(pkg: Pkg) -> None:
    r = run("check", str(pkg("aoti")), "--no-such-flag")
    assert r.returncode == 2 and "Traceback" not in r.stderr


def test_bad_target_exit_2(pkg: Pkg) -> None:
    r = run("check", str(pkg("aoti")), "--target", "tpu", "--static-only")
    assert r.returncode == 2 and "tpu" in r.stderr and "Traceback" not in r.stderr


def test_codes_listing() -> None:
    r = run("codes", "--format", "json")
    assert r.returncode == 0
    assert any(c["code"] == "AOT304" for c in json.loads(r.stdout))


def test_static_path_never_imports_torch(pkg: Pkg) -> None:
    code = (
        "import sys\n"
        "from aotipre.cli import main\n"
        f"rc = main(['check', {str(pkg('both'))!r}, '-i', {str(pkg('aoti_inputs'))!r}, "
        "'--static-only', '--format', 'json', '--output', '/dev/null'])\n"
        f"main(['inspect', {str(pkg('kwargs'))!r}])\n"
        f"main(['diff', {str(pkg('both'))!r}, {str(pkg('kwargs'))!r}, '-f', 'json'])\n"
        "assert 'torch' not in sys.modules, 'torch was imported'\n"
        "sys.exit(rc)\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr


# What the static lane must not import (the start-up time of `inspect`, `check --static-only`,
# `diff`, the pre-commit hook: BENCHMARKS.md "Static lane"), each with why it is not needed:
STATIC_LANE_NEVER_IMPORTS = {
    # crash triage's readers of generated code: only the index check's kernel scan reads
    # kernels, and only for an integer input the ExportedProgram's graph gives no bound
    "aotipre.triage",
    "aotipre.triage.codegen",
    # crash triage's log parsers and records (~10 ms): the index check uses none of them
    "aotipre.triage.parsers",
    "aotipre.triage.diagnosis",
    # the run-log classifiers the parsers import: only a worker's outcome is classified
    "aotipre.runner.classify",
    "aotipre.runner.sanitizer",
    # planned worker inputs (the index check's graph walk is pt2.exported's embedding_rows)
    "aotipre.runner.synth",
    # the reference files of a dynamic run: only --exported-program or --expected
    "aotipre.runner.reference",
    # the interpreters workers run in: a static check probes none
    "aotipre.environment.runtimes",
    # CI shards (only --shard) and where a package runs (only several packages on several GPUs)
    "aotipre.fleet.shard",
    "aotipre.fleet.placement",
    # CUDA binaries: only a package with cubins or fatbins (these fixtures are CPU packages)
    "aotipre.binaries.cuda",
    # nvidia-smi's child process: only a host with nvidia-smi on the PATH; the host's system
    # and machine are os.uname()'s; "did you mean" only for a misspelt key or keyword; a
    # temporary file or folder only for a report written to a file, or a worker
    "subprocess",
    "platform",
    "difflib",
    "tempfile",
    # the crash ladder (the triage package's re-exports): not the index check's kernel parsers
    "aotipre.triage.ladder",
    # child processes and the fork server: a static check starts none
    "aotipre.runner.proc",
    "aotipre.runner.forkserver",
    "aotipre.runner.launch",
    "concurrent.futures",
    # tabulate reads its own version through importlib.metadata (report/tabular.py)
    "importlib.metadata",
}
INDEX_CHECK_IMPORTS = {"aotipre.triage", "aotipre.triage.codegen"}
"""What the index check's kernel scan (an integer input the ExportedProgram's graph gives no
bound, or no ExportedProgram) imports of STATIC_LANE_NEVER_IMPORTS."""
# `check` of a .pt2 exports no program and, without --weights, --baseline, --select or
# --ignore, reads no weights file and filters no finding
NO_OPTION_IMPORTS = {"aotipre.program", "aotipre.inputs.weights", "aotipre.findings.baseline"}
# `inspect` and `diff` run no check of packages either
NO_CHECK_RUN_IMPORTS = NO_OPTION_IMPORTS | {
    "aotipre.fleet.batch",
    "aotipre.runner",
    "aotipre.checks.custom_ops",
    "aotipre.serving.triton",
}


def test_static_lane_imports_only_what_it_uses(pkg: Pkg, tmp_path: Path) -> None:
    """Each static command, in a fresh process on a host without nvidia-smi (the PATH is an
    empty folder), imports none of the modules it does not need (`check
    --static-only` on a sample without integer inputs: no index check; with integer inputs
    and no configuration file: no TOML parser, and the kernel readers only where the
    ExportedProgram's graph leaves an integer input without a bound: an AOTI-only package)."""
    never = STATIC_LANE_NEVER_IMPORTS
    commands = {
        "inspect": (["inspect", str(pkg("kwargs"))], never | NO_CHECK_RUN_IMPORTS),
        "diff": (
            ["diff", str(pkg("both")), str(pkg("kwargs")), "-f", "json"],
            never | NO_CHECK_RUN_IMPORTS,
        ),
        "check": (
            ["check", str(pkg("strides")), "-i", str(pkg("strides_inputs")), "--static-only"],
            never | NO_OPTION_IMPORTS,
        ),
        "check, index check from the graph": (
            [
                *("check", str(pkg("both")), "-i", str(pkg("aoti_inputs"))),
                *("--static-only", "--no-config"),
            ],
            never | NO_OPTION_IMPORTS | {"tomllib"},
        ),
        "check, index check from the kernels": (
            [
                *("check", str(pkg("aoti")), "-i", str(pkg("aoti_inputs"))),
                *("--static-only", "--no-config"),
            ],
            (never - INDEX_CHECK_IMPORTS) | NO_OPTION_IMPORTS | {"tomllib"},
        ),
    }
    env = {**os.environ, "PATH": str(tmp_path)}
    for name, (argv, unused) in commands.items():
        code = (  # modules the interpreter imported before the command (site, .pth) do not count
            "import sys\n"
            "before = set(sys.modules)\n"
            "from aotipre.cli import main\n"
            f"main({argv!r})\n"
            f"found = sorted((set(sys.modules) - before).intersection({sorted(unused)!r}))\n"
            "print('imported:', found, file=sys.stderr)\n"
        )
        r = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env
        )
        assert r.returncode in (0, 1), (name, r.stderr)
        assert "imported: []" in r.stderr.splitlines(), (name, r.stderr)


HELP_SCREENS = """
import json
import typer
from typer.testing import CliRunner
from aotipre.cli.app import app
runner = CliRunner()
names = ["", *typer.main.get_command(app).commands]
print(json.dumps({name: runner.invoke(app, [name, "--help"][not name:]).output for name in names}))
"""
"""Prints `aotipre --help` (key "") and each `aotipre COMMAND --help` as one JSON object."""


def _screen_lines(screen: str) -> list[str]:
    """A help screen's lines without the panels' borders, each run of spaces made one space."""
    return [" ".join(line.strip(" │╭╮╰╯─").split()) for line in screen.splitlines()]


def _whole(text: str) -> str:
    """Help text as the renderer shows it on a line wide enough: its words, one space apart."""
    return " ".join(text.split())


def test_help_screens_show_docstrings_and_option_help_whole() -> None:
    """`aotipre --help` and every `aotipre COMMAND --help`, rendered wider than any text: each
    command's summary (its docstring's first paragraph) whole on its line of the Commands panel,
    each paragraph of its docstring and each option's help whole on a line of its own screen. A
    docstring's own line breaks would cut them mid-sentence; rich markup (`[name]`) would eat
    words."""
    import inspect

    import typer

    from aotipre.cli.app import app

    proc = subprocess.run(
        [sys.executable, "-c", HELP_SCREENS],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "1000", "TERMINAL_WIDTH": "1000"},
    )
    assert proc.returncode == 0, proc.stderr
    screens = {name: _screen_lines(screen) for name, screen in json.loads(proc.stdout).items()}
    commands = typer.main.get_command(app).commands  # type: ignore[attr-defined]
    assert set(screens) == {"", *commands}
    assert app.info.help and _whole(app.info.help) in screens[""]
    for command in app.registered_commands:
        assert command.callback is not None
        name = command.name or typer.main.get_command_name(command.callback.__name__)
        paragraphs = [_whole(p) for p in (inspect.getdoc(command.callback) or "").split("\n\n")]
        assert paragraphs[0], f"{name} has no docstring"
        assert f"{name} {paragraphs[0]}" in screens[""], (name, screens[""])
        for paragraph in paragraphs:
            assert paragraph in screens[name], (paragraph, screens[name])
        for param in commands[name].params:
            helped = _whole(getattr(param, "help", None) or "")
            assert any(helped in line for line in screens[name]), (name, param.name, helped)
