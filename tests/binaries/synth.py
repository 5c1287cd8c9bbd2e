"""Synthetic packages for the binary checks: a real package with some members' bytes replaced
(zip rewritten, every member STORED as torch writes them). Named as such in the tests."""

from __future__ import annotations

import shutil
import subprocess
import zipfile
from collections.abc import Callable
from pathlib import Path

DATA = Path(__file__).resolve().parent / "data"
TORCH211 = Path(__file__).resolve().parents[1] / "data" / "torch211"


def rewrite(src: Path, dst: Path, replace: Callable[[str, bytes], bytes | None]) -> Path:
    """Copy `src` to `dst`, passing each member through `replace` (None drops it)."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w", zipfile.ZIP_STORED) as zout:
        for info in zin.infolist():
            data = replace(info.filename, zin.read(info.filename))
            if data is not None:
                zout.writestr(info.filename, data)
    return dst


def member(src: Path, suffix: str) -> bytes:
    with zipfile.ZipFile(src) as zf:
        (name,) = [n for n in zf.namelist() if n.endswith(suffix)]
        return zf.read(name)


def cuda_package(tmp: Path, cubins: list[str], so_from: Path) -> Path:
    """torch 2.11's aoti_cuda archive (stub binaries) with real GPU code from tests/binaries/data
    in place of its cubin stubs (in order; the rest dropped) and a real x86-64 .so (from a CPU
    package: its shim imports are CPU ones, enough for the GPU-code checks)."""
    so = member(so_from, ".wrapper.so")
    pending = list(cubins)

    def swap(name: str, data: bytes) -> bytes | None:
        if name.endswith(".wrapper.so"):
            return so
        if name.endswith(".cubin"):
            if not pending:
                return None
            return (DATA / pending.pop(0)).read_bytes()
        return data

    out = rewrite(TORCH211 / "aoti_cuda.pt2", tmp / "synthetic_cuda.pt2", swap)
    assert not pending, "the archive has fewer cubin members than asked for"
    return out


def compile_so(tmp: Path, source: str, *flags: str, name: str = "lib.so") -> Path | None:
    """Build a tiny shared object with the system C compiler; None when there is none."""
    cc = shutil.which("gcc") or shutil.which("cc")
    if cc is None:
        return None
    src = tmp / (name + ".c")
    src.write_text(source)
    out = tmp / name
    done = subprocess.run(
        [cc, "-O1", "-shared", "-fPIC", *flags, str(src), "-o", str(out)],
        capture_output=True,
        text=True,
        check=False,
    )
    return out if done.returncode == 0 else None
