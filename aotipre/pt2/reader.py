"""read_package(): a .pt2 path -> PackageInfo, with zipfile and json only (no torch, no .so, no pickle run)."""

from __future__ import annotations

import io
import json
import os
import posixpath
import re
import zipfile
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

from aotipre.binaries.facts import read_binary_facts
from aotipre.environment.versions import SUPPORTED_TEXT
from aotipre.foundation.errors import InputsError
from aotipre.inputs.load import ALLOWED_GLOBALS, MAX_PICKLE_BYTES, pickle_contents
from aotipre.pt2 import layout
from aotipre.pt2.archive import Archive, CodedPackageError, ZipRefused, open_archive, open_zip
from aotipre.pt2.exported import ContractError, ExportedContract, parse_exported
from aotipre.pt2.foreign import describe_foreign_zip
from aotipre.pt2.spec import (
    AotiPart,
    MemberInfo,
    ModelInfo,
    PackageInfo,
    with_exported_ranges,
)
from aotipre.pt2.wrapper_contract import WrapperView, contract_from_wrapper

SUPPORTED_ARCHIVE_VERSIONS = ("0",)
MAX_JSON_CONTAINERS = 4_000_000
"""A metadata JSON with more `{`/`[` than this is refused unparsed: each object or array costs
~70 bytes in Python, so 64 MiB of `[{},{},...]` would take 1.5 GB (in real model JSON, 3% of the
bytes are `{`/`[`)."""


def read_package(path: str | os.PathLike[str], *, verify_crc: bool = True) -> PackageInfo:
    """Inspect a .pt2 archive. Raises CodedPackageError (one clear line) when it cannot be read."""
    with open_archive(path) as archive:
        return _read(archive, verify_crc=verify_crc)


@dataclass(frozen=True)
class OpenPackage:
    """A .pt2 read once and kept open: its PackageInfo and its validated archive, for the later
    readers of one check (sample inputs, synthesized-input hints, the compile-cache key, crash
    triage) instead of each reopening the file. Close it with `archive` (a context manager)."""

    info: PackageInfo
    archive: Archive


def open_package(path: str | os.PathLike[str], *, verify_crc: bool = True) -> OpenPackage:
    """read_package(), keeping the archive open. Raises CodedPackageError (one clear line)."""
    archive = open_archive(path)
    try:
        return OpenPackage(_read(archive, verify_crc=verify_crc), archive)
    except BaseException:
        archive.close()
        raise


def _read(archive: Archive, *, verify_crc: bool) -> PackageInfo:
    names = archive.names()
    root = _single_root(archive, names)
    fmt_member = f"{root}/{layout.ARCHIVE_FORMAT}"
    if fmt_member not in archive.members:
        what = describe_foreign_zip(names, root)
        raise CodedPackageError(
            "AOT004",
            f"{archive.path}: "
            + (what or f"a zip archive without {layout.ARCHIVE_FORMAT}, so not a .pt2 package"),
        )
    archive_format = archive.read_text(fmt_member, limit=1024).strip()
    if archive_format != layout.ARCHIVE_FORMAT_VALUE:
        raise CodedPackageError(
            "AOT004",
            f"{archive.path}: archive_format is {archive_format[:40]!r}, expected 'pt2'",
        )
    version_member = f"{root}/{layout.ARCHIVE_VERSION}"
    archive_version = (
        archive.read_text(version_member, limit=1024).strip()
        if version_member in archive.members
        else ""
    )
    if archive_version not in SUPPORTED_ARCHIVE_VERSIONS:
        raise CodedPackageError(
            "AOT005",
            f"{archive.path}: archive_version {archive_version[:20]!r} is not supported "
            f"(torch {SUPPORTED_TEXT} read version {', '.join(SUPPORTED_ARCHIVE_VERSIONS)})",
            f"re-package with a torch release between {SUPPORTED_TEXT.replace('-', ' and ')}",
        )

    ep_names = _model_names(names, f"{root}/{layout.MODELS_DIR}/", ".json")
    aoti_names = _aoti_model_names(names, f"{root}/{layout.AOTI_DIR}/")
    models = tuple(
        _read_model(archive, root, name, name in ep_names, name in aoti_names)
        for name in sorted(set(ep_names) | set(aoti_names))
    )
    kind = (
        "both"
        if ep_names and aoti_names
        else "exported_program"
        if ep_names
        else "aoti"
        if aoti_names
        else "empty"
    )
    corrupt = tuple(n for n in names if not archive.crc_ok(n)) if verify_crc else ()
    members = tuple(
        MemberInfo(m.name, m.size, m.compressed_size, m.crc) for m in archive.members.values()
    )
    return PackageInfo(
        path=str(archive.path),
        kind=kind,
        root=root,
        archive_format=archive_format,
        archive_version=archive_version,
        models=models,
        members=members,
        corrupt_members=corrupt,
        total_size=sum(m.size for m in members),
        extra={PICKLE_MEMBERS: _pickle_members(archive, root, names, ep_names)},
        opaque_objects=_opaque_objects(names, root),
        extracted=archive.path.is_dir(),
    )


