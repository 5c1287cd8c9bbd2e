"""The torch worker: a child process running compile, load, run, compare, probe and perf steps
(the load timed part by part, run latency and memory: see the Performance section).

One file on purpose (longer than the ~600 lines of the other modules): it is run by path in
whatever interpreter `--python` names (a serving venv without aotipre installed), so it imports
torch and the standard library only, never the aotipre package; the parent's code and state
cannot leak into the process that loads compiled code.
"""

from __future__ import annotations

import ast
import contextlib
import faulthandler
import functools
import gc
import inspect
import io
import json
import math
import os
import re
import shutil
import struct
import sys
import tempfile
import time
import traceback
import zipfile
from collections.abc import Iterator
from typing import Any

import torch
import torch.utils._pytree as pytree

# This is the only module of aotipre that imports torch. It is run as a script,
# `python worker.py JOB.json`, never imported by the parent: it uses the standard library and
# torch only, so it does not even import the aotipre package.
#
# Protocol (version 1):
# - The job is a JSON object: the package, the model, the device, where the inputs come from,
#   per-step time limits, and an ordered list of steps `{"id", "op", ...}`.
# - The result goes to `$AOTIPRE_RESULT_PATH` as a JSON object, rewritten atomically when the
#   worker starts, when each step starts (`current`: the step id and its log file) and when each
#   step ends (`steps[id]`). After a crash, the parent therefore knows which steps finished and
#   which one was running.
# - Each step's stderr (file descriptor 2, so C++ and faulthandler output too) goes to its own
#   log file under the job's workdir, then is copied to the real stderr. The parent reads the
#   log of the step that was running when the process died.
# - A step that fails with a Python exception is recorded as an error and the worker goes on;
#   it exits 0 once every step was attempted. Anything else (a signal, the per-step watchdog
#   `faulthandler.dump_traceback_later(..., exit=True)`, a non-zero exit) is the parent's to
#   classify.
# - Outputs are saved with torch.save under the workdir, so a later worker can compare them.

PROTOCOL = 1
CHECK_INPUTS_ENV = "AOTI_RUNTIME_CHECK_INPUTS"
LOG_TAIL_BYTES = 24 * 1024
MARKER = "@@aotipre"
"""Prefix of the progress lines written to the real stderr: `@@aotipre start <step id>`."""

# Default comparison tolerances (rtol, atol) by dtype: looser than torch.testing's, because a
# compiled program legitimately reorders float reductions and fuses ops.
TOLERANCES: dict[str, tuple[float, float]] = {
    "float64": (1e-5, 1e-7),
    "complex128": (1e-5, 1e-7),
    "float32": (1e-4, 1e-5),
    "complex64": (1e-4, 1e-5),
    "float16": (1e-2, 1e-3),
    "bfloat16": (5e-2, 1e-2),
    "float8_e4m3fn": (0.125, 0.0625),
    "float8_e5m2": (0.25, 0.125),
    "float8_e4m3fnuz": (0.125, 0.0625),
    "float8_e5m2fnuz": (0.25, 0.125),
}


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


# --------------------------------------------------------------------------------------------
# Result file and stderr capture


class Recorder:
    """Keeps the result object and rewrites the result file atomically at every change."""

    def __init__(self, path: str | None) -> None:
        self.path = path
        self.data: dict[str, Any] = {
            "protocol": PROTOCOL,
            "pid": os.getpid(),
            "torch_version": torch.__version__,
            "cuda_available": None,
            "current": None,
            "done": False,
            "stopped": None,
            "steps": {},
        }

    def flush(self) -> None:
        if not self.path:
            return
        tmp = f"{self.path}.tmp"
        with open(tmp, "w") as f:
            json.dump(self.data, f, default=str)
        os.replace(tmp, self.path)


class StepLog:
    """Redirects file descriptor 2 into a per-step log file, then copies it to the real stderr."""

    def __init__(self, path: str, real_fd: int, stdout: bool = False) -> None:
        self.path = path
        self.real_fd = real_fd
        self.text = ""
        self.stdout = stdout
        """Also redirect file descriptor 1 (crash triage: the intermediate value printer
        writes to stdout; both streams share one file offset, so their lines interleave)."""
        self.saved_stdout: int | None = None

    def __enter__(self) -> StepLog:
        sys.stderr.flush()
        self.file = open(self.path, "w+b")  # noqa: SIM115 - closed in __exit__
        if self.stdout:
            sys.stdout.flush()
            self.saved_stdout = os.dup(1)
            os.dup2(self.file.fileno(), 1)
        os.dup2(self.file.fileno(), 2)
        return self

    def __exit__(self, *exc: object) -> None:
        with contextlib.suppress(Exception):
            sys.stderr.flush()
        if self.saved_stdout is not None:
            with contextlib.suppress(Exception):
                sys.stdout.flush()
            _flush_c_stdio()
            os.dup2(self.saved_stdout, 1)
            os.close(self.saved_stdout)
            self.saved_stdout = None
        os.dup2(self.real_fd, 2)
        size = self.file.seek(0, os.SEEK_END)
        self.file.seek(max(0, size - LOG_TAIL_BYTES))
        data = self.file.read()
        self.file.close()
        with contextlib.suppress(OSError):
            os.write(self.real_fd, data)
        self.text = data.decode("utf-8", errors="replace")


def _flush_c_stdio() -> None:
    """fflush(NULL): C stdio buffers (the printer's printf) are not Python's."""
    with contextlib.suppress(Exception):
        import ctypes

        ctypes.CDLL(None).fflush(None)


def _unbuffer_c_stdout() -> None:
    """Make C stdout unbuffered, so printer lines reach the log before a crash (glibc)."""
    with contextlib.suppress(Exception):
        import ctypes

        libc = ctypes.CDLL(None)
        libc.setvbuf(ctypes.c_void_p.in_dll(libc, "stdout"), None, 2, 0)  # _IONBF


def exception_info(exc: BaseException) -> dict[str, Any]:
    tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    return {
        "type": type(exc).__name__,
        "message": str(exc)[:20000],
        "traceback": tb[-8000:],
    }


# --------------------------------------------------------------------------------------------
# Inputs


def normalize_inputs(obj: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The `(args, kwargs)` convention of torch.export's sample inputs (see aotipre.inputs)."""
    if isinstance(obj, (tuple, list)):
        if (
            len(obj) == 2
            and isinstance(obj[0], (tuple, list))
            and isinstance(obj[1], dict)
            and all(isinstance(k, str) for k in obj[1])
        ):
            return tuple(obj[0]), dict(obj[1])
        return tuple(obj), {}
    if isinstance(obj, dict) and all(isinstance(k, str) for k in obj):
        return (), dict(obj)
    return (obj,), {}


def load_inputs(spec: dict[str, Any], package: str) -> tuple[tuple[Any, ...], dict[str, Any]]:
    kind = spec.get("kind")
    if kind == "file":
        obj = torch.load(spec["path"], weights_only=True, map_location="cpu")
    elif kind == "member":
        obj = torch.load(
            io.BytesIO(read_member(package, spec["member"])), weights_only=True, map_location="cpu"
        )
    elif kind == "synth":
        gen = torch.Generator().manual_seed(int(spec.get("seed", 0)))
        tree = spec["tree"]
        args = tuple(synth_node(n, gen) for n in tree.get("args", []))
        kwargs = {k: synth_node(n, gen) for k, n in tree.get("kwargs", {}).items()}
        return args, kwargs
    else:
        raise ValueError(f"unknown inputs kind {kind!r}")
    return normalize_inputs(obj)


def synth_node(node: dict[str, Any], gen: torch.Generator) -> Any:
    kind = node["kind"]
    if kind == "tensor":
        dtype = getattr(torch, node["dtype"])
        shape = tuple(int(s) for s in node["shape"])
        return random_tensor(shape, dtype, gen, node.get("low"), node.get("high"))
    if kind == "tuple":
        return tuple(synth_node(n, gen) for n in node["items"])
    if kind == "list":
        return [synth_node(n, gen) for n in node["items"]]
    if kind == "dict":
        return {k: synth_node(n, gen) for k, n in node["items"].items()}
    return node.get("value")


def random_tensor(
    shape: tuple[int, ...],
    dtype: torch.dtype,
    gen: torch.Generator,
    low: float | None = None,
    high: float | None = None,
) -> torch.Tensor:
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=gen).bool()
    if dtype.is_floating_point or dtype.is_complex:
        base = torch.float32 if dtype.itemsize < 4 or not dtype.is_floating_point else dtype
        if low is not None and high is not None:
            t = torch.rand(shape, generator=gen, dtype=torch.float64) * (high - low) + low
            return t.to(dtype)
        return torch.randn(shape, generator=gen, dtype=base).to(dtype)
    lo = 0 if low is None else int(low)
    hi = 2 if high is None else int(high)
    if hi <= lo:
        hi = lo + 1
    return torch.randint(lo, hi, shape, generator=gen, dtype=torch.int64).to(dtype)


def derive_tensor(sample: torch.Tensor, shape: list[int], gen: torch.Generator) -> torch.Tensor:
    """A tensor of `shape` with the sample's dtype, device, dim order and value range."""
    dtype = sample.dtype
    flat = sample.detach().reshape(-1).cpu()
    if flat.numel() and dtype != torch.bool and not dtype.is_complex:
        values = torch.unique(flat)
        if values.numel() <= 2:
            pick = torch.randint(0, values.numel(), tuple(shape), generator=gen)
            out = values[pick]
        elif dtype.is_floating_point:
            finite = flat[torch.isfinite(flat.float())].double()
            lo = float(finite.min()) if finite.numel() else -1.0
            hi = float(finite.max()) if finite.numel() else 1.0
            out = random_tensor(tuple(shape), dtype, gen, lo, hi)
        else:
            out = random_tensor(tuple(shape), dtype, gen, int(flat.min()), int(flat.max()) + 1)
    else:
        out = random_tensor(tuple(shape), dtype, gen)
    out = out.to(dtype)
    # keep the sample's memory layout (its dims ordered by stride) for static-stride models
    if sample.dim() == len(shape) and sample.dim() > 1 and not sample.is_contiguous():
        strides = sample.stride()
        order = sorted(range(sample.dim()), key=lambda d: -strides[d])
        permuted = out.permute(*order).contiguous()
        inverse = [order.index(d) for d in range(len(order))]
        out = permuted.permute(*inverse)
    return out.to(sample.device)


def to_device(tree: Any, device: str) -> Any:
    return pytree.tree_map(lambda x: x.to(device) if isinstance(x, torch.Tensor) else x, tree)


def tensor_summary(t: Any) -> dict[str, Any]:
    if not isinstance(t, torch.Tensor):
        return {"kind": type(t).__name__, "value": repr(t)[:200]}
    out: dict[str, Any] = {
        "kind": "tensor",
        "dtype": dtype_name(t.dtype),
        "shape": list(t.shape),
        "stride": list(t.stride()),
        "device": str(t.device),
    }
    if t.is_floating_point() or t.is_complex():
        d = t.detach()
        out["nan"] = int(torch.isnan(d).sum())
        out["inf"] = int(torch.isinf(d).sum())
        if d.dim() >= 1:
            # rows along dim 0 (the batch dim of most models) that hold them, so the report can
            # name the input rows that produce them; capped, the count says how many in all
            for key, mask in (("nan", torch.isnan(d)), ("inf", torch.isinf(d))):
                if out[key]:
                    rows = mask.reshape(d.shape[0], -1).any(dim=1).nonzero().reshape(-1)
                    out[f"{key}_rows"] = [int(r) for r in rows[:ROWS_CAP]]
                    out[f"{key}_row_count"] = int(rows.numel())
    return out


