"""The compile stage: when the model has an ExportedProgram and no AOTI code for the device (or
--recompile), aoti_compile_and_package in a worker, through the compile cache. A compile that
faults on CUDA is run again to name the kernel (compile_fault.py)."""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
from functools import partial
from typing import Any

from aotipre.findings import StageResult, StageStatus
from aotipre.runner import cache as cache_mod
from aotipre.runner.classify import classify_compile_failure
from aotipre.runner.compile_classes import classify_compile_class, phase_clause
from aotipre.runner.stages.base import PlannedStep, StepRecord, failure_of, host_traits, ok
from aotipre.runner.stages.compile_fault import (
    CompileFault,
    faulting_kernel,
    rerun_faulted_compile,
)
from aotipre.runner.stages.compile_minify import (
    CompileRepro,
    minify_failed_compile,
    report_repro,
)
from aotipre.runner.stages.compile_workaround import (
    WorkaroundProof,
    prove_workaround,
    workaround_clause,
    workaround_hint,
)
from aotipre.runner.stages.session import Session, Stage
from aotipre.runner.stages.shims import (
    CACHE_KEY,
    SHIM_STEP,
    ShimlessOp,
    cache_record,
    cached_ops,
    report_shimless,
    shims_step,
)
from aotipre.runner.user_kernels import describe


