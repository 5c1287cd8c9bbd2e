"""How the compare, run and probe records become findings (AOT701-703, AOT705), through
run_dynamic_stages with the FAKE torch worker (tests/fakes/fake_torch_worker.py) scripting the
records the real worker writes (their shape is held by test_worker_compare.py, which runs the
real comparison code). The real packages behind these codes: test_codes_real.py."""

from __future__ import annotations

import dataclasses
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from aotipre.findings import Finding, Severity, StageResult, StageStatus
from aotipre.pt2.spec import Dim
from aotipre.runner.stages import DynamicOptions, run_dynamic_stages
from tests.fakes.specs import token_model, write_package

FAKE_WORKER = str(Path(__file__).resolve().parents[1] / "fakes" / "fake_torch_worker.py")

Run = Callable[..., tuple[dict[str, StageResult], list[Finding]]]


@pytest.fixture
def fake_run(tmp_path: Path) -> Run:
    def go(script: dict[str, Any], ep: bool = True, **opts: Any) -> tuple[dict, list[Finding]]:
        model = token_model(ep=ep)
        package = write_package(tmp_path / "pkg.pt2", model)
        options = DynamicOptions(
            worker_command=(sys.executable, FAKE_WORKER),
            extra_env={"AOTIPRE_FAKE_SCRIPT": json.dumps(script)},
            cache_dir=str(tmp_path / "cache"),
            **{"timeout_s": 30.0, "probe": False, **opts},
        )
        results, findings = run_dynamic_stages(package, model, None, None, options)
        return {r.name: r for r in results}, findings

    return go


def tensor_cmp(**fields: Any) -> dict[str, Any]:
    base = {
        "index": 0, "kind": "tensor", "dtype": "float32", "eager_dtype": "float32",
        "shape": [2, 4], "eager_shape": [2, 4], "numel": 8, "rtol": 1e-4, "atol": 1e-5,
        "mismatches": 0, "max_abs": 0.0, "max_rel": 0.0,
    }  # fmt: skip
    return {**base, **fields}


def compare(*outputs: dict[str, Any], structure: str | None = None) -> dict[str, Any]:
    return {"compare": {"entry": {"structure": structure, "outputs": list(outputs)}}}


def test_matching_outputs_pass(fake_run: Run) -> None:
    res, findings = fake_run(compare(tensor_cmp(), tensor_cmp(index=1)))
    assert findings == []
    assert res["compare"].status is StageStatus.PASSED
    assert "2 output(s) match the ExportedProgram" in res["compare"].detail


def test_mismatching_elements_are_an_error_with_the_numbers(fake_run: Run) -> None:
    out = tensor_cmp(
        mismatches=3, max_abs=0.5, max_rel=0.25, worst_index=[1, 2], worst_aoti=2.5,
        worst_eager=2.0, rtol=0.001, atol=0.002,
    )  # fmt: skip
    res, findings = fake_run(compare(tensor_cmp(), out))
    (f,) = findings
    assert (f.code, f.severity, f.stage) == ("AOT701", Severity.ERROR, "compare")
    assert "output 0 (float32[2, 4]): 3 of 8 elements differ beyond rtol=0.001, atol=0.002" in (
        f.message
    )
    assert "max abs error 0.5" in f.message and "max rel error 0.25" in f.message
    assert "worst at (1, 2): 2.5 vs eager 2" in f.message
    assert (f.expected, f.actual) == (2.0, 2.5)
    assert res["compare"].status is StageStatus.FAILED
    assert res["compare"].detail == f.message


def test_one_mismatch_is_enough(fake_run: Run) -> None:
    _, findings = fake_run(compare(tensor_cmp(mismatches=1, max_abs=None, max_rel=None)))
    assert [f.code for f in findings] == ["AOT701"]
    assert "1 of 8 elements differ" in findings[0].message
    assert "max abs" not in findings[0].message


def test_mismatch_without_tolerances_says_so(fake_run: Run) -> None:
    _, findings = fake_run(compare(tensor_cmp(mismatches=2, rtol=None, atol=None)))
    assert findings[0].message.startswith("output 0 (float32[2, 4]): 2 of 8 elements differ")
    assert "rtol" not in findings[0].message


