"""Run a worker process in its own process group; turn whatever it does into a ProcessOutcome.

Longer than the ~600 lines of the other modules on purpose: the start in a new process group,
the supervision (time limits, signals, bounded output tails, progress lines), the registry of
live children and their clean-up on exit or signal are one mechanism. Every process aotipre
starts goes through it, and the promise that none outlives aotipre holds only while those parts
agree; runner/contain.py adds the kernel-side containment (subreaper, cgroup)."""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import fcntl
import json
import math
import os
import selectors
import signal as _signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from aotipre.runner import contain

__all__ = [
    "DEFAULT_KILL_GRACE_S",
    "DEFAULT_MAX_CAPTURE_BYTES",
    "MAX_RESULT_BYTES",
    "RESULT_PATH_ENV",
    "ProcessOutcome",
    "allow_new_children",
    "children_guard",
    "decode_signal",
    "kill_all_children",
    "live_children",
    "run_process",
    "signal_name",
]

RESULT_PATH_ENV = "AOTIPRE_RESULT_PATH"
"""The environment variable through which the child learns where to write its JSON result."""
DEFAULT_MAX_CAPTURE_BYTES = 64 * 1024
"""How much of the end of stdout and of stderr is kept, each."""
DEFAULT_KILL_GRACE_S = 2.0
"""After a timeout: how long the group gets between SIGTERM and SIGKILL."""
MAX_RESULT_BYTES = 32 * 1024 * 1024
"""A result file larger than this is not parsed (it is reported in `result_error`)."""

_READ_CHUNK = 1024 * 1024
_PIPE_SIZE = 1024 * 1024
"""Asked-for pipe capacity (Linux F_SETPIPE_SZ): fewer wake-ups when the child spews."""
_POLL_S = 0.05
"""Exit-polling interval, used only where pidfd_open is unavailable."""
_MOVABLE_POLL_S = 0.5
"""How often a child whose deadline may move (run_process's movable_deadline) reads it again."""
_DRAIN_AFTER_EXIT_S = 1.0
"""After the child exits: how long to keep reading pipes that a stray descendant still holds."""
INTERRUPT_GRACE_S = 1.0
"""On an interrupt: how long the group gets between SIGTERM and SIGKILL (g++ cleans up at once)."""
_REAP_AFTER_SIGKILL_S = 5.0
"""After SIGKILL: how long to wait for the exit before giving up (e.g. stuck in D state)."""
_NSIG = getattr(_signal, "NSIG", 65)


# --------------------------------------------------------------------------------------------
# Signals


def decode_signal(returncode: int | None, *, via_shell: bool = False) -> int | None:
    """The signal number that killed a child, or None if it exited normally (or never did).

    `subprocess.Popen` reports death by signal N as returncode -N: that is always decoded.
    A POSIX shell reports a child's death by signal N as exit status 128+N, but a program may also
    simply `exit(139)`, so 128+N is decoded only when the caller says the status came from a shell
    (`via_shell=True`) and N is a valid signal number (1..NSIG-1). `run_process` never runs a shell,
    so it never sets `via_shell`.
    """
    if returncode is None:
        return None
    if returncode < 0:
        return -returncode
    if via_shell and 128 < returncode < 128 + _NSIG:
        return returncode - 128
    return None


def signal_name(signum: int | None) -> str | None:
    """`SIGSEGV` for 11, `SIG42` for a number without a name, None for None."""
    if signum is None:
        return None
    try:
        return _signal.Signals(signum).name
    except ValueError:
        return f"SIG{signum}"


# --------------------------------------------------------------------------------------------
# The outcome


