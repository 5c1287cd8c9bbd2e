"""The doctor's C++ row: can aotipre's C++ harness be built here, and does the C++ loader
(AOTIModelPackageLoader, as a C++ server uses it) load and run the compiled canary?

Also what a Python load crash means for C++ deployments: on the GPU test machine the Python
loader segfaulted without a libstdc++ preload while a C++ program built against the same wheel
loaded and ran the same package, so AOT515 says which of the two is affected.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Any

from aotipre.cpp import harness as cpp
from aotipre.doctor import canary as canary_mod
from aotipre.findings import Finding, Severity, codes
from aotipre.runner.stages import DynamicOptions

CONCURRENT_LOADERS = 8
"""Loaders the doctor constructs at once (torch issue #194128 needs several to show)."""


@dataclass(frozen=True)
class CppResult:
    """What became of the C++ harness on one device."""

    device: str
    status: str
    """works; fails (the loader raised, or concurrent loaders failed); crashes (a signal or a
    hang); unavailable (the harness could not be built); skipped (no compiled canary); error
    (the worker did not say)."""
    summary: str
    loader_race: bool | None = None
    """The installed libtorch has the load_json_file race of torch issue #194128."""
    build: str = ""
    """How the harness was obtained: built in N s, or from the cache."""
    duration_s: float = 0.0
    findings: tuple[Finding, ...] = field(default_factory=tuple)

    @property
    def works(self) -> bool:
        return self.status == "works"

    def to_dict(self) -> dict[str, Any]:
        return {
            "device": self.device,
            "status": self.status,
            "summary": self.summary,
            "loader_race": self.loader_race,
            "build": self.build,
            "duration_s": round(self.duration_s, 3),
        }

    def python_only_note(self) -> str:
        """For AOT515: whether a Python load crash reaches C++ deployments."""
        if self.works:
            return (
                "; the C++ loader (AOTIModelPackageLoader in a program built against this torch) "
                "loads and runs the canary without any preload: only Python processes are "
                "affected, C++ deployments are not"
            )
        if self.status in ("crashes", "fails"):
            return f"; the C++ loader fails too ({self.summary}): C++ deployments are affected"
        return f"; whether C++ deployments are affected is unknown ({self.summary})"


def check_cpp_loader(
    device: str, program: str, options: DynamicOptions, workdir: str, cxx: str | None
) -> CppResult:
    """Build the harness (cached), then load and run the compiled canary in C++: once, and with
    several loaders constructed at the same moment."""
    started = time.monotonic()
    package = canary_mod.compiled_canary(options, program, device)
    if package is None:
        return CppResult(device, "skipped", "no compiled canary (compile cache off or it failed)")
    from aotipre.pt2.reader import read_package

    member = read_package(program).models[0].sample_inputs_member
    label = f"canary [{device}] (C++)"
    tag = f"cpp-{device.replace(':', '_')}"
    root = cpp.cache_root(options.cache_dir, options.use_cache, workdir)
    inputs = os.path.join(workdir, f"{tag}.inputs.pt")
    index = int(device.split(":", 1)[1]) if ":" in device else -1
    common: dict[str, Any] = {
        "package": package,
        "model": "model",
        "inputs": inputs,
        "device_index": index,
    }
    loaders = cpp.run_step("cpp_loaders", mode="loaders", threads=CONCURRENT_LOADERS, **common)
    steps = [
        cpp.build_step(root, cxx=cxx),
        cpp.inputs_step(inputs),
        cpp.run_step("cpp_run", mode="run", **common),
        loaders,
        cpp.serial_retry(loaders),
    ]
    job = {
        "package": package,
        "source_package": os.path.abspath(program),
        "inputs": {"kind": "member", "member": member},
    }
    run = canary_mod.run_worker_job(steps, options, workdir, tag=tag, device=device, job=job)
    took = time.monotonic() - started
    built = run.ok("cpp_build")
    if built is None:
        why = run.why_not("cpp_build")
        finding = codes.get("AOT520").finding(
            f"the C++ harness could not be built against this torch: {why}", model=label
        )
        return CppResult(device, "unavailable", why, duration_s=took, findings=(finding,))
    if not built.get("binary"):
        return CppResult(device, "error", "the worker reported no harness binary", duration_s=took)
    race = built.get("loader_race")
    how = "from the cache" if built.get("cached") else f"built in {built.get('build_s', 0):.1f}s"
    findings: list[Finding] = []
    if race:
        findings.append(
            codes.get("AOT528").finding(
                "this torch's libtorch_cpu holds the static JSON object of load_json_file "
                "(torch issue #194128, open): C++ servers that construct several loaders at once "
                "can crash or read another package's metadata",
                model=label,
            )
        )
    single = _harness(run.steps.get("cpp_run"), "run")
    if single is None:
        why = run.why_not("cpp_run")
        return CppResult(device, "error", why, race, how, took, tuple(findings))
    found = cpp.harness_findings(single, model=label, stage="doctor", timeout_s=options.timeout_s)
    if found:
        status = "crashes" if single.signal or single.timed_out else "fails"
        return CppResult(device, status, found[0].message, race, how, took, (*findings, *found))
    summary = f"loads and runs ({_timing(single)})"
    many = _harness(run.steps.get("cpp_loaders"), "loaders")
    if many is not None:
        more = cpp.harness_findings(
            many,
            model=label,
            stage="doctor",
            timeout_s=options.timeout_s,
            known_race=race,
            serial=_harness(run.steps.get(cpp.serial_id("cpp_loaders")), "loaders"),
        )
        findings.extend(more)
        summary += f"; {CONCURRENT_LOADERS} loaders constructed at once: " + (
            "ok" if not more else more[0].message
        )
    failed = any(f.code == "AOT526" and f.severity is Severity.ERROR for f in findings)
    status = "fails" if failed else "works"
    return CppResult(device, status, summary, race, how, took, tuple(findings))


def _harness(entry: Any, mode: str) -> cpp.HarnessRun | None:
    if not isinstance(entry, dict) or entry.get("status") != "ok":
        return None
    return cpp.HarnessRun.from_entry(entry, mode)


def _timing(run: cpp.HarnessRun) -> str:
    r = run.result or {}
    return f"load {float(r.get('construct_s') or 0):.3f}s, run {float(r.get('run_s') or 0):.3f}s"