def test_value_outputs_compare_by_equality(fake_run: Run) -> None:
    same = {"index": 0, "kind": "value", "equal": True, "aoti": "3", "eager": "3"}
    differ = {"index": 1, "kind": "value", "equal": False, "aoti": "3", "eager": "4"}
    _, findings = fake_run(compare(same))
    assert findings == []
    _, findings = fake_run(compare(same, differ))
    (f,) = findings
    assert f.code == "AOT701" and f.message == (
        "output 1: 3 differs from eager 4 (compared with the ExportedProgram in the archive run "
        "eagerly)"
    )
    assert (f.expected, f.actual) == ("4", "3")


def test_structure_mismatches(fake_run: Run) -> None:
    _, findings = fake_run(compare(structure="the compiled model returns 1 output(s), the "
                                   "ExportedProgram 2"))  # fmt: skip
    assert [f.code for f in findings] == ["AOT703"]
    assert "returns 1 output(s)" in findings[0].message
    shape = tensor_cmp(structure=True, shape=[2, 4], eager_shape=[2, 5], eager_dtype="float64")
    _, findings = fake_run(compare(shape))
    (f,) = findings
    assert f.code == "AOT703"
    assert f.message == (
        "output 0: the compiled model returns float32[2, 4], the ExportedProgram float64[2, 5] "
        "(compared with the ExportedProgram in the archive run eagerly)"
    )
    assert (f.expected, f.actual) == ("float64[2, 5]", "float32[2, 4]")


def output(nan: int = 0, inf: int = 0) -> dict[str, Any]:
    return {"kind": "tensor", "dtype": "float32", "shape": [2, 4], "nan": nan, "inf": inf}


NO_REF_NAN = "; no reference to tell whether the model or the compile produces them"
NO_REF_INF = (
    "; no reference to tell whether they are intended (masked logits, log-probabilities) or "
    "produced by the compile"
)


@pytest.mark.parametrize(
    "nan, inf, expected",
    [
        (1, 0, [("AOT702", Severity.ERROR, "holds 1 NaN" + NO_REF_NAN, 1)]),
        (0, 2, [("AOT705", Severity.WARNING, "holds 2 Inf" + NO_REF_INF, 2)]),
        (3, 1, [("AOT702", Severity.ERROR, "holds 3 NaN" + NO_REF_NAN, 3),
                ("AOT705", Severity.WARNING, "holds 1 Inf" + NO_REF_INF, 1)]),
    ],
)  # fmt: skip
def test_nan_is_an_error_and_inf_a_warning_without_a_reference(
    fake_run: Run, nan: int, inf: int, expected: list[tuple[str, Severity, str, int]]
) -> None:
    # an AOTI-only package: no ExportedProgram to tell intended Inf (masked logits) from a bug
    script = {"run": {"entry": {"outputs": [output(), output(nan, inf)]}}}
    _, findings = fake_run(script, ep=False)
    head = "output 1 (float32[2, 4]) of the compiled model "
    assert [(f.code, f.severity, f.message, f.actual) for f in findings] == [
        (code, severity, head + what, actual) for code, severity, what, actual in expected
    ]
    assert all(f.stage == "run" and f.expected is None for f in findings)


def test_nan_that_eager_produces_too_is_an_error_naming_the_model(fake_run: Run) -> None:
    script = {
        "run": {"entry": {"outputs": [output(nan=2), output(inf=1)]}},
        "eager": {"entry": {"outputs": [output(nan=2), output()]}},
    }
    _, findings = fake_run(script)
    by_output = {f.message.split(" ")[1]: f for f in findings if f.code == "AOT702"}
    # NaN is served either way: an error, which says the model, not the compile, produces it
    assert by_output["0"].severity is Severity.ERROR
    assert "the ExportedProgram run eagerly produces NaN too (2)" in by_output["0"].message
    assert "the model, not the compile, produces them" in by_output["0"].message
    assert (by_output["0"].expected, by_output["0"].actual) == (2, 2)
    assert by_output["1"].severity is Severity.ERROR  # eager's output 1 is finite
    assert "where the ExportedProgram run eagerly holds 0" in by_output["1"].message
    assert "produces NaN too" not in by_output["1"].message


def test_probe_comparison_names_the_probe_and_its_input(fake_run: Run) -> None:
    script = {"probe:s1:max": {"entry": {"compare": {"structure": None, "outputs": [
        tensor_cmp(mismatches=2, max_abs=1.0, max_rel=1.0)]}}}}  # fmt: skip
    res, findings = fake_run(script, probe=True)
    assert sorted(f.code for f in findings) == ["AOT613", "AOT701"]  # AOT613: the over-max twins
    (f,) = [f for f in findings if f.code == "AOT701"]
    assert (f.code, f.stage, f.input, f.dim) == ("AOT701", "probe", "input_ids", 1)
    assert " at seq (s1)=128 [input_ids dim 1, attention_mask dim 1]" in f.message
    assert res["probe"].status is StageStatus.FAILED
    assert "outputs differ from eager" in res["probe"].detail