@dataclass(frozen=True)
class ProcessOutcome:
    """What happened to one child process. Built by `run_process`; never raised."""

    argv: tuple[str, ...]
    """The command that was run."""
    returncode: int | None
    """Popen's returncode (-N when killed by signal N); None if the child never started or could
    not be reaped (see `start_error` and `result_error`)."""
    signal: int | None
    """The signal that killed the child (from `decode_signal(returncode)`), else None."""
    timed_out: bool
    """The child overran `timeout_s` and aotipre killed its process group."""
    duration_s: float
    """Wall time from start to reap."""
    stdout_tail: str
    """The last `max_capture_bytes` of stdout, decoded as UTF-8 with errors='replace'."""
    stderr_tail: str
    """The last `max_capture_bytes` of stderr, decoded as UTF-8 with errors='replace'."""
    stdout_truncated: bool
    """stdout was longer than the tail: only its end is in `stdout_tail`."""
    stderr_truncated: bool
    stdout_total_bytes: int
    """How many bytes the child wrote to stdout in all."""
    stderr_total_bytes: int
    result: dict[str, Any] | None
    """The JSON object the child wrote to the result file, or None (see `result_error`)."""
    result_error: str | None
    """Why `result` is None (no file, invalid JSON, not an object, never started); None when
    `result` was read or no result file was asked for."""
    interrupted: bool = False
    """The child was killed by `kill_all_children()` (e.g. from a Ctrl-C handler or another
    thread), not because it crashed or timed out."""
    start_error: str | None = None
    """Why the child could not be started (missing executable, bad cwd, ...); None if it started."""
    signals_sent: tuple[int, ...] = ()
    """The signals aotipre sent to the child's process group, in order."""
    pid: int | None = None
    """The child's process id (None when it never started)."""

    @property
    def started(self) -> bool:
        """The child process was created."""
        return self.start_error is None

    @property
    def signal_name(self) -> str | None:
        """E.g. `SIGSEGV`, or None when not killed by a signal."""
        return signal_name(self.signal)

    @property
    def crashed(self) -> bool:
        """Killed by a signal aotipre did not send (SIGSEGV, SIGABRT, the OOM killer's SIGKILL)."""
        return self.signal is not None and self.signal not in self.signals_sent

    @property
    def ok(self) -> bool:
        """Exited 0 on its own, in time, and (if a result file was asked for) left a valid one."""
        return (
            self.started
            and self.returncode == 0
            and not self.timed_out
            and not self.interrupted
            and self.result_error is None
        )

    @property
    def summary(self) -> str:
        """One line for a human: how the child ended."""
        if not self.started:
            return f"could not start: {self.start_error}"
        took = f"after {self.duration_s:.1f} s"
        if self.interrupted:
            how = f"interrupted {took}"
        elif self.timed_out:
            how = f"timed out {took}"
        elif self.signal is not None:
            how = f"killed by {self.signal_name} {took}"
        elif self.returncode is None:
            how = f"did not exit {took}"
        else:
            how = f"exited with code {self.returncode} {took}"
        if (self.interrupted or self.timed_out) and self.signal is not None:
            how += f" ({self.signal_name})"
        if self.result_error is not None and self.returncode == 0:
            how += f"; {self.result_error}"
        return how

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of every field plus `signal_name`, `crashed` and `ok`."""
        out = dataclasses.asdict(self)
        out["argv"] = list(self.argv)
        out["signals_sent"] = [signal_name(s) for s in self.signals_sent]
        out.update(signal_name=self.signal_name, crashed=self.crashed, ok=self.ok)
        return out


# --------------------------------------------------------------------------------------------
# Live children (so that a top-level handler can kill them all)


class _LiveChild:
    """One running child; its pid is also its process-group id (start_new_session=True)."""

    __slots__ = ("pid", "token", "interrupted", "signals_sent", "deadline", "cancelled")

    def __init__(self, pid: int, token: str = "") -> None:
        self.pid = pid
        self.token = token
        """The child's `AOTIPRE_TREE` value, inherited by its whole process tree."""
        self.interrupted = False
        self.signals_sent: list[int] = []
        self.deadline: float | None = None
        """Set by move_deadline: the time limit from then on (time.monotonic())."""
        self.cancelled = False
        """Set by cancel_child: end it as an interrupt of the run_process call would."""


# Reentrant: kill_all_children() may run in a signal handler that interrupted the main thread
# while it held the lock. A child is removed from the registry before it is reaped, so every
# killpg() below targets a group whose leader is unreaped and whose id cannot have been reused.
_live_lock = threading.RLock()
_live: dict[int, _LiveChild] = {}
_refusing = False
"""Set by `kill_all_children(refuse_new=True)`: `run_process` starts no child (under _live_lock)."""


