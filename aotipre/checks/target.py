"""Can a target (this machine, or a `--target`) load and run a model's compiled code?

Judged from the binaries (aotipre.binaries): the symbols and symbol versions the `.so` needs,
the GPU code its cubins and fatbins carry, the CPU extensions its instructions use. Metadata
strings (AOTI_COMPUTE_CAPABILITY, AOTI_CPU_ISA) say where a package was compiled, not what it
runs on: they are used only when the binaries cannot be read. One finding per incompatibility;
a `TargetRow` per model and target sums them up (loads / needs X / cannot load).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from aotipre.binaries.elf import version_key
from aotipre.binaries.facts import GCC_FLAGS, SharedObject
from aotipre.environment.host import ISA_FLAGS, ISA_RANK, TORCH_SYMBOLS, HostInfo
from aotipre.findings import Finding, Severity, codes
from aotipre.pt2.spec import AotiPart, ModelInfo, PackageInfo

if TYPE_CHECKING:
    from aotipre.binaries.torch_bugs import KnownBug
    from aotipre.binaries.x86 import IsaScan

KNOWN_DEVICES = ("cpu", "cuda", "xpu", "mps")
CANNOT_RUN = {"AOT433", "AOT434", "AOT436", "AOT403", "AOT402"}
"""Codes whose error means the package loads but its code cannot run there."""
EXTENSIONS = frozenset(GCC_FLAGS.values())
NOTABLE = frozenset(f for f in EXTENSIONS if f.startswith(("avx", "amx")) or f in ("fma", "f16c"))
"""The extensions an AOTI_CPU_ISA mismatch is about (vector and matrix units)."""
Scan = Callable[[str], "IsaScan"]
"""member name -> the instruction scan of that .so (cached by the caller)."""


@dataclass(frozen=True)
class TargetRow:
    """One model on one target: the verdict line of the per-target table."""

    target: str
    model: str
    status: str
    """loads, compiles at load, needs ..., cannot load, cannot run."""
    reasons: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "model": self.model,
            "status": self.status,
            "reasons": list(self.reasons),
        }


def check_host(
    model: ModelInfo, host: HostInfo, *, soft: bool, scan: Scan | None = None
) -> list[Finding]:
    """Can `host` run `model`'s AOTI code? `soft`: report facts of this machine as info only."""
    aoti = model.aoti
    if aoti is None:
        return []
    ctx = _Context(model, aoti, host, soft)
    device = (aoti.device_type or "").split(":")[0]
    ctx.device(device)
    sos = aoti.binaries.shared_objects if aoti.binaries else ()
    readable = [s for s in sos if s.error is None]
    ctx.platform(readable)
    for so in readable:
        ctx.libc(so)
        ctx.shim(so)
    if device == "cuda":
        ctx.gpu()
    if device == "cpu":
        ctx.cpu(readable, scan)
    return ctx.out


LARGE_PACKAGE_BYTES = 1 << 30
LARGE_PACKAGE_MEMBERS = 1000
"""Where reading the metadata twice per load (torch #196025) is reported: opening the archive
again costs in proportion to its members."""


