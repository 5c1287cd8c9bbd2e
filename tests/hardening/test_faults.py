"""Fault injection in the worker layer: workers that die by SIGKILL (the OOM killer), SIGSEGV or
SIGABRT, hang, flood stdout, exit without a result, and Ctrl-C on aotipre itself. Each goes
through the real run_dynamic_stages (or the real CLI), yields the right finding, and leaves no
process, temporary folder or half-written cache entry behind."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from aotipre.findings import Finding, Report, StageResult, StageStatus, Verdict
from aotipre.runner import launch
from aotipre.runner.proc import DEFAULT_MAX_CAPTURE_BYTES, ProcessOutcome, run_process
from aotipre.runner.stages import DynamicOptions, run_dynamic_stages
from tests.fakes.specs import token_model, write_package
from tests.progress_lines import without_progress

FAKES = Path(__file__).resolve().parents[1] / "fakes"
HOSTILE = str(FAKES / "hostile_worker.py")
CLI = str(FAKES / "cli_with_fake_worker.py")
GiB = 1 << 30


def alive(pid: int) -> bool:
    """The process exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def recorded_pids(folder: Path) -> list[int]:
    return [int(p.name.split("-")[1]) for p in folder.iterdir()]


def wait_gone(pids: list[int], timeout_s: float = 5.0) -> list[int]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        left = [p for p in pids if alive(p)]
        if not left:
            return []
        time.sleep(0.05)
    return [p for p in pids if alive(p)]