def _signal_group(child: _LiveChild, sig: int, *, record: bool = True) -> None:
    """Send `sig` to the child's whole process group, if it is still registered.

    `record=False` is for sweeping up leftovers after the leader has exited: the signal then
    cannot be what killed the leader, so it is not recorded in `signals_sent`.
    """
    with _live_lock:
        if _live.get(child.pid) is not child:
            return
        if record:
            child.signals_sent.append(sig)
        try:
            os.killpg(child.pid, sig)
        except ProcessLookupError:
            pass
        except PermissionError:  # a member changed uid: kill at least the leader
            with contextlib.suppress(OSError):
                os.kill(child.pid, sig)


def live_children() -> list[int]:
    """Process-group ids of the children `run_process` is running now (in any thread)."""
    with _live_lock:
        return list(_live)


def kill_all_children(sig: int = _signal.SIGKILL, *, refuse_new: bool = False) -> int:
    """Send `sig` (default SIGKILL) to the process group of every live child; return how many.

    Safe to call from a signal handler or from another thread. Each `run_process` call whose child
    this kills returns an outcome with `interrupted=True` (it does not raise). With
    `refuse_new=True` (a program shutting down, e.g. on Ctrl-C) every later `run_process` call, in
    any thread, also returns such an outcome at once without starting its child, until
    `allow_new_children()`.
    """
    global _refusing
    with _live_lock:
        if refuse_new:
            _refusing = True
        children = list(_live.values())
        for child in children:
            child.interrupted = True
            if sig == _signal.SIGKILL:
                _sweep(child)
            _signal_group(child, sig)
    return len(children)


def allow_new_children() -> None:
    """Lift `kill_all_children(refuse_new=True)`: `run_process` starts children again."""
    global _refusing
    with _live_lock:
        _refusing = False


@contextlib.contextmanager
def children_guard(sig: int = _signal.SIGKILL) -> Iterator[None]:
    """Kill every live child (`kill_all_children`) if the block exits by an exception.

    Meant for the top of a program that runs workers from several threads:
    `with children_guard(): main()` guarantees no worker outlives a Ctrl-C or a crash.
    The exception is re-raised unchanged.
    """
    try:
        yield
    except BaseException:
        kill_all_children(sig)
        raise


# --------------------------------------------------------------------------------------------
# Capture


class _Tail:
    """The last `limit` bytes of a stream, plus the total byte count (amortised O(1) per byte)."""

    __slots__ = ("limit", "total", "_buf")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.total = 0
        self._buf = bytearray()

    def feed(self, data: bytes) -> None:
        self.total += len(data)
        if len(data) >= self.limit:
            self._buf = bytearray(data[-self.limit :])
            return
        self._buf += data
        if len(self._buf) > 2 * self.limit:
            del self._buf[: -self.limit]

    @property
    def truncated(self) -> bool:
        return self.total > self.limit

    def text(self) -> str:
        data = bytes(self._buf[-self.limit :])
        if self.truncated:
            # The cut may have split a UTF-8 sequence: drop its orphaned continuation bytes.
            skip = 0
            while skip < min(3, len(data)) and 0x80 <= data[skip] <= 0xBF:
                skip += 1
            data = data[skip:]
        return data.decode("utf-8", errors="replace")


class _LineSplitter:
    """Feeds decoded lines (without the newline) to a callback; over-long lines are split."""

    __slots__ = ("callback", "limit", "_pending")

    def __init__(self, callback: Callable[[str], None], limit: int) -> None:
        self.callback = callback
        self.limit = limit
        self._pending = bytearray()

    def feed(self, data: bytes) -> None:
        self._pending += data
        while True:
            nl = self._pending.find(b"\n")
            if nl < 0:
                break
            line = bytes(self._pending[:nl])
            del self._pending[: nl + 1]
            self._emit(line)
        while len(self._pending) > self.limit:
            line = bytes(self._pending[: self.limit])
            del self._pending[: self.limit]
            self._emit(line)

    def flush(self) -> None:
        if self._pending:
            line = bytes(self._pending)
            self._pending.clear()
            self._emit(line)

    def _emit(self, line: bytes) -> None:
        for i in range(0, max(len(line), 1), self.limit):
            self.callback(line[i : i + self.limit].decode("utf-8", errors="replace").rstrip("\r"))


