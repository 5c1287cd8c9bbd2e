"""On a GPU: the C++ harness on a CUDA package, the device index, and a user Triton kernel that
faults while aoti_compile_and_package autotunes it (named from the worker's launch markers).
Packages are built with plain torch in fresh processes."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from aotipre.checks.custom_ops import Registration
from aotipre.cpp import harness as cpp
from aotipre.doctor.canary import WorkerRun, run_worker_job
from aotipre.runner.stages import DynamicOptions
from aotipre.runner.user_kernels import faulting_launch

pytestmark = pytest.mark.gpu

BUILD_CUDA = """
import sys, torch
class M(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(16, 8)
    def forward(self, x):
        return torch.relu(self.linear(x)) + 1
torch.manual_seed(0)
x = torch.randn(4, 16, device="cuda")
ep = torch.export.export(M().cuda().eval(), (x,))
torch._inductor.aoti_compile_and_package(ep, package_path=sys.argv[1] + "/cuda.pt2")
torch.save(((x.cpu(),), {}), sys.argv[1] + "/cuda_inputs.pt")
print(torch.cuda.device_count())
"""

PROBE_OPS = """
import torch
import triton
import triton.language as tl
from torch.library import triton_op, wrap_triton


@triton.autotune(
    configs=[triton.Config({"BLOCK": 64}), triton.Config({"BLOCK": 128})], key=["n"]
)
@triton.jit
def bad_double_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    # no mask, offsets scaled far past the end of x: an illegal memory access
    x = tl.load(x_ptr + offs.to(tl.int64) * 2147483647)
    tl.store(out_ptr + offs, x * 2, mask=offs < n)


@triton_op("probe::bad_double", mutates_args={})
def bad_double(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    n = x.numel()
    wrap_triton(bad_double_kernel)[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, out, n)
    return out
"""

EXPORT_PROBE = """
import sys, torch
sys.path.insert(0, sys.argv[1])
import probe_ops  # registers probe::bad_double
class M(torch.nn.Module):
    def forward(self, x):
        return torch.ops.probe.bad_double(x) + 1
x = torch.randn(1024, device="cuda")
ep = torch.export.export(M(), (x,))
torch.export.save(ep, sys.argv[1] + "/probe_ep.pt2")
"""


def fresh(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=1200
    )


@pytest.fixture(scope="module")
def cuda_pkg(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int]:
    out = tmp_path_factory.mktemp("cuda")
    proc = fresh(BUILD_CUDA, str(out))
    assert proc.returncode == 0, proc.stderr[-4000:]
    return out, int(proc.stdout.strip().splitlines()[-1])


def worker(
    tmp: Path, steps: list[dict[str, Any]], job: dict[str, Any], device: str, **opts: Any
) -> WorkerRun:
    options = DynamicOptions(cache_dir=str(tmp / "cache"), timeout_s=600.0, **opts)
    return run_worker_job(steps, options, str(tmp), tag="gpu", device=device, job=job)


def test_cpp_harness_runs_a_cuda_package(cuda_pkg: tuple[Path, int], tmp_path: Path) -> None:
    out, gpus = cuda_pkg
    package = str(out / "cuda.pt2")
    flat = str(tmp_path / "flat.pt")
    common: dict[str, Any] = {"package": package, "model": "model", "inputs": flat}
    loaders = cpp.run_step("loaders", mode="loaders", threads=4, **common)
    steps = [
        {"id": "load", "op": "load"},
        {"id": "run", "op": "run", "save": "aoti.pt"},
        cpp.build_step(cpp.cache_root(str(tmp_path / "cache"), True, str(tmp_path))),
        cpp.inputs_step(flat),
        cpp.run_step("cpp_run", mode="run", outputs=str(tmp_path / "cpp.pt"), **common),
        cpp.compare_step(str(tmp_path / "cpp.pt"), "aoti.pt", "cpp_run"),
        loaders,
        cpp.serial_retry(loaders),
        cpp.run_step("runners", mode="runners", threads=4, runners=2, iterations=3, **common),
        # the workaround for torch #194128: 8 CUDA loaders constructed one at a time, run at once
        {**cpp.run_step("serial", mode="loaders", threads=8, **common), "serial_construct": True},
    ]
    if gpus >= 2:
        steps.append(cpp.run_step("index1", mode="run", device_index=1, **common))
    job = {
        "package": package,
        "source_package": package,
        "inputs": {"kind": "file", "path": str(out / "cuda_inputs.pt")},
    }
    run = worker(tmp_path, steps, job, "cuda")
    retry = cpp.HarnessRun.from_entry(run.steps.get(cpp.serial_id("loaders")) or {}, "loaders")
    for sid in ("cpp_run", "loaders", "runners", "serial") + (("index1",) if gpus >= 2 else ()):
        entry = run.ok(sid)
        assert entry is not None, run.why_not(sid)
        h = cpp.HarnessRun.from_entry(entry)
        assert h is not None
        race = (run.ok("cpp_build") or {}).get("loader_race")
        if sid == "loaders" and race and cpp.hit_the_known_race(h, retry):
            continue  # torch #194128 hit this run (what the concurrency stage reports as AOT526)
        assert h.ok, (sid, h.signal, h.phase, (h.result or {}).get("per_thread"), h.stderr_tail)
    single = cpp.HarnessRun.from_entry(run.ok("cpp_run") or {})
    assert single is not None and single.result is not None
    assert single.result["outputs"][0]["device"] == "cuda:0"
    compared = run.ok("cpp_compare")
    assert compared is not None and all(o["mismatches"] == 0 for o in compared["outputs"])
    if gpus >= 2:
        index1 = cpp.HarnessRun.from_entry(run.ok("index1") or {})
        assert index1 is not None and index1.result is not None
        assert index1.result["outputs"][0]["device"] == "cuda:1"
    else:
        pytest.skip(f"device_index=1 needs two GPUs; this host has {gpus} (rest passed)")


def test_a_user_triton_kernel_faulting_at_compile_is_named(tmp_path: Path) -> None:
    (tmp_path / "probe_ops.py").write_text(textwrap.dedent(PROBE_OPS))
    proc = fresh(EXPORT_PROBE, str(tmp_path))
    assert proc.returncode == 0, proc.stderr[-4000:]
    # plain torch: without the module the ExportedProgram cannot even be deserialized
    bare = fresh(f"import torch; torch.export.load({str(tmp_path / 'probe_ep.pt2')!r})")
    assert bare.returncode != 0
    program = str(tmp_path / "probe_ep.pt2")
    reg = Registration(imports=("probe_ops",), import_path=(str(tmp_path),))
    env = {**reg.env(), "CUDA_LAUNCH_BLOCKING": "1"}
    steps = [{"id": "compile", "op": "compile", "out": str(tmp_path / "out" / "model.pt2")}]
    job = {
        "package": program,
        "source_package": program,
        "inputs": {"kind": "member", "member": "probe_ep/data/sample_inputs/model.pt"},
    }
    run = worker(tmp_path, steps, job, "cuda", extra_env=env)
    assert run.ok("compile") is None, "the out-of-bounds kernel compiled cleanly"
    entry = run.steps.get("compile") or {}
    log = entry.get("log") or run.died_log
    assert entry.get("user_kernels") in (None, {"bad_double_kernel": "probe::bad_double"})
    launch = faulting_launch(log)
    assert launch is not None, log[-4000:]
    assert launch.kernel.startswith("bad_double_kernel") and launch.op == "probe::bad_double"


def test_check_with_cpp_on_a_cuda_package(cuda_pkg: tuple[Path, int], tmp_path: Path) -> None:
    """cpp-load, concurrency and device-index through `check` (device-index needs 2 GPUs)."""
    from aotipre import api

    out, gpus = cuda_pkg
    options = api.CheckOptions(
        inputs=str(out / "cuda_inputs.pt"),
        dynamic=DynamicOptions(cache_dir=str(tmp_path / "cache"), probe=False),
        cpp=True,
    )
    report = api.check(out / "cuda.pt2", options)
    by = {s.name: (s.status.value, s.detail) for s in report.stages}
    assert by["cpp-load"][0] == "passed", by
    assert by["concurrency"][0] == "passed", (by, report.findings)  # a race hit: a warning
    if gpus >= 2:
        assert by["device-index"] == ("passed", "loaded and ran on cuda:1; outputs on cuda:1"), by
    else:
        assert (
            by["device-index"][0] == "skipped" and f"this host has {gpus}" in by["device-index"][1]
        )
    warnings = {f.code for f in report.findings if f.severity.value != "info"}
    # AOT202 as a warning: the sample inputs are CPU tensors, which aotipre's runs move to cuda
    assert warnings <= {"AOT528", "AOT515", "AOT202", "AOT526"}, report.findings
    assert all(f.severity.value == "warning" for f in report.findings if f.code == "AOT526")
    assert all(f.severity.value == "warning" for f in report.findings if f.code == "AOT202")


def test_check_names_the_faulting_user_kernel(tmp_path: Path) -> None:
    """`check` on the ExportedProgram with --import: the compile finding names the kernel."""
    from aotipre import api

    (tmp_path / "probe_ops.py").write_text(textwrap.dedent(PROBE_OPS))
    proc = fresh(EXPORT_PROBE, str(tmp_path))
    assert proc.returncode == 0, proc.stderr[-4000:]
    reg = Registration(imports=("probe_ops",), import_path=(str(tmp_path),))
    options = api.CheckOptions(
        dynamic=DynamicOptions(cache_dir=str(tmp_path / "cache"), device="cuda", probe=False),
        registration=reg,
    )
    report = api.check(tmp_path / "probe_ep.pt2", options)
    compile_findings = [f for f in report.findings if f.stage == "compile"]
    assert compile_findings, report.findings
    message = compile_findings[0].message
    assert "user Triton kernel bad_double_kernel" in message, message
    assert "launched by probe::bad_double" in message, message
    by = {s.name: s for s in report.stages}
    assert by["compile"].env.get("CUDA_LAUNCH_BLOCKING") == "1"
    # custom ops already compile synchronously: no re-run without --sanitizer, and it says how
    assert "the compile already ran with synchronous launches" in message, message
    assert "--sanitizer re-runs it under compute-sanitizer memcheck" in message, message


def test_sanitizer_reruns_a_faulting_compile_and_names_the_kernel(tmp_path: Path) -> None:
    """`check --sanitizer` on the same ExportedProgram: the faulted compile runs again under
    compute-sanitizer memcheck, whose record (an invalid global read in the user's kernel) is
    in the compile finding."""
    from aotipre import api
    from aotipre.runner.sanitizer import find_sanitizer
    from aotipre.triage.escalate import TriageOptions

    if find_sanitizer() is None:
        pytest.skip("compute-sanitizer is not installed on this GPU host")
    (tmp_path / "probe_ops.py").write_text(textwrap.dedent(PROBE_OPS))
    proc = fresh(EXPORT_PROBE, str(tmp_path))
    assert proc.returncode == 0, proc.stderr[-4000:]
    reg = Registration(imports=("probe_ops",), import_path=(str(tmp_path),))
    options = api.CheckOptions(
        dynamic=DynamicOptions(cache_dir=str(tmp_path / "cache"), device="cuda", probe=False),
        registration=reg,
        triage=TriageOptions(sanitizer=True),
    )
    report = api.check(tmp_path / "probe_ep.pt2", options)
    (finding,) = [f for f in report.findings if f.stage == "compile"]
    message = finding.message
    assert "user Triton kernel bad_double_kernel" in message, message
    assert "compute-sanitizer memcheck (compile re-run): Invalid __global__ read" in message, (
        message,
        finding.evidence,
    )
    assert "bad_double_kernel" in message.split("compute-sanitizer memcheck")[1], message
    assert finding.evidence[0].startswith("========= Invalid __global__ read"), finding.evidence
