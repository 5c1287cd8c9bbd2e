"""What starts accuracy triage (runner/stages/mismatch.py) and what it does with each trigger
that needs no rebuild to judge: a session's findings handed over once every stage has reported,
and AOT525 alone (the C++ loader differs from the Python loader, which agrees with eager) said
to be no kernel difference without rebuilding anything. A weight swap's AOT068 is
test_accuracy_real.py's (it rebuilds)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from aotipre.findings import Finding, StageStatus
from aotipre.findings import codes as code_table
from aotipre.runner.stages import DynamicOptions, OutputMismatch
from aotipre.runner.stages.mismatch import hand_mismatch
from aotipre.triage.accuracy import AccuracyOptions, triage_accuracy


def finding(code: str, stage: str) -> Finding:
    return code_table.get(code).finding(f"{code} here", model="m", stage=stage)


def session(findings: list[Finding], compare: str | None, reference: str | None) -> Any:
    """The parts of a Session that hand_mismatch reads, and the OutputMismatches it hands."""
    handed: list[OutputMismatch] = []
    records = {} if compare is None else {"compare": SimpleNamespace(status=compare)}
    return SimpleNamespace(
        handed=handed,
        on_mismatch=handed.append,
        reference=SimpleNamespace(path=reference, model="model", label="its own program"),
        findings=findings,
        records=records,
        package=SimpleNamespace(path="/nowhere/p.pt2"),
        model=SimpleNamespace(name="m"),
        device="cpu",
        inputs=SimpleNamespace(spec={"kind": "file", "path": "/nowhere/in.pt"}),
        opts=DynamicOptions(),
        extra_env={},
        callers_archive=None,
        aoti_package=None,
        aoti_model="model",
        weights=None,
        probe=SimpleNamespace(probed=None),
    )


def test_the_cpp_loaders_difference_is_handed_over_with_what_the_python_side_showed() -> None:
    s = session([finding("AOT525", "cpp-load")], compare="ok", reference="/nowhere/ep.pt2")
    hand_mismatch(s)
    (case,) = s.handed
    assert case.codes == ("AOT525",) and case.python_agrees is True and case.weights is None
    # the Python side differs from eager too: it is not said to agree
    s = session(
        [finding("AOT701", "compare"), finding("AOT525", "cpp-load")],
        compare="ok",
        reference="/nowhere/ep.pt2",
    )
    hand_mismatch(s)
    (case,) = s.handed
    assert case.codes == ("AOT525", "AOT701") and case.python_agrees is False
    # no program: nothing was compared with eager
    s = session([finding("AOT525", "cpp-load")], compare=None, reference=None)
    hand_mismatch(s)
    assert s.handed[0].python_agrees is None


def test_a_weight_swaps_difference_is_handed_over() -> None:
    s = session([finding("AOT068", "weights")], compare="ok", reference="/nowhere/ep.pt2")
    hand_mismatch(s)
    (case,) = s.handed
    assert case.codes == ("AOT068",)


def test_findings_of_other_stages_hand_nothing_over() -> None:
    s = session([finding("AOT701", "probe")], compare="ok", reference="/nowhere/ep.pt2")
    hand_mismatch(s)
    assert s.handed == []


def cpp_case(python_agrees: bool | None) -> OutputMismatch:
    return OutputMismatch(
        package=SimpleNamespace(path="/nowhere/p.pt2"),  # type: ignore[arg-type]
        model=SimpleNamespace(name="m"),  # type: ignore[arg-type]
        device="cpu",
        inputs={"kind": "file", "path": "/nowhere/in.pt"},
        findings=(finding("AOT525", "cpp-load"),),
        reference="/nowhere/ep.pt2",  # never opened: AOT525 alone rebuilds nothing
        reference_model="model",
        reference_label="its own program",
        compiled_with={},
        env={},
        options=DynamicOptions(),
        python_agrees=python_agrees,
    )


def test_the_cpp_loader_alone_differing_is_no_kernel_difference() -> None:
    result = triage_accuracy(cpp_case(True), AccuracyOptions())
    (stage,) = result.stages
    assert stage.name == "accuracy" and stage.status is StageStatus.PASSED
    assert "not a kernel difference" in stage.detail and "Python loader's outputs match" in (
        stage.detail
    )
    assert result.findings == [] and result.diagnosis is None


def test_the_cpp_loader_differing_with_the_python_side_unchecked_is_undecided() -> None:
    result = triage_accuracy(cpp_case(None), AccuracyOptions())
    (stage,) = result.stages
    assert stage.status is StageStatus.SKIPPED
    assert "cannot be told" in stage.detail and "--exported-program FILE" in stage.detail
    assert result.diagnosis is None