# --------------------------------------------------------------------------------------------
# Running


def run_process(
    argv: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    timeout_s: float,
    cwd: str | None = None,
    result_path: str | None = None,
    max_capture_bytes: int = DEFAULT_MAX_CAPTURE_BYTES,
    on_output: Callable[[str], None] | None = None,
    kill_grace_s: float = DEFAULT_KILL_GRACE_S,
    private_tmp: bool = True,
    on_start: Callable[[int], None] | None = None,
    movable_deadline: bool = False,
) -> ProcessOutcome:
    """Run `argv` in a new session / process group and return how it ended.

    - Never raises because of the child: a crash, abort, hang, OOM kill, flood of output or a
      missing executable all come back as a `ProcessOutcome`. Raises ValueError for bad arguments.
    - `env` replaces the environment as in `subprocess.Popen` (None: inherit). When `result_path`
      is given it is made absolute, any stale file there is deleted before the start, its path is
      passed to the child as `$AOTIPRE_RESULT_PATH`, and after the exit it is read as a JSON object
      (even after a crash: a result written before a crash at teardown is kept).
    - stdout and stderr are read concurrently; only the last `max_capture_bytes` of each is kept,
      so a child writing gigabytes neither blocks nor grows memory. `on_output`, if given, gets
      each stderr line as it arrives, in the calling thread.
    - On timeout the whole process group gets SIGTERM, then SIGKILL after `kill_grace_s`.
      When the child exits on its own, whatever it left behind in its process group is SIGKILLed,
      and so is every descendant that left the group (setsid, setpgid): see
      `aotipre.runner.contain.sweep_tree`.
    - The child dies with aotipre (PR_SET_PDEATHSIG: SIGKILL when the thread that started it
      ends, e.g. aotipre itself is SIGKILLed), and is a subreaper for its own descendants, so
      they stay findable under it while it lives.
    - `private_tmp` (default): the child gets TMPDIR, TMP and TEMP in a fresh folder of its own,
      removed once it and its descendants are gone, so what it extracts (torch's
      `aotinductor_*` folders with the model's .so) never outlives it. Inductor's compile cache
      stays where it would have been (TORCHINDUCTOR_CACHE_DIR is set to torch's default for the
      original TMPDIR, unless already set).
    - Ctrl-C: if KeyboardInterrupt (or any exception, e.g. raised by `on_output`) arrives while
      waiting, the child's process group is SIGKILLed and reaped, then the exception is re-raised.
      The child runs in its own session, so a terminal's Ctrl-C never reaches it directly.
    - `on_start`, if given, gets the child's pid once it runs (stop_child ends it from another
      thread: this call then returns its outcome, a kill by SIGKILL).
    - `movable_deadline`: move_deadline may replace `timeout_s` while it runs, and cancel_child
      may end it from another thread (both checked at least every _MOVABLE_POLL_S).
    """
    args = tuple(os.fspath(a) for a in argv)
    if not args:
        raise ValueError("run_process: argv is empty")
    if not (timeout_s > 0 and math.isfinite(timeout_s)):
        raise ValueError(f"run_process: timeout_s must be a positive number, got {timeout_s!r}")
    if max_capture_bytes < 1:
        raise ValueError(f"run_process: max_capture_bytes must be >= 1, got {max_capture_bytes}")
    if not kill_grace_s >= 0:
        raise ValueError(f"run_process: kill_grace_s must be >= 0, got {kill_grace_s!r}")

    child_env = dict(os.environ if env is None else env)
    token = contain.new_token()
    child_env[contain.TREE_ENV] = token
    private = contain.private_tmp(child_env) if private_tmp else None
    if result_path is not None:
        result_path = os.path.abspath(result_path)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(result_path)
        child_env[RESULT_PATH_ENV] = result_path

    out, err = _Tail(max_capture_bytes), _Tail(max_capture_bytes)
    start = time.monotonic()
    try:
        if _refusing:
            raise _Refused()
        proc = subprocess.Popen(
            args,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=child_env,
            cwd=cwd,
            start_new_session=True,
            close_fds=True,
            preexec_fn=contain.child_setup(os.getpid()),
        )
    except (OSError, subprocess.SubprocessError, _Refused) as exc:
        contain.remove_private_tmp(private)
        why = _start_error_text(args[0], cwd, exc)
        return ProcessOutcome(
            argv=args,
            returncode=None,
            signal=None,
            timed_out=False,
            duration_s=time.monotonic() - start,
            stdout_tail="",
            stderr_tail="",
            stdout_truncated=False,
            stderr_truncated=False,
            stdout_total_bytes=0,
            stderr_total_bytes=0,
            result=None,
            result_error=f"no result: the process did not start ({why})",
            interrupted=isinstance(exc, _Refused),
            start_error=why,
        )

    child = _LiveChild(proc.pid, token)
    with _live_lock:
        _live[proc.pid] = child
        if _refusing:  # kill_all_children(refuse_new=True) ran while this child was starting
            child.interrupted = True
            _signal_group(child, _signal.SIGKILL)
    if on_start is not None:
        on_start(proc.pid)
    splitter = _LineSplitter(on_output, max_capture_bytes) if on_output is not None else None
    try:
        timed_out, returncode = _supervise(
            proc, child, out, err, splitter, start + timeout_s, kill_grace_s, movable_deadline
        )
        if splitter is not None:
            splitter.flush()
    except BaseException:
        # Ctrl-C, a termination signal, a bug: SIGTERM first, so that a compiler in the group
        # removes its temporary files from the user's TMPDIR (g++ does on SIGTERM, not on
        # SIGKILL), then SIGKILL whatever is left
        try:
            _signal_group(child, _signal.SIGTERM)
            _wait_exit(proc.pid, INTERRUPT_GRACE_S)
        except BaseException:  # noqa: S110 - a second Ctrl-C: kill at once, raise the first
            pass
        _sweep(child)
        _signal_group(child, _signal.SIGKILL)
        _unregister(child)
        _reap(proc, _REAP_AFTER_SIGKILL_S)
        _sweep(child)
        raise
    finally:
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()
        _sweep(child)
        contain.remove_private_tmp(private)
    duration = time.monotonic() - start

    if result_path is None:
        result, result_error = None, None
    else:
        result, result_error = _read_result(result_path)
    if returncode is None and result_error is None:
        result_error = "the process could not be reaped after SIGKILL"
    return ProcessOutcome(
        argv=args,
        returncode=returncode,
        signal=decode_signal(returncode),
        timed_out=timed_out,
        duration_s=duration,
        stdout_tail=out.text(),
        stderr_tail=err.text(),
        stdout_truncated=out.truncated,
        stderr_truncated=err.truncated,
        stdout_total_bytes=out.total,
        stderr_total_bytes=err.total,
        result=result,
        result_error=result_error,
        interrupted=child.interrupted,
        signals_sent=tuple(child.signals_sent),
        pid=proc.pid,
    )


