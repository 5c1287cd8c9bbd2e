"""The Python interpreters the torch workers run in (`--python`, config key `python`).

aotipre runs where it is installed; its workers (aotipre/runner/worker/: the standard library
and torch, no aotipre import) can run in another interpreter, e.g. the serving image's venv
with the exact torch of the deployment. `probe` validates one interpreter in a subprocess that
imports nothing heavy (torch's version comes from its installed metadata), started, bounded
and reaped as every worker is (runner.proc.run_process); aotipre.fleet.matrix runs a package's
dynamic stages once per interpreter (a version matrix) and merges the runs.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from aotipre.environment.versions import SUPPORTED_TEXT, is_supported
from aotipre.foundation.errors import UsageError

PROBE_TIMEOUT_S = 60.0
PROBE_OUTPUT_BYTES = 64 * 1024
"""How much of the end of the probe's stdout and stderr is kept (its answer is one short line)."""
MIN_PYTHON = (3, 10)
STATIC_STAGES = frozenset({"inspect", "inputs", "static", "diff", "baseline"})
"""Stages that read the package only: the same whichever interpreter runs the workers."""
TORCH_HINT = (
    "install torch pinned first (e.g. pip install torch==2.13.0), then pip install "
    "'aotipre[torch]'; or run the workers in an interpreter that has torch with --python PATH "
    "(the static checks, --static-only, need no torch)"
)

# Runs in the probed interpreter: nothing but the standard library, and torch is not imported
# (its version is read from the installed metadata, else from torch/version.py as text).
_PROBE = r"""
import json, os, re, sys
if sys.path and sys.path[0] == "":
    del sys.path[0]  # `-c` puts the working folder first; the workers never have it
out = {"python": sys.version.split()[0], "version_info": list(sys.version_info[:2]),
       "executable": sys.executable, "torch": None, "torch_path": None}
try:
    import importlib.util
    spec = importlib.util.find_spec("torch")
except Exception as exc:
    spec = None
    out["torch_error"] = "%s: %s" % (type(exc).__name__, exc)
if spec is not None and spec.origin:
    out["torch_path"] = os.path.dirname(spec.origin)
    try:
        from importlib import metadata
        out["torch"] = metadata.version("torch")
    except Exception:
        try:
            with open(os.path.join(out["torch_path"], "version.py")) as f:
                m = re.search(r"__version__\s*=\s*['\"]([^'\"]+)", f.read())
            out["torch"] = m.group(1) if m else None
        except OSError:
            pass
print("@@aotipre-probe " + json.dumps(out))
"""


@dataclass(frozen=True)
class Runtime:
    """One interpreter the workers run in, with the torch it holds."""

    python: str
    """The interpreter as the workers are started: the path given (made absolute), not
    resolved through symbolic links (a venv's bin/python is a link to the base Python)."""
    python_version: str
    torch_version: str
    torch_path: str
    shown: str
    """The path as the user wrote it (or `sys.executable` for the default)."""

    @property
    def label(self) -> str:
        return f"torch {self.torch_version}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "python": self.python,
            "python_version": self.python_version,
            "torch": self.torch_version,
            "torch_path": self.torch_path,
        }


_PROBED: dict[tuple[str | None, str], Runtime] = {}
"""Interpreters this process has probed successfully (key: the name given, the path run)."""


def remember(runtime: Runtime) -> None:
    """Take `runtime` as probed (its caller resolved it), so that `probe` answers from it."""
    _PROBED[(runtime.python, runtime.python)] = runtime


