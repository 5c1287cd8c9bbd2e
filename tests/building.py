"""Package builders run the way the real tests build their packages: in a fresh interpreter
(torch's state stays out of pytest's process), through the public API."""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED_BUILDS = REPO / ".fixture-cache" / "builds"
"""Where `shared_build` keeps its outputs, one folder per key, between modules, workers and runs."""


def build(
    builder: str | Path,
    out: Path,
    *args: str,
    timeout: float = 900,
    python: str | Path = sys.executable,
) -> Path:
    """Run `builder` (a script path, or Python code for `-c`) with `out` and `args` in `python`
    (this torch by default; another venv's for its torch); a failed build fails the test with
    the builder's stderr. Returns `out`."""
    code = ["-c", builder] if isinstance(builder, str) else [str(builder)]
    proc = subprocess.run(
        [str(python), *code, str(out), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    return out


def check_json(tmp: Path, *args: str) -> tuple[int, dict]:
    """`aotipre check ARGS --no-config` in a fresh process, its JSON report written under `tmp`
    (a cache there too): (exit code, report)."""
    out = tmp / f"report-{len(list(tmp.glob('report-*')))}.json"
    proc = subprocess.run(
        [
            sys.executable, "-m", "aotipre", "check", *args, "--no-config",
            "--format", "json", "--output", str(out), "--cache-dir", str(tmp / "cache"),
        ],
        capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip
    assert out.is_file(), proc.stderr[-3000:]
    return proc.returncode, json.loads(out.read_text())


def run_cache_dir(basetemp: Path) -> Path:
    """One aotipre cache folder (`--cache-dir`) for the whole pytest run, shared by its xdist
    workers: the C++ harness (~25 s of g++ over torch's headers), the host's CPU-ISA probe record
    and compiled packages are made once per run, not once per test module or worker. `basetemp`
    is `tmp_path_factory.getbasetemp()`; an xdist worker's is `<run's basetemp>/<worker id>`.
    For tests whose subject is not the cache; a test about the cache (its build, its trust, a
    damaged or tampered entry) uses a folder of its own."""
    root = basetemp.parent if os.environ.get("PYTEST_XDIST_WORKER") else basetemp
    folder = root / "aotipre-cache"
    folder.mkdir(mode=0o700, exist_ok=True)  # another worker may make it at the same moment
    return folder


def torch_version(python: str | Path = sys.executable) -> str:
    """The torch release installed for `python`, read from its metadata (no `import torch`)."""
    code = "import importlib.metadata as m; print(m.version('torch'))"
    proc = subprocess.run(
        [str(python), "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    return proc.stdout.strip()


def compile_environment() -> str:
    """What decides the code a compile emits besides torch and the builder: inductor's and
    ATen's settings in the environment (TORCHINDUCTOR_CPP_MARCH, ATEN_CPU_CAPABILITY) and the
    CPU flags the host shows; scripts/simulate_host.sh changes all three."""
    settings = sorted(
        (name, value)
        for name, value in os.environ.items()
        if name.startswith(("TORCHINDUCTOR_", "ATEN_CPU_"))
    )
    try:
        cpuinfo = Path("/proc/cpuinfo").read_text(errors="replace").splitlines()
    except OSError:
        cpuinfo = []
    flags = next((line for line in cpuinfo if line.startswith("flags")), "")
    return repr((settings, flags))


def shared_build(
    builder: Path,
    *args: str,
    sources: tuple[Path, ...] = (),
    timeout: float = 900,
    python: str | Path = sys.executable,
) -> Path:
    """The folder `builder` writes when run as `build(builder, folder, *args)`, built once and
    shared by every test module and pytest worker that asks for the same thing, and by later
    runs: keyed by the builder's source, the `sources` it imports, `args`, the torch release
    of `python` (as .fixture-cache/torch-<version>/ is for fixtures/) and the compile
    environment. Read it, never write to it."""
    version = torch_version(python)
    key = f"{version}\0{Path(python).resolve()}\0{args!r}\0{compile_environment()}\0"
    digest = hashlib.sha256(key.encode())
    for path in (builder, *sources):
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    home = SHARED_BUILDS / f"torch-{version}"
    out = home / f"{builder.stem}-{digest.hexdigest()[:16]}"
    home.mkdir(parents=True, exist_ok=True)
    with open(home / ".build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another pytest worker may be building the same key
        if not out.is_dir():
            partial = Path(tempfile.mkdtemp(prefix=".tmp-", dir=home))
            try:
                build(builder, partial, *args, timeout=timeout, python=python)
                os.replace(partial, out)
            finally:
                shutil.rmtree(partial, ignore_errors=True)
    return out
