"""Accuracy triage's budget: `--accuracy-budget SECONDS`, the `accuracy-budget` key and
TriageOptions.accuracy_budget_s reach each package's triage options (flag > file > default) and
are checked alike: a bad value is one line and exit 2 (a UsageError for a library caller). That
the budget reaches the triage itself is test_accuracy_real.py's."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from aotipre import config
from aotipre.cli import main
from aotipre.fleet import batch
from aotipre.foundation.errors import UsageError
from aotipre.triage.escalate import TriageOptions


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty repository (a `.git` stops the config search) as the working directory."""
    (tmp_path / ".git").mkdir()
    (tmp_path / "model.pt2").write_text("")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def planned(monkeypatch: pytest.MonkeyPatch, *args: str) -> list[float]:
    """`aotipre check model.pt2 ARGS` up to its plan: each job's accuracy budget (nothing runs)."""
    seen: list[float] = []

    def capture(jobs: list[batch.PackageJob], **_: object) -> list[batch.PackageJob]:
        seen.extend(j.options.triage.accuracy_budget_s for j in jobs)  # type: ignore[union-attr]
        raise UsageError("planned")

    monkeypatch.setattr(batch, "with_runtimes", capture)
    assert main(["check", "model.pt2", *args]) == 2
    return seen


def test_the_flag_and_the_key_reach_the_triage_options(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert planned(monkeypatch) == [900.0]  # the default
    assert planned(monkeypatch, "--accuracy-budget", "60") == [60.0]
    (project / "aotipre.toml").write_text("accuracy-budget = 30\n")
    assert config.load_config().accuracy_budget == 30.0
    assert planned(monkeypatch) == [30.0]  # the file
    assert planned(monkeypatch, "--accuracy-budget", "45.5") == [45.5]  # the flag wins
    assert planned(monkeypatch, "--no-config") == [900.0]


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("0", "--accuracy-budget 0.0: must be > 0"),
        ("-5", "--accuracy-budget -5.0: must be > 0"),
        ("nan", "--accuracy-budget nan: must be a finite number"),
        ("inf", "--accuracy-budget inf: must be a finite number"),
        ("1e9", "--accuracy-budget 1000000000.0: must be <= 604800"),
        ("soon", "Invalid value for '--accuracy-budget'"),
    ],
)
def test_a_bad_flag_is_one_line_exit_2(
    project: Path, capsys: pytest.CaptureFixture[str], value: str, message: str
) -> None:
    assert main(["check", "model.pt2", "--accuracy-budget", value]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("accuracy-budget = 0", "accuracy-budget = 0: must be > 0"),
        ("accuracy-budget = '60'", 'accuracy-budget = "60": expected a number'),
        ("accuracy-budget = nan", "accuracy-budget = nan: must be a finite number"),
        ("accuracy_budget = 60", "unknown key 'accuracy_budget' (did you mean 'accuracy-budget'?)"),
    ],
)
def test_a_bad_key_names_the_file_and_the_key(project: Path, line: str, message: str) -> None:
    (project / "aotipre.toml").write_text(line + "\n")
    with pytest.raises(UsageError, match=re.escape(message)):
        config.load_config()


@pytest.mark.parametrize("value", [0, -1.0, float("nan"), float("inf"), 1e9, "60", True])
def test_a_library_callers_budget_is_checked_like_the_flag(value: object) -> None:
    with pytest.raises(UsageError, match=r"TriageOptions\.accuracy_budget_s = "):
        TriageOptions(accuracy_budget_s=value)  # type: ignore[arg-type]
    assert TriageOptions(accuracy_budget_s=0.5).accuracy_budget_s == 0.5
