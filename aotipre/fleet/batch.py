"""Many packages in one run: from arguments or a manifest, checked in parallel, reported in order."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import signal
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aotipre import api
from aotipre.config import BY_NAME, Settings, display_path, parse_values, read_toml
from aotipre.findings import Report
from aotipre.fleet.gpus import pinned_check
from aotipre.fleet.matrix import check as check_in_runtimes
from aotipre.foundation.errors import UsageError
from aotipre.report.common import numbered

if TYPE_CHECKING:  # imported where used: the baseline only with --baseline or --write-baseline,
    # the interpreters' probe only for a job that runs workers, the shards only for --shard
    # (`check --static-only`'s start-up time, tests/test_cli.py)
    from aotipre.environment.runtimes import Runtime
    from aotipre.findings.baseline import Baseline
    from aotipre.fleet.shard import Shard, ShardPlan

_ENTRY_KEYS = ("path", "inputs", "model")
_PER_PACKAGE = {k.name: k for k in BY_NAME.values() if k.per_package}


@dataclass(frozen=True)
class ManifestEntry:
    """One `[[package]]` of a manifest."""

    package: str
    inputs: str | None = None
    model: str | None = None
    values: Mapping[str, Any] = field(default_factory=dict)
    """Validated settings for this package only (field name -> value)."""


@dataclass(frozen=True)
class Manifest:
    """A TOML file listing packages: `[defaults]` (any config key) and `[[package]]` entries
    (`path`, `inputs`, `model` and per-package config keys); paths are relative to the file."""

    path: str
    defaults: Mapping[str, Any]
    entries: tuple[ManifestEntry, ...]


@dataclass(frozen=True)
class PackageJob:
    """One package to check, with its options resolved."""

    package: str
    options: api.CheckOptions
    pythons: tuple[str, ...] = ()
    """The interpreters its workers run in, as configured (probed by check_packages)."""
    runtimes: tuple[Runtime, ...] = ()
    """Those interpreters, probed; empty: api.check's own choice (the running one)."""


def load_manifest(path: str | os.PathLike[str]) -> Manifest:
    """Read and validate a manifest; UsageError names the file, the entry and the key."""
    file = Path(path)
    data = read_toml(file)
    name = display_path(file)
    base = file.resolve().parent
    for key in data:
        if key not in ("defaults", "package"):
            raise UsageError(
                f"{name}: unknown key {key!r}",
                hint="a manifest holds a [defaults] table and [[package]] entries",
            )
    defaults_table = data.get("defaults", {})
    if not isinstance(defaults_table, dict):
        raise UsageError(f"{name}: defaults must be a table ([defaults])")
    defaults = parse_values(defaults_table, f"{name} [defaults]", base)
    packages = data.get("package", [])
    if not isinstance(packages, list) or not all(isinstance(p, dict) for p in packages):
        raise UsageError(f"{name}: package must be an array of tables ([[package]])")
    if not packages:
        raise UsageError(f"{name}: no [[package]] entries")
    entries = []
    for i, table in enumerate(packages, 1):
        where = f"{name} [[package]] #{i}"
        values = parse_values(table, where, base, allowed=_PER_PACKAGE, extra=_ENTRY_KEYS)
        path_value = table.get("path")
        if not isinstance(path_value, str) or not path_value:
            raise UsageError(f"{where}: 'path' (the .pt2 file) is required")
        inputs = table.get("inputs")
        model = table.get("model")
        for key, value in (("inputs", inputs), ("model", model)):
            if value is not None and (not isinstance(value, str) or not value):
                raise UsageError(f"{where}: {key} = {value!r}: expected a non-empty string")
        entries.append(
            ManifestEntry(
                package=display_path(base / path_value),
                inputs=display_path(base / inputs) if inputs else None,
                model=model,
                values=values,
            )
        )
    return Manifest(path=name, defaults=defaults, entries=tuple(entries))


def run_settings(
    settings: Settings, manifest: Manifest | None, flags: Mapping[str, Any]
) -> Settings:
    """The settings that hold once per run (jobs, baseline): file < manifest defaults < flags."""
    out = settings
    if manifest is not None:
        out = out.merged(manifest.defaults)
    return out.merged(flags)


