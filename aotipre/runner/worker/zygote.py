"""The fork server's process (aotipre/runner/forkserver.py): it imports torch and the loader
once, then forks one worker per job, so that a command checking many packages pays the
interpreter, `import torch` and the loader's import of `torch._inductor` once instead of once per
package (issue #28).

Its protocol, over a Unix socket in the session's private folder: a client (forkclient.py, the
process aotipre started for the job) sends one JSON line `{"job", "env", "cwd"}` with its
stdin, stdout and stderr attached (SCM_RIGHTS). The server answers `{"pid": N}` (a worker was
forked) or `{"pid": null, "why": ...}` (the client then execs a fresh worker itself), and later,
once that worker has ended, `{"exit": CODE}` or `{"signal": N}`. A client that goes away first
(aotipre's timeout killed it, or Ctrl-C) gets its worker's process group SIGKILLed at once.

A job is forked only when its environment is the server's, apart from the variables that differ
per job and are read after the fork (FORKED_ENV_KEYS): what torch and inductor read while they
are imported (TORCHINDUCTOR_*, OMP_*, the runtime check's switch...) then holds for the job as it
would in a fresh process. The server is single-threaded (a select loop) and never runs a model,
starts OpenMP or touches CUDA: a forked worker starts from an interpreter that has imported
modules and done nothing else (as PyTorch's own DataLoader workers do).

What a fresh deployment process pays is still reported: the forked worker's load says the age
and loader import time this server measured at its own start, in this run, in a fresh process
with the same environment (coldstart.FORK_BASE).
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import signal
import socket
import sys
import time
from collections.abc import Callable
from typing import Any

from . import coldstart

FORKED_ENV_KEYS = frozenset({"AOTIPRE_RESULT_PATH", "AOTIPRE_TREE", "TMPDIR", "TMP", "TEMP"})
"""Set per job by aotipre's process runner (the result file, the process tree's token, the
job's private temp folder) and read only after the fork."""
_MAX_REQUEST = 4 * 1024 * 1024
_REQUEST_S = 10.0
_running: set[int] = set()
"""The pids of the workers forked and not yet reaped."""


def serve(sock_path: str, main: Callable[[list[str]], int]) -> int:
    """Import, listen at `sock_path`, fork a worker per accepted job until aotipre stops it;
    each forked worker runs `main(["worker", JOB])` (job.main, as a fresh worker does)."""
    age = coldstart.process_age_s()
    started = time.perf_counter()
    coldstart.loader_modules()
    server = os.getpid()
    with contextlib.suppress(Exception):
        from torch.export import _tree_utils  # noqa: F401 - what the loader reads specs with
    base = {
        "process_age_s": age,
        "import_s": time.perf_counter() - started,
        "server_pid": server,
    }
    own_env = dict(os.environ)
    try:  # a worker is watched through a pidfd (Linux 5.3): without one, no server
        os.close(os.pidfd_open(os.getpid()))
    except (AttributeError, OSError) as exc:
        sys.stderr.write(f"fork server: no pidfd_open here ({exc}): every job starts fresh\n")
        return 69
    # bound by its name in its folder: a socket's path may hold 107 bytes, a TMPDIR more
    os.chdir(os.path.dirname(sock_path) or ".")
    name = os.path.basename(sock_path)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(name + ".tmp")
    listener.listen(64)
    os.replace(name + ".tmp", name)  # clients connect once the imports are done
    sel = selectors.DefaultSelector()
    sel.register(listener, selectors.EVENT_READ, None)
    while True:
        for key, _ in sel.select():
            if key.data is not None and key.data[1] not in _running:
                continue  # ended by the other event of the same batch
            if key.data is None:
                conn, _ = listener.accept()
                forked = _fork_for(conn, own_env, base, listener, server, main)
                if forked is None:
                    conn.close()
                    continue
                pidfd = os.pidfd_open(forked)
                _running.add(forked)
                sel.register(conn, selectors.EVENT_READ, ("client", forked, pidfd))
                sel.register(pidfd, selectors.EVENT_READ, ("worker", forked, conn))
            elif key.data[0] == "client":  # the client went away: its worker goes too
                _, pid, pidfd = key.data
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(pid, signal.SIGKILL)
                _finish(sel, key.fileobj, pid, pidfd, send=False)
            else:
                _, pid, conn = key.data
                _finish(sel, conn, pid, key.fileobj, send=True)


