"""The ladder end to end with a fake worker replaying CUDA-style logs (no torch, no GPU):
misattribution, speculation, skips with reasons, the sanitizer and minifier plumbing, bundles."""

from __future__ import annotations

import dataclasses
import json
import os
import stat
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from aotipre.findings import Finding, StageResult, StageStatus
from aotipre.pt2.spec import MemberInfo, ModelInfo, PackageInfo
from aotipre.runner import prewarm
from aotipre.runner.stages import DynamicOptions, RunCrash, run_dynamic_stages
from aotipre.triage import state as triage_state
from aotipre.triage.escalate import Escalation, TriageOptions, escalate
from tests.fakes.specs import token_model
from tests.triage import cuda_logs as C

FAKE = str(Path(__file__).resolve().parents[1] / "fakes" / "fake_triage_worker.py")
GENERIC_ERROR = {"type": "RuntimeError", "message": C.GENERIC}


def cuda_scenario(**extra: Any) -> dict[str, Any]:
    """TokenModel on CUDA with id 600: the async error blames cuBLAS, the printer the embedding."""
    scenario: dict[str, Any] = {
        "wrapper": C.WRAPPER_CPP,
        "modes": {
            "plain": {"log": C.PLAIN_LOG, "error": GENERIC_ERROR},
            "sync": {"log": C.SYNC_LOG, "error": GENERIC_ERROR},
            "printer-3": {"stdout": C.PRINTER3_STDOUT, "log": C.SYNC_LOG, "error": GENERIC_ERROR},
            "printer-2": {"stdout": C.PRINTER2_STDOUT, "log": C.SYNC_LOG, "error": GENERIC_ERROR},
        },
    }
    scenario.update(extra)
    return scenario


def write_cuda_package(path: Path, model: ModelInfo, wrapper: str = C.WRAPPER_CPP) -> PackageInfo:
    """A minimal archive with the CUDA wrapper.cpp (and the program JSON when the model has one)."""
    members: dict[str, bytes] = {"pkg/archive_format": b"pt2", "pkg/archive_version": b"0"}
    if model.has_exported_program:
        members[f"pkg/models/{model.name}.json"] = json.dumps({"graph_module": {}}).encode()
        members["pkg/data/weights/weight_0"] = b"\x00" * 64
    members[f"pkg/data/aotinductor/{model.name}/c0.wrapper.cpp"] = wrapper.encode()
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return PackageInfo(
        path=str(path),
        kind="both" if model.has_exported_program else "aoti",
        root="pkg",
        archive_format="pt2",
        archive_version="0",
        models=(model,),
        members=tuple(MemberInfo(n, len(d), len(d), 0) for n, d in members.items()),
    )


Crash = Callable[..., tuple[dict[str, StageResult], list[Finding], RunCrash | None]]


def fake_options(tmp_path: Path, scenario: dict[str, Any], **opts: Any) -> DynamicOptions:
    """The dynamic options of a check whose workers are the fake one, playing `scenario`."""
    return DynamicOptions(
        worker_command=(sys.executable, FAKE),
        extra_env={"AOTIPRE_FAKE_TRIAGE": json.dumps(scenario)},
        cache_dir=str(tmp_path / "cache"),
        probe=False,
        timeout_s=30.0,
        **opts,
    )


@pytest.fixture
def crash(tmp_path: Path) -> Crash:
    """crash(scenario, model=..., **options) -> (stages by name, findings, the RunCrash)."""

    def go(
        scenario: dict[str, Any], model: ModelInfo | None = None, **opts: Any
    ) -> tuple[dict[str, StageResult], list[Finding], RunCrash | None]:
        model = model or token_model(device="cuda")
        wrapper = scenario.get("wrapper", C.WRAPPER_CPP)
        package = write_cuda_package(tmp_path / "pkg.pt2", model, wrapper)
        options = fake_options(tmp_path, scenario, **opts)
        seen: list[RunCrash] = []
        results, findings = run_dynamic_stages(
            package, model, None, None, options, on_run_crash=seen.append
        )
        return {r.name: r for r in results}, findings, seen[0] if seen else None

    return go


