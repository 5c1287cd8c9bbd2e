"""The canary: a trivial model compiled, loaded and run here, to tell a broken host from a model.

A little over the ~600 lines of the other modules: making, running, summarizing and caching the
canary share one cache key (the host and the torch version) and one result record, used by `doctor`
and by `check` after a crash alike.

The canary runs through the same dynamic stages as any package (`run_dynamic_stages`): the same
workers, the same compile cache, the same retry of a load crash with the compiler's libstdc++
preloaded (AOT515). This module adds what is specific to it: making the program (a worker op,
cached per torch version), summarizing its stages into one `CanaryResult`, caching that result
per host and torch version (so `check` pays for it once), the native backtrace of a crashing
canary load (doctor only), and turning a model's crash into a host finding inside `check`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import platform
import re
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from aotipre.doctor.frames import CrashSite, build_backtrace_helper, crash_site
from aotipre.findings import Finding, Severity, StageResult, StageStatus, codes
from aotipre.foundation import tempdirs
from aotipre.foundation.errors import AotipreError
from aotipre.foundation.progress import stage_ended, stage_started
from aotipre.runner import cache as cache_mod
from aotipre.runner import launch
from aotipre.runner.classify import watchdog_fired
from aotipre.runner.proc import ProcessOutcome
from aotipre.runner.stages import DynamicOptions, parse_device, run_dynamic_stages

CANARY_VERSION = 1
"""Bumped whenever the canary model or what is cached about it changes."""
RESULT_TTL_S = 7 * 24 * 3600
"""A cached canary result is trusted this long (drivers and toolchains get updated)."""
ENV_CRASH_CODES = ("AOT514", "AOT603", "AOT604")
"""Crashes of a model's load or run that the host alone could cause: check asks the canary."""
CRASH_CODES = ("AOT502", "AOT514", "AOT603", "AOT604", "AOT605")
"""Canary findings that mean "the process died" (as opposed to a clean failure)."""
_ENV_KEYS = ("LD_PRELOAD", "LD_LIBRARY_PATH", "CXX", "TMPDIR", "TORCHINDUCTOR_CACHE_DIR")
"""Environment that changes whether the canary works: part of the result-cache key."""
_SIGNAL = re.compile(r"\bSIG[A-Z]+\b")

Progress = Callable[[str], None]


@dataclass(frozen=True)
class CanaryResult:
    """What became of the canary on one device."""

    device: str
    status: str
    """works; needs_preload (works only with a libstdc++ preloaded, which the stages verified);
    crashes (a load or run died by a signal); fails (a clean failure: compile error, timeout,
    wrong outputs); error (could not tell: the worker failed, the program could not be made)."""
    summary: str
    """One line: what happened."""
    stage: str | None = None
    """The stage that did not succeed (compile, load, run, compare)."""
    signal: str | None = None
    preload: str | None = None
    """The LD_PRELOAD with which it works (status needs_preload)."""
    evidence: tuple[str, ...] = ()
    crash_site: CrashSite | None = None
    """Where the load crashed, from a re-run with a native backtrace (doctor only)."""
    duration_s: float = 0.0
    created: float = field(default_factory=time.time)
    cached: bool = False
    """Read from the result cache instead of run now."""
    stages: tuple[StageResult, ...] = ()
    """The canary's own stages (not cached)."""
    findings: tuple[Finding, ...] = ()
    """The canary's own findings (not cached)."""

    @property
    def works(self) -> bool:
        return self.status == "works"

    @property
    def headline(self) -> str:
        if self.status == "works":
            return "compiles, loads and runs; outputs match eager"
        if self.status == "needs_preload":
            return f"crashes while loading; works with LD_PRELOAD={self.preload} (verified)"
        if self.status == "crashes":
            return f"{self.stage or 'a step'} crashes ({self.signal or 'signal'}): {self.summary}"
        if self.status == "fails":
            return f"{self.stage or 'a step'} fails: {self.summary}"
        return f"could not be checked: {self.summary}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "device": self.device,
            "status": self.status,
            "summary": self.summary,
            "stage": self.stage,
            "signal": self.signal,
            "preload": self.preload,
            "evidence": list(self.evidence),
            "crash_site": self.crash_site.to_dict() if self.crash_site else None,
            "duration_s": round(self.duration_s, 3),
            "created": self.created,
            "cached": self.cached,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CanaryResult:
        site = data.get("crash_site")
        return cls(
            device=str(data["device"]),
            status=str(data["status"]),
            summary=str(data.get("summary") or ""),
            stage=data.get("stage"),
            signal=data.get("signal"),
            preload=data.get("preload"),
            evidence=tuple(str(e) for e in data.get("evidence") or ()),
            crash_site=CrashSite(
                frame_class=site.get("frame_class"),
                description=str(site.get("description") or ""),
                frame=site.get("frame"),
                frames=tuple(site.get("frames") or ()),
                python=tuple(site.get("python") or ()),
                runtimes=tuple(site.get("runtimes") or ()),
            )
            if isinstance(site, dict)
            else None,
            duration_s=float(data.get("duration_s") or 0.0),
            created=float(data.get("created") or 0.0),
            cached=True,
        )


