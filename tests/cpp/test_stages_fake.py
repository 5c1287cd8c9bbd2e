"""How the custom-ops, cpp-load and concurrency stages read their steps' records, with the FAKE
torch worker (tests/fakes/fake_torch_worker.py) playing scripted records: the real harness and
registration are exercised in test_harness_real.py and test_stages_real.py."""

from __future__ import annotations

from typing import Any

import pytest

from aotipre.findings import StageStatus
from aotipre.runner.stages import libstdcxx
from tests.runner.test_stages import Run, codes, run  # noqa: F401  (the fake-worker fixture)


def harness(result: dict[str, Any] | None, **rec: Any) -> dict[str, Any]:
    """A cpp_run record as the worker's run_harness writes it."""
    base = {"returncode": 0, "signal": None, "timed_out": False, "phase": "done"}
    return {"entry": {"harness": {**base, "result": result, **rec}}}


OK_RUN = {"mode": "run", "ok": True, "construct_s": 0.01, "run_s": 0.02, "outputs": []}
CPP_OK = {
    "cpp_build": {"entry": {"binary": "/fake/aotipre_harness", "loader_race": False}},
    "cpp_run": harness(OK_RUN),
    "cpp_compare": {
        "entry": {"structure": None, "outputs": [{"mismatches": 0}], "identical": True}
    },
    "cpp_loaders": harness({"mode": "loaders", "ok": True, "identical": True, "threads": 4}),
    "cpp_runners": harness({"mode": "runners", "ok": True, "identical": True, "threads": 4}),
}


def test_cpp_stages_pass_on_good_records(run: Run) -> None:  # noqa: F811
    res, findings = run(script=CPP_OK, cpp=True, probe=False)  # the probes: tests/runner
    assert findings == []
    assert res["cpp-load"].status is StageStatus.PASSED
    assert "1 output(s) identical to the Python loader's" in res["cpp-load"].detail
    assert res["concurrency"].status is StageStatus.PASSED
    assert res["custom-ops"].detail == "the model calls no custom operator"
    off, _ = run(script=CPP_OK)
    assert off["cpp-load"].status is StageStatus.SKIPPED and "--cpp" in off["cpp-load"].detail


DIFFERS = {
    "index": 0, "kind": "tensor", "dtype": "float32", "shape": [3, 4], "numel": 12,
    "mismatches": 3, "max_abs": 0.5, "rtol": 1e-5, "atol": 1e-5, "worst_index": [1, 2],
    "worst_aoti": 1.5, "worst_eager": 1.0,
}  # fmt: skip


def test_cpp_outputs_that_differ_and_a_concurrent_crash(run: Run) -> None:  # noqa: F811
    script = {
        **CPP_OK,
        "cpp_build": {"entry": {"binary": "/fake/aotipre_harness", "loader_race": True}},
        "cpp_compare": {"entry": {"structure": None, "outputs": [DIFFERS]}},
        "cpp_loaders": harness(
            None, returncode=-11, signal="SIGSEGV", phase="concurrent_construct"
        ),
    }
    res, findings = run(script=script, cpp=True, probe=False)
    assert codes(findings) == ["AOT525", "AOT528", "AOT526"]
    assert "largest absolute difference 0.5" in findings[0].message
    # the output that differs, with its worst element on both sides, C++ first
    assert findings[0].evidence == (
        "output 0 (float32[3, 4]): 3 of 12 elements differ beyond rtol=1e-05, atol=1e-05; max "
        "abs error 0.5; worst at (1, 2): 1.5 vs Python 1",
    )
    assert "SIGSEGV during constructing the loaders concurrently" in findings[2].message
    assert "#194128" in findings[2].message
    assert res["concurrency"].status is StageStatus.FAILED
    # the same loaders constructed one at a time passed: the known race, a warning
    serial = {"mode": "loaders", "ok": True, "identical": True, "serial_construct": True}
    retry = harness(serial, argv=["aotipre_harness", "--mode", "loaders", "--serial-construct"])
    res, findings = run(script={**script, "cpp_loaders_serial": retry}, cpp=True, probe=False)
    assert codes(findings) == ["AOT525", "AOT528", "AOT526"]
    assert findings[2].severity.value == "warning", findings[2].message
    assert "constructed one at a time" in findings[2].message
    assert res["concurrency"].status is StageStatus.PASSED
    assert "passed constructed one at a time" in res["concurrency"].detail


def test_aot515_says_whether_cpp_deployments_are_affected(
    run: Run,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(libstdcxx, "DIAGNOSED", {})
    if libstdcxx.find_system_libstdcxx() is None:
        pytest.skip("no system libstdc++ on this host")
    monkeypatch.delenv("LD_PRELOAD", raising=False)
    crash = {"load": {"crash": "SIGSEGV", "once": True}}
    ok = {**CPP_OK, **crash, "cpp_run": harness(OK_RUN, unset_env=["LD_PRELOAD"])}
    res, findings = run(script=ok, cpp=True)
    (f,) = [f for f in findings if f.code == "AOT515"]
    assert "only Python processes are affected, C++ deployments are not" in f.message
    monkeypatch.setattr(libstdcxx, "DIAGNOSED", {})
    also = harness(
        None, returncode=-11, signal="SIGSEGV", phase="construct", unset_env=["LD_PRELOAD"]
    )
    res, findings = run(script={**CPP_OK, **crash, "cpp_run": also}, cpp=True)
    (f,) = [f for f in findings if f.code == "AOT515"]
    assert "the C++ loader crashes too (SIGSEGV while constructing the loader)" in f.message
    assert "AOT523" in codes(findings)
    monkeypatch.setattr(libstdcxx, "DIAGNOSED", {})
    res, findings = run(script={**CPP_OK, **crash})
    (f,) = [f for f in findings if f.code == "AOT515"]
    assert f.message.endswith("check again with --cpp, or run aotipre doctor")


def test_missing_op_and_failed_registration(run: Run) -> None:  # noqa: F811
    missing = {
        "load": {
            "error": {"type": "RuntimeError", "message": "Could not find schema for foo::bar."}
        }
    }
    res, findings = run(script=missing)
    assert codes(findings) == ["AOT121"]
    assert findings[0].stage == "load" and "foo::bar is not registered" in findings[0].message
    assert res["custom-ops"].status is StageStatus.FAILED
    failed = {
        "load": {
            "error": {
                "type": "CustomOpsFailed",
                "message": "registering custom operators "
                "failed: --import nope: ModuleNotFoundError: No module named 'nope'",
            }
        }
    }
    res, findings = run(script=failed)
    assert codes(findings) == ["AOT123"] and "--import nope" in findings[0].message