def check_runtime_bugs(
    package: PackageInfo, models: list[ModelInfo], host: HostInfo
) -> list[Finding]:
    """The known bugs the target torch's files show (TorchRuntime.known_bugs, read from
    `--target libtorch=`/`image=`) that this package meets, each with its evidence: the C++
    loader's JSON race (AOT440), the CPU-ISA probe at every Python load (AOT441), every model
    of a multi-model package constructed (AOT442, with what it costs here), the metadata read
    twice (AOT443, large packages only)."""
    torch = host.torch
    aoti = [m for m in models if m.aoti is not None]
    if torch is None or not torch.known_bugs or not aoti:
        return []
    where = f"target {host.label}: " if host.is_target else ""
    name = f"torch {torch.version}"
    out: list[Finding] = []

    def add(code: str, message: str, bug: KnownBug, **fields: Any) -> None:
        out.append(
            codes.get(code).finding(
                f"{where}{message} (torch issue #{bug.issue}; {bug.evidence})",
                stage="static",
                evidence=(bug.evidence,),
                **fields,
            )
        )

    for bug in torch.known_bugs:
        if bug.issue == 194128:
            add("AOT440", f"{name} has the C++ loader's JSON race: a C++ server that "
                "constructs several loaders at once can corrupt its heap", bug)  # fmt: skip
        elif bug.issue == 191715:  # _load_aoti probes whatever the package's device
            add("AOT441", f"{name}'s aoti_load_package runs the compiler-based CPU-ISA probe at "
                "every load, before it touches the package", bug)  # fmt: skip
        elif bug.issue == 196026 and len(aoti) > 1:
            for m in aoti:
                others = [o for o in aoti if o is not m]
                add(
                    "AOT442",
                    f"{name}'s load_package(path, name) constructs every model of this package: "
                    f"loading '{m.name}' also loads "
                    + "; ".join(_model_cost(package, o) for o in others),
                    bug,
                    model=m.name,
                )
        elif bug.issue == 196025 and (
            package.total_size >= LARGE_PACKAGE_BYTES
            or len(package.members) >= LARGE_PACKAGE_MEMBERS
        ):
            add("AOT443", f"{name} opens this {_size(package.total_size)}, "
                f"{len(package.members)}-member package and reads its metadata twice per "
                "load", bug)  # fmt: skip
    return out


def _model_cost(package: PackageInfo, model: ModelInfo) -> str:
    """What constructing `model` costs: its .so files and its constants on its device."""
    aoti = model.aoti
    assert aoti is not None
    sizes = {m.name: m.size for m in package.members}
    so_bytes = sum(sizes.get(so, 0) for so in aoti.shared_objects)
    constants = [c.data_size for c in model.constants if c.data_size is not None]
    parts = [f"{len(aoti.shared_objects)} .so" + (f" of {_size(so_bytes)}" if so_bytes else "")]
    if constants:
        parts.append(f"{_size(sum(constants))} of constants on {model.device_type or 'its device'}")
    return f"'{model.name}' ({', '.join(parts)})"


def _size(n: int) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} bytes"


def row_for(model: ModelInfo, host: HostInfo, findings: list[Finding]) -> TargetRow:
    """The table line of `model` on `host`, from the findings check_host gave."""
    mine = [f for f in findings if f.model == model.name]
    errors = [f for f in mine if f.severity is Severity.ERROR]
    warnings = [f for f in mine if f.severity is Severity.WARNING]
    if model.aoti is None:
        return TargetRow(host.label, model.name, "no AOTI code (compiles at deploy time)")
    if errors:
        load = [f for f in errors if f.code not in CANNOT_RUN]
        status = "cannot load" if load else "cannot run"
        return TargetRow(
            host.label, model.name, status, tuple(_short(f, model.name) for f in errors)
        )
    if warnings:
        return TargetRow(
            host.label,
            model.name,
            "needs " + "; ".join(f.hint or f.code for f in warnings[:2]),
            tuple(_short(f, model.name) for f in warnings),
        )
    notes = tuple(_short(f, model.name) for f in mine)
    if model.aoti.compiled_at_load:
        needs = "C++ sources: needs g++ and the torch headers; every cold start compiles"
        return TargetRow(host.label, model.name, "compiles at load", (needs, *notes))
    return TargetRow(host.label, model.name, "loads", notes)


def _short(f: Finding, model: str) -> str:
    """The message without the `target X: model 'm': ` the table already says."""
    marker = f"model '{model}': "
    return f"{f.code}: {f.message.split(marker, 1)[-1]}"


