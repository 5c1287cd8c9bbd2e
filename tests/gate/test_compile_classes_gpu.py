"""The Triton class of a failed compile (AOT544) on a CUDA GPU (gpu marker; skipped without
CUDA): torch's own `triton.inject_relu_bug_TESTING_ONLY="compile_error"` makes Inductor generate
a Triton kernel that does not compile. Grounded in what plain torch raises in a fresh process:
InductorError, "Failed to run autotuning code block: Failed to import ...py" and Python's
SyntaxError for the generated line (torch 2.11.0+cu130 on an H200)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from aotipre import CheckOptions, check
from aotipre.findings import StageStatus
from aotipre.runner.stages import DynamicOptions

pytestmark = [pytest.mark.gpu, pytest.mark.slow]

INJECTED = {"triton.inject_relu_bug_TESTING_ONLY": "compile_error"}

BUILD = """
import json, sys
import torch

class ReluMul(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)

    def forward(self, x):
        return torch.relu(self.lin(x)) * 2

out = sys.argv[1]
torch.manual_seed(0)
x = torch.randn(4, 8, device="cuda")
ep = torch.export.export(ReluMul().cuda(), (x,))
torch.export.save(ep, f"{out}/ep.pt2")
torch.save(((x,), {}), f"{out}/inputs.pt")
raised = []
try:
    torch._inductor.aoti_compile_and_package(
        ep, package_path=f"{out}/bad.pt2", inductor_configs=json.loads(sys.argv[2])
    )
except Exception as exc:  # what plain torch raises, outermost first
    while exc is not None and len(raised) < 4:
        raised.append(f"{type(exc).__name__}: {exc}")
        exc = exc.__cause__ or getattr(exc, "inner_exception", None)
ok = torch._inductor.aoti_compile_and_package(ep, package_path=f"{out}/ok.pt2")
plain = torch._inductor.aoti_load_package(ok)(x)
print(json.dumps({"raised": raised, "gap": (plain - ep.module()(x)).abs().max().item()}))
"""


def test_a_triton_kernel_that_does_not_compile_is_named_with_its_line_and_proven_away(
    tmp_path: Path,
) -> None:
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU (torch.cuda.is_available() is False)")
    proc = subprocess.run(
        [sys.executable, "-c", BUILD, str(tmp_path), json.dumps(INJECTED)],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    plain = json.loads(proc.stdout.strip().splitlines()[-1])
    # plain torch: the injected config's kernel does not import; without it, it compiles and
    # matches eager
    assert plain["raised"][0].startswith("InductorError"), plain
    assert "Failed to import" in plain["raised"][0] and "SyntaxError" in plain["raised"][0]
    assert plain["gap"] < 1e-4, plain

    report = check(
        str(tmp_path / "ep.pt2"),
        CheckOptions(
            inputs=str(tmp_path / "inputs.pt"),
            dynamic=DynamicOptions(
                use_cache=False, probe=False, perf=None, inductor_configs=INJECTED
            ),
        ),
    )
    found = [f for f in report.findings if f.code == "AOT544"]
    assert len(found) == 1, [(f.code, f.message) for f in report.findings]
    message = found[0].message
    assert "the generated Triton kernel triton_" in message and "relu" in message
    assert "does not compile: SyntaxError: invalid syntax" in message
    assert "`tmp" in message and "compile error!`" in message  # the generated line
    assert "relu (aten.relu.default" in message  # the model's node
    stages = {s.name: s for s in report.stages}
    assert stages["compile"].status is StageStatus.FAILED
    # the rebuild without the injected config compiles and matches eager
    assert (found[0].hint or "").startswith(
        "workaround, proven: without triton.inject_relu_bug_TESTING_ONLY"
    ), found[0].hint