def test_a_failed_eager_run_is_no_evidence_about_nan(fake_run: Run) -> None:
    script = {
        "run": {"entry": {"outputs": [output(nan=1)]}},
        "eager": {"error": {"type": "RuntimeError", "message": "eager failed"},
                  "entry": {"outputs": [output(nan=1)]}},
    }  # fmt: skip
    _, findings = fake_run(script)
    nan = [f for f in findings if f.code == "AOT702"]
    assert [f.severity for f in nan] == [Severity.ERROR]


def test_nan_in_an_output_eager_does_not_have(fake_run: Run) -> None:
    script = {
        "run": {"entry": {"outputs": [output(), output(nan=2)]}},
        "eager": {"entry": {"outputs": [output()]}},  # one output fewer
    }
    _, findings = fake_run(script)
    assert [(f.code, f.severity) for f in findings if f.code == "AOT702"] == [
        ("AOT702", Severity.ERROR)
    ]


def test_probe_comparison_names_the_first_input_of_its_symbol(tmp_path: Path) -> None:
    # attention_mask laid out [s1, s0]: the probe of s1 touches input_ids dim 1 and
    # attention_mask dim 0; the finding names the first of them
    model = token_model(ep=True)
    ids, mask = model.inputs
    t = mask.tensor
    mask = dataclasses.replace(mask, tensor=dataclasses.replace(
        t, shape=tuple(reversed(t.shape)), strides=(Dim(expr="s0"), Dim(value=1))))  # fmt: skip
    model = dataclasses.replace(model, inputs=(ids, mask))
    package = write_package(tmp_path / "pkg.pt2", model)
    script = {"probe:s1:max": {"entry": {"compare": {"structure": None, "outputs": [
        tensor_cmp(mismatches=1)]}}}}  # fmt: skip
    options = DynamicOptions(
        worker_command=(sys.executable, FAKE_WORKER),
        extra_env={"AOTIPRE_FAKE_SCRIPT": json.dumps(script)},
        cache_dir=str(tmp_path / "cache"),
        timeout_s=30.0,
    )
    _, findings = run_dynamic_stages(package, model, None, None, options)
    assert sorted(f.code for f in findings) == ["AOT613", "AOT701"]  # AOT613: the over-max twins
    (f,) = [f for f in findings if f.code == "AOT701"]
    assert (f.code, f.input, f.dim) == ("AOT701", "input_ids", 1)


def batch_inputs(size: int) -> list[dict[str, Any]]:
    """The run record's summaries of token_model's inputs (both laid out [s0, s1])."""
    return [
        {"kind": "tensor", "dtype": "int64", "shape": [size, 8]},
        {"kind": "tensor", "dtype": "float32", "shape": [size, 8]},
    ]


def test_nan_rows_of_the_batch_name_the_input_rows(fake_run: Run) -> None:
    # output dim 0 is 2, as is the inputs' dynamic batch dim (s0): the rows are the batch's
    nan = {**output(nan=4), "nan_rows": [1], "nan_row_count": 1}
    script = {"run": {"entry": {"inputs": batch_inputs(2), "outputs": [nan]}}}
    _, findings = fake_run(script, ep=False)
    (f,) = findings
    assert (f.code, f.severity, f.actual) == ("AOT702", Severity.ERROR, 4)
    assert f.message == (
        "output 0 (float32[2, 4]) of the compiled model holds 4 NaN in 1 row(s) along dim 0 (1): "
        "the rows of the batch, produced by input row(s) 1 of 'input_ids', 'attention_mask'"
        + NO_REF_NAN
    )


def test_rows_past_the_cap_are_elided_and_a_longer_dim_0_is_not_the_batch(fake_run: Run) -> None:
    # 40 rows hold NaN, the worker lists the first 32; dim 0 (40) is not the batch (2)
    listed = list(range(32))
    nan = {**output(nan=40), "shape": [40, 4], "nan_rows": listed, "nan_row_count": 40}
    script = {"run": {"entry": {"inputs": batch_inputs(2), "outputs": [nan]}}}
    _, findings = fake_run(script, ep=False)
    (f,) = findings
    assert f.message == (
        "output 0 (float32[40, 4]) of the compiled model holds 40 NaN in 40 row(s) along dim 0 ("
        + ", ".join(str(r) for r in listed)
        + ", ...)"
        + NO_REF_NAN
    )
    assert "input row(s)" not in f.message


