"""The perf record the judgements read (runner/perf.py `record_from_worker`, the memory peaks,
the cold start's total) and the hints they give, on hand-written worker entries shaped like
runner/worker/coldstart.py's `measure_load`, run `perf` and perf.py's `latency_runs` output (fixed numbers,
nothing timed); and the perf stage's own decisions (runner/stages/perf.py) on the fake worker.

Written for the mutation run (scripts/mutate.py, session 11)."""

from __future__ import annotations

import copy
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from aotipre.runner import perf

MB = perf.MB

LOAD: dict[str, Any] = {
    "fresh_process": True,
    "probe_cached": False,
    "torch_version": "2.13.0+cpu",
    "import_s": 1.5,
    "total_s": 6.0,
    "memory_before": {"host": {"peak_rss": 300 * MB}},
    "memory_after": {"host": {"peak_rss": 1000 * MB}},
}
LATENCY: dict[str, Any] = {
    "warmup": 3,
    "runs": 10,
    "p50_ms": 2.0,
    "p99_ms": 3.0,
    "min_ms": 1.5,
    "max_ms": 3.0,
    "mean_ms": 2.1,
    "memory": {"host_rss": [1100 * MB] * 10, "host_rss_growth_per_run": 0.0},
}


def gpu(used: int, max_allocated: int = 0, max_reserved: int = 0) -> dict[str, int]:
    return {"device_used": used, "max_allocated": max_allocated, "max_reserved": max_reserved}


def load_with(**fields: Any) -> dict[str, Any]:
    out = copy.deepcopy(LOAD)
    out.update(fields)
    return out


def test_the_cold_start_total_is_imports_cuda_start_and_load() -> None:
    rec = perf.record_from_worker("m", "cuda", load_with(cuda_init_s=0.25), None, None)
    assert rec.cold is not None and rec.cold.total_s == 1.5 + 0.25 + 6.0
    rec = perf.record_from_worker("m", "cpu", LOAD, None, None)
    assert rec.cold is not None and rec.cold.total_s == 7.5


def test_a_load_without_a_probe_entry_counts_no_probe_programs() -> None:
    rec = perf.record_from_worker("m", "cpu", LOAD, None, None)
    cold = rec.cold
    assert cold is not None and cold.probe_s is None
    assert (cold.probe_programs, cold.probe_compiles, cold.probe_compiles_failed) == (0, 0, 0)
    assert cold.probe_base_checks_s == 0.0


def test_a_probe_with_no_failed_build_says_none_failed() -> None:
    # 2 s of a 6 s load in the probe (worth advice), 3 builds, none failed
    probe = {"seconds": 2.0, "check_programs": 4, "gxx_builds": 3}
    rec = perf.record_from_worker("m", "cpu", load_with(probe=probe), None, None)
    ((code, message, _),) = perf.advice_judgements(rec)
    assert code == "AOT640"
    assert "4 check programs" in message and "3 of them compiled with g++ now" in message
    assert "failed" not in message


def test_gpu_memory_is_what_the_load_added_never_negative() -> None:
    before = {"host": {"peak_rss": MB}, "gpu": gpu(500 * MB)}
    # the same as before the load: the model took 0 bytes (not "unknown", not 1)
    same = load_with(memory_before=before, memory_after={"gpu": gpu(500 * MB)})
    rec = perf.record_from_worker("m", "cuda", same, None, None)
    assert rec.memory.gpu_after_load == 0 and rec.memory.gpu_peak == 0
    # less than before (another process freed memory): 0, not negative
    less = load_with(memory_before=before, memory_after={"gpu": gpu(400 * MB)})
    rec = perf.record_from_worker("m", "cuda", less, None, None)
    assert rec.memory.gpu_after_load == 0
    # no GPU snapshot before the load: nothing to subtract, so unknown
    unknown = load_with(memory_after={"gpu": gpu(400 * MB)})
    rec = perf.record_from_worker("m", "cuda", unknown, None, None)
    assert rec.memory.gpu_after_load is None and rec.memory.gpu_peak is None
    # and none after it
    rec = perf.record_from_worker("m", "cuda", load_with(memory_before=before), None, None)
    assert rec.memory.gpu_after_load is None