# --------------------------------------------------------------------------------------------
# Worker jobs that are not a model's stages (facts, the canary program, the backtrace re-run)


@dataclass(frozen=True)
class WorkerRun:
    """One worker process over a few steps."""

    outcome: ProcessOutcome
    steps: dict[str, dict[str, Any]]
    """The worker's records of the steps it finished."""
    died_in: str | None
    """The step it was running when it died, if it died in one."""
    died_log: str = ""
    """That step's stderr."""

    def ok(self, step_id: str) -> dict[str, Any] | None:
        entry = self.steps.get(step_id)
        return entry if isinstance(entry, dict) and entry.get("status") == "ok" else None

    def why_not(self, step_id: str) -> str:
        """Why `step_id` has no ok record, in one line."""
        entry = self.steps.get(step_id)
        if isinstance(entry, dict):
            err = entry.get("error") or {}
            return f"{err.get('type')}: {str(err.get('message') or '').strip()[:300]}"
        limit = watchdog_fired(self.died_log) if self.died_in == step_id else None
        if limit is not None:
            return (
                f"its {step_id} step ran past the step time limit (--timeout; watchdog at {limit})"
            )
        tail = [ln.strip() for ln in self.outcome.stderr_tail.splitlines() if ln.strip()]
        tail = [ln for ln in tail if not ln.startswith("@@aotipre")][-3:]
        return self.outcome.summary + (f" | {' | '.join(tail)}" if tail else "")


def run_worker_job(
    steps: Sequence[Mapping[str, Any]],
    options: DynamicOptions,
    workdir: str,
    *,
    tag: str,
    device: str = "cpu",
    job: Mapping[str, Any] | None = None,
    env: Mapping[str, str] | None = None,
) -> WorkerRun:
    """Run the torch worker (or `options.worker_command`) over `steps` in one process."""
    body: dict[str, Any] = {
        "protocol": 1,
        "tag": tag,
        "device": device,
        "workdir": workdir,
        "model": "model",
        "step_timeout_s": options.timeout_s,
        "compile_timeout_s": options.compile_timeout_s,
        **dict(job or {}),
        "steps": [dict(s) for s in steps],
    }
    child_env = dict(os.environ)
    child_env.update(options.extra_env)
    child_env.update(env or {})
    argv, outcome = launch.run_job_file(
        body,
        lambda path: launch.worker_argv(options.python, options.worker_command, path),
        env=child_env,
        budget_s=launch.job_budget_s(steps, options.timeout_s, options.compile_timeout_s),
    )
    result = outcome.result or {}
    done = result.get("steps") if isinstance(result.get("steps"), dict) else {}
    current = result.get("current") if isinstance(result.get("current"), dict) else None
    died_in, log = None, ""
    if current is not None and not outcome.ok:
        died_in = str(current.get("id"))
        path = current.get("log")
        if isinstance(path, str) and os.path.isfile(path):
            with open(path, "rb") as f:
                size = f.seek(0, os.SEEK_END)
                f.seek(max(0, size - 256 * 1024))
                log = f.read().decode("utf-8", errors="replace")
        log = log or outcome.stderr_tail
    return WorkerRun(outcome, dict(done or {}), died_in, log)


# --------------------------------------------------------------------------------------------
# The program


