"""The perf record and its judgements (budgets, regressions, leaks, advice), on injected
measurements: FAKE_* below are hand-written worker entries shaped like runner/worker.py's
`measure_load`, run `perf` and `latency_runs` output (test_worker_perf.py checks the real ones)."""

from __future__ import annotations

import copy
import json

from aotipre import codes
from aotipre.runner import perf

MB = perf.MB

FAKE_LOAD = {
    "fresh_process": True,
    "process_age_s": 2.5,
    "torch_version": "2.13.0+cpu",
    "import_s": 1.5,
    "memory_before": {"host": {"peak_rss": 300 * MB}},
    "probe_cached": False,
    "total_s": 6.0,
    "probe": {
        "seconds": 5.0,
        "check_programs": 10,
        "dlopen_children": 10,
        "gxx_builds": 2,
        "gxx_failed": 1,
        "base_checks": 4,
        "base_checks_s": 2.0,
    },
    "exported_program_s": 0.0,
    "loader_s": 0.9,
    "loader_calls": 1,
    "dlopen_constants_s": 0.2,
    "extraction": {"folder": "/tmp/aotinductor_x", "files": 5, "bytes": 700 * MB, "written_s": 0.7},
    "other_s": 0.1,
    "memory_after": {"host": {"peak_rss": 1000 * MB}},
}
FAKE_RUN = {"call_s": 0.002, "memory_after": {"host": {"peak_rss": 1100 * MB}}}
FAKE_LATENCY = {
    "warmup": 3,
    "runs": 10,
    "p50_ms": 2.0,
    "p99_ms": 3.0,
    "min_ms": 1.5,
    "max_ms": 3.0,
    "mean_ms": 2.1,
    "memory": {"host_rss": [1100 * MB] * 10, "host_rss_growth_per_run": 0.0},
}


def _gpu(used: int, allocated: int = 0) -> dict:
    return {
        "allocated": allocated,
        "max_allocated": allocated,
        "reserved": allocated,
        "max_reserved": allocated,
        "device_used": used,
        "device_total": 80_000 * MB,
    }


def record(load=FAKE_LOAD, run=FAKE_RUN, latency=FAKE_LATENCY, device="cpu") -> perf.PerfRecord:
    return perf.record_from_worker("model", device, load, run, latency)


def test_record_reads_the_worker_entries() -> None:
    rec = record()
    cold = rec.cold
    assert cold is not None and cold.fresh_process
    assert cold.total_s == 1.5 + 6.0
    assert (cold.probe_s, cold.probe_programs, cold.probe_compiles) == (5.0, 10, 2)
    assert (cold.extraction_s, cold.extraction_bytes, cold.first_call_s) == (0.7, 700 * MB, 0.002)
    assert rec.memory.host_peak == 1100 * MB and rec.memory.gpu_peak is None
    assert rec.latency is not None and rec.latency.p50_ms == 2.0
    data = rec.to_dict()
    json.dumps(data)  # plain JSON
    assert data["cold"]["total_s"] == 7.5 and data["memory"]["host_peak"] == 1100 * MB
    assert rec.notes == ()


def test_gpu_memory_is_the_driver_view_minus_before_the_load() -> None:
    load = copy.deepcopy(FAKE_LOAD)
    load["memory_before"]["gpu"] = _gpu(500 * MB)
    load["memory_after"]["gpu"] = _gpu(900 * MB)
    run = copy.deepcopy(FAKE_RUN)
    run["memory_after"]["gpu"] = _gpu(1000 * MB, allocated=64 * MB)
    rec = record(load, run, device="cuda")
    assert rec.memory.gpu_after_load == 400 * MB
    assert rec.memory.gpu_after_run == 500 * MB
    assert rec.memory.gpu_peak == 500 * MB and rec.memory.gpu_max_allocated == 64 * MB