class Faulty:
    """Runs the dynamic stages with hostile_worker.py; checks that nothing is left behind."""

    def __init__(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.root = tmp_path
        self.pids = tmp_path / "pids"
        self.pids.mkdir()
        self.tmp = tmp_path / "tmp"
        self.tmp.mkdir()
        self.cache = tmp_path / "cache"
        monkeypatch.setattr(tempfile, "tempdir", str(self.tmp))
        monkeypatch.setenv("TMPDIR", str(self.tmp))  # the workers' own temporary files too

    def run(
        self,
        script: dict[str, Any] | None = None,
        hostile: dict[str, Any] | None = None,
        *,
        ep_only: bool = False,
        **opts: Any,
    ) -> tuple[dict[str, StageResult], list[Finding]]:
        model = token_model(aoti=not ep_only)
        package = write_package(self.root / "pkg.pt2", model)
        config = {"pids": str(self.pids), "grandchild": True, **(hostile or {})}
        options = DynamicOptions(
            worker_command=(sys.executable, HOSTILE),
            extra_env={
                "AOTIPRE_FAKE_SCRIPT": json.dumps(script or {}),
                "AOTIPRE_HOSTILE": json.dumps(config),
            },
            cache_dir=str(self.cache),
            **{"timeout_s": 30.0, **opts},
        )
        results, findings = run_dynamic_stages(package, model, None, None, options)
        self.assert_nothing_left()
        return {r.name: r for r in results}, findings

    def assert_nothing_left(self) -> None:
        pids = recorded_pids(self.pids)
        assert pids, "the hostile worker recorded no pid"
        assert wait_gone(pids, 2.0) == [], "a worker or its child outlived the run"
        assert list(self.tmp.iterdir()) == [], "the private temporary folder was not removed"
        if self.cache.exists():
            assert not [p for p in self.cache.iterdir() if p.name.startswith(".tmp-")]


@pytest.fixture
def faulty(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Faulty:
    return Faulty(tmp_path, monkeypatch)


def codes(findings: list[Finding]) -> list[str]:
    return [f.code for f in findings]


SEGV_LOG = "Fatal Python error: Segmentation fault\n"
ABORT_LOG = "terminate called after throwing an instance of 'c10::Error'\n  what():  boom\n"

SIGNAL_FAULTS = [
    # id, script, compile needed, finding, stage whose status is FAILED
    ("oom_sigkill_in_run", {"run": {"crash": "SIGKILL"}}, False, "AOT605", "run"),
    ("sigsegv_in_run", {"run": {"crash": "SIGSEGV", "log": SEGV_LOG}}, False, "AOT604", "run"),
    ("sigabrt_in_run", {"run": {"crash": "SIGABRT", "log": ABORT_LOG}}, False, "AOT603", "run"),
    ("sigsegv_in_load", {"load": {"crash": "SIGSEGV", "log": SEGV_LOG}}, False, "AOT514", "load"),
    ("sigkill_in_compile", {"compile": {"crash": "SIGKILL"}}, True, "AOT502", "compile"),
    ("sigsegv_in_a_probe", {"probe:s0:max": {"crash": "SIGSEGV"}}, False, "AOT610", "probe"),
]


@pytest.mark.parametrize(
    "script, ep_only, code, stage",
    [f[1:] for f in SIGNAL_FAULTS],
    ids=[f[0] for f in SIGNAL_FAULTS],
)
def test_worker_killed_by_a_signal(
    faulty: Faulty, script: dict[str, Any], ep_only: bool, code: str, stage: str
) -> None:
    res, findings = faulty.run(script, ep_only=ep_only)
    assert code in codes(findings)
    assert res[stage].status is StageStatus.FAILED


HANG_FAULTS = [
    # id, script, compile needed, finding, stage
    ("hang_in_run_stopped_by_the_watchdog", {"run": {"hang": True}}, False, "AOT606", "run"),
    ("hang_in_run_past_the_watchdog", {"run": {"hang_hard": True}}, False, "AOT606", "run"),
    ("hang_in_load", {"load": {"hang_hard": True}}, False, "AOT516", "load"),
    ("hang_in_compile", {"compile": {"hang_hard": True}}, True, "AOT503", "compile"),
]


@pytest.mark.parametrize(
    "script, ep_only, code, stage", [f[1:] for f in HANG_FAULTS], ids=[f[0] for f in HANG_FAULTS]
)
def test_hung_worker_is_killed_with_its_whole_process_group(
    faulty: Faulty,
    monkeypatch: pytest.MonkeyPatch,
    script: dict[str, Any],
    ep_only: bool,
    code: str,
    stage: str,
) -> None:
    monkeypatch.setattr(launch, "STARTUP_SLACK_S", 0.5)
    started = time.monotonic()
    res, findings = faulty.run(
        script, ep_only=ep_only, timeout_s=1.0, compile_timeout_s=1.0, probe=False
    )
    assert code in codes(findings)
    assert res[stage].status is StageStatus.FAILED
    assert time.monotonic() - started < 15


ESCAPES = [
    # id, hostile worker config, fake worker script
    ("setsid_escapee_after_a_crash", {"escapee": True}, {"run": {"crash": "SIGSEGV"}}),
    ("setsid_escapee_after_a_clean_exit", {"escapee": True}, {}),
    ("bare_setsid_escapee_of_a_hung_worker", {"escapee_bare": True}, {"run": {"hang_hard": True}}),
    ("extraction_folder_of_a_killed_worker", {"extract": True}, {"run": {"crash": "SIGKILL"}}),
    ("extraction_folder_of_a_clean_exit", {"extract": True}, {}),
]


@pytest.mark.parametrize("hostile, script", [e[1:] for e in ESCAPES], ids=[e[0] for e in ESCAPES])
def test_no_descendant_or_temporary_file_outlives_the_worker(
    faulty: Faulty, monkeypatch: pytest.MonkeyPatch, hostile: dict[str, Any], script: dict
) -> None:
    # A grandchild that calls setsid() leaves the process group that is killed; torch's loader
    # extracts the model's .so into $TMPDIR. Faulty.run asserts that every recorded pid is gone
    # and that the temporary folder is empty afterwards.
    monkeypatch.setattr(launch, "STARTUP_SLACK_S", 0.5)
    faulty.run(script, hostile=hostile, timeout_s=2.0, probe=False)


def test_gigabytes_on_stdout_are_read_in_bounded_memory(
    faulty: Faulty, monkeypatch: pytest.MonkeyPatch
) -> None:
    outcomes: list[ProcessOutcome] = []

    def recording(*args: Any, **kwargs: Any) -> ProcessOutcome:
        outcomes.append(run_process(*args, **kwargs))
        return outcomes[-1]

    monkeypatch.setattr(launch, "run_process", recording)
    tracemalloc.start()
    try:
        res, findings = faulty.run(hostile={"stdout_bytes": 4 * GiB}, probe=False)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert findings == []
    assert res["run"].status is StageStatus.PASSED
    (outcome,) = outcomes
    assert outcome.stdout_total_bytes == 4 * GiB and outcome.stdout_truncated
    assert len(outcome.stdout_tail) <= DEFAULT_MAX_CAPTURE_BYTES
    assert peak < 8 * 1024 * 1024, f"{peak / 2**20:.0f} MiB of Python memory for 4 GiB of stdout"


@pytest.mark.parametrize("how", ["no_result", "garbage_result"])
def test_exit_0_without_a_usable_result_is_an_error_not_a_pass(faulty: Faulty, how: str) -> None:
    res, findings = faulty.run(hostile={how: True})
    assert res["load"].status is StageStatus.ERROR
    assert "worker failed" in res["load"].detail
    assert res["run"].status is StageStatus.SKIPPED
    why = "wrote no result" if how == "no_result" else "not valid JSON"
    assert why in res["load"].detail


def test_exit_0_mid_step_is_an_error_that_says_so_not_a_pass(faulty: Faulty) -> None:
    # os._exit(0) in code the model calls: status 0, a result file that stops at the step
    res, findings = faulty.run({"run": {"exit": 0}})
    assert res["load"].status is StageStatus.PASSED
    assert res["run"].status is StageStatus.ERROR
    assert "exited with code 0" in res["run"].detail
    assert "before step 'run' finished" in res["run"].detail
    report = Report("pkg.pt2", stages=list(res.values()), findings=findings)
    assert report.verdict is Verdict.ERROR and report.exit_code == 2


def test_a_stage_no_worker_reported_on_is_an_error_not_a_skip(faulty: Faulty) -> None:
    # every worker says it is done, none records the run step: the run could not be checked
    res, findings = faulty.run({"run": {"unrecorded": True}}, probe=False)
    assert res["run"].status is StageStatus.ERROR, res["run"]
    assert res["run"].detail.startswith("could not run: no worker reported on step(s) run")
    report = Report("pkg.pt2", stages=list(res.values()), findings=findings)
    assert report.verdict is Verdict.ERROR


def _check_importing(
    tmp_path: Path, pkg: Callable[[str], Path], module: str
) -> tuple[int, dict[str, Any], Path]:
    """The real CLI and worker: `aotipre check aoti.pt2 --import user_ops` (the module's text
    `module`, in a folder of its own, with bytecode writing on as Python has it by default);
    (exit code, JSON report, the module's folder)."""
    mods, tmp = tmp_path / "mods", tmp_path / "tmp"
    mods.mkdir()
    tmp.mkdir()
    (mods / "user_ops.py").write_text(module)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.update(PYTHONPATH=os.pathsep.join([str(mods), *sys.path]), TMPDIR=str(tmp))
    proc = subprocess.run(
        [sys.executable, "-m", "aotipre", "check", str(pkg("aoti")), "--inputs",
         str(pkg("aoti_inputs")), "--import", "user_ops", "--no-config", "--no-probe",
         "--no-perf", "--no-progress", "-f", "json"],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert proc.stdout, proc.stderr[-3000:]
    return proc.returncode, json.loads(proc.stdout), mods


def test_an_import_that_exits_0_fails_the_check_naming_what_happened(
    tmp_path: Path, pkg: Callable[[str], Path]
) -> None:
    rc, report, _ = _check_importing(tmp_path, pkg, "import os\nos._exit(0)\n")
    assert rc == 1 and report["verdict"] == "fail"
    stages = {s["name"]: s for s in report["stages"]}
    assert stages["load"]["status"] == "error"
    (finding,) = [f for f in report["findings"] if f["code"] == "AOT123"]
    assert "exited with code 0" in finding["message"], finding


def test_an_imported_module_gets_no_bytecode_written_beside_it(
    tmp_path: Path, pkg: Callable[[str], Path]
) -> None:
    rc, report, mods = _check_importing(tmp_path, pkg, "IMPORTED = True\n")
    assert rc == 0, report
    assert sorted(p.name for p in mods.iterdir()) == ["user_ops.py"]


def test_nonzero_exit_mid_step_is_an_error(faulty: Faulty) -> None:
    res, findings = faulty.run({"run": {"exit": 3, "log": "bye\n"}})
    assert res["run"].status is StageStatus.ERROR
    assert "exited with code 3" in res["run"].detail


# --- Ctrl-C on the aotipre command ------------------------------------------------------------


def _start_cli(
    tmp_path: Path, args: list[str], script: dict[str, Any], hostile: dict[str, Any]
) -> tuple[subprocess.Popen[str], Path, Path]:
    """`aotipre check ARGS` with hostile workers recording their pids; (process, pids, TMPDIR)."""
    pids, tmp = tmp_path / "pids", tmp_path / "tmp"
    pids.mkdir()
    tmp.mkdir()
    env = dict(
        os.environ,
        TMPDIR=str(tmp),
        AOTIPRE_FAKE_SCRIPT=json.dumps(script),
        AOTIPRE_HOSTILE=json.dumps({"pids": str(pids), **hostile}),
        # the hostile worker records its pids when it starts: a first worker started with the
        # command (which it cannot be: it does not wait for a job) would be counted as the
        # step's (tests/runner/test_prewarm.py interrupts a real one)
        AOTIPRE_PREWARM_FIRST="0",
    )
    proc = subprocess.Popen(
        [sys.executable, CLI, HOSTILE, "check", "--no-config", *args],
        env=env,
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    return proc, pids, tmp


def _wait_for(proc: subprocess.Popen[str], pids: Path, pattern: str, count: int) -> None:
    """Until `count` recorded pids match `pattern`, then a moment to reach the hanging step."""
    deadline = time.monotonic() + 30
    while len(list(pids.glob(pattern))) < count:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the workers never started"
        time.sleep(0.05)
    time.sleep(0.3)


def _interrupt(
    tmp_path: Path,
    args: list[str],
    script: dict[str, Any],
    workers: int,
    sig: int = signal.SIGINT,
    then: int | None = None,
    hostile: dict[str, Any] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Start `aotipre check ARGS` with hanging hostile workers, SIGINT it once `workers` workers
    run (and `then` 50 ms later, while it cleans up), and check it exits promptly with 130 and
    one line, leaving nothing behind."""
    proc, pids, tmp = _start_cli(tmp_path, args, script, {"grandchild": True, **(hostile or {})})
    try:
        _wait_for(proc, pids, "grandchild-*", workers)
        sent = time.monotonic()
        proc.send_signal(sig)
        if then is not None:
            time.sleep(0.05)
            proc.send_signal(then)
        out, err = proc.communicate(timeout=10)
        took = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    if sig == signal.SIGINT:
        code, line = 130, "interrupted"
    else:
        code, line = 128 + sig, f"terminated ({signal.Signals(sig).name})"
    assert proc.returncode == code, err
    assert without_progress(err) == f"aotipre: {line}\n"  # the progress lines before it aside
    assert took < 5, f"took {took:.1f} s to stop"
    assert wait_gone(recorded_pids(pids)) == [], "a worker or its child outlived aotipre"
    assert list(tmp.iterdir()) == [], "temporary folders were left behind"
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def test_ctrl_c_stops_the_hung_worker_and_cleans_up(
    tmp_path: Path, pkg: Callable[[str], Path]
) -> None:
    args = [str(pkg("aoti")), "--inputs", str(pkg("aoti_inputs"))]
    _interrupt(tmp_path, args, {"load": {"hang_hard": True}}, workers=1)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT], ids=str)
def test_terminating_signals_stop_the_hung_worker_and_clean_up(
    tmp_path: Path, pkg: Callable[[str], Path], sig: int
) -> None:
    # SIGHUP: the terminal or SSH session closed; SIGQUIT: Ctrl-\; SIGTERM: a CI runner's stop
    args = [str(pkg("aoti")), "--inputs", str(pkg("aoti_inputs"))]
    _interrupt(tmp_path, args, {"run": {"hang_hard": True}}, workers=1, sig=sig)


def test_a_sigterm_after_a_ctrl_c_changes_nothing(
    tmp_path: Path, pkg: Callable[[str], Path]
) -> None:
    # a CI runner's SIGTERM 50 ms after its SIGINT, while aotipre waits for the worker to end
    # (it takes the grace period, as a compiler removing its files does): the clean-up goes on
    # and the command ends as the first signal said (130, `interrupted`)
    cache = tmp_path / "cache"
    args = [str(pkg("ep_only")), "--cache-dir", str(cache), "--compile-at-deploy"]
    script = {"compile": {"hang_hard": True}}
    hostile = {"ignore_term": True}
    _interrupt(tmp_path, args, script, workers=1, then=signal.SIGTERM, hostile=hostile)


def test_sigkill_of_aotipre_takes_its_worker_down(
    tmp_path: Path, pkg: Callable[[str], Path]
) -> None:
    # Nothing in aotipre runs after a SIGKILL: the worker must die by itself (PR_SET_PDEATHSIG)
    # instead of compiling or running on for its whole timeout.
    args = [str(pkg("aoti")), "--inputs", str(pkg("aoti_inputs")), "--timeout", "600"]
    proc, pids, _ = _start_cli(tmp_path, args, {"run": {"hang_hard": True}}, {})
    try:
        _wait_for(proc, pids, "worker-*", 1)
        proc.kill()
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert wait_gone(recorded_pids(pids)) == [], "the worker outlived a SIGKILLed aotipre"


def test_ctrl_c_with_parallel_checks_stops_every_worker(
    tmp_path: Path, pkg: Callable[[str], Path]
) -> None:
    first, second = tmp_path / "first.pt2", tmp_path / "second.pt2"
    first.write_bytes(pkg("aoti").read_bytes())
    second.write_bytes(pkg("aoti").read_bytes())
    args = [str(first), str(second), "-j", "2"]  # inputs synthesized from the contract
    _interrupt(tmp_path, args, {"run": {"hang_hard": True}}, workers=2)


def test_ctrl_c_during_a_compile_leaves_no_half_written_cache_entry(
    tmp_path: Path, pkg: Callable[[str], Path]
) -> None:
    cache = tmp_path / "cache"
    args = [str(pkg("ep_only")), "--cache-dir", str(cache), "--compile-at-deploy"]
    _interrupt(tmp_path, args, {"compile": {"hang_hard": True}}, workers=1)
    assert cache.is_dir() and list(cache.iterdir()) == []


@pytest.mark.slow
@pytest.mark.parametrize(
    "then", [None, signal.SIGINT, signal.SIGTERM], ids=["once", "twice", "then_sigterm"]
)
def test_ctrl_c_during_a_real_compile_leaves_no_compiler_temporary_file(
    tmp_path: Path, pkg: Callable[[str], Path], then: int | None
) -> None:
    # A compile runs with the user's TMPDIR, where g++ keeps its temporary files (cc*.s, cc*.o);
    # g++ removes them on SIGTERM, not on SIGKILL: an interrupted check SIGKILLed the group and
    # left them behind (found by a sweep). The real worker and g++, interrupted mid-compile.
    # `then`: a second signal 50 ms later (Ctrl-C twice, SIGINT then SIGTERM), which cut the
    # clean-up short: the first worker's folder, the worker's TMPDIR and g++'s files stayed.
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    # an inductor cache of this pytest process (importing torch._inductor.codecache in an
    # earlier test sets TORCHINDUCTOR_CACHE_DIR) would let the compile skip g++ altogether
    env = {k: v for k, v in os.environ.items() if not k.startswith("TORCHINDUCTOR_")}
    env["TMPDIR"] = str(tmp)
    proc = subprocess.Popen(
        [sys.executable, "-m", "aotipre", "check", str(pkg("ep_only")), "--no-cache",
         "--compile-at-deploy", "--no-config"],
        env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 300
        while not list(tmp.glob("cc*")):  # g++ is compiling the model
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "no compile started"
            time.sleep(0.02)
        proc.send_signal(signal.SIGINT)
        if then is not None:
            time.sleep(0.05)
            proc.send_signal(then)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130 and err.endswith("aotipre: interrupted\n"), err
    left = [p.name for p in tmp.iterdir() if not p.name.startswith("torchinductor_")]
    assert left == [], left