def by_name(esc: Escalation) -> dict[str, StageResult]:
    return {s.name: s for s in esc.stages}


def codes(findings: list[Finding]) -> list[str]:
    return [f.code for f in findings]


def test_misattributed_cublas_error_is_pinned_to_the_embedding_kernel(crash: Crash) -> None:
    res, findings, run_crash = crash(cuda_scenario())
    assert codes(findings) == ["AOT608"]
    assert run_crash is not None and run_crash.failure.kind == "device_fault"

    esc = escalate(run_crash, TriageOptions())
    st = by_name(esc)
    # the device assertion quotes a check that only the embedding kernel's source holds: the
    # crash itself names the kernel, so the steps that would only name it are skipped
    for sid in ("sync-rerun", "printer-3"):
        assert st[f"triage:{sid}"].status is StageStatus.SKIPPED
        assert "the crash already names the faulting kernel" in st[f"triage:{sid}"].detail
    assert st["triage:printer-2"].status is StageStatus.PASSED
    assert st["triage:printer-2"].env["PYTORCH_NO_CUDA_MEMORY_CACHING"] == "1"
    assert st["triage:printer-2"].command[-1].endswith(".json")
    assert "explain" in st["triage:nan-asserts"].detail
    assert "--sanitizer" in st["triage:sanitizer"].detail
    assert "--minify" in st["triage:minify"].detail

    assert sorted(codes(esc.findings)) == ["AOT801", "AOT802", "AOT803"]
    mis = next(f for f in esc.findings if f.code == "AOT802")
    assert "aoti_torch_cuda_mm_out" in mis.message and C.KERNEL in mis.message
    oob = next(f for f in esc.findings if f.code == "AOT803")
    assert oob.input == "input_ids" and "600" in oob.message and "500" in oob.message

    d = esc.diagnosis
    assert d is not None
    assert d.kernel == C.KERNEL and d.identified_by == "device-assert"
    assert any("Assertion" in line for line in d.evidence)
    assert d.kind == "index_out_of_range"
    assert d.misattributed is not None and "aoti_torch_cuda_mm_out" in d.misattributed
    assert "CUBLAS_STATUS_INTERNAL_ERROR" in (d.first_error or "")
    assert "later symptom" in d.verdict and "input_ids" in d.verdict
    assert d.fused_nodes == ("embedding", "unsqueeze", "mul")
    assert d.aten_ops == ("aten.embedding", "aten.unsqueeze", "aten.mul")
    assert d.kernel_source is not None and "tl.device_assert" in d.kernel_source
    assert d.bound is not None and (d.bound.pointer, d.bound.argument) == ("in_ptr0", "arg3_1")
    shown = {t.name: t for t in d.inputs}
    assert "buf0" not in shown  # an output buffer before launch holds garbage
    assert shown["arg3_1"].input == "input_ids" and shown["arg3_1"].max == 600
    assert esc.timings["done"] >= esc.timings["kernel_named"]
    assert json.dumps(d.to_dict())  # JSON-ready


def test_a_kernel_named_by_the_first_error_starts_printer_2_early(crash: Crash) -> None:
    named = C.PLAIN_LOG.replace("unknown", C.KERNEL)
    scenario = cuda_scenario()
    scenario["modes"]["plain"]["log"] = named
    _, _, run_crash = crash(scenario)
    assert run_crash is not None
    esc = escalate(run_crash, TriageOptions(parallel=3))
    d = esc.diagnosis
    assert d is not None and d.kernel == C.KERNEL
    assert not any("discarded" in n for n in d.notes)
    assert by_name(esc)["triage:printer-2"].status is StageStatus.PASSED


IDS_STATS = {"dtype": "int64", "shape": [2, 5], "stride": [5, 1], "numel": 10, "nan": 0,
             "inf": 0, "min": 3, "max": 600, "mean": 121.5}  # fmt: skip