class CompileStage(Stage):
    name = "compile"
    labels = {"compile": "compiling for {device}", SHIM_STEP: "listing ops with no C shim"}

    def __init__(self) -> None:
        self.note = ""
        self.lookup_s = 0.0
        self.cache: cache_mod.CompileCache | None = None
        self.pending: cache_mod.PendingEntry | None = None
        self.body: dict[str, Any] = {}
        """The compile step's arguments (the fault re-run compiles the same way)."""
        self.fault: CompileFault | None = None
        """What the re-run of a compile that faulted on CUDA showed (compile_fault.py)."""
        self.fault_tried = False
        self.repro: CompileRepro | None = None
        """The AOTI minifier's repro of a compile that raised (--minify: compile_minify.py)."""
        self.workaround: WorkaroundProof | None = None
        """The rebuilds with the knob that avoids a classified failure (compile_workaround.py)."""
        self.cached_shimless: list[ShimlessOp] | None = None
        """A cache hit's record of the ops with no C shim (shims.py: not listed again)."""

    def plan(self, s: Session) -> list[PlannedStep]:
        m = s.model
        s.need_compile = m.has_exported_program and (
            s.opts.recompile or m.aoti is None or (m.aoti.device_type or "cpu") != s.device_type
        )
        started = time.monotonic()
        steps: list[PlannedStep] = []
        if s.need_compile:
            steps = self._plan(s)
        else:
            s.aoti_package = os.path.abspath(s.package.path)
        self.lookup_s = time.monotonic() - started
        return steps

    def _plan(self, s: Session) -> list[PlannedStep]:
        configs = dict(s.opts.inductor_configs)
        package_out = os.path.join(s.workdir, "compiled", cache_mod.PACKAGE_FILE)
        if s.opts.use_cache:
            self.cache = cache_mod.CompileCache(s.opts.cache_dir)
            key = self._cache_key(s, configs)
            hit = self.cache.lookup(key)
            if hit is not None:
                s.aoti_package = hit.package
                s.aoti_model = "model"
                self.note = f"compile cache hit ({hit.directory})"
                s.say("compiled package found in the cache")
                self.cached_shimless = cached_ops(hit.directory, cache_mod.ENTRY_FILE)
                return []
            try:
                self.pending = self.cache.begin(key)
            except cache_mod.CacheUnavailable as exc:
                # an unusable cache is the environment's problem, not the model's (issue #12):
                # the compile goes on in the private workdir
                self.cache = None
                self.note = f"compiled without the cache ({exc.filename}: {exc.strerror})"
                s.findings.append(cache_mod.cache_warning(exc, s.model.name))
            else:
                package_out = self.pending.package
                self.note = f"compiled into the cache (key {key})"
        else:
            self.note = "compiled without the cache"
        s.aoti_package = package_out
        s.aoti_model = "model"
        self.body = {"out": package_out, "inductor_configs": configs}
        return [shims_step(configs), PlannedStep("compile", "compile", dict(self.body))]

    def _cache_key(self, s: Session, configs: dict[str, Any]) -> str:
        m = s.model
        names = [mem.name for mem in s.package.members]
        members = cache_mod.exported_program_members(names, s.package.root, m.name)
        content = cache_mod.hash_members(s.package.path, members, s.archive)
        sample_member = f"{s.package.root}/data/sample_inputs/{m.name}.pt"
        stored = next((mem for mem in s.package.members if mem.name == sample_member), None)
        example: str | None = None
        if stored is None or stored.size == 0:
            example = _inputs_digest(s.inputs.spec)
        return cache_mod.compile_key(
            content_hash=content,
            torch_version=cache_mod.torch_version(),
            device=s.device,
            configs=configs,
            host=host_traits(s.device_type),
            example_inputs=example,
        )

    def after_job(self, s: Session) -> None:
        """Commit a finished compile to the cache (the next workers load the entry); re-run a
        compile that faulted on CUDA (compile_fault.py)."""
        failed = s.records.get("compile")
        if failed is not None and not ok(failed) and not self.fault_tried:
            self.fault_tried = True
            self.fault = rerun_faulted_compile(s, failed, self.body)
            s.compile_rerun = self.fault.record if self.fault else None
            self.workaround = prove_workaround(s, failed, self.body)
            self.repro = minify_failed_compile(s, failed, self.body)
        if self.pending is None or self.cache is None or not ok(s.records.get("compile")):
            return
        rec = s.records["compile"]
        try:
            entry = self.cache.commit(
                self.pending,
                {
                    "source": os.path.abspath(s.package.path),
                    "model": s.model.name,
                    "device": s.device,
                    "torch": cache_mod.torch_version(),
                    "compile_s": round(rec.duration_s, 3),
                    CACHE_KEY: cache_record(s),
                },
            )
        except OSError as exc:
            self.note = f"compiled, but the cache entry could not be written: {exc}"
            return  # the pending entry stays for cleanup(); its package is used
        self.pending = None
        s.aoti_package = entry.package

    def cleanup(self, s: Session) -> None:
        if self.pending is not None and self.cache is not None:
            self.cache.discard(self.pending)

    def result(self, s: Session) -> StageResult:
        m = s.model
        if not s.need_compile:
            why = (
                f"the package has AOTI code for {s.device_type}"
                if m.has_aoti
                else "no ExportedProgram to compile"
            )
            return s.skipped("compile", why)
        if "compile" not in s.records:
            # a cache hit: the compile stage passed without a worker step
            s.records["compile"] = StepRecord(
                "compile", "compile", "ok", self.lookup_s, detail=self.note
            )
        r = s.records["compile"]
        report_shimless(s, self.cached_shimless)
        if ok(r):
            return s.stage("compile", StageStatus.PASSED, r.detail or self.note, [r])
        err = r.error
        fail = failure_of(classify_compile_failure, r, err)
        found = partial(s.add, stage="compile", evidence=fail.evidence)
        where = f"compiling model '{m.name}' for {s.device}"
        full = _disk_full(r.log, err, s.workdir, self.pending.directory if self.pending else None)
        detail = fail.summary
        killed = phase_clause(r.entry)
        if r.status == "crash" and r.signal == "SIGKILL":
            # aotipre did not send it (else the status is a timeout): the kernel's OOM killer does
            killed = ", ".join(
                filter(None, (killed, "SIGKILL is what the out-of-memory killer sends"))
            )
        killed = f" ({killed})" if killed else ""
        if r.status == "timeout":
            found("AOT503", f"{where} did not finish within {s.opts.compile_timeout_s:g} s{killed}")
        elif full is not None:
            # the environment's fault, not the model's (issue #12): no compile finding, the
            # stage could not check, and the note says where the space ran out
            found("AOT409", f"{where}: the disk filled during the compile ({full})")
            return s.stage("compile", StageStatus.ERROR, f"could not compile: {full}", [r])
        elif r.status == "crash":
            message, extra = self._fault_told(
                s, f"{where}: the compiler process was killed by {r.signal}{killed}", "", ""
            )
            found("AOT502", message, **extra)
        elif r.status == "worker_error":
            return s.stage("compile", StageStatus.ERROR, f"worker failed: {r.detail}", [r])
        elif fail.kind == "device_fault":
            kernel = f" (kernel {fail.kernel})" if fail.kernel else ""
            message, extra = self._fault_told(s, f"{where} failed", kernel, f": {fail.summary}")
            found("AOT501", message, **extra)
        else:
            known = classify_compile_class(
                r.entry.get("compile_failure"), err.get("type"), err.get("message")
            )
            if known.kind == "unknown":
                kernel = f" (kernel {fail.kernel})" if fail.kernel else ""
                message = f"{where} failed{kernel}: {fail.summary} (not one of the compile "
                message += "classes aotipre knows: the evidence quotes it)"
                found("AOT501", message)
            else:
                at = known.where
                at = f" at {at}" if at.startswith("node ") else f" {at}" if at else ""
                evidence = tuple(dict.fromkeys((*known.evidence, *fail.evidence)))[:6]
                hint = workaround_hint(self.workaround, known.hint)
                found(known.code, f"{where} failed: {known.what}{at}", hint=hint,
                      evidence=evidence)  # fmt: skip
                detail = known.what
                tried = workaround_clause(self.workaround)
                detail = f"{detail}; {tried}" if tried else detail
        recs = [r, s.compile_rerun] if s.compile_rerun is not None else [r]
        minified = report_repro(s, self.repro)
        detail = f"{detail}; {minified}" if minified else detail
        return s.stage("compile", StageStatus.FAILED, detail, recs)

    def _fault_told(
        self, s: Session, head: str, kernel: str, tail: str
    ) -> tuple[str, dict[str, Any]]:
        """The compile finding (`head`, the `kernel` clause the error text named, `tail`) with
        what the fault's re-run and the launch markers showed: the faulting kernel (and the
        triton_op that launched it) in place of that clause, and compute-sanitizer's record."""
        extra: dict[str, Any] = {}
        launch = faulting_kernel(s)
        named = launch is not None and (launch.user or self.fault is not None)
        message = head + ("" if named else kernel) + tail
        if launch is not None and named:
            message += f"; the fault is in {describe(launch)}, while aoti_compile_and_package "
            message += "autotuned it"
            if launch.user:
                extra["hint"] = (
                    "fix the kernel's indexing (masks, bounds) in the triton_op; the launch grid "
                    "and arguments are the op's"
                )
        if self.fault is not None:
            message += f"; {self.fault.summary()}"
            if self.fault.hits:
                r = s.records["compile"]
                fail = failure_of(classify_compile_failure, r, r.error)
                extra["evidence"] = (*self.fault.hits[0].lines[:4], *fail.evidence[:2])
        return message, extra