def _cuda_record(after_load_mb: int) -> perf.PerfRecord:
    load = copy.deepcopy(FAKE_LOAD)
    load["memory_before"]["gpu"] = _gpu(500 * MB)
    load["memory_after"]["gpu"] = _gpu((500 + after_load_mb) * MB)
    run = copy.deepcopy(FAKE_RUN)
    run["memory_after"]["gpu"] = _gpu((500 + after_load_mb) * MB, allocated=MB)
    return record(load, run, device="cuda")


def test_gpu_budget_and_gpu_regression_on_injected_numbers_fake() -> None:
    """AOT648 and AOT653 on FAKE_* numbers (the gpu test in tests/gate/test_codes_perf_real.py
    emits them on a CUDA host)."""
    heavy, light = _cuda_record(300), _cuda_record(2)
    found = {c: f for c, _, f in perf.budget_judgements(heavy, perf.Budgets(max_gpu_mb=64))}
    assert found == {"AOT648": {"expected": 64, "actual": 300.0}}
    assert perf.budget_judgements(light, perf.Budgets(max_gpu_mb=64)) == []
    found = {c: f for c, _, f in perf.regression_judgements(heavy, light)}
    assert found == {"AOT653": {"expected": 2.0, "actual": 300.0}}
    # +20 MB is over the 20% tolerance but under the 32 MB floor
    assert perf.regression_judgements(_cuda_record(22), light) == []


def test_a_warm_worker_is_not_a_cold_start() -> None:
    load = dict(FAKE_LOAD, probe_cached=True)
    rec = record(load)
    assert rec.cold is not None and not rec.cold.fresh_process
    assert "not a cold start" in rec.notes[0]
    assert perf.advice_judgements(rec) == []
    assert perf.budget_judgements(rec, perf.Budgets(max_load_s=0.001)) == []
    missing = perf.record_from_worker("m", "cpu", None, None, None)
    assert missing.cold is None and missing.latency is None and "not measured" in missing.notes[0]


def test_budgets() -> None:
    rec = record()
    assert perf.budget_judgements(rec, perf.Budgets()) == []
    tight = perf.Budgets(max_load_s=7.0, max_latency_ms=1.0, max_rss_mb=1000, max_gpu_mb=1)
    found = {code: (msg, f) for code, msg, f in perf.budget_judgements(rec, tight)}
    assert set(found) == {"AOT645", "AOT646", "AOT647"}  # no GPU figure on a CPU run
    assert found["AOT645"][1] == {"expected": 7.0, "actual": 7.5}
    assert "CPU-ISA probe 5.00 s" in found["AOT645"][0]
    assert found["AOT647"][1]["actual"] == 1100.0
    loose = perf.Budgets(max_load_s=8.0, max_latency_ms=2.5, max_rss_mb=2000, max_gpu_mb=1)
    assert perf.budget_judgements(rec, loose) == []


def test_regressions_need_the_tolerance_and_the_floor() -> None:
    old = record()
    same = perf.regression_judgements(record(), old)
    assert same == []
    # loads compared without the CPU-ISA probe (5 s of each): 2.5 s -> 5.5 s: +120%
    load = dict(FAKE_LOAD, total_s=9.0)
    latency = dict(FAKE_LATENCY, p50_ms=2.2, min_ms=1.65)  # +10%: inside the tolerance
    run = {"call_s": 0.002, "memory_after": {"host": {"peak_rss": 1600 * MB}}}
    found = {c: f for c, _, f in perf.regression_judgements(record(load, run, latency), old)}
    assert set(found) == {"AOT650", "AOT652"}
    assert found["AOT650"] == {"expected": 2.5, "actual": 5.5}
    # the same package whose probe compiled its check programs (the baseline, loaded after
    # it, found them built): 7 s more of probe is the host's, not the package's
    slow_probe = copy.deepcopy(FAKE_LOAD)
    slow_probe["total_s"] = 13.0
    slow_probe["probe"]["seconds"] = 12.0
    assert perf.regression_judgements(record(slow_probe), old) == []
    # above the relative tolerance but below the absolute floor: noise, not a regression
    tiny = dict(FAKE_LATENCY, p50_ms=0.01, min_ms=0.01)
    tinier = dict(FAKE_LATENCY, p50_ms=0.03, min_ms=0.03)
    assert perf.regression_judgements(record(latency=tinier), record(latency=tiny)) == []
    strict = perf.regression_judgements(record(latency=latency), old, tolerance=0.05)
    assert [c for c, _, _ in strict] == ["AOT651"]
    # a median moved by scheduling while the fastest call is as fast as the baseline's
    jittered = dict(FAKE_LATENCY, p50_ms=6.8)
    assert perf.regression_judgements(record(latency=jittered), old) == []
    slower = dict(FAKE_LATENCY, p50_ms=6.8, min_ms=5.0)
    assert [c for c, _, _ in perf.regression_judgements(record(latency=slower), old)] == ["AOT651"]