def test_rows_without_a_count_count_the_listed_rows(fake_run: Run) -> None:
    inf = {**output(inf=3), "inf_rows": [0, 1]}
    _, findings = fake_run({"run": {"entry": {"outputs": [inf]}}}, ep=False)
    (f,) = findings
    assert (f.code, f.severity) == ("AOT705", Severity.WARNING)
    assert f.message == (
        "output 0 (float32[2, 4]) of the compiled model holds 3 Inf in 2 row(s) along dim 0 "
        "(0, 1)" + NO_REF_INF
    )


def test_inf_that_eager_produces_in_the_same_rows_is_info(fake_run: Run) -> None:
    inf = {**output(inf=2), "inf_rows": [0], "inf_row_count": 1}
    script = {"run": {"entry": {"outputs": [inf]}}, "eager": {"entry": {"outputs": [inf]}}}
    res, findings = fake_run(script)
    (f,) = findings
    assert (f.code, f.severity, f.stage) == ("AOT705", Severity.INFO, "run")
    assert f.message == (
        "output 0 (float32[2, 4]) of the compiled model holds 2 Inf in 1 row(s) along dim 0 (0), "
        "as the ExportedProgram run eagerly does (the same count in the same rows): reported, "
        "not failed"
    )
    assert (f.expected, f.actual) == (2, 2)


def test_inf_that_eager_produces_in_other_rows_is_an_error(fake_run: Run) -> None:
    aoti = {**output(inf=2), "inf_rows": [0], "inf_row_count": 1}
    eager = {**output(inf=2), "inf_rows": [1], "inf_row_count": 1}
    script = {"run": {"entry": {"outputs": [aoti]}}, "eager": {"entry": {"outputs": [eager]}}}
    _, findings = fake_run(script)
    (f,) = findings
    assert (f.code, f.severity) == ("AOT702", Severity.ERROR)
    assert f.message == (
        "output 0 (float32[2, 4]) of the compiled model holds 2 Inf in 1 row(s) along dim 0 (0) "
        "where the ExportedProgram run eagerly holds 2 in 1 row(s) along dim 0 (1)"
    )
    assert (f.expected, f.actual) == (2, 2)


def test_nan_where_eager_is_finite_blames_the_compiled_code(fake_run: Run) -> None:
    script = {
        "run": {"entry": {"outputs": [output(nan=3)]}},
        "eager": {"entry": {"outputs": [output()]}},
    }
    _, findings = fake_run(script)
    (f,) = findings
    assert (f.code, f.severity) == ("AOT702", Severity.ERROR)
    assert f.message == (
        "output 0 (float32[2, 4]) of the compiled model holds 3 NaN where the ExportedProgram "
        "run eagerly is finite: the compiled code produces them"
    )
    assert (f.expected, f.actual) == (0, 3)


def test_a_failed_eager_run_is_no_reference(fake_run: Run) -> None:
    # the failed eager step's record still lists outputs: they must not be read as a reference
    same = {**output(nan=1, inf=1), "inf_rows": [0], "inf_row_count": 1}
    script = {
        "run": {"entry": {"outputs": [same]}},
        "eager": {"error": {"type": "RuntimeError", "message": "eager failed"},
                  "entry": {"outputs": [same]}},
    }  # fmt: skip
    _, findings = fake_run(script)
    head = "output 0 (float32[2, 4]) of the compiled model holds "
    rows = " in 1 row(s) along dim 0 (0)"
    assert [(f.code, f.severity, f.message, f.expected) for f in findings if f.stage == "run"] == [
        ("AOT702", Severity.ERROR, head + "1 NaN" + NO_REF_NAN, None),
        ("AOT705", Severity.WARNING, head + "1 Inf" + rows + NO_REF_INF, None),
    ]


def test_an_output_count_difference_names_the_exported_program(fake_run: Run) -> None:
    structure = "the compiled model returns 1 output(s), the ExportedProgram 2"
    res, findings = fake_run(compare(structure=structure))
    (f,) = findings
    assert (f.code, f.severity, f.stage) == ("AOT703", Severity.ERROR, "compare")
    assert f.message == (
        "the compiled model returns 1 output(s), the ExportedProgram 2 (compared with the "
        "ExportedProgram in the archive run eagerly)"
    )
    assert res["compare"].status is StageStatus.FAILED