def plan(
    packages: Sequence[str],
    settings: Settings,
    *,
    manifest: Manifest | None = None,
    flags: Mapping[str, Any] | None = None,
    inputs: str | None = None,
    model: str | None = None,
    baseline: Baseline | None = None,
    progress: Callable[[str], None] | None = None,
    serving: Mapping[str, Any] | None = None,
    prefix: bool | None = None,
) -> list[PackageJob]:
    """One job per package, ordered by package path (stable: a manifest's repeats keep order).

    Precedence, lowest first: built-in defaults, the config file (`settings`), the manifest's
    `[defaults]`, its `[[package]]` entry, the command-line `flags`. `serving`: the model
    server's config of a package (aotipre.serving.triton.ServingConfig), by package path.
    `prefix`: each package's `progress` lines start with `<package>: ` (True: always, e.g. a
    shard or a Ray task of a larger run; False: never; None: for several packages or a
    manifest).
    """
    flags = flags or {}
    entries = [(ManifestEntry(package=p), False) for p in packages]
    if manifest is not None:
        entries += [(e, True) for e in manifest.entries]
    if not entries:
        raise UsageError("no package to check", hint="give .pt2 files or --manifest FILE")
    if len(entries) > 1 and (inputs is not None or model is not None):
        raise UsageError(
            "--inputs and --model apply to one package",
            hint="for several, list them in a --manifest, or map inputs in [tool.aotipre.inputs]",
        )
    jobs = []
    entries = sorted(entries, key=lambda e: e[0].package)
    # a path given twice (a manifest's entries with other inputs): `#2` on the later ones'
    # lines, as every report and `merge` name them (report/common.py package_labels)
    labels = numbered([entry.package for entry, _ in entries])
    for (entry, from_manifest), label in zip(entries, labels):
        resolved = settings
        if from_manifest and manifest is not None:
            resolved = resolved.merged(manifest.defaults)
        resolved = resolved.merged(entry.values).merged(flags)
        say = None
        if progress is not None:
            named = prefix if prefix is not None else len(entries) > 1 or manifest is not None
            say = _prefixed(progress, label) if named else progress
        options = resolved.check_options(
            inputs=inputs or entry.inputs or settings.inputs_for(entry.package),
            model=model or entry.model,
            baseline=baseline,
            progress=say,
        )
        if serving and entry.package in serving:
            options = dataclasses.replace(options, serving_config=serving[entry.package])
        jobs.append(PackageJob(entry.package, options, pythons=resolved.python))
    return jobs


def run(
    jobs: Sequence[PackageJob], workers: int = 1, *, gpus: Sequence[int] | str | None = None
) -> list[Report]:
    """Check every job; up to `workers` at once (threads: the heavy work runs in worker
    processes). Reports come back in the jobs' order whatever finishes first. A job that needs
    a GPU gets one to itself while several run (or `gpus`, --gpus, is given): aotipre.fleet.gpus."""
    check = pinned_check(jobs, workers, gpus, _check)
    with _fork_session(enabled=len(jobs) > 1):
        if check is _check and jobs:  # (a job pinned to a GPU gets another environment)
            start_server_early(jobs[0])
        if workers <= 1 or len(jobs) <= 1:
            return [check(job) for job in jobs]
        return _in_threads(check, jobs, workers)


def _fork_session(enabled: bool) -> contextlib.AbstractContextManager[None]:
    """forkserver.session(enabled); without importing the runner when not `enabled` (one
    package: `check --static-only` starts no child), where that session does nothing."""
    if not enabled:
        return contextlib.nullcontext()
    from aotipre.runner import forkserver

    return forkserver.session(enabled=True)


def _in_threads(
    check: Callable[[PackageJob], Report], jobs: Sequence[PackageJob], workers: int
) -> list[Report]:
    from concurrent.futures import ThreadPoolExecutor

    from aotipre.runner.proc import allow_new_children, kill_all_children

    pool = ThreadPoolExecutor(max_workers=min(workers, len(jobs)))
    refused = False
    try:
        return list(pool.map(check, jobs))
    except BaseException:
        # Ctrl-C (or a bug) here: stop the workers the other threads wait on and start no more,
        # or shutting the pool down would wait for them (for a hung worker: its whole timeout)
        # (SIGTERM first, so that a compiler removes its temporary files: proc.run_process)
        refused = True
        if kill_all_children(signal.SIGTERM, refuse_new=True):
            with contextlib.suppress(BaseException):  # a second Ctrl-C: kill at once
                time.sleep(1.0)
        kill_all_children()
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        if refused:
            allow_new_children()


