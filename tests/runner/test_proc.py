"""Tests of the subprocess layer against a fake worker that crashes, hangs, aborts or spews."""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import pytest

from aotipre.runner import proc
from aotipre.runner.proc import (
    RESULT_PATH_ENV,
    ProcessOutcome,
    children_guard,
    decode_signal,
    kill_all_children,
    live_children,
    run_process,
)
from tests.fakes import fake_worker

FAKE = str(Path(fake_worker.__file__).resolve())
PY = [sys.executable, "-I", "-S"]  # stdlib only: skip site for a faster start


def fake(mode: str, *args: str) -> list[str]:
    return [*PY, FAKE, mode, *args]


def py(code: str) -> list[str]:
    return [*PY, "-c", code]


def is_alive(pid: int) -> bool:
    """A zombie counts as dead (PID 1 in a container may never reap it)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def wait_dead(pid: int, within_s: float = 2.0) -> bool:
    end = time.monotonic() + within_s
    while time.monotonic() < end:
        if not is_alive(pid):
            return True
        time.sleep(0.02)
    return not is_alive(pid)


def read_pid(path: Path, within_s: float = 5.0) -> int:
    end = time.monotonic() + within_s
    while not path.exists():
        assert time.monotonic() < end, f"{path} never appeared"
        time.sleep(0.01)
    return int(path.read_text())


@pytest.fixture(autouse=True)
def no_live_children() -> Iterator[None]:
    yield
    assert live_children() == []


@pytest.fixture
def result_path(tmp_path: Path) -> str:
    return str(tmp_path / "result.json")


def run(mode: str, *args: str, tmp_path: Path, **kw: object) -> ProcessOutcome:
    kw.setdefault("timeout_s", 10.0)
    return run_process(fake(mode, *args), cwd=str(tmp_path), **kw)  # type: ignore[arg-type]


# --- the fake worker's modes ---------------------------------------------------------------


def test_ok_reads_result_and_output(tmp_path: Path, result_path: str) -> None:
    lines: list[str] = []
    o = run("ok", tmp_path=tmp_path, result_path=result_path, on_output=lines.append)
    assert o.ok and o.started and not o.crashed and not o.timed_out and not o.interrupted
    assert (o.returncode, o.signal, o.signal_name) == (0, None, None)
    assert o.result == fake_worker.OK_RESULT and o.result_error is None
    assert o.stdout_tail == "loading model\n"
    assert o.stderr_tail == "stage: load\nstage: run\n"
    assert lines == ["stage: load", "stage: run"]
    assert (o.stdout_total_bytes, o.stdout_truncated, o.stderr_truncated) == (14, False, False)
    assert 0 < o.duration_s < 10
    assert o.signals_sent == ()
    assert o.summary.startswith("exited with code 0")
    assert json.loads(json.dumps(o.to_dict()))["ok"] is True


def test_segv_is_a_crash(tmp_path: Path, result_path: str) -> None:
    o = run("segv", tmp_path=tmp_path, result_path=result_path)
    assert (o.signal, o.signal_name, o.returncode) == (signal.SIGSEGV, "SIGSEGV", -11)
    assert o.crashed and not o.ok and not o.timed_out
    assert o.stderr_tail == "about to segfault\n"
    assert o.result is None and "no result file" in (o.result_error or "")
    assert "killed by SIGSEGV" in o.summary


def test_abort_keeps_the_cpp_message(tmp_path: Path) -> None:
    o = run("abort", tmp_path=tmp_path)
    assert o.signal_name == "SIGABRT" and o.crashed
    assert o.stderr_tail == fake_worker.ABORT_MESSAGE
    assert "what():  run_func_(...) API call failed" in o.stderr_tail
    assert o.result is None and o.result_error is None  # no result file was asked for


def test_oom_kill_is_a_crash_we_did_not_cause(tmp_path: Path) -> None:
    o = run("oom", tmp_path=tmp_path)
    assert o.signal_name == "SIGKILL" and o.crashed and not o.timed_out and o.signals_sent == ()


@pytest.mark.parametrize("code", [0, 1, 3, 139])
def test_exit_code(tmp_path: Path, code: int) -> None:
    o = run("exit", str(code), tmp_path=tmp_path)
    assert o.returncode == code and o.signal is None and not o.crashed
    assert o.ok is (code == 0)
    assert o.stderr_tail == f"exiting with {code}\n"


def test_exit0_without_result_is_not_ok(tmp_path: Path, result_path: str) -> None:
    Path(result_path).write_text('{"stale": true}')  # from an earlier run: must not be read
    o = run("exit0-no-result", tmp_path=tmp_path, result_path=result_path)
    assert o.returncode == 0 and not o.ok and o.result is None
    assert o.result_error == f"the process wrote no result file ({result_path})"


def test_bad_json(tmp_path: Path, result_path: str) -> None:
    o = run("bad-json", tmp_path=tmp_path, result_path=result_path)
    assert o.returncode == 0 and not o.ok and o.result is None
    assert "is not valid JSON" in (o.result_error or "")


def test_result_must_be_an_object(tmp_path: Path, result_path: str) -> None:
    o = run("not-object", tmp_path=tmp_path, result_path=result_path)
    assert o.result is None and "holds a JSON list, not an object" in (o.result_error or "")


def test_relative_result_path_is_made_absolute(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    child_cwd = tmp_path / "elsewhere"
    child_cwd.mkdir()
    o = run_process(
        py(f"import os; print(os.environ[{RESULT_PATH_ENV!r}])"),
        timeout_s=10,
        cwd=str(child_cwd),
        result_path="r.json",
        env={"PATH": os.environ.get("PATH", "")},
    )
    assert o.stdout_tail.strip() == str(tmp_path / "r.json")


def test_hang_times_out_and_kills_the_whole_group(tmp_path: Path) -> None:
    pidfile = tmp_path / "grandchild.pid"
    t0 = time.monotonic()
    o = run("hang", str(pidfile), tmp_path=tmp_path, timeout_s=1.5, kill_grace_s=1.0)
    assert time.monotonic() - t0 < 5
    assert o.timed_out and not o.crashed and not o.ok
    assert o.signal_name == "SIGTERM" and o.signals_sent == (signal.SIGTERM,)
    assert o.stderr_tail == "hanging\n"
    assert wait_dead(read_pid(pidfile)), "grandchild survived the timeout"
    assert o.summary.startswith("timed out after")


def test_hang_ignoring_sigterm_gets_sigkill(tmp_path: Path) -> None:
    pidfile = tmp_path / "grandchild.pid"
    o = run("hang-ignore-term", str(pidfile), tmp_path=tmp_path, timeout_s=1.5, kill_grace_s=0.3)
    assert o.timed_out and not o.crashed
    assert o.signal_name == "SIGKILL" and o.signals_sent == (signal.SIGTERM, signal.SIGKILL)
    assert wait_dead(read_pid(pidfile))


def test_grandchild_left_behind_after_a_normal_exit_is_killed(tmp_path: Path) -> None:
    pidfile = tmp_path / "grandchild.pid"
    t0 = time.monotonic()
    o = run("orphan", str(pidfile), tmp_path=tmp_path, timeout_s=10)
    assert time.monotonic() - t0 < 5  # did not wait for the sleeper holding the pipes
    assert o.returncode == 0 and not o.timed_out and o.signals_sent == ()
    assert o.stderr_tail == "leaving a grandchild behind\n"
    assert wait_dead(read_pid(pidfile))


def test_spew_is_bounded_and_counted_exactly(tmp_path: Path) -> None:
    tracemalloc.start()
    try:
        o = run("spew", tmp_path=tmp_path, timeout_s=15)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert o.returncode == 0 and not o.timed_out
    assert o.stdout_total_bytes == fake_worker.SPEW_STDOUT_BYTES
    assert o.stdout_truncated and len(o.stdout_tail) == proc.DEFAULT_MAX_CAPTURE_BYTES
    assert o.stdout_tail.endswith("x\nEND-OF-SPEW\n")
    assert o.stderr_tail == fake_worker.SPEW_STDERR.decode() and not o.stderr_truncated
    assert o.stderr_total_bytes == len(fake_worker.SPEW_STDERR)
    assert peak < 16 * 1024 * 1024, f"peak Python memory {peak} bytes while reading 200 MB"


# --- capture details -----------------------------------------------------------------------


def test_tail_keeps_exactly_the_last_bytes(tmp_path: Path) -> None:
    code = "import sys; sys.stdout.write('0123456789abcdef'); sys.stderr.write('short')"
    o = run_process(py(code), timeout_s=10, max_capture_bytes=10)
    assert (o.stdout_tail, o.stdout_total_bytes, o.stdout_truncated) == ("6789abcdef", 16, True)
    assert (o.stderr_tail, o.stderr_total_bytes, o.stderr_truncated) == ("short", 5, False)


def test_tail_cut_inside_a_utf8_char_is_clean(tmp_path: Path) -> None:
    code = "import sys; sys.stdout.buffer.write('é'.encode() * 10 + b'\\xff')"
    o = run_process(py(code), timeout_s=10, max_capture_bytes=6)
    # last 6 bytes: <cont> é é <ff>: the orphaned continuation byte is dropped
    assert o.stdout_tail == "éé\ufffd"


def test_on_output_gets_split_partial_and_crlf_lines() -> None:
    lines: list[str] = []
    code = (
        "import sys, time; w = sys.stderr.write; w('a\\r\\nb'); sys.stderr.flush(); "
        "time.sleep(0.05); w('c\\n' + 'z' * 25 + '\\n'); w('tail-without-newline')"
    )
    run_process(py(code), timeout_s=10, max_capture_bytes=10, on_output=lines.append)
    assert lines == ["a", "bc", "z" * 10, "z" * 10, "z" * 5, "tail-witho", "ut-newline"]


# --- start failures, bad arguments ---------------------------------------------------------


def test_missing_executable_is_an_outcome(tmp_path: Path) -> None:
    o = run_process(
        [str(tmp_path / "no-such-worker")], timeout_s=5, result_path=str(tmp_path / "r.json")
    )
    assert not o.started and not o.ok and not o.crashed and o.returncode is None
    assert o.start_error == f"executable not found: {str(tmp_path / 'no-such-worker')!r}"
    assert o.result is None and "did not start" in (o.result_error or "")
    assert o.summary.startswith("could not start: executable not found")


def test_not_executable_is_an_outcome(tmp_path: Path) -> None:
    script = tmp_path / "worker.sh"
    script.write_text("#!/bin/sh\nexit 0\n")
    o = run_process([str(script)], timeout_s=5)
    assert not o.started and "permission denied" in (o.start_error or "")


def test_missing_cwd_is_an_outcome(tmp_path: Path) -> None:
    o = run_process(py("pass"), timeout_s=5, cwd=str(tmp_path / "gone"))
    assert not o.started and "working directory" in (o.start_error or "")


@pytest.mark.parametrize(
    "kwargs",
    [
        {"argv": []},
        {"timeout_s": 0},
        {"timeout_s": float("nan")},
        {"max_capture_bytes": 0},
        {"kill_grace_s": -1},
    ],
)
def test_programmer_errors_raise(kwargs: dict[str, object]) -> None:
    call: dict[str, object] = {"argv": py("pass"), "timeout_s": 5, **kwargs}
    with pytest.raises(ValueError):
        run_process(**call)  # type: ignore[arg-type]


# --- interruption --------------------------------------------------------------------------


def test_keyboard_interrupt_kills_the_group_and_reraises(tmp_path: Path) -> None:
    pidfile = tmp_path / "grandchild.pid"

    def on_output(line: str) -> None:
        if line == "hanging":
            raise KeyboardInterrupt

    t0 = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        run("hang", str(pidfile), tmp_path=tmp_path, timeout_s=10, on_output=on_output)
    assert time.monotonic() - t0 < 5
    assert wait_dead(read_pid(pidfile))


def test_real_sigint_while_waiting(tmp_path: Path) -> None:
    pidfile = tmp_path / "grandchild.pid"

    def press_ctrl_c() -> None:
        read_pid(pidfile)
        os.kill(os.getpid(), signal.SIGINT)

    thread = threading.Thread(target=press_ctrl_c)
    thread.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            run("hang", str(pidfile), tmp_path=tmp_path, timeout_s=10)
    finally:
        thread.join()
    assert wait_dead(read_pid(pidfile))


def test_kill_all_children_from_another_thread(tmp_path: Path) -> None:
    pidfile = tmp_path / "grandchild.pid"
    killed: list[int] = []

    def killer() -> None:
        read_pid(pidfile)
        killed.append(kill_all_children())

    thread = threading.Thread(target=killer)
    thread.start()
    o = run("hang", str(pidfile), tmp_path=tmp_path, timeout_s=10)
    thread.join()
    assert killed == [1]
    assert o.interrupted and not o.timed_out and not o.crashed and not o.ok
    assert o.signal_name == "SIGKILL" and o.signals_sent == (signal.SIGKILL,)
    assert o.summary.startswith("interrupted after")
    assert wait_dead(read_pid(pidfile))


def test_children_guard_kills_workers_of_other_threads(tmp_path: Path) -> None:
    pidfile = tmp_path / "grandchild.pid"
    outcomes: list[ProcessOutcome] = []
    worker = threading.Thread(
        target=lambda: outcomes.append(run("hang", str(pidfile), tmp_path=tmp_path, timeout_s=10))
    )
    worker.start()
    read_pid(pidfile)
    with pytest.raises(RuntimeError, match="boom"), children_guard():
        raise RuntimeError("boom")
    worker.join(timeout=5)
    assert not worker.is_alive() and outcomes[0].interrupted
    assert wait_dead(read_pid(pidfile))


def test_kill_all_children_with_none_running() -> None:
    assert kill_all_children() == 0


# --- decode_signal -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("returncode", "via_shell", "expected"),
    [
        (None, False, None),
        (0, False, None),
        (1, False, None),
        (-11, False, 11),
        (-9, True, 9),
        (139, False, None),  # a program may exit(139) on its own
        (139, True, 11),  # sh reports death by SIGSEGV as 128+11
        (134, True, 6),
        (128, True, None),
        (255, True, None),  # 127 is not a signal number
        (1, True, None),
    ],
)
def test_decode_signal(returncode: int | None, via_shell: bool, expected: int | None) -> None:
    assert decode_signal(returncode, via_shell=via_shell) == expected


def test_signal_name_of_unnamed_number() -> None:
    assert proc.signal_name(11) == "SIGSEGV" and proc.signal_name(None) is None
    assert proc.signal_name(200) == "SIG200"


def test_a_movable_deadline_moved_while_the_child_runs_is_the_one_enforced() -> None:
    """move_deadline (a worker started before its job gets the job's limit at the hand-over):
    the child overruns the new limit, not its original one, and is reported as timed out."""
    from aotipre.runner.proc import move_deadline

    pids: list[int] = []
    started = threading.Event()

    def on_start(pid: int) -> None:
        pids.append(pid)
        started.set()

    def shorten() -> None:
        started.wait(30)
        assert move_deadline(pids[0], 1.0)

    mover = threading.Thread(target=shorten)
    mover.start()
    begun = time.monotonic()
    outcome = run_process(
        [sys.executable, "-c", "import time; time.sleep(120)"],
        timeout_s=600,
        on_start=on_start,
        movable_deadline=True,
        kill_grace_s=1.0,
    )
    mover.join()
    assert outcome.timed_out
    assert time.monotonic() - begun < 30
    assert not move_deadline(pids[0], 5.0)  # it runs no more


def test_a_cancelled_child_is_ended_as_an_interrupted_call_ends_it(tmp_path: Path) -> None:
    """cancel_child (an interrupted hand-over to a worker started before its job): the call
    running the child in another thread SIGTERMs its group first (the child's handler runs),
    then raises ChildCancelled there, with the child reaped and its private TMPDIR gone."""
    from aotipre.runner.proc import ChildCancelled, cancel_child

    marker = tmp_path / "got-sigterm"
    script = (
        "import os, signal, sys, time\n"
        f"def on_term(*_):\n    open({str(marker)!r}, 'w').write(os.environ['TMPDIR'])\n"
        "    sys.exit(0)\n"
        "signal.signal(signal.SIGTERM, on_term)\n"
        "print('ready', file=sys.stderr, flush=True)\n"
        "time.sleep(120)\n"
    )
    pids: list[int] = []
    raised: list[BaseException] = []
    ready = threading.Event()

    def run() -> None:
        try:
            run_process(
                [sys.executable, "-c", script],
                timeout_s=600,
                on_start=pids.append,
                on_output=lambda line: ready.set(),
                movable_deadline=True,
            )
        except BaseException as exc:  # noqa: BLE001 - what the thread got is the assertion
            raised.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    assert ready.wait(60)
    begun = time.monotonic()
    assert cancel_child(pids[0])
    thread.join(30)
    assert not thread.is_alive() and time.monotonic() - begun < 10
    assert len(raised) == 1 and isinstance(raised[0], ChildCancelled)
    assert marker.exists()  # SIGTERM first
    assert not os.path.exists(marker.read_text())  # its private TMPDIR is removed
    assert pids[0] not in live_children()
    assert not cancel_child(pids[0])
