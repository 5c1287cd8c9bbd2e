"""Loading in the worker: archive members (a .pt2 or an extracted folder), the ExportedProgram
without its AOTI code, the compiled model the way torch's loaders do it, fresh copies whose
constants can be read or swapped, weights files, and torch's CPU-ISA probe (read and pinned)."""

from __future__ import annotations

import contextlib
import functools
import importlib
import importlib.abc
import importlib.util
import inspect
import json
import math
import os
import shutil
import struct
import sys
import tempfile
import zipfile
from collections.abc import Callable, Iterator
from typing import Any

import torch
import torch.utils._pytree as pytree

from .protocol import StepError


def device_index(device: str) -> int:
    if ":" in device:
        return int(device.split(":", 1)[1])
    return -1


# Packages given as an extracted folder (torch 2.13's C++ loader and 2.15's load_package take
# one; aotipre.pt2.archive.FolderArchive reads it): members are `<root>/<path>` inside the
# folder, or the folder is the root itself.


def member_file(package: str, member: str) -> str:
    inside = os.path.join(package, member)
    if os.path.isfile(inside):
        return inside
    return os.path.join(package, member.split("/", 1)[1] if "/" in member else member)


def read_member(package: str, member: str) -> bytes:
    if os.path.isdir(package):
        with open(member_file(package, member), "rb") as f:
            return f.read()
    with zipfile.ZipFile(package) as zf:
        return zf.read(member)


def as_archive(path: str, workdir: str) -> str:
    """A .pt2 file for `path`: itself, or (an extracted folder) a zip of it written once into
    `workdir`, for the readers that take only a zip (the ExportedProgram loader)."""
    if not os.path.isdir(path):
        return path
    root = path if os.path.isfile(os.path.join(path, "archive_format")) else None
    if root is None:
        subs = [
            d
            for d in sorted(os.listdir(path))
            if os.path.isfile(os.path.join(path, d, "archive_format"))
        ]
        if len(subs) != 1:
            raise StepError(f"{path} is a folder, but not an extracted .pt2 package")
        root = os.path.join(path, subs[0])
    out = os.path.join(workdir, f"{os.path.basename(root)}.pt2")
    if not os.path.isfile(out):
        tmp = f"{out}.tmp"
        with zipfile.ZipFile(tmp, "w", zipfile.ZIP_STORED) as zf:
            for folder, _dirs, files in os.walk(root):
                for name in sorted(files):
                    full = os.path.join(folder, name)
                    rel = os.path.relpath(full, os.path.dirname(root)).replace(os.sep, "/")
                    # a fixed date: unzip restores torch's 1980-or-older timestamps, which
                    # ZipFile.write refuses; streamed, so large weights are not held in memory
                    with open(full, "rb") as src, zf.open(zipfile.ZipInfo(rel), "w") as dst:
                        shutil.copyfileobj(src, dst, 1 << 20)
        os.replace(tmp, out)
    return out


def _so_names(package: str, model: str) -> set[str]:
    with contextlib.suppress(Exception), zipfile.ZipFile(package) as zf:
        marker = f"/data/aotinductor/{model}/"
        return {
            os.path.basename(n) for n in zf.namelist() if marker in f"/{n}" and n.endswith(".so")
        }
    return set()


def load_exported_program(path: str, name: str) -> Any:
    """Deserialize one ExportedProgram from the archive without loading any AOTI code.

    torch.export.load goes through load_pt2, which dlopens every AOTI .so in the archive first;
    here only `models/<name>.json` and its weights are read (private API of torch 2.11-2.13,
    with a fallback to torch.export.load on a copy of the archive without the AOTI members).
    """
    try:
        from torch.export.pt2_archive import _package as pk
        from torch.export.pt2_archive.constants import MODELS_FILENAME_FORMAT

        reader_cls = pk.PT2ArchiveReader
        load_eps = pk._load_exported_programs
    except (ImportError, AttributeError):
        return _load_ep_from_copy(path, name)
    try:
        with reader_cls(path) as reader:
            eps = load_eps(reader, [MODELS_FILENAME_FORMAT.format(name)], None)
    except TypeError:  # the private signature changed: use the public loader on a copy
        return _load_ep_from_copy(path, name)
    if name not in eps:
        raise RuntimeError(f"no ExportedProgram named {name!r} in {path}")
    return eps[name]


