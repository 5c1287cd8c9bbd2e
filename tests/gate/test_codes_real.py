"""Finding codes of the dynamic stages, each emitted by a real code path: real packages, real
inputs, the real worker (slow). Where the failure needs a broken package or host, the package
is a real one damaged in one named way (its .so replaced, its compiled code removed, its
metadata changed) or the worker is really killed by a signal while it runs the model.

Ground truth for each case is what plain torch does (measured with torch 2.13 CPU, and checked
again in `test_plain_torch_agrees` where it is cheap): e.g. a padded attention_mask is refused by
the compiled guard `expected size 3==3, stride 16==10 at dim=0` when
AOTI_RUNTIME_CHECK_INPUTS=1, and silently read with the wrong stride without it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from aotipre import CheckOptions, check
from aotipre.environment.host import detect_local
from aotipre.findings import Finding, Severity, StageStatus, Verdict
from aotipre.runner.stages import DynamicOptions
from aotipre.runner.stages.libstdcxx import find_system_libstdcxx
from aotipre.triage.escalate import TriageOptions
from tests.conftest import tmpfs
from tests.gate.conftest import Dynamic, plain_torch, rewrite, without_facts

pytestmark = pytest.mark.slow

Gate = Callable[[str], Path]


def codes(findings: list[Finding]) -> list[str]:
    return [f.code for f in without_facts(findings)]


def build_so(tmp: Path, c_source: str) -> bytes:
    src = tmp / "lib.c"
    src.write_text(c_source)
    out = tmp / "lib.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(out), str(src)], check=True, timeout=120)
    return out.read_bytes()


# -- compile (AOT501-503): ep_only.pt2 has no AOTI code, so aotipre compiles it


def test_aot501_compile_failed(dynamic: Dynamic, tmp_path: Path) -> None:
    # an inductor config of the wrong type: plain torch 2.13 raises InductorError wrapping a
    # bare `TypeError: '<' not supported between instances of 'str' and 'int'` (measured),
    # none of the compile classes (AOT540-AOT546): said so, never a guessed class
    configs = {"cpp.threads": "abc"}
    res, findings = dynamic("ep_only", use_cache=False, inductor_configs=configs)
    assert codes(findings) == ["AOT501"]
    assert "TypeError: '<' not supported" in findings[0].message
    assert "not one of the compile classes aotipre knows" in findings[0].message
    assert res["compile"].status is StageStatus.FAILED
    assert res["load"].status is StageStatus.SKIPPED


def test_aot502_compiler_process_crashed(dynamic: Dynamic, tmp_path: Path) -> None:
    # a C++ compiler that kills the process that started it (the worker) with SIGSEGV when it
    # compiles (torch's `--version` probe of it gets g++'s answer): the real worker dies by a
    # signal in the middle of its compile step, in the C++ build, which the finding says
    cxx = tmp_path / "crashing-g++"
    cxx.write_text(
        '#!/bin/sh\ncase " $* " in *" -c "*|*" -o "*) kill -SEGV $PPID; sleep 5; exit 1;; esac\n'
        'exec g++ "$@"\n'
    )
    cxx.chmod(0o755)
    res, findings = dynamic("ep_only", use_cache=False, extra_env={"CXX": str(cxx)})
    assert codes(findings) == ["AOT502"]
    assert "killed by SIGSEGV (while " in findings[0].message
    assert "C++ build, peak memory " in findings[0].message
    assert res["compile"].status is StageStatus.FAILED


def test_aot503_compile_timeout(dynamic: Dynamic) -> None:
    res, findings = dynamic("ep_only", use_cache=False, compile_timeout_s=1.0)
    assert codes(findings) == ["AOT503"]
    assert "did not finish within 1 s" in findings[0].message
    assert res["compile"].status is StageStatus.FAILED


def test_a_compile_filling_the_disk_is_not_the_models_fault(tmp_path: Path, gate: Gate) -> None:
    # `aotipre check` as a user runs it, with TMPDIR (where the worker and inductor compile) on
    # a 40 MiB tmpfs: g++ cannot write its precompiled header; was AOT501, blaming the model
    with tmpfs(tmp_path / "small", "size=40m") as small:
        proc = subprocess.run(
            [sys.executable, "-m", "aotipre", "check", str(gate("ep_only.pt2")),
             "--compile-at-deploy", "--no-probe", "--no-cache", "-f", "json"],
            capture_output=True, text=True, timeout=900, env={**os.environ, "TMPDIR": str(small)},
        )  # fmt: skip
    data = json.loads(proc.stdout)
    compile_stage = next(s for s in data["stages"] if s["name"] == "compile")
    found = [(f["code"], f["severity"]) for f in data["findings"]]
    assert proc.returncode == 2 and compile_stage["status"] == "error", (found, compile_stage)
    assert ("AOT409", "warning") in found and "AOT501" not in dict(found)
    assert "the disk filled during the compile" in next(
        f["message"] for f in data["findings"] if f["code"] == "AOT409"
    )


# -- load (AOT510-517)


def test_aot510_so_that_is_not_a_shared_library(
    dynamic: Dynamic, gate: Gate, tmp_path: Path
) -> None:
    # plain torch: `RuntimeError: Error in dlopen: ...wrapper.so: invalid ELF header`
    pkg = rewrite(gate("aoti.pt2"), tmp_path / "aoti.pt2",
                  lambda n, d: b"junk" * 256 if n.endswith(".so") else d)  # fmt: skip
    res, findings = dynamic(str(pkg), "aoti_inputs")
    assert codes(findings) == ["AOT510"]
    assert "invalid ELF header" in findings[0].message
    assert res["load"].status is StageStatus.FAILED and res["run"].status is StageStatus.SKIPPED


def test_a_cpu_package_asked_for_cuda_is_refused_before_loading(dynamic: Dynamic) -> None:
    # plain torch loads the cpu .so with device cuda:0 and fails (`Incorrect device passed to
    # aoti_runner_cpu`, the loader's AOT511); aotipre's device gate says why before any worker
    # starts: the AOTI code is for cpu only and there is no ExportedProgram to compile (AOT406)
    res, findings = dynamic("aoti", "aoti_inputs", device="cuda:0")
    assert codes(findings) == ["AOT406"]
    assert (findings[0].expected, findings[0].actual) == ("cpu", "cuda")
    assert res["load"].status is StageStatus.SKIPPED and "cpu only" in res["load"].detail


def test_a_cuda_package_on_a_host_without_a_gpu_is_refused_before_loading(
    dynamic: Dynamic, gate: Gate, tmp_path: Path
) -> None:
    # aoti.pt2 with its metadata saying cuda; plain torch: `Torch not compiled with CUDA enabled`
    # (the loader's AOT512); on a host without an NVIDIA driver the device gate says so first
    def cuda(name: str, data: bytes) -> bytes:
        if name.endswith("wrapper_metadata.json"):
            return json.dumps({**json.loads(data), "AOTI_DEVICE_KEY": "cuda"}).encode()
        return data

    if "cuda" in detect_local().device_types:
        pytest.skip("this host has an NVIDIA GPU: the gate's AOT401 does not apply")
    res, findings = dynamic(
        str(rewrite(gate("aoti.pt2"), tmp_path / "aoti.pt2", cuda)), "aoti_inputs"
    )
    assert codes(findings) == ["AOT401"]
    assert "no CUDA GPU" in findings[0].message
    assert res["load"].status is StageStatus.SKIPPED


def test_aot512_a_cuda_package_and_a_cpu_only_torch_on_a_gpu_host(
    dynamic: Dynamic, gate: Gate, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The same package with its metadata saying cuda, on a host whose nvidia-smi reports a GPU
    # (a stand-in script on PATH: this VM has none), with this CPU-only torch. Plain torch, in
    # a fresh process: `AssertionError: Torch not compiled with CUDA enabled`. aotipre's device
    # gate knows it from the installed torch's build before starting any worker.
    def cuda(name: str, data: bytes) -> bytes:
        if name.endswith("wrapper_metadata.json"):
            return json.dumps({**json.loads(data), "AOTI_DEVICE_KEY": "cuda"}).encode()
        return data

    import torch

    if torch.cuda.is_available() or torch.version.cuda is not None:
        pytest.skip("needs a CPU-only torch")
    package = rewrite(gate("aoti.pt2"), tmp_path / "aoti.pt2", cuda)
    plain = subprocess.run(
        [sys.executable, "-c", "import sys, torch; torch._inductor.aoti_load_package(sys.argv[1])",
         str(package)],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert plain.returncode != 0 and "Torch not compiled with CUDA enabled" in plain.stderr
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    smi = bin_dir / "nvidia-smi"
    smi.write_text("#!/bin/sh\necho 9.0\n")
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    assert "cuda" in detect_local().device_types
    res, findings = dynamic(str(package), "aoti_inputs")
    assert codes(findings) == ["AOT512"], findings
    assert f"the installed torch {torch.__version__} is a CPU-only build" in findings[0].message
    assert "nothing was run" in findings[0].message
    assert res["run"].status is StageStatus.SKIPPED


def test_aot513_no_compiled_code_for_the_model(
    dynamic: Dynamic, gate: Gate, tmp_path: Path
) -> None:
    # the model's .so, wrapper.cpp and kernel.cpp removed; plain torch: `Failed to find a
    # generated cpp file or so file for model 'model' in the zip archive.`
    gone = (".so", "wrapper.cpp", "kernel.cpp")
    pkg = rewrite(gate("aoti.pt2"), tmp_path / "aoti.pt2",
                  lambda n, d: None if n.endswith(gone) else d)  # fmt: skip
    res, findings = dynamic(str(pkg), "aoti_inputs")
    assert codes(findings) == ["AOT513"]
    assert "Failed to find a generated cpp file or so file for model 'model'" in findings[0].message


def test_aot514_loading_crashes(dynamic: Dynamic, gate: Gate, tmp_path: Path) -> None:
    # the package's .so crashes as soon as it is mapped (a constructor that segfaults): the
    # loader dies by SIGSEGV, and again with the system libstdc++ preloaded; a process that
    # already preloads it (LD_PRELOAD for the whole run) has nothing to retry with
    so = build_so(tmp_path, "#include <signal.h>\n"
                  "__attribute__((constructor)) static void boom(void) { raise(SIGSEGV); }\n")  # fmt: skip
    pkg = rewrite(gate("aoti.pt2"), tmp_path / "pkg" / "aoti.pt2",
                  lambda n, d: so if n.endswith(".so") else d)  # fmt: skip
    res, findings = dynamic(str(pkg), "aoti_inputs")
    assert codes(findings) == ["AOT514"]
    assert "killed by SIGSEGV while loading" in findings[0].message
    lib = find_system_libstdcxx()
    retried = lib is not None and lib not in os.environ.get("LD_PRELOAD", "")
    said = "preloading the system libstdc++ did not help" in findings[0].message
    assert said == retried, (lib, os.environ.get("LD_PRELOAD"))
    assert res["load"].status is StageStatus.FAILED


def test_aot516_load_timeout(dynamic: Dynamic) -> None:
    # loading a package that load_package loads (an ExportedProgram beside the AOTI code) takes
    # seconds here: torch's CPU-ISA probe, which no record of this host answers; a 1 s limit
    # stops it (a package the C++ loader alone loads is loaded at once)
    res, findings = dynamic("both", "aoti_inputs", timeout_s=1.0)
    assert codes(findings) == ["AOT516"]
    assert res["load"].status is StageStatus.FAILED


def test_aot517_exported_program_this_torch_cannot_load(
    dynamic: Dynamic, gate: Gate, tmp_path: Path
) -> None:
    # both.pt2 whose graph calls an operator no library registers (as a custom op would be
    # when its library is not loaded); plain torch: torch.export.load raises
    def unknown_op(name: str, data: bytes) -> bytes:
        if name.endswith("models/model.json"):
            return data.replace(
                b"torch.ops.aten.embedding.default", b"torch.ops.nosuchlib.embed.default"
            )
        return data

    pkg = rewrite(gate("both.pt2"), tmp_path / "both.pt2", unknown_op)
    res, findings = dynamic(str(pkg), "aoti_inputs", probe=False)
    # load_pt2 deserializes the program too and fails; torch's load_package falls back to the
    # C++ loader ("Loading outdated pt2 file"), which the load stage reports (AOT531)
    assert codes(findings) == ["AOT531", "AOT517"]
    assert "nosuchlib" in findings[0].message and findings[0].stage == "load"
    assert findings[1].severity is Severity.WARNING
    assert res["run"].status is StageStatus.PASSED  # the AOTI code itself runs
    assert res["compare"].status is StageStatus.SKIPPED


# -- run (AOT601-606)


GUARD_SAYS = (
    "import json, sys, torch\n"
    "m = torch._inductor.aoti_load_package(sys.argv[1])\n"
    "args, kwargs = torch.load(sys.argv[2])\n"
    "try:\n"
    "    m(*args, **kwargs)\n"
    "    print(json.dumps(None))\n"
    "except Exception as exc:\n"
    "    print(json.dumps(str(exc).splitlines()[0]))\n"
)
"""What plain torch with AOTI_RUNTIME_CHECK_INPUTS=1 raises for the inputs (None: it runs them)."""


def test_aot601_size_stride_guard(dynamic: Dynamic, gate: Gate) -> None:
    # derived.pt2 computes y's rows as 2 * x's; pair_off gives x [3, 4] and y [7, 4]. torch 2.13
    # compiles a size/stride guard (assert_size_stride, on under AOTI_RUNTIME_CHECK_INPUTS as in
    # the run stage) that refuses y: `expected size 7==6, stride 4==4 at dim=0`. torch 2.11's
    # compiled code has none and plain torch runs it: then the run stage has no AOT601 to report
    # (tests/gate/test_boundaries_run.py::test_derived_dims_at_their_edges says what it has).
    # A sample laid out otherwise than compiled no longer reaches this guard: the checked run gets
    # the compiled layout (AOT307 comes from the sample-layout step instead).
    said = plain_torch(
        GUARD_SAYS,
        str(gate("derived.pt2")),
        str(gate("pair_off")),
        env={"AOTI_RUNTIME_CHECK_INPUTS": "1"},
    )
    res, findings = dynamic("derived", "pair_off", probe=False)
    if said is None:
        assert "AOT601" not in codes(findings) and res["run"].status is StageStatus.PASSED
        return
    assert "expected size 7==6, stride 4==4 at dim=0" in said  # the ground truth
    assert codes(findings) == ["AOT601"]
    f = findings[0]
    assert f.stage == "run" and "dim 0 has size 7, expected 6" in f.message
    assert (f.dim, f.expected, f.actual) == (
        0,
        [{"size": 6, "stride": 4}],
        [{"size": 7, "stride": 4}],
    )
    assert any(said in e for e in f.evidence), f.evidence
    assert res["run"].status is StageStatus.FAILED


def worker_pids() -> list[int]:
    """This process's children running aotipre's torch worker."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == os.getpid() and b"runner/worker/__main__.py" in cmdline:
            out.append(int(entry))
    return out


