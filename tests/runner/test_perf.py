"""The perf record and its judgements (budgets, regressions, leaks, advice), on injected
measurements: FAKE_* below are hand-written worker entries shaped like runner/worker/coldstart.py's
`measure_load`, run `perf` and perf.py's `latency_runs` output (test_worker_perf.py checks the real ones)."""

from __future__ import annotations

import copy
import json

from aotipre.findings import codes
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


def repeated(rec: perf.PerfRecord, n: int = perf.MIN_SAMPLES) -> perf.Side:
    """One side measured `n` times with the same figures (no spread at all)."""
    latency = (rec.latency.p50_ms,) * n if rec.latency is not None else ()
    return perf.Side((rec,) * n, latency)


def judge(new: perf.PerfRecord, old: perf.PerfRecord, tolerance: float = 0.2) -> list:
    """--against on MIN_SAMPLES identical rounds of each side: the tolerance and floors alone
    decide (zero spread never overlaps)."""
    return perf.against_judgements(repeated(new), repeated(old), tolerance)


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


def _cuda_record(after_load_mb: float) -> perf.PerfRecord:
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
    found = {c: f for c, _, f in judge(heavy, light)}
    assert found == {"AOT653": {"expected": 2.0, "actual": 300.0}}
    # +20 MB is over the 20% tolerance but under the 32 MB floor
    assert judge(_cuda_record(22), light) == []


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
    same = judge(record(), old)
    assert same == []
    # loads compared without the CPU-ISA probe (5 s of each): 2.5 s -> 5.5 s: +120%
    load = dict(FAKE_LOAD, total_s=9.0)
    latency = dict(FAKE_LATENCY, p50_ms=2.2, min_ms=1.65)  # +10%: inside the tolerance
    run = {"call_s": 0.002, "memory_after": {"host": {"peak_rss": 1600 * MB}}}
    found = {c: f for c, _, f in judge(record(load, run, latency), old)}
    assert set(found) == {"AOT650", "AOT652"}
    assert found["AOT650"] == {"expected": 2.5, "actual": 5.5}
    # the same package whose probe compiled its check programs (the baseline, loaded after
    # it, found them built): 7 s more of probe is the host's, not the package's
    slow_probe = copy.deepcopy(FAKE_LOAD)
    slow_probe["total_s"] = 13.0
    slow_probe["probe"]["seconds"] = 12.0
    assert judge(record(slow_probe), old) == []
    # above the relative tolerance but below the absolute floor: noise, not a regression
    tiny = dict(FAKE_LATENCY, p50_ms=0.01, min_ms=0.01)
    tinier = dict(FAKE_LATENCY, p50_ms=0.03, min_ms=0.03)
    assert judge(record(latency=tinier), record(latency=tiny)) == []
    strict = judge(record(latency=latency), old, tolerance=0.05)
    assert [c for c, _, _ in strict] == ["AOT651"]
    slower = dict(FAKE_LATENCY, p50_ms=6.8, min_ms=5.0)
    assert [c for c, _, _ in judge(record(latency=slower), old)] == ["AOT651"]


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
        + judge(record(dict(FAKE_LOAD, total_s=60.0)), rec)
    )
    for code, message, fields in made:
        entry = codes.get(code)
        assert entry.category.value == "performance"
        entry.finding(message, **fields)  # the fields are Finding fields


def test_summary_names_the_parts() -> None:
    text = perf.summary(record())
    assert text.startswith("load 7.50 s (ISA probe 5.00 s, extract 0.70 s, dlopen+constants")
    assert "first call 2.0 ms" in text and "p50 2.000 ms" in text and "peak RSS 1100 MB" in text


def test_a_budget_is_met_exactly_at_its_limit() -> None:
    rec = record()  # load 7.5 s, median 2.0 ms, peak RSS 1100 MB
    at = perf.Budgets(max_load_s=7.5, max_latency_ms=2.0, max_rss_mb=1100)
    assert perf.budget_judgements(rec, at) == []
    past = perf.Budgets(max_load_s=7.25, max_latency_ms=1.75, max_rss_mb=1099.5)
    found = {c: f for c, _, f in perf.budget_judgements(rec, past)}
    assert found == {
        "AOT645": {"expected": 7.25, "actual": 7.5},
        "AOT646": {"expected": 1.75, "actual": 2.0},
        "AOT647": {"expected": 1099.5, "actual": 1100.0},
    }
    assert perf.budget_judgements(_cuda_record(64), perf.Budgets(max_gpu_mb=64)) == []
    found = {
        c: f for c, _, f in perf.budget_judgements(_cuda_record(65), perf.Budgets(max_gpu_mb=64))
    }
    assert found == {"AOT648": {"expected": 64, "actual": 65.0}}


