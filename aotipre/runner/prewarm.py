"""Workers started before their job exists (issue #28: triage starts before it is needed).

On CUDA, a crash's first triage steps run at once, each in a fresh worker with synchronous
launches (triage/ladder.py): `sync-rerun` re-runs the package, `printer-3` recompiles it with
the kernel-name printer and runs it. Much of each is the worker's start: the interpreter,
`import torch` and inductor's compile modules, not the load and the call. The session starts
RERUN_WORKERS such workers beside the model's first one, with those steps' environment
(CUDA_LAUNCH_BLOCKING is read when CUDA starts, so it must be set at exec): each imports torch,
the loader and the compiler, then waits for its job file (worker/host.py: prewarm_and_wait). A
crash's triage claims one per step (`claim`, then `hand`); a check that does not crash stops
them (`stop`: SIGKILL to the group).

It does not start CUDA: a context would take GPU memory the perf stage reads as the model's,
and on a healthy check it would hold a GPU for nothing. What a healthy check pays for them is
two more interpreters importing torch on idle cores while the model's worker does the same
(BENCHMARKS.md, "Triage speed").

A one-package `aotipre check` starts its first worker the same way, before it has read its own
options (`first_worker`, from cli.py): it imports torch only, and the session's first job takes
it (`take_first`) when that job's argv and environment are the ones it started with; anything
else stops it. Its time limit becomes the job's at the hand-over, and an interrupt during the
hand-over ends it as run_process ends its own child (BENCHMARKS.md, "Cost of a check").
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shutil
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from aotipre.foundation import tempdirs
from aotipre.runner import launch
from aotipre.runner.proc import (
    INTERRUPT_GRACE_S,
    ChildCancelled,
    ProcessOutcome,
    cancel_child,
    move_deadline,
    run_process,
    stop_child,
)

PREWARM_ENV = "AOTIPRE_PREWARM"
"""The worker's switch (worker/host.py PREWARM_ENV): the parts to import before the wait."""
WAIT_ENV = "AOTIPRE_PREWARM_WAIT_S"
WAITING_SUFFIX = ".waiting"
"""The file the worker writes beside its job path once it waits (worker/host.py)."""
PARTS = "loader,compiler"
"""torch, what the direct loader needs and inductor's compile modules (no CUDA: see above)."""
RERUN_WORKERS = 2
"""sync-rerun and printer-3, the steps that start together after a crash."""
MAX_ALIVE = (os.cpu_count() or 1) // 4
"""Waiting workers alive at once in this process, whatever the number of packages checked at
once (`-j N` over several GPUs): each imports torch on a core the checks' own workers may need,
so a host gets one per four cores (none on a 2-core host, two sessions' worth on 16)."""

_alive = 0
_alive_lock = threading.Lock()

FIRST_PARTS = ""
"""The first worker of a one-package check imports torch and nothing more, as a fresh worker
does before its job: a load imports the loader's modules itself (the perf stage times them)."""
FIRST_WAIT_S = 120.0
"""How long it waits for its job (the command's own reading, static checks, interpreter
probe); a worker whose job did not come by then exits, and the job starts a fresh one."""
FIRST_BUDGET_S = 7 * 24 * 3600.0
"""Any job may claim it: its time limit becomes the job's own when it is handed the job."""
FIRST_MARGIN_S = 30.0
"""A first worker older than FIRST_WAIT_S less this is not handed a job (its wait may end)."""
FIRST_READY_S = 60.0
"""How long the first job waits for the first worker to finish importing torch."""
FIRST_SWITCH_ENV = "AOTIPRE_PREWARM_FIRST"
"""Set to 0: no first worker (every job starts its own)."""
CANCEL_WAIT_S = INTERRUPT_GRACE_S + 15.0
"""How long an interrupted hand-over waits for the job's thread to end the worker and clean up
(the grace between SIGTERM and SIGKILL, the reap, the sweep)."""
_first: Prewarmed | None = None
_first_lock = threading.Lock()