MASK_STATS = {"dtype": "float32", "shape": [2, 5], "stride": [5, 1], "numel": 10, "nan": 0,
              "inf": 0, "min": 0.0, "max": 1.0, "mean": 0.8}  # fmt: skip


def triage_with_sample(
    crash: Crash, before: str | None = None, stats: dict[str, Any] | None = None
) -> Escalation:
    """The CUDA scenario whose kernel-inputs worker (fake) returns `stats` (default: both
    inputs), with the line `before` put just before the faulting kernel's launch."""
    wrapper = C.WRAPPER_CPP
    if before is not None:
        call = f"call_{C.KERNEL}(arg3_1,"
        wrapper = wrapper.replace(call, f"{before}\n    {call}", 1)
        assert wrapper != C.WRAPPER_CPP
    given = stats if stats is not None else {"args[0]": IDS_STATS, "args[1]": MASK_STATS}
    _, _, run_crash = crash(cuda_scenario(wrapper=wrapper, input_stats={"stats": given}))
    assert run_crash is not None
    return escalate(run_crash, TriageOptions(parallel=3))


def test_kernel_inputs_read_from_the_sample_explain_without_a_recompile_fake(
    crash: Crash,
) -> None:
    """The embedding kernel reads input_ids (arg3_1) and attention_mask (arg4_1) before any
    other call: the kernel-inputs worker (fake) reads them from the sample, 600 is past the 500
    rows, and no printer build runs (none was even started early)."""
    esc = triage_with_sample(crash)
    st = by_name(esc)
    ki = st["triage:kernel-inputs"]
    assert ki.status is StageStatus.PASSED, ki.detail
    assert "input_ids (arg3_1), attention_mask (arg4_1)" in ki.detail
    assert "PYTORCH_NO_CUDA_MEMORY_CACHING" not in ki.env  # a run-time step of its own
    p2 = st["triage:printer-2"]
    assert p2.status is StageStatus.SKIPPED and "already explain" in p2.detail
    assert p2.duration_s == 0.0  # not started early either
    oob = next(f for f in esc.findings if f.code == "AOT803")
    assert oob.input == "input_ids" and "600" in oob.message and "500" in oob.message
    d = esc.diagnosis
    assert d is not None and d.kind == "index_out_of_range"
    shown = {t.name: t for t in d.inputs}
    assert shown["arg3_1"].input == "input_ids" and shown["arg3_1"].max == 600
    assert shown["arg3_1"].device == "cuda" and shown["arg4_1"].mean == 0.8
    assert "stats" in esc.timings


def test_kernel_inputs_that_cannot_be_read_leave_it_to_printer_2_fake(crash: Crash) -> None:
    """The worker returns one of the two tensors: the step is an error with the reason, and the
    level-2 printer build runs as before and explains the fault."""
    esc = triage_with_sample(crash, stats={"args[0]": IDS_STATS})
    st = by_name(esc)
    assert st["triage:kernel-inputs"].status is StageStatus.ERROR
    assert "1 of 2 tensors read" in st["triage:kernel-inputs"].detail
    assert st["triage:printer-2"].status is StageStatus.PASSED
    assert esc.diagnosis is not None and esc.diagnosis.kind == "index_out_of_range"


def test_kernel_inputs_skip_a_kernel_whose_input_an_earlier_call_takes_fake(
    crash: Crash,
) -> None:
    """A call before the kernel takes input_ids (it could write it): what the kernel read is no
    longer the sample's, so only the printer build can tell."""
    esc = triage_with_sample(crash, before="aoti_torch_cuda_fill_(arg3_1, 0);")
    st = by_name(esc)
    ki = st["triage:kernel-inputs"]
    assert ki.status is StageStatus.PASSED, ki.detail
    assert "attention_mask (arg4_1)" in ki.detail and "input_ids" not in ki.detail
    # the mask alone explains nothing: the printer build runs and shows the ids
    assert st["triage:printer-2"].status is StageStatus.PASSED
    assert esc.diagnosis is not None and esc.diagnosis.kind == "index_out_of_range"