def _supervise(
    proc: subprocess.Popen[bytes],
    child: _LiveChild,
    out: _Tail,
    err: _Tail,
    splitter: _LineSplitter | None,
    deadline: float,
    kill_grace_s: float,
    movable_deadline: bool = False,
) -> tuple[bool, int | None]:
    """Pump the pipes until the child has exited and the pipes are drained; reap it.

    Returns (timed_out, returncode); returncode is None only if the child survived SIGKILL.
    """
    assert proc.stdout is not None and proc.stderr is not None
    sinks: dict[int, tuple[_Tail, _LineSplitter | None]] = {
        proc.stdout.fileno(): (out, None),
        proc.stderr.fileno(): (err, splitter),
    }
    sel = selectors.DefaultSelector()
    pidfd = _pidfd_open(proc.pid)
    try:
        for fd in sinks:
            _grow_pipe(fd)
            sel.register(fd, selectors.EVENT_READ)
        if pidfd is not None:
            sel.register(pidfd, selectors.EVENT_READ)

        timed_out = False
        kill_at: float | None = None  # when SIGTERM escalates to SIGKILL
        give_up_at: float | None = None  # when we stop waiting for a SIGKILLed child
        drain_until: float | None = None  # set once the child has exited
        while True:
            now = time.monotonic()
            if child.cancelled and drain_until is None:
                raise ChildCancelled(f"pid {proc.pid}")
            if child.deadline is not None:
                deadline = child.deadline
            if drain_until is None and _has_exited(proc.pid):
                # Leftovers in the group (and out of it) would hold our pipes open and outlive
                # the run.
                _signal_group(child, _signal.SIGKILL, record=False)
                _sweep(child)
                drain_until = now + _DRAIN_AFTER_EXIT_S
                if pidfd is not None:
                    sel.unregister(pidfd)
            if drain_until is not None:
                if not any(fd in sinks for fd in sel.get_map()) or now >= drain_until:
                    break
            elif not timed_out and now >= deadline:
                timed_out = True
                _sweep(child)  # descendants first, while the child lives to find them by
                _signal_group(child, _signal.SIGTERM)
                kill_at = now + kill_grace_s
            elif kill_at is not None and now >= kill_at:
                _sweep(child)  # descendants first: the child is still alive to find them
                _signal_group(child, _signal.SIGKILL)
                kill_at = None
                give_up_at = now + _REAP_AFTER_SIGKILL_S
            elif give_up_at is not None and now >= give_up_at:
                _unregister(child)
                _reap(proc, 0)
                return timed_out, proc.returncode

            wake = [
                t
                for t in (drain_until, deadline if not timed_out else None, kill_at, give_up_at)
                if t is not None
            ]
            wait = max(0.0, min(wake) - now) if wake else None
            if drain_until is None and pidfd is None:
                wait = _POLL_S if wait is None else min(wait, _POLL_S)
            if movable_deadline and not timed_out:
                wait = _MOVABLE_POLL_S if wait is None else min(wait, _MOVABLE_POLL_S)
            if sel.get_map():
                events = sel.select(wait)
            else:
                time.sleep(wait if wait is not None else _POLL_S)
                events = []
            for key, _ in events:
                fd = key.fd
                if fd not in sinks:
                    continue  # the pidfd: handled at the top of the loop
                try:
                    data = os.read(fd, _READ_CHUNK)
                except OSError as exc:
                    if exc.errno in (errno.EAGAIN, errno.EINTR):
                        continue
                    data = b""
                if not data:
                    sel.unregister(fd)
                    continue
                tail, lines = sinks[fd]
                tail.feed(data)
                if lines is not None:
                    lines.feed(data)
    finally:
        sel.close()
        if pidfd is not None:
            os.close(pidfd)

    _unregister(child)
    _reap(proc, _REAP_AFTER_SIGKILL_S)
    return timed_out, proc.returncode