def test_the_caching_allocators_peaks_come_from_the_run() -> None:
    before = {"gpu": gpu(100 * MB)}
    run = {"call_s": 0.01, "memory_after": {"gpu": gpu(300 * MB, 7 * MB, 9 * MB)}}
    rec = perf.record_from_worker("m", "cuda", load_with(memory_before=before), run, None)
    assert (rec.memory.gpu_max_allocated, rec.memory.gpu_max_reserved) == (7 * MB, 9 * MB)
    assert rec.memory.gpu_after_run == 200 * MB
    rec = perf.record_from_worker("m", "cpu", LOAD, {"call_s": 0.01}, None)
    assert (rec.memory.gpu_max_allocated, rec.memory.gpu_max_reserved) == (None, None)


def test_the_latency_keeps_its_warmup() -> None:
    rec = perf.record_from_worker("m", "cpu", LOAD, None, LATENCY)
    assert rec.latency is not None and (rec.latency.runs, rec.latency.warmup) == (10, 3)
    no_warmup = {k: v for k, v in LATENCY.items() if k != "warmup"}
    rec = perf.record_from_worker("m", "cpu", LOAD, None, no_warmup)
    assert rec.latency is not None and rec.latency.warmup == 0


def test_budgets_any_is_whether_one_is_set() -> None:
    assert perf.Budgets().any is False
    assert perf.Budgets(max_latency_ms=5.0).any is True
    assert perf.Budgets(max_load_s=1, max_latency_ms=1, max_rss_mb=1, max_gpu_mb=1).any is True


def test_the_probe_hint_names_the_variable_from_50_ms_of_base_checks() -> None:
    def hint(base: float) -> str:
        probe = {"seconds": 5.0, "check_programs": 10, "base_checks_s": base}
        rec = perf.record_from_worker("m", "cpu", load_with(probe=probe), None, None)
        ((code, _, fields),) = perf.advice_judgements(rec)
        assert code == "AOT640"
        return str(fields["hint"])

    assert hint(0.05).startswith("TORCHINDUCTOR_VEC_ISA_OK=1 skips 0.05 s of it here")
    assert hint(0.2).startswith("TORCHINDUCTOR_VEC_ISA_OK=1 skips 0.20 s")
    assert hint(0.049).startswith("keep the inductor cache")


@pytest.mark.parametrize(
    ("version", "start"),
    [
        ("2.15.0", "extract the package once (when building the image) and pass the folder"),
        ("2.15.0+cu130", "extract the package once (when building the image) and pass the"),
        ("2.16.1", "extract the package once (when building the image) and pass the folder"),
        ("3.0.0", "extract the package once (when building the image) and pass the folder"),
        ("2.14.1", "extract the package once (when building the image) and load the folder"),
        ("2.13.0+cpu", "extract the package once (when building the image) and load the folder"),
        ("2.12.1", "this torch loads packages only from the .pt2 file"),
        ("1.99", "this torch loads packages only from the .pt2 file"),
        (None, "this torch loads packages only from the .pt2 file"),
        ("", "this torch loads packages only from the .pt2 file"),
        ("nightly", "this torch loads packages only from the .pt2 file"),
        ("2", "this torch loads packages only from the .pt2 file"),
    ],
)
def test_the_folder_hint_follows_the_torch_release(version: str | None, start: str) -> None:
    assert perf.folder_hint(version).startswith(start)


# ---------------------------------------------------------------------------------------------
# The perf stage on the fake torch worker (tests/fakes/fake_torch_worker.py: load 0.5 s +
# loader imports 0.5 s, median 1 ms, peak RSS 120 MB), its script chosen per package by a
# wrapper (the --against baseline is measured by the same worker command)


