"""`check` end to end on real packages with custom operators and --cpp (slow): the custom-ops,
cpp-load, concurrency and device-index stages. What plain torch does in a fresh process with
the same packages is shown in test_harness_real.py."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from aotipre import api
from aotipre.checks.custom_ops import Registration
from aotipre.findings import Report, Severity
from aotipre.runner.stages import DynamicOptions

pytestmark = pytest.mark.slow


def check(
    built: Path,
    cache_dir: str,
    package: str,
    *,
    cpp: bool = False,
    registration: Registration | None = None,
    inputs: str | None = "inputs.pt",
) -> Report:
    options = api.CheckOptions(
        inputs=str(built / inputs) if inputs else None,
        dynamic=DynamicOptions(cache_dir=cache_dir, probe=False),
        registration=registration,
        cpp=cpp,
        compile_at_deploy=package.endswith("_ep.pt2"),  # an ExportedProgram-only archive
    )
    return api.check(built / package, options)


def stages(report: Report) -> dict[str, tuple[str, str]]:
    return {s.name: (s.status.value, s.detail) for s in report.stages}


def codes(report: Report) -> list[str]:
    """The warning and error codes (info findings about the package's binaries are not these
    stages' business)."""
    return [f.code for f in report.findings if f.severity.value != "info"]


def test_plain_package_under_the_cpp_loader(built: Path, cache_dir: str) -> None:
    report = check(built, cache_dir, "plain.pt2", cpp=True, inputs="inputs_kw.pt")
    by = stages(report)
    assert by["run"][0] == "passed", by
    assert by["cpp-load"][0] == "passed", by
    assert "2 output(s) identical to the Python loader's" in by["cpp-load"][1]
    assert "num_runners=2, 4 threads x 3 runs at once: identical outputs" in by["concurrency"][1]
    # torch #194128 makes about 1 run in 15 of the concurrent loaders fail on torch 2.13: a
    # warning (AOT526) beside AOT528's, so the verdict does not depend on the run
    race = [f for f in report.findings if f.code == "AOT526"]
    assert by["concurrency"][0] == "passed", (by, report.findings)
    if race:
        assert race[0].severity.value == "warning" and "hit by this run" in race[0].message
    else:
        loaders = "4 loaders constructed at once on 4 threads: identical outputs"
        assert loaders in by["concurrency"][1]
    assert by["device-index"] == (
        "skipped",
        "the package runs on the CPU (device_index applies to CUDA packages)",
    )
    assert by["custom-ops"] == ("skipped", "the model calls no custom operator")
    assert set(codes(report)) <= {"AOT528", "AOT526"}  # the installed torch's known race
    assert report.verdict.value == "pass"
    without = check(built, cache_dir, "plain.pt2", inputs="inputs_kw.pt")
    assert stages(without)["cpp-load"][0] == "skipped"
    assert "--cpp" in stages(without)["cpp-load"][1]


def test_cpp_op_library_missing_then_given(built: Path, cache_dir: str) -> None:
    missing = check(built, cache_dir, "cop.pt2")
    assert codes(missing) == ["AOT120", "AOT121"]  # static warning, then the load's finding
    (f,) = [f for f in missing.findings if f.code == "AOT121"]
    assert f.stage == "load" and "aotipre_test_c::scale3 is not registered" in f.message
    assert "--library PATH" in f.hint
    assert stages(missing)["custom-ops"][0] == "failed"

    lib = str(built / "libaotipre_test_cop.so")
    given = check(
        built, cache_dir, "cop.pt2", cpp=True, registration=Registration(libraries=(lib,))
    )
    by = stages(given)
    shown = os.path.relpath(lib) if lib.startswith(os.getcwd() + os.sep) else lib
    assert by["custom-ops"] == (
        "passed",
        f"calls aotipre_test_c::scale3; registered by --library {shown}",
    ), by
    assert by["cpp-load"][0] == "passed" and "identical" in by["cpp-load"][1], by
    # the installed torch's known race (torch #194128): AOT528 on every --cpp run, and a warning
    # AOT526 when this run's concurrent loaders happen to hit it (about 1 run in 15)
    race = [f for f in given.findings if f.code == "AOT526"]
    for f in race:
        assert f.severity.value == "warning" and "hit by this run" in f.message, f.message
    assert set(codes(given)) <= {"AOT528", "AOT526"}


def test_python_op_exported_program(built: Path, cache_dir: str) -> None:
    bare = check(built, cache_dir, "pyop_ep.pt2", inputs=None)
    (f,) = [f for f in bare.findings if f.code == "AOT121"]
    assert f.stage == "compile" and "aotipre_test::twice is not registered" in f.message
    assert "AOT501" not in codes(bare)

    reg = Registration(imports=("aotipre_test_pyops",), import_path=(str(built),))
    python = check(built, cache_dir, "pyop_ep.pt2", inputs=None, registration=reg)
    by = stages(python)
    assert by["compile"][0] == "passed" and by["run"][0] == "passed", by
    assert by["compare"][0] == "passed", by
    assert python.verdict.value == "pass"

    # compiled, its manifest marks the op as Python-only: the C++ loader cannot run it
    cpp = check(built, cache_dir, "pyop_ep.pt2", inputs=None, registration=reg, cpp=True)
    (f,) = [f for f in cpp.findings if f.code == "AOT122"]
    assert f.stage == "cpp-load" and "torch.library.custom_op" in f.message
    assert stages(cpp)["run"][0] == "passed"


def test_a_hanging_import_costs_one_timeout_and_is_blamed(built: Path, tmp_path: Path) -> None:
    """An --import that never returns: the worker's watchdog cuts it at the step timeout (it used
    to wait for the job's whole budget, the sum of its steps' timeouts plus start-up slack, and
    then blamed the load: AOT516), and the finding is the registration's."""
    (tmp_path / "aotipre_hangs_on_import.py").write_text("import time\ntime.sleep(3600)\n")
    reg = Registration(imports=("aotipre_hangs_on_import",), import_path=(str(tmp_path),))
    options = api.CheckOptions(
        inputs=str(built / "inputs_kw.pt"),
        dynamic=DynamicOptions(cache_dir=str(tmp_path / "cache"), probe=False, timeout_s=5),
        registration=reg,
    )
    report = api.check(built / "plain.pt2", options)
    assert codes(report) == ["AOT123"], report.findings
    (f,) = [f for f in report.findings if f.code == "AOT123"]
    assert "--import aotipre_hangs_on_import" in f.message and "timed out" in f.message
    assert "0:00:05" in f.message and f.stage == "load"  # the worker's 5 s watchdog fired


def test_a_failing_import_is_its_own_finding(built: Path, cache_dir: str) -> None:
    reg = Registration(imports=("aotipre_no_such_module",), import_path=(str(built),))
    report = check(built, cache_dir, "plain.pt2", inputs="inputs_kw.pt", registration=reg)
    assert codes(report) == ["AOT123"]
    (f,) = [f for f in report.findings if f.code == "AOT123"]
    assert "--import aotipre_no_such_module: ModuleNotFoundError" in f.message


SEQUENTIAL = """
import json, sys, torch
pkg, n = sys.argv[1], int(sys.argv[2])
x = torch.ones(4)
runs = []
for _ in range(2):  # two fresh copies: equal state, each called n times on one thread
    m = torch._inductor.aoti_load_package(pkg)
    runs.append([m(x).tolist() for _ in range(n)])
print(json.dumps(runs))
"""


@pytest.fixture(scope="module")
def state_built() -> Path:
    """tests/runner/state_models.py's packages (built once for this module and
    tests/runner/test_state_real.py): `running.pt2` updates a running mean in place."""
    from tests.building import shared_build

    return shared_build(Path(__file__).resolve().parents[1] / "runner" / "state_models.py")


def test_a_stateful_model_is_judged_against_its_sequential_calls(
    state_built: Path, cache_dir: str
) -> None:
    """A model that updates a running mean returns other outputs at every call; the runners'
    concurrent calls are judged against as many calls made one after another on a fresh
    loader, not against one run. Plain torch first: one copy called 13 times in sequence
    changes its outputs at every call, and two fresh copies return the same sequence."""
    import json
    import subprocess
    import sys

    from aotipre.runner.stages.concurrency import ITERATIONS, THREADS

    calls = 1 + THREADS * ITERATIONS
    proc = subprocess.run(
        [sys.executable, "-c", SEQUENTIAL, str(state_built / "running.pt2"), str(calls)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    first, second = json.loads(proc.stdout.strip().splitlines()[-1])
    assert all(a != b for a, b in zip(first, first[1:]))  # every call changes the outputs
    assert first == second  # equal state, the same sequence

    report = check(state_built, cache_dir, "running.pt2", cpp=True)
    status, detail = stages(report)["concurrency"]
    assert status == "passed", (detail, report.findings)
    assert f"judged against {calls} calls made one after another on a fresh loader" in detail
    raced = [f for f in report.findings if f.code == "AOT527"]
    for f in raced:  # overlapping calls really race on the shared buffers: timing, a warning
        assert f.severity is Severity.WARNING and "raced on the buffers" in f.message, f.message
    if not raced:
        assert "the outputs of the sequential calls, each once" in detail
    assert not [f for f in report.findings if f.severity is Severity.ERROR], report.findings