def tensor_stats(t: Any) -> dict[str, Any]:
    """What the intermediate value printer (level 2) shows of a tensor: dtype, shape, stride,
    numel, min/max/mean of its finite values, and its NaN and Inf counts."""
    if not isinstance(t, torch.Tensor):
        raise StepError(f"not a tensor: {type(t).__name__}")
    d = t.detach()
    out: dict[str, Any] = {
        "dtype": dtype_name(d.dtype),
        "shape": list(d.shape),
        "stride": list(d.stride()),
        "numel": d.numel(),
        "nan": 0,
        "inf": 0,
    }
    if d.is_complex() or d.dtype == torch.bool or d.numel() == 0:
        return out
    values = d.to(torch.float64) if d.is_floating_point() else d
    if d.is_floating_point():
        finite = torch.isfinite(values)
        out["nan"] = int(torch.isnan(values).sum())
        out["inf"] = int(torch.isinf(values).sum())
        values = values[finite]
        if values.numel() == 0:
            return out
    out["min"] = float(values.min())
    out["max"] = float(values.max())
    out["mean"] = float(values.to(torch.float64).mean())
    return out


def value_at(tree: dict[str, Any], path: str) -> Any:
    """The leaf of {"args": [...], "kwargs": {...}} at a path such as `kwargs['mask'][0]`."""
    head, _, rest = path.partition("[")
    node: Any = tree[head]
    for token in re.findall(r"\[([^\]]+)\]", "[" + rest if rest else ""):
        node = node[ast.literal_eval(token)]
    return node


ROWS_CAP = 32
"""At most this many row indices per output are recorded for NaN and for Inf."""


def flat_tensors(tree: Any) -> list[Any]:
    return pytree.tree_flatten(tree)[0]


# --------------------------------------------------------------------------------------------
# Loading


def device_index(device: str) -> int:
    if ":" in device:
        return int(device.split(":", 1)[1])
    return -1


# --------------------------------------------------------------------------------------------
# Torch versions (2.11-2.15): what the worker uses of torch's internals is checked where it is
# used, and a missing piece is a StepError saying "not available in torch X", never an
# AttributeError from deep inside torch.


def not_available(what: str) -> StepError:
    return StepError(f"{what} is not available in torch {torch.__version__}")


def check_inductor_configs(configs: dict[str, Any]) -> None:
    """Every key of `configs` must be an inductor config of this torch (the crash-triage printer
    configs `aot_inductor.debug_intermediate_value_printer`/`filtered_kernel_names` exist in
    2.11-2.15; `aot_inductor.check_upperbound` only from 2.15)."""
    from torch._inductor import config as inductor_config

    for key in configs:
        obj: Any = inductor_config
        try:
            for part in key.split("."):
                obj = getattr(obj, part)
        except AttributeError:
            raise not_available(f"the inductor config {key!r}") from None


def minifier_entry() -> Any:
    """torch._dynamo.repro.aoti.run_repro with the arguments the minify op passes."""
    try:
        from torch._dynamo.repro.aoti import run_repro
    except ImportError:
        raise not_available("the AOTI minifier (torch._dynamo.repro.aoti.run_repro)") from None
    params = inspect.signature(run_repro).parameters
    missing = [p for p in ("config_patches", "command", "save_dir", "check_str") if p not in params]
    if missing and not any(p.kind is p.VAR_KEYWORD for p in params.values()):
        raise not_available(f"run_repro({', '.join(missing)}=...)")
    return run_repro


# --------------------------------------------------------------------------------------------
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
        module.load_pt2 = watched(original)
    try:
        yield
    finally:
        for module, original in modules:
            module.load_pt2 = original


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
            self.runner = torch._C._aoti.AOTIModelContainerRunnerCpu(so, 1)
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
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
        base = 8 + n
        for name, spec in header.items():
            if name == "__metadata__":
                continue
            begin, end = spec["data_offsets"]
            f.seek(base + begin)
            data = bytearray(f.read(end - begin))
            dtype = getattr(torch, SAFETENSORS_TORCH_DTYPES[spec["dtype"]])
            flat = torch.frombuffer(data, dtype=dtype) if data else torch.empty(0, dtype=dtype)
            out[name] = flat.reshape(spec["shape"]).to(device)
    return out


def first_error_line(exc: BaseException) -> str:
    text = " ".join(line.strip() for line in str(exc).splitlines() if line.strip())
    return f"{type(exc).__name__}: {text[:400]}"


def load_direct(path: str, model: str, index: int) -> DirectModel:
    """The C++ AOTIModelPackageLoader alone: what load_package does after load_pt2's CPU-ISA
    probe (`get_device_information`), whose result only feeds a mismatch warning for a package
    that is already compiled. For crash triage's re-runs, not for measuring a deployment."""
    return DirectModel(torch._C._aoti.AOTIModelPackageLoader(path, model, False, 1, index))


def probed_vec_isa() -> list[str] | None:
    """The CPU ISAs torch's probe found usable in this process (valid_vec_isa_list, which torch
    caches), by class name, or None when nothing here has run the probe."""
    import torch._inductor.cpu_vec_isa as isa

    probe = getattr(isa, "valid_vec_isa_list", None)
    info = getattr(probe, "cache_info", None)
    if probe is None or info is None or not info().currsize:
        return None
    return [type(v).__name__ for v in probe()]


def pin_vec_isa(names: list[str]) -> bool:
    """Answer torch's CPU-ISA probe with what an earlier worker of the same check probed on this
    host, with this torch and compiler: on x86 a compile and a child-process dlopen per ISA, 3 s
    on a 2-core VM and 45-50 s on the GPU test machine, for the same answer (elsewhere torch runs
    no probe, and nothing is pinned). pick_vec_isa (code generation, AOTI_CPU_ISA) reads the
    module's function, so the choice among them is torch's own."""
    import platform

    import torch._inductor.cpu_vec_isa as isa

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


# --------------------------------------------------------------------------------------------
# Comparison


def transposed_layout(t: Any) -> Any:
    """The same shape and values with the last two dims swapped in memory (strides
    `(..., 1, rows)`): what a caller passing `x.T`-style views hands the model."""
    if not isinstance(t, torch.Tensor) or t.dim() < 2:
        raise StepError("a layout probe needs a tensor input of rank 2 or more")
    return t.contiguous().transpose(-1, -2).contiguous().transpose(-1, -2)


def compare_outputs(
    aoti: Any, eager: Any, rtol: float | None, atol: float | None
) -> dict[str, Any]:
    """Leaf-by-leaf comparison: structure, dtype, shape, max abs/rel error, mismatch count."""
    a_leaves, a_spec = pytree.tree_flatten(aoti)
    e_leaves, e_spec = pytree.tree_flatten(eager)
    out: dict[str, Any] = {"structure": None, "outputs": []}
    if len(a_leaves) != len(e_leaves):
        out["structure"] = (
            f"the compiled model returns {len(a_leaves)} output(s), the ExportedProgram "
            f"{len(e_leaves)}"
        )
        return out
    for i, (a, e) in enumerate(zip(a_leaves, e_leaves)):
        out["outputs"].append(compare_leaf(i, a, e, rtol, atol))
    return out


def compare_leaf(i: int, a: Any, e: Any, rtol: float | None, atol: float | None) -> dict[str, Any]:
    rec: dict[str, Any] = {"index": i}
    if isinstance(a, torch.Tensor) != isinstance(e, torch.Tensor):
        # a tensor on one side, a value on the other: a structure difference (`a == e` would
        # compare elementwise and fail on more than one element)
        rec.update(kind="tensor", structure=True)
        for key, x in (("", a), ("eager_", e)):
            is_t = isinstance(x, torch.Tensor)
            rec[f"{key}dtype"] = dtype_name(x.dtype) if is_t else type(x).__name__
            rec[f"{key}shape"] = list(x.shape) if is_t else ""
        return rec
    if not isinstance(a, torch.Tensor):
        rec.update(kind="value", equal=bool(a == e), aoti=repr(a)[:200], eager=repr(e)[:200])
        return rec
    rec.update(
        kind="tensor",
        dtype=dtype_name(a.dtype),
        eager_dtype=dtype_name(e.dtype),
        shape=list(a.shape),
        eager_shape=list(e.shape),
        numel=a.numel(),
    )
    if a.dtype != e.dtype or tuple(a.shape) != tuple(e.shape):
        rec["structure"] = True
        return rec
    d_rtol, d_atol = TOLERANCES.get(dtype_name(a.dtype), (0.0, 0.0))
    r = d_rtol if rtol is None else rtol
    t = d_atol if atol is None else atol
    rec.update(rtol=r, atol=t)
    a_c = a.detach().cpu()
    e_c = e.detach().cpu()
    if not (a.is_floating_point() or a.is_complex()):
        diff = a_c != e_c
        mism = int(diff.sum())
        rec.update(mismatches=mism, max_abs=None, max_rel=None)
        if mism:
            delta = (a_c.double() - e_c.double()).abs() if a.dtype != torch.bool else diff.double()
            rec["max_abs"] = float(delta.max())
        return rec
    wide = torch.complex128 if a.is_complex() else torch.float64
    a64, e64 = a_c.to(wide), e_c.to(wide)
    nan_a, nan_e = torch.isnan(a64), torch.isnan(e64)
    rec.update(
        nan=int(nan_a.sum()),
        inf=int(torch.isinf(a64).sum()),
        eager_nan=int(nan_e.sum()),
        eager_inf=int(torch.isinf(e64).sum()),
    )
    close = torch.isclose(a64, e64, rtol=r, atol=t, equal_nan=True)
    rec["mismatches"] = int((~close).sum())
    both_finite = torch.isfinite(a64) & torch.isfinite(e64)
    if bool(both_finite.any()):
        delta = (a64 - e64).abs()[both_finite]
        ref = e64.abs()[both_finite]
        rel = delta / ref.clamp_min(torch.finfo(torch.float64).tiny)
        rec["max_abs"] = float(delta.max())
        rec["max_rel"] = float(rel.max()) if math.isfinite(float(rel.max())) else None
        worst = int((a64 - e64).abs().nan_to_num(0.0).reshape(-1).argmax())
        rec["worst_index"] = list(_unravel(worst, tuple(a.shape)))
        rec["worst_aoti"] = _scalar(a64.reshape(-1)[worst])
        rec["worst_eager"] = _scalar(e64.reshape(-1)[worst])
    else:
        rec["max_abs"] = None
        rec["max_rel"] = None
    return rec


def _unravel(flat: int, shape: tuple[int, ...]) -> tuple[int, ...]:
    out = []
    for size in reversed(shape):
        out.append(flat % size if size else 0)
        flat = flat // size if size else 0
    return tuple(reversed(out))


def _scalar(t: torch.Tensor) -> Any:
    v = t.item()
    return str(v) if isinstance(v, complex) else float(v)


# --------------------------------------------------------------------------------------------
# Performance (the perf stage): what a deployment pays at a cold start and per call

MB = 1024 * 1024