def probe(python: str | None = None, *, timeout_s: float = PROBE_TIMEOUT_S) -> Runtime:
    """Validate an interpreter (None: the running one) and read its torch's version.

    Raises UsageError (one line; the CLI exits 2) when it does not exist, does not run, is not
    a Python 3.10+, or has no torch, or a torch outside the supported range.
    """
    given = python is not None
    where = f"--python {python}" if given else f"this Python ({sys.executable})"
    path = _locate(python) if python is not None else sys.executable
    key = (python, path)
    if key in _PROBED:
        return _PROBED[key]
    info = _run_probe(path, where, timeout_s)
    version = tuple(info.get("version_info") or (0, 0))
    if version < MIN_PYTHON:
        raise UsageError(
            f"{where}: Python {info.get('python')}; aotipre's workers need Python "
            f"{MIN_PYTHON[0]}.{MIN_PYTHON[1]} or newer"
        )
    torch_version = info.get("torch")
    if not torch_version:
        raise UsageError(
            f"the dynamic stages need torch, and {where} has none: {TORCH_HINT}"
            if not given
            else f"{where}: no torch installed in that interpreter (its workers need torch "
            f"{SUPPORTED_TEXT})"
        )
    if not is_supported(str(torch_version)):
        raise UsageError(
            f"{where}: torch {torch_version}; aotipre's workers support torch {SUPPORTED_TEXT}"
        )
    runtime = Runtime(
        python=path,
        python_version=str(info.get("python")),
        torch_version=str(torch_version),
        torch_path=str(info.get("torch_path") or ""),
        shown=python if python is not None else sys.executable,
    )
    _PROBED[key] = runtime
    return runtime


def resolve(pythons: Sequence[str]) -> tuple[Runtime, ...]:
    """Probe each interpreter once (in order, duplicates dropped); () -> the running one."""
    if not pythons:
        return (probe(None),)
    seen: dict[str, Runtime] = {}
    for python in pythons:
        runtime = probe(python)
        seen.setdefault(runtime.python, runtime)
    return tuple(seen.values())


def _locate(python: str) -> str:
    """An absolute path for `python`: a value with a path separator names exactly that file
    (relative to the working folder; a config file's values come here already made absolute or
    `./`-prefixed, see config._pythons), only a bare name is looked up on PATH."""
    if os.sep not in python and (os.altsep is None or os.altsep not in python):
        found = shutil.which(python)
        if found is None:
            raise UsageError(f"--python {python}: not found on PATH")
        return os.path.abspath(found)
    path = os.path.abspath(os.path.expanduser(python))
    if os.path.isdir(path):
        raise UsageError(f"--python {python}: a folder, not an interpreter (e.g. VENV/bin/python)")
    if not os.path.exists(path):
        raise UsageError(f"--python {python}: no such file")
    if not os.path.isfile(path):
        raise UsageError(f"--python {python}: not a regular file")
    if not os.access(path, os.X_OK):
        raise UsageError(f"--python {python}: not executable")
    return path


def _run_probe(path: str, where: str, timeout_s: float) -> dict[str, Any]:
    """Run the probe in `path` as every worker runs (runner.proc.run_process: its own session
    and process group, reaped with every descendant, only the ends of its output kept, read
    under the deadline); its answer, or UsageError (one line)."""
    from aotipre.runner.proc import run_process

    outcome = run_process(
        [path, "-c", _PROBE],
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
        timeout_s=timeout_s,
        max_capture_bytes=PROBE_OUTPUT_BYTES,
    )
    if outcome.start_error is not None:
        raise UsageError(f"{where}: cannot run it ({outcome.start_error})")
    if outcome.interrupted:
        raise UsageError(f"{where}: the probe was interrupted")
    if outcome.timed_out:
        raise UsageError(f"{where}: did not answer within {timeout_s:g} s")
    info = _probe_answer(outcome.stdout_tail)
    if info is None:
        how = (
            f"killed by {outcome.signal_name}"
            if outcome.signal is not None
            else f"exited {outcome.returncode}"
        )
        flood = (
            f", after {outcome.stdout_total_bytes} bytes of output"
            if outcome.stdout_truncated
            else ""
        )
        raise UsageError(
            f"{where}: not a Python interpreter, or a broken one (it {how} without answering "
            f"the probe{flood})"
        )
    return info


def _probe_answer(stdout: str) -> dict[str, Any] | None:
    for line in stdout.splitlines():
        if line.startswith("@@aotipre-probe "):
            try:
                data = json.loads(line.split(" ", 1)[1])
            except ValueError:
                return None
            return data if isinstance(data, dict) else None
    return None
