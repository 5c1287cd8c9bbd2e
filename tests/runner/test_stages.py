"""Stage orchestration with a fake torch worker: crashes, hangs, retries, findings (no torch)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from aotipre.findings import Finding, Severity, StageResult, StageStatus
from aotipre.findings import codes as codes_mod
from aotipre.foundation.errors import UsageError
from aotipre.pt2.spec import ModelInfo, PackageInfo
from aotipre.runner import cache as cache_mod
from aotipre.runner import launch
from aotipre.runner import stages as stages_mod
from aotipre.runner.stages import DynamicOptions, libstdcxx, parse_device, run_dynamic_stages
from tests.fakes.specs import token_model, write_package

FAKE = str(Path(__file__).resolve().parents[1] / "fakes" / "fake_torch_worker.py")

Run = Callable[..., tuple[dict[str, StageResult], list[Finding]]]


@pytest.fixture
def run(tmp_path: Path) -> Run:
    """run(model=..., script={...}, **options) -> ({stage name: StageResult}, findings)."""

    def go(
        model: ModelInfo | None = None,
        script: dict[str, Any] | None = None,
        package: PackageInfo | None = None,
        progress: Callable[[str], None] | None = None,
        **opts: Any,
    ) -> tuple[dict[str, StageResult], list[Finding]]:
        model = model or token_model()
        package = package or write_package(tmp_path / "pkg.pt2", model)
        options = DynamicOptions(
            worker_command=(sys.executable, FAKE),
            extra_env={"AOTIPRE_FAKE_SCRIPT": json.dumps(script or {}), **opts.pop("env", {})},
            cache_dir=str(tmp_path / "cache"),
            **{"timeout_s": 30.0, **opts},
        )
        results, findings = run_dynamic_stages(package, model, None, None, options, progress)
        assert [r.name for r in results] == list(stages_mod.STAGES)
        return {r.name: r for r in results}, findings

    return go


def codes(findings: list[Finding]) -> list[str]:
    return [f.code for f in findings]


def test_healthy_package_passes_every_stage(run: Run) -> None:
    seen: list[str] = []
    res, findings = run(progress=seen.append)
    # the over-max probes are refused by the runtime check aotipre turns on; a default
    # deployment (the variable unset) runs them: one AOT613 warning, nothing else
    assert [(f.code, f.severity) for f in findings] == [("AOT613", Severity.WARNING)]
    assert "=65 [input_ids dim 0, attention_mask dim 0] (max 64 + 1): ran silently" in (
        findings[0].message
    )
    assert "AOTI_RUNTIME_CHECK_INPUTS=1, which aotipre sets" in findings[0].message
    assert "rejected by the runtime check (opt-in); without it: ran silently" in (
        res["probe"].detail
    )
    assert res["compile"].status is StageStatus.SKIPPED
    assert "AOTI code for cpu" in res["compile"].detail
    for name in ("load", "run", "compare", "probe"):
        assert res[name].status is StageStatus.PASSED, (name, res[name].detail)
    assert "synthesized inputs (seed 0)" in res["run"].detail
    assert "input_ids in [0, 500)" in res["run"].detail
    assert res["run"].env["AOTI_RUNTIME_CHECK_INPUTS"] == "1"
    assert res["run"].command[-1].endswith("job0.json")
    # batch 1..64 and seq 2..128, each at min, max and max+1; then each input laid out
    # non-contiguously: the check refuses 2 sizes and 2 layouts
    assert res["probe"].detail.count("rejected by the runtime check") == 4
    assert (
        "input_ids non-contiguous: rejected by the runtime check (opt-in); without it: ran "
        "silently and returned outputs that differ" in res["probe"].detail
    )
    assert "input_ids with strides (1, 8)" in findings[0].message  # the sample: [8, seq]
    assert "batch (s0)=64" in res["probe"].detail
    assert "model: loading" in seen and "model: probing s1 one past its max" in seen


def test_a_deployment_that_checks_inputs_runs_no_unchecked_twins_fake(run: Run) -> None:
    """Fake worker: --deployment-checks-inputs plans no twin without the runtime check (the
    probe costs less), reports no AOT613, and the probe detail says what the deployment must
    really set; a min the check refuses is still AOT610, worded for such a deployment."""
    seen: list[str] = []
    res, findings = run(progress=seen.append, deployment_checks_inputs=True)
    assert findings == []
    assert not [line for line in seen if "without the runtime check" in line]
    detail = res["probe"].detail
    assert res["probe"].status is StageStatus.PASSED
    assert detail.count("rejected by the runtime check (opt-in)") == 4
    assert "without it" not in detail
    assert "the deployment is described as setting AOTI_RUNTIME_CHECK_INPUTS" in detail
    assert "any value not starting with '0' enables it" in detail
    err = {
        "type": "RuntimeError",
        "message": "input_handles[0]: dim value is too small at 0, expected it to be >= 2, "
        "but got: 1",
    }
    _, findings = run(script={"probe:s0:min": {"error": err}}, deployment_checks_inputs=True)
    (f,) = findings
    assert f.code == "AOT610" and f.severity is Severity.WARNING
    assert "which aotipre sets and so does the deployment" in f.message
    # the default deployment: the twins run and the one AOT613 names the new option in its hint
    _, findings = run()
    (f,) = findings
    assert f.code == "AOT613" and "--deployment-checks-inputs" in (f.hint or "")


def test_run_segfault_is_contained(run: Run) -> None:
    res, findings = run(
        script={"run": {"crash": "SIGSEGV", "log": "Fatal Python error: Segmentation fault\n"}}
    )
    assert codes(findings) == ["AOT604"]
    (f,) = findings
    assert f.severity is Severity.ERROR and f.stage == "run"
    assert "SIGSEGV" in f.message
    assert "Fatal Python error: Segmentation fault" in f.evidence
    assert res["run"].status is StageStatus.FAILED
    assert res["compare"].status is StageStatus.SKIPPED
    assert res["probe"].status is StageStatus.SKIPPED


def test_weights_on_disk_crash_names_the_cause(run: Run) -> None:
    model = token_model(ep=False, weights_on_disk=True)
    res, findings = run(model=model, script={"run": {"crash": "SIGSEGV"}})
    assert codes(findings) == ["AOT607"]
    assert "weights on disk" in findings[0].message
    assert "weights_config.json" in findings[0].message


def test_abort_names_the_kernel(run: Run) -> None:
    log = (
        "terminate called after throwing an instance of 'c10::Error'\n"
        "  what():  index out of bounds: 0 <= tmp2 < 500L\n"
        "Exception raised from cpp_fused_embedding_sum_0 at /tmp/k.cpp:27 (most recent call "
        "first):\n"
    )
    res, findings = run(script={"run": {"crash": "SIGABRT", "log": log}})
    assert codes(findings) == ["AOT603"]
    assert "cpp_fused_embedding_sum_0" in findings[0].message
    assert "index out of bounds: 0 <= tmp2 < 500L" in findings[0].message


def test_hang_is_stopped_by_the_per_step_watchdog(run: Run) -> None:
    res, findings = run(script={"run": {"hang": True}}, timeout_s=1.0, probe=False)
    assert codes(findings) == ["AOT606"]
    assert findings[0].category.value == "timeout"
    assert "Timeout (0:00:01)!" in findings[0].evidence
    assert res["run"].duration_s < 10


def test_what_a_default_deployment_does_with_a_refused_size(run: Run) -> None:
    # the twin of s0's over-max probe (run with AOTI_RUNTIME_CHECK_INPUTS unset) crashes, the
    # twin of s1's is refused even so (an always-on check): only the crash is reported
    script = {
        "probe:s0:over:unchecked": {"crash": "SIGSEGV"},
        "probe:s1:over:unchecked": {"entry": {"outcome": "rejected"}},
    }
    res, findings = run(script=script)
    assert [(f.code, f.severity) for f in findings] == [("AOT613", Severity.WARNING)]
    assert "(max 64 + 1): crashed (SIGSEGV)" in findings[0].message
    assert "(s1)" not in findings[0].message
    assert "without it: rejected as well" in res["probe"].detail
    assert res["probe"].status is StageStatus.PASSED  # the package's own verdict stands
    # probing off: no twin either
    _, findings = run(probe=False)
    assert findings == []


def test_hang_past_the_watchdog_is_stopped_by_the_backstop(
    run: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(launch, "STARTUP_SLACK_S", 0.5)
    model = token_model(ep=False)
    res, findings = run(
        model=model, script={"run": {"hang_hard": True}}, timeout_s=1.0, probe=False
    )
    assert codes(findings) == ["AOT606"]
    assert res["run"].status is StageStatus.FAILED


def test_crashed_probe_moves_the_rest_to_a_fresh_worker(run: Run) -> None:
    res, findings = run(script={"probe:s0:max": {"crash": "SIGSEGV", "once": True}})
    assert codes(findings) == ["AOT610", "AOT613"]
    f = findings[0]
    assert f.stage == "probe" and f.input == "input_ids" and f.dim == 0
    assert "crashed (SIGSEGV)" in f.message
    assert res["probe"].status is StageStatus.FAILED
    # the probes after the crash still ran, in a second worker, and the report says which
    assert "seq (s1)=128 [input_ids dim 1, attention_mask dim 1]: ok" in res["probe"].detail
    assert res["run"].status is StageStatus.PASSED
    first, second = res["probe"].processes
    assert first.startswith("worker job0 (pid ") and second.startswith("worker job1 (pid ")
    assert res["load"].processes == res["run"].processes == res["compare"].processes == (first,)
    assert res["compile"].processes == ()
    assert StageResult.from_dict(res["probe"].to_dict()).processes == (first, second)


def test_over_max_accepted_and_crashing(run: Run) -> None:
    script = {
        "probe:s0:over": {"entry": {"outcome": "accepted", "aoti_error": None}},
        "probe:s1:over": {"crash": "SIGSEGV", "once": True},
    }
    res, findings = run(script=script)
    assert codes(findings) == ["AOT611", "AOT612", "AOT613"]
    accepted, crashed, layouts = findings
    assert "=65" not in layouts.message and "mask with strides" in layouts.message
    assert accepted.severity is Severity.WARNING and accepted.actual == 65
    assert "one above the maximum 64" in accepted.message
    assert crashed.severity is Severity.ERROR and "crashed (SIGSEGV)" in crashed.message


def test_layout_not_refused_by_the_check_is_an_error_fake(run: Run) -> None:
    """Fake worker: a non-contiguous input that the checked model runs into other outputs, or
    crashes on, instead of refusing it (AOT614); a default deployment that returns the same
    outputs for it is no AOT613 case."""
    differ = {"index": 0, "kind": "tensor", "numel": 8, "mismatches": 3, "max_abs": 2.0}
    same = {"index": 0, "kind": "tensor", "numel": 8, "mismatches": 0, "max_abs": 0.0}
    script = {
        "probe:input0:layout": {
            "entry": {
                "outcome": "accepted",
                "aoti_error": None,
                "layout_compare": {"structure": None, "outputs": [differ]},
            }
        },
        "probe:input1:layout": {"crash": "SIGSEGV", "once": True},
        "probe:input0:layout:unchecked": {
            "entry": {"layout_compare": {"structure": None, "outputs": [same]}}
        },
    }
    res, findings = run(script=script)
    assert codes(findings) == ["AOT614", "AOT614", "AOT613"]
    wrong, crashed, unchecked = findings
    assert wrong.severity is Severity.ERROR and wrong.input == "input_ids"
    assert "ran under the runtime check and returned outputs that differ" in wrong.message
    assert "output 0: 3 of 8 values, max abs diff 2" in wrong.message
    assert crashed.input == "attention_mask" and "crashed (SIGSEGV)" in crashed.message
    assert res["probe"].status is StageStatus.FAILED
    # sizes only: input_ids's twin returned the same outputs, attention_mask's twin never ran
    # a checked refusal
    assert "strides" not in unchecked.message
    assert "input_ids non-contiguous: accepted, outputs differ" in res["probe"].detail


def test_over_max_rejected_by_a_kernel_check_is_unclean(run: Run) -> None:
    err = {
        "type": "RuntimeError",
        "message": "index out of bounds: 0 <= tmp2 < 500L\n"
        "Exception raised from cpp_fused_embedding_0 at k.cpp:1",
    }
    res, findings = run(script={"probe:s1:over": {"entry": {"aoti_error": err}}})
    assert codes(findings) == ["AOT612", "AOT613"]  # AOT613: s0's over, refused cleanly
    assert "(s1)" not in findings[1].message
    assert findings[0].severity is Severity.WARNING


def test_min_rejected_by_runtime_check_is_a_contract_warning(run: Run) -> None:
    err = {
        "type": "RuntimeError",
        "message": "input_handles[0]: dim value is too small at 0, expected it to be >= 2, "
        "but got: 1",
    }
    res, findings = run(script={"probe:s0:min": {"error": err}})
    assert codes(findings) == ["AOT610", "AOT613"]
    assert "(the declared minimum): ran silently" in findings[1].message
    f = findings[0]
    assert f.severity is Severity.WARNING
    assert "specializes dynamic sizes 0 and 1 away" in f.message
    assert res["probe"].status is StageStatus.PASSED


def test_accuracy_mismatch(run: Run) -> None:
    out = {
        "index": 0, "kind": "tensor", "dtype": "float32", "eager_dtype": "float32",
        "shape": [3, 4], "eager_shape": [3, 4], "numel": 12, "rtol": 1e-4, "atol": 1e-5,
        "mismatches": 12, "max_abs": 1.0, "max_rel": 16.6, "worst_index": [2, 2],
        "worst_aoti": 3.4171, "worst_eager": 4.4171,
    }  # fmt: skip
    res, findings = run(script={"compare": {"entry": {"outputs": [out]}}}, probe=False)
    assert codes(findings) == ["AOT701"]
    f = findings[0]
    assert "12 of 12 elements differ beyond rtol=0.0001, atol=1e-05" in f.message
    assert "max abs error 1" in f.message and "max rel error 16.6" in f.message
    assert (f.expected, f.actual) == (4.4171, 3.4171)
    assert res["compare"].status is StageStatus.FAILED


def test_output_structure_mismatch(run: Run) -> None:
    entry = {"structure": "the compiled model returns 2 output(s), the ExportedProgram 1"}
    res, findings = run(script={"compare": {"entry": entry}}, probe=False)
    assert codes(findings) == ["AOT703"]


def test_nan_in_outputs(run: Run) -> None:
    # fake worker records: a run whose output holds NaN and Inf, with and without a reference
    nan_out = {"kind": "tensor", "dtype": "float32", "shape": [2, 4], "nan": 3, "inf": 1}
    # the fake eager run's output is finite: both are the compile's, errors
    res, findings = run(script={"run": {"entry": {"outputs": [nan_out]}}}, probe=False)
    assert codes(findings) == ["AOT702", "AOT702"]
    assert all(f.severity is Severity.ERROR for f in findings)
    assert "3 NaN where the ExportedProgram run eagerly is finite" in findings[0].message
    # no reference output: NaN is an error still, Inf a warning
    res, findings = run(
        script={"run": {"entry": {"outputs": [nan_out]}}, "eager": {"entry": {"outputs": []}}},
        probe=False,
    )
    assert codes(findings) == ["AOT702", "AOT705"]
    assert findings[0].severity is Severity.ERROR
    assert "3 NaN" in findings[0].message and "no reference" in findings[0].message
    assert findings[1].severity is Severity.WARNING
    # the eager program produces them too: NaN is still an error (the model's), Inf is info
    res, findings = run(
        script={
            "run": {"entry": {"outputs": [nan_out]}},
            "eager": {"entry": {"outputs": [nan_out]}},
        },
        probe=False,
    )
    assert codes(findings) == ["AOT702", "AOT705"]
    assert findings[0].severity is Severity.ERROR
    assert "the model, not the compile" in findings[0].message
    assert findings[1].severity is Severity.INFO


def test_inf_where_the_reference_is_finite_is_an_error(run: Run) -> None:
    inf_out = {"kind": "tensor", "dtype": "float32", "shape": [2, 4], "nan": 0, "inf": 2}
    finite = {"kind": "tensor", "dtype": "float32", "shape": [2, 4], "nan": 0, "inf": 0}
    res, findings = run(
        script={
            "run": {"entry": {"outputs": [inf_out]}},
            "eager": {"entry": {"outputs": [finite]}},
        },
        probe=False,
    )
    assert codes(findings) == ["AOT702"]
    assert findings[0].severity is Severity.ERROR
    assert "where the ExportedProgram run eagerly holds 0" in findings[0].message


def test_runtime_check_on_torch_211_maps_back_to_the_input_name(run: Run) -> None:
    err = {
        "type": "RuntimeError",
        "message": "run_func_(container_handle_, input_handles.data(), input_handles.size(), "
        "output_handles.data(), output_handles.size(), cuda_stream_handle, "
        "proxy_executor_handle_) API call failed at /pytorch/torch/csrc/inductor/aoti_runner/"
        "model_container_runner.cpp, line 147",
    }
    log = "Error: input_handles[1]: unmatched dtype, expected: 6(at::kFloat), but got: 7\n"
    res, findings = run(script={"run": {"error": err, "log": log}})
    assert codes(findings) == ["AOT201"]
    f = findings[0]
    assert (f.input, f.position, f.expected, f.actual, f.stage) == (
        "attention_mask",
        1,
        "float32",
        "float64",
        "run",
    )
    assert res["compare"].status is StageStatus.SKIPPED
    assert res["probe"].status is StageStatus.SKIPPED


def test_failed_run_says_whether_eager_fails_too(run: Run) -> None:
    err = {
        "type": "RuntimeError",
        "message": "index out of bounds: 0 <= tmp2 < 500L\n"
        "Exception raised from cpp_fused_embedding_0 at k.cpp:1",
    }
    eager = {
        "error": {"type": "IndexError", "message": "index out of range in self"},
        "entry": {"phase": "call"},
    }
    res, findings = run(script={"run": {"error": err}, "eager": eager})
    assert codes(findings) == ["AOT602"]
    assert "in kernel cpp_fused_embedding_0" in findings[0].message
    assert "fails on these inputs too (IndexError" in findings[0].message
    assert "fails on these inputs too" in res["compare"].detail


@pytest.mark.parametrize(
    "message,code",
    [
        ("Incorrect device passed to aoti_runner_cpu", "AOT511"),
        ("AssertionError: Torch not compiled with CUDA enabled", "AOT512"),
        ("Failed to find a generated cpp file or so file for model 'model' in the zip archive. "
         "Available models: other", "AOT513"),
        ("boom", "AOT510"),
    ],
)  # fmt: skip
def test_load_failures(run: Run, message: str, code: str) -> None:
    res, findings = run(script={"load": {"error": {"type": "RuntimeError", "message": message}}})
    assert codes(findings) == [code]
    assert res["load"].status is StageStatus.FAILED
    for name in ("run", "compare", "probe"):
        assert res[name].status is StageStatus.SKIPPED
        assert "load stage did not succeed" in res[name].detail


def test_a_gpu_index_the_host_lacks_is_aot511_fake(run: Run) -> None:
    # the H200's words (torch 2.11, --device cuda:1 on one GPU: docs/evidence/h200-s9-aot511.log;
    # the real test is tests/gate/test_codes_real.py::test_aot511_a_device_index_this_host_...)
    message = (
        "create_func_( &container_handle_, num_models, device_str.c_str(), cubin_dir.empty() ? "
        "nullptr : cubin_dir.c_str()) API call failed at /pytorch/torch/csrc/inductor/"
        "aoti_runner/model_container_runner.cpp, line 121"
    )
    script = {"load": {"error": {"type": "RuntimeError", "message": message},
                       "log": "Error: CUDA error: invalid device ordinal\n"}}  # fmt: skip
    res, findings = run(model=token_model(device="cuda"), script=script, device="cuda:1")
    assert codes(findings) == ["AOT511"]
    (f,) = findings
    assert "on cuda:1 was refused: Error: CUDA error: invalid device ordinal" in f.message
    assert (f.expected, f.actual) == ("cuda", "cuda:1")
    assert f.hint is not None and "this host has no GPU cuda:1" in f.hint
    assert res["run"].status is StageStatus.SKIPPED
    # the code's own hint for the other refusal (a cpu .so asked for a device)
    _, cpu = run(script={"load": {"error": {"type": "RuntimeError",
                                            "message": "Incorrect device passed to aoti_runner_cpu"}}})  # fmt: skip
    assert [f.hint for f in cpu] == [codes_mod.get("AOT511").hint]


def test_load_crash_fixed_by_system_libstdcxx(run: Run, monkeypatch: pytest.MonkeyPatch) -> None:
    if "libstdc++" in os.environ.get("LD_PRELOAD", ""):
        pytest.skip("this environment preloads libstdc++ already (scripts/gpu_tests.sh does)")
    monkeypatch.setattr(libstdcxx, "DIAGNOSED", {})
    lib = libstdcxx.find_system_libstdcxx()
    if lib is None:
        pytest.skip("no system libstdc++ on this host")
    res, findings = run(script={"load": {"crash": "SIGSEGV", "once": True}})
    assert codes(findings) == ["AOT515", "AOT613"]
    assert findings[0].category.value == "environment"
    assert "not a model bug" in findings[0].message
    assert res["load"].status is StageStatus.FAILED
    assert res["run"].status is StageStatus.PASSED
    assert res["run"].env["LD_PRELOAD"].endswith(lib)


def test_preload_diagnosis_is_reused_for_the_next_model(
    run: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    if "libstdc++" in os.environ.get("LD_PRELOAD", ""):
        pytest.skip("this environment preloads libstdc++ already (scripts/gpu_tests.sh does)")
    if libstdcxx.find_system_libstdcxx() is None:
        pytest.skip("no system libstdc++ on this host")
    monkeypatch.setattr(libstdcxx, "DIAGNOSED", {})
    run(script={"load": {"crash": "SIGSEGV", "once": True}}, probe=False)
    res, findings = run(probe=False)  # no crash scripted: it starts preloaded
    assert codes(findings) == ["AOT515"]
    assert "diagnosed on an earlier model" in findings[0].message
    assert res["run"].env["LD_PRELOAD"] == libstdcxx.find_system_libstdcxx()
    assert res["run"].command[-1].endswith("job0.json")  # one worker, no crash this time


def test_load_crash_not_fixed_by_preload(run: Run, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(libstdcxx, "DIAGNOSED", {})
    if libstdcxx.find_system_libstdcxx() is None:
        monkeypatch.setattr(libstdcxx, "find_system_libstdcxx", lambda: None)
    res, findings = run(script={"load": {"crash": "SIGSEGV"}})
    assert codes(findings) == ["AOT514"]
    assert res["run"].status is StageStatus.SKIPPED


def test_worker_that_dies_without_a_signal_is_an_error_not_a_finding(run: Run) -> None:
    res, findings = run(script={"run": {"exit": 3, "log": "ImportError: no torch\n"}})
    assert findings == []
    assert res["run"].status is StageStatus.ERROR
    assert "exited with code 3" in res["run"].detail


def test_inputs_that_cannot_be_loaded_are_an_error(run: Run) -> None:
    err = {"type": "InputsFailed", "message": "UnpicklingError: Weights only load failed"}
    res, findings = run(script={"run": {"error": err}})
    assert findings == []
    assert res["run"].status is StageStatus.ERROR
    assert "could not be loaded" in res["run"].detail


def test_compile_then_cache_hit(run: Run, tmp_path: Path) -> None:
    model = token_model(aoti=False)
    res, findings = run(model=model, probe=False)
    assert findings == []
    assert res["compile"].status is StageStatus.PASSED
    assert "compiled into the cache" in res["compile"].detail
    entries = [p for p in (tmp_path / "cache").iterdir()]
    assert len(entries) == 1 and not entries[0].name.startswith(".tmp-")
    assert (entries[0] / "model.pt2").read_bytes() == b"PK fake package"
    res, findings = run(model=model, probe=False)
    assert res["compile"].status is StageStatus.PASSED
    assert "compile cache hit" in res["compile"].detail
    assert res["compile"].command == ()
    res, _ = run(model=model, probe=False, use_cache=False)
    assert "without the cache" in res["compile"].detail


def test_compile_failure_quotes_the_compiler(run: Run, tmp_path: Path) -> None:
    model = token_model(aoti=False)
    err = {
        "type": "InductorError",
        "message": "CppCompileError: C++ compile error\nOutput:\n/tmp/c.cpp:3:1: error: "
        "expected ';' before '}' token\n",
    }
    res, findings = run(model=model, script={"compile": {"error": err}})
    assert codes(findings) == ["AOT542"]  # InductorError's message names CppCompileError
    assert findings[0].evidence[0] == "/tmp/c.cpp:3:1: error: expected ';' before '}' token"
    assert "the generated C++ does not compile: c.cpp:3:1: error: expected ';'" in (
        findings[0].message
    )
    for name in ("load", "run", "compare", "probe"):
        assert res[name].status is StageStatus.SKIPPED
    assert list((tmp_path / "cache").iterdir()) == []  # the half-written entry is gone


def test_a_compile_killed_by_sigkill_says_what_sends_it(run: Run) -> None:
    # SIGKILL that aotipre did not send (its own kill is a timeout): the OOM killer's signal
    model = token_model(aoti=False)
    _, findings = run(model=model, script={"compile": {"crash": "SIGKILL"}}, use_cache=False)
    assert codes(findings) == ["AOT502"]
    assert "killed by SIGKILL (SIGKILL is what the out-of-memory killer sends)" in (
        findings[0].message
    )


@pytest.mark.parametrize("crash", [None, "SIGSEGV"])
def test_compile_past_the_watchdog_is_a_timeout_even_if_the_dump_crashes(
    run: Run, crash: str | None
) -> None:
    # measured on the real worker: a 1 s compile limit under load, `Timeout (0:00:01)!` and
    # then SIGSEGV while faulthandler dumped the busy threads (1 run in 3); was AOT502
    model = token_model(aoti=False)
    step: dict[str, Any] = {"log": "Timeout (0:00:01)!\nThread 0x1 (most recent call first):\n"}
    step.update({"crash": crash} if crash else {"exit": 1})
    res, findings = run(model=model, script={"compile": step}, compile_timeout_s=1.0)
    assert codes(findings) == ["AOT503"]
    assert "did not finish within 1 s" in findings[0].message


def test_a_compile_that_fills_the_disk_is_the_environments_fault(
    run: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    # measured: a 40 MiB TMPDIR ends a real CPU compile with g++'s `cannot write PCH file`
    # (tests/gate/test_codes_real.py runs it for real); not the model's compile error (AOT501)
    model = token_model(aoti=False)
    err = {"type": "InductorError", "message": "CppCompileError: C++ compile error\nOutput:\n"
           "/x/c_shim_cpu.h:189:1: fatal error: cannot write PCH file\n"}  # fmt: skip
    monkeypatch.setattr(cache_mod, "free_bytes", lambda path: 3 * 1024 * 1024)
    res, findings = run(model=model, script={"compile": {"error": err}}, use_cache=False)
    assert [(f.code, f.severity.value) for f in findings] == [("AOT409", "warning")]
    assert "the disk filled during the compile (cannot write PCH file; 3 MiB free" in (
        findings[0].message
    )
    assert res["compile"].status is StageStatus.ERROR
    # the same message with room left: the compiler's own failure, as before
    monkeypatch.setattr(cache_mod, "free_bytes", lambda path: 10 * 1024**3)
    _, findings = run(model=model, script={"compile": {"error": err}}, use_cache=False)
    assert [f.code for f in findings] == ["AOT542"]
    # the OS's own ENOSPC (the cache entry's write) is the disk whatever is free afterwards
    enospc = {"type": "OSError", "message": "[Errno 28] No space left on device: '/c/model.pt2'"}
    _, findings = run(model=model, script={"compile": {"error": enospc}}, use_cache=False)
    assert [f.code for f in findings] == ["AOT409"]


def test_recompile_and_device_choice(run: Run) -> None:
    res, _ = run(recompile=True, probe=False)
    assert res["compile"].status is StageStatus.PASSED
    assert "of model.pt2 on cpu" in res["load"].detail  # the freshly compiled package
    res, findings = run(device="cuda:1", probe=False)  # a cpu package, an EP: compile for cuda
    assert res["compile"].status is StageStatus.PASSED
    assert "on cuda:1" in res["load"].detail


def test_no_contract_cannot_run(run: Run) -> None:
    from dataclasses import replace

    model = replace(token_model(ep=False), inputs=(), contract_source="none")
    res, findings = run(model=model)
    assert findings == []
    assert all(r.status is StageStatus.ERROR for r in res.values())
    assert "no inputs to run with" in res["run"].detail


def test_parse_device() -> None:
    assert parse_device("cpu") == ("cpu", -1)
    assert parse_device("cuda") == ("cuda", -1)
    assert parse_device("CUDA:1") == ("cuda", 1)
    for bad in ("cpu:0", "cuda:x", "tpu", ""):
        with pytest.raises(UsageError):
            parse_device(bad)


def test_workdir_is_removed(run: Run, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    os.makedirs(tmp_path / "tmp")
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)
    run(probe=False)
    assert os.listdir(tmp_path / "tmp") == []


def test_relative_package_path_is_made_absolute(
    run: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = token_model()
    write_package(tmp_path / "rel.pt2", model)
    monkeypatch.chdir(tmp_path)
    package = write_package(Path("rel.pt2"), model)
    res, findings = run(model=model, package=package, probe=False)
    assert findings == [] and res["load"].status is StageStatus.PASSED


def test_cuda_stop_and_teardown_crash_leave_eager_to_a_fresh_worker(run: Run) -> None:
    cuda_err = {"type": "RuntimeError", "message": "CUDA error: device-side assert triggered"}
    script = {
        "run": {"error": cuda_err},
        "__stop_after__": "run",
        "__teardown__": "SIGABRT",
        "eager": {"error": cuda_err, "entry": {"phase": "call"}},
    }
    res, findings = run(script=script)
    assert codes(findings) == ["AOT608"]
    assert "fails on these inputs too (RuntimeError: CUDA error" in findings[0].message
    assert res["compare"].status is StageStatus.SKIPPED


def test_the_parent_never_imports_torch(tmp_path: Path) -> None:
    code = f"""