def memory_snapshot(device: str) -> dict[str, Any]:
    """Host and GPU memory of this process now (bytes). `host.peak_rss` is getrusage's
    ru_maxrss, `vm_hwm`/`vm_rss` come from /proc/self/status; `children_peak_rss` is the largest
    child process (the ISA probe's). GPU: the caching allocator's view (what intermediate
    buffers take) and the driver's (`device_used`: total - free, as nvidia-smi shows it; AOTI
    allocates its constants with cudaMalloc, outside the caching allocator)."""
    import resource

    out: dict[str, Any] = {
        "host": {
            "peak_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
            "children_peak_rss": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024,
        }
    }
    with contextlib.suppress(OSError):
        with open("/proc/self/status") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key in ("VmHWM", "VmRSS") and value.strip().endswith("kB"):
                    out["host"][key.lower().replace("vm", "vm_")] = int(value.split()[0]) * 1024
    if device.startswith("cuda") and torch.cuda.is_available() and torch.cuda.is_initialized():
        index = device_index(device)
        dev = torch.device("cuda", max(index, 0))
        free, total = torch.cuda.mem_get_info(dev)
        out["gpu"] = {
            "allocated": torch.cuda.memory_allocated(dev),
            "max_allocated": torch.cuda.max_memory_allocated(dev),
            "reserved": torch.cuda.memory_reserved(dev),
            "max_reserved": torch.cuda.max_memory_reserved(dev),
            "device_used": total - free,
            "device_total": total,
        }
    return out


class CallTimer:
    """Patches callables (module functions, class methods) for the duration of a `with` block
    and adds up their calls and seconds by key; `on_call(key, args, seconds, error)` sees each.
    Nothing is patched when an attribute is missing (another torch version): that key stays out
    of the result."""

    def __init__(self) -> None:
        self.calls: dict[str, list[float]] = {}
        """key -> [calls, seconds, failed calls]"""
        self.events: list[tuple[str, tuple[Any, ...], float, bool]] = []
        self.starts: list[float] = []
        """Wall-clock start of each construction of a class patched with patch_class."""
        self._saved: list[tuple[Any, str, Any]] = []

    def patch(self, owner: Any, name: str, key: str) -> None:
        original = getattr(owner, name, None)
        if original is None:
            return
        timer = self

        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            failed = True
            try:
                result = original(*args, **kwargs)
                failed = False
                return result
            finally:
                spent = time.perf_counter() - started
                entry = timer.calls.setdefault(key, [0, 0.0, 0])
                entry[0] += 1
                entry[1] += spent
                entry[2] += int(failed)
                timer.events.append((key, args, spent, failed))

        self._saved.append((owner, name, vars(owner).get(name)))
        setattr(owner, name, timed)

    def patch_class(self, owner: Any, name: str, key: str) -> None:
        """Time the construction of the class `owner.name` (a C++ class: its static methods
        stay reachable through the stand-in)."""
        found = getattr(owner, name, None)
        if found is None:
            return
        cls: Any = found
        timer = self

        class Constructor:
            def __call__(self, *args: Any, **kwargs: Any) -> Any:
                started = time.perf_counter()
                timer.starts.append(time.time())
                try:
                    return cls(*args, **kwargs)
                finally:
                    entry = timer.calls.setdefault(key, [0, 0.0, 0])
                    entry[0] += 1
                    entry[1] += time.perf_counter() - started

            def __getattr__(self, attr: str) -> Any:
                return getattr(cls, attr)

        self._saved.append((owner, name, cls))
        setattr(owner, name, Constructor())

    def __enter__(self) -> CallTimer:
        return self

    def __exit__(self, *exc: object) -> None:
        for owner, name, original in reversed(self._saved):
            if original is None:  # inherited: drop the patch, the base's attribute shows again
                delattr(owner, name)
            else:
                setattr(owner, name, original)
        self._saved.clear()

    def seconds(self, key: str) -> float | None:
        entry = self.calls.get(key)
        return entry[1] if entry else None

    def count(self, key: str) -> int:
        entry = self.calls.get(key)
        return int(entry[0]) if entry else 0


