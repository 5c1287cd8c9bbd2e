"""Static checks of the package itself and of its fit with the deployment host."""

from __future__ import annotations

from dataclasses import replace

from aotipre.binaries.facts import GpuMember, SharedObject
from aotipre.checks.inputs import zero_one_hint
from aotipre.checks.target import KNOWN_DEVICES
from aotipre.environment.versions import SUPPORTED_TEXT, SUPPORTED_TORCH, major_minor
from aotipre.findings import Finding, Severity, codes
from aotipre.pt2.reader import FALLBACK, PickleMember, merge_wrapper_bounds, pickle_members
from aotipre.pt2.spec import AotiPart, ModelInfo, PackageInfo


def check_package(
    package: PackageInfo, models: list[ModelInfo], *, allow_pickle: bool = False
) -> list[Finding]:
    """Findings about the archive and the selected models, independent of any host or input.
    `allow_pickle` (--allow-pickle): pickled members are warnings, not errors."""
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
    out.extend(pickle_findings(package, allow_pickle=allow_pickle))
    for model in models:
        out.extend(_check_model(model))
    return out


LOADERS = "loading the package (torch.export.load, load_pt2, aoti_load_package)"
"""What unpickles the members: every Python loader of a package with an ExportedProgram goes
through load_pt2, which deserializes its weights, constants and sample inputs."""


def pickle_findings(
    package: PackageInfo, *, allow_pickle: bool = False, label: str = ""
) -> list[Finding]:
    """AOT081 for the members the reader found that loading `package` unpickles without
    restriction (pt2/reader.py, `pickle_members`): one finding per model and kind of member,
    naming each member, what torch does with it, and what the user can do. An error, unless
    the user opted in (`allow_pickle`). `label` names the package in the message (e.g. the
    --against baseline); empty: the package checked."""
    groups: dict[tuple[str | None, str, str, str], list[PickleMember]] = {}
    for item in pickle_members(package):
        source = item.why if item.loader != FALLBACK else item.member
        groups.setdefault((item.model, item.kind, item.loader, source), []).append(item)
    tail = (
        "; --allow-pickle: the dynamic stages load it"
        if allow_pickle
        else "; the dynamic stages do not load the package without --allow-pickle"
    )
    out = []
    for (model, kind, loader, _), items in groups.items():
        where = (f"{label}: " if label else "") + (f"model '{model}': " if model else "")
        out.append(
            codes.get("AOT081").finding(
                where + _pickled_text(kind, loader, items) + tail,
                stage="static",  # no model: loading any model unpickles every program's members
                actual=[i.member for i in items],
                severity=Severity.WARNING if allow_pickle else Severity.ERROR,
            )
        )
    return out


def _pickled_text(kind: str, loader: str, items: list[PickleMember]) -> str:
    """What the members are and what loading the package does with them."""
    first = items[0]
    if loader == FALLBACK:  # one member per finding
        return (
            f"the {kind} {first.member}: {first.why}; {LOADERS} tries a weights-only load, then "
            "unpickles it with torch.load(weights_only=False), which runs any code a pickle "
            "names; aotipre did not unpickle it"
        )
    if kind.endswith("config"):  # one member per finding
        return (
            f"the {kind} {first.member} is too large for aotipre to read ({first.why}), so the "
            f"members it marks use_pickle are unknown: {LOADERS} unpickles those with {loader}, "
            "which runs any code a pickle names"
        )
    shown = ", ".join(
        f"{i.name} ({i.member})" if i.name else i.member.rsplit("/", 1)[-1] for i in items[:4]
    )
    more = f" and {len(items) - 4} more" if len(items) > 4 else ""
    return (
        f"{len(items)} {kind}(s) stored as pickles ({first.why}): {shown}{more}; {LOADERS} "
        f"unpickles them with {loader}, which runs any code a pickle names; aotipre did not "
        "unpickle them"
    )


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
    if model.aoti is not None:
        out.extend(_unreadable_metadata(name, model.aoti))
        out.extend(_load_fallback(name, model.aoti))
        out.extend(_binaries(model, model.aoti))
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


def export_vs_compiled_bounds(
    compiled: ModelInfo, exported: ModelInfo, label: str
) -> list[Finding]:
    """AOT013 for an AOTI-only model against an ExportedProgram read elsewhere (`label` names
    it): the program's ranges with the compiled code's bounds, when the two agree on the tensor
    inputs (count and dtypes; else nothing, rather than bounds matched to the wrong input)."""
    ours = [(i.tensor_index, i.tensor.dtype) for i in compiled.tensor_inputs if i.tensor]
    theirs = [(i.tensor_index, i.tensor.dtype) for i in exported.tensor_inputs if i.tensor]
    if ours != theirs:
        return []
    merged = merge_wrapper_bounds(replace(exported, name=compiled.name), compiled.inputs)
    return [
        replace(f, message=f.message.replace("in the ExportedProgram", f"in {label}"))
        for f in _export_vs_aoti_bounds(merged)
    ]


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
                zero_one = side == "min" and aoti_v == 2 and export_v is not None and export_v <= 1
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
                        **({"hint": zero_one_hint(export_v or 0)} if zero_one else {}),
                    )
                )
    return out


