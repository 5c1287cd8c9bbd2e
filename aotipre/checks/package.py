"""Static checks of the package itself and of its fit with the deployment host."""

from __future__ import annotations

from aotipre import codes
from aotipre.findings import Finding, Severity
from aotipre.host import ISA_RANK, HostInfo
from aotipre.pt2.spec import ModelInfo, PackageInfo
from aotipre.versions import SUPPORTED_TEXT, SUPPORTED_TORCH, major_minor

KNOWN_DEVICES = ("cpu", "cuda", "xpu", "mps")


def check_package(package: PackageInfo, models: list[ModelInfo]) -> list[Finding]:
    """Findings about the archive and the selected models, independent of any host or input."""
    out: list[Finding] = []
    for member in package.corrupt_members:
        out.append(
            codes.get("AOT008").finding(
                f"member {member} is corrupt (CRC mismatch)", stage="static", actual=member
            )
        )
    if package.opaque_objects:
        shown = ", ".join(m.rsplit("/", 1)[-1] for m in package.opaque_objects[:4])
        more = (
            f" and {len(package.opaque_objects) - 4} more"
            if len(package.opaque_objects) > 4
            else ""
        )
        out.append(
            codes.get("AOT080").finding(
                f"the package stores {len(package.opaque_objects)} opaque Python object(s) "
                f"({shown}{more}) that torch.export.load and load_pt2 unpickle with pickle.loads; "
                "aotipre did not unpickle them",
                stage="static",
                actual=list(package.opaque_objects),
            )
        )
    for model in models:
        out.extend(_check_model(model))
    return out


def _check_model(model: ModelInfo) -> list[Finding]:
    out: list[Finding] = []
    name = model.name
    if model.aoti is not None and model.aoti.weights_on_disk:
        out.append(
            codes.get("AOT011").finding(
                f"model '{name}' keeps its AOTI weights outside the .so "
                f"({model.aoti.directory}weights_config.json); aoti_load_package segfaults "
                "when it is called",
                model=name,
                stage="static",
            )
        )
    if model.contract_source == "none":
        why = "; ".join(model.notes) or "no ExportedProgram and no readable wrapper.cpp"
        out.append(
            codes.get("AOT012").finding(
                f"model '{name}': no input contract could be read ({why})",
                model=name,
                stage="static",
            )
        )
    device = model.device_type
    if device is not None and device.split(":")[0] not in KNOWN_DEVICES:
        out.append(
            codes.get("AOT014").finding(
                f"model '{name}' targets device type {device!r}, which aotipre does not know",
                model=name,
                stage="static",
                actual=device,
                expected=list(KNOWN_DEVICES),
            )
        )
    if model.has_exported_program:
        out.extend(_export_vs_aoti_bounds(model))
    if model.torch_version:
        version = major_minor(model.torch_version)
        if version is not None and not (SUPPORTED_TORCH[0] <= version <= SUPPORTED_TORCH[1]):
            out.append(
                codes.get("AOT405").finding(
                    f"model '{name}' was exported with torch {model.torch_version}; aotipre "
                    f"supports torch {SUPPORTED_TEXT}",
                    model=name,
                    stage="static",
                    actual=model.torch_version,
                    expected=SUPPORTED_TEXT,
                )
            )
    return out


def _export_vs_aoti_bounds(model: ModelInfo) -> list[Finding]:
    out = []
    seen: set[tuple[str, str]] = set()
    for inp in model.tensor_inputs:
        t = inp.tensor
        assert t is not None
        for dim, (want, bound) in enumerate(zip(t.shape, t.bounds)):
            if bound is None or not want.expr:
                continue
            rng = model.symbol(want.expr)
            if rng is None:
                continue
            for side, export_v, aoti_v, narrower in (
                ("min", rng.min, bound.min, bound.min is not None and bound.min > rng.min),
                (
                    "max",
                    rng.max,
                    bound.max,
                    bound.max is not None and (rng.max is None or bound.max < rng.max),
                ),
            ):
                if not narrower or (want.expr, side) in seen:
                    continue
                seen.add((want.expr, side))
                out.append(
                    codes.get("AOT013").finding(
                        f"model '{model.name}': dynamic dim {want.expr} has {side} {export_v} in "
                        f"the ExportedProgram, but the AOTI code checks {side} {aoti_v} "
                        f"(input '{inp.name}' dim {dim})",
                        model=model.name,
                        input=inp.name,
                        position=inp.position,
                        dim=dim,
                        expected=export_v,
                        actual=aoti_v,
                        stage="static",
                    )
                )
    return out


