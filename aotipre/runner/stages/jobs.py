"""One worker process over a list of planned steps: the job file it reads, and a StepRecord for
every step it finished or died in (a death is classified from the step's own log)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from aotipre.runner import forkserver, launch
from aotipre.runner.classify import watchdog_fired
from aotipre.runner.proc import ProcessOutcome
from aotipre.runner.stages.base import PlannedStep, StepRecord

if TYPE_CHECKING:
    from aotipre.runner.prewarm import Prewarmed


@dataclass
class JobResult:
    """What one worker did."""

    records: list[StepRecord]
    """The steps it finished or died in, in order."""
    seen: set[str]
    """Their ids (steps it never reached are not in the set)."""
    startup_s: float
    """Worker time no step accounts for (interpreter start, `import torch`): it counts toward
    the first step it ran."""


def run_job(
    job: dict[str, Any],
    steps: list[PlannedStep],
    *,
    workdir: str,
    argv_for: Callable[[str], tuple[str, ...]],
    env: dict[str, str],
    budget_s: float,
    shown_env: Callable[[str], dict[str, str]],
    on_output: Callable[[str], None],
    warm: Prewarmed | None = None,
) -> JobResult:
    """Run one worker over `steps` (`job` is the job file without its steps), or hand them to
    `warm`, the command's first worker, claimed for this argv and environment
    (runner/prewarm.py). Never raises because the worker crashed or hung."""
    job = {**job, "workdir": workdir, "steps": [{"id": s.id, "op": s.op, **s.body} for s in steps]}
    if warm is not None:
        argv, outcome = warm.hand(job, on_output=on_output, budget_s=budget_s)
    else:
        argv, outcome = launch.run_job_file(
            job, argv_for, env=env, budget_s=budget_s, on_output=on_output
        )
    done = absorb(steps, outcome, forkserver.fresh_argv(argv), shown_env)
    result = outcome.result or {}
    forked_from = result.get("forked_from")
    if isinstance(forked_from, int) and isinstance(result.get("pid"), int):
        # the worker the fork server forked for the client this process started
        label = process_label(str(job.get("tag", "")), result["pid"], forked_from=forked_from)
    else:
        label = process_label(str(job.get("tag", "")), outcome.pid, early=warm is not None)
    for rec in done.records:
        rec.process = label
    return done


def process_label(
    tag: str,
    pid: int | None,
    *,
    prewarmed: bool = False,
    forked_from: int | None = None,
    early: bool = False,
) -> str:
    """`worker job1 (pid 4242)`: which of a model's workers ran a step (the session numbers
    them from job0; a step after a worker died runs in the next). `prewarmed`: the worker was
    started before the crash and waited for this job (runner/prewarm.py); `forked_from`: the
    fork server that forked it (runner/forkserver.py); `early`: the command's first worker,
    started while it read the package (runner/prewarm.py first_worker)."""
    about = [f"pid {pid}"] if pid is not None else []
    if prewarmed:
        about.append("started before the crash")
    if early:
        about.append("started with the command")
    if forked_from is not None:
        about.append(f"forked by the fork server, pid {forked_from}")
    return f"worker {tag}" + (f" ({', '.join(about)})" if about else "")


def absorb(
    steps: list[PlannedStep],
    outcome: ProcessOutcome,
    argv: tuple[str, ...],
    shown_env: Callable[[str], dict[str, str]],
) -> JobResult:
    """The records of one finished worker: its own per-step entries, plus the step it died in."""
    result = outcome.result or {}
    steps_done = result.get("steps")
    done: dict[str, Any] = steps_done if isinstance(steps_done, dict) else {}
    current = result.get("current") if isinstance(result.get("current"), dict) else None
    seen: set[str] = set()
    records: list[StepRecord] = []
    for step in steps:
        entry = done.get(step.id)
        if not isinstance(entry, dict):
            continue
        seen.add(step.id)
        status = entry.get("status")
        records.append(
            StepRecord(
                id=step.id,
                op=step.op,
                status=status if status in ("ok", "skipped") else "error",
                duration_s=float(entry.get("duration_s") or 0.0),
                entry=entry,
                log=str(entry.get("log") or ""),
                argv=argv,
                env=shown_env(step.op),
            )
        )
    finished = bool(result.get("done") or result.get("stopped"))
    if not finished or (not outcome.ok and current is not None):
        # A worker that ended before saying it finished or stopped died in a step, even with
        # exit status 0 (os._exit(0) in an --import module or in code the model calls). A
        # death after it finished or stopped, e.g. in a CUDA teardown, belongs to no step:
        # the steps it did not reach stay pending for a fresh worker.
        victim = _victim(steps, seen, current)
        if victim is not None:
            seen.add(victim.id)
            records.append(died(victim, outcome, current, argv, shown_env(victim.op)))
    startup = max(0.0, outcome.duration_s - sum(r.duration_s for r in records))
    return JobResult(records, seen, startup)


def _victim(
    steps: list[PlannedStep], seen: set[str], current: dict[str, Any] | None
) -> PlannedStep | None:
    if current is not None:
        for step in steps:
            if step.id == current.get("id"):
                return step
    for step in steps:
        if step.id not in seen:
            return step
    return None


def died(
    step: PlannedStep,
    outcome: ProcessOutcome,
    current: dict[str, Any] | None,
    argv: tuple[str, ...],
    env: dict[str, str],
) -> StepRecord:
    """The record of the step a worker died in: timeout, crash (a signal) or worker_error."""
    log = ""
    log_path = current.get("log") if current and current.get("id") == step.id else None
    if isinstance(log_path, str) and os.path.isfile(log_path):
        with open(log_path, "rb") as f:
            size = f.seek(0, os.SEEK_END)
            f.seek(max(0, size - 64 * 1024))
            log = f.read().decode("utf-8", errors="replace")
    if not log:
        log = outcome.stderr_tail
    started = current.get("started") if current else None
    duration = max(0.0, time.time() - float(started)) if isinstance(started, (int, float)) else 0.0
    entry: dict[str, Any] = {"phase": current.get("phase")} if current else {}
    if current and isinstance(current.get("peak_rss_mb"), (int, float)):
        entry["peak_rss_mb"] = current["peak_rss_mb"]  # the compile's, when it records it
    base = StepRecord(
        id=step.id,
        op=step.op,
        status="worker_error",
        duration_s=min(duration, outcome.duration_s),
        entry=entry,
        log=log,
        argv=argv,
        env=env,
    )
    # the watchdog's exit is 1, or a signal when dumping the threads of a busy compile crashed
    # (measured: a 1 s compile limit under load died by SIGSEGV right after `Timeout (...)!`)
    fired = watchdog_fired(log) and (outcome.returncode == 1 or outcome.crashed)
    if outcome.timed_out or fired:
        limit = watchdog_fired(log)
        detail = f"no result after {limit}" if limit else outcome.summary
        return replace(base, status="timeout", detail=detail)
    if outcome.crashed:
        return replace(base, status="crash", signal=outcome.signal_name, detail=outcome.summary)
    if outcome.interrupted:
        return replace(base, detail="interrupted")
    detail = outcome.summary
    if outcome.result_error and not outcome.result:
        detail = f"{detail}; {outcome.result_error}"
    elif outcome.ok:
        detail += (
            f" before step {step.id!r} finished, without an error: something in the worker "
            "ended it (os._exit() or sys.exit() in an --import module or in code the step ran)"
        )
    tail = outcome.stderr_tail.strip().splitlines()[-3:]
    if tail:
        detail += " | " + " | ".join(line.strip() for line in tail)
    return replace(base, detail=detail)