@pytest.mark.parametrize(
    "before",
    [
        # the kernel launched twice: which launch faulted is not known
        "call_{kernel}(arg3_1, embed_weight, arg4_1, buf0, 8L, 8L, this->device_idx_, stream, "
        "kernels, this->cubin_dir_);",
        # a custom op through the proxy executor: its tensors go in an array, unseen
        "aoti_torch_proxy_executor_call_function(proxy_executor, 0, 1, int_array_9, 2, "
        "tensor_args_var_0);",
    ],
    ids=["launched twice", "proxy executor first"],
)
def test_kernel_inputs_do_not_apply_when_the_wrapper_cannot_tell_fake(
    crash: Crash, before: str
) -> None:
    esc = triage_with_sample(crash, before=before.format(kernel=C.KERNEL))
    st = by_name(esc)
    ki = st["triage:kernel-inputs"]
    assert ki.status is StageStatus.SKIPPED, ki.detail
    assert "reads no model input straight from the sample" in ki.detail
    assert st["triage:printer-2"].status is StageStatus.PASSED
    assert esc.diagnosis is not None and esc.diagnosis.kind == "index_out_of_range"


def test_a_wrong_early_guess_is_discarded_and_rerun(crash: Crash) -> None:
    other = "triton_poi_fused_add_7"  # a kernel the wrapper does not call: no known producer
    scenario = cuda_scenario()
    scenario["modes"]["plain"]["log"] = C.PLAIN_LOG.replace("unknown", other)
    _, _, run_crash = crash(scenario)
    assert run_crash is not None
    esc = escalate(run_crash, TriageOptions(parallel=3))
    d = esc.diagnosis
    assert d is not None and d.kernel == C.KERNEL
    assert any("discarded" in n and other in n for n in d.notes)
    assert d.kind == "index_out_of_range"
    # an assertion naming a kernel the wrapper never calls is not taken as the crash's answer:
    # the synchronous steps run and the printer names the kernel
    assert d.identified_by == "printer-3"
    st = by_name(esc)
    assert st["triage:sync-rerun"].status is StageStatus.PASSED
    assert st["triage:sync-rerun"].env["CUDA_LAUNCH_BLOCKING"] == "1"
    assert st["triage:printer-3"].status is StageStatus.PASSED
    assert C.KERNEL in st["triage:printer-3"].detail
    assert st["triage:printer-3"].env["PYTORCH_NO_CUDA_MEMORY_CACHING"] == "1"
    # each step ran in a worker of its own, and the report says which
    (sync,), (printer,) = st["triage:sync-rerun"].processes, st["triage:printer-3"].processes
    assert sync.startswith("worker ") and "(pid " in sync and sync != printer


def test_aoti_only_package_says_it_needs_the_exported_program(
    crash: Crash, pkg: Callable[[str], Path]
) -> None:
    model = token_model(device="cuda", ep=False)
    _, _, run_crash = crash(cuda_scenario(), model=model)
    assert run_crash is not None
    esc = escalate(run_crash, TriageOptions())
    st = by_name(esc)
    assert "--exported-program FILE" in st["triage:printer-3"].detail
    assert "AOT806" in codes(esc.findings)
    # without the printer, the assertion's message still points at the one kernel holding it
    d = esc.diagnosis
    assert d is not None and d.kernel == C.KERNEL and d.identified_by == "device-assert"

    with_ep = escalate(run_crash, TriageOptions(exported_program=str(pkg("ep_only"))))
    assert with_ep.diagnosis is not None and with_ep.diagnosis.kernel == C.KERNEL
    assert "AOT806" not in codes(with_ep.findings)


