"""The dynamic stages end to end with real torch workers on the fixture packages (slow, gpu)."""

from __future__ import annotations

import functools
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from aotipre.findings import Finding, Severity, StageResult, StageStatus
from aotipre.pt2.reader import read_package
from aotipre.runner.stages import DynamicOptions, run_dynamic_stages

pytestmark = pytest.mark.slow

Check = Callable[..., tuple[dict[str, StageResult], list[Finding]]]


@pytest.fixture(scope="module")
def compile_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("compile-cache")


@pytest.fixture
def check(pkg: Callable[[str], Path], compile_cache: Path) -> Check:
    """check("both", "aoti_inputs", model=None, **options) on the fixture packages."""

    def go(
        package: str, inputs: str | None = None, model: str | None = None, **opts: Any
    ) -> tuple[dict[str, StageResult], list[Finding]]:
        info = read_package(pkg(package))
        m = info.model(model) if model else info.models[0]
        assert m is not None
        inputs_path = str(pkg(inputs)) if inputs else None
        member = None if inputs else m.sample_inputs_member
        options = DynamicOptions(**{"cache_dir": str(compile_cache), "timeout_s": 120.0, **opts})
        results, findings = run_dynamic_stages(info, m, inputs_path, member, options)
        # A host whose libstdc++ crashes every AOTI load (seen on the torch 2.11 GPU machine)
        # gets AOT515 on every package. The host decides, so plain torch decides here: AOT515
        # is reported exactly when a fresh process cannot load aoti.pt2 without the preload.
        reported = [f for f in findings if f.code == "AOT515"]
        assert bool(reported) == host_needs_libstdcxx_preload(str(pkg("aoti"))), reported
        # The perf stage's advice (AOT640: the CPU-ISA probe's cost on this host) is about the
        # host and torch, not the package; test_stage_perf.py covers it.
        kept = [f for f in findings if f.code != "AOT515" and f.stage != "perf"]
        return {r.name: r for r in results}, kept

    return go


@functools.cache
def host_needs_libstdcxx_preload(package: str) -> bool:
    """Does plain torch, in a fresh process, die loading `package` (then AOT515 is expected)?"""
    code = "import sys, torch; torch._inductor.aoti_load_package(sys.argv[1])"
    proc = subprocess.run([sys.executable, "-c", code, package], capture_output=True, timeout=600)
    return proc.returncode < 0


def errors(findings: list[Finding]) -> list[Finding]:
    return [f for f in findings if f.severity is Severity.ERROR]


PLAIN_TORCH_DEFAULT = """
import os, sys, torch
args, kwargs = torch.load(sys.argv[2])
ids, mask = args
def transposed(t):
    return t.contiguous().transpose(-1, -2).contiguous().transpose(-1, -2)
for checks in ("0", "1"):
    # the runtime reads AOTI_RUNTIME_CHECK_INPUTS once per loaded model (a static of the
    # generated wrapper .so, which each load extracts anew): each setting loads its own
    if checks == "1":
        os.environ["AOTI_RUNTIME_CHECK_INPUTS"] = "1"
    model = torch._inductor.aoti_load_package(sys.argv[1])
    def call(*inputs):
        try:
            return model(*inputs)
        except Exception as exc:
            return "refused " + str(exc).splitlines()[0]
    ref = model(ids, mask)
    out = call(torch.zeros(65, ids.shape[1], dtype=ids.dtype), torch.ones(65, mask.shape[1]))
    print(checks, "over", out if isinstance(out, str) else f"ran {tuple(out.shape)}")
    for name, inputs in (("ids", (transposed(ids), mask)), ("mask", (ids, transposed(mask)))):
        out = call(*inputs)
        print(checks, name, out if isinstance(out, str) else "same" if torch.equal(out, ref) else "differs")
"""


