"""`aotipre doctor`: facts -> toolchain -> directories -> canary per device -> DoctorReport."""

from __future__ import annotations

import dataclasses
import os
import platform
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from aotipre import __version__
from aotipre.doctor import canary as canary_mod
from aotipre.doctor.canary import CanaryResult
from aotipre.doctor.cpp import check_cpp_loader
from aotipre.doctor.dirs import (
    LOW_SPACE_BYTES,
    MOUNTINFO,
    DirectoryProbe,
    extraction_dir,
    human_bytes,
    probe_directory,
)
from aotipre.doctor.frames import libstdcxx_copies
from aotipre.doctor.report import DoctorReport
from aotipre.doctor.toolchain import (
    CompilerInfo,
    LibraryInfo,
    describe_choice,
    inspect_library,
    probe_compiler,
    version_key,
)
from aotipre.findings import Finding, Severity, codes
from aotipre.foundation import tempdirs
from aotipre.foundation.errors import AotipreError
from aotipre.runner import cache as cache_mod
from aotipre.runner.proc import run_process
from aotipre.runner.stages import DynamicOptions, parse_device

Progress = Callable[[str], None]


@dataclass(frozen=True)
class DoctorOptions:
    """What `aotipre doctor` can be told (the CLI maps its flags onto this)."""

    devices: tuple[str, ...] = ()
    """cpu, cuda, cuda:N; empty: cpu, plus cuda when torch can use it."""
    dynamic: DynamicOptions = field(default_factory=DynamicOptions)
    """Timeouts, compile cache, interpreter and worker of the canary (the stages' options)."""
    fail_on: Severity = Severity.ERROR
    progress: Progress | None = None
    cpp: bool = True
    """Build aotipre's C++ harness and load the compiled canary with the C++ loader."""
    backtrace: bool = True
    """After a canary load crash, re-run it with a native backtrace to name the crashing frame."""
    mountinfo: str | None = MOUNTINFO
    """The mount table read for noexec (a test hook); None: do not read one."""
    nvidia_smi: str | None = "nvidia-smi"
    """The nvidia-smi asked for driver version and GPUs (a test hook); None: do not ask."""


def run_doctor(options: DoctorOptions | None = None) -> DoctorReport:
    """Check that this host can compile, load and run AOTI packages. Never raises for what it
    finds; raises UsageError for a bad device."""
    opts = options or DoctorOptions()
    requested = [_normal_device(d) for d in opts.devices]
    started = time.monotonic()
    report = DoctorReport(fail_on=opts.fail_on, tool_version=__version__)
    with tempdirs.temporary_dir("aotipre-doctor-") as work:
        _Doctor(opts, report, work).execute(requested)
    report.duration_s = time.monotonic() - started
    return report


def _normal_device(text: str) -> str:
    kind, index = parse_device(text)
    return kind if index < 0 else f"{kind}:{index}"