def kill_worker_while_running(sig: int) -> Callable[[str], None]:
    """A progress callback that sends `sig` to the worker once it starts running the model."""

    def on_progress(message: str) -> None:
        if message.endswith(": running"):

            def later() -> None:
                time.sleep(1.0)  # inside the run: the model loops until it is stopped
                for pid in worker_pids():
                    os.kill(pid, sig)

            threading.Thread(target=later, daemon=True).start()

    return on_progress


@pytest.mark.parametrize(
    "sig, code",
    [(signal.SIGABRT, "AOT603"), (signal.SIGSEGV, "AOT604"), (signal.SIGKILL, "AOT605")],
)
def test_aot603_aot604_aot605_worker_dies_while_running(
    gate_compiled: Gate, gate_cache: Path, sig: int, code: str
) -> None:
    # the worker process really dies by the signal in the middle of the model's run (as with
    # an abort in a kernel, a memory fault, the out-of-memory killer); the canary is off: the
    # host is not at fault and need not be asked
    opts = CheckOptions(
        inputs=str(gate_compiled("forever_inputs")),
        dynamic=DynamicOptions(cache_dir=str(gate_cache), timeout_s=300.0),
        progress=kill_worker_while_running(sig),
        triage=TriageOptions(escalate=False),
        canary=False,
    )
    report = check(gate_compiled("forever.pt2"), opts)
    assert [f.code for f in report.findings if f.stage == "run"] == [code]
    (died,) = [f for f in report.findings if f.code == code]
    assert signal.Signals(sig).name in died.message
    assert report.verdict is Verdict.FAIL


