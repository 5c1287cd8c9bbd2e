"""What a deployment pays at a cold start, measured in the worker: the load timed part by part
(process start and `import torch`, the loader's imports, torch's CPU-ISA probe, the
ExportedProgram, extraction, dlopen), the probe alone in a fresh process (the host's first
check's measure), and this process's memory. The perf stage's per-call measures are perf.py's."""

from __future__ import annotations

import contextlib
import os
import sys
import time
from typing import Any

import torch

from .loading import (
    _so_names,
    device_index,
    load_direct,
    load_package_like_torch,
    load_pt2_failures,
)

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


FORK_BASE: dict[str, Any] | None = None
"""In a worker forked by the fork server (zygote.py): the server's `process_age_s` before it
imported the loader and that import's `import_s`, measured at its own fresh start."""


WAITED_S = 0.0
"""A worker started before its job (prewarm): how long it waited for the job, not part of what
a deployment process pays before its load."""


def process_age_s() -> float | None:
    """Seconds since this process started (exec), from /proc (10 ms resolution), less any wait
    for its job: before the load, that is the interpreter's start and `import torch`."""
    age = _age_s()
    return None if age is None else max(0.0, age - WAITED_S)


def _age_s() -> float | None:
    try:
        with open("/proc/self/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        with open("/proc/uptime") as f:
            uptime = float(f.read().split()[0])
        return max(0.0, uptime - int(fields[19]) / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return None


def loader_modules() -> dict[str, Any]:
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


def _member_names(package: str, model: str) -> set[str]:
    """The file names of the model's AOTI members (what an extraction folder holds, the C++
    sources of a package_cpp_only package included)."""
    import zipfile

    with contextlib.suppress(Exception), zipfile.ZipFile(package) as zf:
        marker = f"/data/aotinductor/{model}/"
        return {os.path.basename(n) for n in zf.namelist() if marker in f"/{n}" and n[-1] != "/"}
    return set()


def _extraction(before: set[str], so_names: set[str], started: float) -> dict[str, Any]:
    """The folder this load extracted the model into: its files, bytes, and when the last file
    was written (seconds after the loader started; file times are as coarse as the kernel's
    clock tick, a few ms). `so_names`: names of the package's files the folder must hold (its
    .so files, else, for a package without one, its other files: torch 2.11 names the folder
    `/tmp/XXXXXX`, not `aotinductor_*`)."""
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
    direct: bool = False,
) -> tuple[Any, Any, str, dict[str, Any]]:
    """`load_package_like_torch`, timed part by part. Returns its (runner, ep, how) and:
    `import_s` (the loader's modules; 0 when this process had them), `cuda_init_s`, `total_s`
    (the load call), `probe` (torch's CPU-ISA probe `get_device_information`: seconds, the
    check programs it built and dlopened in child processes, how many of them needed g++ and
    how many of those failed - a failed build is not cached, so every cold start pays it again
    - and `base_checks_s`, the share that TORCHINDUCTOR_VEC_ISA_OK=1 skips), `exported_program_s`,
    `loader_s` (the C++ AOTIModelPackageLoader: extraction, dlopen, constants to the device),
    `extraction` (folder, files, bytes, seconds), `dlopen_constants_s`, `other_s`, and memory
    before and after.

    `direct`: the package is one that load_package would load with the probe and the C++
    loader alone (loading.same_as_load_package): only the C++ loader is run and timed here,
    and `import_s` and `probe` are left out, for the caller to fill in from the host's record
    of them (runner/loadcost.py), measured once in a fresh process."""
    if direct:
        return _measure_direct(path, model, index, device)
    out, mods = _imported_loader()
    if FORK_BASE is not None:
        # forked by the fork server: what a fresh process pays before the load is what the
        # server paid at its start (measured there, in this run), plus this worker's own age
        out["fresh_process"] = True
        out["forked"] = True
        out["process_age_s"] = (FORK_BASE["process_age_s"] or 0.0) + (out["process_age_s"] or 0.0)
        out["import_s"] = FORK_BASE["import_s"]
        out["loader_partly_imported"] = False  # the server imported them after torch alone
    if device.startswith("cuda") and torch.cuda.is_available():
        started = time.perf_counter()
        with contextlib.suppress(Exception):  # a broken CUDA fails the load itself, as it would
            torch.cuda.init()
            torch.cuda.synchronize(max(index, 0))
            out["cuda_init_s"] = time.perf_counter() - started
    with contextlib.suppress(Exception):
        out["memory_before"] = memory_snapshot(device)
    out["probe_cached"] = _probe_cached(mods)
    timer = CallTimer()
    before = _extraction_dirs()
    with timer, load_pt2_failures([] if failures is None else failures):
        vec = _patch_probe(timer, mods)
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


def measure_probe() -> dict[str, Any]:
    """What `aoti_load_package` pays before it touches a CPU package, measured in this fresh
    process as measure_load measures it: the loader's imports (`import_s`) and torch's CPU-ISA
    probe, the same `get_device_information("cpu")` call that torch's `_load_aoti` makes, timed
    part by part (`probe`). Beside it `fresh_process`, `probe_cached` and
    `loader_partly_imported` say whether this process could pay the whole of it (the host's
    record, runner/loadcost.py, keeps only one that did); `total_s` is the probe call's time."""
    out, mods = _imported_loader()
    out["probe_cached"] = _probe_cached(mods)
    timer = CallTimer()
    with timer:
        vec = _patch_probe(timer, mods)
        started = time.perf_counter()
        mods["codecache"].get_device_information("cpu")
        out["total_s"] = time.perf_counter() - started
    out["probe"] = _probe_breakdown(timer, vec)
    return out


def _imported_loader() -> tuple[dict[str, Any], dict[str, Any]]:
    """This process's facts before a load (whether it is fresh, its age, its torch), then the
    loader's modules imported and that import timed (`import_s`): (the facts, the modules)."""
    out: dict[str, Any] = {
        "fresh_process": "torch._inductor.package" not in sys.modules,
        "process_age_s": process_age_s(),
        "torch_version": torch.__version__,
        # something (a user's --import, a step before) imported part of the loader already
        "loader_partly_imported": "torch._inductor" in sys.modules,
    }
    started = time.perf_counter()
    mods = loader_modules()
    out["import_s"] = time.perf_counter() - started
    return out, mods


def _probe_cached(mods: dict[str, Any]) -> bool:
    """Whether torch's probe already answered in this process (its functools cache holds it)."""
    isa = mods["cpu_vec_isa"]
    cache_info = getattr(getattr(isa, "valid_vec_isa_list", None), "cache_info", None)
    return bool(cache_info and cache_info().currsize)


def _measure_direct(
    path: str, model: str, index: int, device: str
) -> tuple[Any, Any, str, dict[str, Any]]:
    out: dict[str, Any] = {
        "fresh_process": FORK_BASE is not None or "torch._inductor.package" not in sys.modules,
        "process_age_s": process_age_s(),
        "torch_version": torch.__version__,
        "direct": True,
    }
    if FORK_BASE is not None:
        out["forked"] = True
        out["process_age_s"] = (FORK_BASE["process_age_s"] or 0.0) + (out["process_age_s"] or 0.0)
    with contextlib.suppress(Exception):
        out["memory_before"] = memory_snapshot(device)
    timer = CallTimer()
    before = _extraction_dirs()
    with timer:
        timer.patch_class(torch._C._aoti, "AOTIModelPackageLoader", "loader")
        started = time.perf_counter()
        runner = load_direct(path, model, index)
        out["total_s"] = time.perf_counter() - started
    try:
        out["loader_s"] = timer.seconds("loader")
        out["loader_calls"] = timer.count("loader")
        _loader_parts(out, timer, before, path, model)
        out["other_s"] = max(0.0, out["total_s"] - (out["loader_s"] or 0.0))
        out["memory_after"] = memory_snapshot(device)
    except Exception as exc:
        out["measure_error"] = f"{type(exc).__name__}: {exc}"[:500]
    return runner, None, DIRECT_HOW, out


DIRECT_HOW = "the C++ loader, which load_package runs for this package after the host's probe"


def _loader_parts(
    out: dict[str, Any], timer: CallTimer, before: set[str], path: str, model: str
) -> None:
    """The C++ loader's extraction (folder, files, bytes, seconds) and `dlopen_constants_s`,
    the rest of its time, from the files the load wrote (after measure_load's timer)."""
    if not timer.starts:
        return
    names = _so_names(path, model) or _member_names(path, model)
    extraction = _extraction(before, names, timer.starts[-1])
    if extraction and out["loader_s"] is not None:
        extraction["written_s"] = min(max(extraction["written_s"], 0.0), out["loader_s"])
        out["dlopen_constants_s"] = out["loader_s"] - extraction["written_s"]
    out["extraction"] = extraction


def _load_breakdown(
    out: dict[str, Any], timer: CallTimer, vec: Any, before: set[str], path: str, model: str
) -> None:
    """The parts of a timed load (measure_load), from what its CallTimer saw."""
    out["probe"] = _probe_breakdown(timer, vec)
    out["exported_program_s"] = timer.seconds("exported_program")
    out["loader_s"] = timer.seconds("loader")
    out["loader_calls"] = timer.count("loader")
    _loader_parts(out, timer, before, path, model)
    known = sum(out[k] or 0.0 for k in ("exported_program_s", "loader_s"))
    out["other_s"] = max(0.0, out["total_s"] - known - (out["probe"]["seconds"] or 0.0))


def _patch_probe(timer: CallTimer, mods: dict[str, Any]) -> Any:
    """Time torch's CPU-ISA probe and its parts with `timer` (get_device_information, each
    check program's build and its dlopen child, g++); returns torch's VecISA class, or None."""
    timer.patch(mods["codecache"], "get_device_information", "probe")
    vec = getattr(mods["cpu_vec_isa"], "VecISA", None)
    if vec is not None:
        timer.patch(vec, "check_build", "check_build")
        timer.patch(vec, "_probe_load", "dlopen_child")
    timer.patch(getattr(mods["cpp_builder"], "CppBuilder", None), "build", "gxx")
    return vec


def _probe_breakdown(timer: CallTimer, vec: Any) -> dict[str, Any]:
    """The probe's seconds, check programs, dlopen children and g++ builds, from `timer`."""
    base_code = getattr(vec, "_avx_code", None)
    base_s = sum(
        spent for key, args, spent, _ in timer.events if key == "check_build" and base_code in args
    )
    return {
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