def _load_ep_from_copy(path: str, name: str) -> Any:
    import tempfile

    if name != "model":
        raise RuntimeError(
            f"this torch can load only the ExportedProgram named 'model' without its AOTI code "
            f"(asked for {name!r})"
        )
    with zipfile.ZipFile(path) as src, tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "ep_only.pt2")
        with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as dst:
            for info in src.infolist():
                if "/data/aotinductor/" in info.filename:
                    continue
                dst.writestr(info, src.read(info))
        return torch.export.load(out)


def load_package_like_torch(
    path: str, model: str, index: int, want_ep: bool
) -> tuple[Any, Any, str]:
    """What torch._inductor.package.load_package does, keeping the ExportedProgram it loads.

    load_package calls load_pt2 (which also deserializes the archive's ExportedPrograms and
    loads every model's AOTI code), and on a RuntimeError falls back to
    AOTIModelPackageLoader(path, model, ...). Returns (runner, exported program or None, how).
    """
    from torch._inductor.package import load_package

    def public() -> tuple[Any, Any, str]:
        return load_package(path, model_name=model, device_index=index), None, "load_package"

    try:
        from torch.export.pt2_archive._package import AOTICompiledModel, load_pt2
    except ImportError:
        return public()
    if not want_ep or "device_index" not in inspect.signature(load_pt2).parameters:
        return public()
    try:
        contents = load_pt2(path, device_index=index)
        if model not in contents.aoti_runners:
            raise RuntimeError(f"Model {model} not found in package")
        ep = contents.exported_programs.get(model)
        return contents.aoti_runners[model], ep, "load_pt2"
    except RuntimeError:
        try:
            loader = torch._C._aoti.AOTIModelPackageLoader(path, model, False, 1, index)
        except TypeError:  # another constructor signature: let torch's own fallback decide
            return public()
        return AOTICompiledModel(loader), None, "AOTIModelPackageLoader"


@contextlib.contextmanager
def load_pt2_failures(failures: list[str]) -> Iterator[None]:
    """Add to `failures` what torch's load_pt2 raises while loading: load_package swallows it,
    logs only "Loading outdated pt2 file" and falls back to the C++ AOTIModelPackageLoader (as
    load_package_like_torch does), so the reason would be lost. Only modules already imported
    are watched: importing them here would hide the loader's import cost from measure_load."""
    modules = []
    for name in ("torch._inductor.package.package", "torch.export.pt2_archive._package"):
        module = sys.modules.get(name)
        if module is not None and callable(getattr(module, "load_pt2", None)):
            modules.append((module, module.load_pt2))

    def watched(original: Any) -> Any:
        @functools.wraps(original)
        def load_pt2(*args: Any, **kwargs: Any) -> Any:
            try:
                return original(*args, **kwargs)
            except RuntimeError as exc:
                failures.append(f"{type(exc).__name__}: {str(exc).strip()[:500]}")
                raise

        return load_pt2

    for module, original in modules:
        module.load_pt2 = watched(original)  # type: ignore[attr-defined]
    try:
        yield
    finally:
        for module, original in modules:
            module.load_pt2 = original  # type: ignore[attr-defined]


def mapped_shared_objects(names: set[str]) -> list[str] | None:
    """The files named `names` mapped into this process (/proc/self/maps): the proof that the
    loaded code is the package's .so; None where the map cannot be read."""
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    found: dict[str, None] = {}
    for line in lines:
        parts = line.split(None, 5)
        if len(parts) == 6 and os.path.basename(parts[5].strip()) in names:
            found.setdefault(parts[5].strip(), None)
    return list(found)


