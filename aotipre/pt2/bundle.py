"""`aotipre bundle`: one .pt2 that carries what checking it needs, loadable unchanged.

The AOTI package's members are copied as they are; the ExportedProgram of the same model (from
`torch.export.save`), the sample inputs and the expected outputs join them under the same root,
where torch's own layout puts them: `models/<model>.json`, `data/weights/`, `data/constants/`,
`data/sample_inputs/<model>.pt`, and `data/aotipre/<model>.expected_outputs.pt` (a folder
torch's loaders do not read). `aoti_load_package` loads the result as it loads the package; `aotipre
check` then compares with the ExportedProgram run eagerly and with the expected outputs, with
no flags. Torch-free: members are streamed, never held whole, and the bundle is written as every
output is (safeio.write_file): next to its destination and renamed into place, so a failure
leaves nothing behind; a device or pipe is written in place, never replaced.
"""

from __future__ import annotations

import contextlib
import os
import zipfile
from dataclasses import dataclass
from typing import BinaryIO

from aotipre.binaries.source import SourceError, open_file
from aotipre.foundation.errors import AotipreError, UsageError
from aotipre.foundation.safeio import ReadPaths, require_file, write_file
from aotipre.inputs.load import load_sample_inputs
from aotipre.pt2 import layout
from aotipre.pt2.archive import Archive
from aotipre.pt2.exported import program_difference
from aotipre.pt2.reader import OpenPackage, open_package
from aotipre.pt2.spec import ModelInfo

EXPECTED_OUTPUTS_FORMAT = layout.EXPECTED_OUTPUTS_FORMAT
"""Not under `extra/`, which torch's loader reads as UTF-8 text: a binary member there makes
`aoti_load_package` raise UnicodeDecodeError (measured on torch 2.13 and 2.14)."""
_EP_DIRS = (f"{layout.MODELS_DIR}/", f"{layout.WEIGHTS_DIR}/", f"{layout.CONSTANTS_DIR}/")
"""The members of a torch.export.save archive that make up its ExportedProgram."""
_ZIP64_FROM = (1 << 31) - 1


@dataclass(frozen=True)
class Bundled:
    """What `write_bundle` wrote."""

    path: str
    model: str
    members: int
    bytes: int
    added: tuple[str, ...]
    """What the bundle adds to the package: `the ExportedProgram of ep.pt2`, `sample inputs`,
    `expected outputs`."""


def write_bundle(
    package: str,
    out: str,
    *,
    exported_program: str | None = None,
    inputs: str | None = None,
    expected: str | None = None,
    model: str | None = None,
) -> Bundled:
    """Write `package` plus an ExportedProgram, sample inputs and expected outputs to `out`.
    Raises UsageError (one line) for anything that does not fit together."""
    require_file(package, f"package {package}", folder_ok=True)
    for flag, path in (
        ("--exported-program", exported_program),
        ("--inputs", inputs),
        ("--expected", expected),
    ):
        if path is not None:
            require_file(path, f"{flag} {path}")
    # by identity and folder containment (a link, a hard link, a file in a folder package)
    clash = ReadPaths().add(package, exported_program, inputs, expected).clash(out)
    if clash is not None:
        raise UsageError(
            f"--output {out}: would overwrite one of the bundle's own sources (it is {clash})"
        )
    if os.path.isdir(out):
        raise UsageError(f"--output {out}: is a directory; name the .pt2 file to write")
    for flag, path in (("--inputs", inputs), ("--expected", expected)):
        if path is not None:
            try:
                load_sample_inputs(path)
            except AotipreError as exc:
                why = str(exc).removeprefix(f"{path}: ")
                raise UsageError(f"{flag} {path}: not a torch.save file ({why})") from None
    with _opened(package, "package") as pkg:
        m = _aoti_model(pkg, model)
        root = pkg.info.root
        copies: list[tuple[Archive, str, str]] = [
            (pkg.archive, name, name) for name in pkg.archive.names()
        ]
        added: list[str] = []
        with contextlib.ExitStack() as stack:
            if exported_program is not None:
                ep = stack.enter_context(_opened(exported_program, "--exported-program"))
                copies += _ep_members(pkg, m, ep, exported_program)
                added.append(f"the ExportedProgram of {exported_program}")
            elif not m.has_exported_program:
                raise UsageError(
                    f"{package}: model '{m.name}' has AOTI code only; pass --exported-program "
                    "FILE (torch.export.save of the same model)"
                )
            extra: dict[str, str] = {}
            if inputs is not None:
                extra[f"{root}/{layout.SAMPLE_INPUTS_DIR}/{m.name}.pt"] = inputs
                added.append(f"sample inputs from {inputs}")
            elif not _has_sample(copies, root, m.name):
                raise UsageError(
                    f"no sample inputs for model '{m.name}' in {package}"
                    + (f" or {exported_program}" if exported_program else "")
                    + ": pass --inputs FILE"
                )
            if expected is not None:
                extra[f"{root}/{EXPECTED_OUTPUTS_FORMAT.format(model=m.name)}"] = expected
                added.append(f"expected outputs from {expected}")
            copies = [c for c in copies if c[2] not in extra]
            total = _write(out, copies, extra)
    return Bundled(os.path.abspath(out), m.name, len(copies) + len(extra), total, tuple(added))


@contextlib.contextmanager
def _opened(path: str, flag: str):  # type: ignore[no-untyped-def]
    try:
        opened = open_package(path)
    except AotipreError as exc:
        raise UsageError(f"{flag} {path}: {exc}") from None
    with opened.archive:
        yield opened