LOAD_SECONDS = """\
import json, sys, time, torch
started = time.perf_counter()
torch._inductor.aoti_load_package(sys.argv[1])
print(json.dumps(time.perf_counter() - started))
"""


def test_aot606_run_timeout(dynamic: Dynamic, gate_compiled: Gate) -> None:
    # the model loops 10**12 times: it never finishes. The step limit must leave the load room:
    # seconds here, but 36 s on the GPU test machine, whose fresh process pays torch's CPU-ISA
    # probe; so the limit is taken from this host's own load of the package, probe included,
    # plus 5 s (aotipre's workers skip the probe, so the load inside the check takes less than
    # that load alone). The run step spins until the limit: every second of it costs CPU
    load_s = plain_torch(LOAD_SECONDS, str(gate_compiled("forever.pt2")))
    limit = float(round(load_s + 5))
    res, findings = dynamic("forever", "forever_inputs", timeout_s=limit)
    assert codes(findings) == ["AOT606"]
    assert f"did not finish within {limit:g} s" in findings[0].message
    assert res["load"].status is StageStatus.PASSED and res["run"].status is StageStatus.FAILED


# -- probes (AOT610-612)


def test_aot610_declared_minimum_refused_by_the_compiled_code(
    dynamic: Dynamic, gate: Gate, plain_compiled_refuses: Callable[..., list[bool]]
) -> None:
    # ep_only.pt2 declares batch >= 1; the code torch 2.13 compiles from it checks >= 2 (AOTI
    # specializes sizes 0 and 1): batch 1 is refused under AOTI_RUNTIME_CHECK_INPUTS=1. The code
    # torch 2.11 compiles keeps >= 1: then nothing fails at the declared minimum
    res, findings = dynamic("ep_only")
    if not plain_compiled_refuses(gate("ep_only.pt2"), gate("mlp_b1"))[0]:
        # AOT613: without the check (a default deployment) the over-max sizes run
        assert [(f.code, f.severity) for f in findings] == [("AOT613", Severity.WARNING)]
        assert res["probe"].status is StageStatus.PASSED
        return
    # AOT613: without the check (a default deployment) batch 1 and the over-max sizes run
    assert [(f.code, f.severity) for f in findings] == [
        ("AOT610", Severity.WARNING),
        ("AOT613", Severity.WARNING),
    ]
    f = findings[0]
    assert (f.input, f.dim) == ("x", 0)
    assert "AOTInductor specializes dynamic sizes 0 and 1 away" in f.message
    assert res["probe"].status is StageStatus.PASSED  # a warning does not fail the stage