def test_budget_findings_carry_the_rounded_measure() -> None:
    load = dict(FAKE_LOAD, total_s=6.0123456)  # with the 1.5 s of imports: 7.5123456 s
    latency = dict(FAKE_LATENCY, p50_ms=2.123456)
    run = {"call_s": 0.002, "memory_after": {"host": {"peak_rss": 1100 * MB + 147456}}}
    budgets = perf.Budgets(max_load_s=7.0, max_latency_ms=2.0, max_rss_mb=1000)
    found = {c: (m, f) for c, m, f in perf.budget_judgements(record(load, run, latency), budgets)}
    assert found["AOT645"][1] == {"expected": 7.0, "actual": 7.512}
    assert found["AOT645"][0].startswith("loading took 7.51 s, the budget (max-load-s) is 7 s (")
    assert found["AOT646"][1] == {"expected": 2.0, "actual": 2.1235}
    assert found["AOT647"][1] == {"expected": 1000, "actual": 1100.1}  # 1100.140625 MB
    gpu = perf.budget_judgements(_cuda_record(64.140625), perf.Budgets(max_gpu_mb=64))
    assert [f for _, _, f in gpu] == [{"expected": 64, "actual": 64.1}]


def _host_record(peak: int) -> perf.PerfRecord:
    load = copy.deepcopy(FAKE_LOAD)
    load["memory_after"]["host"]["peak_rss"] = peak
    return record(load, {"call_s": 0.002, "memory_after": {"host": {"peak_rss": peak}}})


def test_a_regression_is_beyond_the_tolerance_and_the_floor_not_at_them() -> None:
    # exactly 20% more than the baseline (and 200 MB, well over the floor): not a regression
    assert judge(_host_record(1200 * MB), _host_record(1000 * MB)) == []
    ((code, message, fields),) = judge(_host_record(1201 * MB), _host_record(1000 * MB))
    assert (code, fields) == ("AOT652", {"expected": 1000.0, "actual": 1201.0})
    assert message == (
        "the peak host memory (RSS) is 1201 MB, the baseline package's 1000 MB "
        "(+20%, tolerance 20%); medians of 3 against 3 sample(s), 95% intervals 1201-1201 and "
        "1000-1000 MB, which do not overlap"
    )
    # +32% but exactly the 32 MB floor more than the baseline: not a regression
    assert judge(_host_record(132 * MB), _host_record(100 * MB)) == []
    found = judge(_host_record(133 * MB), _host_record(100 * MB))
    assert [(c, f) for c, _, f in found] == [("AOT652", {"expected": 100.0, "actual": 133.0})]
    assert "(+33%, tolerance 20%)" in found[0][1]


def test_loads_are_compared_only_between_the_same_kind_of_start() -> None:
    slow_cold = record(dict(FAKE_LOAD, total_s=9.0))
    warm = record(dict(FAKE_LOAD, probe_cached=True))
    assert [c for c, _, _ in judge(slow_cold, record())] == ["AOT650"]
    assert judge(slow_cold, warm) == []
    assert judge(record(dict(FAKE_LOAD, total_s=9.0, probe_cached=True)), record()) == []
    unmeasured = perf.record_from_worker("model", "cpu", None, FAKE_RUN, FAKE_LATENCY)
    assert judge(unmeasured, record()) == []


def _leaking(series: list[int], per_run: float, runs: int | None = None) -> perf.PerfRecord:
    memory = {"host_rss": series, "host_rss_growth_per_run": per_run}
    return record(latency=dict(FAKE_LATENCY, runs=runs or len(series), memory=memory))


def test_a_host_leak_message_says_the_growth_in_all() -> None:
    rising = [1000 * MB + i * 8 * MB for i in range(10)]
    ((code, message, fields),) = perf.leak_judgements(_leaking(rising, 8.0 * MB))
    assert (code, fields) == ("AOT642", {"actual": 8 * MB})
    assert message == (
        "host memory grew by 8.0 MB per call over 10 calls (72 MB in all) with the outputs dropped"
    )


