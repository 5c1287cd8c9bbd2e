"""The compile step's triage rungs with a fake torch worker (no torch, no GPU): a compile that
faults on CUDA runs again with synchronous launches, under a (fake) compute-sanitizer when
asked, and the compile finding names the kernel. The real thing: tests/cpp/test_gpu.py."""

from __future__ import annotations

import stat
import sys
from pathlib import Path
from typing import Any

import pytest

from aotipre.findings import Finding, StageStatus
from aotipre.runner import launch
from aotipre.runner.stages import compile_fault
from tests.fakes.specs import token_model
from tests.runner import test_stages
from tests.runner.test_stages import Run

run = test_stages.run  # the fake-worker fixture

IMA = {
    "type": "AcceleratorError",
    "message": "CUDA error: an illegal memory access was encountered\nCUDA kernel errors might "
    "be asynchronously reported at some other API call",
}
ASYNC_LOG = "@@aotipre-kernel start triton_poi_fused_add_0 -\n@@aotipre-kernel end triton_poi_fused_add_0 -\n"
SYNC_LOG = "@@aotipre-kernel start triton_poi_fused_add_0 -\n@@aotipre-kernel end triton_poi_fused_add_0 -\n@@aotipre-kernel start triton_per_fused_sum_1 -\n"  # fmt: skip
MEMCHECK = (
    "========= COMPUTE-SANITIZER\n"
    "========= Invalid __global__ read of size 4 bytes\n"
    "=========     at triton_per_fused_sum_1+0x1c0 in /tmp/c.py:24\n"
    "=========     by thread (3,0,0) in block (0,0,0)\n"
    "=========     Address 0x7f0000004b00 is out of bounds\n"
    "========= ERROR SUMMARY: 1 error\n"
)


def compile_findings(findings: list[Finding]) -> list[Finding]:
    return [f for f in findings if f.stage == "compile"]


def faulting(rerun: dict[str, Any] | None, **opts: Any) -> dict[str, Any]:
    script: dict[str, Any] = {"compile": {"error": IMA, "log": ASYNC_LOG}}
    if rerun is not None:
        script["compile-rerun"] = rerun
    return {"model": token_model(aoti=False), "script": script, "device": "cuda", **opts}


def test_a_cuda_compile_fault_is_rerun_synchronously_and_names_the_kernel(run: Run) -> None:
    said: list[str] = []
    res, findings = run(
        progress=said.append, **faulting({"error": IMA, "log": SYNC_LOG}, probe=False)
    )
    (f,) = compile_findings(findings)
    assert f.code == "AOT501"
    # asynchronous, the error surfaced after the first kernel ended; synchronous, the second
    # kernel's launch never returned: that one is named
    assert "the fault is in Triton kernel triton_per_fused_sum_1: the launch that never " in (
        f.message
    )
    assert "re-run with synchronous launches" in f.message
    assert "--sanitizer re-runs it under compute-sanitizer memcheck" in f.message
    assert any("compiling again with synchronous launches" in line for line in said), said
    assert res["compile"].status is StageStatus.FAILED
    assert {k: res["compile"].env.get(k) for k in launch.SYNC_ENV} == launch.SYNC_ENV
    assert res["custom-ops"].status is StageStatus.SKIPPED  # an inductor kernel, no custom op


def test_a_fault_that_does_not_come_back_says_so(run: Run) -> None:
    _, findings = run(**faulting({"entry": {"size": 1}}, probe=False))  # the re-run compiles
    (f,) = compile_findings(findings)
    assert "a re-run with synchronous launches compiled cleanly: the fault did not reproduce" in (
        f.message
    )
    assert "the fault is in" not in f.message  # the first compile's markers name no kernel


def test_sanitizer_runs_the_compile_again_when_asked(
    run: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tool = tmp_path / "compute-sanitizer"
    tool.write_text(
        f"#!{sys.executable}\n"
        "import subprocess, sys\n"
        "args = sys.argv[1:]\n"
        "at = args.index('--log-file')\n"
        f"open(args[at + 1], 'w').write({MEMCHECK!r})\n"
        "sys.exit(1 if subprocess.call(args[at + 2:]) else 0)\n"
    )
    tool.chmod(tool.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setattr(compile_fault, "find_sanitizer", lambda: str(tool))
    res, findings = run(**faulting({"error": IMA, "log": SYNC_LOG}, probe=False, sanitizer=True))
    (f,) = compile_findings(findings)
    assert (
        "compute-sanitizer memcheck (compile re-run): Invalid __global__ read of size 4 bytes "
        "in triton_per_fused_sum_1"
    ) in f.message
    assert f.evidence[0] == "========= Invalid __global__ read of size 4 bytes"
    assert "Address 0x7f0000004b00 is out of bounds" in " ".join(f.evidence)
    assert "--sanitizer" not in f.message


def test_sanitizer_asked_but_not_installed(run: Run, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(compile_fault, "find_sanitizer", lambda: None)
    _, findings = run(**faulting({"error": IMA, "log": SYNC_LOG}, probe=False, sanitizer=True))
    (f,) = compile_findings(findings)
    assert "compute-sanitizer is not installed" in f.message
    assert "triton_per_fused_sum_1" in f.message  # the synchronous re-run still ran


@pytest.mark.parametrize(
    ("why", "opts", "error"),
    [
        ("cpu", {"device": "cpu"}, IMA),
        ("--no-escalate", {"compile_fault_rerun": False}, IMA),
        (
            "not a fault",
            {},
            {"type": "InductorError", "message": "CppCompileError: x.cpp:1: error: y"},
        ),  # fmt: skip
    ],
)
def test_no_rerun_where_the_rungs_do_not_apply(
    run: Run, why: str, opts: dict[str, Any], error: dict[str, Any]
) -> None:
    said: list[str] = []
    case = faulting({"error": IMA, "log": SYNC_LOG}, probe=False)
    case["script"]["compile"]["error"] = error
    case.update(opts)
    _, findings = run(progress=said.append, **case)
    (f,) = compile_findings(findings)
    assert not any("compiling again" in line for line in said), (why, said)
    assert "re-run" not in f.message, why
    assert "triton_per_fused_sum_1" not in f.message, why


def test_an_already_synchronous_compile_is_not_rerun_without_the_sanitizer(run: Run) -> None:
    said: list[str] = []
    case = faulting({"error": IMA, "log": SYNC_LOG}, probe=False)
    case["script"]["compile"]["log"] = SYNC_LOG
    _, findings = run(progress=said.append, env={"CUDA_LAUNCH_BLOCKING": "1"}, **case)
    (f,) = compile_findings(findings)
    assert not any("compiling again" in line for line in said), said
    assert "the compile already ran with synchronous launches" in f.message
    assert "the fault is in Triton kernel triton_per_fused_sum_1" in f.message