def test_aot611_over_max_accepted(dynamic: Dynamic) -> None:
    # the ExportedProgram says seq <= 64, the AOTI code checks <= 128: seq 65 runs
    res, findings = dynamic("wider_aoti", "aoti_inputs")
    # AOT613: batch 65, refused under the runtime check, runs without it (not seq: accepted)
    assert codes(findings) == ["AOT611", "AOT613"]
    assert "ran silently" in findings[1].message and "seq" not in findings[1].message
    f = findings[0]
    assert (f.input, f.dim, f.expected, f.actual) == ("input_ids", 1, "<= 64", 65)
    assert f.severity is Severity.WARNING


def test_aot612_over_max_fails_inside_the_model(dynamic: Dynamic) -> None:
    # PosModel has 64 position rows; its AOTI code accepts seq up to 128: seq 65 reads past
    # the table and the kernel's bounds check raises instead of the input check
    res, findings = dynamic("pos_wider", "pos_inputs")
    assert codes(findings) == ["AOT612", "AOT613"]  # AOT613: the batch over-max twin
    assert "index out of bounds" in findings[0].message
    assert (findings[0].input, findings[0].dim) == ("ids", 1)


# -- outputs (AOT702-704)


def test_aot702_nan_in_outputs_aoti_only(dynamic: Dynamic) -> None:
    # a NaN and an Inf in attention_mask reach the outputs (test_plain_torch_agrees); no
    # ExportedProgram to compare with, so nothing says the model does it anyway
    res, findings = dynamic("aoti", "token_nan_mask", probe=False)
    assert codes(findings) == ["AOT702"]
    f = findings[0]
    assert f.severity is Severity.ERROR and f.stage == "run"
    assert f.actual > 0 and "of the compiled model holds" in f.message


