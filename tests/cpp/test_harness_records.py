"""Reading the C++ harness's records: the worker's run_harness against a fake harness (phases,
exit, signal, timeout, its JSON line), and the findings each kind of record becomes."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from aotipre.cpp import harness as cpp
from aotipre.findings import Severity

FAKE = Path(__file__).resolve().parents[1] / "fakes" / "fake_harness.sh"


def run_fake(behaviour: str, timeout_s: float = 20.0) -> dict[str, Any]:
    pytest.importorskip("torch")
    from aotipre.runner import worker

    os.environ["FAKE_HARNESS"] = behaviour
    try:
        step = {"binary": str(FAKE), "package": "p.pt2", "inputs": "in.pt", "mode": "run"}
        return worker.run_harness(step, timeout_s)
    finally:
        del os.environ["FAKE_HARNESS"]


def test_run_harness_reads_the_json_line_and_the_last_phase() -> None:
    rec = run_fake("ok")
    assert rec["returncode"] == 0 and rec["signal"] is None and not rec["timed_out"]
    assert rec["phase"] == "done" and rec["result"]["ok"] is True
    assert rec["argv"][:3] == [str(FAKE), "--package", "p.pt2"]
    run = cpp.HarnessRun.from_entry({"harness": rec})
    assert run is not None and run.ok
    assert cpp.harness_findings(run, model="m", stage="cpp-load", timeout_s=20) == []


def test_a_cpp_exception_while_constructing_is_a_load_failure() -> None:
    run = cpp.HarnessRun.from_entry({"harness": run_fake("raise")})
    assert run is not None and not run.ok and run.returncode == 3
    (f,) = cpp.harness_findings(run, model="m", stage="cpp-load", timeout_s=20)
    assert f.code == "AOT521"
    assert f.message.endswith("constructing the loader: Could not find schema for x::y")


def test_a_signal_is_a_crash_in_the_phase_it_announced() -> None:
    rec = run_fake("segv")
    assert rec["signal"] == "SIGSEGV" and rec["result"] is None and rec["phase"] == "construct"
    assert "Segmentation fault in the loader" in rec["stderr_tail"]
    assert "@@aotipre-cpp-phase" not in rec["stderr_tail"]
    run = cpp.HarnessRun.from_entry({"harness": rec})
    assert run is not None
    (f,) = cpp.harness_findings(run, model="m", stage="cpp-load", timeout_s=20)
    assert f.code == "AOT523" and "SIGSEGV while constructing the loader" in f.message
    assert "(AOTIModelPackageLoader construction)" in f.message
    assert "Segmentation fault in the loader" in f.evidence


def test_a_hang_is_killed_and_a_timeout() -> None:
    rec = run_fake("hang", timeout_s=1.0)
    assert rec["timed_out"] and rec["returncode"] is None
    run = cpp.HarnessRun.from_entry({"harness": rec})
    assert run is not None
    (f,) = cpp.harness_findings(run, model="m", stage="cpp-load", timeout_s=1)
    assert f.code == "AOT524"


def test_a_broken_json_line_is_no_result() -> None:
    rec = run_fake("garbage")
    assert rec["returncode"] == 0 and rec["result"] is None
    run = cpp.HarnessRun.from_entry({"harness": rec})
    assert run is not None and not run.ok
    (f,) = cpp.harness_findings(run, model="m", stage="cpp-load", timeout_s=20)
    assert f.code == "AOT523" and "without a result" in f.message


def _record(result: dict[str, Any], returncode: int = 0, **extra: Any) -> cpp.HarnessRun:
    rec = {"returncode": returncode, "signal": None, "timed_out": False, "phase": "done"}
    rec.update(result=result, **extra)
    run = cpp.HarnessRun.from_entry({"harness": rec})
    assert run is not None
    return run


def test_run_phase_errors_and_concurrency_outcomes() -> None:
    failed_run = _record(
        {"mode": "run", "ok": False, "error_phase": "run", "error": {"message": "boom"}}, 3
    )
    (f,) = cpp.harness_findings(failed_run, model="m", stage="cpp-load", timeout_s=9)
    assert f.code == "AOT522" and "running the model: boom" in f.message

    rows = [{"thread": 0, "max_abs": 0.0}, {"thread": 1, "max_abs": 0.25}]
    differ = _record(
        {
            "mode": "runners",
            "ok": False,
            "identical": False,
            "threads": 2,
            "runners": 2,
            "iterations": 3,
            "per_thread": rows,
            "error": None,
        },
        4,
    )
    (f,) = cpp.harness_findings(differ, model="m", stage="concurrency", timeout_s=9)
    assert f.code == "AOT527" and "largest absolute difference 0.25" in f.message
    assert "num_runners=2, 2 threads x 3 runs" in f.message

    crashed = cpp.HarnessRun.from_entry(
        {
            "harness": {
                "returncode": -6,
                "signal": "SIGABRT",
                "timed_out": False,
                "phase": "concurrent_construct",
                "result": None,
            }
        },
        "loaders",
    )
    assert crashed is not None
    (f,) = cpp.harness_findings(
        crashed, model="m", stage="concurrency", timeout_s=9, known_race=True
    )
    assert (
        f.code == "AOT526" and "SIGABRT during constructing the loaders concurrently" in f.message
    )
    assert "#194128" in f.message
    assert f.severity is Severity.ERROR  # a crash is not known to be the race: an error


def test_a_hit_of_the_known_race_is_a_warning_else_an_error() -> None:
    # the harness's JSON when 1 of 4 concurrently constructed loaders raised, as measured on
    # torch 2.13 (about 1 run in 15) and torch 2.11 on an H200 (about 1 run in 2, with a JSON
    # type_error, SIGSEGV or SIGABRT too): torch #194128's shared JSON object read mid-parse
    retry = {"argv": ["aotipre_harness", "--mode", "loaders", "--serial-construct"]}

    def loaders(message: str, serial: bool = False) -> cpp.HarnessRun:
        threads: list[dict[str, Any]] = [{"thread": i, "error": None} for i in range(4)]
        threads[2] = {"thread": 2, "error_phase": "construct",
                      "error": {"type": "c10::Error", "message": message}}  # fmt: skip
        result = {"mode": "loaders", "ok": False, "threads": 4, "per_thread": threads,
                  "error_phase": "construct", "error": {"message": message},
                  "serial_construct": serial}  # fmt: skip
        return _record(result, 3, **(retry if serial else {}))

    passed = _record({"mode": "loaders", "ok": True, "serial_construct": True}, 0, **retry)
    crashed = cpp.HarnessRun.from_entry(
        {"harness": {"returncode": -11, "signal": "SIGSEGV", "phase": "concurrent_construct"}},
        "loaders",
    )
    assert crashed is not None
    for failed in (loaders("No device information found."), crashed):
        # the same loaders constructed one at a time passed: the concurrent construction failed
        assert cpp.hit_the_known_race(failed, passed)
        (f,) = cpp.harness_findings(
            failed, model="m", stage="concurrency", timeout_s=9, known_race=True, serial=passed
        )
        assert f.code == "AOT526" and f.severity is Severity.WARNING, f.message
        assert "hit by this run" in f.message and "#194128" in f.message
        assert (
            "constructed one at a time" in f.message and "ran with identical outputs" in f.message
        )
        assert "serialize loader construction" in f.message
        # a torch without the race (or one aotipre could not tell): the same failure is an error
        for known in (False, None):
            (f,) = cpp.harness_findings(
                failed, model="m", stage="concurrency", timeout_s=9, known_race=known, serial=passed
            )
            assert f.severity is Severity.ERROR and "hit by this run" not in f.message
        # no serial run, one that failed too, or a run that was not a serial retry
        not_serial = _record({"mode": "loaders", "ok": True}, 0)
        for serial in (None, loaders("std::bad_alloc", serial=True), not_serial):
            assert not cpp.hit_the_known_race(failed, serial)
            (f,) = cpp.harness_findings(
                failed, model="m", stage="concurrency", timeout_s=9, known_race=True, serial=serial
            )
            assert f.severity is Severity.ERROR
            retried = serial is not None and serial is not not_serial
            assert ("failed too" in f.message) == retried
            # a retry that failed too clears construction: no blame on torch #194128 then
            assert ("#194128" in f.message) == (not retried)
            assert ("not constructing the loaders" in f.message) == retried
    # a hang, or outputs that differ, are never the race
    hung = cpp.HarnessRun.from_entry(
        {"harness": {"timed_out": True, "phase": "compare"}}, "loaders"
    )
    assert hung is not None and not cpp.hit_the_known_race(hung, passed)
    rows = [{"thread": 0, "error": None, "max_abs": 0.5}]
    differ = _record({"mode": "loaders", "ok": False, "identical": False, "per_thread": rows}, 4)
    assert not cpp.hit_the_known_race(differ, passed)
    (f,) = cpp.harness_findings(
        differ, model="m", stage="concurrency", timeout_s=9, known_race=True, serial=passed
    )
    assert f.severity is Severity.ERROR and "differ" in f.message
    assert "1 loaders constructed" not in cpp.describe_mode(passed)
    assert "one at a time" in cpp.describe_mode(passed)


def test_the_serial_retry_runs_only_after_a_failure() -> None:
    step = cpp.run_step("cpp_loaders", mode="loaders", package="p", model="m", inputs="i")
    retry = cpp.serial_retry(step)
    assert retry["id"] == cpp.serial_id("cpp_loaders") == "cpp_loaders_serial"
    assert retry["serial_construct"] is True and retry["only_if_failed"] == "cpp_loaders"
    assert retry["requires"] == step["requires"] and "serial_construct" not in step


def test_steps_are_planned_with_their_prerequisites(tmp_path: Path) -> None:
    root = cpp.cache_root(None, False, str(tmp_path))
    assert root == str(tmp_path / "cpp-harness")
    assert cpp.cache_root("/c", True, str(tmp_path)) == "/c/cpp-harness"
    build = cpp.build_step(root)
    assert build["source"].endswith("harness.cpp") and os.path.isfile(build["source"])
    step = cpp.run_step("x", mode="loaders", package="p", model="m", inputs="i", threads=3)
    assert step["binary_from"] == "cpp_build" and step["threads"] == 3
    assert step["requires"] == ["cpp_build", "cpp_inputs"]
    with pytest.raises(ValueError):
        cpp.run_step("x", mode="nope", package="p", model="m", inputs="i")


def test_a_crash_without_a_result_keeps_the_mode_it_was_asked_for() -> None:
    # measured on an H200: 4 CUDA loaders constructed at once died by SIGABRT ("free(): unaligned
    # chunk detected in tcache 2") before the harness wrote its JSON line
    rec = {"returncode": -6, "signal": "SIGABRT", "phase": "concurrent_construct", "result": None}
    argv = ["aotipre_harness", "--package", "p.pt2", "--mode", "loaders", "--threads", "4"]
    crashed = cpp.HarnessRun.from_entry({"harness": {**rec, "argv": argv}})
    assert crashed is not None and crashed.mode == "loaders"
    assert cpp.HarnessRun.from_entry({"harness": rec}, "runners").mode == "runners"  # type: ignore[union-attr]
    assert "4 loaders constructed at once" in cpp.describe_mode(crashed)


def test_a_single_run_that_hangs_skips_the_concurrent_runs(tmp_path: Path) -> None:
    """The real worker, a fake harness that hangs: the concurrency stage's three harness runs
    (planned by it with only_if_passed) are skipped instead of each waiting out the step limit
    (at the default --timeout 300 a hanging model cost four timeouts, ~18 minutes)."""
    pytest.importorskip("torch")
    import json
    import subprocess
    import sys

    from aotipre.runner import launch

    run = {"id": "cpp_run", "op": "cpp_run", "binary": str(FAKE), "package": "p.pt2",
           "inputs": "in.pt", "mode": "run", "timeout_s": 2.0}  # fmt: skip
    loaders = {**run, "id": "cpp_loaders", "mode": "loaders", "only_if_passed": "cpp_run"}
    serial = cpp.serial_retry(loaders)
    job = {"protocol": 1, "tag": "t", "workdir": str(tmp_path), "device": "cpu",
           "package": "p.pt2", "model": "model", "steps": [run, loaders, serial]}  # fmt: skip
    (tmp_path / "job.json").write_text(json.dumps(job))
    result = tmp_path / "result.json"
    proc = subprocess.run(
        [sys.executable, launch.WORKER_PATH, str(tmp_path / "job.json")],
        env={**os.environ, "AOTIPRE_RESULT_PATH": str(result), "FAKE_HARNESS": "hang"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    steps = json.loads(result.read_text())["steps"]
    assert steps["cpp_run"]["harness"]["timed_out"]
    for sid in ("cpp_loaders", "cpp_loaders_serial"):
        assert steps[sid]["status"] == "skipped", steps[sid]
        assert steps[sid]["reason"] == "cpp_run did not finish"
        assert "harness" not in steps[sid]


def test_the_concurrent_runs_are_planned_only_if_the_single_run_passed() -> None:
    from types import SimpleNamespace

    from aotipre.runner.stages.concurrency import ConcurrencyStage

    opts = SimpleNamespace(cpp=True, extra_env={}, timeout_s=300.0)
    session = SimpleNamespace(
        opts=opts,
        aoti_package="/p.pt2",
        aoti_model="model",
        package=SimpleNamespace(path="/p.pt2"),
        workdir="/w",
        device_index=-1,
        model=SimpleNamespace(mutated_buffers=()),
        reference=SimpleNamespace(path=None, model=None),
    )
    planned = ConcurrencyStage().plan(session)  # type: ignore[arg-type]
    assert [p.id for p in planned] == ["cpp_loaders", "cpp_loaders_serial", "cpp_runners"]
    assert all(p.body["only_if_passed"] == "cpp_run" for p in planned)
    assert not any(p.body.get("stateful") for p in planned)
    session.model = SimpleNamespace(mutated_buffers=("mean",))  # a model that mutates a buffer
    runners = ConcurrencyStage().plan(session)[-1]  # type: ignore[arg-type]
    assert runners.id == "cpp_runners" and runners.body["stateful"] is True


def test_a_hang_says_the_time_the_harness_had() -> None:
    # the worker gives the harness 0.9 x the step's limit less 1 s (it must report the hang
    # before its own watchdog fires): the finding says that, not the step's limit
    for mode, code in (("run", "AOT524"), ("loaders", "AOT526"), ("runners", "AOT527")):
        rec = {"timed_out": True, "phase": "run", "limit_s": 12.5, "argv": ["h", "--mode", mode]}
        hung = cpp.HarnessRun.from_entry({"harness": rec}, mode)
        assert hung is not None and hung.limit_s == 12.5
        (f,) = cpp.harness_findings(hung, model="m", stage="cpp-load", timeout_s=15)
        assert f.code == code and "within 12.5 s (of the step's 15 s limit)" in f.message
        older = cpp.HarnessRun.from_entry({"harness": {**rec, "limit_s": None}}, mode)
        assert older is not None
        (g,) = cpp.harness_findings(older, model="m", stage="cpp-load", timeout_s=15)
        assert "within 15 s (" in g.message and "step's" not in g.message


def test_a_stateful_models_runs_unlike_its_sequence_are_a_race_warning() -> None:
    """Runs of a model that mutates buffers (--stateful) are judged against its calls made one
    after another: outputs no call returned, or one call's returned twice, are a race on the
    runners' shared buffers (a warning: whether calls overlap is timing); the same record of a
    stateless model is an error."""
    result = {
        "mode": "runners",
        "ok": False,
        "identical": False,
        "threads": 4,
        "runners": 2,
        "iterations": 3,
        "stateful": True,
        "sequence_calls": 13,
        "unmatched": 2,
        "repeated": 1,
        "per_thread": [{"thread": 0, "max_abs": 0.125}],
        "error": None,
    }
    argv = ["h", "--mode", "runners", "--threads", "4", "--iterations", "3"]
    stateful = _record(result, 4, argv=[*argv, "--stateful"])
    assert stateful.stateful
    (f,) = cpp.harness_findings(stateful, model="m", stage="concurrency", timeout_s=9)
    assert f.code == "AOT527" and f.severity is Severity.WARNING
    assert "judged against 13 calls made one after another on a fresh loader" in f.message
    assert "2 output(s) that no call of the sequence returned" in f.message
    assert "largest absolute difference 0.125" in f.message
    assert "1 output(s) that repeat a call's outputs" in f.message
    assert "raced on the buffers the runners share" in f.message

    stateless = _record(result, 4, argv=argv)
    assert not stateless.stateful
    (f,) = cpp.harness_findings(stateless, model="m", stage="concurrency", timeout_s=9)
    assert f.code == "AOT527" and f.severity is Severity.ERROR
    assert "differ between threads or runs" in f.message

    step = cpp.run_step("x", mode="runners", package="p", model="m", inputs="i", stateful=True)
    assert step["stateful"] is True
    step = cpp.run_step("x", mode="loaders", package="p", model="m", inputs="i", stateful=True)
    assert "stateful" not in step  # each loader runs once from its own fresh state