FAKES = Path(__file__).resolve().parents[1] / "fakes"
WRAPPER = """
import json, os, runpy, sys
job = json.load(open(sys.argv[1]))
name = os.path.basename(job.get("package") or job.get("source_package") or "")
scripts = json.loads(os.environ["PER_PACKAGE_SCRIPT"])
os.environ["AOTIPRE_FAKE_SCRIPT"] = json.dumps(scripts.get(name, {}))
with open(os.environ["PER_PACKAGE_LOG"], "a") as log:
    log.write(json.dumps({"package": name, "inputs": job.get("inputs")}) + "\\n")
sys.path.insert(0, FAKES)
sys.argv = [os.path.join(FAKES, "fake_torch_worker.py"), sys.argv[1]]
runpy.run_path(sys.argv[0], run_name="__main__")
"""
LOAD_PERF = {
    "fresh_process": True,
    "torch_version": "2.13.0+cpu",
    "import_s": 0.5,
    "total_s": 1.0,
    "extraction": {"written_s": 0.7, "bytes": 3 * MB, "files": 3, "folder": "/tmp/x"},
    "memory_after": {"host": {"peak_rss": 120 * MB}},
}


def run_stages(
    tmp_path: Path,
    perf_options: Any,
    scripts: dict[str, Any] | None = None,
    *,
    package: Any = None,
    model: Any = None,
    inputs_member: str | None = None,
) -> tuple[dict[str, Any], list[Any], list[Any], list[dict[str, Any]]]:
    """The dynamic stages of `model` of `package` (default: a written token model, new.pt2) on
    the fake worker; scripts: {package file name: fake script}. Returns the stage results by
    name, the findings, the perf records (record, baseline) and the jobs' inputs by package."""
    from aotipre.runner.stages import DynamicOptions, run_dynamic_stages
    from tests.fakes.specs import token_model, write_package

    tmp_path.mkdir(parents=True, exist_ok=True)
    if package is None:
        model = model or token_model()
        package = write_package(tmp_path / "new.pt2", model)
    wrapper = tmp_path / "wrapper.py"
    wrapper.write_text(f"FAKES = {str(FAKES)!r}\n" + WRAPPER)
    log = tmp_path / "jobs.log"
    options = DynamicOptions(
        worker_command=(sys.executable, str(wrapper)),
        extra_env={
            "PER_PACKAGE_SCRIPT": json.dumps(scripts or {}),
            "PER_PACKAGE_LOG": str(log),
        },
        cache_dir=str(tmp_path / "cache"),
        timeout_s=30.0,
        probe=False,
        perf=perf_options,
    )
    records: list[Any] = []
    results, findings = run_dynamic_stages(
        package,
        model or package.models[0],
        None,
        inputs_member,
        options,
        on_perf=lambda r, b: records.append((r, b)),
    )
    jobs = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    return {r.name: r for r in results}, findings, records, jobs


def perf_options(**fields: Any) -> Any:
    from aotipre.runner.stages import PerfOptions

    return PerfOptions(**fields)


def test_the_stage_says_what_it_times(tmp_path: Path) -> None:
    from types import SimpleNamespace

    from aotipre.runner.stages.perf import PerfStage

    stage = PerfStage()
    on = SimpleNamespace(opts=SimpleNamespace(perf=perf_options(runs=7)))
    off = SimpleNamespace(opts=SimpleNamespace(perf=None))
    assert stage.progress(on, "latency", "") == "timing 7 calls"  # type: ignore[arg-type]
    assert stage.progress(on, "load", "") is None  # type: ignore[arg-type]
    assert stage.progress(off, "latency", "") is None  # type: ignore[arg-type]
    assert stage.plan(off) == []  # type: ignore[arg-type]


def test_a_failed_load_skips_the_stage(tmp_path: Path) -> None:
    boom = {"load": {"error": {"type": "RuntimeError", "message": "boom"}}}
    res, findings, records, _ = run_stages(tmp_path, perf_options(), {"new.pt2": boom})
    assert res["perf"].status.value == "skipped" and records == []