def test_aot702_nan_that_eager_produces_too_is_still_an_error(dynamic: Dynamic) -> None:
    # the deployment returns NaN on these inputs whoever is to blame: an error, whose message
    # says the reference produces it too (the model, not the compile)
    res, findings = dynamic("both", "token_nan_mask", probe=False)
    assert [(f.code, f.severity) for f in findings] == [("AOT702", Severity.ERROR)]
    assert "the ExportedProgram run eagerly produces NaN too" in findings[0].message
    assert "the model, not the compile" in findings[0].message
    assert res["compare"].status is StageStatus.PASSED  # NaN == NaN, same infinities


def test_aot703_output_structure(dynamic: Dynamic) -> None:
    res, findings = dynamic("two_outputs", "aoti_inputs", probe=False)
    assert codes(findings) == ["AOT703"]
    assert "returns 1 output(s), the ExportedProgram 2" in findings[0].message
    assert res["compare"].status is StageStatus.FAILED


def test_aot110_the_reference_refuses_inputs_that_break_an_export_guard(dynamic: Dynamic) -> None:
    # scale 0.7 where export specialized 0.5: the AOTI runner ignores it and runs, the
    # ExportedProgram's guard refuses it (`Guard failed: scale == 0.5`): a finding about the
    # inputs (an error), not a reference that could not run (AOT704 was a warning: the gate
    # passed a package computing with 0.5 for a caller passing 0.7)
    res, findings = dynamic("kwargs", "kw_scale_07", probe=False)
    assert [(f.code, f.severity) for f in findings] == [("AOT110", Severity.ERROR)]
    assert "scale == 0.5" in findings[0].message
    assert res["run"].status is StageStatus.PASSED
    assert res["compare"].status is StageStatus.FAILED


# -- crash triage (AOT804)


def test_aot804_faulting_kernel_reads_nan(tmp_path: Path, gate_cache: Path) -> None:
    # A model that turns a float input into indices (embed(x.long())): a NaN in x becomes
    # INT64_MIN, the kernel's bounds check raises, and no index *input* is out of range -- the
    # input the kernel reads holds a NaN. Built here with the public API (export, save,
    # aoti_compile_and_package); triage recompiles from the saved ExportedProgram.
    plain_torch(
        "import json, sys, torch\n"
        "class M(torch.nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.embed = torch.nn.Embedding(50, 4)\n"
        "    def forward(self, x):\n"
        "        return self.embed(x.long()).sum(-1)\n"
        "torch.manual_seed(0)\n"
        "x = torch.rand(2, 8) * 40\n"
        "ep = torch.export.export(M().eval(), (x,))\n"
        "torch.export.save(ep, sys.argv[1])\n"
        "torch._inductor.aoti_compile_and_package(ep, package_path=sys.argv[2])\n"
        "bad = x.clone()\n"
        "bad[1, 3] = float('nan')\n"
        "torch.save(((bad,), {}), sys.argv[3])\n"
        "print(json.dumps('ok'))\n",
        str(tmp_path / "float_ids_ep.pt2"),
        str(tmp_path / "float_ids.pt2"),
        str(tmp_path / "nan.pt"),
    )
    opts = CheckOptions(
        inputs=str(tmp_path / "nan.pt"),
        dynamic=DynamicOptions(cache_dir=str(gate_cache), probe=False),
        triage=TriageOptions(exported_program=str(tmp_path / "float_ids_ep.pt2")),
        canary=False,
    )
    report = check(tmp_path / "float_ids.pt2", opts)
    found = codes(report.findings)
    assert found[0] == "AOT602" and "AOT804" in found and "AOT803" not in found, report.findings
    f = next(f for f in report.findings if f.code == "AOT804")
    assert f.severity is Severity.WARNING
    assert report.diagnosis and report.diagnosis[0].kind == "nonfinite_input"


# -- host (AOT409)


