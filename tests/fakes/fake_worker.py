"""A stand-in for the torch worker that misbehaves on demand: `python fake_worker.py MODE [ARG]`.

Modes: ok, segv, abort, hang PIDFILE, hang-ignore-term PIDFILE, orphan PIDFILE, spew, oom,
exit0-no-result, bad-json, not-object, exit N. Standard library only, so it starts fast.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import time

SPEW_CHUNK = b"x" * (1024 * 1024 - 1) + b"\n"
SPEW_CHUNKS = 200
SPEW_END = b"END-OF-SPEW\n"
SPEW_STDOUT_BYTES = len(SPEW_CHUNK) * SPEW_CHUNKS + len(SPEW_END)
SPEW_STDERR = b"spewing to stdout\n"
OK_RESULT = {"status": "ok", "outputs": [[1.0, 2.0]], "note": "fake"}
ABORT_MESSAGE = (
    "terminate called after throwing an instance of 'c10::Error'\n"
    "  what():  run_func_(...) API call failed at model_container_runner.cpp, line 147\n"
)


def _err(text: str) -> None:
    sys.stderr.write(text)
    sys.stderr.flush()


def _write_result(text: str) -> None:
    path = os.environ["AOTIPRE_RESULT_PATH"]
    tmp = f"{path}.tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def _spawn_sleeper(pidfile: str) -> None:
    """A grandchild in our process group that holds our stdout/stderr open."""
    sleeper = subprocess.Popen(["sleep", "1000"])
    tmp = f"{pidfile}.tmp"
    with open(tmp, "w") as f:
        f.write(str(sleeper.pid))
    os.replace(tmp, pidfile)


def main(argv: list[str]) -> int:
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # crash modes must not leave core files
    mode = argv[1] if len(argv) > 1 else "ok"
    if mode == "ok":
        print("loading model")
        _err("stage: load\nstage: run\n")
        _write_result(json.dumps(OK_RESULT))
        return 0
    if mode == "segv":
        _err("about to segfault\n")
        os.kill(os.getpid(), signal.SIGSEGV)
    elif mode == "abort":
        _err(ABORT_MESSAGE)
        os.abort()
    elif mode in ("hang", "hang-ignore-term"):
        if mode == "hang-ignore-term":
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        _spawn_sleeper(argv[2])
        _err("hanging\n")
        while True:
            time.sleep(1000)
    elif mode == "orphan":
        _spawn_sleeper(argv[2])
        _err("leaving a grandchild behind\n")
        return 0
    elif mode == "spew":
        _err(SPEW_STDERR.decode())
        for _ in range(SPEW_CHUNKS):
            sys.stdout.buffer.write(SPEW_CHUNK)
        sys.stdout.buffer.write(SPEW_END)
        sys.stdout.buffer.flush()
        return 0
    elif mode == "oom":
        _err("allocating\n")
        os.kill(os.getpid(), signal.SIGKILL)
    elif mode == "exit0-no-result":
        return 0
    elif mode == "bad-json":
        _write_result('{"status": "ok", "outputs": [1.0,')
        return 0
    elif mode == "not-object":
        _write_result("[1, 2, 3]")
        return 0
    elif mode == "exit":
        _err(f"exiting with {argv[2]}\n")
        return int(argv[2])
    _err(f"fake_worker: unknown mode {mode!r}\n")
    return 64


if __name__ == "__main__":
    sys.exit(main(sys.argv))