def plain_torch_default(package: Path, inputs: Path) -> dict[bool, dict[str, str]]:
    """A fresh process, as a serving process runs it, once without AOTI_RUNTIME_CHECK_INPUTS
    (False) and once with it (True), a load of its own each: batch 65 (the compiled max is
    64), then each input in a transposed layout, compared with the contiguous sample's
    outputs."""
    env = {k: v for k, v in os.environ.items() if k != "AOTI_RUNTIME_CHECK_INPUTS"}
    proc = subprocess.run(
        [sys.executable, "-c", PLAIN_TORCH_DEFAULT, str(package), str(inputs)],
        capture_output=True, text=True, timeout=600, env=env,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    facts: dict[bool, dict[str, str]] = {False: {}, True: {}}
    for line in proc.stdout.strip().splitlines():
        checks, _, rest = line.partition(" ")
        if checks in ("0", "1"):
            name, _, said = rest.partition(" ")
            facts[checks == "1"][name] = said
    return facts


@pytest.mark.torch_versions  # the runtime's input checks, plain loads
def test_healthy_aoti_package_runs_in_one_worker(check: Check, pkg: Callable[[str], Path]) -> None:
    res, findings = check("aoti", "aoti_inputs")
    # the over-max probes and transposed layouts are refused under AOTI_RUNTIME_CHECK_INPUTS=1
    # only; plain torch in a fresh process, as a default deployment runs, takes batch 65, reads
    # transposed ids as if contiguous (other outputs) and a transposed mask correctly
    facts = plain_torch_default(pkg("aoti"), pkg("aoti_inputs"))
    plain, checked = facts[False], facts[True]
    assert plain["over"].startswith("ran") and (plain["ids"], plain["mask"]) == ("differs", "same")
    assert sorted(checked) == ["ids", "mask", "over"], checked
    assert all(v.startswith("refused") for v in checked.values()), checked
    assert [(f.code, f.severity) for f in findings] == [("AOT613", Severity.WARNING)]
    message = findings[0].message
    assert "=65 [args[0] dim 0, args[1] dim 0] (max 64 + 1): ran silently" in message
    assert "=129 [args[0] dim 1, args[1] dim 1] (max 128 + 1): ran silently" in message
    assert (
        "args[0] with strides (1, 3) (the sample's values, not contiguous): ran silently "
        "and returned outputs that differ from the contiguous input's" in message
    )
    assert "args[1] with strides" not in message
    detail = res["probe"].detail
    assert detail.count("(opt-in); without it: ran silently") == 3
    assert (
        "args[1] non-contiguous: rejected by the runtime check (opt-in); without it: ran "
        "and returned the same outputs as contiguous" in detail
    )
    assert [res[n].status for n in ("run", "probe")] == [StageStatus.PASSED] * 2
    assert res["compare"].status is StageStatus.SKIPPED
    commands = {res[n].command for n in ("run", "probe")}
    assert len(commands) == 1  # run and every probe shared one worker process (with the load)
    assert "outputs float32[3, 4]" in res["run"].detail


def test_both_package_compares_and_probes_the_bounds(check: Check) -> None:
    res, findings = check("both", "aoti_inputs")
    assert [f.code for f in findings] == ["AOT613"]  # see the test above
    assert res["compare"].status is StageStatus.PASSED
    assert "match the ExportedProgram" in res["compare"].detail
    detail = res["probe"].detail
    assert res["probe"].status is StageStatus.PASSED
    # batch 65 and seq 129, and each input laid out non-contiguously
    assert detail.count("rejected by the runtime check") == 4
    assert "=64 [input_ids dim 0, attention_mask dim 0]: ok" in detail
    assert "=128 [input_ids dim 1, attention_mask dim 1]: ok" in detail


PLAIN_TORCH_OUTPUTS = """
import sys, torch
args, kwargs = torch.load(sys.argv[2])
out = torch._inductor.aoti_load_package(sys.argv[1])(*args, **kwargs)
torch.save(out, sys.argv[3])
torch.save(out + float(sys.argv[4]), sys.argv[5])
print(type(out).__name__, tuple(out.shape))
"""


def test_an_aoti_only_package_against_an_exported_program_file_and_golden_outputs(
    check: Check, pkg: Callable[[str], Path], tmp_path: Path
) -> None:
    """AOTI code only: --exported-program gives compare and probe their eager reference, and
    --expected golden outputs; each finding says which reference it used. The EP of
    mismatch.pt2 is TokenModel(shift=1.0), 1.0 above what aoti.pt2 computes."""
    res, findings = check("aoti", "aoti_inputs", exported_program=str(pkg("both")))
    assert res["compare"].status is StageStatus.PASSED, res["compare"].detail
    assert "match the ExportedProgram of --exported-program" in res["compare"].detail
    assert "=64 [args[0] dim 0, args[1] dim 0]: ok" in res["probe"].detail  # compared with it
    res, findings = check("aoti", "aoti_inputs", exported_program=str(pkg("mismatch")), probe=False)
    (f,) = [f for f in findings if f.code == "AOT701"]
    assert "max abs error 1" in f.message
    assert f"compared with the ExportedProgram of --exported-program {pkg('mismatch')}" in f.message
    # golden outputs written by plain torch in a fresh process, and a copy 0.5 off
    good, off = tmp_path / "expected.pt", tmp_path / "off.pt"
    proc = subprocess.run(
        [sys.executable, "-c", PLAIN_TORCH_OUTPUTS, str(pkg("aoti")), str(pkg("aoti_inputs")),
         str(good), "0.5", str(off)],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0 and "Tensor (3, 4)" in proc.stdout, proc.stderr[-2000:]
    res, findings = check("aoti", "aoti_inputs", expected=str(good), probe=False)
    assert res["compare"].status is StageStatus.PASSED
    assert res["compare"].detail.startswith(
        f"1 output(s) match the expected outputs of --expected {good}"
    )
    res, findings = check("aoti", "aoti_inputs", expected=str(off), probe=False)
    (f,) = [f for f in findings if f.code == "AOT701"]
    assert "12 of 12 elements differ" in f.message and "vs expected" in f.message
    assert f"(compared with the expected outputs of --expected {off})" in f.message
    assert res["compare"].status is StageStatus.FAILED


PLAIN_TORCH_OTHER_BATCH = """
import sys, torch
(ids, mask), kwargs = torch.load(sys.argv[2])
ids, mask = torch.cat([ids, ids]), torch.cat([mask, mask])  # twice the batch
out = torch._inductor.aoti_load_package(sys.argv[1])(ids, mask, **kwargs)
torch.save(out, sys.argv[3])
print(tuple(out.shape))
"""


def test_expected_outputs_of_other_inputs_are_not_a_recompile(
    check: Check, pkg: Callable[[str], Path], tmp_path: Path
) -> None:
    """--expected outputs that plain torch computed for other inputs (the same package, twice
    the batch): AOT703 names the expected outputs and says to save the outputs of the inputs
    checked; recompiling, the hint against an ExportedProgram, would change nothing."""
    other = tmp_path / "other_batch.pt"
    proc = subprocess.run(
        [sys.executable, "-c", PLAIN_TORCH_OTHER_BATCH, str(pkg("aoti")), str(pkg("aoti_inputs")),
         str(other)],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0 and "(6, 4)" in proc.stdout, proc.stderr[-2000:]
    res, findings = check("aoti", "aoti_inputs", expected=str(other), probe=False)
    (f,) = [f for f in findings if f.code == "AOT703"]
    assert "the expected outputs float32[6, 4]" in f.message and "float32[3, 4]" in f.message
    assert f.hint is not None and "recompile" not in f.hint
    assert "outputs saved for other inputs" in f.hint
    assert res["compare"].status is StageStatus.FAILED


def test_accuracy_mismatch_between_ep_and_aoti(check: Check) -> None:
    res, findings = check("mismatch", "aoti_inputs", probe=False)
    assert [f.code for f in findings] == ["AOT701"]
    f = findings[0]
    assert "12 of 12 elements differ" in f.message and "max abs error 1" in f.message
    assert f.actual == pytest.approx(f.expected - 1.0, abs=1e-4)
    assert res["compare"].status is StageStatus.FAILED


def test_out_of_range_index_names_the_cpp_kernel(check: Check) -> None:
    res, findings = check("embedding_oob", "embedding_oob_inputs")
    assert [f.code for f in findings] == ["AOT602"]
    f = findings[0]
    assert "in kernel cpp_fused_embedding" in f.message
    assert "index out of bounds: 0 <= tmp" in f.message
    assert "fails on these inputs too (IndexError" in f.message
    assert any(line.startswith("Exception raised from cpp_fused_embedding") for line in f.evidence)
    assert res["probe"].status is StageStatus.SKIPPED


@pytest.mark.torch_versions  # the runtime's dtype error text
def test_wrong_dtype_is_caught_at_run_time_without_static_checks(check: Check) -> None:
    res, findings = check("both", "aoti_inputs_bad_dtype")
    assert [f.code for f in findings] == ["AOT201"]
    f = findings[0]
    assert (f.stage, f.input, f.position, f.expected, f.actual) == (
        "run",
        "input_ids",
        0,
        "int64",
        "float32",
    )
    line = "input_handles[0]: unmatched dtype, expected: 4(at::kLong), but got: 6"
    assert any(e.endswith(line) for e in f.evidence)  # 2.11 adds the generic API message


PLAIN_TORCH_DISK_WEIGHTS = """
import sys, torch
from torch.export.pt2_archive._package import load_pt2
args, kwargs = torch.load(sys.argv[2])
if sys.argv[3] == "disk":
    model = load_pt2(sys.argv[1], load_weights_from_disk=True).aoti_runners["model"]
else:
    model = torch._inductor.aoti_load_package(sys.argv[1])
print("ran", tuple(model(*args, **kwargs).shape))
"""


@pytest.mark.torch_versions  # the loader's crash, load_pt2's workaround
def test_weights_on_disk_segfault_is_contained(check: Check, pkg: Callable[[str], Path]) -> None:
    res, findings = check("weights_on_disk", "aoti_inputs")
    assert [f.code for f in findings] == ["AOT607"]
    assert "SIGSEGV" in findings[0].message and "weights on disk" in findings[0].message
    assert res["run"].status is StageStatus.FAILED
    # the loader that works, tried on the same inputs before the crashing run; plain torch in a
    # fresh process: aoti_load_package dies calling it, load_pt2(load_weights_from_disk) runs it
    assert (
        "load_pt2(path, load_weights_from_disk=True) loads it and runs these inputs (outputs "
        "float32[3, 4]): deploy with that loader" in findings[0].message
    )
    plain = {
        how: subprocess.run(
            [
                sys.executable,
                "-c",
                PLAIN_TORCH_DISK_WEIGHTS,
                str(pkg("weights_on_disk")),
                str(pkg("aoti_inputs")),
                how,
            ],
            capture_output=True,
            text=True,
            timeout=600,
        )  # fmt: skip
        for how in ("disk", "aoti_load_package")
    }
    assert plain["disk"].returncode == 0 and "ran (3, 4)" in plain["disk"].stdout
    assert plain["aoti_load_package"].returncode == -11  # SIGSEGV


@pytest.mark.torch_versions  # the worker's compile
def test_exported_program_compiles_passes_and_hits_the_cache(check: Check) -> None:
    started = time.monotonic()
    res, findings = check("ep_only")
    cold = time.monotonic() - started
    assert errors(findings) == []
    assert res["compile"].status is StageStatus.PASSED, res["compile"].detail
    assert "compiled into the cache" in res["compile"].detail
    assert res["compare"].status is StageStatus.PASSED
    # batch 1 is declared valid, but AOTI's runtime check wants >= 2: a warning, not an error;
    # without the check (a default deployment) batch 1 and the over-max sizes run: AOT613
    assert [(f.code, f.severity) for f in findings] == [
        ("AOT610", Severity.WARNING),
        ("AOT613", Severity.WARNING),
    ]
    assert "(the declared minimum): ran silently" in findings[1].message
    started = time.monotonic()
    res, _ = check("ep_only")
    warm = time.monotonic() - started
    assert "compile cache hit" in res["compile"].detail
    assert res["run"].status is StageStatus.PASSED
    assert warm < cold


@pytest.mark.torch_versions  # a package of several models, loaded by name
def test_multi_model_package_by_name(check: Check) -> None:
    res, findings = check("multi", "aoti_inputs", model="encoder", probe=False)
    assert findings == []
    assert "model 'encoder' of multi.pt2" in res["load"].detail
    assert res["compare"].status is StageStatus.PASSED


def test_exported_program_is_loaded_without_its_aoti_code(pkg: Callable[[str], Path]) -> None:
    code = (
        "import sys; sys.path.insert(0, sys.argv[2]); import worker\n"
        "ep = worker.load_exported_program(sys.argv[1], 'model')\n"
        "maps = open('/proc/self/maps').read()\n"
        "print(type(ep).__name__, 'wrapper.so' in maps)\n"
    )
    runner_dir = str(Path(__file__).resolve().parents[2] / "aotipre" / "runner")
    out = subprocess.run(
        [sys.executable, "-c", code, str(pkg("both")), runner_dir],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert out.stdout.split() == ["ExportedProgram", "False"]


@pytest.mark.gpu
def test_cuda_package_runs(cuda_fixture_dir: Path, compile_cache: Path) -> None:
    info = read_package(cuda_fixture_dir / "both_cuda.pt2")
    m = info.models[0]
    options = DynamicOptions(cache_dir=str(compile_cache), timeout_s=300.0)
    results, findings = run_dynamic_stages(
        info, m, str(cuda_fixture_dir / "aoti_inputs.pt"), None, options
    )
    res = {r.name: r for r in results}
    # a host whose libstdc++ crashes the loader is reported as such (AOT515), not as the model;
    # plain torch in a fresh process says which kind of host this is
    expected = (
        ["AOT515"] if host_needs_libstdcxx_preload(str(cuda_fixture_dir / "both_cuda.pt2")) else []
    )
    assert [f.code for f in errors(findings)] == expected, findings
    assert res["run"].status is StageStatus.PASSED, res["run"].detail
    assert res["compare"].status is StageStatus.PASSED, res["compare"].detail
    # each over-max size and non-contiguous layout refused under the runtime check also ran on a
    # copy without it (what a default deployment does with them on this card is recorded, not
    # pinned: the closing note)
    assert res["probe"].detail.count("(opt-in); without it: ") == 4, res["probe"].detail
    print({n: (r.status.value, round(r.duration_s, 2), r.detail) for n, r in res.items()})
    print([f.to_dict() for f in findings])


@pytest.mark.gpu
def test_cuda_out_of_range_index_is_a_device_fault(
    cuda_fixture_dir: Path, compile_cache: Path
) -> None:
    info = read_package(cuda_fixture_dir / "embedding_oob_cuda.pt2")
    options = DynamicOptions(cache_dir=str(compile_cache), timeout_s=300.0)
    results, findings = run_dynamic_stages(
        info, info.models[0], str(cuda_fixture_dir / "embedding_oob_inputs.pt"), None, options
    )
    # pinned: a device-side assert is a CUDA fault (docs/evidence/h100-check-embedding-oob-cuda.txt)
    assert [f.code for f in findings if f.stage == "run"] == ["AOT608"], findings
    print([f.to_dict() for f in findings])