def test_aot409_low_disk_space(tmp_path: Path) -> None:
    from aotipre.doctor.run import DoctorOptions, run_doctor

    with tmpfs(tmp_path / "small", "size=64m") as small:
        report = run_doctor(
            DoctorOptions(devices=("cpu",), dynamic=DynamicOptions(cache_dir=str(small / "cache")))
        )
    low = [f for f in report.findings if f.code == "AOT409"]
    assert [f.input for f in low] == ["aotipre compile cache"]
    assert low[0].severity is Severity.WARNING and "64.0 MiB free" in low[0].message


def test_aot408_noexec_extraction_directory(tmp_path: Path, gate: Gate) -> None:
    # `aotipre doctor` run as a user would, in a fresh process with TMPDIR on a noexec tmpfs
    # (in this process Python has already chosen its temp dir, so TMPDIR would not reach the
    # canary's workers): the static check says it (AOT408), and the canary, whose compile and
    # extraction go there, cannot be built or loaded (AOT411). Unless plain torch loads a
    # package there: torch 2.11's loader extracts into /tmp whatever TMPDIR says
    loads = (
        "import json, sys, torch\n"
        "try:\n"
        "    torch._inductor.aoti_load_package(sys.argv[1])\n"
        "    print(json.dumps(True))\n"
        "except Exception:\n"
        "    print(json.dumps(False))\n"
    )
    with tmpfs(tmp_path / "noexec", "size=2g,noexec") as noexec:
        proc = subprocess.run(
            [sys.executable, "-m", "aotipre", "doctor", "--device", "cpu", "--cache-dir",
             str(tmp_path / "c"), "-f", "json", "--no-progress"],
            capture_output=True, text=True, timeout=900, env={**os.environ, "TMPDIR": str(noexec)},
        )  # fmt: skip
        plain_loads = plain_torch(loads, str(gate("aoti.pt2")), env={"TMPDIR": str(noexec)})
    data = json.loads(proc.stdout)
    found = [(f["code"], f["severity"], f["input"]) for f in data["findings"]]
    extraction = [f for f in found if (f[2] or "").startswith("package extraction")]
    if plain_loads:
        roles = [d["role"] for d in data["directories"]]
        assert extraction == [] and "package extraction (/tmp)" in roles, found
        assert "AOT411" not in [code for code, _, _ in found]  # the canary loads as torch does
    else:
        assert extraction == [("AOT408", "error", "package extraction (TMPDIR)")], found
        assert "AOT411" in [code for code, _, _ in found]  # the canary cannot be built or loaded
    assert proc.returncode == 1  # the inductor compile cache is on the noexec TMPDIR too


# -- plain torch agrees with what the tests above rely on


def test_plain_torch_agrees(gate: Gate) -> None:
    out = plain_torch(
        "import json, os, sys, torch\n"
        "load = torch._inductor.aoti_load_package\n"
        "res = {}\n"
        "m = load(sys.argv[1])\n"
        "(ids, mask), _ = torch.load(sys.argv[2])\n"
        "y = m(ids, mask)\n"
        "res['nan_inf'] = int(torch.isnan(y).sum() + torch.isinf(y).sum())\n"
        "(ids, padded), _ = torch.load(sys.argv[3])\n"
        "res['padded_equal'] = bool(torch.allclose(m(ids, padded), m(ids, padded.contiguous())))\n"
        "print(json.dumps(res))\n",
        str(gate("aoti.pt2")),
        str(gate("token_nan_mask")),
        str(gate("token_padded_mask")),
    )
    assert out["nan_inf"] > 0  # AOT702: the NaN/Inf reach the outputs
    assert out["padded_equal"] is False  # without the env var, the padded mask reads wrong


@pytest.mark.gpu
def test_aot515_real_libstdcxx_mismatch_when_the_host_has_one(
    cuda_fixture_dir: Path, gate_cache: Path
) -> None:
    # A host decides: on the torch 2.11 H100 machine every AOTI load crashes unless the system
    # libstdc++ is preloaded. Plain torch in a fresh process says which kind of host this is,
    # and aotipre must agree with it either way.
    package = str(cuda_fixture_dir / "both_cuda.pt2")
    probe = (
        "import json, sys, torch\n"
        "torch._inductor.aoti_load_package(sys.argv[1])\n"
        "print(json.dumps('loaded'))\n"
    )
    plain = subprocess.run([sys.executable, "-c", probe, package], capture_output=True, timeout=600)
    crashes = plain.returncode < 0
    if crashes:
        libs = ("/usr/lib/x86_64-linux-gnu/libstdc++.so.6", "/usr/lib64/libstdc++.so.6")
        lib = next((p for p in libs if os.path.exists(p)), None)
        assert lib is not None, "the load crashes and no system libstdc++ is there to preload"
        again = subprocess.run([sys.executable, "-c", probe, package], capture_output=True, timeout=600,
                               env={**os.environ, "LD_PRELOAD": lib})  # fmt: skip
        assert again.returncode == 0, "the load crashes even with the system libstdc++"
    report = check(package, CheckOptions(inputs=str(cuda_fixture_dir / "aoti_inputs.pt"),
                                         dynamic=DynamicOptions(cache_dir=str(gate_cache))))  # fmt: skip
    found = codes(report.findings)
    assert ("AOT515" in found) is crashes, report.findings
    if crashes:
        assert {s.name: s for s in report.stages}["run"].status is StageStatus.PASSED