def canary_dir(options: DynamicOptions) -> str:
    return os.path.join(options.cache_dir or cache_mod.default_cache_dir(), "canary")


def program_path(options: DynamicOptions, workdir: str) -> str:
    """Where the canary program lives: in the cache (per torch version and interpreter), or in
    `workdir` when the cache is off."""
    if not options.use_cache:
        return os.path.join(workdir, "canary.pt2")
    key = _digest(
        {
            "canary": CANARY_VERSION,
            "torch": cache_mod.torch_version(),
            "python": options.python or sys.executable,
            "worker": list(options.worker_command or ()),
        }
    )
    return os.path.join(canary_dir(options), f"program-{key}", "canary.pt2")


def program_step(path: str) -> dict[str, Any]:
    return {"id": "canary_program", "op": "canary_program", "out": path}


def make_program(options: DynamicOptions, workdir: str) -> str:
    """The canary program's path, exported by a worker unless it exists. Raises AotipreError."""
    path = program_path(options, workdir)
    if os.path.isfile(path):
        return path
    run = run_worker_job([program_step(path)], options, workdir, tag="canary-program")
    if run.ok("canary_program") is None or not os.path.isfile(path):
        raise AotipreError(f"the canary program could not be made: {run.why_not('canary_program')}")
    return path


# --------------------------------------------------------------------------------------------
# Running it


def run_canary(
    device: str,
    program: str,
    options: DynamicOptions,
    progress: Progress | None = None,
) -> CanaryResult:
    """Compile (cached), load, run and compare the canary on `device` through the dynamic
    stages; one CanaryResult (its stages and findings are labelled `canary [device]`)."""
    from aotipre.pt2.reader import read_package

    label = f"canary [{device}]"
    started = time.monotonic()
    package = read_package(program)
    model = package.models[0]
    opts = dataclasses.replace(
        options,
        device=device,
        probe=False,
        recompile=False,
        inductor_configs={},
        rtol=None,
        atol=None,
        perf=None,  # the canary proves the host; its load time is not a deployment's
    )

    def say(text: str) -> None:
        if progress is not None:
            progress(f"{label}: {text.split(': ', 1)[-1]}")

    stages, findings = run_dynamic_stages(
        package, model, None, model.sample_inputs_member, opts, say
    )
    stages = [dataclasses.replace(s, model=label) for s in stages]
    findings = [dataclasses.replace(f, model=label) for f in findings]
    return summarize(device, stages, findings, time.monotonic() - started)


def summarize(
    device: str,
    stages: Sequence[StageResult],
    findings: Sequence[Finding],
    duration_s: float = 0.0,
) -> CanaryResult:
    """One CanaryResult from the canary's stages and findings."""
    by_name = {s.name: s for s in stages}
    common: dict[str, Any] = {
        "device": device,
        "duration_s": duration_s,
        "stages": tuple(stages),
        "findings": tuple(findings),
    }
    broken = next(
        (
            s
            for s in stages
            if s.status is StageStatus.ERROR and s.name in ("compile", "load", "run", "compare")
        ),
        None,
    )
    crash = next((f for f in findings if f.code in CRASH_CODES), None)
    errors = [f for f in findings if f.severity is Severity.ERROR and f.code != "AOT515"]
    run = by_name.get("run")
    if crash is not None:
        sig = _SIGNAL.search(crash.message)
        return CanaryResult(
            status="crashes",
            summary=crash.message,
            stage=crash.stage,
            signal=sig.group(0) if sig else None,
            evidence=crash.evidence,
            **common,
        )
    if broken is not None:
        return CanaryResult(status="error", summary=broken.detail, stage=broken.name, **common)
    if errors:
        first = errors[0]
        return CanaryResult(
            status="fails",
            summary=f"{first.code}: {first.message}",
            stage=first.stage,
            evidence=first.evidence,
            **common,
        )
    if run is None or run.status is not StageStatus.PASSED:
        why = run.detail if run is not None else "the run stage did not happen"
        return CanaryResult(status="error", summary=why, stage="run", **common)
    fixed = next((f for f in findings if f.code == "AOT515"), None)
    if fixed is not None:
        return CanaryResult(
            status="needs_preload",
            summary=fixed.message,
            stage="load",
            signal="SIGSEGV",
            preload=run.env.get("LD_PRELOAD"),
            evidence=fixed.evidence,
            **common,
        )
    return CanaryResult(status="works", summary="ok", **common)