def test_only_steps_that_passed_are_measured(tmp_path: Path) -> None:
    from aotipre.runner.perf import Budgets

    ok_run = {"run": {"entry": {"perf": {"call_s": 0.002}}}}
    res, _, records, _ = run_stages(tmp_path / "a", perf_options(), {"new.pt2": ok_run})
    ((rec, _),) = records
    assert rec.cold.first_call_s == 0.002 and rec.latency is not None
    assert res["perf"].command != ()  # the latency step's worker
    failed = {
        "run": {"entry": {"perf": {"call_s": 5.0}}, "error": {"type": "E", "message": "x"}},
    }
    _, _, records, _ = run_stages(tmp_path / "b", perf_options(), {"new.pt2": failed})
    ((rec, _),) = records
    assert rec.cold.first_call_s is None
    slow = Budgets(max_latency_ms=0.001)
    failed_latency = {"latency": {"error": {"type": "E", "message": "x"}}}
    res, findings, records, _ = run_stages(
        tmp_path / "c", perf_options(budgets=slow), {"new.pt2": failed_latency}
    )
    ((rec, _),) = records
    assert rec.latency is None and [f.code for f in findings] == []


def test_an_info_beside_an_error_fails_the_stage(tmp_path: Path) -> None:
    from aotipre.runner.perf import Budgets

    script = {"new.pt2": {"load": {"entry": {"perf": LOAD_PERF}}}}
    budgets = Budgets(max_latency_ms=0.5)
    res, findings, _, _ = run_stages(tmp_path / "a", perf_options(budgets=budgets), script)
    assert sorted(f.code for f in findings) == ["AOT641", "AOT646"]
    assert res["perf"].status.value == "failed"
    res, findings, _, _ = run_stages(tmp_path / "b", perf_options(), script)
    assert [f.code for f in findings] == ["AOT641"] and res["perf"].status.value == "passed"
    assert "extract 0.70 s" in res["perf"].detail


def test_a_compiled_program_is_measured_as_the_package_it_became(tmp_path: Path) -> None:
    from tests.fakes.specs import token_model

    res, _, records, _ = run_stages(tmp_path, perf_options(), model=token_model(aoti=False))
    ((rec, _),) = records
    assert res["compile"].status.value == "passed"
    assert rec.package.startswith(str(tmp_path / "cache")) and rec.package.endswith(".pt2")
    _, _, records, _ = run_stages(tmp_path / "b", perf_options())
    ((rec, _),) = records
    assert rec.package == str(tmp_path / "b" / "new.pt2")


def cpp_only(model: Any) -> Any:
    import dataclasses

    aoti = dataclasses.replace(
        model.aoti,
        shared_objects=(),
        build_flags=("pkg/x_compile_flags.json", "pkg/x_linker_flags.json"),
    )
    assert aoti.compiled_at_load
    return dataclasses.replace(model, aoti=aoti)


def test_a_package_that_compiles_at_load_says_so(tmp_path: Path) -> None:
    from tests.fakes.specs import token_model

    script = {"new.pt2": {"load": {"entry": {"perf": LOAD_PERF}}}}
    res, findings, _, _ = run_stages(
        tmp_path, perf_options(), script, model=cpp_only(token_model())
    )
    assert [f.code for f in findings] == ["AOT644"]
    assert "extract and compile 0.70 s" in res["perf"].detail


def test_compile_at_load_replaces_the_extraction_advice() -> None:
    from types import SimpleNamespace as NS

    from aotipre.runner.stages.perf import _compiled_at_load

    judged = [("AOT640", "probe", {}), ("AOT641", "extract", {})]
    s = NS(model=NS(name="m", aoti=NS(compiled_at_load=True)), aoti_model="m")
    record = NS(cold=NS(load_s=7.91234))
    out = _compiled_at_load(s, record, list(judged))  # type: ignore[arg-type]
    assert [code for code, _, _ in out] == ["AOT640", "AOT644"]
    assert out[1][2] == {"actual": 7.912} and "the load took 7.91 s here, g++ included" in out[1][1]
    for other in (
        NS(model=NS(name="m", aoti=None), aoti_model="m"),
        NS(model=NS(name="m", aoti=NS(compiled_at_load=False)), aoti_model="m"),
        NS(model=NS(name="m", aoti=NS(compiled_at_load=True)), aoti_model="model"),
    ):
        assert _compiled_at_load(other, record, list(judged)) == judged  # type: ignore[arg-type]
    assert _compiled_at_load(s, NS(cold=None), list(judged)) == judged  # type: ignore[arg-type]
    assert _compiled_at_load(s, NS(cold=NS(load_s=None)), list(judged)) == judged  # type: ignore[arg-type]