@pytest.mark.gpu
def test_aot511_a_device_index_this_host_does_not_have(
    cuda_fixture_dir: Path, gate_cache: Path
) -> None:
    # `--device cuda:N` where the host has N GPUs (numbered 0..N-1): the package is for cuda and
    # the host has CUDA, so the device gate lets it through; the loader itself refuses the index.
    # Plain torch in a fresh process first: what a deployment loading with that index gets.
    package = str(cuda_fixture_dir / "aoti_cuda.pt2")
    probe = (
        "import json, sys, torch\n"
        "n = torch.cuda.device_count()\n"
        "try:\n"
        "    torch._inductor.aoti_load_package(sys.argv[1], device_index=n)\n"
        "    print(json.dumps({'n': n, 'error': None}))\n"
        "except Exception as e:\n"
        "    print(json.dumps({'n': n, 'error': f'{type(e).__name__}: {e}'}))\n"
    )
    out = subprocess.run([sys.executable, "-c", probe, package], capture_output=True, text=True,
                         timeout=600)  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    plain = json.loads(out.stdout.strip().splitlines()[-1])
    assert plain["error"] is not None, "plain torch loaded the package on a GPU the host lacks"
    report = check(
        package,
        CheckOptions(
            inputs=str(cuda_fixture_dir / "aoti_inputs.pt"),
            dynamic=DynamicOptions(
                cache_dir=str(gate_cache), device=f"cuda:{plain['n']}", probe=False
            ),
            triage=TriageOptions(escalate=False),
            canary=False,
        ),
    )
    print(plain, [f.to_dict() for f in report.findings])
    found = {f.code: f for f in without_facts(report.findings)}
    assert "AOT511" in found, (plain, report.findings)
    assert (found["AOT511"].expected, found["AOT511"].actual) == ("cuda", f"cuda:{plain['n']}")
    st = {s.name: s for s in report.stages}
    assert st["load"].status is StageStatus.FAILED and st["run"].status is StageStatus.SKIPPED
    assert report.exit_code == 1


@pytest.mark.gpu
def test_aot608_cuda_device_side_assert(cuda_fixture_dir: Path, gate_cache: Path) -> None:
    # embedding_oob_cuda.pt2 with id 600: the Triton kernel's device-side assert
    report = check(
        str(cuda_fixture_dir / "embedding_oob_cuda.pt2"),
        CheckOptions(
            inputs=str(cuda_fixture_dir / "embedding_oob_inputs.pt"),
            dynamic=DynamicOptions(cache_dir=str(gate_cache), probe=False),
            triage=TriageOptions(escalate=False),
            canary=False,
        ),
    )
    run = [f for f in report.findings if f.stage == "run"]
    assert [f.code for f in run] == ["AOT608"], run
    assert "device-side assert" in run[0].message


# -- doctor (AOT407, AOT411) and triage of an AOTI-only package (AOT805, AOT806)