def check_host(model: ModelInfo, host: HostInfo, *, soft: bool) -> list[Finding]:
    """Can `host` run `model`'s AOTI code? `soft`: report facts of this machine as info only."""
    aoti = model.aoti
    if aoti is None:
        return []
    out: list[Finding] = []
    sev = {"severity": Severity.INFO} if soft else {}
    where = host.description
    name = model.name
    device = (aoti.device_type or "").split(":")[0]
    if device and device in KNOWN_DEVICES and device not in host.device_types:
        code = "AOT401" if device == "cuda" else "AOT406"
        out.append(
            codes.get(code).finding(
                f"model '{name}' was compiled for {device}, and {where} has no {device} device",
                model=name,
                stage="static",
                expected=device,
                actual=sorted(host.device_types),
                **sev,
            )
        )
    if host.is_target and device and device in host.device_types and device != host.primary_device:
        out.append(
            codes.get("AOT406").finding(
                f"model '{name}' was compiled for {device}, but the {where} deploys on "
                f"{host.primary_device}",
                model=name,
                stage="static",
                expected=host.primary_device,
                actual=device,
                hint=f"recompile the ExportedProgram for {host.primary_device}, or target "
                f"{device} on purpose",
                severity=Severity.WARNING,
            )
        )
    cc = aoti.compute_capability
    if (
        device == "cuda"
        and cc
        and host.compute_capabilities
        and cc not in _cc_variants(host.compute_capabilities)
    ):
        out.append(
            codes.get("AOT402").finding(
                f"model '{name}' was compiled for compute capability {_fmt_cc(cc)}, {where} has "
                f"{', '.join(host.compute_capabilities)}",
                model=name,
                stage="static",
                expected=_fmt_cc(cc),
                actual=list(host.compute_capabilities),
                **sev,
            )
        )
    if device == "cpu" and aoti.cpu_isa and host.cpu_isa is not None:
        missing = [w for w in (x.upper() for x in aoti.cpu_isa) if w not in host.cpu_isa]
        missing = [w for w in missing if w in ISA_RANK or w in ("ASIMD", "NEON", "VSX", "ZVECTOR")]
        if missing:
            out.append(
                codes.get("AOT403").finding(
                    f"model '{name}' was compiled with {' '.join(aoti.cpu_isa)}; {where} lacks "
                    f"{' '.join(missing)}",
                    model=name,
                    stage="static",
                    expected=list(aoti.cpu_isa),
                    actual=sorted(host.cpu_isa),
                    **sev,
                )
            )
    if aoti.platform and host.platform and aoti.platform.lower() != host.platform.lower():
        out.append(
            codes.get("AOT404").finding(
                f"model '{name}' was compiled for {aoti.platform}, {where} runs {host.platform}",
                model=name,
                stage="static",
                expected=aoti.platform,
                actual=host.platform,
                **sev,
            )
        )
    elif aoti.machine and host.machine and aoti.machine != host.machine:
        out.append(
            codes.get("AOT404").finding(
                f"model '{name}' was compiled for {aoti.machine}, {where} is {host.machine}",
                model=name,
                stage="static",
                expected=aoti.machine,
                actual=host.machine,
                **sev,
            )
        )
    return out


def _fmt_cc(cc: str) -> str:
    return f"{cc[:-1]}.{cc[-1]}" if cc.isdigit() and len(cc) >= 2 else cc


def _cc_variants(ccs: tuple[str, ...]) -> set[str]:
    out = set()
    for cc in ccs:
        out.add(cc)
        out.add(cc.replace(".", ""))
    return out