def _aoti_model(pkg: OpenPackage, name: str | None) -> ModelInfo:
    models = pkg.info.models
    if name is not None:
        m = pkg.info.model(name)
        if m is None:
            names = ", ".join(x.name for x in models)
            raise UsageError(f"{pkg.info.path}: no model '{name}' (it holds: {names})")
    else:
        compiled = [x for x in models if x.has_aoti]
        if not compiled:
            raise UsageError(
                f"{pkg.info.path}: has no AOTI code (compile it with "
                "torch._inductor.aoti_compile_and_package first)"
            )
        if len(compiled) != 1:
            names = ", ".join(x.name for x in compiled) or "none"
            raise UsageError(
                f"{pkg.info.path}: a bundle is made for one compiled model and this package "
                f"holds {len(compiled)} ({names}): pass --model NAME"
            )
        m = compiled[0]
    if not m.has_aoti:
        raise UsageError(
            f"{pkg.info.path}: model '{m.name}' has no AOTI code (compile it with "
            "torch._inductor.aoti_compile_and_package first)"
        )
    return m


def _ep_members(
    pkg: OpenPackage, m: ModelInfo, ep: OpenPackage, ep_path: str
) -> list[tuple[Archive, str, str]]:
    """The ExportedProgram's members of `ep`, renamed into the package's root and model name."""
    if m.has_exported_program:
        raise UsageError(
            f"{pkg.info.path}: model '{m.name}' already holds its ExportedProgram; leave out "
            "--exported-program"
        )
    if any(x.has_exported_program for x in pkg.info.models):
        raise UsageError(
            f"{pkg.info.path}: another model already holds an ExportedProgram, whose weight "
            "members a second one would share names with; bundle a single-model package"
        )
    if ep.info.archive_version != pkg.info.archive_version:
        raise UsageError(
            f"--exported-program {ep_path}: archive_version {ep.info.archive_version} differs "
            f"from the package's {pkg.info.archive_version} (written by another torch): save "
            "both with the torch that compiled the package"
        )
    eps = [x for x in ep.info.models if x.has_exported_program]
    src = next((x for x in eps if x.name == m.name), eps[0] if len(eps) == 1 else None)
    if src is None:
        names = ", ".join(x.name for x in eps) or "none"
        raise UsageError(
            f"--exported-program {ep_path}: no ExportedProgram for model '{m.name}' (it holds: "
            f"{names})"
        )
    differs = program_difference(m, src)
    if differs is not None:
        raise UsageError(
            f"--exported-program {ep_path}: not the program model '{m.name}' was compiled from "
            f"({differs}); bundle the ExportedProgram of the same model"
        )
    old, new = f"{ep.info.root}/", f"{pkg.info.root}/"
    renames = {
        f"{layout.MODELS_DIR}/{src.name}.json": f"{layout.MODELS_DIR}/{m.name}.json",
        f"{layout.WEIGHTS_DIR}/{src.name}_weights_config.json": (
            f"{layout.WEIGHTS_DIR}/{m.name}_weights_config.json"
        ),
        f"{layout.CONSTANTS_DIR}/{src.name}_constants_config.json": (
            f"{layout.CONSTANTS_DIR}/{m.name}_constants_config.json"
        ),
    }
    out = []
    taken = set(pkg.archive.names())
    for name in ep.archive.names():
        rel = name.removeprefix(old)
        if not rel.startswith(_EP_DIRS):
            continue
        if rel.startswith(f"{layout.MODELS_DIR}/") and rel not in renames:
            continue  # another model's program
        target = new + renames.get(rel, rel)
        if target in taken:
            raise UsageError(f"--exported-program {ep_path}: {rel} is already in the package")
        out.append((ep.archive, name, target))
    sample = f"{old}{layout.SAMPLE_INPUTS_DIR}/{src.name}.pt"
    if sample in ep.archive.members:
        out.append((ep.archive, sample, f"{new}{layout.SAMPLE_INPUTS_DIR}/{m.name}.pt"))
    return out


def _has_sample(copies: list[tuple[Archive, str, str]], root: str, model: str) -> bool:
    wanted = {
        f"{root}/{layout.SAMPLE_INPUTS_DIR}/{model}.pt",
        f"{root}/{layout.EXTRA_DIR}/{model}{layout.TS_SAMPLE_INPUTS_SUFFIX}",
    }
    return any(target in wanted for _, _, target in copies)


def _write(out: str, copies: list[tuple[Archive, str, str]], files: dict[str, str]) -> int:
    """Stream the members and files into a stored (uncompressed, as torch writes) zip, written
    as every output is (safeio.write_file: next to `out`, then renamed into place; a device or
    pipe in place, never replaced). Returns the bytes written."""

    def produce(fh: BinaryIO) -> None:
        with zipfile.ZipFile(fh, "w", zipfile.ZIP_STORED) as zf:
            for archive, name, target in copies:  # a zip's members or an extracted folder's
                size = archive.members[name].size
                with zf.open(_info(target), "w", force_zip64=size > _ZIP64_FROM) as dst:
                    for chunk in archive.chunks(name):
                        dst.write(chunk)
            for target, path in files.items():
                try:  # regular-file checked, never blocks on a FIFO swapped in
                    with open_file(path) as src:
                        force = src.size > _ZIP64_FROM
                        with zf.open(_info(target), "w", force_zip64=force) as dst:
                            for offset in range(0, src.size, 1 << 20):
                                dst.write(src.read(offset, min(1 << 20, src.size - offset)))
                except SourceError as exc:
                    raise UsageError(f"cannot read {path}: {exc}") from None

    return write_file(out, produce, subject=f"--output {out}")


def _info(name: str) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
    info.compress_type = zipfile.ZIP_STORED
    return info
