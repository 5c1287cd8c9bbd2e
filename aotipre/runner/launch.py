"""How the parent starts a torch worker (aotipre/runner/worker/): its script, its argv, the
environment every model call gets, and the start-up slack on top of the per-step limits.

Read these through the module (`launch.WORKER_PATH`), not `from ... import`: the fake-worker
harness (tests/fakes/cli_with_fake_worker.py) swaps the script at run time.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from aotipre.runner.proc import ProcessOutcome, run_process

WORKER_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "worker", "__main__.py")
RUNTIME_CHECK_ENV = {"AOTI_RUNTIME_CHECK_INPUTS": "1"}
SYNC_ENV = {"CUDA_LAUNCH_BLOCKING": "1", "PYTORCH_NO_CUDA_MEMORY_CACHING": "1"}
"""Synchronous launches (the failing call is the faulting kernel) and no caching allocator (an
out-of-bounds access hits unmapped memory instead of a neighbour's block): crash triage's
re-runs and the compile stage's fault re-run."""
STARTUP_SLACK_S = 120.0
"""Backstop on top of the per-step limits: interpreter start, `import torch`, CUDA init."""


def worker_argv(
    python: str | None, worker_command: Sequence[str] | None, job_path: str
) -> tuple[str, ...]:
    """`python worker/__main__.py JOB` (this interpreter by default), or the test hook's argv."""
    if worker_command:
        return (*worker_command, job_path)
    return (python or sys.executable, WORKER_PATH, job_path)


def job_env(*extra: Mapping[str, str]) -> dict[str, str]:
    """A job's worker environment: this process's, the runtime check's switch, then each of
    `extra` in turn (the options' extra_env, what the session added)."""
    env = dict(os.environ)
    env.update(RUNTIME_CHECK_ENV)
    for more in extra:
        env.update(more)
    return env


def worker_key(python: str | None, worker_command: Sequence[str] | None) -> tuple[str, ...]:
    """What identifies a kind of worker process (per-interpreter facts are cached under it)."""
    return tuple(worker_command or ()) or (python or sys.executable, WORKER_PATH)


def job_budget_s(
    steps: Iterable[Mapping[str, Any]], timeout_s: float, compile_timeout_s: float
) -> float:
    """What a worker may take over `steps`: each step's own `timeout_s`, else the compile limit
    for a compile and the step limit for the rest (the worker's watchdog applies the same)."""
    return sum(
        float(s.get("timeout_s") or (compile_timeout_s if s.get("op") == "compile" else timeout_s))
        for s in steps
    )


def run_job_file(
    job: Mapping[str, Any],
    argv_for: Callable[[str], tuple[str, ...]],
    *,
    env: Mapping[str, str],
    budget_s: float,
    on_output: Callable[[str], None] | None = None,
    on_start: Callable[[int], None] | None = None,
) -> tuple[tuple[str, ...], ProcessOutcome]:
    """Write `job` as `<workdir>/<tag>.json`, run the worker `argv_for(that path)` over it in
    `workdir` within the budget plus start-up slack, and read `<tag>.result.json`. Never raises
    because the worker crashed or hung: the outcome says so. A cache the job's worker would
    execute from (the C++ harness's) is verified first and sealed after (`_trusted_caches`).
    `on_start` gets the worker's pid (proc.stop_child ends it from another thread)."""
    workdir, tag = str(job["workdir"]), str(job["tag"])
    job = _trusted_caches(job, workdir)
    job_path = os.path.join(workdir, f"{tag}.json")
    with open(job_path, "w") as f:
        json.dump(job, f)
    argv = argv_for(job_path)
    outcome = run_process(
        argv,
        env=dict(env),
        timeout_s=budget_s + STARTUP_SLACK_S,
        cwd=workdir,
        result_path=os.path.join(workdir, f"{tag}.result.json"),
        on_output=on_output,
        on_start=on_start,
    )
    _seal_caches(job, outcome)
    return argv, outcome


def _trusted_caches(job: Mapping[str, Any], workdir: str) -> Mapping[str, Any]:
    """`job` with each `cpp_build` step's harness cache verified (aotipre.cpp.harness
    .prepare_build: an entry that is not aotipre's own is moved away, or the step gets a cache
    folder of its own): the worker runs whatever binary it finds there."""
    steps = job.get("steps")
    if not isinstance(steps, list) or not any(_is_build(s) for s in steps):
        return job
    from aotipre.cpp import harness

    prepared = [harness.prepare_build(s, workdir) if _is_build(s) else s for s in steps]
    return {**job, "steps": prepared}


def _seal_caches(job: Mapping[str, Any], outcome: ProcessOutcome) -> None:
    """After the worker: the manifest of each harness it built (aotipre.cpp.harness
    .seal_build), and in its step's record why the cache was not used, if it was not."""
    steps = job.get("steps")
    if not isinstance(steps, list) or not any(_is_build(s) for s in steps):
        return
    from aotipre.cpp import harness

    done = (outcome.result or {}).get("steps")
    done = done if isinstance(done, dict) else {}
    for step in filter(_is_build, steps):
        entry = done.get(step.get("id"))
        harness.seal_build(step, entry)
        if isinstance(entry, dict) and step.get("cache_ignored"):
            entry["cache_ignored"] = step["cache_ignored"]


def _is_build(step: Any) -> bool:
    return isinstance(step, Mapping) and step.get("op") == "cpp_build" and "cache_root" in step
