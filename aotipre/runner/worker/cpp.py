"""Custom operators (registered before any step) and aotipre's C++ harness (aotipre/cpp): the
toolchain, the build (cached per torch and compiler), runs of the binary, the loader-race check."""

from __future__ import annotations

import contextlib
import faulthandler
import json
import os
import re
import sys
import time
from typing import Any

import torch
import torch.utils._pytree as pytree

from .compare import compare_outputs
from .core import WorkerCore
from .inputs import flat_tensors, tensor_summary
from .protocol import LOG_TAIL_BYTES, CustomOpsFailed, Recorder, StepError

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


CUSTOM_OPS_PHASE = "custom-ops"
"""The phase a worker that dies while registering --import/--library records (stages/custom_ops.py
reads it: the registration is blamed, not the step that never started)."""


def custom_ops_at_start(recorder: Recorder, job: dict[str, Any]) -> None:
    """Register $AOTIPRE_CUSTOM_OPS before any step; record what was done or what failed.

    A hanging import or library constructor costs one step timeout, not the job's whole budget
    (the sum of its steps' timeouts): the step watchdog is armed around the registration, and the
    first step is recorded as current with this phase, so a death here is blamed on it."""
    text = os.environ.get(CUSTOM_OPS_ENV)
    if not text:
        return
    steps = job.get("steps") or []
    if steps:
        recorder.data["current"] = {
            "id": steps[0].get("id"), "phase": CUSTOM_OPS_PHASE, "started": time.time(),
        }  # fmt: skip
        recorder.flush()
    faulthandler.dump_traceback_later(float(job.get("step_timeout_s", 300)), exit=True)
    try:
        recorder.data["custom_ops"] = register_custom_ops(json.loads(text))
    except (CustomOpsFailed, ValueError) as exc:
        recorder.data["custom_ops"] = {"error": str(exc)}
    finally:
        faulthandler.cancel_dump_traceback_later()
    recorder.data.pop("current", None)


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
    if step.get("stateful"):
        argv.append("--stateful")
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


class CppOps(WorkerCore):
    """Steps `custom_ops`, `cpp_build`, `cpp_inputs`, `cpp_run`, `cpp_compare`."""

    def op_custom_ops(self, step: dict[str, Any], entry: dict[str, Any]) -> None:
        """Whether each op named in the step is registered in this process."""
        entry["ops"] = {name: op_schema_status(name) for name in step.get("ops") or []}
        entry["registered"] = self.rec.data.get("custom_ops")

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
