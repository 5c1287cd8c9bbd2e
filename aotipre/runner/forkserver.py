"""One process per command that imports torch once and forks a worker per package (issue #28).

Checking a zoo, every package's worker paid the interpreter, `import torch` and the loader's
import of `torch._inductor` (2.2-2.7 s of a 2.7 s worker on the 2-core VM) before its load.
Within `session()` (batch.run over several packages; a Ray worker keeps one on across its
tasks, `keep_on`), a job whose steps only load, run, time and probe an already compiled
package goes to a fork server instead: a worker started in
the job's interpreter and environment (worker/zygote.py) that imports torch and the loader,
then forks one worker per job. The process aotipre starts for the job is a small client
(worker/forkclient.py) that stands for the forked worker: signals pass through, it ends as the
worker ends, a kill of it kills the worker, and when the server cannot take the job it execs
the fresh worker itself. So the process runner (proc.run_process: time limits, output tails,
progress lines, clean-up) sees one child per job as before.

Not forked: a job that compiles, runs the C++ harness, triage or anything under a wrapper
(compute-sanitizer), a test's stand-in worker, and one whose environment is not the server's.
The server never starts CUDA, so a forked CUDA job starts its own context as a fresh worker
does; the packages pinned to each GPU (CUDA_VISIBLE_DEVICES, one environment per GPU) get a
server of their own. The perf
stage still reports what a fresh deployment process pays: the server measured its interpreter
start, `import torch` and loader import at its own start, in this run (worker/coldstart.py FORK_BASE).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping

from aotipre.foundation import tempdirs
from aotipre.runner import launch
from aotipre.runner.proc import ProcessOutcome, run_process, stop_child

CLIENT_PATH = os.path.join(os.path.dirname(launch.WORKER_PATH), "forkclient.py")
SERVED_OPS = frozenset(
    {
        "load",
        "run",
        "latency",
        "probe",
        "sample_layout",
        "index_run",
        "disk_weights_run",
        "state",
        "weights",
    }
)
"""Steps a forked worker may run: loading and calling a compiled package, nothing that compiles
or starts other tools."""
SWITCH_ENV = "AOTIPRE_FORK_SERVER"
"""`0` turns the fork server off (every job starts a fresh worker), e.g. to compare the two."""
MAX_SERVERS = 8
"""Servers alive at once in a session (one per interpreter and environment: per GPU when the
packages are spread over several; the rest start fresh workers)."""
READY_S = 120.0
"""How long a job waits for its server's imports (a fresh worker would pay them too)."""
_LIFETIME_S = 7 * 86400.0
"""The server's time limit in the process runner: it lives as long as its session."""

_lock = threading.Lock()
_servers: dict[tuple[str, tuple[tuple[str, str], ...]], ForkServer] | None = None
"""The session's servers by (interpreter, environment); None outside a session."""


@contextlib.contextmanager
def session(enabled: bool = True) -> Iterator[None]:
    """Jobs started in the block may be forked (`enabled`, unless SWITCH_ENV is `0`); every
    server stops after it (unless `keep_on` holds them for the whole process)."""
    global _servers
    enabled = enabled and _switched_on()
    with _lock:
        outer = _servers is not None
        if enabled and not outer:
            _servers = {}
    try:
        yield
    finally:
        if enabled and not outer:
            _stop_all()


def keep_on() -> None:
    """Jobs of this process may be forked from now until it exits, with the servers kept
    between them: a Ray worker runs one package's task after another. The servers stop at
    exit (and die with this process if it is killed: PR_SET_PDEATHSIG)."""
    global _servers
    if not _switched_on():
        return
    with _lock:
        if _servers is None:
            _servers = {}
            atexit.register(_stop_all)


def _switched_on() -> bool:
    return os.environ.get(SWITCH_ENV, "1") != "0"


def _stop_all() -> None:
    global _servers
    with _lock:
        servers, _servers = _servers or {}, None
    for server in servers.values():
        server.stop()


