"""Crash triage's shared state: its options, the record of one ladder step (StepRun), and the
Triage state of one crash (the first error, the ExportedProgram to recompile, the inputs, the
finished steps, and what they name). The scheduler, the step runners, the conclusion and the
bundle writer all read it; it imports none of them."""

from __future__ import annotations

import contextlib
import os
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aotipre.findings import StageResult, StageStatus
from aotipre.foundation import tempdirs
from aotipre.foundation.bounds import TRIAGE_NUMBERS
from aotipre.foundation.errors import PackageError, UsageError
from aotipre.pt2.archive import Archive, archive_at
from aotipre.runner.classify import kernel_names
from aotipre.runner.reference import exported_program_for
from aotipre.runner.sanitizer import find_sanitizer
from aotipre.runner.stages.base import RunCrash
from aotipre.triage import parsers
from aotipre.triage.diagnosis import TensorStats
from aotipre.triage.ladder import Facts, LadderStep


@dataclass(frozen=True)
class TriageOptions:
    """What crash triage can be told (the CLI maps --no-escalate, --minify, ... onto this)."""

    escalate: bool = True
    """False (--no-escalate): report the crash as the run stage saw it, run no ladder step."""
    minify: bool = False
    """Run the AOTI minifier (slow: it recompiles many times)."""
    sanitizer: bool = False
    """Run compute-sanitizer memcheck when it is installed (CUDA only; slow)."""
    artifacts: str | None = None
    """Write a repro bundle here (one folder per crashed model)."""
    exported_program: str | None = None
    """A .pt2 holding the ExportedProgram of an AOTI-only package (for the recompiling steps)."""
    parallel: int | None = None
    """Most steps running at once; None: 3 (2 on a machine with fewer than 4 CPUs)."""
    minify_timeout_s: float = 1800.0
    accuracy_budget_s: float = 900.0
    """Seconds for accuracy triage of one model (its diagnostic rebuild and cause ladder)."""
    accuracy_speculate: bool | None = None
    """Rebuild with the program's likeliest knob beside the localizing rebuild
    (triage/accuracy_spec.py): True, False, or None (when this process may use 2+ CPUs)."""
    accuracy_python_wrapper: bool = True
    """Localize a CPU package's divergence on Inductor's Python-wrapper compile of the program
    when its outputs are the deployed package's bit for bit (runner/worker/jit_trace.py); False:
    always on the printer build."""

    def __post_init__(self) -> None:
        """A library caller gets the checks the flags get (aotipre.foundation.bounds): a NaN, zero or
        endless budget is one UsageError naming the field."""
        for name, parse in TRIAGE_NUMBERS.values():
            try:
                parse(getattr(self, name), Path.cwd())
            except ValueError as exc:
                raise UsageError(f"TriageOptions.{name} = {getattr(self, name)!r}: {exc}") from None


@dataclass
class StepRun:
    """One ladder step's outcome (several worker runs for a re-run speculative step)."""

    step: LadderStep
    status: StageStatus
    detail: str
    duration_s: float = 0.0
    argv: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    processes: tuple[str, ...] = ()
    """The worker processes that ran it (runner.stages.jobs.process_label)."""
    run_status: str | None = None
    """The model call: ok, error, crash, timeout, worker_error, not_reached."""
    error_text: str = ""
    """The call's exception message and its log (stdout and stderr)."""
    run_log: str | None = None
    """Path of the model call's full log (printer output included)."""
    logs: dict[str, str] = field(default_factory=dict)
    """Every log of the step's worker, by worker step id."""
    job: dict[str, Any] = field(default_factory=dict)
    signal: str | None = None
    kernels: tuple[str, ...] = ()
    """The printer filter it was compiled with."""
    package: str | None = None
    """The package it compiled (COMPILE_TIME steps)."""
    compile_note: str = ""
    fault: parsers.LaunchFault | None = None
    stats: list[TensorStats] = field(default_factory=list)
    named: str | None = None
    """The kernel this step names as the faulting one."""
    evidence: tuple[str, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict)
    speculative: bool = False
    finished_at: float = 0.0