def process_age_s() -> float | None:
    """Seconds since this process started (exec), from /proc (10 ms resolution): before the
    load, that is the interpreter's start and `import torch`."""
    try:
        with open("/proc/self/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        with open("/proc/uptime") as f:
            uptime = float(f.read().split()[0])
        return max(0.0, uptime - int(fields[19]) / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return None


def _loader_modules() -> dict[str, Any]:
    """The modules whose functions a load goes through (imported here, and timed)."""
    import torch._inductor.codecache as codecache
    import torch._inductor.cpp_builder as cpp_builder
    import torch._inductor.cpu_vec_isa as cpu_vec_isa
    import torch._inductor.package  # noqa: F401 - what aoti_load_package imports

    mods: dict[str, Any] = {
        "codecache": codecache,
        "cpu_vec_isa": cpu_vec_isa,
        "cpp_builder": cpp_builder,
    }
    with contextlib.suppress(ImportError):
        from torch.export.pt2_archive import _package

        mods["pt2"] = _package
    return mods


def _extraction_dirs() -> set[str]:
    """The folders in TMPDIR and /tmp that exist now: where a load may extract the model
    (torch 2.13: `$TMPDIR/aotinductor_*`; the torch 2.11 wheel on the GPU test machine left
    no such folder, so the name is not relied on when the .so names are known)."""
    import tempfile

    found: set[str] = set()
    for base in dict.fromkeys((tempfile.gettempdir(), "/tmp")):
        with contextlib.suppress(OSError):
            for entry in os.scandir(base):
                with contextlib.suppress(OSError):
                    if entry.is_dir(follow_symlinks=False):
                        found.add(entry.path)
    return found


def _so_names(package: str, model: str) -> set[str]:
    with contextlib.suppress(Exception), zipfile.ZipFile(package) as zf:
        marker = f"/data/aotinductor/{model}/"
        return {
            os.path.basename(n) for n in zf.namelist() if marker in f"/{n}" and n.endswith(".so")
        }
    return set()


def _extraction(before: set[str], so_names: set[str], started: float) -> dict[str, Any]:
    """The folder this load extracted the model into: its files, bytes, and when the last file
    was written (seconds after the loader started; file times are as coarse as the kernel's
    clock tick, a few ms)."""
    for folder in sorted(_extraction_dirs() - before):
        files = 0
        size = 0
        last = started
        names = set()
        for root, _dirs, entries in os.walk(folder):
            for entry in entries:
                with contextlib.suppress(OSError):
                    st = os.stat(os.path.join(root, entry))
                    files += 1
                    size += st.st_size
                    last = max(last, st.st_mtime)
                    names.add(entry)
        if not (
            so_names & names if so_names else folder.rpartition("/")[2].startswith("aotinductor_")
        ):
            continue  # another process's folder
        return {"folder": folder, "files": files, "bytes": size, "written_s": last - started}
    return {}


def measure_load(
    path: str,
    model: str,
    index: int,
    want_ep: bool,
    device: str,
    failures: list[str] | None = None,
) -> tuple[Any, Any, str, dict[str, Any]]:
    """`load_package_like_torch`, timed part by part. Returns its (runner, ep, how) and:
    `import_s` (the loader's modules; 0 when this process had them), `cuda_init_s`, `total_s`
    (the load call), `probe` (torch's CPU-ISA probe `get_device_information`: seconds, the
    check programs it built and dlopened in child processes, how many of them needed g++ and
    how many of those failed - a failed build is not cached, so every cold start pays it again
    - and `base_checks_s`, the share that TORCHINDUCTOR_VEC_ISA_OK=1 skips), `exported_program_s`,
    `loader_s` (the C++ AOTIModelPackageLoader: extraction, dlopen, constants to the device),
    `extraction` (folder, files, bytes, seconds), `dlopen_constants_s`, `other_s`, and memory
    before and after."""
    out: dict[str, Any] = {
        "fresh_process": "torch._inductor.package" not in sys.modules,
        "process_age_s": process_age_s(),
        "torch_version": torch.__version__,
    }
    started = time.perf_counter()
    mods = _loader_modules()
    out["import_s"] = time.perf_counter() - started
    if device.startswith("cuda") and torch.cuda.is_available():
        started = time.perf_counter()
        with contextlib.suppress(Exception):  # a broken CUDA fails the load itself, as it would
            torch.cuda.init()
            torch.cuda.synchronize(max(index, 0))
            out["cuda_init_s"] = time.perf_counter() - started
    with contextlib.suppress(Exception):
        out["memory_before"] = memory_snapshot(device)
    isa = mods["cpu_vec_isa"]
    cache_info = getattr(getattr(isa, "valid_vec_isa_list", None), "cache_info", None)
    out["probe_cached"] = bool(cache_info and cache_info().currsize)
    timer = CallTimer()
    before = _extraction_dirs()
    with timer, load_pt2_failures([] if failures is None else failures):
        timer.patch(mods["codecache"], "get_device_information", "probe")
        vec = getattr(isa, "VecISA", None)
        if vec is not None:
            timer.patch(vec, "check_build", "check_build")
            timer.patch(vec, "_probe_load", "dlopen_child")
        timer.patch(getattr(mods["cpp_builder"], "CppBuilder", None), "build", "gxx")
        if "pt2" in mods:
            timer.patch(mods["pt2"], "_load_exported_programs", "exported_program")
        timer.patch_class(torch._C._aoti, "AOTIModelPackageLoader", "loader")
        started = time.perf_counter()
        runner, ep, how = load_package_like_torch(path, model, index, want_ep)
        out["total_s"] = time.perf_counter() - started
    try:  # the load succeeded: nothing in its bookkeeping may turn it into a failure
        _load_breakdown(out, timer, vec, before, path, model)
        if device.startswith("cuda"):
            torch.cuda.synchronize(max(index, 0))
        out["memory_after"] = memory_snapshot(device)
    except Exception as exc:
        out["measure_error"] = f"{type(exc).__name__}: {exc}"[:500]
    return runner, ep, how, out


def _load_breakdown(
    out: dict[str, Any], timer: CallTimer, vec: Any, before: set[str], path: str, model: str
) -> None:
    """The parts of a timed load (measure_load), from what its CallTimer saw."""
    base_code = getattr(vec, "_avx_code", None)
    base_s = sum(
        spent for key, args, spent, _ in timer.events if key == "check_build" and base_code in args
    )
    out["probe"] = {
        "seconds": timer.seconds("probe"),
        "check_programs": timer.count("check_build"),
        "dlopen_children": timer.count("dlopen_child"),
        "dlopen_children_s": timer.seconds("dlopen_child"),
        "gxx_builds": timer.count("gxx"),
        "gxx_s": timer.seconds("gxx"),
        "gxx_failed": int(timer.calls.get("gxx", [0, 0.0, 0])[2]),
        "base_checks": sum(
            1 for key, args, _, _ in timer.events if key == "check_build" and base_code in args
        ),
        "base_checks_s": base_s,
        "vec_isa_ok": os.environ.get("TORCHINDUCTOR_VEC_ISA_OK"),
    }
    out["exported_program_s"] = timer.seconds("exported_program")
    out["loader_s"] = timer.seconds("loader")
    out["loader_calls"] = timer.count("loader")
    if timer.starts:
        extraction = _extraction(before, _so_names(path, model), timer.starts[-1])
        if extraction and out["loader_s"] is not None:
            extraction["written_s"] = min(max(extraction["written_s"], 0.0), out["loader_s"])
            out["dlopen_constants_s"] = out["loader_s"] - extraction["written_s"]
        out["extraction"] = extraction
    known = sum(out[k] or 0.0 for k in ("exported_program_s", "loader_s"))
    out["other_s"] = max(0.0, out["total_s"] - known - (out["probe"]["seconds"] or 0.0))


def percentile(sorted_values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of an ascending list."""
    if not sorted_values:
        return math.nan
    rank = max(1, math.ceil(q / 100.0 * len(sorted_values)))
    return sorted_values[min(rank, len(sorted_values)) - 1]


def growth_per_run(series: list[int]) -> float:
    """Least-squares slope of a memory series (bytes per run); 0 for fewer than 2 points."""
    n = len(series)
    if n < 2:
        return 0.0
    mean_x = (n - 1) / 2.0
    mean_y = sum(series) / n
    num = sum((i - mean_x) * (y - mean_y) for i, y in enumerate(series))
    den = sum((i - mean_x) ** 2 for i in range(n))
    return num / den


def latency_runs(call: Any, device: str, warmup: int, runs: int, budget_s: float) -> dict[str, Any]:
    """Up to `warmup` untimed calls, then up to `runs` timed ones (each to the end of its GPU
    work), all within `budget_s` seconds (the warm-up within half of it; at least one warm-up
    and two timed calls), so a slow model does not make the check slow; outputs are dropped at
    once, so memory that grows run over run is the model's (a leak), not ours. Returns the
    samples, p50/p99/min/mean/max in ms, and the memory series after every timed run (host
    RSS; on CUDA the caching allocator and the driver view) with their growth per run."""
    cuda = device.startswith("cuda")
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    started = time.perf_counter()
    done_warmup = 0
    while done_warmup < warmup and (
        done_warmup == 0 or time.perf_counter() - started < budget_s / 2
    ):
        call()
        sync()
        done_warmup += 1
    samples: list[float] = []
    rss: list[int] = []
    allocated: list[int] = []
    device_used: list[int] = []
    deadline = started + budget_s
    while len(samples) < runs and (len(samples) < 2 or time.perf_counter() < deadline):
        started = time.perf_counter()
        call()
        sync()
        samples.append((time.perf_counter() - started) * 1000.0)
        snap = memory_snapshot(device)
        rss.append(int(snap["host"].get("vm_rss", snap["host"]["peak_rss"])))
        if "gpu" in snap:
            allocated.append(int(snap["gpu"]["allocated"]))
            device_used.append(int(snap["gpu"]["device_used"]))
    ordered = sorted(samples)
    out: dict[str, Any] = {
        "warmup": done_warmup,
        "runs": len(samples),
        "samples_ms": samples,
        "p50_ms": percentile(ordered, 50),
        "p99_ms": percentile(ordered, 99),
        "min_ms": ordered[0] if ordered else math.nan,
        "max_ms": ordered[-1] if ordered else math.nan,
        "mean_ms": sum(samples) / len(samples) if samples else math.nan,
        "memory": {"host_rss": rss, "host_rss_growth_per_run": growth_per_run(rss)},
    }
    if allocated:
        out["memory"].update(
            gpu_allocated=allocated,
            gpu_allocated_growth_per_run=growth_per_run(allocated),
            gpu_device_used=device_used,
            gpu_device_used_growth_per_run=growth_per_run(device_used),
        )
    return out


# Custom operators and aotipre's C++ harness (aotipre/cpp)

CUSTOM_OPS_ENV = "AOTIPRE_CUSTOM_OPS"
"""JSON `{"import": [modules], "library": [paths], "path": [dirs]}`: registered before any step
(every worker of a check gets it through the environment)."""
HARNESS_BINARY = "aotipre_harness"
HARNESS_PROTOCOL = 1
HARNESS_MARKER = "@@aotipre-cpp "
HARNESS_PHASE = "@@aotipre-cpp-phase "
_LOADER_RACE = re.compile(rb"_ZZN5torch8inductor\w{0,40}14load_json_file\w{0,200}E8json_obj")
"""The mangled name of the static `json_obj` in model_package_loader.cpp's load_json_file:
present in a libtorch whose C++ loader has the data race of torch issue #194128."""


def register_custom_ops(spec: dict[str, Any]) -> dict[str, Any]:
    """Load `library` .so files (torch.ops.load_library), then import `import` modules, with
    `path` dirs put first on sys.path (the user's working directory: the worker runs elsewhere).
    Returns what was registered; raises CustomOpsFailed naming the first that failed."""
    import importlib

    for directory in reversed(spec.get("path") or []):
        if directory not in sys.path:
            sys.path.insert(0, directory)
    done: dict[str, Any] = {"library": [], "import": []}
    for lib in spec.get("library") or []:
        try:
            torch.ops.load_library(lib)
        except Exception as exc:
            raise CustomOpsFailed(f"--library {lib}: {type(exc).__name__}: {exc}") from exc
        done["library"].append(lib)
    for module in spec.get("import") or []:
        try:
            importlib.import_module(module)
        except BaseException as exc:  # SystemExit from a module is a failure too
            raise CustomOpsFailed(f"--import {module}: {type(exc).__name__}: {exc}") from exc
        done["import"].append(module)
    return done


def op_schema_status(name: str) -> str:
    """`registered`, or `missing` for an op name like `ns::op` or `ns::op.overload`."""
    op, _, overload = name.partition(".")
    try:
        torch._C._get_schema(op, overload)
    except RuntimeError:
        return "missing"
    return "registered"


def loader_race_known() -> bool | None:
    """Whether the installed libtorch_cpu has the loader's static JSON object (torch #194128);
    None when its symbol table cannot tell (no library found, stripped)."""
    import mmap

    lib_dir = os.path.join(os.path.dirname(torch.__file__), "lib")
    for name in ("libtorch_cpu.so", "libtorch_cpu.dylib"):
        path = os.path.join(lib_dir, name)
        if not os.path.isfile(path):
            continue
        with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
            if _LOADER_RACE.search(data):  # type: ignore[call-overload]
                return True
            return None if data.find(b"load_json_file") < 0 else False
    return None


def harness_toolchain(cxx: str | None) -> dict[str, Any]:
    """What building the harness against this torch needs: compiler, headers, libraries, ABI."""
    import shutil
    import subprocess

    from torch.utils import cpp_extension

    if not cxx:
        from torch._inductor.cpp_builder import get_cpp_compiler

        cxx = get_cpp_compiler()
    exe = shutil.which(cxx)
    if exe is None:
        raise StepError(f"the C++ compiler {cxx!r} is not on PATH")
    out = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=60)
    lib_dirs = cpp_extension.library_paths()
    libs = ["torch", "torch_cpu", "c10"]
    if any(os.path.isfile(os.path.join(d, "libtorch_cuda.so")) for d in lib_dirs):
        libs += ["torch_cuda", "c10_cuda"]
    return {
        "cxx": cxx,
        "exe": os.path.realpath(exe),
        "version": (out.stdout.splitlines() or [""])[0].strip(),
        "includes": cpp_extension.include_paths(),
        "lib_dirs": lib_dirs,
        "libs": libs,
        "abi": int(bool(torch._C._GLIBCXX_USE_CXX11_ABI)),
        "torch": torch.__version__,
        "torch_file": torch.__file__,
    }


def harness_command(tc: dict[str, Any], source: str, target: str) -> list[str]:
    rpath = [f"-Wl,-rpath,{d}" for d in tc["lib_dirs"]]
    return [
        tc["exe"],
        "-std=c++20",
        "-O1",
        "-w",
        source,
        "-o",
        target,
        f"-D_GLIBCXX_USE_CXX11_ABI={tc['abi']}",
        *[f"-I{d}" for d in tc["includes"]],
        *[f"-L{d}" for d in tc["lib_dirs"]],
        *rpath,
        "-Wl,--no-as-needed",
        *[f"-l{lib}" for lib in tc["libs"]],
        "-pthread",
        "-ldl",
    ]


def build_harness(
    source: str, cache_root: str, cxx: str | None, timeout_s: float
) -> dict[str, Any]:
    """The harness binary for this torch and compiler: from `cache_root` when built before,
    else compiled in a temporary folder there and renamed into place (first writer wins)."""
    import hashlib
    import shutil
    import subprocess
    import tempfile

    tc = harness_toolchain(cxx)
    with open(source, "rb") as f:
        source_sha = hashlib.sha256(f.read()).hexdigest()
    ident = {k: tc[k] for k in ("exe", "version", "abi", "torch", "torch_file", "libs")}
    ident.update(protocol=HARNESS_PROTOCOL, source=source_sha)
    key = hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:24]
    final = os.path.join(cache_root, f"harness-{key}")
    binary = os.path.join(final, HARNESS_BINARY)
    info = {"binary": binary, "key": key, "toolchain": tc, "cached": True}
    if os.path.isfile(binary) and os.access(binary, os.X_OK):
        return info
    os.makedirs(cache_root, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=f".tmp-harness-{key}-", dir=cache_root)
    try:
        cmd = harness_command(tc, source, os.path.join(tmp, HARNESS_BINARY))
        info.update(cached=False, command=cmd)
        started = time.monotonic()
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, cwd=tmp)
        info["build_s"] = time.monotonic() - started
        if proc.returncode != 0:
            lines = [ln for ln in proc.stderr.splitlines() if "error" in ln][:6]
            lines = lines or proc.stderr.strip().splitlines()[-6:]
            raise StepError(
                f"building the C++ harness with {tc['cxx']} failed (exit {proc.returncode}): "
                + " | ".join(ln.strip() for ln in lines)
            )
        with open(os.path.join(tmp, "build.json"), "w") as f:
            json.dump({**ident, "command": cmd, "build_s": info["build_s"]}, f, indent=1)
        try:
            os.rename(tmp, final)
        except OSError:  # another worker published it first
            if not os.path.isfile(binary):
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return info


def run_harness(step: dict[str, Any], timeout_s: float) -> dict[str, Any]:
    """Run the harness binary once; its exit, signal, last phase and JSON result as a dict.
    The harness stays in this worker's process group, so aotipre's kill reaches it."""
    import signal
    import subprocess

    argv = [step["binary"], "--package", step["package"], "--model", step.get("model", "model")]
    argv += ["--device-index", str(step.get("device_index", -1)), "--inputs", step["inputs"]]
    if step.get("outputs"):
        argv += ["--outputs", step["outputs"]]
    for lib in step.get("libraries") or []:
        argv += ["--library", lib]
    argv += ["--mode", step.get("mode", "run")]
    for key in ("threads", "runners", "iterations"):
        if step.get(key):
            argv += [f"--{key}", str(step[key])]
    if step.get("serial_construct"):
        argv.append("--serial-construct")
    rec: dict[str, Any] = {"argv": argv, "timed_out": False, "returncode": None, "signal": None}
    rec["limit_s"] = timeout_s
    env = dict(os.environ)
    for name in step.get("unset_env") or ():  # e.g. a libstdc++ preload only Python needed
        env.pop(name, None)
    rec["unset_env"] = list(step.get("unset_env") or ())
    started = time.monotonic()
    try:
        proc = subprocess.run(argv, capture_output=True, timeout=timeout_s, env=env)
        stdout, stderr, rc = proc.stdout, proc.stderr, proc.returncode
    except subprocess.TimeoutExpired as exc:  # run() killed it
        stdout, stderr, rc = exc.stdout or b"", exc.stderr or b"", None
        rec["timed_out"] = True
    rec["duration_s"] = time.monotonic() - started
    rec["returncode"] = rc
    if rc is not None and rc < 0:
        with contextlib.suppress(ValueError):
            rec["signal"] = signal.Signals(-rc).name
        rec["signal"] = rec["signal"] or f"SIG{-rc}"
    out_text = stdout.decode("utf-8", errors="replace")
    err_text = stderr.decode("utf-8", errors="replace")
    phases = [ln[len(HARNESS_PHASE) :].strip() for ln in err_text.splitlines()]
    phases = [p for p, ln in zip(phases, err_text.splitlines()) if ln.startswith(HARNESS_PHASE)]
    rec["phase"] = phases[-1] if phases else None
    rec["result"] = None
    for line in reversed(out_text.splitlines()):
        if line.startswith(HARNESS_MARKER):
            with contextlib.suppress(ValueError):
                rec["result"] = json.loads(line[len(HARNESS_MARKER) :])
            break
    log = [ln for ln in err_text.splitlines() if not ln.startswith(HARNESS_PHASE)]
    rec["stderr_tail"] = "\n".join(log)[-LOG_TAIL_BYTES:]
    return rec