class StateRunner:
    """A fresh copy of a compiled model whose constants can be read after each call: the
    model's .so run by torch's container runner (what AOTIModelPackageLoader wraps), so
    extract_constants_map shows the buffers as the compiled code left them."""

    def __init__(self, package: str, model: str, device: str, workdir: str) -> None:
        folder = tempfile.mkdtemp(prefix="state-", dir=workdir)
        prefix = None
        with zipfile.ZipFile(package) as zf:
            for info in zf.infolist():
                parts = info.filename.split("/")
                if len(parts) > 4 and parts[1:4] == ["data", "aotinductor", model]:
                    prefix = "/".join(parts[:4]) + "/"
                    if not info.is_dir():
                        target = os.path.join(folder, *parts[4:])
                        os.makedirs(os.path.dirname(target), exist_ok=True)
                        with zf.open(info) as src, open(target, "wb") as dst:
                            shutil.copyfileobj(src, dst, 1 << 20)
        sos = [f for f in os.listdir(folder) if f.endswith(".so")] if prefix else []
        if len(sos) != 1:
            raise StepError(f"expected one .so for model {model!r}, found {len(sos)}")
        so = os.path.join(folder, sos[0])
        if device.startswith("cuda"):
            self.runner = torch._C._aoti.AOTIModelContainerRunnerCuda(so, 1, device, folder)
        else:
            self.runner = torch._C._aoti.AOTIModelContainerRunnerCpu(so, 1)  # type: ignore[assignment]
        self.fqns = dict(self.runner.get_constant_names_to_original_fqns())

    def __call__(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[Any]:
        flat = [x for x in pytree.tree_leaves((args, kwargs)) if isinstance(x, torch.Tensor)]
        return list(self.runner.run(flat))

    def buffers(self, names: list[str]) -> dict[str, Any]:
        live = self.runner.extract_constants_map(False)
        by_fqn = {self.fqns.get(k) or k: v for k, v in live.items()}
        return {n: by_fqn[n].detach().cpu().clone() for n in names if n in by_fqn}


class DirectModel:
    """What torch's AOTICompiledModel does around the C++ loader, without importing its module
    (torch.export.pt2_archive._package pulls in torch._dynamo and torch._export: seconds)."""

    def __init__(self, loader: Any) -> None:
        self.loader = loader

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        from torch.export._tree_utils import reorder_kwargs

        in_text, out_text = self.loader.get_call_spec()[:2]
        in_spec = pytree.treespec_loads(in_text)
        flat = pytree.tree_flatten((args, reorder_kwargs(kwargs, in_spec)))[0]
        outputs = self.loader.boxed_run([x for x in flat if isinstance(x, torch.Tensor)])
        return pytree.tree_unflatten(outputs, pytree.treespec_loads(out_text))

    def get_metadata(self) -> dict[str, str]:
        return dict(self.loader.get_metadata())

    def get_constant_fqns(self) -> list[str]:
        return list(self.loader.get_constant_fqns())


SAFETENSORS_TORCH_DTYPES = {
    "BOOL": "bool",
    "U8": "uint8",
    "I8": "int8",
    "U16": "uint16",
    "I16": "int16",
    "F16": "float16",
    "BF16": "bfloat16",
    "U32": "uint32",
    "I32": "int32",
    "F32": "float32",
    "U64": "uint64",
    "I64": "int64",
    "F64": "float64",
    "C64": "complex64",
    "F8_E4M3": "float8_e4m3fn",
    "F8_E5M2": "float8_e5m2",
    "F8_E8M0": "float8_e8m0fnu",
}
"""safetensors dtype tags (aotipre/inputs/weights.py checked the header before any worker)."""
SAFETENSORS_MAX_HEADER = 100_000_000
"""The safetensors library's limit on the header (its `MAX_HEADER_SIZE`)."""


def read_weights_file(path: str, fmt: str, device: str) -> dict[str, Any]:
    """A weights file's tensors by name, on `device`: a torch.save state_dict (weights_only)
    or a safetensors file (read here: the header aotipre validated, then each tensor's bytes)."""
    if fmt != "safetensors":
        obj = torch.load(path, weights_only=True, map_location=device)
        if not isinstance(obj, dict):
            raise StepError(f"{path} does not hold a dict of tensors")
        return {str(k): v for k, v in obj.items() if isinstance(v, torch.Tensor)}
    out: dict[str, Any] = {}
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        (n,) = struct.unpack("<Q", f.read(8).ljust(8, b"\xff"))
        if n > SAFETENSORS_MAX_HEADER or 8 + n > size:
            raise StepError(f"{path}: its safetensors header declares {n} bytes of {size}")
        header = json.loads(f.read(n))
        base = 8 + n
        # safetensors' own layout rules (aotipre/inputs/weights.py checked them before any
        # worker; checked again for a file changed since): in the order of their offsets the
        # tensors tile the data section, each span its bytes, so at most the file is read
        ordered = sorted(
            (
                (spec["data_offsets"], name, spec)
                for name, spec in header.items()
                if name != "__metadata__"
            ),
            key=lambda item: item[0],
        )
        start = 0
        for (begin, end), name, spec in ordered:
            dtype = getattr(torch, SAFETENSORS_TORCH_DTYPES[spec["dtype"]])
            numel = math.prod(spec["shape"])
            if begin != start or end - begin != numel * dtype.itemsize:
                raise StepError(
                    f"{path}: tensor {name[:200]!r} at data_offsets [{begin}, {end}] does not "
                    f"follow the one before it (ending at {start}) or is not {numel} x {dtype}: "
                    "safetensors refuses the file"
                )
            start = end
        if base + start != size:
            raise StepError(f"{path}: its tensors do not end at the end of the file")
        for (begin, end), name, spec in ordered:
            f.seek(base + begin)
            data = bytearray(f.read(end - begin))
            dtype = getattr(torch, SAFETENSORS_TORCH_DTYPES[spec["dtype"]])
            flat = torch.frombuffer(data, dtype=dtype) if data else torch.empty(0, dtype=dtype)
            out[name] = flat.reshape(spec["shape"]).to(device)
    return out


def load_direct(path: str, model: str, index: int) -> DirectModel:
    """The C++ AOTIModelPackageLoader alone: what load_package does after load_pt2's CPU-ISA
    probe (`get_device_information`), whose result only feeds a mismatch warning for a package
    that is already compiled. For crash triage's re-runs, not for measuring a deployment."""
    return DirectModel(torch._C._aoti.AOTIModelPackageLoader(path, model, False, 1, index))


def same_as_load_package(path: str, model: str) -> str | None:
    """Why torch's Python loader would do more with this package than the C++ loader alone, or
    None: it would do nothing else.

    aoti_load_package -> load_pt2 reads the archive version (a mismatch raises ValueError),
    deserializes every `models/*.json` ExportedProgram, reads every `extra/` file, reads the
    model's metadata (`AOTI_DEVICE_KEY`, else KeyError), runs the CPU-ISA probe (the host's,
    whose answer only feeds a mismatch warning for compiled code) and constructs an
    AOTIModelPackageLoader for every compiled model; any RuntimeError falls back to the C++
    loader. For a .pt2 file of the current version with one compiled model and neither
    ExportedPrograms nor extra files, what remains is the probe and that one C++ loader: the
    load that `load_direct` does."""
    constants = getattr(getattr(torch._C, "_export", None), "pt2_archive_constants", None)
    loader: Any = getattr(torch._C._aoti, "AOTIModelPackageLoader", None)
    if constants is None or not hasattr(loader, "load_metadata_from_package"):
        return "this torch does not expose the archive's constants or the metadata reader"
    if not path.endswith(".pt2") or not os.path.isfile(path):
        return "not a .pt2 file"
    try:
        with zipfile.ZipFile(path) as zf:
            names = [n.split("/", 1)[1] for n in zf.namelist() if "/" in n]
            root = zf.namelist()[0].split("/", 1)[0] if zf.namelist() else ""
            version = zf.read(f"{root}/{constants.ARCHIVE_VERSION_PATH}").decode().strip()
    except (OSError, KeyError, ValueError, zipfile.BadZipFile) as exc:
        return f"the archive could not be read the way load_pt2 reads it: {exc}"
    if version != constants.ARCHIVE_VERSION_VALUE:
        return f"archive version {version!r}"
    if any(n.startswith((constants.MODELS_DIR, constants.EXTRA_DIR)) for n in names):
        return "it holds ExportedPrograms or extra files, which load_pt2 reads"
    compiled = {
        n[len(constants.AOTINDUCTOR_DIR) :].split("/", 1)[0]
        for n in names
        if n.startswith(constants.AOTINDUCTOR_DIR) and "/" in n[len(constants.AOTINDUCTOR_DIR) :]
    }
    if compiled != {model}:
        return f"compiled models {sorted(compiled)}, load_pt2 loads each"
    try:
        metadata = loader.load_metadata_from_package(path, model)
    except Exception as exc:
        return f"its metadata could not be read: {exc}"
    if "AOTI_DEVICE_KEY" not in metadata:
        return "its metadata has no AOTI_DEVICE_KEY"
    return None


def probed_vec_isa() -> list[str] | None:
    """The CPU ISAs torch's probe found usable in this process (valid_vec_isa_list, which torch
    caches), by class name, or None when nothing here has run the probe (nor imported it)."""
    isa = sys.modules.get("torch._inductor.cpu_vec_isa")
    if isa is None:
        return None
    probe = getattr(isa, "valid_vec_isa_list", None)
    info = getattr(probe, "cache_info", None)
    if probe is None or info is None or not info().currsize:
        return None
    return [type(v).__name__ for v in probe()]


def pin_vec_isa_on_import(names: list[str], pinned: Callable[[bool], None]) -> None:
    """pin_vec_isa as soon as torch's probe module is imported (now, if it is), not before:
    importing it imports torch._inductor (over a second), which a load through the C++ loader
    alone never needs. `pinned` gets pin_vec_isa's answer."""
    if VEC_ISA_MODULE in sys.modules:
        pinned(pin_vec_isa(names))
        return

    class PinOnImport(importlib.abc.MetaPathFinder):
        def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
            if name != VEC_ISA_MODULE:
                return None
            sys.meta_path.remove(self)
            spec = importlib.util.find_spec(name)
            loader = getattr(spec, "loader", None)
            if loader is None or not hasattr(loader, "exec_module"):
                return spec
            original = loader.exec_module

            def exec_module(module: Any) -> None:
                original(module)
                pinned(pin_vec_isa(names))

            loader.exec_module = exec_module
            return spec

    sys.meta_path.insert(0, PinOnImport())


VEC_ISA_MODULE = "torch._inductor.cpu_vec_isa"


def pin_vec_isa(names: list[str]) -> bool:
    """Answer torch's CPU-ISA probe with what an earlier worker of the same check probed on this
    host, with this torch and compiler: on x86 a compile and a child-process dlopen per ISA, 3 s
    on a 2-core VM and 45-50 s on the GPU test machine, for the same answer (elsewhere torch runs
    no probe, and nothing is pinned). pick_vec_isa (code generation, AOTI_CPU_ISA) reads the
    module's function, so the choice among them is torch's own."""
    import platform

    isa: Any = sys.modules.get(VEC_ISA_MODULE) or importlib.import_module(VEC_ISA_MODULE)

    supported = getattr(isa, "supported_vec_isa_list", None)
    if platform.machine() not in ("x86_64", "AMD64") or supported is None:
        return False
    if not hasattr(isa, "valid_vec_isa_list"):
        return False
    chosen = [v for v in supported if type(v).__name__ in names]
    if len(chosen) != len(set(names)):
        return False  # a name this torch does not know, or twice: let it probe

    @functools.cache
    def valid_vec_isa_list() -> list[Any]:
        return list(chosen)

    isa.valid_vec_isa_list = valid_vec_isa_list
    return True