@contextlib.contextmanager
def first_worker(
    argv_for: Callable[[str], tuple[str, ...]], env: Mapping[str, str], *, enabled: bool
) -> Iterator[None]:
    """While a command that checks one package reads it and runs its static checks, its first
    worker starts and imports torch (issue 28: the check is bounded by its worker's start): the
    session's first job claims it (take_first) when that job's argv and environment are these;
    anything else stops it. Off with AOTIPRE_PREWARM_FIRST=0."""
    global _first
    if not enabled or _first is not None or os.environ.get(FIRST_SWITCH_ENV) == "0":
        yield  # off, or one started already (the CLI starts it before its options are read)
        return
    try:
        warm = Prewarmed(
            argv_for, env, wait_s=FIRST_WAIT_S, budget_s=FIRST_BUDGET_S, parts=FIRST_PARTS
        )
    except OSError:  # no folder for it: the first job starts its own worker
        yield
        return
    with _first_lock:
        _first = warm
    try:
        yield
    finally:
        with _first_lock:
            if _first is warm:
                _first = None
        warm.stop()


def take_first(
    argv_for: Callable[[str], tuple[str, ...]], env: Mapping[str, str], budget_s: float
) -> Prewarmed | None:
    """The command's first worker (first_worker), claimed for a job with this argv and
    environment, or None; only the first job asks, and one that cannot use it stops it."""
    global _first
    with _first_lock:
        warm, _first = _first, None
    if warm is None:
        return None
    # not one whose wait may end before it reads the job (it would exit without running it),
    # and only once it waits (a stand-in that cannot wait ends instead): it is most likely
    # still importing torch, which a fresh worker would only start doing now
    fresh = time.monotonic() - warm.started_at < FIRST_WAIT_S - FIRST_MARGIN_S
    if (
        fresh
        and warm.fits(argv_for, env, budget_s)
        and warm.wait_until_waiting(FIRST_READY_S)
        and warm.claim(argv_for, env, budget_s)
    ):
        return warm
    warm.stop()
    return None


def start(
    count: int,
    argv_for: Callable[[str], tuple[str, ...]],
    env: Mapping[str, str],
    *,
    wait_s: float,
    budget_s: float,
) -> tuple[Prewarmed, ...]:
    """Up to `count` waiting workers (Prewarmed's arguments), as many as MAX_ALIVE leaves room
    for; each gives its place back when its process ends. None when the folder for one cannot
    be made (the steps then start their own)."""
    global _alive
    started: list[Prewarmed] = []
    for _ in range(count):
        with _alive_lock:
            if _alive >= MAX_ALIVE:
                break
            _alive += 1
        try:
            warm = Prewarmed(argv_for, env, wait_s=wait_s, budget_s=budget_s, on_end=_release)
        except OSError:
            _release()
            break
        started.append(warm)
    return tuple(started)


def _release() -> None:
    global _alive
    with _alive_lock:
        _alive -= 1


