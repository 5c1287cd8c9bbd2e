"""The C++ toolchain AOTInductor builds with and the libstdc++ libraries involved (torch-free)."""

from __future__ import annotations

import functools
import os
import re
import shutil
import sys
from dataclasses import dataclass
from typing import Any

from aotipre.foundation import tempdirs
from aotipre.runner.proc import run_process

# How torch picks the compiler (torch/_inductor/config.py `cpp.cxx`, cpp_builder.get_cpp_compiler):
# `config.cpp.cxx = (None, os.environ.get("CXX", "g++"))` on Linux; cpp_compiler_search tries each
# entry with `--version` and takes the first that runs. `None` means "install g++ from
# conda-forge" and is skipped unless TORCH_INDUCTOR_INSTALL_GXX is set. The worker asks torch
# itself (`get_cpp_compiler()`); `default_cxx()` is the torch-free mirror of that choice.

HELLO_SOURCE = """\
#include <string>
#include <vector>
extern "C" int aotipre_hello(const char* text) {
  std::vector<std::string> words{std::string(text), "cpu"};
  return static_cast<int>(words[0].size() + words[1].size());
}
"""
"""A C++ shared library like the ones AOTI builds (libstdc++ headers, -shared -fPIC)."""
HELLO_TIMEOUT_S = 60.0
QUERY_TIMEOUT_S = 15.0
_GLIBCXX = re.compile(rb"GLIBCXX_(\d+(?:\.\d+)+)\x00")
_CXXABI = re.compile(rb"CXXABI_(\d+(?:\.\d+)+)\x00")
_SO_VERSION = re.compile(r"libstdc\+\+\.so\.(\d+(?:\.\d+)*)$")
MAX_LIBRARY_BYTES = 64 * 1024 * 1024


def default_cxx() -> str:
    """The compiler torch would pick, without asking torch: `$CXX`, else g++ (clang++ on macOS)."""
    return os.environ.get("CXX") or ("clang++" if sys.platform == "darwin" else "g++")


def version_key(version: str | None) -> tuple[int, ...]:
    """`3.4.32` -> (3, 4, 32); None -> () (sorts first)."""
    if not version:
        return ()
    return tuple(int(p) for p in version.split(".") if p.isdigit())


@dataclass(frozen=True)
class LibraryInfo:
    """One libstdc++ shared library, read as a file (nothing is loaded)."""

    path: str
    """As found (a symlink like libstdc++.so.6, or what /proc/self/maps named)."""
    real_path: str
    so_version: str | None
    """From the real file name: `6.0.32` for libstdc++.so.6.0.32."""
    glibcxx: str | None
    """The newest GLIBCXX_ symbol version the library provides (e.g. 3.4.32 for GCC 13)."""
    cxxabi: str | None
    """The newest CXXABI_ symbol version."""
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "real_path": self.real_path,
            "so_version": self.so_version,
            "glibcxx": self.glibcxx,
            "cxxabi": self.cxxabi,
            "error": self.error,
        }

    @property
    def label(self) -> str:
        if self.error:
            return f"{self.path} ({self.error})"
        shown = self.real_path if self.real_path != self.path else self.path
        provides = f"GLIBCXX up to {self.glibcxx}" if self.glibcxx else "GLIBCXX unknown"
        return f"{shown} ({provides})"


def inspect_library(path: str) -> LibraryInfo:
    """Versions a libstdc++ provides, from its file name and the symbol-version strings in it."""
    real = os.path.realpath(path)
    m = _SO_VERSION.search(os.path.basename(real))
    so_version = m.group(1) if m else None
    try:
        with open(real, "rb") as f:
            data = f.read(MAX_LIBRARY_BYTES)
    except OSError as exc:
        return LibraryInfo(path, real, so_version, None, None, error=exc.strerror or str(exc))
    glibcxx = _newest(_GLIBCXX.findall(data))
    cxxabi = _newest(_CXXABI.findall(data))
    return LibraryInfo(path, real, so_version, glibcxx, cxxabi)


def _newest(found: list[bytes]) -> str | None:
    versions = {v.decode() for v in found}
    return max(versions, key=version_key) if versions else None


