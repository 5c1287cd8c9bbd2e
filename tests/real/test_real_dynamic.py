"""Dynamic verdicts (compile/load/run/compare) on packages built with the public API, checked
against what plain torch does with the same files in a fresh process (plain_torch.json, written
by scripts/build_real_models.py; a copy of one run is in tests/data/real/plain_torch.json)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from aotipre.api import CheckOptions, check
from aotipre.findings import Report, Severity, Verdict
from aotipre.runner.stages.options import DynamicOptions
from aotipre.triage.state import TriageOptions

pytestmark = pytest.mark.slow  # real runs of real packages (the EP-only one compiles: ~1 min)


def _check(real_dir: Path, package: str, inputs: str, **kw: Any) -> Report:
    opts = CheckOptions(
        inputs=str(real_dir / f"{package}_{inputs}.pt"),
        dynamic=DynamicOptions(probe=False),
        **kw,
    )
    return check(real_dir / f"{package}.pt2", opts)


def _of(report: Report, code: str) -> list[Any]:
    return [f for f in report.findings if f.code == code]


def test_nan_rows_of_an_aoti_only_package(real_dir: Path, plain_torch: dict[str, Any]) -> None:
    """log() of a negative feature: plain torch returns NaN on rows 1 and 3 (the compiled code
    and the eager model alike). No reference in an AOTI-only package: still an error, rows named."""
    call = plain_torch["features"]["calls"]["negative_rows"]
    assert call["status"] == "ran" and call["aoti_nan_rows"] == [1, 3] == call["eager_nan_rows"]
    report = _check(real_dir, "features", "negative_rows")
    (nan,) = _of(report, "AOT702")
    assert nan.severity is Severity.ERROR
    assert "in 2 row(s) along dim 0 (1, 3)" in nan.message
    # (an AOTI-only package does not record positional argument names)
    assert "input row(s) 1, 3 of 'args[0]', 'args[1]'" in nan.message
    assert "no reference" in nan.message
    assert report.verdict is Verdict.FAIL


def test_masked_inf_without_a_reference_is_a_warning(
    real_dir: Path, plain_torch: dict[str, Any]
) -> None:
    call = plain_torch["features"]["calls"]["ok"]
    assert call["equals_eager"] is True and "aoti_nan_rows" not in call
    assert call["aoti_inf_rows"] == [0, 1, 2, 3, 4] == call["eager_inf_rows"]
    report = _check(real_dir, "features", "ok")
    (inf,) = _of(report, "AOT705")
    assert inf.severity is Severity.WARNING and "5 Inf" in inf.message
    assert not _of(report, "AOT702")
    assert report.verdict is not Verdict.FAIL


def test_nan_and_masked_inf_against_the_exported_program(
    real_dir: Path, plain_torch: dict[str, Any]
) -> None:
    """The EP-only archive compiled at check time: the ExportedProgram is the reference. Its
    -inf at the masked class is reported (info), the NaN rows fail and are the model's."""
    call = plain_torch["features"]["calls"]["negative_rows"]
    assert call["eager_nan_rows"] == [1, 3] and call["eager_inf_rows"] == [0, 2, 4]
    ok = _check(real_dir, "features_ep", "ok", compile_at_deploy=True)
    (inf,) = _of(ok, "AOT705")
    assert (
        inf.severity is Severity.INFO and "as the ExportedProgram run eagerly does" in inf.message
    )
    assert ok.verdict is Verdict.PASS
    # --no-escalate: the accuracy triage AOT702 starts (a diagnostic rebuild) is not this
    # test's subject; the finding and the verdict come from the stages (runner/stages/nonfinite.py)
    no_escalate = TriageOptions(escalate=False)
    bad = _check(
        real_dir, "features_ep", "negative_rows", compile_at_deploy=True, triage=no_escalate
    )
    (nan,) = _of(bad, "AOT702")
    assert "the model, not the compile, produces them" in nan.message
    assert "(1, 3)" in nan.message
    assert bad.verdict is Verdict.FAIL


def test_the_layout_probe_says_what_a_default_deployment_returns(
    real_dir: Path, plain_torch: dict[str, Any]
) -> None:
    """The probe's non-contiguous twin of healthy images is refused under the runtime check and,
    as a default deployment runs it, returns other outputs: plain torch with the same layout
    (vision_transposed.pt, a fresh process, no AOTI_RUNTIME_CHECK_INPUTS) does too."""
    call = plain_torch["vision"]["calls"]["transposed"]
    assert call["status"] == "ran" and call["equals_eager"] is False
    report = check(
        real_dir / "vision.pt2",
        CheckOptions(inputs=str(real_dir / "vision_ok.pt"), dynamic=DynamicOptions()),
    )
    (unchecked,) = _of(report, "AOT613")
    assert (
        "args[0] with strides (768, 256, 1, 16) (the sample's values, not contiguous): ran "
        "silently and returned outputs that differ from the contiguous input's" in unchecked.message
    )
    probe = next(s for s in report.stages if s.name == "probe")
    assert "args[0] non-contiguous: rejected by the runtime check (opt-in)" in probe.detail
    assert report.verdict is Verdict.PASS  # a warning: the serving process decides