import sys, json
from pathlib import Path
from aotipre.runner.stages import DynamicOptions, run_dynamic_stages
from tests.fakes.specs import token_model, write_package
model = token_model()
package = write_package(Path({str(tmp_path)!r}) / "p.pt2", model)
options = DynamicOptions(worker_command=(sys.executable, {FAKE!r}), use_cache=False)
results, findings = run_dynamic_stages(package, model, None, None, options)
core = ("load", "run", "perf", "compare", "probe")
assert [r.status.value for r in results if r.name in core] == ["passed"] * 5, results
print("torch" in sys.modules)
"""
    repo = Path(__file__).resolve().parents[2]
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=repo, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


TOO_LARGE = {
    "type": "RuntimeError",
    "message": "input_handles[0]: dim value is too large at 0, expected to be <= 64, but got: 65",
}
STRIDE = {
    "type": "RuntimeError",
    "message": "input_handles[1]: unmatched stride value at 0, expected: 8, but got: 1",
}


def test_what_the_unchecked_twins_did_fake(run: Run) -> None:
    """Fake worker: each twin's outcome in the probe detail and in the one AOT613 -- NaN/Inf
    counted, a twin the check-less copy refuses too left out, a crash with its evidence, a twin
    whose worker failed not known."""
    nan = {"kind": "tensor", "dtype": "float32", "shape": [65, 4], "nan": 2, "inf": 1}
    script = {
        "probe:s0:over:unchecked": {"entry": {"outputs": [nan]}},
        "probe:s1:over:unchecked": {"entry": {"outcome": "rejected"}},
        "probe:input0:layout:unchecked": {"crash": "SIGSEGV", "log": "Segmentation fault\n"},
    }
    res, findings = run(script=script)
    detail = res["probe"].detail
    assert (
        "=65 [input_ids dim 0, attention_mask dim 0]: rejected by the runtime check "
        "(opt-in); without it: ran silently (3 output values NaN/Inf)" in detail
    )
    assert (
        "=129 [input_ids dim 1, attention_mask dim 1]: rejected by the runtime check "
        "(opt-in); without it: rejected as well" in detail
    )
    assert (
        "input_ids non-contiguous: rejected by the runtime check (opt-in); without it: "
        "crashed (SIGSEGV)" in detail
    )
    (f,) = findings
    assert f.code == "AOT613" and f.severity is Severity.WARNING
    assert "refused 3 probe input(s)" in f.message and "=129" not in f.message
    assert f.expected == "s0 in [1, 64]; contiguous inputs"
    assert f.actual == (
        "s0=65: ran silently (3 output values NaN/Inf); input_ids strides (1, 8): crashed "
        "(SIGSEGV); attention_mask strides (1, 8): ran silently and returned outputs that "
        "differ from the contiguous input's (output 0: 8 of 8 values, max abs diff 1.5)"
    )
    assert "Outputs for sizes outside the compiled range" in f.message
    assert "pass contiguous tensors" in f.message
    # a twin whose worker could not tell: not known, and no AOT613 entry for it
    res, findings = run(script={"probe:s0:over:unchecked": {"exit": 3}})
    assert "without it: not known" in res["probe"].detail
    assert "s0=65" not in next(f for f in findings if f.code == "AOT613").actual


def test_refusals_reported_as_step_errors_are_refusals_fake(run: Run) -> None:
    """Fake worker: on torch 2.11 CUDA the runtime check's refusal is a step error, not an ok
    step with outcome `rejected`; it reads the same. Layouts only: the AOT613 says nothing of
    sizes."""
    script = {
        "probe:s0:over": {"error": TOO_LARGE},
        "probe:input1:layout": {"error": STRIDE},
        "probe:s0:over:unchecked": {"entry": {"outcome": "rejected"}},
        "probe:s1:over:unchecked": {"entry": {"outcome": "rejected"}},
        "probe:input0:layout:unchecked": {"entry": {"outcome": "rejected"}},
    }
    res, findings = run(script=script)
    detail = res["probe"].detail
    assert "(max 64 + 1)" not in detail  # the label in the detail is the short one
    assert detail.count("rejected by the runtime check (opt-in)") == 4
    assert res["probe"].status is StageStatus.PASSED
    (f,) = findings
    assert f.code == "AOT613" and "refused 1 probe input(s)" in f.message
    assert f.expected == "contiguous inputs"
    assert "Outputs for sizes" not in f.message and "pass contiguous tensors" in f.message
    # a layout the checked model fails on with another error than the check's: AOT614
    other = {"type": "RuntimeError", "message": "something else went wrong"}
    res, findings = run(script={"probe:input0:layout": {"entry": {"aoti_error": other}}})
    (bad,) = [f for f in findings if f.code == "AOT614"]
    assert "failed: RuntimeError: something else went wrong instead of being refused" in bad.message
    assert res["probe"].status is StageStatus.FAILED


def test_an_offset_input_that_fails_or_differs_is_aot616_fake(run: Run) -> None:
    """Fake worker: the input one element into its storage (`buf[1:]`) returning other outputs
    than the aligned one is an error; refused by an alignment assert (GPU code compiled with
    torch 2.15's alignment_asserts_inputs: every deployment refuses it) a warning; the same
    outputs are fine. No real package is known to compute wrong on an offset input (CPU code
    reads it as it is; CUDA code of 2.11-2.15 copies it): test_contract_items_real.py runs the
    real case."""
    res, findings = run()
    assert "input_ids at storage offset 1: same outputs as aligned" in res["probe"].detail
    assert "AOT616" not in codes(findings)
    differ = {"index": 0, "kind": "tensor", "numel": 8, "mismatches": 3, "max_abs": 2.0}
    wrong = {"entry": {"outcome": "accepted", "layout_compare": {"outputs": [differ]}}}
    res, findings = run(script={"probe:input0:offset": wrong})
    (f,) = [f for f in findings if f.code == "AOT616"]
    assert f.severity is Severity.ERROR and f.input == "input_ids"
    assert "differ from the aligned input's (output 0: 3 of 8 values" in f.message
    assert res["probe"].status is StageStatus.FAILED
    refused = {  # torch 2.15's assert_alignment, aoti_runtime/utils.h
        "type": "RuntimeError",
        "message": "run_func_( container_handle_, ...) API call failed at "
        "aoti_runner/model_container_runner.cpp, line 155\nError in op: input\nExpect the "
        "tensor to be 16 bytes aligned. Fail due to storage_offset=1 itemsize=4",
    }
    res, findings = run(script={"probe:input0:offset": {"error": refused}})
    (f,) = [f for f in findings if f.code == "AOT616"]
    assert f.severity is Severity.WARNING and "alignment_asserts_inputs" in f.message
    _, findings = run(script={"probe:input0:offset": {"crash": "SIGSEGV"}})
    (f,) = [f for f in findings if f.code == "AOT616"]
    assert f.severity is Severity.ERROR and "crashed (SIGSEGV)" in f.message
    other = {"type": "RuntimeError", "message": "CUDA error: misaligned address"}
    _, findings = run(script={"probe:input0:offset": {"error": other}})
    (f,) = [f for f in findings if f.code == "AOT616"]
    assert f.severity is Severity.ERROR and "alignment_asserts_inputs" not in f.message


def test_how_layout_outputs_differ() -> None:
    from aotipre.runner.stages.probe import layout_difference

    assert layout_difference(None) == "outputs that could not be compared"
    assert layout_difference({"structure": "2 outputs, 1"}) == (
        "differently structured outputs (2 outputs, 1)"
    )
    same = {"index": 0, "kind": "tensor", "mismatches": 0, "numel": 4}
    assert layout_difference({"outputs": [same]}) == ""
    value = {"index": 1, "kind": "value", "equal": False, "aoti": "3", "eager": "4"}
    shape = {"index": 2, "structure": True, "dtype": "float32", "shape": [2]}
    nomax = {"index": 3, "kind": "tensor", "mismatches": 2, "numel": 4, "max_abs": None}
    assert layout_difference({"outputs": [same, value, shape, nomax]}) == (
        "outputs that differ from the contiguous input's (output 1: 3 instead of 4; output 2: "
        "float32[2]; output 3: 2 of 4 values)"
    )


def test_device_index_outputs_on_another_gpu_are_aot529_fake(
    run: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    """AOT529 with the fake worker on a pretended two-GPU host: the package loaded with
    device_index=1 put its outputs on cuda:0, then failed to load there at all. (torch 2.11 to
    2.14 load and run on cuda:1 correctly; no two-GPU host was lent for a real run.)"""
    from aotipre.runner.stages import device_index

    monkeypatch.setattr(device_index, "gpu_count", lambda: 2)
    model = token_model(device="cuda")
    on_0 = {"entry": {"outputs": [{"kind": "tensor", "dtype": "float32", "device": "cuda:0"}]}}
    res, findings = run(model=model, script={"index_run": on_0}, probe=False)
    (f,) = [f for f in findings if f.code == "AOT529"]
    assert f.message == "loaded with device_index=1, the outputs live on cuda:0"
    assert f.expected == "cuda:1" and res["device-index"].status is StageStatus.FAILED
    err = {"error": {"type": "RuntimeError", "message": "invalid device"}}
    res, findings = run(model=model, script={"index_run": err}, probe=False)
    (f,) = [f for f in findings if f.code == "AOT529"]
    assert "device_index=1) failed: RuntimeError: invalid device" in f.message
    on_1 = {"entry": {"outputs": [{"kind": "tensor", "dtype": "float32", "device": "cuda:1"}]}}
    res, findings = run(model=model, script={"index_run": on_1}, probe=False)
    assert "AOT529" not in codes(findings)
    assert res["device-index"].status is StageStatus.PASSED


def test_a_load_that_maps_none_of_the_packages_code_is_aot532_fake(run: Run) -> None:
    # no torch loader is known to return a model without mapping the package's .so (the real
    # check reads /proc/self/maps: tests/runner/test_load_proof_real.py shows it naming the
    # .so); the record of such a load, as the worker writes it, is an error
    res, findings = run(script={"load": {"entry": {"mapped": []}}})
    assert "AOT532" in codes(findings)
    assert "not mapped" in res["load"].detail
    _, mapped = run(script={"load": {"entry": {"mapped": ["/tmp/x/abc.wrapper.so"]}}})
    assert "AOT532" not in codes(mapped)


def test_an_unreadable_weights_file_is_the_stage_error_with_why(run: Run, tmp_path: Path) -> None:
    """Through the library (the CLI refuses the file before): the stage says why, in its
    detail, and takes no time."""
    res, _ = run(weights=str(tmp_path / "missing.pt"))
    weights = res["weights"]
    assert weights.status is StageStatus.ERROR
    assert "missing.pt" in weights.detail
    assert weights.duration_s == 0.0