class _Context:
    def __init__(self, model: ModelInfo, aoti: AotiPart, host: HostInfo, soft: bool) -> None:
        self.model, self.aoti, self.host = model, aoti, host
        self.sev: dict[str, Severity] = {"severity": Severity.INFO} if soft else {}
        self.where = "the target" if host.is_target else "this machine"
        self.out: list[Finding] = []

    def add(self, code: str, message: str, **fields: Any) -> None:
        if "severity" not in fields:
            fields.update(self.sev)
        prefix = f"target {self.host.label}: " if self.host.is_target else ""
        self.out.append(
            codes.get(code).finding(
                f"{prefix}model '{self.model.name}': {message}",
                model=self.model.name,
                stage="static",
                **fields,
            )
        )

    # ------------------------------------------------------------------ device, platform

    def device(self, device: str) -> None:
        host = self.host
        if device and device in KNOWN_DEVICES and device not in host.device_types:
            self.add(
                "AOT401" if device == "cuda" else "AOT406",
                f"compiled for {device}, and {self.where} has no {device} device",
                expected=device,
                actual=sorted(host.device_types),
            )
        if (
            host.is_target
            and device
            and device in host.device_types
            and device != host.primary_device
        ):
            self.add(
                "AOT406",
                f"compiled for {device}, but the target deploys on {host.primary_device}",
                expected=host.primary_device,
                actual=device,
                hint=f"recompile the ExportedProgram for {host.primary_device}, or target "
                f"{device} on purpose",
            )

    def platform(self, readable: list[SharedObject]) -> None:
        aoti, host = self.aoti, self.host
        if aoti.platform and host.platform and aoti.platform.lower() != host.platform.lower():
            self.add(
                "AOT404",
                f"compiled for {aoti.platform}, {self.where} runs {host.platform}",
                expected=aoti.platform,
                actual=host.platform,
            )
            return
        machines = {s.machine for s in readable if s.machine}
        have = _norm_machine(host.machine)
        for machine in sorted(machines):
            if have and _norm_machine(machine) != have:
                self.add(
                    "AOT404",
                    f"its .so is {machine} code (ELF header), {self.where} is {host.machine}",
                    expected=machine,
                    actual=host.machine,
                )
                return
        if not machines and aoti.machine and have and _norm_machine(aoti.machine) != have:
            self.add(
                "AOT404",
                f"compiled for {aoti.machine} (metadata), {self.where} is {host.machine}",
                expected=aoti.machine,
                actual=host.machine,
            )

    # ------------------------------------------------------------------ C library, C++ runtime

    def libc(self, so: SharedObject) -> None:
        host, name = self.host, _base(so.member)
        for need, have, code, lib in (
            (so.glibc, host.glibc, "AOT431", "libc.so.6"),
            (so.glibcxx, host.glibcxx, "AOT432", "libstdc++.so.6"),
            (so.cxxabi, host.cxxabi, "AOT432", "libstdc++.so.6"),
        ):
            if need is None or have is None:
                continue
            prefix = need.rsplit("_", 1)[0]
            if version_key(need) > version_key(f"{prefix}_{have}"):
                self.add(
                    code,
                    f"{name} needs {need}; {self.where} has {prefix}_{have}: dlopen fails with "
                    f"`{lib}: version `{need}' not found (required by {name})`",
                    expected=need,
                    actual=f"{prefix}_{have}",
                    evidence=(f"{so.member}: version need {need}",),
                )

    # ------------------------------------------------------------------ torch's shim

    def shim(self, so: SharedObject) -> None:
        torch = self.host.torch
        exports = torch.exports if torch is not None else None
        # a libtorch folder's exports were read whole (TORCH_SYMBOLS); the shipped table has the
        # shim only
        wanted = TORCH_SYMBOLS if exports is not None else ("aoti_",)
        imports = [s for s in so.imports if s.startswith(wanted)]
        if torch is None or not imports:
            return
        source = torch.source
        if exports is None:
            from aotipre.binaries.versions import load_table

            table = load_table()
            exports = table.exports(torch.release)
            if exports is None:
                self.add(
                    "AOT439",
                    f"torch {torch.version} ({source}) is not in aotipre's export table "
                    f"({', '.join(table.releases)}); the {len(imports)} shim functions "
                    f"{_base(so.member)} imports were not checked against it",
                    actual=torch.version,
                    expected=list(table.releases),
                )
                return
            source = f"torch {torch.release} exports ({table.sources[torch.release].split(':')[0]})"
        missing = [s for s in imports if s not in exports]
        if missing:
            what = (
                "shim function(s)" if all(s.startswith("aoti_") for s in missing) else "symbol(s)"
            )
            self.add(
                "AOT430",
                f"{_base(so.member)} imports {len(missing)} {what} torch {torch.version} does "
                f"not export: dlopen fails with `undefined symbol: {missing[0]}`",
                expected=missing,
                actual=f"torch {torch.version}",
                evidence=(f"checked against {source}",),
            )

    # ------------------------------------------------------------------ GPU code

    def gpu(self) -> None:
        host, aoti = self.host, self.aoti
        members = [g for g in (aoti.binaries.gpu if aoti.binaries else ()) if g.error is None]
        if not members:
            self._gpu_from_metadata()
            return
        for cc in host.compute_capabilities:
            stuck = [g for g in members if not any(i.runs_on(cc) for i in g.images)]
            if stuck:
                carried = sorted({i.label for g in stuck for i in g.images})
                self.add(
                    "AOT433",
                    f"{len(stuck)} of {len(members)} GPU code member(s) have no SASS for "
                    f"sm_{cc.replace('.', '')} and no PTX to JIT (they carry "
                    f"{', '.join(carried)}): kernels fail to launch on compute capability {cc}",
                    expected=cc,
                    actual=carried,
                    evidence=tuple(_base(g.member) for g in stuck[:3]),
                    **_below_compile_gpu(aoti.compute_capability, cc),
                )
                continue
            jit = [
                g for g in members if not any(i.kind == "sass" and i.runs_on(cc) for i in g.images)
            ]
            if jit:
                self.add(
                    "AOT435",
                    f"on compute capability {cc}, {len(jit)} GPU code member(s) run from PTX "
                    "that the driver JIT-compiles at load",
                    expected=cc,
                )
            self._driver(cc, members)

    def _driver(self, cc: str, members: list[Any]) -> None:
        from aotipre.binaries.cuda import GpuImage

        have = self.host.driver
        if have is None:
            return
        worst: tuple[str, GpuImage, str] | None = None
        for g in members:
            usable = [i for i in g.images if i.runs_on(cc)]
            image = next((i for i in usable if i.kind == "sass"), usable[0] if usable else None)
            need = image.min_driver() if image else None
            if need and version_key(f"_{need}") > version_key(f"_{have}"):
                if worst is None or version_key(f"_{need}") > version_key(f"_{worst[0]}"):
                    worst = (need, image, g.member)  # type: ignore[assignment]
        if worst is not None:
            need, image, member = worst
            what = (
                f"PTX ISA {'.'.join(map(str, image.ptx_version or ()))}"
                if image.kind == "ptx"
                else f"SASS built by CUDA {image.toolkit}"
            )
            self.add(
                "AOT434",
                f"on compute capability {cc} it runs {what} ({_base(member)}), which needs an "
                f"NVIDIA driver >= {need}; {self.where} has {have}",
                expected=need,
                actual=have,
            )

    def _gpu_from_metadata(self) -> None:
        cc = self.aoti.compute_capability
        ccs = self.host.compute_capabilities
        if not cc or not ccs:
            return
        if cc not in {c for x in ccs for c in (x, x.replace(".", ""))}:
            self.add(
                "AOT402",
                f"compiled on compute capability {_fmt_cc(cc)} (metadata; its cubins could not "
                f"be read), {self.where} has {', '.join(ccs)}",
                expected=_fmt_cc(cc),
                actual=list(ccs),
            )

    # ------------------------------------------------------------------ CPU code

    def cpu(self, readable: list[SharedObject], scan: Scan | None) -> None:
        flags = self.host.cpu_flags
        if flags is None or any(f.code == "AOT404" for f in self.out):
            return
        meta = {f for w in self.aoti.cpu_isa for f in ISA_FLAGS.get(w.upper(), ())}
        for so in readable:
            if so.machine not in (None, "x86_64"):
                continue
            enabled = set(so.flags.enabled) if so.flags else set(meta)
            gap = sorted((enabled | meta) & (EXTENSIONS - flags))
            if not gap:
                continue
            result = scan(so.member) if scan is not None else None
            if result is None or result.error is not None:
                self._isa_from_flags(so, gap, result)
                continue
            used = [u for u in result.uses if u.flag not in flags]
            if used:
                counts = ", ".join(f"{u.flag.upper()} {u.count}" for u in used)
                self.add(
                    "AOT436",
                    f"{_base(so.member)} holds instructions of CPU extensions {self.where} lacks "
                    f"({counts}): the process dies with SIGILL when they run (e.g. "
                    f"{used[0].example})",
                    expected=[u.flag for u in used],
                    actual=sorted(flags & EXTENSIONS),
                    evidence=tuple(u.example for u in used),
                )
            unused = [f for f in gap if result.use(f) is None and f in NOTABLE]
            if unused and result.complete:
                self.add(
                    "AOT437",
                    f"compiled with {', '.join(f.upper() for f in unused)} enabled "
                    f"({self._compiled_for(so)}), which {self.where} lacks, but none of the "
                    f"{result.instructions} instructions of {_base(so.member)} uses them: it "
                    "loads (torch only warns about the AOTI_CPU_ISA mismatch)",
                    expected=unused,
                    severity=Severity.INFO,
                )

    def _compiled_for(self, so: SharedObject) -> str:
        if so.flags and so.flags.march:
            return f"-march={so.flags.march}"
        return f"AOTI_CPU_ISA {' '.join(self.aoti.cpu_isa)}" if self.aoti.cpu_isa else "metadata"

    def _isa_from_flags(self, so: SharedObject, gap: list[str], result: IsaScan | None) -> None:
        why = result.error if result is not None else "no instruction scan"
        words = [w for w in (x.upper() for x in self.aoti.cpu_isa) if w in ISA_RANK]
        self.add(
            "AOT403",
            f"compiled with {', '.join(f.upper() for f in gap)} enabled "
            f"({self._compiled_for(so)}), which {self.where} lacks; whether the code uses them "
            f"is unknown ({why}): it may die with SIGILL",
            expected=words or gap,
            actual=sorted((self.host.cpu_flags or frozenset()) & EXTENSIONS),
        )


