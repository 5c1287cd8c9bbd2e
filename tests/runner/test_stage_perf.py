"""The perf stage: budgets and --against on the fake torch worker's made-up numbers (injected
measurements; tests/fakes/fake_torch_worker.py FAKE_*_PERF, scaled per package by
`__perf_scale__`), then real packages on CPU (numbers present and sane; no timing asserted)."""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from aotipre.findings import Finding, StageResult, StageStatus
from aotipre.pt2.reader import read_package
from aotipre.runner.perf import Budgets
from aotipre.runner.stages import DynamicOptions, PerfOptions, run_dynamic_stages
from tests.fakes.specs import token_model, write_package

FAKE = str(Path(__file__).resolve().parents[1] / "fakes" / "fake_torch_worker.py")


def fake_run(
    tmp_path: Path,
    perf: PerfOptions | None,
    script: dict[str, Any] | None = None,
    path: Path | None = None,
) -> tuple[dict[str, StageResult], list[Finding], list[Any]]:
    """The dynamic stages on the fake worker: of a written token model, or of the real package
    at `path` (read, never loaded: the fake worker opens nothing)."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    if path is None:
        model = token_model()
        package = write_package(tmp_path / "new.pt2", model)
    else:
        package = read_package(path)
        model = package.models[0]
    options = DynamicOptions(
        worker_command=(sys.executable, FAKE),
        extra_env={"AOTIPRE_FAKE_SCRIPT": json.dumps(script or {})},
        cache_dir=str(tmp_path / "cache"),
        timeout_s=30.0,
        probe=False,
        perf=perf,
    )
    records: list[Any] = []
    results, findings = run_dynamic_stages(
        package, model, None, None, options, on_perf=lambda r, b: records.append((r, b))
    )
    return {r.name: r for r in results}, findings, records


def codes(findings: list[Finding]) -> list[str]:
    return sorted(f.code for f in findings)


def test_budgets_fail_the_stage_with_the_measured_numbers(tmp_path: Path) -> None:
    # the fake worker reports load 0.5 s + loader imports 0.5 s, median 1 ms, peak RSS 120 MB
    tight = Budgets(max_load_s=0.9, max_latency_ms=0.5, max_rss_mb=100, max_gpu_mb=1)
    res, findings, records = fake_run(tmp_path, PerfOptions(budgets=tight))
    assert codes(findings) == ["AOT645", "AOT646", "AOT647"]  # no GPU number on cpu
    assert res["perf"].status is StageStatus.FAILED
    load = next(f for f in findings if f.code == "AOT645")
    assert (load.expected, load.actual, load.stage) == (0.9, 1.0, "perf")
    ((rec, base),) = records
    assert base is None and rec.latency.p50_ms == 1.0 and rec.cold.total_s == 1.0
    loose = Budgets(max_load_s=2, max_latency_ms=2, max_rss_mb=200)
    res, findings, _ = fake_run(tmp_path / "b", PerfOptions(budgets=loose))
    assert findings == [] and res["perf"].status is StageStatus.PASSED
    assert res["perf"].detail.startswith("load 1.00 s")


def test_no_perf_measures_nothing(tmp_path: Path) -> None:
    res, findings, records = fake_run(tmp_path, None)
    assert res["perf"].status is StageStatus.SKIPPED and "--no-perf" in res["perf"].detail
    assert findings == [] and records == []


def test_against_a_faster_baseline_is_a_regression(
    tmp_path: Path, pkg: Callable[[str], Path]
) -> None:
    old = tmp_path / "old.pt2"
    shutil.copy(pkg("aoti"), old)
    # aoti.pt2's made-up numbers x2.5 against the same package as old.pt2 (x1): load 1 s ->
    # 2.5 s, median 1 -> 2.5 ms, peak RSS 120 -> 300 MB: each beyond 20% and its noise floor
    script = {"__perf_scale__": {"aoti.pt2": 2.5}}
    new = pkg("aoti")
    res, findings, records = fake_run(
        tmp_path / "a", PerfOptions(against=str(old), tolerance=0.2), script, new
    )
    assert codes(findings) == ["AOT650", "AOT651", "AOT652"]
    assert res["perf"].status is StageStatus.FAILED
    assert "against: load 1.00 s" in res["perf"].detail
    # a budget the baseline misses too does not make it unmeasurable: still compared
    over = PerfOptions(against=str(old), tolerance=0.2, budgets=Budgets(max_load_s=0.5))
    res, findings, _ = fake_run(tmp_path / "budget", over, script, new)
    assert codes(findings) == ["AOT645", "AOT650", "AOT651", "AOT652"], findings
    ((rec, base),) = records
    assert base is not None and base.package.endswith("old.pt2")
    assert rec.cold.total_s == 2.5 and base.cold.total_s == 1.0
    lat = next(f for f in findings if f.code == "AOT651")
    assert (lat.expected, lat.actual) == (1.0, 2.5) and "+150%" in lat.message
    # within the tolerance: nothing
    res, findings, _ = fake_run(
        tmp_path / "c", PerfOptions(against=str(old), tolerance=2.0), script, new
    )
    assert findings == [] and res["perf"].status is StageStatus.PASSED


def test_a_baseline_that_cannot_be_measured_is_said(
    tmp_path: Path, pkg: Callable[[str], Path]
) -> None:
    res, findings, _ = fake_run(tmp_path / "x", PerfOptions(against=str(tmp_path / "nope.pt2")))
    assert codes(findings) == ["AOT654"] and "nope.pt2" in findings[0].message
    assert res["perf"].status is StageStatus.FAILED
    # a baseline without the model
    res, findings, _ = fake_run(tmp_path / "y", PerfOptions(against=str(pkg("multi"))))
    assert codes(findings) == ["AOT654"]
    assert "no model 'model'" in findings[0].message and "encoder" in findings[0].message
    # not a package at all
    junk = tmp_path / "junk.pt2"
    junk.write_bytes(b"not a zip")
    res, findings, _ = fake_run(tmp_path / "z", PerfOptions(against=str(junk)))
    assert codes(findings) == ["AOT654"] and "zip" in findings[0].message


# --------------------------------------------------------------------------------------------
# Real packages (CPU)


@pytest.mark.slow
def test_perf_stage_on_a_real_package(pkg: Callable[[str], Path], tmp_path: Path) -> None:
    from aotipre import CheckOptions, check
    from aotipre.report import render_report

    report = check(
        pkg("aoti"),
        CheckOptions(
            inputs=str(pkg("aoti_inputs")),
            dynamic=DynamicOptions(
                probe=False, perf=PerfOptions(runs=6, against=str(pkg("both")), tolerance=1e6)
            ),
        ),
    )
    st = {s.name: s for s in report.stages}
    assert st["perf"].status in (StageStatus.PASSED, StageStatus.FAILED), st["perf"].detail
    # the comparison runs; what it decides is test_perf.py's (fixed measurements): timings of a
    # shared 2-core machine are noise (a test on the other core once made the fastest of six
    # calls 220x slower than the baseline's), so no tolerance a real regression would exceed
    assert not [f for f in report.findings if f.code.startswith("AOT65")]
    data = json.loads(render_report(report, "json"))
    (perf,) = data["performance"]
    cold, mem, lat = perf["cold"], perf["memory"], perf["latency"]
    assert cold["fresh_process"] is True
    assert cold["total_s"] >= cold["load_s"] > 0 and cold["loader_s"] > 0
    assert cold["extraction_bytes"] > 0 and cold["extraction_files"] >= 3
    assert 0 <= cold["extraction_s"] <= cold["loader_s"]
    assert cold["probe_programs"] >= 0 and cold["first_call_s"] > 0
    assert mem["host_peak"] >= mem["host_peak_after_load"] > 100 * 2**20
    assert mem["gpu_peak"] is None
    assert lat["runs"] == 6 and lat["min_ms"] <= lat["p50_ms"] <= lat["p99_ms"] <= lat["max_ms"]
    against = perf["against"]
    assert against["package"].endswith("both.pt2") and against["latency"]["runs"] == 6
    # a package that also holds the ExportedProgram: load_pt2 deserializes it at every load
    assert against["cold"]["exported_program_s"] > 0
    assert "load " in st["perf"].detail and "against: load" in st["perf"].detail
    for fmt in ("table", "markdown", "junit", "sarif", "github"):
        assert render_report(report, fmt)


@pytest.mark.slow
@pytest.mark.parametrize("busy", [False, True], ids=["quiet", "another-process-busy"])
def test_a_real_package_against_itself_never_regresses(
    pkg: Callable[[str], Path], tmp_path: Path, busy: bool
) -> None:
    """Issue #46/#49: an identical copy as the baseline, with an empty cache (the first load
    probes and records the host's load cost, so a later load could take the C++ loader alone),
    and with a process spinning on a core: no measure (load, host memory, latency, GPU memory
    where there is one) is ever a regression. Inconclusive (AOT655) is allowed; timings are not
    asserted."""
    import subprocess

    copy = tmp_path / "copy.pt2"
    shutil.copy(pkg("aoti"), copy)
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if busy else None
    try:
        res, findings, records = _real_against(pkg("aoti"), pkg("aoti_inputs"), copy, tmp_path)
    finally:
        if spinner is not None:
            spinner.kill()
            spinner.wait()
    assert res["perf"].status in (StageStatus.PASSED, StageStatus.FAILED), res["perf"].detail
    ((rec, base),) = records
    # every measure was taken on both sides
    assert rec.cold is not None and base is not None and base.cold is not None
    assert rec.memory.host_peak and base.memory.host_peak and base.latency is not None
    assert [f for f in findings if f.code in ("AOT650", "AOT651", "AOT652", "AOT653")] == []
    assert [f for f in findings if f.code == "AOT654"] == []


def _real_against(
    package: Path, inputs: Path, against: Path, tmp_path: Path
) -> tuple[dict[str, StageResult], list[Finding], list[Any]]:
    info = read_package(package)
    options = DynamicOptions(
        cache_dir=str(tmp_path / "cache"),
        probe=False,
        perf=PerfOptions(runs=10, against=str(against)),
    )
    records: list[Any] = []
    results, findings = run_dynamic_stages(
        info,
        info.models[0],
        str(inputs),
        None,
        options,
        on_perf=lambda r, b: records.append((r, b)),
    )
    return {r.name: r for r in results}, findings, records