def _opaque_objects(names: list[str], root: str) -> tuple[str, ...]:
    """data/constants/opaque_obj_<n> members: pickles torch loads with pickle.loads (flagged,
    never unpickled here)."""
    prefix = f"{root}/{layout.CONSTANTS_DIR}/{layout.OPAQUE_OBJ_PREFIX}"
    return tuple(sorted(n for n in names if n.startswith(prefix)))


# --- members that loading the package unpickles without restriction -------------------------


PICKLE_MEMBERS = "pickle_members"
"""The key of PackageInfo.extra under which the reader keeps what `_pickle_members` found."""


@dataclass(frozen=True)
class PickleMember:
    """A member that torch unpickles without restriction when it loads the package (read from
    torch 2.13's torch/export/pt2_archive/_package.py and _export/serde/serialize.py; the same
    in 2.11-2.15). Found from the configs and the member names; never unpickled here."""

    member: str
    model: str | None
    """The model whose config or ExportedProgram names it; None: found by its name alone."""
    kind: str
    """weight, constant, opaque object, sample inputs, legacy weights, legacy constants."""
    name: str | None
    """The weight's or constant's fully qualified name, when a config gives one."""
    loader: str
    """What torch calls on it: `torch.load(weights_only=False)`, `pickle.loads`, or the
    weights-only load that falls back to weights_only=False."""
    why: str
    """Why it is unpickled that way: the config that says use_pickle, or what a weights-only
    load refuses in it."""


def pickle_members(package: PackageInfo) -> tuple[PickleMember, ...]:
    """The reader's scan of `package` (a PackageInfo built by hand, not by the reader, has
    none)."""
    return tuple(package.extra.get(PICKLE_MEMBERS, ()))


UNRESTRICTED = "torch.load(weights_only=False)"
FALLBACK = "torch.load(weights_only=True), then torch.load(weights_only=False) when that refuses it"
_TORCH_ALSO_ALLOWS = re.compile(
    r"builtins\.(set|complex|bytearray)|collections\.Counter"
    r"|torch(\.cuda)?(\.sparse)?\.(BFloat16|Bool|Byte|Char|Double|Float|Half|Int|Long|Short)Tensor"
    r"|torch\.QUInt(2x4|4x2)Storage|torch\.storage\.TypedStorage|torch\.u?int[1-7]"
    r"|torch\.quint(2x4|4x2)|torch\.per_(tensor_affine|tensor_symmetric|channel_affine"
    r"|channel_symmetric|channel_affine_float_qparams)|torch\.serialization\._get_layout"
    r"|torch\._utils\._rebuild_(device_tensor_from_cpu_tensor|device_tensor_from_numpy"
    r"|nested_tensor|qtensor|sparse_tensor|wrapper_subclass)"
)
"""Globals torch 2.13's weights-only unpickler allows (`_get_allowed_globals`) beyond those of
aotipre's own input loader (ALLOWED_GLOBALS): a pickle naming only these loads weights-only."""