def _sweep(child: _LiveChild) -> None:
    contain.sweep_tree(child.pid, child.token)


def _unregister(child: _LiveChild) -> None:
    with _live_lock:
        if _live.get(child.pid) is child:
            del _live[child.pid]


def move_deadline(pid: int, timeout_s: float) -> bool:
    """Give the running child `pid` (one run_process started with `movable_deadline`) a time
    limit of `timeout_s` from now in place of its own: a worker started before its job gets the
    job's limit when it is handed the job. False when no such child runs any more."""
    with _live_lock:
        child = _live.get(pid)
        if child is None:
            return False
        child.deadline = time.monotonic() + timeout_s
        return True


class ChildCancelled(Exception):
    """Raised by run_process in the thread running it when cancel_child ended its child."""


def cancel_child(pid: int) -> bool:
    """End the running child `pid` (one run_process with `movable_deadline` runs it in another
    thread) as a Ctrl-C during that call would: SIGTERM to its group (a compiler removes its
    temporary files), SIGKILL after a grace, then the call cleans up and raises ChildCancelled
    in its thread. False when no such child runs any more."""
    with _live_lock:
        child = _live.get(pid)
        if child is None:
            return False
        child.cancelled = True
        return True


def stop_child(pid: int, sig: int = _signal.SIGKILL) -> None:
    """SIGKILL (or `sig`) the process group of the running child `pid` (one run_process started
    in another thread; its own call then reaps it, sweeps what it left and returns). Nothing
    when no such child runs any more."""
    with _live_lock:
        child = _live.get(pid)
    if child is not None:
        _signal_group(child, sig)


