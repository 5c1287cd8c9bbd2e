"""This host as a torch process sees it (aotipre doctor's facts and canary), the temp folders
the worker uses (a private one for extractions, the user's for compiles), and prewarming."""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Iterator
from typing import Any

import torch

from .core import WorkerCore


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


PREWARM_ENV = "AOTIPRE_PREWARM"
"""Set (to a comma list of `cuda`, `loader`, `compiler`) to start a worker before its job
exists: it imports torch and the named parts, then waits for the job file (the parent writes it
atomically) for at most `AOTIPRE_PREWARM_WAIT_S` seconds (default 900). While it waits, the
file `JOB.waiting` exists (WAITING_SUFFIX): the parent hands a job only to a worker that waits."""
WAITING_SUFFIX = ".waiting"


def prewarm_and_wait(parts: str, job_path: str) -> tuple[float, float]:
    """Pay the start-up costs now, then wait for the job; returns the seconds spent warming and
    the seconds spent waiting after that."""
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
    with contextlib.suppress(OSError):
        open(job_path + WAITING_SUFFIX, "w").close()
    deadline = time.monotonic() + float(os.environ.get("AOTIPRE_PREWARM_WAIT_S", "900"))
    waiting = time.monotonic()
    while not os.path.exists(job_path) and time.monotonic() < deadline:
        time.sleep(0.01)
    return warm_s, time.monotonic() - waiting


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
    """The TMPDIR of the user's process: aotipre's launcher says it (AOTIPRE_USER_TMPDIR,
    contain.private_tmp) and pins Inductor's cache at `<that TMPDIR>/torchinductor_<user>`
    unless the user put it elsewhere (the headers stay under the TMPDIR either way, as in the
    user's own process); None when neither tells (then nothing is moved)."""
    given = os.environ.get("AOTIPRE_USER_TMPDIR", "")
    if given and os.path.isdir(given):
        return given
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
    # (it speeds up later compiles), so only the extraction folders move. aotipre's launcher
    # sets TORCHINDUCTOR_CACHE_DIR already; then torch's cache_dir() (2.11-2.15) only makes it
    # absolute and creates it, done here: importing torch._inductor for it (1.1 s on the 2-core
    # VM) would put the loader's import before the load, where the perf stage cannot see it
    pinned = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    with contextlib.suppress(Exception):
        if pinned:
            os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.abspath(pinned)
            os.makedirs(os.environ["TORCHINDUCTOR_CACHE_DIR"], exist_ok=True)
        else:
            _inductor_cache_dir()
    tmp = os.path.join(workdir, "tmp")
    os.makedirs(tmp, exist_ok=True)
    os.environ["TMPDIR"] = tmp
    tempfile.tempdir = None


class HostOps(WorkerCore):
    """Steps `facts` and `canary_program` (aotipre doctor and the check canary)."""

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