def _pickle_members(
    archive: Archive, root: str, names: list[str], ep_names: list[str]
) -> tuple[PickleMember, ...]:
    """Every member torch's loader unpickles without restriction: what the weights and
    constants configs (`data/{weights,constants}/<model>_*_config.json`) mark `use_pickle`
    (torch.load(weights_only=False); an `opaque_obj_*` path: pickle.loads), every
    `data/constants/opaque_obj_*` member, and the ExportedProgram artifacts torch deserializes
    with a weights-only load that falls back to weights_only=False (each program's sample
    inputs, legacy `data/{weights,constants}/<model>.pt` files) when a weights-only load would
    refuse them. A config too large to read counts (it may name any member); one that is not
    JSON does not (torch fails on it before it unpickles anything)."""
    found: dict[str, PickleMember] = {}
    for directory, kind in ((layout.WEIGHTS_DIR, "weight"), (layout.CONSTANTS_DIR, "constant")):
        suffix = f"_{kind}s_config.json"
        for config in _model_names(names, f"{root}/{directory}/", suffix):
            member = f"{root}/{directory}/{config}{suffix}"
            for item in _pickled_in_config(archive, root, directory, kind, config, member):
                found.setdefault(item.member, item)
    prefix = f"{root}/{layout.CONSTANTS_DIR}/{layout.OPAQUE_OBJ_PREFIX}"
    for name in sorted(n for n in names if n.startswith(prefix)):
        found.setdefault(
            name,
            PickleMember(name, None, "opaque object", None, "pickle.loads", f"{prefix}*"),
        )
    for model in sorted(ep_names):
        for member, kind in (
            (f"{root}/{layout.SAMPLE_INPUTS_DIR}/{model}.pt", "sample inputs"),
            (f"{root}/{layout.WEIGHTS_DIR}/{model}.pt", "legacy weights"),
            (f"{root}/{layout.CONSTANTS_DIR}/{model}.pt", "legacy constants"),
        ):
            if member in archive.members and member not in found:
                refused = _refused_weights_only(archive, member)
                if refused is not None:
                    found[member] = PickleMember(member, model, kind, None, FALLBACK, refused)
    return tuple(found.values())


def _pickled_in_config(
    archive: Archive, root: str, directory: str, kind: str, model: str, member: str
) -> list[PickleMember]:
    try:
        data = _load_json(archive, member)
    except CodedPackageError as exc:
        if exc.code == "AOT007":  # too large to read: it may name any member
            return [PickleMember(member, model, f"{kind}s config", None, UNRESTRICTED, str(exc))]
        return []  # not JSON or unreadable: torch's json.loads fails on it first
    entries = data.get("config") if isinstance(data, dict) else None
    if not isinstance(entries, dict):
        return []
    out = []
    for fqn, meta in entries.items():
        path = meta.get("path_name") if isinstance(meta, dict) else None
        if not isinstance(path, str):
            continue
        why = f"use_pickle: true in {member}"
        if kind == "constant" and path.startswith(layout.OPAQUE_OBJ_PREFIX):
            loader, what, why = "pickle.loads", "opaque object", f"listed in {member}"
        elif kind == "constant" and path.startswith(layout.CUSTOM_OBJ_PREFIX):
            continue  # a torchbind object: torch's own pickler, which builds no Python objects
        elif meta.get("use_pickle") and (kind == "weight" or path.startswith("tensor_")):
            loader, what = UNRESTRICTED, kind
        else:
            continue
        out.append(PickleMember(f"{root}/{directory}/{path}", model, what, str(fqn), loader, why))
    return out


def _refused_weights_only(archive: Archive, member: str) -> str | None:
    """Why torch.load(weights_only=True) would refuse the torch.save file in `member` (so that
    torch unpickles it again without restriction), or None when it loads weights-only. Judged
    from its data.pkl, disassembled and never run: any global outside what torch allows, any
    opcode its weights-only unpickler does not run, or a file aotipre cannot take apart."""
    size = archive.members[member].size
    if size == 0:
        return None  # torch reads an empty member as no sample inputs
    if size > MAX_PICKLE_BYTES:
        return f"it is {size} bytes, too large for aotipre to scan"
    try:
        data = archive.read(member, limit=MAX_PICKLE_BYTES)
        with open_zip(io.BytesIO(data), len(data)) as zf:
            infos = zf.infolist()
            top = infos[0].filename.partition("/")[0] if infos else ""
            pkl_name = f"{top}/data.pkl"
            info = zf.NameToInfo.get(pkl_name)
            if info is None:
                return "it is not a torch.save zip archive (no data.pkl)"
            if info.file_size > MAX_PICKLE_BYTES:
                return f"its data.pkl is {info.file_size} bytes, too large for aotipre to scan"
            with zf.open(info) as fh:
                pkl = fh.read(MAX_PICKLE_BYTES + 1)
        globals_, opcodes = pickle_contents(pkl, member)
    except CodedPackageError as exc:
        return f"it cannot be read ({exc})"
    except (ZipRefused, zipfile.BadZipFile, InputsError, ValueError, OSError, EOFError) as exc:
        return f"it is not a torch.save file aotipre can take apart ({str(exc)[:200]})"
    refused = [
        g for g in globals_ if g not in ALLOWED_GLOBALS and not _TORCH_ALSO_ALLOWS.fullmatch(g)
    ]
    if refused:
        shown = ", ".join(refused[:4]) + (
            f" and {len(refused) - 4} more" if len(refused) > 4 else ""
        )
        return f"it names {shown}, which a weights-only load refuses"
    if opcodes:
        return f"it uses pickle opcodes a weights-only load refuses ({', '.join(sorted(opcodes))})"
    return None