def compiled_canary(options: DynamicOptions, program: str, device: str) -> str | None:
    """The compile-cache entry the stages made for the canary on `device`, if any."""
    if not options.use_cache:
        return None
    cache = cache_mod.CompileCache(options.cache_dir)
    source = os.path.abspath(program)
    with contextlib.suppress(OSError):
        for name in sorted(os.listdir(cache.directory)):
            entry = os.path.join(cache.directory, name, cache_mod.ENTRY_FILE)
            try:
                with open(entry) as f:
                    meta = json.load(f)
            except (OSError, ValueError):
                continue
            if isinstance(meta, dict) and meta.get("source") == source:
                if meta.get("device") == device:
                    found = cache.lookup(name)
                    if found is not None:
                        return found.package
    return None


def capture_crash_site(
    device: str,
    program: str,
    options: DynamicOptions,
    compiler: str | None,
    workdir: str,
) -> tuple[CrashSite | None, str]:
    """Re-run the compiled canary's load and run with the native backtrace helper preloaded.

    Returns (the crash site, a note saying what was done). Safe: a fresh worker, the same
    environment plus a C-only helper (no libstdc++ of its own), and nothing is kept.
    """
    package = compiled_canary(options, program, device)
    if package is None:
        return None, "no compiled canary to re-run (compile cache off or compile failed)"
    helper = build_backtrace_helper(compiler, workdir)
    if helper is None:
        return None, "no C compiler to build the backtrace helper with"
    from aotipre.pt2.reader import read_package

    member = read_package(program).models[0].sample_inputs_member
    preload = " ".join(
        v for v in (os.environ.get("LD_PRELOAD"), options.extra_env.get("LD_PRELOAD"), helper) if v
    )
    run = run_worker_job(
        [{"id": "load", "op": "load"}, {"id": "run", "op": "run"}],
        options,
        workdir,
        tag=f"backtrace-{device.replace(':', '_')}",
        device=device,
        job={
            "package": package,
            "source_package": os.path.abspath(program),
            "aoti_model": "model",
            "inputs": {"kind": "member", "member": member},
        },
        env={"LD_PRELOAD": preload},
    )
    if run.died_in is None:
        return None, f"the re-run with a native backtrace did not crash ({run.outcome.summary})"
    site = crash_site(run.died_log)
    note = f"re-ran the {run.died_in} with a native backtrace (LD_PRELOAD={helper})"
    return site, note if site is not None else f"{note}; the log names no frame"


# --------------------------------------------------------------------------------------------
# The result cache (per host, torch version and environment)


def result_key(device: str, options: DynamicOptions) -> str:
    from aotipre.environment.host import detect_local

    kind, _ = parse_device(device)
    env = dict(os.environ)
    env.update(options.extra_env)
    try:
        host = detect_local(probe_cuda=kind == "cuda")
        traits: dict[str, Any] = {
            "isa": sorted(host.cpu_isa or ()),
            "cc": list(host.compute_capabilities),
        }
    except Exception:  # host detection refines the key; it never fails the check
        traits = {}
    return _digest(
        {
            "canary": CANARY_VERSION,
            "device": device,
            "torch": cache_mod.torch_version(),
            "python": options.python or sys.executable,
            "worker": list(options.worker_command or ()),
            "node": platform.node(),
            "machine_id": _machine_id(),
            "host": traits,
            "env": {k: env.get(k) for k in _ENV_KEYS},
        }
    )


def cached_result(device: str, options: DynamicOptions) -> CanaryResult | None:
    if not options.use_cache:
        return None
    path = os.path.join(canary_dir(options), f"result-{result_key(device, options)}.json")
    try:
        with open(path) as f:
            data = json.load(f)
        result = CanaryResult.from_dict(data)
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if time.time() - result.created > RESULT_TTL_S:
        return None
    return result


def store_result(result: CanaryResult, options: DynamicOptions) -> None:
    """Cache a conclusive result (never `error`); a failure to write is not an error."""
    if not options.use_cache or result.status == "error":
        return
    directory = canary_dir(options)
    path = os.path.join(directory, f"result-{result_key(result.device, options)}.json")
    with contextlib.suppress(OSError):
        os.makedirs(directory, exist_ok=True)
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "w") as f:
            json.dump({**result.to_dict(), "cached": False}, f, indent=1)
        os.replace(tmp, path)