class TriageState:
    """One crash under triage: what the crashed run left, and what the ladder found so far."""

    def __init__(
        self, crash: RunCrash, opts: TriageOptions, progress: Callable[[str], None] | None
    ) -> None:
        self.crash = crash
        self.opts = opts
        self.progress = progress
        self.workdir = tempdirs.make_dir("aotipre-triage-")
        self.device_type = crash.device.split(":", 1)[0]
        self.started = time.monotonic()
        self.lock = threading.Lock()
        self.jobs = 0
        self.runs: dict[str, StepRun] = {}
        self.stages_started: set[str] = set()
        """The ladder steps whose start was said (progress): the others get one line at the end."""
        self.notes: list[str] = []
        self.kernel_codes: dict[str, Any] = {}
        """conclude.KernelCode per kernel, once its source was found."""
        self.sample_inputs: dict[str, Any] = {}
        """conclude.sample_inputs_of per kernel."""
        self.sample_values: dict[str, Any] = {}
        """conclude.sample_values per model input (kernel-inputs, the verdict and AOT803 all
        ask for the same values: the sample is read once)."""
        self._guesses: list[str] | None = None
        self._original_code: dict[str, str] | None = None
        rec = crash.record
        err = rec.error
        self.first_text = "\n".join(t for t in (str(err.get("message") or ""), rec.log) if t)
        self.first_error = parsers.first_error(str(err.get("message") or ""), rec.log) or (
            crash.failure.summary
        )
        self.candidates = parsers.device_assert_kernels(self.first_text) + [
            k for k in kernel_names(self.first_text) if k.startswith(("cpp_", "triton_"))
        ]
        self.ep_source, self.ep_model, ep_note = self._exported_program()
        self.inputs = self._inputs()
        self.crash_named = self._named_by_crash()
        """(kernel, identified_by, how, evidence) when the crashed run's own output names the
        faulting kernel synchronously; the steps that would only name it are then skipped."""
        self.facts = Facts(
            device_type=self.device_type,
            has_exported_program=self.ep_source is not None,
            exported_program_source=ep_note,
            sanitizer_flag=opts.sanitizer,
            sanitizer_tool=find_sanitizer() if self.device_type == "cuda" else None,
            minify_flag=opts.minify,
            signal=rec.signal,
            failure_kind=crash.failure.kind,
            eager=crash.eager,
            eager_error=crash.eager_error,
            named_by_crash=self.crash_named[2] if self.crash_named else None,
        )
        self.ep_note = ep_note

    def cleanup(self) -> None:
        shutil.rmtree(self.workdir, ignore_errors=True)

    def say(self, text: str) -> None:
        if self.progress is not None:
            self.progress(f"{self.crash.model.name}: triage: {text}")

    def say_stage(self, line: str) -> None:
        """A stage line (progress.stage_started, stage_ended): `model: triage:sync-rerun started`."""
        if self.progress is not None:
            self.progress(f"{self.crash.model.name}: {line}")

    # -- set-up

    def _exported_program(self) -> tuple[str | None, str | None, str]:
        """(archive holding the ExportedProgram, its model name, where it comes from)."""
        ref = exported_program_for(self.opts.exported_program, self.crash.package, self.crash.model)
        if ref.path is None:
            return None, None, ref.label
        if self.opts.exported_program:
            return ref.path, ref.model, f"--exported-program {self.opts.exported_program}"
        return ref.path, ref.model, "the archive"

    def _inputs(self) -> dict[str, Any]:
        """The crash's inputs spec, with archive-stored inputs written to a file (the
        recompiling steps may read another archive)."""
        spec = dict(self.crash.inputs)
        if spec.get("kind") == "member":
            path = os.path.join(self.workdir, "inputs.pt")
            with crash_archive(self.crash, self.crash.package.path) as archive:
                data = archive.read(str(spec["member"]))
            with open(path, "wb") as f:
                f.write(data)
            return {"kind": "file", "path": path}
        return spec

    def _named_by_crash(self) -> tuple[str, str, str, tuple[str, ...]] | None:
        """The faulting kernel when the crash's output already names it with synchronous
        evidence: on CPU the kernel a C++ exception was raised in (cpp kernels run
        synchronously); on CUDA a device assertion, which the faulting kernel prints itself,
        naming it, or quoting a check that only one kernel's source (embedded in wrapper.cpp)
        holds. A named kernel must be one this package's wrapper calls. None otherwise (a segfault,
        an illegal memory access, an error from an extern op: the ladder's steps tell)."""
        text = self.first_text
        lines = [line.strip() for line in text.splitlines()]
        calls = parsers.kernel_call_order(self.original_code().get("wrapper", ""))
        if self.device_type == "cpu":
            for name in parsers.raised_in_kernels(text):
                if calls and name not in calls:
                    continue
                line = next((x for x in lines if f"Exception raised from {name} " in x), name)
                how = "the kernel's own exception (cpp kernels run synchronously)"
                return name, "first-error", how, (line.replace(" (most recent call first):", ""),)
            return None
        named = [k for k in parsers.device_assert_kernels(text) if not calls or k in calls]
        if named:
            line = next((x for x in lines if named[0] in x and "Assertion" in x), named[0])
            return named[0], "device-assert", "a device assertion the kernel printed", (line,)
        unnamed = parsers.unnamed_device_asserts(text)
        if unnamed:
            holding = self.kernels_holding({b.line for b in parsers.index_bounds(unnamed[0])})
            if len(holding) == 1:
                how = "a device assertion whose check only that kernel's source holds"
                return holding[0], "device-assert", how, (unnamed[0], f"only {holding[0]} holds it")
        return None

    def kernels_holding(self, messages: set[str]) -> list[str]:
        """Kernels (in launch order) whose generated source holds one of these check messages."""
        if not messages:
            return []
        code = self.original_code()
        text = code.get("kernel", "") + "\n" + code.get("wrapper", "")
        found: list[str] = []
        for name in dict.fromkeys(parsers.kernel_call_order(code.get("wrapper", ""))):
            src = parsers.kernel_source(text, name) or ""
            if any(m.rstrip("L") in src for m in messages):
                found.append(name)
        return found

    def kernel(self) -> str | None:
        """The faulting kernel as far as the finished steps tell (synchronous evidence first)."""
        if self.crash_named is not None:
            return self.crash_named[0]
        for sid in ("printer-3", "sync-rerun", "sanitizer"):
            run = self.runs.get(sid)
            if run is not None and run.named and not run.speculative:
                return run.named
        if "printer-3" in self.runs or not self.facts.has_exported_program:
            return self.candidates[0] if self.candidates else None
        return None

    def guesses(self) -> list[str]:
        """Kernels to start speculative steps with: those the first error names, else those
        whose generated code holds the bounds-check message the error quotes (a Triton device
        assert often says `unknown` instead of the kernel's name)."""
        if self.candidates:
            return self.candidates[:1]
        if self._guesses is not None:
            return self._guesses
        found = self.kernels_holding({b.line for b in parsers.index_bounds(self.first_text)})
        self._guesses = found[:4]
        return self._guesses

    def original_code(self) -> dict[str, str]:
        """wrapper.cpp and kernel.cpp (or cuda kernel) text of the crashing package."""
        if self._original_code is None:
            self._original_code = read_generated_code(
                self.crash.aoti_package, self.crash.aoti_model, self.crash
            )
        return self._original_code

    def inputs_file(self) -> str:
        return os.path.join(self.workdir, "bundle_inputs.pt")


