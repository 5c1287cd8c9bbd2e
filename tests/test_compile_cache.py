"""The run's C++ compile cache (tests/compile_cache.py): an identical compile is answered with
the object g++ wrote, a different one is compiled, a failing one fails as g++ fails it."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests import compile_cache


def _stats(folder: Path) -> dict[str, int]:
    line = compile_cache.summary(folder)
    assert line is not None
    hits, total = (int(w) for w in line.split() if w.isdigit())
    return {"hits": hits, "total": total}


@pytest.fixture
def cache() -> Path:
    folder = os.environ.get(compile_cache.ENV)
    if not folder or folder == "0" or shutil.which("g++") != str(Path(folder) / "bin" / "g++"):
        pytest.skip("this run has no compile cache (no ccache in the venv, or turned off)")
    return Path(folder)


def _real_gxx(cache: Path) -> str:
    rest = [d for d in os.environ["PATH"].split(os.pathsep) if Path(d) != cache / "bin"]
    real = shutil.which("g++", path=os.pathsep.join(rest))
    assert real is not None
    return real


def test_an_identical_compile_is_answered_with_the_object_gxx_wrote(
    cache: Path, tmp_path: Path
) -> None:
    src = tmp_path / "a.cpp"
    src.write_text(f"int answer() {{ return {os.getpid()}; }}\n")  # new to this run's cache
    real = _real_gxx(cache)
    before = _stats(cache)
    for out in ("cached1.o", "cached2.o"):
        subprocess.run(["g++", "-O1", "-c", str(src), "-o", str(tmp_path / out)], check=True)
    subprocess.run([real, "-O1", "-c", str(src), "-o", str(tmp_path / "plain.o")], check=True)
    after = _stats(cache)
    assert after["total"] - before["total"] >= 2 and after["hits"] - before["hits"] >= 1
    plain = (tmp_path / "plain.o").read_bytes()
    assert (tmp_path / "cached1.o").read_bytes() == plain
    assert (tmp_path / "cached2.o").read_bytes() == plain
    # another source is compiled, not answered from the cache
    src.write_text(f"int answer() {{ return {os.getpid() + 1}; }}\n")
    subprocess.run(["g++", "-O1", "-c", str(src), "-o", str(tmp_path / "other.o")], check=True)
    assert (tmp_path / "other.o").read_bytes() != plain


def test_a_failing_compile_fails_as_gxx_fails_it(cache: Path, tmp_path: Path) -> None:
    src = tmp_path / "bad.cpp"
    src.write_text("int f() { return undeclared_name; }\n")
    real = _real_gxx(cache)
    runs = [
        subprocess.run([exe, "-c", str(src), "-o", str(tmp_path / "bad.o")], capture_output=True)
        for exe in ("g++", "g++", real)
    ]
    assert [r.returncode for r in runs] == [runs[2].returncode] * 3 != [0] * 3
    assert runs[0].stderr == runs[1].stderr == runs[2].stderr
    assert b"undeclared_name" in runs[0].stderr