_NO_SPACE = re.compile(r"No space left on device|Disk quota exceeded")
"""The OS's own words (ENOSPC, EDQUOT), e.g. Python writing the cache entry: the disk, always."""
_WRITE_FAILED = re.compile(r"cannot write PCH file|error writing to \S+")
"""What g++ says when it cannot write (measured: a 40 MiB TMPDIR ends a CPU compile with
`fatal error: cannot write PCH file`), without saying why: the disk only when little is left."""
FULL_BYTES = 64 * 1024 * 1024
"""A write failure with less than this free where the compile writes is the disk filling up."""


def _disk_full(log: str, err: dict[str, Any], *folders: str | None) -> str | None:
    """Why the compile could not write: the OS said the disk is full, or g++ could not write and
    a folder it writes to (the worker's TMPDIR, the cache entry) is (almost) full; else None."""
    text = "\n".join((str(err.get("message") or ""), log or ""))
    said = _NO_SPACE.search(text)
    if said is not None:
        return said.group(0)
    m = _WRITE_FAILED.search(text)
    if m is None:
        return None
    for folder in folders:
        free = cache_mod.free_bytes(folder) if folder else None
        if free is not None and free < FULL_BYTES:
            return f"{m.group(0)}; {free // (1024 * 1024)} MiB free in {folder} after the failure"
    return None


def _inputs_digest(inputs: dict[str, Any]) -> str:
    digest = hashlib.sha256()
    if inputs.get("kind") == "file":
        with open(inputs["path"], "rb") as f:
            while chunk := f.read(1 << 20):
                digest.update(chunk)
    else:
        digest.update(json.dumps(inputs, sort_keys=True, default=str).encode())
    return digest.hexdigest()