@dataclass(frozen=True)
class CompilerInfo:
    """The C++ compiler AOTI uses, how torch chose it, and whether it builds a shared library."""

    name: str | None
    """What torch chose (e.g. `g++`), or None when torch found none."""
    path: str | None
    """`name` resolved on PATH."""
    how: str
    """How the choice was made, in words."""
    version: str | None = None
    """The first line of `--version`."""
    libstdcxx: str | None = None
    """`<cxx> -print-file-name=libstdc++.so.6`, resolved; None when the compiler does not say."""
    works: bool = False
    """It built HELLO_SOURCE into a shared library."""
    error: str | None = None
    """Why not: torch found no compiler, or the build's error lines."""
    build_s: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "path": self.path,
            "how": self.how,
            "version": self.version,
            "libstdcxx": self.libstdcxx,
            "works": self.works,
            "error": self.error,
            "build_s": round(self.build_s, 3),
        }


def describe_choice(torch_compiler: dict[str, Any] | None) -> tuple[str | None, str]:
    """(compiler name, how it was chosen) from the worker's `compiler` facts, or the mirror."""
    cxx_env = os.environ.get("CXX")
    env = f"$CXX={cxx_env}" if cxx_env else "$CXX unset"
    if not torch_compiler:
        name = default_cxx()
        return name, f"torch not asked; $CXX or g++ ({env})"
    config = torch_compiler.get("config_cxx") or "?"
    if torch_compiler.get("error"):
        return None, (
            f"torch._inductor.config.cpp.cxx = {config} ({env}): none of them runs "
            f"({torch_compiler['error'].splitlines()[0]})"
        )
    chosen = torch_compiler.get("chosen")
    return chosen, (
        f"torch._inductor.cpp_builder.get_cpp_compiler(): the first of "
        f"config.cpp.cxx = {config} that runs ({env})"
    )


def probe_compiler(name: str | None, how: str, workdir: str | None = None) -> CompilerInfo:
    """Resolve the compiler, ask its version and libstdc++, and build a hello-world .so."""
    if name is None:
        return CompilerInfo(None, None, how, error="torch found no working C++ compiler")
    path = shutil.which(name)
    if path is None:
        return CompilerInfo(name, None, how, error=f"{name!r} is not on PATH")
    version_out = run_process([path, "--version"], timeout_s=QUERY_TIMEOUT_S)
    version = _first_line(version_out.stdout_tail) if version_out.ok else None
    lib = ask_libstdcxx(path)
    own_dir = workdir is None
    directory = workdir or tempdirs.make_dir("aotipre-hello-")
    try:
        source = os.path.join(directory, "aotipre_hello.cpp")
        target = os.path.join(directory, "aotipre_hello.so")
        with open(source, "w") as f:
            f.write(HELLO_SOURCE)
        built = run_process(
            [path, "-std=c++17", "-O1", "-shared", "-fPIC", source, "-o", target],
            timeout_s=HELLO_TIMEOUT_S,
            cwd=directory,
        )
        works = built.ok and os.path.isfile(target)
        error = None
        if not works:
            lines = [ln for ln in built.stderr_tail.splitlines() if ln.strip()][-4:]
            error = f"building a hello-world shared library failed ({built.summary})" + (
                ": " + " | ".join(ln.strip() for ln in lines) if lines else ""
            )
        return CompilerInfo(name, path, how, version, lib, works, error, build_s=built.duration_s)
    finally:
        if own_dir:
            shutil.rmtree(directory, ignore_errors=True)


@functools.lru_cache(maxsize=8)
def compiler_libstdcxx(cxx: str | None = None) -> str | None:
    """The libstdc++.so.6 the compiler links against, or None when it names none.

    `cxx` defaults to the compiler torch would pick (`default_cxx()`). A compiler that does not
    know the file prints the bare name back; that, or any failure, gives None.
    """
    exe = shutil.which(cxx or default_cxx())
    return None if exe is None else ask_libstdcxx(exe)


def ask_libstdcxx(exe: str) -> str | None:
    """`exe -print-file-name=libstdc++.so.6`, normalized; None when it names no file."""
    out = run_process([exe, "-print-file-name=libstdc++.so.6"], timeout_s=QUERY_TIMEOUT_S)
    if not out.ok:
        return None
    printed = out.stdout_tail.strip()
    if not os.path.isabs(printed) or not os.path.isfile(printed):
        return None
    # `/usr/lib/gcc/x86_64-linux-gnu/13/../../../x86_64-linux-gnu/libstdc++.so.6` -> the path a
    # person would write in LD_PRELOAD (the soname link, not its versioned target)
    normal = os.path.normpath(printed)
    return normal if os.path.isfile(normal) else os.path.realpath(printed)


def _first_line(text: str) -> str | None:
    for line in text.splitlines():
        if line.strip():
            return line.strip()
    return None
