"""The state stage on packages built through the public API: a model whose compiled code drops
a buffer's update (torch #185077) fails, one whose state is carried passes, and each
expectation is first shown with plain torch in a fresh process."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from aotipre.api import CheckOptions, check
from aotipre.findings import StageStatus
from aotipre.runner.stages import DynamicOptions
from tests.building import shared_build

pytestmark = pytest.mark.slow

HERE = Path(__file__).resolve().parent

PLAIN = """
import json, sys, torch
pkg, ep, n, dev = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
x = torch.ones(4, device=dev)
m = torch._inductor.aoti_load_package(pkg)
compiled = [m(x).tolist() for _ in range(n)]
mod = torch.export.load(ep).module().to(dev)
eager = [mod(x).tolist() for _ in range(n)]
print(json.dumps({"compiled": compiled, "eager": eager}))
"""


@pytest.fixture(scope="module")
def built() -> Path:
    """state_models.py's packages, built once for this module and tests/cpp/test_stages_real.py."""
    return shared_build(HERE / "state_models.py")


def plain_torch(
    built: Path, name: str, calls: int = 3, device: str = "cpu"
) -> dict[str, list[list[float]]]:
    """What a fresh process with plain torch returns over `calls` calls of one loaded copy."""
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            PLAIN,
            str(built / f"{name}.pt2"),
            str(built / f"{name}_ep.pt2"),
            str(calls),
            device,
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def run_check(built: Path, name: str, reference: bool, calls: int = 3):  # type: ignore[no-untyped-def]
    dynamic = DynamicOptions(
        exported_program=str(built / f"{name}_ep.pt2") if reference else None,
        state_calls=calls,
        timeout_s=120.0,
        perf=None,
        probe=False,
    )
    return check(
        str(built / f"{name}.pt2"),
        CheckOptions(inputs=str(built / "inputs.pt"), dynamic=dynamic, canary=False),
    )


def stage(report, name: str):  # type: ignore[no-untyped-def]
    return next(s for s in report.stages if s.name == name)


def test_a_dropped_state_update_fails_naming_the_buffer_and_the_call(built: Path) -> None:
    plain = plain_torch(built, "counter")
    first = next(i for i, (c, e) in enumerate(zip(plain["compiled"], plain["eager"])) if c != e)
    assert plain["compiled"][0] == plain["eager"][0]  # one call compared with eager agrees

    report = run_check(built, "counter", reference=True)

    assert stage(report, "compare").status is StageStatus.PASSED
    assert stage(report, "state").status is StageStatus.FAILED
    found = [f for f in report.findings if f.code == "AOT706"]
    assert len(found) == 1, report.findings
    assert f"first differ at call {first + 1}" in found[0].message
    assert "buffer 'calls'" in found[0].message and found[0].input == "calls"
    assert "buffer 'acc'" not in found[0].message  # the accumulator's update is carried
    assert report.exit_code == 1


def test_without_a_reference_the_calls_are_reported_not_judged(built: Path) -> None:
    report = run_check(built, "counter", reference=False)

    assert stage(report, "state").status is StageStatus.PASSED
    found = [f for f in report.findings if f.code == "AOT707"]
    assert len(found) == 1
    assert "calls 1, 1, 1" in found[0].message  # the counter as the compiled code leaves it
    assert not [f for f in report.findings if f.code == "AOT706"]


def test_without_a_reference_a_written_buffer_that_never_changes_is_a_warning(
    built: Path,
) -> None:
    """Without an ExportedProgram the calls are not compared, but a buffer the compiled code
    writes and that holds the same value after every call with the same inputs is the symptom
    of a dropped update: plain torch shows the counter package drift from eager from call 2
    on, and the running mean's carried."""
    counter = plain_torch(built, "counter")
    assert counter["compiled"][0] == counter["eager"][0]
    assert counter["compiled"][1] != counter["eager"][1]
    running = plain_torch(built, "running")
    assert [v for c in running["compiled"] for v in c] == pytest.approx(
        [v for c in running["eager"] for v in c]
    )

    report = run_check(built, "counter", reference=False)
    (found,) = [f for f in report.findings if f.code == "AOT707"]
    assert found.severity.value == "warning" and found.input == "calls"
    assert "writes 'calls' but it holds the same value after every call" in found.message
    assert "'acc'" not in found.message  # the accumulator changes at every call
    assert "the same value of 'calls' after every call" in stage(report, "state").detail
    assert report.exit_code == 0  # a warning: a cache overwritten by its inputs looks the same

    carried = run_check(built, "running", reference=False)
    (info,) = [f for f in carried.findings if f.code == "AOT707"]
    assert info.severity.value == "info" and "holds the same value" not in info.message


def test_state_that_is_carried_passes(built: Path) -> None:
    plain = plain_torch(built, "running")
    flat = [v for call in plain["compiled"] for v in call]
    assert flat == pytest.approx([v for call in plain["eager"] for v in call])
    assert plain["compiled"][0] != plain["compiled"][1]  # the state does change the outputs

    report = run_check(built, "running", reference=True)

    assert stage(report, "state").status is StageStatus.PASSED, stage(report, "state").detail
    assert "match" in stage(report, "state").detail
    assert not [f for f in report.findings if f.code in ("AOT706", "AOT707")]


def test_state_calls_below_two_turn_the_stage_off(built: Path) -> None:
    report = run_check(built, "counter", reference=True, calls=1)

    assert stage(report, "state").status is StageStatus.SKIPPED
    assert not [f for f in report.findings if f.code == "AOT706"]


@pytest.mark.gpu
def test_state_across_calls_on_cuda(tmp_path: Path) -> None:
    """The same models compiled for CUDA: the state stage runs the .so with torch's CUDA
    container runner and reads its buffers; its verdict follows what plain torch returns."""
    import torch

    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    proc = subprocess.run(
        [sys.executable, str(HERE / "state_models.py"), str(tmp_path), "cuda"],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    for name in ("counter", "running"):
        plain = plain_torch(tmp_path, name, device="cuda")
        flat = [v for call in plain["compiled"] for v in call]
        carried = flat == pytest.approx([v for call in plain["eager"] for v in call])
        report = run_check(tmp_path, name, reference=True)
        state = stage(report, "state")
        assert state.status is (StageStatus.PASSED if carried else StageStatus.FAILED), (
            name,
            plain,
            state.detail,
        )
        assert bool([f for f in report.findings if f.code == "AOT706"]) is not carried
        # every other comparison starts both sides from the loaded state (worker/startstate.py)
        assert not [f for f in report.findings if f.code in ("AOT701", "AOT616")], name