def test_a_crash_that_does_not_reproduce_is_inconclusive(crash: Crash) -> None:
    ima = "Error: CUDA error: an illegal memory access was encountered\n"
    scenario = cuda_scenario()
    scenario["modes"]["plain"] = {"log": ima, "error": GENERIC_ERROR}
    scenario["modes"]["printer-3"] = {
        "stdout": C.PRINTER3_STDOUT + f"[ after_launch: {C.KERNEL} ]\n"
    }
    scenario["modes"]["sync"] = {}
    _, _, run_crash = crash(scenario)
    assert run_crash is not None
    esc = escalate(run_crash, TriageOptions())
    assert "AOT805" in codes(esc.findings)
    f = next(f for f in esc.findings if f.code == "AOT805")
    assert "did not reproduce" in f.message
    assert "did not reproduce" in by_name(esc)["triage:printer-3"].detail


def test_no_escalate_and_non_crashes(crash: Crash) -> None:
    _, _, run_crash = crash(cuda_scenario())
    assert run_crash is not None
    off = escalate(run_crash, TriageOptions(escalate=False))
    assert [(s.name, s.status) for s in off.stages] == [("triage", StageStatus.SKIPPED)]
    assert off.findings == [] and off.diagnosis is None

    check = {
        "type": "RuntimeError",
        "message": "input_handles[0]: unmatched dtype, expected: 4(at::kLong), but got: 6",
    }
    _, findings, none = crash({"modes": {"plain": {"error": check}}})
    assert none is None and codes(findings) == ["AOT201"]