def _binaries(model: ModelInfo, aoti: AotiPart) -> list[Finding]:
    """What the compiled members are: unreadable ones (the loader fails on them), the CPU target
    the .so was compiled for, the torch that produced it, the GPU code it carries."""
    name = model.name
    if aoti.compiled_at_load:
        return [_compiled_at_load(name, aoti)]
    if not aoti.shared_objects:
        return [
            codes.get("AOT050").finding(
                f"model '{name}': its AOTI code has no shared object (.so) in {aoti.directory}, "
                "nor the compile and linker flags the C++ loader would build one from: "
                "aoti_load_package cannot load it",
                model=name,
                stage="static",
                hint="rebuild the package with aoti_compile_and_package; a member was lost",
            )
        ]
    facts = aoti.binaries
    if facts is None:
        return []
    out = []
    bad_members: list[SharedObject | GpuMember] = [
        *(s for s in facts.shared_objects if s.error),
        *(g for g in facts.gpu if g.error),
    ]
    for bad in bad_members:
        kind = "shared object" if bad.member.endswith(".so") else "GPU code member"
        out.append(
            codes.get("AOT050").finding(
                f"model '{name}': {kind} {bad.member} is not loadable: {bad.error}",
                model=name,
                stage="static",
                actual=bad.member,
            )
        )
    sos = [s for s in facts.shared_objects if s.error is None]
    device = (aoti.device_type or "").split(":")[0]
    for so in sos:
        if device == "cpu" and (so.flags is not None or aoti.cpu_isa):
            flags = so.flags
            what = f"-march={flags.march}" if flags and flags.march else "an unknown -march"
            isa = f"; metadata AOTI_CPU_ISA: {' '.join(aoti.cpu_isa)}" if aoti.cpu_isa else ""
            wide = [f for f in (flags.enabled if flags else ()) if f.startswith(("avx512", "amx"))]
            out.append(
                codes.get("AOT051").finding(
                    f"model '{name}': CPU code compiled for {what} (enabled: "
                    f"{', '.join(wide) or 'no AVX-512/AMX'}{isa})",
                    model=name,
                    stage="static",
                    actual=list(flags.enabled) if flags else list(aoti.cpu_isa),
                    evidence=(f"{so.member}: {flags.source if flags else 'metadata'}",),
                )
            )
    if not model.torch_version and sos:
        from aotipre.binaries.versions import producer_range

        so = sos[0]
        found = producer_range(so.entry_points, so.imports)
        out.append(
            codes.get("AOT052").finding(
                f"model '{name}': AOTI code produced by torch {found.text} (from the "
                f"{len(so.entry_points)} AOTInductor entry points and "
                f"{sum(1 for s in so.imports if s.startswith('aoti_'))} shim imports of its .so)",
                model=name,
                stage="static",
                actual=list(found.releases),
                evidence=found.evidence,
            )
        )
    images = sorted({i.label for g in facts.gpu for i in g.images})
    if images:
        ptx = sorted(
            {
                ".".join(map(str, i.ptx_version))
                for g in facts.gpu
                for i in g.images
                if i.ptx_version
            }
        )
        out.append(
            codes.get("AOT053").finding(
                f"model '{name}': {len(facts.gpu)} GPU code member(s) carry {', '.join(images)}"
                + (f" (PTX ISA {', '.join(ptx)})" if ptx else "; no PTX"),
                model=name,
                stage="static",
                actual=images,
            )
        )
    return out


def _compiled_at_load(name: str, aoti: AotiPart) -> Finding:
    """AOT032: a package_cpp_only package (no .so; the C++ loader runs g++ on the packaged .cpp
    inside aoti_load_package, every cold start)."""
    cpp = aoti.wrapper_cpp.rsplit("/", 1)[-1] if aoti.wrapper_cpp else "its .cpp"
    return codes.get("AOT032").finding(
        f"model '{name}' is C++ sources, compiled at load (aot_inductor.package_cpp_only): no "
        f"shared object (.so) is packaged in {aoti.directory}; aoti_load_package compiles {cpp} "
        "with the packaged compile and linker flags in every fresh process, so the deployment "
        "host needs a C++ toolchain (g++ and the torch headers) and every cold start pays the "
        "compile",
        model=name,
        stage="static",
        actual=list(aoti.build_flags),
    )


def _load_fallback(name: str, aoti: AotiPart) -> list[Finding]:
    """AOT531: the wrapper's metadata cannot be read, so torch's load_pt2 fails and
    load_package falls back to the C++ loader (which reads the kernel's copy)."""
    if aoti.wrapper_metadata_unreadable is None:
        return []
    member, why = aoti.wrapper_metadata_unreadable
    return [
        codes.get("AOT531").finding(
            f"model '{name}': {member} is {why}: torch's load_pt2 fails on it ([json.exception."
            'parse_error.101] on an empty one), and aoti_load_package logs "Loading outdated '
            'pt2 file" and falls back to AOTIModelPackageLoader, which loads the package; a '
            "deployment that calls load_pt2 (torch.export.pt2_archive, num_runners, "
            "load_weights_from_disk) cannot load it",
            model=name,
            stage="static",
            actual=member,
        )
    ]


def _unreadable_metadata(name: str, aoti: AotiPart) -> list[Finding]:
    """AOT031: a metadata member the C++ loader parses is empty or not JSON (torch 2.13's
    binary_blob packages were reported with an empty kernel_metadata.json)."""
    return [
        codes.get("AOT031").finding(
            f"model '{name}': {member} is {why}; the C++ loader parses it when the package "
            'loads and fails (on an empty one aoti_load_package raises "[json.exception.'
            "parse_error.101] parse error at line 1, column 1: attempting to parse an empty "
            'input"), so the package cannot load',
            model=name,
            stage="static",
            actual=member,
        )
        for member, why in aoti.metadata_unreadable
    ]