class _Doctor:
    def __init__(self, opts: DoctorOptions, report: DoctorReport, workdir: str) -> None:
        self.opts = opts
        self.dyn = opts.dynamic
        self.report = report
        self.workdir = workdir
        self.torch: dict[str, Any] = {}

    def say(self, text: str) -> None:
        if self.opts.progress is not None:
            self.opts.progress(text)

    def add(self, code: str, message: str, **fields: Any) -> None:
        self.report.findings.append(codes.get(code).finding(message, stage="doctor", **fields))

    def execute(self, requested: list[str]) -> None:
        facts = self.report.facts
        facts["host"] = _host_facts()
        facts["python"] = {"version": sys.version.split()[0], "executable": sys.executable}
        facts["nvidia_smi"] = _nvidia_smi(self.opts.nvidia_smi)
        program = canary_mod.program_path(self.dyn, self.workdir)
        self.say("asking torch about itself (a worker process)")
        # GPU names and compute capabilities come from nvidia-smi when it answers; otherwise
        # the worker asks torch (which creates a CUDA context, seconds on a big GPU host)
        gpus_known = bool(facts["nvidia_smi"].get("gpus"))
        steps: list[dict[str, Any]] = [
            {"id": "facts", "op": "facts", "cuda_devices": not gpus_known}
        ]
        if not os.path.isfile(program):
            steps.append(canary_mod.program_step(program))
        run = canary_mod.run_worker_job(steps, self.dyn, self.workdir, tag="facts")
        entry = run.ok("facts")
        if entry is None:
            self.report.error = f"no torch worker could run here: {run.why_not('facts')}"
        else:
            self.torch = dict(entry.get("facts") or {})
            facts["torch"] = self.torch.get("torch")
            facts["cuda"] = self.torch.get("cuda")
            facts["torch_known_bugs"] = _known_bugs(facts["torch"])
            facts["worker"] = {
                "python": self.torch.get("python"),
                "executable": self.torch.get("executable"),
            }
        compiler = self.toolchain()
        self.directories()
        if self.report.error is not None:
            return
        devices = requested or self.default_devices()
        self.report.devices = devices
        if not os.path.isfile(program):
            why = run.why_not("canary_program") if "canary_program" in run.steps else ""
            self.report.error = (
                f"the canary program could not be made: {why or run.outcome.summary}"
            )
            return
        for device in devices:
            self.canary(device, program, compiler)

    # -- toolchain

    def toolchain(self) -> CompilerInfo:
        name, how = describe_choice(self.torch.get("compiler"))
        self.say(f"building a hello-world shared library with {name or 'no compiler'}")
        info = probe_compiler(name, how, self.workdir)
        self.report.facts["compiler"] = info.to_dict()
        if not info.works:
            self.add(
                "AOT407",
                f"the C++ compiler AOTInductor uses ({name or 'none found'}) cannot build a "
                f"shared library: {info.error}",
                expected="a working C++ compiler",
                actual=name,
            )
        compiler_lib = inspect_library(info.libstdcxx) if info.libstdcxx else None
        loaded = [
            inspect_library(p)
            for p in self.torch.get("loaded_libraries") or []
            if isinstance(p, str) and "libstdc++" in os.path.basename(p)
        ]
        self.report.facts["libstdcxx"] = {
            "compiler": compiler_lib.to_dict() if compiler_lib else None,
            "loaded": [lib.to_dict() for lib in loaded],
        }
        for lib in loaded:
            self.compare_libraries(lib, compiler_lib, info)
        return info

    def compare_libraries(
        self, loaded: LibraryInfo, compiler: LibraryInfo | None, info: CompilerInfo
    ) -> None:
        if compiler is None or loaded.real_path == compiler.real_path:
            return
        if version_key(loaded.glibcxx) >= version_key(compiler.glibcxx):
            return
        self.add(
            "AOT410",
            f"the torch process loads {loaded.label}, but {info.name} builds against "
            f"{compiler.label}: code compiled here may need symbols up to GLIBCXX_"
            f"{compiler.glibcxx} that the loaded library lacks (load errors like `version "
            f"GLIBCXX_{compiler.glibcxx} not found`, or crashes in the loader)",
            hint=f"run with LD_PRELOAD={compiler.real_path}, or use a compiler that matches "
            "the environment's libstdc++",
            expected=f"GLIBCXX_{compiler.glibcxx}",
            actual=f"GLIBCXX_{loaded.glibcxx}",
        )

    # -- directories

    def directories(self) -> None:
        env: dict[str, str] = dict(os.environ)
        env.update(self.dyn.extra_env)
        inductor = self.torch.get("inductor_cache_dir")
        if not isinstance(inductor, str):
            user = os.environ.get("USER") or os.environ.get("LOGNAME") or "user"
            inductor = env.get("TORCHINDUCTOR_CACHE_DIR") or os.path.join(
                tempfile.gettempdir(), f"torchinductor_{user}"
            )
        extraction = ("package extraction (TMPDIR)", _extraction_dir(env), True)
        if _extracts_into_tmp((self.torch.get("torch") or {}).get("version")):
            extraction = ("package extraction (/tmp)", "/tmp", True)
        wanted = [extraction, ("inductor compile cache", inductor, True)]
        if self.dyn.use_cache:
            cache = self.dyn.cache_dir or cache_mod.default_cache_dir()
            wanted.append(("aotipre compile cache", cache, False))
        seen: set[str] = set()
        for role, path, needs_exec in wanted:
            full = os.path.abspath(os.path.expanduser(path))
            if full in seen:
                continue
            seen.add(full)
            probe = probe_directory(
                full, role, needs_exec=needs_exec, mountinfo=self.opts.mountinfo
            )
            self.report.directories.append(probe)
            self.judge_directory(probe)

    def judge_directory(self, d: DirectoryProbe) -> None:
        where = f"{d.role} {d.path}" + (f" (probed {d.probed})" if d.probed != d.path else "")
        fields = {"input": d.role}
        if not d.writable:
            severity = Severity.ERROR if d.needs_exec else Severity.WARNING
            self.add(
                "AOT408",
                f"{where} is not writable: {d.error}",
                severity=severity,
                expected="writable",
                actual="not writable",
                **fields,
            )
        elif d.needs_exec and d.executable is False:
            mount = (
                f"mounted noexec ({d.mount_point}: {','.join(d.mount_options)})"
                if d.noexec
                else (d.error or "files there cannot be executed")
            )
            self.add(
                "AOT408",
                f"{where} is {mount}: AOTInductor maps the .so files it writes there, which "
                "fails on such a directory",
                expected="exec allowed",
                actual="noexec" if d.noexec else "not executable",
                **fields,
            )
        if d.free_bytes is not None and d.free_bytes < LOW_SPACE_BYTES:
            self.add(
                "AOT409",
                f"{where} has {human_bytes(d.free_bytes)} free (less than "
                f"{human_bytes(LOW_SPACE_BYTES)})",
                expected=f">= {human_bytes(LOW_SPACE_BYTES)}",
                actual=human_bytes(d.free_bytes),
                **fields,
            )

    # -- canaries

    def default_devices(self) -> list[str]:
        cuda = self.torch.get("cuda") or {}
        return ["cpu", "cuda"] if cuda.get("available") is True else ["cpu"]

    def canary(self, device: str, program: str, compiler: CompilerInfo) -> None:
        cuda = self.torch.get("cuda") or {}
        if device.startswith("cuda") and cuda.get("available") is not True:
            self.cuda_missing(device)
            return
        self.say(f"canary [{device}]: compile (once per host and torch version), load, run")
        try:
            result = canary_mod.run_canary(device, program, self.dyn, self.opts.progress)
        except AotipreError as exc:  # the cached program is unreadable: say so, do not crash
            result = CanaryResult(device, "error", f"the canary program {program}: {exc}")
        if (
            self.opts.backtrace
            and result.stage == "load"
            and result.status in ("crashes", "needs_preload")
            and not any(c.crash_site for c in self.report.canaries)
        ):
            self.say(f"canary [{device}]: re-running the crashed load with a native backtrace")
            site, note = canary_mod.capture_crash_site(
                device, program, self.dyn, compiler.path, self.workdir
            )
            result = dataclasses.replace(result, crash_site=site)
            self.report.notes.append(f"{device}: {note}")
        canary_mod.store_result(result, self.dyn)
        self.report.canaries.append(result)
        self.report.stages.extend(result.stages)
        found = self.diagnose(result, compiler)
        if self.opts.cpp:
            self.say(f"C++ loader [{device}]: build the harness (once per torch), load, run")
            cpp = check_cpp_loader(device, program, self.dyn, self.workdir, compiler.name)
            self.report.cpp.append(cpp)
            found = [
                dataclasses.replace(f, message=f.message + cpp.python_only_note())
                if f.code in ("AOT515", "AOT411") and result.stage == "load"
                else f
                for f in found
            ]
            found.extend(cpp.findings)
        self.report.findings.extend(found)

    def cuda_missing(self, device: str) -> None:
        torch_info = self.torch.get("torch") or {}
        smi = self.report.facts.get("nvidia_smi") or {}
        if torch_info.get("cuda") is None:
            code, why = "AOT512", f"this torch ({torch_info.get('version')}) is a CPU-only build"
        elif smi.get("gpus"):
            code, why = "AOT512", "nvidia-smi sees GPUs, but torch.cuda.is_available() is False"
        else:
            code, why = "AOT401", "no CUDA GPU or driver is visible here"
        self.add(code, f"the canary cannot run on {device}: {why}", expected=device, actual="cpu")
        self.report.canaries.append(CanaryResult(device, "error", why, stage="load"))

    def diagnose(self, result: CanaryResult, compiler: CompilerInfo) -> list[Finding]:
        """The canary's own findings, with the diagnosis added; AOT411 unless AOT515 says it."""
        found = list(result.findings)
        if result.works:
            return found
        site = result.crash_site
        frame = ""
        if site is not None:
            frame = (
                f"; crashing frame: {site.frame} ({site.description})"
                if site.frame
                else f"; {site.description}"
            )
            copies = libstdcxx_copies(site)
            if len(copies) > 1:
                frame += f"; {len(copies)} libstdc++ copies were mapped: {', '.join(copies)}"
        if result.status == "needs_preload":
            fix = (
                f"verified: with LD_PRELOAD={result.preload} the canary loads and runs on "
                f"{result.device}"
            )
            self.report.notes.append(f"{result.device}: {fix}")
            return [
                dataclasses.replace(
                    f,
                    message=f"{f.message}{frame}; {fix}",
                    evidence=f.evidence + (site.frames[:4] if site else ()),
                )
                if f.code == "AOT515"
                else f
                for f in found
            ]
        hint = self.fix_hint(result, compiler)
        found.append(
            codes.get("AOT411").finding(
                f"the canary on {result.device}: {result.headline}{frame}",
                hint=hint,
                model=f"canary [{result.device}]",
                stage=result.stage,
                evidence=result.evidence + (site.frames[:4] if site else ()),
            )
        )
        return found

    def fix_hint(self, result: CanaryResult, compiler: CompilerInfo) -> str:
        if result.stage == "compile" and not compiler.works:
            return "install a working C++ compiler (see AOT407), then run aotipre doctor again"
        if result.status != "crashes" or result.stage != "load":
            return codes.get("AOT411").hint
        built = (self.torch.get("torch") or {}).get("built_with") or "an unknown compiler"
        lib = compiler.libstdcxx or "the compiler's libstdc++"
        tried = any(
            "preloading the system libstdc++ did not help" in f.message for f in result.findings
        )
        preload = (
            f"preloading {lib} did not help (tried); "
            if tried
            else f"try LD_PRELOAD={lib} (not verified here); "
        )
        return (
            f"{preload}match the toolchains: torch was built with {built}, AOTInductor compiles "
            f"with {compiler.version or compiler.name}; use a compiler of torch's generation "
            "($CXX) or a torch built with this compiler"
        )


