"""An ExportedProgram+AOTI archive whose two parts disagree (AOTI compiled from the model cast to
bfloat16, the ExportedProgram in float32): the contract that deploys is the compiled code's,
shown first with plain torch under the runtime check, and the disagreement is AOT018."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from aotipre.api import CheckOptions, check
from tests.building import build

pytestmark = pytest.mark.slow

HERE = Path(__file__).resolve().parent

PLAIN = """
import sys, torch
out, name = sys.argv[1], sys.argv[2]
m = torch._inductor.aoti_load_package(f"{out}/mixed.pt2")
(x,), _ = torch.load(f"{out}/{name}.pt")
try:
    m(x)
    print("ran")
except Exception as exc:
    print("refused", exc)
"""


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("mixed")
    return build(HERE / "mixed_archive.py", out)


def plain_torch(built: Path, inputs: str) -> str:
    env = {**os.environ, "AOTI_RUNTIME_CHECK_INPUTS": "1"}
    proc = subprocess.run(
        [sys.executable, "-c", PLAIN, str(built), inputs],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    return proc.stdout.strip().splitlines()[-1]


@pytest.mark.parametrize(("inputs", "accepted"), [("bf16", True), ("f32", False)])
def test_the_deployed_code_decides_the_inputs(built: Path, inputs: str, accepted: bool) -> None:
    plain = plain_torch(built, inputs)
    assert plain.startswith("ran" if accepted else "refused"), plain

    report = check(
        str(built / "mixed.pt2"), CheckOptions(inputs=str(built / f"{inputs}.pt"), static_only=True)
    )

    codes = {f.code for f in report.findings}
    assert "AOT018" in codes
    (conflict,) = [f for f in report.findings if f.code == "AOT018"]
    assert "dtype float32, the compiled code bfloat16" in conflict.message
    assert ("AOT201" in codes) is not accepted
    assert report.exit_code == (0 if accepted else 1)


def test_the_float32_program_refuses_the_inputs_the_code_runs(built: Path) -> None:
    """The dynamic check on the bfloat16 samples: the compiled code runs them, the archive's
    float32 ExportedProgram fails on them eagerly (AOT704, a warning: it no longer describes
    the code, AOT018 says why)."""
    from aotipre.runner.stages import DynamicOptions

    dynamic = DynamicOptions(timeout_s=120.0, probe=False, perf=None)
    options = CheckOptions(inputs=str(built / "bf16.pt"), dynamic=dynamic, canary=False)
    report = check(str(built / "mixed.pt2"), options)
    stages = {s.name: s for s in report.stages}
    assert stages["run"].status.value == "passed"
    (eager,) = [f for f in report.findings if f.code == "AOT704"]
    assert eager.severity.value == "warning" and "dtype" in eager.message.lower()
    assert "AOT018" in {f.code for f in report.findings}