def single_model_package(pkg: Callable[[str], Path], tmp_path: Path, keep: str) -> Path:
    """multi.pt2 with one of its two models (encoder or decoder) left."""
    import zipfile

    drop = {"encoder": "decoder", "decoder": "encoder"}[keep]
    out = tmp_path / f"{keep}_only.pt2"
    with zipfile.ZipFile(pkg("multi")) as src, zipfile.ZipFile(out, "w") as dst:
        for info in src.infolist():
            if drop not in info.filename:
                dst.writestr(info, src.read(info))
    return out


def test_a_baseline_with_one_model_of_another_name_is_measured(
    tmp_path: Path, pkg: Callable[[str], Path]
) -> None:
    from aotipre.pt2.reader import read_package

    old = single_model_package(pkg, tmp_path, "decoder")
    assert [m.name for m in read_package(old).models] == ["decoder"]
    res, findings, records, _ = run_stages(tmp_path / "a", perf_options(against=str(old)))
    ((rec, base),) = records
    assert findings == [] and base is not None and base.model == "decoder"
    assert "against: load" in res["perf"].detail


def test_a_baseline_that_cannot_run_says_which_stage(
    tmp_path: Path, pkg: Callable[[str], Path]
) -> None:
    import shutil

    old = tmp_path / "old.pt2"
    shutil.copy(pkg("aoti"), old)
    error = {"type": "RuntimeError", "message": "no such op"}
    for step, why in (("run", "(run: "), ("load", "(load: ")):
        scripts = {"old.pt2": {step: {"error": error}}}
        res, findings, records, _ = run_stages(
            tmp_path / step, perf_options(against=str(old)), scripts
        )
        ((rec, base),) = records
        assert base is None and [f.code for f in findings] == ["AOT654"], step
        assert why in findings[0].message and "no such op" in findings[0].message, step


def test_a_baseline_runs_the_sample_inputs_stored_in_the_package(
    tmp_path: Path, pkg: Callable[[str], Path]
) -> None:
    import shutil

    from aotipre.pt2.reader import read_package

    old = tmp_path / "old.pt2"
    shutil.copy(pkg("aoti"), old)
    both = read_package(pkg("both"))
    member = both.models[0].sample_inputs_member
    assert member is not None
    _, findings, records, jobs = run_stages(
        tmp_path / "a", perf_options(against=str(old)), package=both, inputs_member=member
    )
    ((_, base),) = records
    assert base is not None and findings == []
    baseline_inputs = [j["inputs"] for j in jobs if j["package"] == "old.pt2"]
    assert baseline_inputs and all(i["kind"] == "file" for i in baseline_inputs)
    assert all(i["path"].endswith("against_inputs.pt") for i in baseline_inputs)


def test_a_baseline_this_device_cannot_run_names_the_run(tmp_path: Path) -> None:
    # torch 2.11's aoti_cuda.pt2 (CUDA code only, stub binaries) against a cpu session: the
    # device gate skips every stage of the baseline; the reason is the run's
    data = Path(__file__).resolve().parents[1] / "data" / "torch211" / "aoti_cuda.pt2"
    _, findings, records, _ = run_stages(tmp_path, perf_options(against=str(data)))
    ((_, base),) = records
    assert base is None and [f.code for f in findings] == ["AOT654"]
    assert f"the baseline package {data} could not be measured (run: not run on cpu" in (
        findings[0].message
    )
