"""Accuracy triage on real CPU compiles (slow), each grounded in what plain torch does with the
same program in a fresh process (build_accuracy.py's facts): a bf16 chain whose difference
emulate_precision_casts closes, NaN made by one fused kernel, an RNG op whose difference fallback_random closes, a kernel
miscompiled by torch's own injected relu bug that no rebuild explains, and an AOTI-only package
whose difference can only be reported with what is needed to localize it."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from aotipre import CheckOptions, check
from aotipre.findings import Report, StageStatus
from aotipre.report import render_report
from aotipre.runner.stages import DynamicOptions
from aotipre.triage.escalate import TriageOptions
from tests.building import build

pytestmark = pytest.mark.slow

BUILDER = Path(__file__).parent / "build_accuracy.py"
INJECTED = {"cpp.inject_relu_bug_TESTING_ONLY": "accuracy"}


@pytest.fixture(scope="module")
def build_kind(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Path]:
    """`build_kind("bf16")`: the folder holding build_accuracy.py's files for that kind, each
    kind built on first use, so a run of some of these tests (CI's other torches run the
    `torch_versions` ones) compiles only their kinds."""
    out = tmp_path_factory.mktemp("accuracy")
    kinds: set[str] = set()

    def folder(kind: str) -> Path:
        if kind not in kinds:
            build(BUILDER, out, kind)
            kinds.add(kind)
        return out

    return folder


def facts(built: Path, kind: str) -> dict:
    return json.loads((built / f"{kind}_facts.json").read_text())


def codes(report: Report) -> list[str]:
    return [f.code for f in report.findings]


def finding(report: Report, code: str):  # noqa: ANN201 - a Finding
    (found,) = [f for f in report.findings if f.code == code]
    return found


def against_program(
    built: Path, kind: str, triage: TriageOptions | None = None, **dynamic: Any
) -> Report:
    """The AOTI package checked with its ExportedProgram given by --exported-program."""
    return check(
        str(built / f"{kind}_aoti.pt2"),
        CheckOptions(
            inputs=str(built / f"{kind}_inputs.pt"),
            triage=triage,
            dynamic=DynamicOptions(
                probe=False,
                perf=None,  # no test here asserts on the perf stage's timed calls
                use_cache=False,
                exported_program=str(built / f"{kind}.pt2"),
                **dynamic,
            ),
        ),
    )


@pytest.mark.torch_versions  # the printer's saved tensors; emulate_precision_casts
def test_a_bf16_chain_is_localized_and_proven_precision_cast_elision(
    build_kind: Callable[[str], Path], tmp_path: Path
) -> None:
    built = build_kind("bf16")
    plain = facts(built, "bf16")
    assert plain["gap"] > 0.05  # plain torch: the compiled bf16 chain differs from eager
    assert plain["rebuilds"][0]["gap"] == 0.0  # and emulate_precision_casts closes it
    # one worker at a time, localized on the printer build: the ladder on the verified repro,
    # then one confirming rebuild
    triage = TriageOptions(
        artifacts=str(tmp_path / "art"), accuracy_speculate=False, accuracy_python_wrapper=False
    )
    report = against_program(built, "bf16", triage)
    assert "AOT701" in codes(report) and "AOT709" in codes(report)
    assert "AOT710" not in codes(report)
    (d,) = report.accuracy
    assert f"divergence starts in kernel {d.kernel}" in finding(report, "AOT708").message
    assert d.localized_on == "printer build"
    assert d.kernel is not None and d.kernel.startswith("cpp_fused")
    assert {"add", "sub"} <= set(d.nodes)  # the pointwise chain's FX nodes
    assert any("(y + 100.0) - 100.0" in line for line in d.source)
    assert d.inputs_agree is True
    first = d.series[0]
    assert first.kernel.startswith("aoti_torch_cpu_addmm") and first.max_abs == 0.0
    assert d.cause == "precision-casts"
    assert d.trials[0].configs == {"emulate_precision_casts": True}
    # proven on the verified repro (a cut smaller than the program), then by one full rebuild
    repro = d.repro
    assert repro is not None and repro.verified and repro.route == "subgraph"
    assert 0 < len(repro.nodes) < repro.program_nodes and repro.max_abs
    assert d.trials_on == "repro" and d.trials[0].verdict == "cause"
    assert d.confirm is not None and d.confirm.verdict == "cause"
    assert d.confirm.max_abs == plain["rebuilds"][0]["gap"]
    lat = d.latency  # measured: the deployed package against the rebuild, alternately
    assert lat is not None and lat.runs >= 3 and lat.deployed_ms > 0 and lat.rebuilt_ms > 0
    assert lat.cost_pct == pytest.approx((lat.rebuilt_ms / lat.deployed_ms - 1) * 100)
    assert lat.text in finding(report, "AOT709").message
    assert report.to_dict()["accuracy"][0]["latency"]["rebuilt_ms"] == lat.rebuilt_ms
    # the repro folder, run with plain torch in a fresh process, shows the difference
    assert repro.path == str(tmp_path / "art" / "model" / "accuracy-repro")
    assert f"kept in {repro.path}" in finding(report, "AOT709").message
    run = subprocess.run(
        [sys.executable, "repro.py"], cwd=repro.path, capture_output=True, text=True, timeout=600
    )
    assert run.returncode == 1, run.stderr[-2000:]  # 1: compiled differs from eager
    assert "compiled differs from eager" in run.stdout
    worst = max(float(x) for x in re.findall(r"max abs error (\S+)", run.stdout))
    assert worst == pytest.approx(repro.max_abs, rel=1e-5)  # printed to 6 digits
    assert d.output_max_abs == pytest.approx(plain["gap"])
    assert d.rmse_compiled is not None and d.rmse_eager is not None
    closer = "compiled" if d.rmse_compiled < d.rmse_eager else "eager"
    assert f"({closer} closer)" in finding(report, "AOT709").message
    assert "emulate_precision_casts" in (finding(report, "AOT709").hint or "")
    stages = {s.name: s for s in report.stages}
    assert stages["accuracy:cause"].status is StageStatus.PASSED
    table = render_report(report, "table")
    assert f"accuracy (model): divergence starts in kernel {d.kernel}" in table
    assert report.to_dict()["accuracy"][0]["series"][1]["kernel"] == d.kernel


def test_nan_made_by_one_fused_kernel_is_localized_with_finite_inputs(
    build_kind: Callable[[str], Path],
) -> None:
    built = build_kind("nan")
    plain = facts(built, "nan")
    assert plain["gap"] == float("inf")  # plain torch: NaN where eager is finite
    assert plain["rebuilds"][0]["gap"] == 0.0  # and emulate_precision_casts removes it
    report = against_program(built, "nan")
    assert "AOT702" in codes(report) and "AOT708" in codes(report)
    (d,) = report.accuracy
    # localized on the program's Python-wrapper compile: its outputs (NaN where NaN) are the
    # deployed package's bit for bit
    assert d.localized_on == "python wrapper"
    assert d.series[0].kernel == "extern_kernels.addmm"
    assert d.kernel is not None and d.kernel.startswith("cpp_fused")
    assert "div" in d.nodes
    assert d.inputs_agree is True  # the NaN did not come in: the addmm's output is finite
    assert d.series[0].nonfinite == 0 and d.series[1].nonfinite > 0
    assert "first NaN/Inf in kernel" in finding(report, "AOT708").message
    assert d.cause == "precision-casts" and "AOT709" in codes(report)


@pytest.mark.torch_versions  # the fallback_random knob
def test_an_rng_op_is_proven_by_fallback_random(build_kind: Callable[[str], Path]) -> None:
    built = build_kind("rng")
    plain = facts(built, "rng")
    assert plain["gap"] > 0.01 and plain["rebuilds"][0]["gap"] == 0.0
    report = against_program(built, "rng", TriageOptions(accuracy_speculate=True))
    (d,) = report.accuracy
    assert "rand_like" in d.nodes
    assert d.localized_on == "python wrapper"  # its random numbers are the package's
    assert d.cause == "fallback-random"
    assert [t.knob for t in d.trials] == ["fallback-random"]  # no bf16, no reduction: one knob
    assert "AOT709" in codes(report)
    # the program's one fact (an RNG op) is the kernel's: the rebuild started beside the
    # localizing one proves it on the whole program, timed; the repro is only cut and verified
    assert d.trials_on == "program" and d.confirm is None
    assert d.trials[0].max_abs == plain["rebuilds"][0]["gap"]
    assert d.latency is not None and d.latency.deployed_ms > 0 and d.latency.rebuilt_ms > 0
    assert d.repro is not None and d.repro.verified and "rand_like" in d.repro.nodes


def test_an_injected_miscompile_is_a_compiler_bug_candidate_with_no_cause(
    build_kind: Callable[[str], Path],
) -> None:
    built = build_kind("relu")
    assert facts(built, "relu")["gap"] > 0.5  # plain torch: the injected bug changes outputs
    report = check(
        str(built / "relu.pt2"),  # the ExportedProgram, compiled by aotipre with the bug
        CheckOptions(
            inputs=str(built / "relu_inputs.pt"),
            dynamic=DynamicOptions(
                probe=False, perf=None, use_cache=False, inductor_configs=INJECTED
            ),
        ),
    )
    assert "AOT701" in codes(report) and "AOT708" in codes(report) and "AOT710" in codes(report)
    assert "AOT709" not in codes(report)
    (d,) = report.accuracy
    assert "relu" in d.nodes and d.inputs_agree is True
    assert d.cause is None
    assert "no cause is proven" in finding(report, "AOT710").message
    # the miscompiled kernel's cut, compiled alone with the same configs, still differs
    assert d.repro is not None and d.repro.verified and "relu" in d.repro.nodes
    assert len(d.repro.nodes) < d.repro.program_nodes
    assert "repro verified (subgraph route" in finding(report, "AOT710").message


def test_a_package_compiled_with_unknown_configs_is_not_localized_on_the_python_wrapper(
    build_kind: Callable[[str], Path],
) -> None:
    # relu_aoti.pt2 was compiled with the injected miscompile, which the check is not told:
    # compiling the program as given is not that package, so its kernels cannot stand in for the
    # package's; the printer build (the same configs) then matches eager too, which is the
    # answer: the difference is not in compiling this program
    built = build_kind("relu")
    assert facts(built, "relu")["gap"] > 0.5
    report = against_program(built, "relu")
    assert "AOT701" in codes(report) and "AOT708" not in codes(report)
    assert report.accuracy == []
    stages = {s.name: s for s in report.stages}
    localize = stages["accuracy:localize"]
    assert localize.status is StageStatus.PASSED
    assert "does not reproduce when rebuilt" in localize.detail
    assert "with other configs" in localize.detail


def test_an_aoti_only_package_says_what_localizing_needs(
    build_kind: Callable[[str], Path],
) -> None:
    built = build_kind("bf16")
    report = check(
        str(built / "bf16_aoti.pt2"),
        CheckOptions(
            inputs=str(built / "bf16_inputs.pt"),
            dynamic=DynamicOptions(
                probe=False,
                perf=None,
                use_cache=False,
                expected=str(built / "bf16_expected.pt"),
            ),
        ),
    )
    assert "AOT701" in codes(report)  # the output-level finding stands
    message = finding(report, "AOT711").message
    assert "--exported-program FILE" in message and "aotipre bundle" in message
    assert report.accuracy == []


def test_no_escalate_leaves_the_difference_unlocalized(
    build_kind: Callable[[str], Path],
) -> None:
    built = build_kind("bf16")
    report = check(
        str(built / "bf16_aoti.pt2"),
        CheckOptions(
            inputs=str(built / "bf16_inputs.pt"),
            dynamic=DynamicOptions(
                probe=False, perf=None, exported_program=str(built / "bf16.pt2")
            ),
            triage=TriageOptions(escalate=False),
        ),
    )
    assert "AOT701" in codes(report) and "AOT708" not in codes(report)
    stages = {s.name: s for s in report.stages}
    assert stages["accuracy"].status is StageStatus.SKIPPED
