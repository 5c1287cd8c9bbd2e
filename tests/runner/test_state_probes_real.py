"""Every comparison of a stateful model from the same state, on packages built through the
public API (build_state_probes.py): the probes, the sample-layout run and the compare stage put
the mutated buffers of both sides back to their initial values before each compared call, so a
model whose state advances between calls gets its one state finding (AOT706) and no size,
alignment or layout finding that the advancing state alone produced; a stateful model whose
compiled code is wrong is still caught at every size. Each expectation is first shown with plain
torch in a fresh process (the builder's facts.json)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from aotipre.api import CheckOptions, check
from aotipre.checks.custom_ops import Registration
from aotipre.findings import StageStatus
from aotipre.runner.stages import DynamicOptions
from aotipre.triage.state import TriageOptions
from tests.building import build

pytestmark = pytest.mark.slow

HERE = Path(__file__).resolve().parent
AGREE = 1e-3
"""Plain torch's fresh compiled and eager outputs differ by float rounding only (values ~1-100)."""


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build(HERE / "build_state_probes.py", tmp_path_factory.mktemp("state-probes"))


@pytest.fixture(scope="module")
def facts(built: Path) -> dict:
    return json.loads((built / "facts.json").read_text())


def run_check(  # type: ignore[no-untyped-def]
    built: Path, package: str, inputs: str, registration: Registration | None = None
):
    dynamic = DynamicOptions(
        exported_program=str(built / "tally_ep.pt2"), timeout_s=120.0, perf=None
    )
    return check(
        str(built / package),
        CheckOptions(
            inputs=str(built / inputs),
            dynamic=dynamic,
            canary=False,
            triage=TriageOptions(escalate=False),
            registration=registration,
        ),
    )


UNREADABLE_STATE = """
import sys

def buffers(self, names):
    raise RuntimeError("the initial values cannot be read here")

# the worker runs as the private package _aotipre_worker (runner/worker/__main__.py)
sys.modules["_aotipre_worker.loading"].StateRunner.buffers = buffers
"""
"""An --import module that makes the workers' read of the initial buffer values fail (what a
package whose constants the container runner cannot extract does)."""


def stage(report, name: str):  # type: ignore[no-untyped-def]
    return next(s for s in report.stages if s.name == name)


def test_a_stateful_model_gets_its_state_finding_once(built: Path, facts: dict) -> None:
    # plain torch: from a fresh state, compiled and eager agree on every probe's input, and the
    # input's layout or alignment changes nothing; called again, each side's state advances,
    # and one copy drifts from eager from its second call on (the folded counter, #185077)
    assert all(d < AGREE for d in facts["fresh_vs_eager"].values()), facts
    assert all(d < AGREE for d in facts["layout_vs_contiguous"]["tally"].values()), facts
    assert min(facts["second_call_vs_first"].values()) > 1.0, facts
    first, second = facts["one_copy_compiled_vs_eager"][:2]
    assert first < AGREE < second, facts

    # the sample handed over transposed: the sample-layout run compares two calls too
    report = run_check(built, "tally.pt2", "inputs_transposed.pt")

    codes = [f.code for f in report.findings]
    assert codes.count("AOT706") == 1, report.findings
    assert (
        "first differ at call 2" in next(f for f in report.findings if f.code == "AOT706").message
    )
    for code in ("AOT701", "AOT616", "AOT614"):
        assert code not in codes, [f.message for f in report.findings if f.code == code]
    assert stage(report, "compare").status is StageStatus.PASSED
    probe = stage(report, "probe")
    assert probe.status is StageStatus.PASSED, probe.detail
    layout = "non-contiguous: rejected by the runtime check (opt-in); without it: ran and returned"
    assert f"{layout} the same outputs as contiguous" in probe.detail, probe.detail
    # AOT613 stays for the size past the max, which no reference checks; not for the layout
    (unchecked,) = [f for f in report.findings if f.code == "AOT613"]
    assert re.search(r"\w+=17 \[args\[0\] dim 0\]", unchecked.message), unchecked.message
    assert "differ" not in unchecked.message
    (given,) = [f for f in report.findings if f.code == "AOT307"]
    assert given.severity.value == "warning" and "returned the same outputs" in given.message


def test_a_stateful_model_whose_compiled_code_is_wrong_is_found_at_every_size_once(
    built: Path, facts: dict
) -> None:
    # plain torch: the package compiled with torch's injected relu bug differs from eager at
    # every probe size, each side fresh
    assert min(facts["bad_fresh_vs_eager"].values()) > 0.5, facts
    # and its outputs do not depend on the input's layout or alignment
    assert all(d < AGREE for d in facts["layout_vs_contiguous"]["tally_bad"].values()), facts

    report = run_check(built, "tally_bad.pt2", "inputs.pt")

    assert stage(report, "compare").status is StageStatus.FAILED
    assert stage(report, "probe").status is StageStatus.FAILED
    sizes = {
        int(m.group(1))
        for f in report.findings
        if f.code == "AOT701" and (m := re.search(r" at \w+=(\d+) \[args\[0\] dim 0\]", f.message))
    }
    assert sizes == {2, 16}, [f.message for f in report.findings]
    # wrong outputs, reported as such: not also as an alignment or a layout problem
    assert "AOT616" not in [f.code for f in report.findings]
    assert "same outputs as contiguous" in stage(report, "probe").detail


def test_where_the_state_cannot_be_put_back_each_comparison_gets_a_fresh_copy(
    built: Path, tmp_path: Path
) -> None:
    # the same check as above, with the initial values unreadable in every worker: each
    # compared call then runs on a newly loaded copy, so the findings are the same
    (tmp_path / "unreadable_state.py").write_text(UNREADABLE_STATE)
    registration = Registration(imports=("unreadable_state",), import_path=(str(tmp_path),))
    report = run_check(built, "tally.pt2", "inputs_transposed.pt", registration)

    codes = [f.code for f in report.findings]
    assert codes.count("AOT706") == 1, report.findings
    for code in ("AOT701", "AOT616", "AOT614"):
        assert code not in codes, [f.message for f in report.findings if f.code == code]
    assert stage(report, "compare").status is StageStatus.PASSED
    assert stage(report, "probe").status is StageStatus.PASSED, stage(report, "probe").detail