def _machine_id() -> str | None:
    for path in ("/etc/machine-id", "/var/lib/dbus/machine-id"):
        with contextlib.suppress(OSError):
            with open(path) as f:
                return f.read().strip() or None
    return None


def _digest(payload: Mapping[str, Any]) -> str:
    text = json.dumps(payload, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:24]


# --------------------------------------------------------------------------------------------
# Inside `check`


def host_canary(
    device: str, options: DynamicOptions, progress: Progress | None = None
) -> CanaryResult:
    """The canary result for `device`: cached for this host and torch version, or run now."""
    cached = cached_result(device, options)
    if cached is not None:
        return cached
    started = time.monotonic()
    with tempdirs.temporary_dir("aotipre-canary-") as work:
        try:
            program = make_program(options, work)
            result = run_canary(device, program, options, progress)
        except AotipreError as exc:
            return CanaryResult(device, "error", str(exc), duration_s=time.monotonic() - started)
    store_result(result, options)
    return result


def attribute_crashes(
    model: str,
    device: str,
    findings: Sequence[Finding],
    options: DynamicOptions,
    progress: Progress | None = None,
) -> tuple[list[StageResult], list[Finding]]:
    """When the model's load or run crashed, ask the canary whether the host is to blame.

    Returns the stages to add (one `canary` stage, or none when nothing crashed) and the
    findings: each crash becomes AOT412 (environment) when the canary crashes too; otherwise
    the crash stays the model's and its message says what the canary showed.
    """
    crashes = [f for f in findings if f.code in ENV_CRASH_CODES and f.model == model]
    if not crashes:
        return [], list(findings)
    if progress is not None:
        progress(f"{model}: the {crashes[0].stage} crashed; checking this host with a canary model")
        progress(f"{model}: {stage_started('canary')}")
    result = host_canary(device, options, progress)
    when = " (cached result)" if result.cached else ""
    status = {
        "works": StageStatus.PASSED,
        "needs_preload": StageStatus.PASSED,
        "crashes": StageStatus.FAILED,
        "fails": StageStatus.FAILED,
    }.get(result.status, StageStatus.ERROR)
    stage = StageResult(
        name="canary",
        status=status,
        duration_s=0.0 if result.cached else result.duration_s,
        detail=f"{device}: {result.headline}{when}",
        model=model,
    )
    if progress is not None:
        progress(f"{model}: {stage_ended('canary', status.value, stage.duration_s)}")
    out: list[Finding] = []
    for f in findings:
        if f not in crashes:
            out.append(f)
        elif result.status == "crashes":
            out.append(_host_finding(f, device, result))
        else:
            out.append(dataclasses.replace(f, message=f.message + _canary_note(device, result)))
    return [stage], out


def _host_finding(crash: Finding, device: str, result: CanaryResult) -> Finding:
    evidence: list[str] = []
    for line in (*crash.evidence, *(f"canary: {e}" for e in result.evidence)):
        if line not in evidence:
            evidence.append(line)
    return codes.get("AOT412").finding(
        f"{crash.message}; a trivial canary model compiled on this host crashes too "
        f"({result.stage or 'load'} on {device}, {result.signal or 'a signal'}): the host cannot "
        "run AOTI packages, so the crash says nothing about this model",
        hint=f"run `aotipre doctor --device {device}` on this host for the diagnosis "
        "(compiler, libstdc++, directories), then check the package again",
        model=crash.model,
        stage=crash.stage,
        evidence=tuple(evidence[:8]),
    )


def _canary_note(device: str, result: CanaryResult) -> str:
    if result.status == "works":
        return (
            f" (a trivial canary model compiled on this host loads and runs on {device}: the "
            "crash is specific to this package)"
        )
    if result.status == "needs_preload":
        return (
            f" (a trivial canary model compiled on this host loads and runs on {device} with "
            f"LD_PRELOAD={result.preload}: the crash is specific to this package)"
        )
    return f" (checking the host with a canary model was inconclusive: {result.headline})"