def test_a_leak_is_found_from_the_fewest_runs_and_exactly_at_the_threshold() -> None:
    five = [1000 * MB + i * 4 * MB for i in range(5)]
    ((code, message, _),) = perf.leak_judgements(_leaking(five, 4.0 * MB))
    assert code == "AOT642" and "4.0 MB per call over 5 calls (16 MB in all)" in message
    assert perf.leak_judgements(_leaking(five[:4], 4.0 * MB)) == []
    # exactly 1 MiB a run is a leak, a page less is not
    by_one = [1000 * MB + i * MB for i in range(10)]
    ((code, message, fields),) = perf.leak_judgements(_leaking(by_one, 1.0 * MB))
    assert (code, fields) == ("AOT642", {"actual": MB})
    assert "1.0 MB per call over 10 calls (9 MB in all)" in message
    assert perf.leak_judgements(_leaking(by_one, MB - 4096.0)) == []


def _gpu_leaking(series: list[int], per_run: float) -> perf.PerfRecord:
    memory = {
        "host_rss": [1100 * MB] * len(series),
        "host_rss_growth_per_run": 0.0,
        "gpu_allocated": series,
        "gpu_allocated_growth_per_run": per_run,
    }
    return record(latency=dict(FAKE_LATENCY, runs=len(series), memory=memory))


def test_a_gpu_leak_is_found_exactly_at_64_kib_a_run() -> None:
    series = [MB + i * 64 * 1024 for i in range(10)]
    ((code, message, fields),) = perf.leak_judgements(_gpu_leaking(series, 64 * 1024.0))
    assert (code, fields) == ("AOT643", {"actual": 64 * 1024})
    assert message == (
        "GPU memory (caching allocator) grew by 0.06 MB per call over 10 calls (0.6 MB in all) "
        "with the outputs dropped"
    )
    assert perf.leak_judgements(_gpu_leaking(series, 63 * 1024.0)) == []


def _steps(steps: list[int]) -> list[int]:
    series = [1000 * MB]
    for step in steps:
        series.append(series[-1] + step)
    return series


