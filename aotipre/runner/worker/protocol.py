"""The worker's protocol with its parent: the job and result files, per-step logs, progress
markers on stderr, and the errors a step reports itself (not exceptions from torch)."""

from __future__ import annotations

import contextlib
import json
import os
import sys
import threading
import traceback
from collections.abc import Iterator
from typing import Any

import torch

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
        self.lock = threading.Lock()
        """Flushes come from several threads (the compile's phase hooks run in Inductor's
        autotuning and build threads under max_autotune): one rewrite at a time."""

    def flush(self) -> None:
        """Rewrite the result file (only from the worker process itself: a forked child of a
        compile never writes its parent's result)."""
        if not self.path or os.getpid() != self.data["pid"]:
            return
        with self.lock:
            try:
                text = json.dumps(self.data, default=str)
            except RuntimeError:  # another thread changed it meanwhile: its own flush follows
                return
            tmp = f"{self.path}.tmp"
            with open(tmp, "w") as f:
                f.write(text)
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


@contextlib.contextmanager
def _real_stderr() -> Iterator[int]:
    fd = os.dup(2)
    try:
        yield fd
    finally:
        os.close(fd)


# --------------------------------------------------------------------------------------------
# Errors


def exception_info(exc: BaseException) -> dict[str, Any]:
    tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    return {
        "type": type(exc).__name__,
        "message": str(exc)[:20000],
        "traceback": tb[-8000:],
    }


def first_error_line(exc: BaseException) -> str:
    text = " ".join(line.strip() for line in str(exc).splitlines() if line.strip())
    return f"{type(exc).__name__}: {text[:400]}"


class StepError(Exception):
    """A step failed in a way the worker reports itself (not an exception from torch)."""


class CustomOpsFailed(StepError):
    """Registering --import / --library failed before any step ran."""


class InputsFailed(StepError):
    """The sample inputs could not be loaded or moved to the device (not the model's fault)."""


# Torch versions (2.11-2.15): what the worker uses of torch's internals is checked where it is
# used, and a missing piece is a StepError saying "not available in torch X", never an
# AttributeError from deep inside torch.


def not_available(what: str) -> StepError:
    return StepError(f"{what} is not available in torch {torch.__version__}")