def argv_for(
    python: str, env: Mapping[str, str], ops: Iterable[str]
) -> Callable[[str], tuple[str, ...]] | None:
    """The argv of a job's client (`python -I -S forkclient.py SOCKET JOB WORKER_ARGV`), when
    a session is on, every op of the job is in SERVED_OPS and the server for this interpreter
    and environment runs (started now if there is room); None: start a fresh worker."""
    if not set(ops) <= SERVED_OPS:
        return None
    server = _server(python, env)
    if server is None or not server.ready(READY_S):
        return None
    return argv_for_server(python, server)


def start_early(python: str, env: Mapping[str, str]) -> None:
    """Start the server for this interpreter and environment now, without waiting for it: the
    one a batch's first job will most likely ask for once it has read its package and run its
    static checks, which its imports overlap (in a Ray task on the 2-core VM the server started
    0.1 s earlier). Nothing outside a session, or when it runs already; a guess that no job
    matches costs an idle server until the session ends (one of MAX_SERVERS)."""
    _server(python, env)


def _server(python: str, env: Mapping[str, str]) -> ForkServer | None:
    """The session's server for this interpreter and environment, started now if it is not
    running and there is room; None outside a session or without room."""
    key = (python, tuple(sorted(env.items())))
    with _lock:
        if _servers is None:
            return None
        server = _servers.get(key)
        if server is not None and server.outcome is not None:  # it ended (e.g. a Ctrl-C)
            del _servers[key]
            server.stop()  # its folder
            server = None
        if server is None:
            if len(_servers) >= MAX_SERVERS:
                return None
            try:
                server = _servers[key] = ForkServer(python, env)
            except OSError:
                return None
    return server


def argv_for_server(python: str, server: ForkServer) -> Callable[[str], tuple[str, ...]]:
    """A job's client argv for `server`: `python -I -S forkclient.py SOCKET JOB WORKER_ARGV`."""
    return lambda path: (
        python, "-I", "-S", CLIENT_PATH, server.socket, path,
        *launch.worker_argv(python, None, path),
    )  # fmt: skip


def fresh_argv(argv: tuple[str, ...]) -> tuple[str, ...]:
    """The fresh worker's argv within a client's (what the report shows and a user re-runs);
    any other argv as it is."""
    if CLIENT_PATH in argv:
        return argv[argv.index(CLIENT_PATH) + 3 :]
    return argv


class ForkServer:
    """The server process for one interpreter and environment (worker/zygote.py), run by the
    process runner in a thread of its own until `stop`."""

    def __init__(self, python: str, env: Mapping[str, str]) -> None:
        self.folder = tempdirs.make_dir("aotipre-fork-")
        self.socket = os.path.join(self.folder, "server")
        self.pid: int | None = None
        self.outcome: ProcessOutcome | None = None
        self._started = threading.Event()
        self._thread = threading.Thread(
            target=self._run,
            args=((python, launch.WORKER_PATH, "--fork-server", self.socket), dict(env)),
            name="aotipre-fork-server",
            daemon=True,
        )
        self._thread.start()

    def _run(self, argv: tuple[str, ...], env: dict[str, str]) -> None:
        try:
            self.outcome = run_process(
                argv, env=env, timeout_s=_LIFETIME_S, cwd=self.folder, on_start=self._on_start
            )
        finally:
            self._started.set()

    def _on_start(self, pid: int) -> None:
        self.pid = pid
        self._started.set()

    def ready(self, timeout_s: float) -> bool:
        """Whether it listens, waiting up to `timeout_s` for its imports; False once it ended."""
        deadline = time.monotonic() + timeout_s
        while self.outcome is None and time.monotonic() < deadline:
            if os.path.exists(self.socket):
                return True
            time.sleep(0.02)
        return self.outcome is None and os.path.exists(self.socket)

    def stop(self) -> None:
        """SIGKILL its group (its forked workers die with it), then remove its folder."""
        self._started.wait()
        if self.pid is not None:
            stop_child(self.pid)
        self._thread.join()
        shutil.rmtree(self.folder, ignore_errors=True)