def _finish(sel: selectors.BaseSelector, conn: Any, pid: int, pidfd: Any, *, send: bool) -> None:
    """Reap the worker, tell its client how it ended (when the client still listens), close."""
    _running.discard(pid)
    _, status = os.waitpid(pid, 0)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)  # what it left in its group
    if send:
        code = os.waitstatus_to_exitcode(status)
        message = {"signal": -code} if code < 0 else {"exit": code}
        with contextlib.suppress(OSError):
            conn.sendall(json.dumps(message).encode() + b"\n")
    for obj in (conn, pidfd):
        sel.unregister(obj)
        if isinstance(obj, int):
            os.close(obj)
        else:
            obj.close()


def _fork_for(
    conn: socket.socket,
    own_env: dict[str, str],
    base: dict[str, Any],
    listener: socket.socket,
    server: int,
    main: Callable[[list[str]], int],
) -> int | None:
    """Read one request; fork its worker and answer its pid, or answer why not (None)."""
    try:
        request, fds = _receive(conn)
    except (OSError, ValueError) as exc:
        with contextlib.suppress(OSError):
            conn.sendall(json.dumps({"pid": None, "why": str(exc)[:200]}).encode() + b"\n")
        return None
    env = request.get("env")
    why = _why_not(env, own_env, fds)
    if why is None:
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:  # the worker
            listener.close()
            conn.close()
            _run_job(request, fds, base, server, main)  # never returns
        for fd in fds:
            os.close(fd)
        with contextlib.suppress(OSError):
            conn.sendall(json.dumps({"pid": pid}).encode() + b"\n")
        return pid
    for fd in fds:
        os.close(fd)
    with contextlib.suppress(OSError):
        conn.sendall(json.dumps({"pid": None, "why": why}).encode() + b"\n")
    return None


def _receive(conn: socket.socket) -> tuple[dict[str, Any], list[int]]:
    """One JSON line and the file descriptors sent with its first bytes (a client that does
    not send it within _REQUEST_S is dropped: the server serves one request at a time)."""
    conn.settimeout(_REQUEST_S)
    data = b""
    fds: list[int] = []
    try:
        while not data.endswith(b"\n"):
            chunk, got, _, _ = socket.recv_fds(conn, 65536, 3)
            fds.extend(got)
            if not chunk:
                raise ValueError("the client closed before its request ended")
            data += chunk
            if len(data) > _MAX_REQUEST:
                raise ValueError("the request is too long")
        conn.settimeout(None)
        request = json.loads(data)
        if not isinstance(request, dict):
            raise ValueError("the request is not an object")
    except BaseException:
        for fd in fds:
            os.close(fd)
        raise
    return request, fds


def _why_not(env: Any, own_env: dict[str, str], fds: list[int]) -> str | None:
    if len(fds) != 3:
        return f"{len(fds)} file descriptors came with the request, 3 expected"
    if not isinstance(env, dict):
        return "the request has no environment"
    differ = sorted(
        k
        for k in set(env) | set(own_env)
        if k not in FORKED_ENV_KEYS and env.get(k) != own_env.get(k)
    )
    if differ:
        return f"its environment differs in {', '.join(differ[:5])}"
    return None


def _run_job(
    request: dict[str, Any],
    fds: list[int],
    base: dict[str, Any],
    server: int,
    main: Callable[[list[str]], int],
) -> None:
    """In the forked worker: become the job's process (its group, stdio, folder, environment),
    run the worker's main over its job file, and exit as a fresh worker would."""
    code = 70
    try:
        os.setpgid(0, 0)
        _die_with(server)
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGCHLD, signal.SIGHUP):
            signal.signal(sig, signal.SIG_DFL)
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        os.chdir(str(request["cwd"]))
        os.environ.clear()
        os.environ.update({str(k): str(v) for k, v in request["env"].items()})
        import tempfile

        tempfile.tempdir = None  # TMPDIR is the job's private folder now
        coldstart.FORK_BASE = base
        sys.argv = [sys.argv[0], str(request["job"])]  # as a fresh worker's
        code = main(["worker", str(request["job"])])
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:  # as an uncaught exception ends a fresh worker
        import traceback

        traceback.print_exc()
        code = 1
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


def _die_with(server: int) -> None:
    """SIGKILL when the server dies (aotipre stopping it kills its group, not the workers'
    groups), and adopt this worker's orphaned descendants, as a worker aotipre starts does
    (contain.child_setup, which this package may not import: it runs without aotipre)."""
    import ctypes

    prctl = ctypes.CDLL(None, use_errno=True).prctl
    prctl(1, int(signal.SIGKILL), 0, 0, 0)  # PR_SET_PDEATHSIG
    prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    if os.getppid() != server:  # the server died before the signal was armed
        os._exit(70)