def _single_root(archive: Archive, names: list[str]) -> str:
    roots = {n.split("/", 1)[0] for n in names if "/" in n}
    loose = [n for n in names if "/" not in n]
    if not names:
        raise CodedPackageError("AOT004", f"{archive.path}: an empty zip archive, not a .pt2")
    if len(roots) != 1 or loose:
        shown = ", ".join(sorted(roots | set(loose))[:4])
        raise CodedPackageError(
            "AOT004",
            f"{archive.path}: a .pt2 keeps every member under one root folder; found {shown}",
        )
    return roots.pop()


def _model_names(names: list[str], prefix: str, suffix: str) -> list[str]:
    out = []
    for n in names:
        if n.startswith(prefix) and n.endswith(suffix):
            rest = n[len(prefix) : -len(suffix)]
            if rest and "/" not in rest:
                out.append(rest)
    return out


def _aoti_model_names(names: list[str], prefix: str) -> list[str]:
    out = set()
    for n in names:
        if n.startswith(prefix):
            rest = n[len(prefix) :]
            if "/" in rest:
                out.add(rest.split("/", 1)[0])
    return sorted(out)


def _read_model(archive: Archive, root: str, name: str, has_ep: bool, has_aoti: bool) -> ModelInfo:
    """One model's contract: the ExportedProgram's (with the AOTI wrapper's dim bounds merged in)
    when it is packaged, else the one wrapper.cpp's generated checks spell out, else none."""
    aoti = _read_aoti(archive, root, name) if has_aoti else None
    contract = (
        _read_exported(archive, f"{root}/{layout.MODELS_DIR}/{name}.json") if has_ep else None
    )
    wrapper = None
    if aoti is not None and aoti.wrapper_cpp is not None:
        wrapper = contract_from_wrapper(archive.read_text(aoti.wrapper_cpp))
    samples = (
        f"{root}/{layout.SAMPLE_INPUTS_DIR}/{name}.pt",
        f"{root}/{layout.EXTRA_DIR}/{name}{layout.TS_SAMPLE_INPUTS_SUFFIX}",
    )
    expected = f"{root}/{layout.EXPECTED_OUTPUTS_FORMAT.format(model=name)}"
    model = ModelInfo(
        name=name,
        has_exported_program=has_ep,
        aoti=aoti,
        torch_version=None,
        schema_version=None,
        inputs=(),
        outputs=(),
        symbols=(),
        signature=None,
        contract_source="none",
        sample_inputs_member=next((m for m in samples if m in archive.members), None),
        expected_outputs_member=expected if expected in archive.members else None,
        weights_location=_weights_location(aoti, has_ep),
        notes=tuple(wrapper.notes) if wrapper is not None else (),
        constants=wrapper.constants if wrapper is not None else (),
        mutated_buffers=_mutated(contract, wrapper),
        output_tree=wrapper.output_tree if wrapper is not None else None,
        data_symbols=wrapper.data_symbols if wrapper is not None else (),
        lifted_without_constant=wrapper.lifted_without_constant if wrapper is not None else None,
    )
    if contract is not None:
        model = replace(
            model,
            state=contract.state,
            torch_version=contract.torch_version,
            schema_version=contract.schema_version,
            inputs=contract.inputs,
            outputs=contract.outputs,
            symbols=contract.symbols,
            signature=contract.signature,
            contract_source="exported_program",
            export_device=contract.device,
            data_symbols=with_exported_ranges(model.data_symbols, contract.symbols),
        )
        return merge_wrapper_bounds(model, wrapper.inputs) if wrapper is not None else model
    if wrapper is not None:
        return replace(
            model,
            inputs=wrapper.inputs,
            symbols=wrapper.symbols,
            signature=wrapper.signature,
            contract_source="wrapper_cpp" if wrapper.inputs or wrapper.signature else "none",
            call_leaves=wrapper.call_leaves,
        )
    notes = (*model.notes, "no wrapper.cpp is packaged, so the input contract is unknown")
    return replace(model, notes=notes)