EXTRACTS_INTO_TMP = ((2, 11),)
"""torch releases whose C++ package loader extracts into `/tmp/XXXXXX` whatever TMPDIR says
(measured: 2.11.0; 2.13.0 and 2.14.1 extract into `$TMPDIR/aotinductor_XXXXXX`)."""


def _extracts_into_tmp(torch_version: object) -> bool:
    parts = str(torch_version or "").split("+")[0].split(".")
    try:
        return (int(parts[0]), int(parts[1])) in EXTRACTS_INTO_TMP
    except (ValueError, IndexError):
        return False


def _extraction_dir(env: Mapping[str, str]) -> str:
    for var in ("TMPDIR", "TMP", "TEMP", "TEMPDIR"):
        if env.get(var):
            return env[var]
    return extraction_dir()


def _known_bugs(torch_facts: Any) -> list[dict[str, object]] | None:
    """The known runtime bugs the worker's torch folder shows (binaries/torch_bugs.py, read
    as files); None when its folder is not known."""
    file = torch_facts.get("file") if isinstance(torch_facts, dict) else None
    if not isinstance(file, str) or not file:
        return None
    from aotipre.binaries.torch_bugs import read_known_bugs

    folder = os.path.dirname(file)
    return [b.to_dict() for b in read_known_bugs(folder, os.path.join(folder, "lib"))]


def _host_facts() -> dict[str, Any]:
    libc = " ".join(x for x in platform.libc_ver() if x)
    return {
        "node": platform.node(),
        "system": f"{platform.system()} {platform.release()}",
        "machine": platform.machine(),
        "libc": libc or None,
    }


def _nvidia_smi(exe: str | None) -> dict[str, Any]:
    """GPUs and the driver version as nvidia-smi reports them (torch-free)."""
    path = shutil.which(exe) if exe else None
    if path is None:
        return {"available": False, "note": "nvidia-smi not found"}
    out = run_process(
        [
            path,
            "--query-gpu=index,name,compute_cap,driver_version,memory.total",
            "--format=csv,noheader,nounits",
        ],
        timeout_s=20.0,
    )
    if not out.ok:
        return {"available": False, "note": f"nvidia-smi failed ({out.summary})"}
    gpus = []
    for line in out.stdout_tail.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) < 5:
            continue
        gpus.append(
            {
                "index": parts[0],
                "name": parts[1],
                "capability": parts[2],
                "driver": parts[3],
                "memory_mib": parts[4],
            }
        )
    return {"available": bool(gpus), "gpus": gpus}
