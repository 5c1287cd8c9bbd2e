"""Progress in CI logs (docs/ci.md#progress-in-ci-logs): with stderr not a terminal and any format,
`check` says when each stage starts and ends, with the command's elapsed time, on stderr only;
`--no-progress` or `progress = false` silences it; a manifest names the package on each line;
a step that stays silent is named again (the heartbeat)."""

from __future__ import annotations

import functools
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from aotipre import cli
from aotipre.foundation import progress
from aotipre.runner import launch
from tests.progress_lines import PROGRESS, progress_lines, without_progress

Pkg = Callable[[str], Path]
FAKES = Path(__file__).resolve().parent / "fakes"
FAKE_WORKER = str(FAKES / "fake_torch_worker.py")
FAKE_CLI = str(FAKES / "cli_with_fake_worker.py")

_END = re.compile(r"^(?P<stage>.+) (?P<outcome>[a-z]+(?: out)?)(?: \((?P<s>\d+\.\d) s\))?$")
_OUTCOMES = {"passed", "failed", "error", "skipped", "done", "crashed", "timed out"}


def aotipre(
    *args: str, cwd: Path, fake: dict[str, Any] | None = None
) -> subprocess.CompletedProcess[str]:
    """`aotipre ARGS` in a subprocess, stdout and stderr pipes (not a terminal); with `fake`, the
    workers are tests/fakes/fake_torch_worker.py following that script."""
    env = {k: v for k, v in os.environ.items() if k != "AOTIPRE_FAKE_SCRIPT"}
    argv = [sys.executable, "-m", "aotipre"]
    if fake is not None:
        argv = [sys.executable, FAKE_CLI, FAKE_WORKER]
        env["AOTIPRE_FAKE_SCRIPT"] = json.dumps(fake)
    (cwd / ".git").mkdir(exist_ok=True)  # the configuration search stops here
    return subprocess.run(
        [*argv, *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
    )


def stage_lines(messages: list[str], prefix: str = "") -> list[tuple[str, str, str | None]]:
    """(stage subject, `started` or the end outcome, seconds) of the stage lines, in order."""
    out: list[tuple[str, str, str | None]] = []
    for message in messages:
        if not message.startswith(prefix):
            continue
        text = message[len(prefix) :]
        if text.endswith(" started"):
            out.append((text.removesuffix(" started"), "started", None))
        elif (m := _END.match(text)) and m.group("outcome") in _OUTCOMES:
            out.append((m.group("stage"), m.group("outcome"), m.group("s")))
    return out


def test_a_real_check_says_when_every_stage_starts_and_ends(pkg: Pkg, tmp_path: Path) -> None:
    r = aotipre(
        "check", str(pkg("aoti")), "-i", str(pkg("aoti_inputs")), "-f", "json", cwd=tmp_path
    )
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)  # progress never reaches stdout: the JSON is whole
    said = progress_lines(r.stderr)
    assert without_progress(r.stderr) == "", r.stderr
    elapsed = [t for t, _ in said]
    assert elapsed == sorted(elapsed), "the elapsed time never decreases"
    lines = stage_lines([m for _, m in said])
    started = [subject for subject, what, _ in lines if what == "started"]
    subjects = [f"{s['model']}: {s['name']}" if s["model"] else s["name"] for s in data["stages"]]
    assert started == [s for s in subjects if s in started], "stages start in the report's order"
    for stage, subject in zip(data["stages"], subjects):
        ends = [(i, what, s) for i, (subj, what, s) in enumerate(lines) if subj == subject]
        ends = [e for e in ends if e[1] != "started"]
        assert len(ends) == 1, (subject, r.stderr)
        (at, outcome, seconds) = ends[0]
        if stage["status"] == "skipped":
            assert outcome == "skipped" and seconds is None and subject not in started
            continue
        # a stage that ran: a start line, then an end line with its own duration
        assert subject in started, (subject, r.stderr)
        assert lines.index((subject, "started", None)) < at and seconds is not None
        if stage["model"] is None:  # the static stages end with their verdict
            assert outcome == stage["status"]
        else:  # the dynamic ones with what became of their worker steps
            assert outcome == "done"
    assert {"inspect", "inputs", "static", "model: load", "model: run"} <= set(started)
    # the steps' own messages are kept
    assert "model: loading" in [m for _, m in said]


def test_no_progress_says_nothing_and_json_stays_whole(pkg: Pkg, tmp_path: Path) -> None:
    args = ["check", str(pkg("aoti")), "-i", str(pkg("aoti_inputs")), "-f", "json"]
    quiet = aotipre(*args, "--no-progress", cwd=tmp_path, fake={})
    assert quiet.returncode == 0 and quiet.stderr == "", quiet.stderr
    loud = aotipre(*args, cwd=tmp_path, fake={})
    assert loud.returncode == 0, loud.stderr
    assert json.loads(loud.stdout)["verdict"] == json.loads(quiet.stdout)["verdict"] == "pass"
    assert progress_lines(loud.stderr) and without_progress(loud.stderr) == ""


@pytest.mark.parametrize("fmt", ["table", "junit", "sarif", "github", "markdown"])
def test_progress_goes_to_stderr_whatever_the_format_or_output(
    pkg: Pkg, tmp_path: Path, fmt: str
) -> None:
    out = tmp_path / "report.txt"
    args = ["check", str(pkg("aoti")), "-i", str(pkg("aoti_inputs")), "-f", fmt, "-o", str(out)]
    r = aotipre(*args, cwd=tmp_path, fake={})
    assert r.returncode == 0 and r.stdout == "", r.stderr
    assert "model: load started" in [m for _, m in progress_lines(r.stderr)], r.stderr
    assert not [line for line in out.read_text().splitlines() if PROGRESS.match(line)]