def _mutated(contract: ExportedContract | None, wrapper: WrapperView | None) -> tuple[str, ...]:
    """The buffers the program mutates and those the compiled code writes, program first."""
    names = (*(contract.mutated_buffers if contract else ()), *(wrapper.written if wrapper else ()))
    return tuple(dict.fromkeys(names))


def _read_exported(archive: Archive, member: str) -> ExportedContract:
    try:
        return parse_exported(_load_json(archive, member))
    except ContractError as exc:
        raise CodedPackageError(
            "AOT006", f"{archive.path}: {member} is not a valid ExportedProgram: {exc}"
        ) from None


def _weights_location(aoti: AotiPart | None, has_ep: bool) -> str:
    if aoti is not None:
        if aoti.weights_on_disk:
            return "on_disk"
        return "binary_blob" if aoti.weights_blob else "in_so"
    return "exported_program" if has_ep else "none"


def with_reference_values(model: ModelInfo, reference: ModelInfo) -> ModelInfo:
    """An AOTI-only model's non-tensor arguments with the values (and the names) that the
    ExportedProgram it was compiled from (`--exported-program`) specialized them to: the
    compiled code computes with those values and ignores whatever is passed, and only the
    program records them. Matched by their place in the call (`args[1]`). Also the ranges the
    program gives the values the compiled code reads at run time (`u0`), by name, and its
    state_dict (which of its tensors the compiled code inlined: ModelInfo.baked_state)."""
    by_path = {i.path: i for i in reference.inputs if i.tensor is None}
    merged = []
    for inp in model.inputs:
        ref = by_path.get(inp.path) if inp.tensor is None else None
        if ref is not None and ref.value is not None and inp.value is None:
            inp = replace(inp, name=ref.name, kind=ref.kind, value=ref.value)
        merged.append(inp)
    data = with_exported_ranges(model.data_symbols, reference.symbols)
    return replace(model, inputs=tuple(merged), data_symbols=data, state=reference.state)


def merge_wrapper_bounds(model: ModelInfo, wrapper_inputs: tuple) -> ModelInfo:
    """Attach the AOTI wrapper's per-dim bounds to the ExportedProgram's tensor specs. Where the
    two disagree on a dtype or a static size, the compiled code is what deploys: its value
    wins, and the disagreement is kept in `contract_conflicts` (a finding, AOT018)."""
    by_index = {w.tensor_index: w for w in wrapper_inputs if w.tensor is not None}
    merged = []
    conflicts: list[str] = []
    for inp in model.inputs:
        w = by_index.get(inp.tensor_index) if inp.tensor is not None else None
        if w is not None and inp.tensor is not None and w.tensor is not None:
            tensor = replace(
                inp.tensor,
                bounds=w.tensor.bounds,
                alignment=w.tensor.alignment,
                alignment_policy=w.tensor.alignment_policy,
            )
            said = []
            if w.tensor.dtype and w.tensor.dtype != tensor.dtype:
                said.append(f"dtype {tensor.dtype}, the compiled code {w.tensor.dtype}")
                tensor = replace(tensor, dtype=w.tensor.dtype)
            if len(w.tensor.shape) == len(tensor.shape):
                shape = list(tensor.shape)
                for d, (mine, theirs) in enumerate(zip(tensor.shape, w.tensor.shape)):
                    if mine.is_static and theirs.is_static and mine.value != theirs.value:
                        said.append(f"dim {d} {mine.value}, the compiled code {theirs.value}")
                        shape[d] = theirs
                tensor = replace(tensor, shape=tuple(shape))
            elif w.tensor.shape:
                said.append(f"rank {len(tensor.shape)}, the compiled code {len(w.tensor.shape)}")
                tensor = replace(tensor, shape=w.tensor.shape, strides=w.tensor.strides)
            if said:
                conflicts.append(f"input '{inp.name}': the ExportedProgram says {'; '.join(said)}")
            inp = replace(inp, tensor=tensor)
        merged.append(inp)
    return replace(model, inputs=tuple(merged), contract_conflicts=tuple(conflicts))