class ChildThread:
    """A thread that runs one child process, `target(on_start)` (a call that starts it through
    run_process and passes `on_start` on: it is called with the child's pid), and that can be
    stopped at any moment: before the child exists (it is stopped as it starts), while it runs,
    or after it ended (nothing to do)."""

    def __init__(self, target: Callable[[Callable[[int], None]], Any], name: str) -> None:
        self._pid: int | None = None
        self._lock = threading.Lock()
        self._stopped = False
        self._thread = threading.Thread(
            target=target, args=(self._started,), name=name, daemon=True
        )
        self._thread.start()

    def _started(self, pid: int) -> None:
        with self._lock:
            self._pid = pid
            stopped = self._stopped
        if stopped:
            stop_child(pid)

    def join(self) -> None:
        self._thread.join()

    def stop(self) -> None:
        """End the child now if it still runs, and wait for the thread."""
        with self._lock:
            self._stopped = True
            pid = self._pid
        if pid is not None and self._thread.is_alive():
            stop_child(pid)
        self._thread.join()


def _reap(proc: subprocess.Popen[bytes], timeout_s: float) -> None:
    """Wait for the exit; if it does not come in time, leave a daemon thread to reap it later."""
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        threading.Thread(target=proc.wait, name=f"aotipre-reap-{proc.pid}", daemon=True).start()


def _wait_exit(pid: int, timeout_s: float) -> None:
    """Wait (without reaping) up to `timeout_s` for `pid` to exit, and a moment more for the
    rest of its group to finish what a SIGTERM makes them do."""
    deadline = time.monotonic() + timeout_s
    while not _has_exited(pid) and time.monotonic() < deadline:
        time.sleep(_POLL_S)
    time.sleep(min(0.2, max(0.0, deadline - time.monotonic())))


def _has_exited(pid: int) -> bool:
    """True once the child is a zombie; does not reap it (WNOWAIT), so its pgid stays reserved."""
    try:
        info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return True  # someone else reaped it
    except InterruptedError:
        return False
    return info is not None


def _pidfd_open(pid: int) -> int | None:
    """A pidfd that becomes readable when the child exits (Linux >= 5.3), else None."""
    opener = getattr(os, "pidfd_open", None)
    if opener is None:
        return None
    try:
        return int(opener(pid))
    except OSError:
        return None


def _grow_pipe(fd: int) -> None:
    set_size = getattr(fcntl, "F_SETPIPE_SZ", None)
    if set_size is not None:
        with contextlib.suppress(OSError):
            fcntl.fcntl(fd, set_size, _PIPE_SIZE)


class _Refused(Exception):
    """run_process was called after kill_all_children(refuse_new=True)."""


def _start_error_text(program: str, cwd: str | None, exc: BaseException) -> str:
    if isinstance(exc, _Refused):
        return "not started: the program is shutting down (interrupted)"
    if isinstance(exc, OSError):
        target = exc.filename if exc.filename is not None else program
        if cwd is not None and target == cwd:
            return f"working directory {cwd!r}: {exc.strerror}"
        if isinstance(exc, FileNotFoundError):
            return f"executable not found: {program!r}"
        if isinstance(exc, PermissionError):
            return f"not executable (permission denied): {program!r}"
        return f"{program!r}: {exc.strerror or exc}"
    return f"{program!r}: {exc}"


def _read_result(path: str) -> tuple[dict[str, Any] | None, str | None]:
    """The JSON object in `path`, or (None, why not)."""
    try:
        size = os.path.getsize(path)
        if size > MAX_RESULT_BYTES:
            return None, f"result file {path} is too large ({size} bytes > {MAX_RESULT_BYTES})"
        with open(path, "rb") as f:
            raw = f.read(min(size, MAX_RESULT_BYTES) + 1)  # read(n) allocates n bytes first
    except FileNotFoundError:
        return None, f"the process wrote no result file ({path})"
    except OSError as exc:
        return None, f"cannot read result file {path}: {exc.strerror or exc}"
    if not raw.strip():
        return None, f"result file {path} is empty"
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        return None, f"result file {path} is not valid JSON: {exc}"
    if not isinstance(data, dict):
        return None, f"result file {path} holds a JSON {type(data).__name__}, not an object"
    return data, None