def test_sanitizer_runs_when_asked_and_installed(
    crash: Crash, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tool = tmp_path / "compute-sanitizer"
    report = (
        "========= Invalid __global__ read of size 4 bytes\\n"
        f"=========     at {C.KERNEL}+0x1c0 in /tmp/x.py:24\\n"
        "=========     Address 0x7f0000004b00 is out of bounds\\n"
    )
    tool.write_text(
        f"#!{sys.executable}\n"
        "import os, sys\n"
        "args = sys.argv[1:]\n"
        "log = args[args.index('--log-file') + 1]\n"
        f"open(log, 'w').write('{report}')\n"
        "rest = args[args.index('--log-file') + 2:]\n"
        # like the real tool: the program runs as its child, whose crash becomes an exit code
        "import subprocess\n"
        "sys.exit(1 if subprocess.call(rest) else 0)\n"
    )
    tool.chmod(tool.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setattr(triage_state, "find_sanitizer", lambda: str(tool))
    scenario = cuda_scenario()
    # as on the H100: the synchronous run aborts (c10::AcceleratorError), so under the sanitizer
    # the worker leaves no result and the tool exits 1
    scenario["modes"]["sync"]["crash"] = "SIGABRT"
    _, _, run_crash = crash(scenario)
    assert run_crash is not None
    esc = escalate(run_crash, TriageOptions(sanitizer=True))
    st = by_name(esc)["triage:sanitizer"]
    assert st.status is StageStatus.PASSED
    assert st.command[0] == str(tool) and "memcheck" in st.command
    assert "Invalid __global__ read" in st.detail
    assert "AOT808" in codes(esc.findings)


def cpu_exception_scenario() -> dict[str, Any]:
    error = {"type": "RuntimeError", "message": "Unknown exception"}
    return {
        "modes": {
            "plain": {"log": "Unknown exception occurred.\n", "error": error},
            "printer-3": {
                "stdout": "[ before_launch: aoti_torch_cpu_addmm_out ]\n"
                "[ after_launch: aoti_torch_cpu_addmm_out ]\n[ before_launch: cpp_fused_relu_0 ]\n",
                "log": "Unknown exception occurred.\n",
                "error": error,
            },
            "printer-2": {"error": error},
            "nan-asserts": {"error": error},
        },
        "kernel": 'extern "C" void cpp_fused_relu_0(const float* in_ptr0, float* out_ptr0)\n{\n'
        "    auto tmp0 = in_ptr0[0]; throw 1;\n}\n",
        "minify": {"nodes": [9, 6, 3]},
    }


def test_minifier_and_bundle_for_a_cpu_exception(crash: Crash, tmp_path: Path) -> None:
    seen = tmp_path / "jobs_seen.jsonl"
    scenario = {**cpu_exception_scenario(), "jobs_seen": str(seen)}
    _, findings, run_crash = crash(scenario, model=token_model(device="cpu"))
    assert codes(findings) == ["AOT602"] and run_crash is not None
    assert run_crash.vec_isa is None  # the fake worker's load probes nothing
    bundle = tmp_path / "bundle"
    # the CPU ISAs the check's load probed go to every triage worker (they skip the probe)...
    run_crash = dataclasses.replace(run_crash, vec_isa=("VecAVX512", "VecAVX2"))
    seen.unlink()
    esc = escalate(run_crash, TriageOptions(minify=True, artifacts=str(bundle)))
    jobs = [json.loads(line) for line in seen.read_text().splitlines()]
    assert len(jobs) >= 3 and all(j["vec_isa"] == ["VecAVX512", "VecAVX2"] for j in jobs), jobs
    st = by_name(esc)
    assert "synchronously" in st["triage:sync-rerun"].detail
    assert st["triage:minify"].status is StageStatus.PASSED, st["triage:minify"].detail
    assert "9 -> 3 nodes" in st["triage:minify"].detail
    assert "'Unknown exception'" in st["triage:minify"].detail  # the check_str
    assert st["triage:nan-asserts"].status is StageStatus.PASSED  # nothing explained the fault
    d = esc.diagnosis
    assert d is not None and d.kernel == "cpp_fused_relu_0" and d.kind == "kernel_error"
    assert d.previous_kernel == "aoti_torch_cpu_addmm_out"
    assert d.kernel_source is not None and "throw 1" in d.kernel_source
    assert "eagerly" in d.verdict  # the fake eager step succeeds: the generated code is at fault
    assert "AOT807" in codes(esc.findings)

    out = bundle / "model"
    names = {p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()}
    for expected in (
        "README.md",
        "diagnosis.json",
        "environment.json",
        "commands.sh",
        "run_package.py",
        "package.pt2",
        "inputs.pt",
        "repro.py",
        "repro_exported_program.pt2",
        "steps/printer-3.json",
        "steps/printer-3.run.log",
        "steps/minify.json",
    ):
        assert expected in names, (expected, sorted(names))
    job = json.loads((out / "steps/printer-3.json").read_text())
    assert job["package"] == "package.pt2" and job["workdir"] == "work"
    assert "vec_isa" not in job  # ...but not to the bundle: another host probes its own
    assert job["steps"][0]["op"] == "compile" and job["steps"][0]["out"].startswith("work/")
    assert not any(s["op"] == "save_inputs" for s in job["steps"])
    # triage's workers load with the C++ loader alone (no CPU-ISA probe)
    (load,) = [s for s in job["steps"] if s["op"] == "load"]
    assert load["direct"] is True
    commands = (out / "commands.sh").read_text()
    assert "steps/printer-3.json" in commands and "AOTI_RUNTIME_CHECK_INPUTS=1" in commands
    assert os.access(out / "commands.sh", os.X_OK)
    assert "repro_exported_program.pt2" in (out / "repro.py").read_text()
    assert "cpp_fused_relu_0" in (out / "README.md").read_text()
    assert json.loads((out / "environment.json").read_text())["device"] == "cpu"


def test_api_check_reports_the_diagnosis(pkg: Callable[[str], Path], tmp_path: Path) -> None:
    """aotipre.check on the real embedding_oob package, with the fake worker replaying what the
    real one printed: the report carries the triage stages, the findings and the diagnosis."""
    from aotipre import CheckOptions, check
    from aotipre.report import render_report

    data = Path(__file__).parent / "data" / "cpu_printer2.log"
    error = {
        "type": "RuntimeError",
        "message": "index out of bounds: 0 <= tmp2 < 500L\nException raised from "
        "cpp_fused_embedding_sum_0 at /tmp/k.kernel.cpp:27 (most recent call first):",
    }
    scenario = {
        "modes": {
            "plain": {"error": error},
            "printer-3": {
                "stdout": "[ before_launch: cpp_fused_embedding_sum_0 ]\n",
                "error": error,
            },
            "printer-2": {"stdout": data.read_text(), "error": error},
        },
        "eager": {"error": {"type": "IndexError", "message": "index out of range in self"}},
    }
    dynamic = DynamicOptions(
        worker_command=(sys.executable, FAKE),
        extra_env={"AOTIPRE_FAKE_TRIAGE": json.dumps(scenario)},
        cache_dir=str(tmp_path / "cache"),
        probe=False,
    )
    report = check(
        pkg("embedding_oob"),
        CheckOptions(inputs=str(pkg("embedding_oob_inputs")), dynamic=dynamic),
    )
    assert [d.kernel for d in report.diagnosis] == ["cpp_fused_embedding_sum_0"]
    assert {"AOT602", "AOT801", "AOT803"} <= {f.code for f in report.findings}
    assert any(s.name == "triage:printer-3" for s in report.stages)
    data_out = report.to_dict()
    (diag,) = data_out["diagnosis"]
    assert diag["kernel"] == "cpp_fused_embedding_sum_0"
    assert diag["inputs"][0]["input"] == "ids" and diag["inputs"][0]["max"] == 600
    assert diag["bound"]["upper"] == 500
    assert "cpp_fused_embedding_sum_0(const int64_t* in_ptr0" in diag["kernel_source"]
    assert "models.py" in diag["source_lines"][0]
    table = render_report(report, "table")
    # the kernel's own exception (`Exception raised from cpp_fused_embedding_sum_0`) names it
    assert "diagnosis (model): cpp_fused_embedding_sum_0 (named by first-error)" in table
    assert "ids (arg1_1): int64[2, 5] on cpu, min 124, max 600" in table
    assert "minifier needs eager values" in next(
        s.detail for s in report.stages if s.name == "triage:minify"
    ) or "--minify" in next(s.detail for s in report.stages if s.name == "triage:minify")


def _check_with_triage(tmp_path: Path, scenario: dict[str, Any], **opts: Any) -> Escalation | None:
    """run_dynamic_stages with triage run inside the crash callback, as api.check runs it
    (while the session and the worker it started beside the model's are alive)."""
    model = token_model(device="cuda")
    package = write_cuda_package(tmp_path / "pkg.pt2", model)
    options = fake_options(tmp_path, scenario, **opts)
    escalations: list[Escalation] = []
    run_dynamic_stages(
        package,
        model,
        None,
        None,
        options,
        on_run_crash=lambda c: escalations.append(escalate(c, TriageOptions())),
    )
    return escalations[0] if escalations else None


@pytest.fixture
def room(monkeypatch: pytest.MonkeyPatch) -> Callable[[int], None]:
    """room(n): at most n waiting workers alive (the default is the host's cores // 4, none on
    a 2-core CI machine); 4 unless the test says otherwise."""

    def set_room(n: int) -> None:
        monkeypatch.setattr(prewarm, "MAX_ALIVE", n)

    set_room(4)
    return set_room


def _seen(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


IMA = "Error: CUDA error: an illegal memory access was encountered\n"


def test_the_first_steps_run_in_the_workers_started_beside_the_check(
    tmp_path: Path, room: Callable[[int], None]
) -> None:
    """On CUDA the session starts two workers beside the model's (each waits for a job with
    CUDA_LAUNCH_BLOCKING already in its environment); the crash's first steps, sync-rerun and
    printer-3, hand their jobs to them instead of starting workers; later steps start their
    own."""
    seen = tmp_path / "jobs_seen.jsonl"
    scenario = cuda_scenario(jobs_seen=str(seen))
    scenario["modes"]["plain"] = {"log": IMA, "error": GENERIC_ERROR}  # names no kernel
    esc = _check_with_triage(tmp_path, scenario)
    assert esc is not None
    sync = by_name(esc)["triage:sync-rerun"]
    assert sync.status is StageStatus.PASSED, sync.detail
    assert esc.diagnosis is not None and esc.diagnosis.kernel == C.KERNEL
    assert sync.env["CUDA_LAUNCH_BLOCKING"] == "1"
    assert by_name(esc)["triage:printer-3"].status is StageStatus.PASSED
    lines = _seen(seen)
    prewarm = [line["prewarm_pid"] for line in lines if "prewarm_pid" in line]
    assert len(prewarm) == 2
    jobs = {line["tag"]: line["prewarmed"] for line in lines if "tag" in line}
    warm = sorted(t for t, was in jobs.items() if was)
    assert [t.rsplit("-", 1)[0] for t in warm] == ["printer-3", "sync-rerun"]
    assert len(jobs) > len(warm)  # the model's own worker and later steps started fresh
    (rerun,) = [t for t in warm if t.startswith("sync-rerun")]
    (label,) = sync.processes
    assert label.startswith(f"worker {rerun} (pid ")
    assert label.endswith(", started before the crash)")
    assert int(label.split("pid ")[1].split(",")[0]) in prewarm
    assert not any(_alive(pid) for pid in prewarm)


def test_a_check_that_does_not_crash_stops_the_waiting_worker(
    tmp_path: Path, room: Callable[[int], None], monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = tmp_path / "jobs_seen.jsonl"
    scenario = cuda_scenario(jobs_seen=str(seen))
    scenario["modes"]["plain"] = {}  # the run passes
    started: list[int] = []
    on_start = prewarm.Prewarmed._on_start

    def record(self: prewarm.Prewarmed, pid: int) -> None:
        started.append(pid)
        on_start(self, pid)

    # the pids as aotipre started them: a worker stopped before its first line (a loaded
    # machine) never writes one
    monkeypatch.setattr(prewarm.Prewarmed, "_on_start", record)
    assert _check_with_triage(tmp_path, scenario) is None
    lines = _seen(seen)
    pids = [line["prewarm_pid"] for line in lines if "prewarm_pid" in line]
    assert len(started) == 2 and set(pids) <= set(started)
    assert not any(_alive(pid) for pid in started)
    assert all(line["prewarmed"] is False for line in lines if "tag" in line)  # it ran no job


def test_without_escalation_no_worker_waits(tmp_path: Path, room: Callable[[int], None]) -> None:
    seen = tmp_path / "jobs_seen.jsonl"
    scenario = cuda_scenario(jobs_seen=str(seen))
    scenario["modes"]["plain"] = {"log": IMA, "error": GENERIC_ERROR}
    esc = _check_with_triage(tmp_path, scenario, prewarm_rerun=False)
    assert esc is not None and by_name(esc)["triage:sync-rerun"].status is StageStatus.PASSED
    lines = _seen(seen)
    assert not any("prewarm_pid" in line for line in lines)
    assert not any(line["prewarmed"] for line in lines if "tag" in line)


@pytest.mark.parametrize("alive", [0, 1])
def test_a_small_host_starts_fewer_waiting_workers(
    tmp_path: Path, room: Callable[[int], None], alive: int
) -> None:
    """However many packages run at once, at most MAX_ALIVE workers wait in the process (one
    per four cores): with room for one, one step runs in it and the other starts its own."""
    room(alive)
    seen = tmp_path / "jobs_seen.jsonl"
    scenario = cuda_scenario(jobs_seen=str(seen))
    scenario["modes"]["plain"] = {"log": IMA, "error": GENERIC_ERROR}
    esc = _check_with_triage(tmp_path, scenario)
    assert esc is not None and by_name(esc)["triage:sync-rerun"].status is StageStatus.PASSED
    lines = _seen(seen)
    assert sum("prewarm_pid" in line for line in lines) == alive
    assert sum(bool(line.get("prewarmed")) for line in lines) == alive
    assert prewarm._alive == 0  # every place given back