class Prewarmed:
    """One worker process waiting for its job: `argv_for` and `env` are those of the job it
    will run (a step whose own argv or environment differs must not use it), `wait_s` how long
    it waits, `budget_s` what the job may take after that; `on_end` is called when its process
    has ended (start() gives its place back)."""

    def __init__(
        self,
        argv_for: Callable[[str], tuple[str, ...]],
        env: Mapping[str, str],
        *,
        wait_s: float,
        budget_s: float,
        on_end: Callable[[], None] | None = None,
        parts: str = PARTS,
    ) -> None:
        self._on_end = on_end
        self.folder = tempdirs.make_dir("aotipre-prewarm-")
        self.job_path = os.path.join(self.folder, "prewarm.json")
        self.argv = argv_for(self.job_path)
        self.env = dict(env)
        self.budget_s = budget_s
        self.started_at = time.monotonic()
        self._pid: int | None = None
        self._started = threading.Event()
        self._state = "waiting"
        """waiting, claimed (a step will hand it its job), handed, stopped."""
        self._lock = threading.Lock()
        self._outcome: ProcessOutcome | None = None
        self._on_output: Callable[[str], None] | None = None
        self._ended = threading.Event()
        child_env = {**self.env, PREWARM_ENV: parts, WAIT_ENV: f"{wait_s:.0f}"}
        self._thread = threading.Thread(
            target=self._run,
            args=(child_env, wait_s + budget_s + launch.STARTUP_SLACK_S),
            name="aotipre-prewarm",
            daemon=True,
        )
        self._thread.start()

    def _run(self, env: dict[str, str], timeout_s: float) -> None:
        try:
            self._outcome = run_process(
                self.argv,
                env=env,
                timeout_s=timeout_s,
                cwd=self.folder,
                result_path=os.path.join(self.folder, "prewarm.result.json"),
                on_start=self._on_start,
                on_output=self._output,
                movable_deadline=True,
            )
        except ChildCancelled:
            pass  # hand() was interrupted: it raises the interrupt in its own thread
        finally:
            self._started.set()
            self._ended.set()
            if self._on_end is not None:
                self._on_end()

    def _on_start(self, pid: int) -> None:
        self._pid = pid
        self._started.set()

    def _output(self, line: str) -> None:
        forward = self._on_output
        if forward is not None:
            forward(line)

    def fits(
        self, argv_for: Callable[[str], tuple[str, ...]], env: Mapping[str, str], budget_s: float
    ) -> bool:
        """A job with this argv, environment and budget could run in it."""
        return (
            budget_s <= self.budget_s
            and argv_for(self.job_path) == self.argv
            and dict(env) == self.env
        )

    def wait_until_waiting(self, timeout_s: float) -> bool:
        """Wait (at most `timeout_s`) until it waits for its job: False when its process ended
        first (a worker that cannot wait) or the time ran out."""
        deadline = time.monotonic() + timeout_s
        while not os.path.exists(self.job_path + WAITING_SUFFIX):
            if self._outcome is not None or time.monotonic() >= deadline:
                return False
            time.sleep(0.01)
        return self._outcome is None

    def claim(
        self, argv_for: Callable[[str], tuple[str, ...]], env: Mapping[str, str], budget_s: float
    ) -> bool:
        """Take it for a job with this argv and environment, when they are its own, the job's
        budget is within its own and it is alive and waiting (a worker that cannot wait, e.g. a
        test's stand-in, never says it waits); one claim only, safe from several threads."""
        with self._lock:
            if (
                self._state != "waiting"
                or self._outcome is not None
                or not self.fits(argv_for, env, budget_s)
                or not os.path.exists(self.job_path + WAITING_SUFFIX)
            ):
                return False
            self._state = "claimed"
            return True

    def hand(
        self,
        job: Mapping[str, Any],
        *,
        on_output: Callable[[str], None] | None = None,
        budget_s: float | None = None,
    ) -> tuple[tuple[str, ...], ProcessOutcome]:
        """Give the claimed worker `job` (written atomically: the worker polls for the file)
        and wait for its outcome, as launch.run_job_file would return it: its stderr lines go
        to `on_output` from now on, and with `budget_s` its time limit is the job's (the budget
        plus start-up slack, from now) instead of the one it was started with."""
        with self._lock:
            if self._state != "claimed":
                raise RuntimeError(
                    f"a prewarmed worker gets a job once it is claimed ({self._state})"
                )
            self._state = "handed"
        handed = time.monotonic()
        self._on_output = on_output
        if budget_s is not None and self._pid is not None:
            move_deadline(self._pid, budget_s + launch.STARTUP_SLACK_S)
        tmp = f"{self.job_path}.tmp"
        with open(tmp, "w") as f:
            json.dump(dict(job), f)
        os.replace(tmp, self.job_path)
        try:
            self._ended.wait()
        except BaseException:
            # Ctrl-C or a terminating signal while the job runs in the other thread: end it as
            # run_process ends its own child then (SIGTERM first, so that a compiler removes
            # its temporary files), and let that thread clean up before this one goes on
            self._end_job()
            raise
        shutil.rmtree(self.folder, ignore_errors=True)
        assert self._outcome is not None
        # its time is the job's, from the hand-over (not the wait before it)
        ran = min(self._outcome.duration_s, time.monotonic() - handed)
        return self.argv, dataclasses.replace(self._outcome, duration_s=ran)

    def _end_job(self) -> None:
        if self._pid is not None:
            cancel_child(self._pid)
        # (not Thread.join: a join that an interrupt broke leaves the thread looking ended)
        self._ended.wait(CANCEL_WAIT_S)
        shutil.rmtree(self.folder, ignore_errors=True)

    def stop(self) -> None:
        """End it unless a step claimed it (SIGKILL to its group, then its folder)."""
        with self._lock:
            if self._state != "waiting":
                return
            self._state = "stopped"
        self._started.wait()
        if self._pid is not None:
            stop_child(self._pid)
        self._thread.join()
        shutil.rmtree(self.folder, ignore_errors=True)