def test_aot407_aot411_doctor_with_a_broken_compiler(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # $CXX names a compiler that fails: no package can be built on this host, so the canary
    # cannot be either
    from aotipre.doctor.run import DoctorOptions, run_doctor

    monkeypatch.setenv("CXX", "/bin/false")
    report = run_doctor(
        DoctorOptions(devices=("cpu",), dynamic=DynamicOptions(cache_dir=str(tmp_path / "c")))
    )
    found = {f.code: f for f in report.findings}
    assert found["AOT407"].severity is Severity.ERROR
    assert "cannot build a shared library" in found["AOT407"].message
    assert found["AOT411"].severity is Severity.ERROR
    assert report.exit_code == 1


def test_aot806_triage_of_an_aoti_only_package(gate: Gate, gate_cache: Path) -> None:
    # aoti.pt2 (no ExportedProgram) with an id past the embedding table: the kernel raises and
    # names itself; triage cannot recompile to look inside it (AOT806)
    report = check(
        gate("aoti.pt2"),
        CheckOptions(
            inputs=str(gate("token_oob_nan")),
            dynamic=DynamicOptions(cache_dir=str(gate_cache), probe=False),
            canary=False,
        ),
    )
    # the static index check already sees the id past the table (AOT308); the run still crashes;
    # without a recompile, the kernel's bounds check is still mapped to the input it reads and
    # the sample's value past the table named (AOT803)
    assert codes(report.findings) == ["AOT308", "AOT602", "AOT806", "AOT803", "AOT801"]
    f = next(f for f in report.findings if f.code == "AOT806")
    assert f.severity is Severity.WARNING
    # the kernel's model inputs came from the sample (kernel-inputs); only the buffers and
    # weights it reads need the recompile
    assert "its model inputs were read from the sample" in f.message
    st = {s.name: s for s in report.stages}
    assert st["triage:kernel-inputs"].status is StageStatus.PASSED
    assert report.diagnosis[0].kernel.startswith("cpp_fused_")
    oob = next(f for f in report.findings if f.code == "AOT803")
    static = next(f for f in report.findings if f.code == "AOT308")
    assert (oob.input, oob.position, oob.actual) == (static.input, static.position, static.actual)


def test_aot805_a_crash_triage_cannot_explain(gate_compiled: Gate, gate_cache: Path) -> None:
    # the worker dies by SIGSEGV in the middle of the model's run, with nothing in its log
    # naming a kernel; the package holds no ExportedProgram to recompile: triage is inconclusive
    opts = CheckOptions(
        inputs=str(gate_compiled("forever_inputs")),
        dynamic=DynamicOptions(cache_dir=str(gate_cache), timeout_s=300.0),
        progress=kill_worker_while_running(signal.SIGSEGV),
        canary=False,
    )
    report = check(gate_compiled("forever.pt2"), opts)
    found = codes(report.findings)
    assert [f.code for f in report.findings if f.stage == "run"] == ["AOT604"]
    assert "AOT805" in found and "AOT806" in found, report.findings
    assert next(f for f in report.findings if f.code == "AOT805").severity is Severity.WARNING


def test_aot645_aot646_aot647_aot654_perf_budgets_and_an_unmeasurable_baseline(
    pkg: Callable[[str], Path], tmp_path: Path
) -> None:
    # the real worker measures aoti.pt2; budgets no real load can meet (1 microsecond, 1 MB)
    # fail the perf stage; a baseline that is no package cannot be measured (an error: a
    # comparison that did not happen fails the gate)
    from aotipre.runner.perf import Budgets
    from aotipre.runner.stages import PerfOptions

    broken = tmp_path / "broken.pt2"
    broken.write_bytes(b"not a zip")
    tight = Budgets(max_load_s=1e-6, max_latency_ms=1e-6, max_rss_mb=1)
    report = check(
        pkg("aoti"),
        CheckOptions(
            inputs=str(pkg("aoti_inputs")),
            dynamic=DynamicOptions(
                probe=False, perf=PerfOptions(runs=3, budgets=tight, against=str(broken))
            ),
        ),
    )
    perf = [f for f in report.findings if f.stage == "perf" and f.code.startswith("AOT6")]
    got = {f.code: f for f in perf}
    assert {"AOT645", "AOT646", "AOT647", "AOT654"} <= set(got), [(f.code, f.message) for f in perf]
    assert got["AOT645"].expected == 1e-6 and got["AOT645"].actual > 1e-6
    assert got["AOT654"].severity is Severity.ERROR
    assert {s.name: s for s in report.stages}["perf"].status is StageStatus.FAILED


def test_aot654_a_baseline_that_cannot_run_these_inputs(pkg: Callable[[str], Path]) -> None:
    # strides.pt2 takes one x [4, 8]; aoti.pt2's inputs are (ids, mask). Plain torch refuses
    # them; the baseline then has no latency to compare with, which passed silently as "no
    # regression" (found by a sweep)
    said = plain_torch(
        "import json, sys, torch\n"
        "m = torch._inductor.aoti_load_package(sys.argv[1])\n"
        "args, kwargs = torch.load(sys.argv[2])\n"
        "try:\n"
        "    m(*args, **kwargs); print(json.dumps('ran'))\n"
        "except Exception as e:\n"
        "    print(json.dumps(str(e).splitlines()[0]))\n",
        str(pkg("strides")),
        str(pkg("aoti_inputs")),
    )
    assert said != "ran", said
    from aotipre.runner.stages import PerfOptions

    report = check(
        pkg("aoti"),
        CheckOptions(
            inputs=str(pkg("aoti_inputs")),
            dynamic=DynamicOptions(
                probe=False, perf=PerfOptions(runs=3, against=str(pkg("strides")))
            ),
        ),
    )
    (f,) = [f for f in report.findings if f.code == "AOT654"]
    assert "strides.pt2 could not be measured (run:" in f.message, f.message
    assert {s.name: s for s in report.stages}["perf"].status is StageStatus.FAILED


def test_aot420_a_compile_cache_that_is_a_file(dynamic: Dynamic, tmp_path: Path) -> None:
    # ep_only.pt2 is compiled by the real worker; its cache path is a regular file: the check
    # goes on without the cache (an environment warning), the compile and the run still pass
    not_a_dir = tmp_path / "cache"
    not_a_dir.write_text("a file where the cache directory should be")
    res, findings = dynamic("ep_only", cache_dir=str(not_a_dir), probe=False)
    assert codes(findings) == ["AOT420"]
    assert findings[0].severity is Severity.WARNING
    assert res["compile"].status is StageStatus.PASSED, res["compile"].detail
    assert "compiled without the cache" in res["compile"].detail
    assert res["run"].status is StageStatus.PASSED