def test_static_only_is_quiet_unless_asked(pkg: Pkg, tmp_path: Path) -> None:
    args = ["check", str(pkg("aoti")), "-i", str(pkg("aoti_inputs")), "--static-only"]
    assert aotipre(*args, cwd=tmp_path).stderr == ""
    r = aotipre(*args, "--progress", cwd=tmp_path)
    lines = stage_lines([m for _, m in progress_lines(r.stderr)])
    assert [(subject, what) for subject, what, _ in lines] == [
        ("inspect", "started"),
        ("inspect", "passed"),
        ("inputs", "started"),
        ("inputs", "passed"),
        ("static", "started"),
        ("static", "passed"),
    ], r.stderr
    assert without_progress(r.stderr) == ""


def test_a_manifest_names_the_package_on_every_line(pkg: Pkg, tmp_path: Path) -> None:
    (tmp_path / "a.pt2").write_bytes(pkg("aoti").read_bytes())
    (tmp_path / "a_inputs.pt").write_bytes(pkg("aoti_inputs").read_bytes())
    manifest = tmp_path / "m.toml"
    manifest.write_text('[[package]]\npath = "a.pt2"\ninputs = "a_inputs.pt"\n')
    r = aotipre("check", "--manifest", str(manifest), "-f", "json", cwd=tmp_path, fake={})
    assert r.returncode == 0, r.stderr
    said = [m for _, m in progress_lines(r.stderr)]
    assert said and all(m.startswith("a.pt2: ") for m in said), r.stderr
    assert ("model: load", "started", None) in stage_lines(said, "a.pt2: ")
    assert json.loads(r.stdout)["summary"]["packages"] == 1


def test_the_configuration_key_and_the_flag_over_it(pkg: Pkg, tmp_path: Path) -> None:
    args = ["check", str(pkg("aoti")), "-i", str(pkg("aoti_inputs")), "-f", "json"]
    (tmp_path / "aotipre.toml").write_text("progress = false\n")
    assert aotipre(*args, cwd=tmp_path, fake={}).stderr == ""
    assert progress_lines(aotipre(*args, "--progress", cwd=tmp_path, fake={}).stderr)
    (tmp_path / "aotipre.toml").write_text("progress = true\n")
    r = aotipre(*args, "--static-only", cwd=tmp_path)
    assert [m for _, m in progress_lines(r.stderr)][:1] == ["inspect started"], r.stderr
    assert aotipre(*args, "--no-progress", cwd=tmp_path, fake={}).stderr == ""
    (tmp_path / "aotipre.toml").write_text('progress = "no"\n')
    bad = aotipre(*args, cwd=tmp_path, fake={})
    assert bad.returncode == 2 and "progress" in bad.stderr and "true or false" in bad.stderr


def test_a_silent_step_is_named_again_with_its_age(
    pkg: Pkg,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A run that hangs until its 2 s limit, with a heartbeat every 0.3 s (10 s in real use)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(launch, "WORKER_PATH", FAKE_WORKER)
    monkeypatch.setenv("AOTIPRE_FAKE_SCRIPT", json.dumps({"run": {"hang": True}}))
    monkeypatch.setattr(
        progress, "Heartbeat", functools.partial(progress.Heartbeat, interval_s=0.3)
    )
    args = ["check", str(pkg("aoti")), "-i", str(pkg("aoti_inputs")), "-f", "json"]
    rc = cli.main([*args, "--no-config", "--timeout", "2"], fast_lane=False)
    captured = capsys.readouterr()
    assert rc == 1, captured.err
    run = json.loads(captured.out)["stages"]
    assert [s["status"] for s in run if s["name"] == "run"] == ["failed"]
    said = [m for _, m in progress_lines(captured.err)]
    at = said.index("model: running")
    again = [m for m in said[at + 1 :] if m.startswith("model: running (still running, ")]
    assert again, captured.err
    ended = [m for m in said if m.startswith("model: run timed out (")]
    assert len(ended) == 1 and said.index(ended[0]) > said.index(again[-1]), captured.err
    assert without_progress(captured.err) == ""


def test_a_worker_that_dies_ends_its_stage_as_crashed(pkg: Pkg, tmp_path: Path) -> None:
    args = ["check", str(pkg("aoti")), "-i", str(pkg("aoti_inputs")), "-f", "json"]
    r = aotipre(*args, "--no-escalate", cwd=tmp_path, fake={"run": {"crash": "SIGSEGV"}})
    data = json.loads(r.stdout)
    assert [s["status"] for s in data["stages"] if s["name"] == "run"] == ["failed"], r.stderr
    lines = stage_lines([m for _, m in progress_lines(r.stderr)])
    run = [(what, s) for subject, what, s in lines if subject == "model: run"]
    assert [what for what, _ in run] == ["started", "crashed"] and run[1][1] is not None
    # the stages that never started (probe, after a crashed run) and crash triage: one line each
    assert ("model: probe", "skipped", None) in lines
    assert ("model: triage", "skipped", None) in lines  # --no-escalate
    elapsed = [t for t, _ in progress_lines(r.stderr)]
    assert elapsed == sorted(elapsed)