def test_leaks_need_steady_growth() -> None:
    rising = [1000 * MB + i * 4 * MB for i in range(10)]
    leaky = dict(FAKE_LATENCY, memory={"host_rss": rising, "host_rss_growth_per_run": 4.0 * MB})
    ((code, message, _),) = perf.leak_judgements(record(latency=leaky))
    assert code == "AOT642" and "4.0 MB per call over 10 calls" in message
    # one jump (an allocator arena) is not a leak, even with the same slope
    jump = [1000 * MB] * 5 + [1040 * MB] * 5
    once = dict(FAKE_LATENCY, memory={"host_rss": jump, "host_rss_growth_per_run": 4.0 * MB})
    assert perf.leak_judgements(record(latency=once)) == []
    gpu = [i * 128 * 1024 for i in range(10)]
    gpu_leak = dict(
        FAKE_LATENCY,
        memory={
            "host_rss": [1] * 10,
            "host_rss_growth_per_run": 0.0,
            "gpu_allocated": gpu,
            "gpu_allocated_growth_per_run": 128 * 1024.0,
        },
    )
    assert [c for c, _, _ in perf.leak_judgements(record(latency=gpu_leak))] == ["AOT643"]
    few = dict(leaky, runs=3)
    assert perf.leak_judgements(record(latency=few)) == []


def test_advice_on_the_probe_and_the_extraction() -> None:
    found = {c: (m, f) for c, m, f in perf.advice_judgements(record())}
    assert set(found) == {"AOT640", "AOT641"}
    probe_msg, probe = found["AOT640"]
    assert "5.00 s of 6.00 s" in probe_msg and "10 check programs" in probe_msg
    assert "1 failed" in probe_msg and "compiles it again" in probe_msg
    assert "TORCHINDUCTOR_VEC_ISA_OK=1 skips 2.00 s" in probe["hint"]
    assert "700 MB (5 files)" in found["AOT641"][0]
    assert "AOTIModelPackageLoader(folder" in found["AOT641"][1]["hint"]
    cheap = dict(FAKE_LOAD, probe=dict(FAKE_LOAD["probe"], seconds=0.5), extraction={})
    assert perf.advice_judgements(record(cheap)) == []


def test_folder_hint_follows_the_torch_version() -> None:
    assert "aoti_load_package" in perf.folder_hint("2.15.0+cu130")
    assert "AOTIModelPackageLoader(folder" in perf.folder_hint("2.13.0+cpu")
    assert "only from the .pt2" in perf.folder_hint("2.11.0")
    assert "only from the .pt2" in perf.folder_hint(None)


def test_every_judgement_code_is_in_the_table_as_performance() -> None:
    rec = record()
    made = (
        perf.advice_judgements(rec)
        + perf.budget_judgements(rec, perf.Budgets(0.1, 0.1, 1, 1))
        + perf.regression_judgements(record(dict(FAKE_LOAD, total_s=60.0)), rec)
    )
    for code, message, fields in made:
        entry = codes.get(code)
        assert entry.category.value == "performance"
        entry.finding(message, **fields)  # the fields are Finding fields


def test_summary_names_the_parts() -> None:
    text = perf.summary(record())
    assert text.startswith("load 7.50 s (ISA probe 5.00 s, extract 0.70 s, dlopen+constants")
    assert "first call 2.0 ms" in text and "p50 2.000 ms" in text and "peak RSS 1100 MB" in text