def test_a_leak_grows_in_at_least_60_percent_of_the_steps() -> None:
    up = 8 * MB
    # 6 of 10 steps rising: a leak; 5 of 10 (every other step flat): not one
    six = _steps([up, 0] * 4 + [up, up])
    assert [c for c, _, _ in perf.leak_judgements(_leaking(six, 4.0 * MB))] == ["AOT642"]
    five = _steps([up, 0] * 5)
    assert perf.leak_judgements(_leaking(five, 4.0 * MB)) == []
    # the steps are between consecutive runs: a sawtooth that rises every other run is not
    saw = _steps([up, -up // 2] * 5)
    assert perf.leak_judgements(_leaking(saw, 4.0 * MB)) == []
    # a step counts as rising however little it grows
    tiny = _steps([up, 0] * 4 + [up, 1])
    assert [c for c, _, _ in perf.leak_judgements(_leaking(tiny, 4.0 * MB))] == ["AOT642"]


def _advice(total_s: float, probe_s: float, extraction: dict | None = None) -> list[perf.Judgement]:
    load = dict(FAKE_LOAD, total_s=total_s, extraction=extraction or {})
    load["probe"] = dict(FAKE_LOAD["probe"], seconds=probe_s)
    return perf.advice_judgements(record(load))


def test_the_probe_is_worth_advice_from_one_second_and_a_fifth_of_the_load() -> None:
    ((code, message, fields),) = _advice(4.0, 1.0)  # exactly 1 s, a quarter of the load
    assert code == "AOT640" and fields["actual"] == 1.0
    assert message.startswith("loading spent 1.00 s of 4.00 s in torch's CPU-ISA probe")
    ((code, _, fields),) = _advice(10.0, 2.0)  # exactly a fifth of the load
    assert code == "AOT640" and fields["actual"] == 2.0
    assert _advice(8.0, 1.0) == []  # a second, but an eighth of the load
    assert _advice(2.0, 0.5) == []  # a quarter of the load, but half a second
    ((_, _, fields),) = _advice(6.0, 1.23456)
    assert fields["actual"] == 1.235


def test_the_extraction_is_worth_advice_from_half_a_second() -> None:
    at = dict(FAKE_LOAD["extraction"], written_s=0.5)
    ((code, message, fields),) = _advice(6.0, 0.0, at)
    assert code == "AOT641" and fields["actual"] == 0.5
    assert message == (
        "every load extracts 700 MB (5 files) of the model into a temporary folder first: "
        "0.50 s of 6.00 s"
    )
    assert _advice(6.0, 0.0, dict(at, written_s=0.25)) == []
    ((_, message, fields),) = _advice(6.0, 0.0, dict(at, written_s=0.56789, bytes=None))
    assert fields["actual"] == 0.568
    assert message.startswith("every load extracts 0 MB (5 files) of the model")


# --------------------------------------------------------------------------------------------
# The --against decision rule on deterministic timing series (what a busy host does to them)


def test_the_interval_around_the_median_is_the_binomial_order_statistics() -> None:
    # 20 samples: the 6th and the 15th smallest hold the median with >= 95% (2 * P(B <= 5) =
    # 0.041, 2 * P(B <= 6) = 0.115); 6 samples: the extremes (96.9%); 5: the extremes (93.8%)
    est = perf.estimate([float(v) for v in range(20, 0, -1)])
    assert est == perf.Estimate(median=10.5, low=6.0, high=15.0, samples=20)
    assert perf.estimate([3.0, 1.0, 2.0, 6.0, 5.0, 4.0]) == perf.Estimate(3.5, 1.0, 6.0, 6)
    assert perf.estimate([2.0, float("nan"), 1.0]) == perf.Estimate(1.5, 1.0, 2.0, 2)
    assert perf.estimate([]) is None


def test_one_sample_of_each_side_is_never_a_regression() -> None:
    # a single pair shows no spread: what differs beyond the tolerance is inconclusive
    found = perf.regression_judgements(_host_record(2000 * MB), _host_record(1000 * MB))
    assert [c for c, _, _ in found] == ["AOT655"]
    assert found[0][1].startswith("inconclusive (noisy host): the peak host memory (RSS) is")
    assert "fewer than 3 samples of each side" in found[0][1]
    assert perf.verdict([2.0, 2.0], [1.0, 1.0], 0.2, 0.0) == perf.INCONCLUSIVE
    assert perf.verdict([2.0] * 3, [1.0] * 3, 0.2, 0.0) == perf.REGRESSION


def _latency_side(samples: list[float]) -> perf.Side:
    return perf.Side((record(),), tuple(samples))


def test_a_burst_on_the_host_in_one_sides_calls_is_inconclusive_fake() -> None:
    # issue #49: an identical copy's calls while another job took the core (15.8 ms against
    # 0.077 ms). Interleaved, a burst slows both sides' calls of that moment; here the burst
    # hit 12 of the package's 20 calls and 8 of the baseline's: medians far apart, intervals
    # overlapping
    quiet = [0.077 + 0.001 * (i % 3) for i in range(20)]
    new = [15.8 if i < 12 else v for i, v in enumerate(quiet)]
    old = [15.8 if i < 8 else v for i, v in enumerate(quiet)]
    found = perf.against_judgements(_latency_side(new), _latency_side(old))
    assert [c for c, _, _ in found] == ["AOT655"]
    assert "the intervals overlap" in found[0][1]
    assert perf.verdict(new, old, 0.2, 0.05) == perf.INCONCLUSIVE


def test_a_real_slowdown_separates_even_with_noise_on_both_sides() -> None:
    # the package 2x slower, and both sides hit by the same 4 bursts (interleaved calls)
    base = [0.10 + 0.002 * (i % 5) for i in range(30)]
    old = [5.0 if i % 8 == 0 else v for i, v in enumerate(base)]
    new = [5.0 if i % 8 == 0 else 2 * v for i, v in enumerate(base)]
    found = perf.against_judgements(_latency_side(new), _latency_side(old))
    assert [c for c, _, _ in found] == ["AOT651"]
    assert "which do not overlap" in found[0][1] and "30 against 30 sample(s)" in found[0][1]
    # within the tolerance, however noisy: nothing
    assert perf.against_judgements(_latency_side(old), _latency_side(list(reversed(old)))) == []


def test_more_rounds_are_wanted_only_while_a_measure_is_inconclusive() -> None:
    one_each = (_latency_side([2.0]), _latency_side([1.0]))
    assert perf.undecided(*one_each, 0.2)
    assert not perf.undecided(_latency_side([2.0] * 3), _latency_side([1.0] * 3), 0.2)
    assert not perf.undecided(_latency_side([1.0]), _latency_side([1.0]), 0.2)