def _below_compile_gpu(compiled: str | None, cc: str) -> dict[str, str]:
    """AOT433's hint when the missing GPU is older than the one the package was compiled on:
    TORCH_CUDA_ARCH_LIST entries below the compile GPU are dropped (measured with torch 2.11 on
    an H200; 2.14+'s _cuda_multi_arch_gencode_options logs a warning)."""
    digits = (compiled or "").strip()
    if not digits.isdigit() or not 1 <= len(digits) <= 4:
        return {}
    major, minor = (int(x) for x in (cc.split(".") + ["0"])[:2])
    if major * 10 + minor >= int(digits):
        return {}
    return {
        "hint": f"the package was compiled on sm_{digits}, and AOTInductor drops "
        "TORCH_CUDA_ARCH_LIST entries below the GPU it compiles on (torch 2.11 on an H200: "
        "'8.0;9.0' gave sm_90a and compute_90a only; 2.14+ logs a warning): "
        f"compile on the fleet's oldest GPU (sm_{major}{minor}) with "
        "aot_inductor.emit_multi_arch_kernel=True (its PTX then runs on the newer GPUs too, "
        "where that GPU is older than sm_90: Triton's PTX for sm_90 and later is arch-specific)"
    }


def _base(member: str) -> str:
    """`<hash>.wrapper.so` -> `wrapper.so (<first 8 of hash>)`: the hashes are 52 characters."""
    name = member.rsplit("/", 1)[-1]
    stem, dot, rest = name.partition(".")
    if dot and len(stem) > 16:
        return f"{rest} ({stem[:8]})"
    return name


def _norm_machine(machine: str | None) -> str | None:
    if not machine:
        return None
    m = machine.lower()
    return {"amd64": "x86_64", "x64": "x86_64", "arm64": "aarch64"}.get(m, m)


def _fmt_cc(cc: str) -> str:
    return f"{cc[:-1]}.{cc[-1]}" if cc.isdigit() and len(cc) >= 2 else cc