USER_KERNEL_MARKER = "@@aotipre-kernel"
"""`@@aotipre-kernel start|end NAME OP` on stderr around each Triton launch while compiling."""


def kernel_name(kernel: Any) -> str:
    """The Python function name behind a JITFunction, Autotuner or inductor CachingAutotuner."""
    for _ in range(4):
        inner = getattr(kernel, "fn", None)
        if inner is None:
            break
        kernel = inner
    return str(getattr(kernel, "__name__", None) or type(kernel).__name__)


def user_kernel_owners(ep: Any) -> dict[str, str]:
    """{user Triton kernel name: the torch.library.triton_op that launches it} for the custom
    ops the ExportedProgram's graph calls (torch._library.triton keeps each op's kernels)."""
    try:
        from torch._library.triton import get_triton_kernels_for_op
    except ImportError:
        return {}
    owners: dict[str, str] = {}
    for node in ep.graph.nodes:
        target = node.target
        if not isinstance(target, torch._ops.OpOverload) or target.namespace == "aten":
            continue
        op = target._schema.name  # `ns::op`
        for kernel in get_triton_kernels_for_op(op):
            owners.setdefault(kernel_name(kernel), op)
    return owners


@contextlib.contextmanager
def traced_triton_launches(owners: dict[str, str]) -> Iterator[None]:
    """Announce every Triton launch on stderr (flushed) while the block runs: inductor's
    CachingAutotuner (run, bench: what autotuning at compile time calls) and the user's
    JITFunction.run. A compile that faults inside a kernel then names it in its log: the last
    `start` without an `end` (with CUDA_LAUNCH_BLOCKING=1 the faulting launch itself raises)."""
    patches: list[tuple[Any, str, Any]] = []

    def announce(what: str, kernel: Any) -> None:
        name = kernel_name(kernel)
        op = owners.get(name) or owners.get(re.sub(r"_\d+$", "", name)) or "-"
        with contextlib.suppress(OSError):
            os.write(2, f"{USER_KERNEL_MARKER} {what} {name} {op}\n".encode())

    def wrap(cls: Any, attr: str) -> None:
        original = getattr(cls, attr, None)
        if original is None:
            return

        def traced(self: Any, *args: Any, **kwargs: Any) -> Any:
            announce("start", self)
            out = original(self, *args, **kwargs)
            announce("end", self)
            return out

        setattr(cls, attr, traced)
        patches.append((cls, attr, original))

    with contextlib.suppress(ImportError):
        from triton.runtime.jit import JITFunction

        wrap(JITFunction, "run")
    with contextlib.suppress(ImportError):
        from torch._inductor.runtime.triton_heuristics import CachingAutotuner

        wrap(CachingAutotuner, "run")
        wrap(CachingAutotuner, "bench")
    try:
        yield
    finally:
        for cls, attr, original in reversed(patches):
            setattr(cls, attr, original)


def custom_ops_at_start(recorder: Recorder) -> None:
    """Register $AOTIPRE_CUSTOM_OPS before any step; record what was done or what failed."""
    text = os.environ.get(CUSTOM_OPS_ENV)
    if not text:
        return
    try:
        recorder.data["custom_ops"] = register_custom_ops(json.loads(text))
    except (CustomOpsFailed, ValueError) as exc:
        recorder.data["custom_ops"] = {"error": str(exc)}


# --------------------------------------------------------------------------------------------
# The worker


class StepError(Exception):
    """A step failed in a way the worker reports itself (not an exception from torch)."""


class CustomOpsFailed(StepError):
    """Registering --import / --library failed before any step ran."""


class InputsFailed(StepError):
    """The sample inputs could not be loaded or moved to the device (not the model's fault)."""


