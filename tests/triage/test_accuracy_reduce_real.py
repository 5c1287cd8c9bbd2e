"""Accuracy triage of the CPU reduction-order class on one real build (slow), grounded in what
plain torch does with the same program in a fresh process (build_accuracy.py's `reduce` facts):
an fp32 sum whose compiled order differs from eager's, proven by the all-fallback rebuild; the
same difference reached through a weight swap (AOT068), rebuilt with the swapped weights; and
--accuracy-budget reaching the triage."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from aotipre import CheckOptions, check
from aotipre.findings import Report
from aotipre.runner.stages import DynamicOptions
from tests.building import build, check_json

pytestmark = pytest.mark.slow

BUILDER = Path(__file__).parent / "build_accuracy.py"


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build(BUILDER, tmp_path_factory.mktemp("accuracy-reduce"), "reduce")


def facts(built: Path, kind: str) -> dict:
    return json.loads((built / f"{kind}_facts.json").read_text())


def codes(report: Report) -> list[str]:
    return [f.code for f in report.findings]


def finding(report: Report, code: str):  # noqa: ANN201 - a Finding
    (found,) = [f for f in report.findings if f.code == code]
    return found


def against_program(built: Path, kind: str, **dynamic: float) -> Report:
    """The AOTI package checked with its ExportedProgram given by --exported-program."""
    return check(
        str(built / f"{kind}_aoti.pt2"),
        CheckOptions(
            inputs=str(built / f"{kind}_inputs.pt"),
            dynamic=DynamicOptions(
                probe=False,
                perf=None,  # no test here asserts on the perf stage's timed calls
                use_cache=False,
                exported_program=str(built / f"{kind}.pt2"),
                **dynamic,  # type: ignore[arg-type]
            ),
        ),
    )


REDUCE_TOLERANCE = {"rtol": 0.0, "atol": 1e-5}
"""Tighter than the fp32 default (rtol 1e-4): the reduction-order difference is then AOT701."""


@pytest.mark.torch_versions  # the all-fallback rebuild's configs
def test_a_reduction_order_difference_is_proven_by_the_all_fallback_rebuild(built: Path) -> None:
    plain = facts(built, "reduce")
    assert plain["gap"] > REDUCE_TOLERANCE["atol"]  # plain torch: the compiled sum differs
    assert plain["rebuilds"][0]["gap"] == 0.0  # and the all-fallback rebuild closes it
    report = against_program(built, "reduce", **REDUCE_TOLERANCE)
    assert "AOT701" in codes(report) and "AOT709" in codes(report)
    assert "AOT710" not in codes(report)
    (d,) = report.accuracy
    assert d.kernel is not None and d.kernel.startswith("cpp_fused") and "sum" in d.kernel
    assert any(n.startswith("sum") for n in d.nodes) and d.inputs_agree is True
    assert d.output_max_abs == pytest.approx(plain["gap"])
    # a sum holds no bf16 value and no RNG op: the reduction's rung is the only one tried
    assert [t.knob for t in d.trials] == ["all-fallback"]
    assert d.cause == "all-fallback"
    assert d.trials[0].configs == plain["rebuilds"][0]["configs"]
    assert d.trials[0].max_abs == plain["rebuilds"][0]["gap"]
    hint = finding(report, "AOT709").hint or ""
    assert "fallback_by_default" in hint and "selective_decompose" in hint


@pytest.mark.torch_versions  # a program rebuilt with swapped weights
def test_a_weight_swaps_difference_is_rebuilt_with_the_swapped_weights(built: Path) -> None:
    """AOT068 alone (the sample's outputs agree until --weights is swapped in): triage rebuilds
    the program with the swapped weights, localizes the sum and proves its cause; a rebuild
    with the compiled weights would have matched eager and proven nothing."""
    swap = facts(built, "reduce")["swap"]
    assert swap["gap_before"] <= REDUCE_TOLERANCE["atol"] < swap["gap"]  # plain torch
    weights = str(built / "reduce_weights.pt")
    report = check(
        str(built / "reduce_aoti.pt2"),
        CheckOptions(
            inputs=str(built / "reduce_swap_inputs.pt"),
            weights=weights,
            dynamic=DynamicOptions(
                probe=False,
                perf=None,  # no test here asserts on the perf stage's timed calls
                use_cache=False,
                exported_program=str(built / "reduce.pt2"),
                weights=weights,
                **REDUCE_TOLERANCE,
            ),
        ),
    )
    assert "AOT068" in codes(report) and "AOT701" not in codes(report)
    (d,) = report.accuracy
    assert d.trigger == ("AOT068",)
    assert "accuracy triage (AOT068)" in finding(report, "AOT708").message
    assert d.kernel is not None and "sum" in d.kernel
    assert d.output_max_abs == pytest.approx(swap["gap"])
    assert d.cause == "all-fallback" and "AOT709" in codes(report)


def test_a_tiny_accuracy_budget_leaves_the_cause_unproven(built: Path, tmp_path: Path) -> None:
    """--accuracy-budget reaches the triage: the same check as above, within 0.5 s, cannot
    even compile its diagnostic rebuild; it says the budget ran out and proves nothing."""
    rc, data = check_json(
        tmp_path,
        str(built / "reduce_aoti.pt2"),
        "--inputs", str(built / "reduce_inputs.pt"),
        "--exported-program", str(built / "reduce.pt2"),
        "--rtol", str(REDUCE_TOLERANCE["rtol"]), "--atol", str(REDUCE_TOLERANCE["atol"]),
        "--no-probe", "--no-perf", "--accuracy-budget", "0.5",
    )  # fmt: skip
    found = [f["code"] for f in data["findings"]]
    assert rc == 1 and "AOT701" in found
    assert not {"AOT708", "AOT709", "AOT710"} & set(found)
    (stage,) = [s for s in data["stages"] if s["name"] == "accuracy:localize"]
    assert stage["status"] == "error"
    assert "inconclusive" in stage["detail"] and "budget" in stage["detail"]
    assert data["accuracy"] == []