@contextlib.contextmanager
def crash_archive(crash: RunCrash, path: str) -> Iterator[Archive]:
    """The archive at `path`: the crashed package's own, open for the whole check, when `path`
    is that package (it stays open); else opened here and closed after."""
    own = os.path.abspath(path) == os.path.abspath(crash.package.path)
    with archive_at(path, crash.archive if own else None) as archive:
        yield archive


def read_generated_code(package: str, model: str, crash: RunCrash | None = None) -> dict[str, str]:
    """The generated C++ of one model of a package: `wrapper` (wrapper.cpp, where CUDA builds
    also embed their Triton sources) and `kernel` (kernel.cpp on CPU); `member` names them.
    Reads the crashed package's open archive when `package` is that one."""
    out: dict[str, str] = {}
    try:
        with crash_archive(crash, package) if crash is not None else archive_at(package) as archive:
            names = archive.names()
            prefix = f"/data/aotinductor/{model}/"
            for name in names:
                if prefix not in name:
                    continue
                if name.endswith(".wrapper.cpp"):
                    out["wrapper"] = archive.read_text(name)
                    out["wrapper_member"] = name
                elif name.endswith(".kernel.cpp"):
                    out["kernel"] = archive.read_text(name)
                    out["kernel_member"] = name
    except (PackageError, OSError, UnicodeDecodeError):
        return out
    return out


def read_log(path: str, tail: int | None = None) -> str:
    if not path or not os.path.isfile(path):
        return ""
    with open(path, "rb") as f:
        if tail is not None:
            size = f.seek(0, os.SEEK_END)
            f.seek(max(0, size - tail))
        return f.read().decode("utf-8", errors="replace")


def first_line(text: Any) -> str:
    for line in str(text or "").splitlines():
        if line.strip():
            return line.strip()
    return ""


def stage_for(triage: Any, run: StepRun) -> StageResult:
    """A ladder step as a stage of the report."""
    step = run.step
    detail = run.detail
    if run.status is not StageStatus.SKIPPED:
        detail = f"{detail} [{step.phase.value}: {step.title}]"
    return StageResult(
        name=step.stage_name,
        status=run.status,
        duration_s=run.duration_s,
        detail=detail,
        model=triage.crash.model.name,
        env=dict(run.env),
        command=tuple(run.argv),
        processes=run.processes,
    )
