"""`aotipre bundle`: one .pt2 that carries what checking it needs, loadable unchanged.

The AOTI package's members are copied as they are; the ExportedProgram of the same model (from
`torch.export.save`), the sample inputs and the expected outputs join them under the same root,
where torch's own layout puts them: `models/<model>.json`, `data/weights/`, `data/constants/`,
`data/sample_inputs/<model>.pt`, and `data/aotipre/<model>.expected_outputs.pt` (a folder
torch's loaders do not read). `aoti_load_package` loads the result as it loads the package; `aotipre
check` then compares with the ExportedProgram run eagerly and with the expected outputs, with
no flags. Torch-free: members are streamed, never held whole, and the bundle is written next to
its destination and renamed into place, so a failure leaves nothing behind.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import zipfile
from dataclasses import dataclass

from aotipre.errors import AotipreError, UsageError
from aotipre.inputs.load import load_sample_inputs
from aotipre.pt2 import layout
from aotipre.pt2.archive import Archive
from aotipre.pt2.reader import OpenPackage, open_package
from aotipre.pt2.spec import ModelInfo
from aotipre.safeio import require_file

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
    if not os.path.exists(package):
        raise UsageError(f"package {package}: no such file or folder")
    for flag, path in (
        ("--exported-program", exported_program),
        ("--inputs", inputs),
        ("--expected", expected),
    ):
        if path is not None:
            require_file(path, f"{flag} {path}")
    if os.path.abspath(out) in {
        os.path.abspath(p) for p in (package, exported_program, inputs, expected) if p
    }:
        raise UsageError(f"--output {out}: would overwrite one of the bundle's own sources")
    if os.path.isdir(out):
        raise UsageError(f"--output {out}: is a directory; name the .pt2 file to write")
    if os.path.lexists(out) and not os.path.islink(out) and not os.path.isfile(out):
        raise UsageError(
            f"--output {out}: is not a regular file (a device or pipe); the bundle would replace it"
        )
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
    differs = _signature_difference(m, src)
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
    """Stream the members and files into a stored (uncompressed, as torch writes) zip next to
    `out`, then rename it into place. Returns the bytes written."""
    folder = os.path.dirname(os.path.abspath(out))
    if not os.path.isdir(folder):
        raise UsageError(f"--output {out}: no such folder {folder}")
    fd, tmp = tempfile.mkstemp(prefix=".aotipre-bundle-", suffix=".pt2", dir=folder)
    try:
        with os.fdopen(fd, "wb") as fh, zipfile.ZipFile(fh, "w", zipfile.ZIP_STORED) as zf:
            for archive, name, target in copies:  # a zip's members or an extracted folder's
                size = archive.members[name].size
                with zf.open(_info(target), "w", force_zip64=size > _ZIP64_FROM) as dst:
                    for chunk in archive.chunks(name):
                        dst.write(chunk)
            for target, path in files.items():
                size = os.path.getsize(path)
                with (
                    open(path, "rb") as src,
                    zf.open(_info(target), "w", force_zip64=size > _ZIP64_FROM) as dst,
                ):
                    while chunk := src.read(1 << 20):
                        dst.write(chunk)
        os.replace(tmp, out)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return os.path.getsize(out)


def _info(name: str) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
    info.compress_type = zipfile.ZIP_STORED
    return info


def _signature_difference(aoti: ModelInfo, ep: ModelInfo) -> str | None:
    """How the ExportedProgram's tensor inputs differ from those the AOTI code takes (its
    wrapper's contract): count, dtype, rank. None when they agree, or when the AOTI code's
    contract is unknown (no wrapper.cpp to read it from)."""
    want, got = aoti.tensor_inputs, ep.tensor_inputs
    if not want:
        return None
    if len(want) != len(got):
        return f"{len(got)} tensor input(s), the AOTI code takes {len(want)}"
    for i, (w, g) in enumerate(zip(want, got)):
        assert w.tensor is not None and g.tensor is not None
        if w.tensor.dtype != g.tensor.dtype:
            return f"tensor input {i} is {g.tensor.dtype}, the AOTI code takes {w.tensor.dtype}"
        if len(w.tensor.shape) != len(g.tensor.shape):
            return (
                f"tensor input {i} has {len(g.tensor.shape)} dims, the AOTI code takes "
                f"{len(w.tensor.shape)}"
            )
    return None