def _read_aoti(archive: Archive, root: str, name: str) -> AotiPart:
    directory = f"{root}/{layout.AOTI_DIR}/{name}/"
    files = [n for n in archive.members if n.startswith(directory)]
    metadata_members = sorted(n for n in files if n.endswith(layout.WRAPPER_METADATA_SUFFIX))
    metadata: dict[str, str] = {}
    unread: tuple[str, str] | None = None
    for member in metadata_members[:1]:
        data, why = _metadata_json(archive, member)
        if why:
            # torch's load_pt2 fails on it and load_package falls back to the C++ loader, which
            # reads the kernel's copy (`<hash>.kernel_metadata.json`): read that one instead
            unread = (member, why)
            kernel = sorted(n for n in files if n.endswith(layout.METADATA_SUFFIX) and n != member)
            data = next((d for d, w in map(partial(_metadata_json, archive), kernel) if not w), {})
        metadata = {str(k): str(v) for k, v in data.items()}
    wrappers = sorted(n for n in files if n.endswith(layout.WRAPPER_CPP_SUFFIX))
    isa = metadata.get("AOTI_CPU_ISA", "")
    shared = tuple(sorted(n for n in files if n.endswith(".so")))
    gpu = tuple(sorted(n for n in files if n.endswith((".cubin", ".fatbin", ".spv"))))
    return AotiPart(
        directory=directory,
        device_type=metadata.get("AOTI_DEVICE_KEY") or None,
        platform=metadata.get("AOTI_PLATFORM") or None,
        machine=metadata.get("AOTI_MACHINE") or None,
        cpu_isa=tuple(isa.split()) if isa else (),
        compute_capability=metadata.get("AOTI_COMPUTE_CAPABILITY") or None,
        metadata=metadata,
        wrapper_cpp=wrappers[0] if wrappers else None,
        shared_objects=shared,
        cubins=gpu,
        weights_on_disk=posixpath.join(directory, layout.AOTI_WEIGHTS_CONFIG) in archive.members,
        binaries=read_binary_facts(archive, shared, gpu),
        build_flags=tuple(
            sorted(n for n in files if n.endswith(("_compile_flags.json", "_linker_flags.json")))
        ),
        weights_blob=next(
            (n for n in sorted(files) if n.endswith(layout.WEIGHTS_BLOB_SUFFIX)), None
        ),
        metadata_unreadable=_unreadable_metadata(archive, files),
        wrapper_metadata_unreadable=unread,
    )


def _metadata_json(archive: Archive, member: str) -> tuple[dict[str, Any], str]:
    """A metadata member as a JSON object, or why torch's JSON parser refuses it (empty, not
    JSON: load_pt2 raises and load_package falls back). A JSON value that is not an object
    raises AOT006 (torch fails on it for good), one over the JSON budget AOT007."""
    if not archive.read(member).strip():
        return {}, "empty"
    try:
        data = _load_json(archive, member)
    except CodedPackageError as exc:
        if getattr(exc, "code", None) != "AOT006":
            raise
        return {}, "not valid JSON"
    if not isinstance(data, dict):
        # parsed, but torch's Python side then fails on it (KeyError 'AOTI_DEVICE_KEY'), with
        # no fallback: the package cannot load
        raise CodedPackageError("AOT006", f"{archive.path}: {member} is not a JSON object")
    return data, ""


def _unreadable_metadata(archive: Archive, files: list[str]) -> tuple[tuple[str, str], ...]:
    """Each `*_metadata.json` of a packaged .cpp, other than the wrapper's (read above), that
    the C++ loader cannot parse into a map of strings: torch 2.13 reads the kernel's
    (`<hash>.kernel_metadata.json`) and fails on an empty one with nlohmann's parse_error.101."""
    out = []
    for member in sorted(files):
        if not member.endswith(layout.METADATA_SUFFIX) or member.endswith(
            layout.WRAPPER_METADATA_SUFFIX
        ):
            continue
        if member[: -len(layout.METADATA_SUFFIX)] + ".cpp" not in files:
            continue
        text = archive.read(member)
        if not text.strip():
            out.append((member, f"empty ({len(text)} bytes)"))
            continue
        try:
            data = json.loads(text)
        except (ValueError, RecursionError):
            out.append((member, "not valid JSON"))
            continue
        if not isinstance(data, dict) or not all(isinstance(v, str) for v in data.values()):
            out.append((member, "not a JSON object of strings"))
    return tuple(out)


def _load_json(archive: Archive, member: str) -> object:
    text = archive.read(member)
    containers = text.count(b"{") + text.count(b"[")
    if containers > MAX_JSON_CONTAINERS:
        raise CodedPackageError(
            "AOT007",
            f"{archive.path}: {member} holds {containers} JSON objects and arrays, more than "
            f"aotipre parses ({MAX_JSON_CONTAINERS})",
        )
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        raise CodedPackageError("AOT006", f"{archive.path}: {member} is not valid JSON") from None