class Worker:
    def __init__(self, job: dict[str, Any], recorder: Recorder, real_fd: int) -> None:
        self.job = job
        self.rec = recorder
        self.real_fd = real_fd
        self.device: str = job["device"]
        self.index = device_index(self.device) if self.device.startswith("cuda") else -1
        self.workdir: str = job["workdir"]
        self.tag: str = job.get("tag", "job")
        self.runner: Any = None
        self.loaded: tuple[str, str] | None = None
        """(package, model) of the last load."""
        self.unchecked: Any = None
        """A second copy of the model whose first run had AOTI_RUNTIME_CHECK_INPUTS unset (what
        a default deployment runs): see call_unchecked."""
        self.ep: Any = None
        self.ep_module: Any = None
        self.ep_error: dict[str, Any] | None = None
        self.inputs: tuple[tuple[Any, ...], dict[str, Any]] | None = None
        self.outputs: dict[str, Any] = {}
        self.step_ids = {step["id"] for step in job["steps"]}

    # -- helpers

    def marker(self, text: str) -> None:
        with contextlib.suppress(OSError):
            os.write(self.real_fd, f"{MARKER} {text}\n".encode())

    def path(self, name: str) -> str:
        return os.path.join(self.workdir, name)

    def phase(self, entry: dict[str, Any], name: str) -> None:
        """Record what the step is doing now (also in `current`, in case the process dies)."""
        entry["phase"] = name
        current = self.rec.data.get("current")
        if isinstance(current, dict):
            current["phase"] = name
            self.rec.flush()

    def get_inputs(self, entry: dict[str, Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
        if self.inputs is None:
            self.phase(entry, "inputs")
            try:
                args, kwargs = load_inputs(self.job["inputs"], self.job["source_package"])
                self.inputs = to_device((args, kwargs), self.device)
            except Exception as exc:
                raise InputsFailed(f"{type(exc).__name__}: {exc}") from exc
        return self.inputs

    def get_ep(self) -> Any:
        if self.ep is None:
            if self.ep_error is not None:
                raise StepError(f"the ExportedProgram could not be loaded: {self.ep_error}")
            try:
                source = self.job.get("ep_package") or self.job["source_package"]
                ep = load_exported_program(
                    as_archive(source, self.workdir), self.job.get("ep_model") or self.job["model"]
                )
            except Exception as exc:
                self.ep_error = exception_info(exc)
                raise
            self.ep = self.move_ep(ep)
        return self.ep

    def move_ep(self, ep: Any) -> Any:
        target = torch.device(self.device).type
        devices = {
            t.device.type
            for t in list(ep.state_dict.values()) + list(ep.constants.values())
            if isinstance(t, torch.Tensor)
        }
        if devices and devices != {target}:
            from torch.export.passes import move_to_device_pass

            return move_to_device_pass(ep, self.device)
        return ep

    def fresh_ep(self) -> Any:
        """Another copy of the reference ExportedProgram, on the device: for steps that change
        its buffers or weights (state, weights), which the eager step's copy must not see."""
        source = self.job.get("ep_package") or self.job["source_package"]
        name = self.job.get("ep_model") or self.job["model"]
        return self.move_ep(load_exported_program(as_archive(source, self.workdir), name))

    def eager_module(self) -> Any:
        if self.ep_module is None:
            self.ep_module = self.get_ep().module()
        return self.ep_module

    def save(self, key: str, value: Any, filename: str | None) -> None:
        self.outputs[key] = value
        if filename:
            cpu = pytree.tree_map(
                lambda x: x.detach().cpu() if isinstance(x, torch.Tensor) else x, value
            )
            torch.save(cpu, self.path(filename))

    def outputs_of(self, key: str) -> Any:
        if key in self.outputs:
            return self.outputs[key]
        path = self.path(key)
        if not os.path.exists(path):
            raise StepError(f"no saved outputs {key!r} (the step producing them did not finish)")
        value = torch.load(path, weights_only=True, map_location="cpu")
        self.outputs[key] = value
        return value

    # -- the loop

    def run(self) -> None:
        self.rec.data["cuda_available"] = torch.cuda.is_available()
        if self.job.get("vec_isa") is not None:
            self.rec.data["vec_isa_pinned"] = pin_vec_isa(list(self.job["vec_isa"]))
        self.rec.flush()
        timeout = float(self.job.get("step_timeout_s", 300))
        compile_timeout = float(self.job.get("compile_timeout_s", timeout))
        for step in self.job["steps"]:
            sid = step["id"]
            log_path = self.path(f"{self.tag}.{sid.replace(':', '_')}.log")
            self.rec.data["current"] = {"id": sid, "log": log_path, "started": time.time()}
            self.rec.flush()
            self.marker(f"start {sid}")
            limit = compile_timeout if step["op"] == "compile" else timeout
            limit = float(step.get("timeout_s") or limit)
            entry: dict[str, Any] = {"op": step["op"]}
            unmet = [
                r
                for r in step.get("requires", ())
                if r in self.step_ids and self.rec.data["steps"].get(r, {}).get("status") != "ok"
            ]
            if unmet:
                entry.update(status="skipped", reason=f"needs {', '.join(unmet)}", duration_s=0.0)
                self.rec.data["steps"][sid] = entry
                self.rec.data["current"] = None
                self.rec.flush()
                continue
            started = time.monotonic()
            with StepLog(log_path, self.real_fd, bool(self.job.get("capture_stdout"))) as log:
                faulthandler.dump_traceback_later(limit, exit=True)
                try:
                    self.require_custom_ops()
                    getattr(self, f"op_{step['op']}")(step, entry)
                    entry.setdefault("status", "ok")
                except StepError as exc:
                    entry.update(
                        status="error", error={"type": type(exc).__name__, "message": str(exc)}
                    )
                except Exception as exc:
                    entry.update(status="error", error=exception_info(exc))
                finally:
                    faulthandler.cancel_dump_traceback_later()
            entry["duration_s"] = time.monotonic() - started
            entry["log"] = log.text
            self.rec.data["steps"][sid] = entry
            self.rec.data["current"] = None
            self.rec.flush()
            self.marker(f"end {sid} {entry['status']}")
            if entry["status"] == "error" and self.must_stop(step, entry):
                self.rec.data["stopped"] = {
                    "after": sid,
                    "reason": "a CUDA error may have poisoned the CUDA context",
                }
                break
            if entry["status"] == "error" and step["op"] in ("compile", "load"):
                self.rec.data["stopped"] = {"after": sid, "reason": f"{step['op']} failed"}
                break
        self.rec.data["done"] = True
        self.rec.flush()

    def must_stop(self, step: dict[str, Any], entry: dict[str, Any]) -> bool:
        if not self.device.startswith("cuda") or step["op"] not in ("run", "eager", "probe"):
            return False
        text = json.dumps(entry.get("error")) + entry.get("log", "")
        return "input_handles[" not in text and "kwarg keyword mismatch" not in text

    # -- ops

    def op_compile(self, step: dict[str, Any], entry: dict[str, Any]) -> None:
        ep = self.get_ep()
        if ep.example_inputs is None or not _has_leaves(ep.example_inputs):
            ep.example_inputs = self.get_inputs(entry)
            entry["example_inputs"] = "sample inputs"
        else:
            ep.example_inputs = to_device(ep.example_inputs, self.device)
            entry["example_inputs"] = "archive"
        configs = dict(step.get("inductor_configs") or {})
        check_inductor_configs(configs)
        out = step["out"]
        os.makedirs(os.path.dirname(out), exist_ok=True)
        owners = user_kernel_owners(ep) if self.device.startswith("cuda") else {}
        entry["user_kernels"] = owners
        trace = bool(owners) or bool(step.get("trace_launches"))  # the fault re-run: every kernel
        with (
            users_tempdir(),
            traced_triton_launches(owners) if trace else contextlib.nullcontext(),
        ):
            path = torch._inductor.aoti_compile_and_package(
                ep, package_path=out, inductor_configs=configs
            )
        entry["package"] = str(path)
        entry["size"] = os.path.getsize(out)

    def op_load(self, step: dict[str, Any], entry: dict[str, Any]) -> None:
        package = step.get("package") or self.job["package"]
        model = step.get("model") or self.job.get("aoti_model") or self.job["model"]
        want_ep = bool(step.get("with_ep")) and self.ep is None
        failures: list[str] = []
        runner, ep, how = self._load(step, entry, package, model, want_ep, failures)
        self.runner = runner
        self.loaded = (package, model)
        entry["how"] = how
        if failures:
            entry["fallback"] = failures[0]
        names = _so_names(package, model)
        if names:
            entry["mapped"] = mapped_shared_objects(names)
        with contextlib.suppress(Exception):
            entry["vec_isa"] = probed_vec_isa()
        if ep is not None:
            self.ep = self.move_ep(ep)
        with contextlib.suppress(Exception):
            entry["metadata"] = dict(runner.get_metadata())
        with contextlib.suppress(Exception):
            entry["constants"] = len(runner.get_constant_fqns())

    def _load(
        self,
        step: dict[str, Any],
        entry: dict[str, Any],
        package: str,
        model: str,
        want_ep: bool,
        failures: list[str],
    ) -> tuple[Any, Any, str]:
        if step.get("measure"):
            runner, ep, how, entry["perf"] = measure_load(
                package, model, self.index, want_ep, self.device, failures
            )
            return runner, ep, how
        if step.get("direct") and not want_ep:
            return load_direct(package, model, self.index), None, "direct"
        import torch._inductor.package  # noqa: F401 - the loader load_pt2_failures watches

        with load_pt2_failures(failures):
            return load_package_like_torch(package, model, self.index, want_ep)

    def call_aoti(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if self.runner is None:
            raise StepError("the model is not loaded (the load step did not succeed)")
        out = self.runner(*args, **kwargs)
        if self.device.startswith("cuda"):
            torch.cuda.synchronize()
        return out

    def call_unchecked(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """Call the model as a default deployment does, without the runtime input check.

        The generated code reads AOTI_RUNTIME_CHECK_INPUTS once per loaded .so, at its first
        run (a function-local static), and every loader extracts the package into a folder of
        its own, so a second loader is a second .so: its first run happens here with the
        variable unset. The checked copy is released first (one copy of the constants)."""
        if self.unchecked is None:
            if self.loaded is None:
                raise StepError("the model is not loaded (the load step did not succeed)")
            self.runner = None
            gc.collect()
            if self.device.startswith("cuda"):
                torch.cuda.empty_cache()
            self.unchecked = load_direct(*self.loaded, self.index)
            saved = os.environ.pop(CHECK_INPUTS_ENV, None)
            try:
                return self._call(self.unchecked, args, kwargs)
            finally:
                if saved is not None:
                    os.environ[CHECK_INPUTS_ENV] = saved
        return self._call(self.unchecked, args, kwargs)

    def _call(self, model: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        out = model(*args, **kwargs)
        if self.device.startswith("cuda"):
            torch.cuda.synchronize()
        return out

    def call_eager(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        module = self.eager_module()
        with torch.no_grad():
            out = module(*args, **kwargs)
        if self.device.startswith("cuda"):
            torch.cuda.synchronize()
        return out

    def op_run(self, step: dict[str, Any], entry: dict[str, Any]) -> None:
        args, kwargs = self.get_inputs(entry)
        entry["inputs"] = [tensor_summary(t) for t in flat_tensors((args, kwargs))]
        self.phase(entry, "call")
        started = time.perf_counter()
        out = self.call_aoti(args, kwargs)
        if step.get("measure"):
            entry["perf"] = {
                "call_s": time.perf_counter() - started,
                "memory_after": memory_snapshot(self.device),
            }
        entry["outputs"] = [tensor_summary(t) for t in flat_tensors(out)]
        self.save(step.get("save", "aoti.pt"), out, step.get("save"))

    def op_disk_weights_run(self, step: dict[str, Any], entry: dict[str, Any]) -> None:
        """A package whose weights live outside the .so, loaded the way that reads them
        (load_pt2(..., load_weights_from_disk=True)) and called on the sample inputs."""
        try:
            from torch.export.pt2_archive._package import load_pt2
        except ImportError:
            raise not_available("torch.export.pt2_archive._package.load_pt2") from None
        if "load_weights_from_disk" not in inspect.signature(load_pt2).parameters:
            raise not_available("load_pt2(..., load_weights_from_disk=True)")
        package = self.job["package"]
        model = self.job.get("aoti_model") or self.job["model"]
        args, kwargs = self.get_inputs(entry)
        self.phase(entry, "load")
        contents = load_pt2(package, device_index=self.index, load_weights_from_disk=True)
        if model not in contents.aoti_runners:
            raise StepError(f"load_pt2 found no compiled model {model!r}")
        self.phase(entry, "call")
        out = self._call(contents.aoti_runners[model], args, kwargs)
        entry["outputs"] = [tensor_summary(t) for t in flat_tensors(out)]

    def op_state(self, step: dict[str, Any], entry: dict[str, Any]) -> None:
        """State across calls: a fresh copy of the compiled model called `calls` times with the
        same inputs, its mutated buffers read after each call, and (with a reference) a fresh
        ExportedProgram module called the same way; each call's outputs and buffers compared."""
        if self.loaded is None:
            raise StepError("the model is not loaded (the load step did not succeed)")
        n = int(step.get("calls") or 3)
        names = [str(b) for b in step.get("buffers") or []]
        args, kwargs = self.get_inputs(entry)
        kwargs = self.ordered_kwargs(kwargs)
        self.phase(entry, "load")
        try:
            fresh: Any = StateRunner(*self.loaded, self.device, self.workdir)
            entry["how"] = "container runner"
        except Exception as exc:  # outputs still tell, the buffers do not
            fresh = None
            entry["buffers_unreadable"] = f"{type(exc).__name__}: {str(exc)[:300]}"
            direct = load_direct(*self.loaded, self.index)
        aoti: list[tuple[Any, dict[str, Any]]] = []
        for i in range(n):
            self.phase(entry, f"call {i + 1}")
            if fresh is not None:
                out: Any = fresh(args, kwargs)
                state = fresh.buffers(names)
            else:
                out, state = self._call(direct, args, kwargs), {}
            if self.device.startswith("cuda"):
                torch.cuda.synchronize()
            aoti.append((_detached(out), state))
        calls = [
            {
                "call": i + 1,
                "outputs": [_state_summary(t) for t in flat_tensors(out)],
                "buffers": {k: _state_summary(v) for k, v in state.items()},
            }
            for i, (out, state) in enumerate(aoti)
        ]
        entry["calls"] = calls
        if not step.get("reference"):
            return
        self.phase(entry, "load_exported_program")
        module = self.fresh_ep().module()
        own = dict(module.named_buffers())
        rtol, atol = self.job.get("rtol"), self.job.get("atol")
        for i, record in enumerate(calls):
            self.phase(entry, f"eager call {i + 1}")
            with torch.no_grad():
                out = module(*args, **kwargs)
            if self.device.startswith("cuda"):
                torch.cuda.synchronize()
            got, state = aoti[i]
            eager = [t for t in pytree.tree_leaves(_detached(out)) if isinstance(t, torch.Tensor)]
            mine = [t for t in pytree.tree_leaves(got) if isinstance(t, torch.Tensor)]
            record["compare"] = compare_outputs(mine, eager, rtol, atol)
            record["buffers_compare"] = {
                name: compare_leaf(0, state[name], own[name].detach().cpu(), rtol, atol)
                for name in names
                if name in state and name in own
            }
            record["eager_buffers"] = {
                name: _state_summary(own[name].detach().cpu()) for name in names if name in own
            }

    def op_weights(self, step: dict[str, Any], entry: dict[str, Any]) -> None:
        """A weight swap as a deployment applies it: a fresh copy of the compiled model, run
        on the inputs, its constants replaced with the file's tensors (load_constants keyed by
        state_dict names, check_full_update=True: what torch's load_weights_to_pt2_contents
        does), run again; with a reference, the ExportedProgram's module given the same weights
        (load_state_dict, strict=False) and run, and the outputs compared."""
        if self.loaded is None:
            raise StepError("the model is not loaded (the load step did not succeed)")
        args, kwargs = self.get_inputs(entry)
        self.phase(entry, "read_weights")
        tensors = read_weights_file(str(step["file"]), str(step.get("format")), self.device)
        self.phase(entry, "compiled_constants")
        try:  # the compiled values, to tell whether the swap should change anything
            compiled = StateRunner(*self.loaded, self.device, self.workdir).buffers(list(tensors))
        except Exception as exc:
            compiled = {}
            entry["compiled_unreadable"] = f"{type(exc).__name__}: {str(exc)[:300]}"
        entry["differing"] = [
            name
            for name, t in tensors.items()
            if name not in compiled
            or compiled[name].shape != t.shape
            or compiled[name].dtype != t.dtype
            or not torch.equal(compiled[name], t.detach().cpu())
        ]
        self.phase(entry, "load")
        fresh = load_direct(*self.loaded, self.index)
        before = _detached(self._call(fresh, args, kwargs))
        self.phase(entry, "swap")
        fresh.loader.load_constants(tensors, False, True)
        self.phase(entry, "call")
        after = _detached(self._call(fresh, args, kwargs))
        mine = [t for t in pytree.tree_leaves(after) if isinstance(t, torch.Tensor)]
        old = [t for t in pytree.tree_leaves(before) if isinstance(t, torch.Tensor)]
        entry["outputs"] = [tensor_summary(t) for t in mine]
        entry["changed"] = len(mine) != len(old) or any(
            a.shape != b.shape or not torch.equal(a, b) for a, b in zip(mine, old)
        )
        if not step.get("reference"):
            return
        self.phase(entry, "load_exported_program")
        module = self.fresh_ep().module()
        self.phase(entry, "reference_weights")
        try:
            result = module.load_state_dict(tensors, strict=False)
        except Exception as exc:  # a shape the module refuses: nothing to compare with
            entry["reference_refused"] = first_error_line(exc)
            return
        entry["reference_unexpected"] = list(result.unexpected_keys)
        entry["reference_missing"] = list(result.missing_keys)
        self.phase(entry, "eager_call")
        with torch.no_grad():
            out = module(*args, **self.ordered_kwargs(kwargs))
        if self.device.startswith("cuda"):
            torch.cuda.synchronize()
        eager = [t for t in pytree.tree_leaves(_detached(out)) if isinstance(t, torch.Tensor)]
        entry["compare"] = compare_outputs(mine, eager, self.job.get("rtol"), self.job.get("atol"))

    def op_latency(self, step: dict[str, Any], entry: dict[str, Any]) -> None:
        """Run latency and memory growth over repeated calls (see latency_runs)."""
        args, kwargs = self.get_inputs(entry)
        self.phase(entry, "calls")
        entry["perf"] = latency_runs(
            lambda: self.call_aoti(args, kwargs),
            self.device,
            warmup=int(step.get("warmup", 3)),
            runs=int(step.get("runs", 20)),
            budget_s=float(step.get("budget_s", 5.0)),
        )

    def op_eager(self, step: dict[str, Any], entry: dict[str, Any]) -> None:
        args, kwargs = self.get_inputs(entry)
        self.phase(entry, "load_exported_program")
        self.eager_module()
        self.phase(entry, "call")
        out = self.call_eager(args, kwargs)
        entry["outputs"] = [tensor_summary(t) for t in flat_tensors(out)]
        self.save(step.get("save", "eager.pt"), out, step.get("save"))

    def op_compare(self, step: dict[str, Any], entry: dict[str, Any]) -> None:
        a = self.outputs_of(step["a"])
        if step.get("b_file"):  # golden outputs (--expected), on the CPU like saved ones
            b = torch.load(step["b_file"], weights_only=True, map_location="cpu")
        elif step.get("b_member"):  # golden outputs a bundle stores
            data = read_member(self.job["source_package"], step["b_member"])
            b = torch.load(io.BytesIO(data), weights_only=True, map_location="cpu")
        else:
            b = self.outputs_of(step["b"])
        entry.update(compare_outputs(a, b, self.job.get("rtol"), self.job.get("atol")))

    def op_probe(self, step: dict[str, Any], entry: dict[str, Any]) -> None:
        args, kwargs = self.get_inputs(entry)
        leaves, spec = pytree.tree_flatten((args, self.ordered_kwargs(kwargs)))
        shapes = {int(k): v for k, v in step["shapes"].items()}
        tensors = [i for i, leaf in enumerate(leaves) if isinstance(leaf, torch.Tensor)]
        if shapes and max(shapes) >= len(tensors):
            raise StepError(
                f"the probe plan names tensor input {max(shapes)}, the inputs hold {len(tensors)}"
            )
        gen = torch.Generator().manual_seed(int(self.job.get("seed", 0)) + 7919)
        new = list(leaves)
        for t_index, shape in shapes.items():
            leaf_i = tensors[t_index]
            new[leaf_i] = derive_tensor(leaves[leaf_i], list(shape), gen)
        layout = [int(t) for t in step.get("layout") or ()]
        if layout and max(layout) >= len(tensors):
            raise StepError(
                f"the probe plan names tensor input {max(layout)}, the inputs hold {len(tensors)}"
            )
        for t_index in layout:
            new[tensors[t_index]] = transposed_layout(leaves[tensors[t_index]])
        p_args, p_kwargs = pytree.tree_unflatten(new, spec)
        entry["inputs"] = [tensor_summary(t) for t in flat_tensors((p_args, p_kwargs))]
        self.phase(entry, "call")
        unchecked = bool(step.get("unchecked"))
        call = self.call_unchecked if unchecked else self.call_aoti
        try:
            out = call(tuple(p_args), dict(p_kwargs))
        except Exception as exc:
            entry["aoti_error"] = exception_info(exc)
            clean = "input_handles[" in str(exc) or not self.device.startswith("cuda")
            if step.get("expect") == "reject" and clean:
                entry["outcome"] = "rejected"
                return
            raise  # on CUDA anything but the input check may have poisoned the context
        entry["outputs"] = [tensor_summary(t) for t in flat_tensors(out)]
        entry["outcome"] = "accepted"
        if layout:
            # the reference: the same model on the same values, laid out as in the sample
            self.phase(entry, "reference")
            r_args, r_kwargs = pytree.tree_unflatten(leaves, spec)
            ref = call(tuple(r_args), dict(r_kwargs))
            entry["layout_compare"] = compare_outputs(
                out, ref, self.job.get("rtol"), self.job.get("atol")
            )
            return
        if unchecked:
            return  # past the range: no reference to compare with (the eager graph refuses it)
        if step.get("eager") and step.get("expect") != "reject":
            self.phase(entry, "eager")
            try:
                ref = self.call_eager(tuple(p_args), dict(p_kwargs))
            except Exception as exc:
                entry["eager_error"] = exception_info(exc)
                return
            entry["compare"] = compare_outputs(out, ref, self.job.get("rtol"), self.job.get("atol"))

    # -- crash-triage ops (aotipre.triage)

    def op_save_inputs(self, step: dict[str, Any], entry: dict[str, Any]) -> None:
        """torch.save the run's inputs as `(args, kwargs)` on the CPU (for a repro bundle)."""
        args, kwargs = self.get_inputs(entry)
        cpu = pytree.tree_map(
            lambda x: x.detach().cpu() if isinstance(x, torch.Tensor) else x, (args, kwargs)
        )
        os.makedirs(os.path.dirname(step["out"]) or ".", exist_ok=True)
        torch.save(cpu, step["out"])
        entry["inputs"] = [tensor_summary(t) for t in flat_tensors((args, kwargs))]
        entry["out"] = step["out"]

    def op_minify(self, step: dict[str, Any], entry: dict[str, Any]) -> None:
        """Run the AOTI minifier on the ExportedProgram with the failing inputs as its example
        inputs (torch._dynamo.repro.aoti.run_repro, command `minify`); it writes repro.py into
        `out_dir` (its working directory) and checkpoints under `out_dir`/debug."""
        ep = self.get_ep()
        args, kwargs = self.get_inputs(entry)
        ep.example_inputs = (tuple(args), dict(kwargs))
        out_dir = step["out_dir"]
        os.makedirs(out_dir, exist_ok=True)
        import torch._dynamo.config as dynamo_config

        run_repro = minifier_entry()

        dynamo_config.debug_dir_root = os.path.join(out_dir, "debug")
        configs = {**dict(step.get("inductor_configs") or {}), "aot_inductor.package": True}
        saved_argv, saved_cwd = sys.argv, os.getcwd()
        sys.argv = sys.argv[:1]  # run_repro parses sys.argv when it holds more than the script
        os.chdir(out_dir)
        try:
            self.phase(entry, "minify")
            with torch.no_grad():
                run_repro(
                    ep,
                    config_patches=configs,
                    command="minify",
                    save_dir=os.path.join(out_dir, "save"),
                    check_str=step.get("check_str"),
                )
        finally:
            sys.argv = saved_argv
            os.chdir(saved_cwd)
        repro = os.path.join(out_dir, "repro.py")
        entry["repro"] = repro if os.path.isfile(repro) else None

    def ordered_kwargs(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        """kwargs in the order of the model's in_spec (the order AOTI flattens them in)."""
        if self.runner is None or not kwargs:
            return kwargs
        try:
            from torch.export._tree_utils import reorder_kwargs

            in_spec = pytree.treespec_loads(self.runner.loader.get_call_spec()[0])
            return reorder_kwargs(kwargs, in_spec)
        except Exception:
            return kwargs

    # -- C++ harness and custom-op ops (aotipre.cpp)

    def op_cpp_build(self, step: dict[str, Any], entry: dict[str, Any]) -> None:
        timeout = float(step.get("build_timeout_s") or 600)
        entry.update(build_harness(step["source"], step["cache_root"], step.get("cxx"), timeout))
        if step.get("loader_race"):
            entry["loader_race"] = loader_race_known()

    def op_cpp_inputs(self, step: dict[str, Any], entry: dict[str, Any]) -> None:
        """The flat tensor inputs, as AOTICompiledModel passes them to the C++ loader."""
        args, kwargs = self.get_inputs(entry)
        entry["kwargs_order"] = "call spec" if self.runner is not None else "as given"
        leaves = pytree.tree_flatten((args, self.ordered_kwargs(kwargs)))[0]
        flat = [x.detach().cpu() for x in leaves if isinstance(x, torch.Tensor)]
        os.makedirs(os.path.dirname(step["out"]) or ".", exist_ok=True)
        torch.save(flat, step["out"])
        entry["inputs"] = [tensor_summary(t) for t in flat]

    def op_cpp_run(self, step: dict[str, Any], entry: dict[str, Any]) -> None:
        limit = float(step.get("timeout_s") or self.job.get("step_timeout_s", 300))
        built = self.rec.data["steps"].get(step.get("binary_from") or "", {})
        binary = step.get("binary") or built.get("binary")
        if not binary:
            raise StepError("no C++ harness to run (its build step did not succeed)")
        after = step.get("only_if_failed")  # a second opinion only that step's failure needs
        prior = self.rec.data["steps"].get(after or "", {}).get("harness") or {}
        if after and prior.get("returncode") == 0:
            entry.update(status="skipped", reason=f"{after} passed")
            return
        first = step.get("only_if_passed")  # concurrent runs of a model one run cannot finish
        single = self.rec.data["steps"].get(first or "", {}).get("harness")
        if first and single is not None and single.get("returncode") != 0:
            how = "did not finish" if single.get("timed_out") else "failed"
            entry.update(status="skipped", reason=f"{first} {how}")
            return
        # leave the worker's own watchdog (the step limit) a margin to record the timeout
        entry["harness"] = run_harness({**step, "binary": binary}, max(1.0, limit * 0.9 - 1.0))

    def op_cpp_compare(self, step: dict[str, Any], entry: dict[str, Any]) -> None:
        """Compare the harness's outputs (a tuple of tensors) with the Python loader's."""
        if not os.path.exists(step["a"]):
            raise StepError("the C++ harness wrote no outputs (its run did not succeed)")
        cpp = list(torch.load(step["a"], weights_only=True, map_location="cpu"))
        python = flat_tensors(self.outputs_of(step["b"]))
        entry.update(compare_outputs(cpp, python, self.job.get("rtol"), self.job.get("atol")))
        entry["identical"] = len(cpp) == len(python) and all(
            isinstance(p, torch.Tensor) and c.dtype == p.dtype and torch.equal(c, p.cpu())
            for c, p in zip(cpp, python)
        )

    def require_custom_ops(self) -> None:
        """Fail the step when registering the custom ops failed at start-up."""
        info = self.rec.data.get("custom_ops")
        if isinstance(info, dict) and info.get("error"):
            raise CustomOpsFailed(f"registering custom operators failed: {info['error']}")

    def op_index_run(self, step: dict[str, Any], entry: dict[str, Any]) -> None:
        """Load the package with `device_index` (a second GPU) and run it there: where do the
        outputs live? (The Python loader, like aoti_load_package(..., device_index=N).)"""
        index = int(step["device_index"])
        package = step.get("package") or self.job["package"]
        model = step.get("model") or self.job.get("aoti_model") or self.job["model"]
        self.phase(entry, "load")
        runner, _, how = load_package_like_torch(package, model, index, False)
        entry["how"] = how
        args, kwargs = self.get_inputs(entry)
        args, kwargs = to_device((args, kwargs), f"cuda:{index}")
        self.phase(entry, "call")
        out = runner(*args, **kwargs)
        torch.cuda.synchronize(index)
        entry["outputs"] = [tensor_summary(t) for t in flat_tensors(out)]

    def op_input_stats(self, step: dict[str, Any], entry: dict[str, Any]) -> None:
        """Statistics of sample inputs as a kernel reads them (crash triage's kernel-inputs
        step): each `tensors` entry names a leaf path of (args, kwargs), e.g. `args[0]`. Read on
        the CPU as the sample holds them (the values are the same on the model's device)."""
        args, kwargs = load_inputs(self.job["inputs"], self.job["source_package"])
        tree = {"args": list(args), "kwargs": dict(kwargs)}
        entry["stats"] = [
            {"name": want["name"], **tensor_stats(value_at(tree, want["path"]))}
            for want in step.get("tensors") or []
        ]

    def op_custom_ops(self, step: dict[str, Any], entry: dict[str, Any]) -> None:
        """Whether each op named in the step is registered in this process."""
        entry["ops"] = {name: op_schema_status(name) for name in step.get("ops") or []}
        entry["registered"] = self.rec.data.get("custom_ops")

    # -- host ops (aotipre doctor and the check canary)

    def op_facts(self, step: dict[str, Any], entry: dict[str, Any]) -> None:
        """What this torch process is: versions, build, CUDA, compiler choice, loaded libraries."""
        entry["facts"] = host_facts(bool(step.get("cuda_devices")))

    def op_canary_program(self, step: dict[str, Any], entry: dict[str, Any]) -> None:
        """Export the canary (a trivial model) and save it as an ExportedProgram-only .pt2."""
        import tempfile

        torch.manual_seed(0)
        program = torch.export.export(CanaryModel().eval(), (torch.randn(2, 8),))
        out = step["out"]
        os.makedirs(os.path.dirname(out), exist_ok=True)
        tmp = tempfile.mkdtemp(prefix=".tmp-canary-", dir=os.path.dirname(out))
        try:
            path = os.path.join(tmp, os.path.basename(out))
            torch.export.save(program, path)
            os.replace(path, out)
        finally:
            with contextlib.suppress(OSError):
                os.rmdir(tmp)
        entry["package"] = out


class CanaryModel(torch.nn.Module):
    """The doctor's canary: a weight (constants inside the .so), an extern matmul, a fused kernel."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(8, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.linear(x)) + 1.0


def host_facts(cuda_devices: bool) -> dict[str, Any]:
    """Facts only a torch process knows; every probe is guarded, none may fail the step."""
    facts: dict[str, Any] = {
        "python": sys.version.split()[0],
        "executable": sys.executable,
        "torch": {
            "version": torch.__version__,
            "file": torch.__file__,
            "git_version": getattr(torch.version, "git_version", None),
            "cuda": torch.version.cuda,
            "hip": getattr(torch.version, "hip", None),
            "debug": bool(getattr(torch.version, "debug", False)),
            "cxx11_abi": _guard(lambda: bool(torch._C._GLIBCXX_USE_CXX11_ABI)),
            "built_with": _guard(lambda: _build_compiler(torch.__config__.show())),
        },
    }
    cuda: dict[str, Any] = {"available": _guard(torch.cuda.is_available)}
    if cuda["available"]:
        cuda["device_count"] = _guard(torch.cuda.device_count)
        cuda["driver_api"] = _guard(lambda: torch._C._cuda_getDriverVersion())  # type: ignore[attr-defined]
        if cuda_devices:
            devices = []
            for i in range(int(cuda["device_count"] or 0)):
                props = torch.cuda.get_device_properties(i)
                devices.append(
                    {
                        "index": i,
                        "name": props.name,
                        "capability": f"{props.major}.{props.minor}",
                        "memory_bytes": int(props.total_memory),
                    }
                )
            cuda["devices"] = devices
    facts["cuda"] = cuda
    compiler: dict[str, Any] = {"env_cxx": os.environ.get("CXX")}
    with contextlib.suppress(Exception):
        from torch._inductor import config as inductor_config

        compiler["config_cxx"] = repr(inductor_config.cpp.cxx)
    try:
        from torch._inductor.cpp_builder import get_cpp_compiler

        compiler["chosen"] = get_cpp_compiler()
    except Exception as exc:
        compiler["error"] = f"{type(exc).__name__}: {str(exc).strip()[:2000]}"
    facts["compiler"] = compiler
    facts["inductor_cache_dir"] = _guard(_inductor_cache_dir)
    facts["tempdir"] = USER_TEMPDIR or _guard(lambda: __import__("tempfile").gettempdir())
    facts["loaded_libraries"] = _guard(_loaded_runtime_libraries)
    return facts


def _guard(fn: Any) -> Any:
    try:
        return fn()
    except Exception as exc:
        return {"error": f"{type(exc).__name__}: {exc}"[:500]}


def _build_compiler(config_text: str) -> str | None:
    """`GCC 13.3` (or the clang line) from torch.__config__.show()."""
    for line in config_text.splitlines():
        text = line.strip().lstrip("- ").strip()
        if text.startswith(("GCC ", "clang ", "Clang ", "MSVC ")):
            return text
    return None


def _inductor_cache_dir() -> str:
    try:
        from torch._inductor.runtime.cache_dir_utils import cache_dir
    except ImportError:  # torch < 2.6 layout
        from torch._inductor.runtime.runtime_utils import cache_dir  # type: ignore[no-redef]
    return str(cache_dir())


def _loaded_runtime_libraries() -> list[str]:
    """Paths of the C++ runtime libraries mapped into this process (libstdc++, libgcc_s)."""
    found: list[str] = []
    with open("/proc/self/maps") as f:
        for line in f:
            parts = line.split(None, 5)
            path = parts[5].strip() if len(parts) == 6 else ""
            name = os.path.basename(path)
            if name.startswith(("libstdc++.so", "libgcc_s.so", "libc++.so")) and path not in found:
                found.append(path)
    return found


def _state_summary(t: Any) -> dict[str, Any]:
    """tensor_summary with the element count and the first 4 values (a counter's value)."""
    out = tensor_summary(t)
    if isinstance(t, torch.Tensor):
        out["numel"] = t.numel()
        first = t.detach().reshape(-1)[:4].cpu().tolist()
        out["first"] = [str(v) if isinstance(v, complex) else v for v in first]
    return out


def _detached(tree: Any) -> Any:
    """A copy of a call's outputs on the CPU (the next call may reuse their memory)."""
    return pytree.tree_map(
        lambda x: x.detach().cpu().clone() if isinstance(x, torch.Tensor) else x, tree
    )


def _has_leaves(tree: Any) -> bool:
    return bool(pytree.tree_flatten(tree)[0])


@contextlib.contextmanager
def _real_stderr() -> Iterator[int]:
    fd = os.dup(2)
    try:
        yield fd
    finally:
        os.close(fd)


PREWARM_ENV = "AOTIPRE_PREWARM"
"""Set (to a comma list of `cuda`, `loader`, `compiler`) to start a worker before its job
exists: it imports torch and the named parts, then waits for the job file (the parent writes it
atomically) for at most `AOTIPRE_PREWARM_WAIT_S` seconds (default 900)."""


def prewarm_and_wait(parts: str, job_path: str) -> float:
    """Pay the start-up costs now, then wait for the job; returns the seconds spent warming."""
    started = time.perf_counter()
    names = {p.strip() for p in parts.split(",") if p.strip()}
    with contextlib.suppress(Exception):
        if "compiler" in names:
            import torch._inductor.codecache  # noqa: F401
            import torch._inductor.compile_fx  # noqa: F401
            import torch.export.pt2_archive._package  # noqa: F401
        if "loader" in names:
            from torch.export import _tree_utils  # noqa: F401
        if "cuda" in names and torch.cuda.is_available():
            torch.cuda.init()
    warm_s = time.perf_counter() - started
    deadline = time.monotonic() + float(os.environ.get("AOTIPRE_PREWARM_WAIT_S", "900"))
    while not os.path.exists(job_path) and time.monotonic() < deadline:
        time.sleep(0.01)
    return warm_s


USER_TEMPDIR: str | None = None
"""The temp folder of the process that started the worker (doctor reports it as the package
extraction folder); the worker itself extracts into its job's folder, see private_tempdir."""


@contextlib.contextmanager
def users_tempdir() -> Iterator[None]:
    """Compile with the user's TMPDIR, not the worker's private one (private_tempdir).

    Inductor keeps its precompiled C++ headers (~280 MB of .gch on x86) under a folder it
    derives from `tempfile.gettempdir()` when torch._inductor.codecache is imported, in this
    process and in each of its compile subprocesses; it ignores TORCHINDUCTOR_CACHE_DIR there.
    Under the private TMPDIR every compiling worker rebuilt them: measured on the 2-core VM, a
    triage printer-2 compile took 14-15 s with a fresh TMPDIR against 6.5 s with the headers
    kept. Inductor removes its own temporary files; the headers stay where a user's process
    keeps them, like the rest of its cache."""
    users = _users_tempdir()
    if users is None:
        yield
        return
    import tempfile

    saved = {k: os.environ.get(k) for k in ("TMPDIR", "TMP", "TEMP")}
    for key in saved:
        os.environ[key] = users
    tempfile.tempdir = None
    codecache: Any = sys.modules.get("torch._inductor.codecache")
    if getattr(codecache, "_HEADER_DIR", None) is not None:  # imported under the private one
        from torch._inductor.runtime.cache_dir_utils import default_cache_dir

        codecache._HEADER_DIR = os.path.join(default_cache_dir(), "precompiled_headers")
        codecache._HEADER_LOCK_DIR = os.path.join(codecache._HEADER_DIR, "locks")
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        tempfile.tempdir = None


def _users_tempdir() -> str | None:
    """The TMPDIR of the user's process: aotipre's launcher pins Inductor's cache at
    `<that TMPDIR>/torchinductor_<user>` (contain.private_tmp) before giving the worker a
    private TMPDIR; None when the cache was put elsewhere (then nothing is moved)."""
    cache = os.environ.get("TORCHINDUCTOR_CACHE_DIR", "")
    if not os.path.basename(cache.rstrip("/")).startswith("torchinductor_"):
        return None
    parent = os.path.dirname(cache.rstrip("/"))
    return parent if os.path.isdir(parent) else None


def private_tempdir(workdir: str) -> None:
    """Point TMPDIR (C++ getenv too) at a folder inside the job's workdir, which aotipre removes.

    torch's loaders extract each package into `$TMPDIR/aotinductor_*`; from 2.14 the C++ loader
    does it and removes the folder in its destructor, which never runs here (os._exit below), so
    the folders would pile up in the user's TMPDIR."""
    import tempfile

    global USER_TEMPDIR
    USER_TEMPDIR = tempfile.gettempdir()
    # Inductor's compile cache defaults to $TMPDIR/torchinductor_<user>: pin it where it is
    # (it speeds up later compiles), so only the extraction folders move
    with contextlib.suppress(Exception):
        _inductor_cache_dir()
    tmp = os.path.join(workdir, "tmp")
    os.makedirs(tmp, exist_ok=True)
    os.environ["TMPDIR"] = tmp
    tempfile.tempdir = None


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        sys.stderr.write("usage: worker.py JOB.json\n")
        return 64
    prewarm_s = None
    if os.environ.get(PREWARM_ENV) is not None:
        prewarm_s = prewarm_and_wait(os.environ[PREWARM_ENV], argv[1])
        if not os.path.exists(argv[1]):
            sys.stderr.write(f"worker: no job at {argv[1]} before the prewarm wait ended\n")
            return 66
    with open(argv[1]) as f:
        job = json.load(f)
    if job.get("protocol") != PROTOCOL:
        sys.stderr.write(f"worker: job protocol {job.get('protocol')!r}, expected {PROTOCOL}\n")
        return 65
    faulthandler.enable(all_threads=True)
    if "libaotipre_backtrace" in os.environ.get("LD_PRELOAD", ""):
        # aotipre doctor's crash re-run: put the helper's faulting-instruction handler in front
        # of faulthandler's (aotipre/doctor/frames.py says why)
        with contextlib.suppress(Exception):
            import ctypes

            ctypes.CDLL(None).aotipre_backtrace_install()
    if job.get("workdir"):
        private_tempdir(job["workdir"])
    if job.get("capture_stdout"):
        _unbuffer_c_stdout()
    recorder = Recorder(os.environ.get("AOTIPRE_RESULT_PATH"))
    recorder.data["prewarm_s"] = prewarm_s
    custom_ops_at_start(recorder)
    recorder.flush()
    with _real_stderr() as real_fd:
        Worker(job, recorder, real_fd).run()
    sys.stdout.flush()
    sys.stderr.flush()
    # Skip interpreter teardown: destructors of loaded AOTI models and CUDA contexts can crash
    # or hang at exit, and every result is already on disk.
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