def start_server_early(job: PackageJob) -> None:
    """Start the fork server `job`'s first worker will most likely ask for (its interpreter,
    the environment its session gives a model call), while the job reads its package and runs
    its static checks (forkserver.start_early). Nothing for a static-only job or a test's
    stand-in worker, nor outside a fork-server session."""
    dynamic = job.options.dynamic
    if job.options.static_only or (dynamic is not None and dynamic.worker_command):
        return
    if job.runtimes:  # a matrix runs its first interpreter first
        python = job.runtimes[0].python
    else:
        python = (dynamic.python if dynamic is not None else None) or sys.executable
    extra = dynamic.extra_env if dynamic is not None else {}
    from aotipre.runner import forkserver, launch  # imported here: a static-only job starts none

    forkserver.start_early(python, launch.job_env(extra))


def _check(job: PackageJob) -> Report:
    return check_in_runtimes(job.package, job.options, job.runtimes)


def with_runtimes(jobs: Sequence[PackageJob], *, light: bool = False) -> list[PackageJob]:
    """Probe the interpreters of the jobs that run workers, once each (UsageError, one line,
    when one is missing, broken, or has no supported torch).

    `light`: a job whose workers would run in this Python, which has no torch (the light
    install), is kept with no runtimes instead: api.check then reports, in every format, that
    its dynamic stages could not run and why (a --python that names no torch stays an error)."""
    probed: dict[tuple[str, ...], tuple[Runtime, ...] | None] = {}
    out = []
    for job in jobs:
        if job.options.static_only:
            out.append(job)
            continue
        from aotipre.environment.runtimes import resolve

        if job.pythons not in probed:
            try:
                probed[job.pythons] = resolve(job.pythons)
            except UsageError:
                if not (light and not job.pythons):
                    raise
                probed[job.pythons] = None
        runtimes = probed[job.pythons]
        out.append(job if runtimes is None else dataclasses.replace(job, runtimes=runtimes))
    return out


def keep_shard(
    jobs: Sequence[PackageJob], shard: Shard, manifest: Manifest | None = None
) -> tuple[list[PackageJob], ShardPlan]:
    """The jobs of one CI shard, and the plan of the whole run (aotipre/fleet/shard.py): packages
    keyed by their path relative to the manifest's folder, or to the working directory when
    there is no manifest."""
    from aotipre.fleet.shard import plan_shards

    base = Path(manifest.path).resolve().parent if manifest is not None else Path.cwd()
    planned = plan_shards(shard, [job.package for job in jobs], base)
    kept = [job for job, (_, _, index) in zip(jobs, planned.packages) if index == shard.index]
    return kept, planned


def check_packages(
    packages: Sequence[str],
    settings: Settings,
    *,
    manifest: Manifest | None = None,
    flags: Mapping[str, Any] | None = None,
    inputs: str | None = None,
    model: str | None = None,
    write_baseline_to: str | None = None,
    progress: Callable[[str], None] | None = None,
    serving: Mapping[str, Any] | None = None,
    engine: Callable[[Sequence[PackageJob], int], list[Report]] | None = None,
    select: Callable[[list[PackageJob]], list[PackageJob]] | None = None,
    prefix: bool | None = None,
) -> list[Report]:
    """Plan, run and (with `write_baseline_to`) accept every finding into a new baseline.

    The baseline named by the settings is applied unless a new one is being written; then the
    reports are returned as the new baseline sees them. `engine` runs the jobs (with the `jobs`
    setting) instead of `run` (aotipre.fleet.engines: e.g. a Ray cluster). `select` keeps some of the
    planned jobs (a CI shard's: `keep_shard`). `prefix`: as plan's (the package before each
    progress line).
    """
    flags = flags or {}
    once = run_settings(settings, manifest, flags)
    baseline = None
    if once.baseline is not None and write_baseline_to is None:
        from aotipre.findings.baseline import load_baseline

        baseline = load_baseline(once.baseline)
    jobs = plan(
        packages,
        settings,
        manifest=manifest,
        flags=flags,
        inputs=inputs,
        model=model,
        baseline=baseline,
        progress=progress,
        serving=serving,
        prefix=prefix,
    )
    if select is not None:
        jobs = select(jobs)
    # a new baseline is never written from reports that could not run
    local = functools.partial(run, gpus=once.gpus)
    reports = (engine or local)(with_runtimes(jobs, light=write_baseline_to is None), once.jobs)
    if write_baseline_to is not None:
        from aotipre.findings.baseline import apply_baseline, write_baseline

        written = write_baseline(write_baseline_to, reports)
        reports = [apply_baseline(r, written) for r in reports]
    return reports


def _prefixed(progress: Callable[[str], None], package: str) -> Callable[[str], None]:
    def say(message: str) -> None:
        progress(f"{package}: {message}")

    return say
