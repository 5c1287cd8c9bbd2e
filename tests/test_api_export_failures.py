"""aotipre.check on an nn.Module that torch.export cannot export: a Report whose finding gives
the class of failure (AOT555 data-dependent, AOT556 graph break, AOT557 anything else), the model
line and the fix, and a failed `export` stage; never torch's exception."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import aotipre
from aotipre.api import CheckOptions
from aotipre.triage.state import TriageOptions

MODULES = Path(__file__).with_name("export_failing_modules.py")
STATIC = CheckOptions(static_only=True)


@pytest.fixture(scope="module")
def torch():  # type: ignore[no-untyped-def]
    return pytest.importorskip("torch")


@pytest.fixture(scope="module")
def modules(torch):  # type: ignore[no-untyped-def]
    sys.path.insert(0, str(MODULES.parent))
    try:
        import export_failing_modules
    finally:
        sys.path.remove(str(MODULES.parent))
    return export_failing_modules


def _line(marker: str) -> str:
    lines = MODULES.read_text().splitlines()
    n = next(i for i, ln in enumerate(lines, 1) if marker in ln)
    return f"{MODULES}:{n} in forward: `{lines[n - 1].strip()}`"


def _check(modules, torch, name: str):  # type: ignore[no-untyped-def]
    cls, strict = modules.CASES[name]
    # ones: the values draft_export reports (x.sum() > 0, 4 nonzeros) are those of the script's
    report = aotipre.check(cls(), STATIC, example_inputs=(torch.ones(4),), strict=strict)
    assert [(s.name, s.status.value) for s in report.stages] == [("export", "failed")]
    assert report.exit_code == 1 and report.error is None
    (finding,) = report.findings
    assert finding.stage == "export" and finding.evidence
    return finding


def test_plain_torch_raises_what_the_classes_are_built_on(torch) -> None:  # type: ignore[no-untyped-def]
    proc = subprocess.run(
        [sys.executable, str(MODULES)], capture_output=True, text=True, timeout=300, check=False
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    plain = json.loads(proc.stdout)
    raised = plain["raised"]
    assert raised["ValueBranch"][0] == ["GuardOnDataDependentSymNode"]
    assert raised["SizeBranch"][0] == ["UserError", "GuardOnDataDependentSymNode"]
    assert raised["RandomScale"][0] == ["Unsupported"]
    assert raised["ToNumpy"][0] == ["RuntimeError"]
    # draft_export on the same module and inputs (ones) goes on past a data-dependent guard
    # (with the real values) and reports it; it raises on the rest as export does
    assert plain["drafted"] == {
        "ValueBranch": [["DATA_DEPENDENT_ERROR", "Eq(u0, 1)", "True"]],
        "SizeBranch": [["DATA_DEPENDENT_ERROR", "u0 > 2", "True"]],
        "RandomScale": "raised: Unsupported",
        "ToNumpy": "raised: RuntimeError",
    }


def test_aot555_a_branch_on_a_value_is_data_dependent(modules, torch) -> None:  # type: ignore[no-untyped-def]
    f = _check(modules, torch, "ValueBranch")
    assert f.code == "AOT555"
    assert f.message == (
        "exporting <ValueBranch> failed: data-dependent expression `Eq(u0, 1)` (symbol u0) at "
        + _line("branch on a value")
        + "; draft_export on the same inputs found 1 issue(s), listed in the evidence"
    )
    assert "torch._check" in f.hint and "torch.cond" in f.hint
    # what draft_export adds: the value the example inputs gave the expression
    assert f.evidence[-1] == (
        "draft_export: data-dependent expression `Eq(u0, 1)` was True on the example inputs at "
        + _line("x.sum() > 0:")
    )


def test_aot555_a_branch_on_a_data_dependent_size_under_strict_export(modules, torch) -> None:  # type: ignore[no-untyped-def]
    f = _check(modules, torch, "SizeBranch")
    assert f.code == "AOT555"
    assert f.message == (
        "exporting <SizeBranch> (strict) failed: data-dependent expression `u0 > 2` (symbol u0) "
        "at "
        + _line("branch on a size")
        + "; draft_export on the same inputs found 1 issue(s), listed in the evidence"
    )
    assert f.evidence[-1] == (
        "draft_export: data-dependent expression `u0 > 2` was True on the example inputs at "
        + _line("branch on a size")
    )


def test_aot556_a_graph_break_under_strict_export(modules, torch) -> None:  # type: ignore[no-untyped-def]
    f = _check(modules, torch, "RandomScale")
    assert f.code == "AOT556"
    assert f.message == (
        "exporting <RandomScale> (strict) failed: a graph break (Attempted to call function "
        "marked as skipped) at " + _line("a graph break")
    )
    assert "strict=False" in f.hint
    assert f.evidence[-1] == (
        "draft_export: it raised too (Unsupported: Attempted to call function marked as skipped)"
    )


def test_aot557_any_other_export_failure_quotes_torch(modules, torch) -> None:  # type: ignore[no-untyped-def]
    f = _check(modules, torch, "ToNumpy")
    assert f.code == "AOT557"
    assert f.message == (
        "exporting <ToNumpy> failed: RuntimeError: .numpy() is not supported for tensor "
        "subclasses. at " + _line("not traceable")
    )
    assert f.evidence[-1] == (
        "draft_export: it raised too (RuntimeError: .numpy() is not supported for tensor "
        "subclasses.)"
    )


def test_a_huge_exception_is_quoted_bounded(torch) -> None:  # type: ignore[no-untyped-def]
    class Shouts(torch.nn.Module):
        def forward(self, x):  # type: ignore[no-untyped-def]
            raise ValueError("no " * 200_000 + "\n" + "line\n" * 100_000)  # the model's own raise

    report = aotipre.check(Shouts(), STATIC, example_inputs=(torch.randn(4),))
    (f,) = report.findings
    assert f.code == "AOT557" and f.message.startswith(
        "exporting <Shouts> failed: ValueError: no no"
    )
    assert f"{__file__}:" in f.message and "the model's own raise" in f.message
    assert len(f.message) < 1500 and len(f.evidence) <= 5
    assert f.evidence[-1].startswith("draft_export: it raised too (ValueError: no no")
    assert all(len(line) <= 300 for line in f.evidence)


def test_draft_export_runs_under_escalate_only(modules, torch) -> None:  # type: ignore[no-untyped-def]
    cls, strict = modules.CASES["ValueBranch"]
    said = {}
    for escalate in (True, False):
        opts = CheckOptions(static_only=True, triage=TriageOptions(escalate=escalate))
        report = aotipre.check(cls(), opts, example_inputs=(torch.ones(4),), strict=strict)
        (f,) = report.findings
        assert f.code == "AOT555"
        said[escalate] = [line for line in (f.message, *f.evidence) if "draft_export" in line]
    assert len(said[True]) == 2 and not said[False]


def test_a_draft_export_past_its_budget_is_killed_and_said(modules, torch) -> None:  # type: ignore[no-untyped-def]
    # export stops at the branch; draft_export goes on past it into a 600 s sleep
    opts = CheckOptions(static_only=True, triage=TriageOptions(accuracy_budget_s=3))
    report = aotipre.check(modules.SlowAfterBranch(), opts, example_inputs=(torch.randn(4),))
    (f,) = report.findings
    assert f.code == "AOT555"
    assert f.evidence[-1] == ("draft_export: it did not finish within 3 s (the escalation budget)")
