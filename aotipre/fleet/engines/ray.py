"""Ray as the engine of a batch (`aotipre check --engine ray`): one task per package on a Ray
cluster, running the same worker processes as a local check, with the same progress lines and
reports; a task whose worker or node dies runs again once.

Ray is imported only here, and only when this engine runs (the `ray` extra). The task runs
aotipre.fleet.matrix.check, as batch.run does, on a node that sees the same paths (a shared
filesystem) and has aotipre with the same interpreters.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import secrets
import shutil
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from aotipre import __version__
from aotipre.findings import Report, codes
from aotipre.fleet.placement import GpuCode, gpu_code, place
from aotipre.foundation import tempdirs
from aotipre.foundation.errors import AotipreError, UsageError
from aotipre.runner import forkserver, proc

if TYPE_CHECKING:
    from aotipre.fleet.batch import PackageJob

INSTALL_HINT = "pip install 'aotipre[ray]'"
POLL_S = 0.2
"""How often the driver takes the tasks' progress lines, and a task looks for a cancel."""
CANCEL_GRACE_S = 5.0
"""After Ctrl-C: how long the tasks get to stop their workers (SIGTERM, then SIGKILL, as a
local run does) before Ray kills their processes."""
_STOP_GRACE_S = 1.0
"""In a cancelled task: between SIGTERM and SIGKILL to its workers (batch.run's pause)."""
_LOCAL_OBJECT_STORE_BYTES = 128 * 1024 * 1024
"""A private local Ray holds reports only: a small object store."""
_WHY_CHARS = 200
_CONNECT_S = 5.0
"""How long --address HOST:PORT gets to accept a connection before Ray is asked to join it."""
PROBE_S = 20.0
"""How long the cluster at --address gets to answer as a Ray head (its GCS gives its cluster
id) before Ray is asked to join it: a head answers in about a second, Python's start included;
Ray itself would retry for minutes, logging on stderr."""
_PROBE = """
import sys
try:
    from ray._private.services import canonicalize_bootstrap_address_or_die
    from ray._raylet import GcsClient
except ImportError:
    sys.exit(3)  # a Ray without them: ray.init is asked as it is
try:
    GcsClient(address=canonicalize_bootstrap_address_or_die(sys.argv[1]))
except BaseException as exc:
    line = (str(exc).strip().splitlines() or [""])[0]
    sys.stderr.write("\\naotipre-probe: " + type(exc).__name__ + (": " + line if line else ""))
    sys.exit(1)
"""
"""The probe of --address, run in a child process (`python -c _PROBE ADDRESS`): exit 0 when
the GCS there answered with its cluster id, 1 (and the reason on its last stderr line) when
not, 3 when this Ray lacks the client it uses."""
_PROBE_MARK = "aotipre-probe: "
_MAX_PORT = 65535


def check_address(address: str) -> str:
    """`address` when it is a form --address takes (`auto`, or HOST:PORT with a port 1 to
    65535); UsageError (one line, exit 2) otherwise."""
    if address == "auto":
        return address
    host, sep, port = address.rpartition(":")
    host = host.strip()
    bracketed = host.startswith("[") and host.endswith("]")
    if (
        not sep
        or not host
        or not (port.isascii() and port.isdigit())
        or len(port) > len(str(_MAX_PORT))
        or not 1 <= int(port) <= _MAX_PORT
        or any(c.isspace() or c in "/@?#" for c in host)
        or (":" in host and not bracketed)
    ):
        raise UsageError(
            f"--address {address!r} is not auto or HOST:PORT (a port 1 to {_MAX_PORT})",
            hint="give auto, or the address that the head's `ray start --head` printed",
        )
    return address


def require(*, local: bool = False) -> Any:
    """The `ray` module; UsageError (one line, exit 2) when it cannot be imported.

    `local`: the run will start a private local Ray. Its token authentication is set in the
    environment before the first `import ray`, because Ray's driver reads RAY_AUTH_MODE when it
    is imported: set later, the driver runs without authentication while the processes it
    starts require the token, and the local Ray never starts."""
    if local and "ray" not in sys.modules:
        os.environ.update(_private_token())
    try:
        import ray
    except ImportError:
        raise UsageError("--engine ray needs Ray", hint=INSTALL_HINT) from None
    return ray


def run(
    jobs: Sequence[PackageJob], workers: int = 1, *, address: str | None = None
) -> list[Report]:
    """Check every job as a Ray task; reports in the jobs' order, whatever finishes first.

    `address`: None starts a private local Ray for this run (`workers` CPUs when more than 1,
    else every CPU) and stops it afterwards; `auto` or HOST:PORT connects to a running cluster
    and leaves it running. A Ray this process already joined (ray.init) is used as it is.
    Each job's own `options.progress` (the driver's) gets its task's progress lines.
    """
    ray = require(local=address is None)
    if not jobs:
        return []
    with _connected(ray, address, workers):
        return _Batch(ray, jobs).run()


# --------------------------------------------------------------------------------------------
# The driver


class _Batch:
    """The tasks of one run: submitted, waited for, retried once, cancelled on Ctrl-C."""

    def __init__(self, ray: Any, jobs: Sequence[PackageJob]) -> None:
        self.ray = ray
        self.jobs = list(jobs)
        self.reports: list[Report | None] = [None] * len(self.jobs)
        self.gpu: list[GpuCode | None] = [gpu_code(job) for job in self.jobs]
        self.kind: dict[int, str] = {}
        """Job index -> the GPU kind its task asks for (Ray's accelerator_type)."""
        self.died: dict[int, str] = {}
        """Job index -> why its first task died."""
        self.pending: dict[Any, int] = {}
        """Task (ObjectRef) -> job index."""
        self.task = ray.remote(num_cpus=1, max_retries=0)(_check_task)
        self.lines: Any = None
        if any(job.options.progress is not None for job in self.jobs):
            self.lines = ray.remote(num_cpus=0)(ProgressLines).remote()

    def run(self) -> list[Report]:
        gpus = _gpu_kinds(self.ray) if any(c is not None for c in self.gpu) else {}
        try:
            for i, job in enumerate(self.jobs):
                code = self.gpu[i]
                if code is None:
                    self._submit(i)
                elif sum(gpus.values()) < 1:
                    self.reports[i] = _no_gpu(job)
                elif (where := place(code, gpus)).why is not None:
                    self.reports[i] = _not_checked(job, where.why)
                else:
                    if where.kind is not None:
                        self.kind[i] = where.kind
                    self._submit(i)
            while self.pending:
                self._wait()
            self._say()
        except BaseException:
            self._cancel()
            raise
        finally:
            if self.lines is not None:
                with contextlib.suppress(Exception):
                    self.ray.kill(self.lines)
        return [r for r in self.reports if r is not None]

    def _submit(self, i: int) -> None:
        job = self.jobs[i]
        shipped = dataclasses.replace(job, options=dataclasses.replace(job.options, progress=None))
        task = self.task.options(
            num_gpus=0 if self.gpu[i] is None else 1, accelerator_type=self.kind.get(i)
        )
        self.pending[task.remote(shipped, os.getcwd(), i, self.lines)] = i

    def _wait(self) -> None:
        ray = self.ray
        ready, _ = ray.wait(list(self.pending), num_returns=1, timeout=POLL_S)
        self._say()
        for ref in ready:
            i = self.pending.pop(ref)
            try:
                report = ray.get(ref)
            except _died(ray) as exc:
                why = _why(exc)
                if i in self.died:
                    self.reports[i] = _crashed(self.jobs[i], self.died[i], why)
                else:
                    self.died[i] = why
                    self._submit(i)
                continue
            except ray.exceptions.TaskUnschedulableError as exc:
                self.reports[i] = _not_checked(self.jobs[i], f"Ray cannot place it ({_why(exc)})")
                continue
            except ray.exceptions.RayTaskError as exc:
                cause = getattr(exc, "cause", None)
                if isinstance(cause, AotipreError):  # a user error: one line, as locally
                    raise cause from None
                raise
            if i in self.died:
                report = _flaky(report, self.jobs[i], self.died[i])
            self.reports[i] = report

    def _say(self) -> None:
        """Hand the tasks' progress lines to each job's own progress callback (the driver's);
        none more once the actor holding them is gone (its node died): the checks go on."""
        if self.lines is None:
            return
        try:
            taken = self.ray.get(self.lines.take.remote())
        except self.ray.exceptions.RayActorError:
            self.lines = None
            return
        for i, message in taken:
            say = self.jobs[i].options.progress
            if say is not None:
                say(message)

    def _cancel(self) -> None:
        """Stop every task: a KeyboardInterrupt in each (it stops its workers as a local Ctrl-C
        does), then, for those still running after CANCEL_GRACE_S (or at a second Ctrl-C),
        Ray kills their processes; the workers die with them (PR_SET_PDEATHSIG)."""
        ray = self.ray
        refs = list(self.pending)
        left = refs
        try:
            for ref in refs:
                ray.cancel(ref, force=False)
            _, left = ray.wait(refs, num_returns=len(refs), timeout=CANCEL_GRACE_S)
        except BaseException:  # noqa: S110 - a second Ctrl-C: kill at once
            pass
        for ref in left:
            with contextlib.suppress(Exception):
                ray.cancel(ref, force=True, recursive=True)


def _gpu_kinds(ray: Any) -> dict[str | None, float]:
    """The cluster's GPUs by kind (None: a node's GPUs of no kind Ray detected): the node's
    `ray.io/accelerator-type` label, else its `accelerator_type:KIND` resource (older Rays, or
    a node started with `--resources`)."""
    kinds: dict[str | None, float] = {}
    for node in ray.nodes():
        resources = node.get("Resources") or {}
        count = float(resources.get("GPU", 0))
        if not node.get("Alive") or count <= 0:
            continue
        prefix = "accelerator_type:"
        named = [k[len(prefix) :] for k in resources if k.startswith(prefix)]
        kind = (node.get("Labels") or {}).get("ray.io/accelerator-type") or next(iter(named), None)
        kinds[kind] = kinds.get(kind, 0.0) + count
    return kinds


def _died(ray: Any) -> tuple[type[BaseException], ...]:
    """The errors of a task whose process or node died (not of the check itself)."""
    e = ray.exceptions
    return (
        e.WorkerCrashedError,
        e.NodeDiedError,
        e.LocalRayletDiedError,
        e.OutOfMemoryError,
        e.ObjectLostError,
    )


def _why(exc: BaseException) -> str:
    first = (str(exc).strip().splitlines() or [""])[0].strip()
    if len(first) > _WHY_CHARS:
        first = first[: _WHY_CHARS - 3] + "..."
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__


def _base(job: PackageJob) -> Report:
    return Report(package_path=job.package, fail_on=job.options.fail_on, tool_version=__version__)


def _not_checked(job: PackageJob, why: str) -> Report:
    """A job the cluster cannot run: its report says why (verdict error, exit 2)."""
    report = _base(job)
    report.error = f"not checked: {why}"
    return report


def _no_gpu(job: PackageJob) -> Report:
    dynamic = job.options.dynamic
    device = dynamic.device if dynamic is not None else None
    needs = f"--device {device}" if device else "a model compiled for CUDA"
    return _not_checked(job, f"its check needs a GPU ({needs}) and the Ray cluster has none")


def _crashed(job: PackageJob, first: str, second: str) -> Report:
    """Two dead tasks: a crash of the package (AOT902), whatever --select/--ignore say."""
    report = _base(job)
    report.findings.append(
        codes.get("AOT902").finding(
            f"the Ray worker checking {job.package} died twice ({first}; then {second}): "
            "not checked",
            evidence=(first, second),
        )
    )
    return report


def _flaky(report: Report, job: PackageJob, why: str) -> Report:
    """The second task's report, saying that the first died (AOT901, subject to the gate's
    --select/--ignore like any finding)."""
    code = codes.get("AOT901")
    opts = job.options
    if any(code.code.startswith(p) for p in opts.ignore) or (
        opts.select and not any(code.code.startswith(p) for p in opts.select)
    ):
        return report
    report.findings.append(
        code.finding(
            f"the Ray worker checking {job.package} died ({why}); the check ran again on a "
            "fresh worker and finished: flaky",
            evidence=(why,),
        )
    )
    return report


@contextlib.contextmanager
def _connected(ray: Any, address: str | None, workers: int) -> Iterator[None]:
    """This process joined to Ray for the block: a private local Ray (address None), or the
    cluster at `address`; the driver disconnects after it, a local Ray stops with it."""
    if ray.is_initialized():
        yield
        return
    if address is not None:
        _reachable(check_address(address))
        _answers_as_ray(address)
    with contextlib.ExitStack() as stack:
        stack.enter_context(_quiet(ray))
        # (no RAY_BACKEND_LOG_LEVEL: setting it makes Ray's C++ logging print "logging.cc:303:
        # Set ray log level from environment variable ..." on stderr, a line that is not
        # aotipre's; without it the backend writes to the session's log files only)
        options: dict[str, Any] = {"log_to_driver": False, "logging_level": logging.ERROR}
        if address is None:
            temp = tempdirs.make_dir("aotipre-ray-")
            stack.callback(shutil.rmtree, temp, ignore_errors=True)
            options.update(
                address="local",
                num_cpus=workers if workers > 1 else os.cpu_count() or 1,
                include_dashboard=False,
                object_store_memory=_LOCAL_OBJECT_STORE_BYTES,
                _temp_dir=temp,
            )
        else:
            options.update(address=address)
        try:
            ray.init(**options)
        except (ConnectionError, ValueError, RuntimeError, ray.exceptions.RayError) as exc:
            where = "start a local Ray" if address is None else f"join the Ray cluster {address}"
            raise UsageError(f"--engine ray: cannot {where}: {_why(exc)}") from None
        stack.callback(ray.shutdown)
        yield


@contextlib.contextmanager
def _quiet(ray: Any) -> Iterator[None]:
    """Ray's notices (token auth, a worker died, ...) are not aotipre's output: its loggers
    at ERROR, and its driver's echo of the raylet's notices off (it prints them on stdout,
    where the report goes; aotipre reports those deaths itself: AOT901, AOT902)."""
    ray_logger = logging.getLogger("ray")
    level = ray_logger.level
    ray_logger.setLevel(logging.ERROR)
    # a private switch (Ray's debugger turns it off): where a Ray lacks it, nothing changes
    worker_module: Any = getattr(getattr(ray, "_private", None), "worker", None)
    shown = getattr(worker_module, "_worker_logs_enabled", None)
    if shown is not None:
        worker_module._worker_logs_enabled = False
    try:
        yield
    finally:
        if shown is not None:
            worker_module._worker_logs_enabled = shown
        ray_logger.setLevel(level)


def _private_token() -> dict[str, str]:
    """Token authentication for a private local Ray, with a token of this run in the
    environment its processes inherit: Ray's default would write one to ~/.ray/auth_token,
    which later turns on authentication for every `ray start` of the user. Nothing when the
    user configured authentication (RAY_AUTH_MODE, a token) or has that file."""
    configured = ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH")
    if any(k in os.environ for k in configured) or os.path.exists(
        os.path.expanduser("~/.ray/auth_token")
    ):
        return {}
    return {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(32)}


def _reachable(address: str) -> None:
    """UsageError at once when nothing listens at HOST:PORT (Ray itself retries for minutes,
    logging on stderr); `auto` is left to the probe."""
    if address == "auto":
        return
    host, _, port = address.rpartition(":")
    try:
        socket.create_connection((host.strip().strip("[]"), int(port)), timeout=_CONNECT_S).close()
    except OSError as exc:
        why = exc.strerror or type(exc).__name__
        raise UsageError(
            f"--address {address}: no Ray cluster answers there ({why})",
            hint="start one with `ray start --head`, or give the address that its head printed",
        ) from None


def _answers_as_ray(address: str) -> None:
    """UsageError (one line) unless the GCS of a Ray head answers at `address` within PROBE_S:
    asked in a child process, whose Ray log lines stay in it and which is killed at the limit,
    so that a listener that is not Ray (or a head that does not answer) neither hangs the run
    nor floods stderr. The child has this process's environment (RAY_AUTH_TOKEN, RAY_ADDRESS)."""
    outcome = proc.run_process(
        [sys.executable, "-c", _PROBE, address],
        timeout_s=PROBE_S,
        max_capture_bytes=4096,
        private_tmp=False,  # `auto` reads the address of this node's cluster in Ray's temp folder
    )
    if outcome.ok or outcome.returncode == 3:
        return
    hint = "give the address that the head's `ray start --head` printed"
    if outcome.timed_out:
        raise UsageError(
            f"--address {address}: no Ray head answered there within {PROBE_S:.0f} s "
            "(is it the GCS address of a Ray cluster?)",
            hint=hint,
        )
    said = [line for line in outcome.stderr_tail.splitlines() if line.startswith(_PROBE_MARK)]
    why = said[-1][len(_PROBE_MARK) :] if said else outcome.summary
    if len(why) > _WHY_CHARS:
        why = why[: _WHY_CHARS - 3] + "..."
    raise UsageError(f"--address {address}: cannot join the Ray cluster there: {why}", hint=hint)


# --------------------------------------------------------------------------------------------
# The task (runs in a Ray worker process)


class ProgressLines:
    """A Ray actor holding the tasks' progress lines until the driver takes them; one caller's
    lines stay in the order it sent them."""

    def __init__(self) -> None:
        self.lines: list[tuple[int, str]] = []

    def put(self, index: int, message: str) -> None:
        self.lines.append((index, message))

    def take(self) -> list[tuple[int, str]]:
        out, self.lines = self.lines, []
        return out

    def flush(self) -> None:
        """Returns once every line the caller sent before is held."""


def _check_task(job: PackageJob, cwd: str, index: int, lines: Any) -> Report:
    """One job, as batch.run checks it, in this Ray worker: in the driver's working directory
    (relative paths), its progress sent to `lines`; a cancel stops its workers first."""
    from aotipre.fleet.batch import start_server_early
    from aotipre.fleet.matrix import check as check_in_runtimes

    say: Callable[[str], None] | None = None
    if lines is not None:

        def say(message: str) -> None:
            lines.put.remote(index, message)

    options = dataclasses.replace(job.options, progress=say)
    tempdirs.sweep()  # a node's folders of an earlier task that was killed there
    forkserver.keep_on()  # this Ray worker's next tasks fork from the same server
    with _working_directory(cwd), _as_started():
        start_server_early(job)  # its imports overlap the reading and the static checks
        report = _interruptible(lambda: check_in_runtimes(job.package, options, job.runtimes))
    if lines is not None:
        import ray

        with contextlib.suppress(ray.exceptions.RayActorError):  # lines lost, not the report
            ray.get(lines.flush.remote())
    return report


@contextlib.contextmanager
def _working_directory(folder: str) -> Iterator[None]:
    before = os.getcwd()
    if os.path.isdir(folder):
        os.chdir(folder)
    try:
        yield
    finally:
        os.chdir(before)


@contextlib.contextmanager
def _as_started() -> Iterator[None]:
    """The environment this Ray worker started with, for the workers of the check: Ray sets
    OMP_NUM_THREADS to the task's CPUs (1) when the node did not, which a local run's workers
    do not get (it would change their threads, timings and reported environment)."""
    added = [k for k in _RAY_SETS if k in os.environ and k not in _started_with()]
    saved = {k: os.environ.pop(k) for k in added}
    try:
        yield
    finally:
        os.environ.update(saved)


_RAY_SETS = ("OMP_NUM_THREADS",)
"""Variables Ray sets in a task's environment when the node's environment lacks them."""


def _started_with() -> set[str]:
    """The names in this process's environment at exec time (Linux: /proc/self/environ)."""
    try:
        with open("/proc/self/environ", "rb") as f:
            raw = f.read()
    except OSError:
        return set(os.environ)  # unknown: keep everything
    return {item.split(b"=", 1)[0].decode(errors="replace") for item in raw.split(b"\0") if item}


def _interruptible(check: Callable[[], Report]) -> Report:
    """`check()`, stopped by Ray's cancel as a local run is by Ctrl-C. Ray's cancel is a
    simulated SIGINT in the main thread, which a node started with SIGINT ignored (nohup, a
    background job) would drop: the default handler is installed for the check."""
    if threading.current_thread() is not threading.main_thread():
        return _stoppable(check)
    handler = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        return _stoppable(check)
    finally:
        signal.signal(signal.SIGINT, handler)


def _stoppable(check: Callable[[], Report]) -> Report:
    """`check()` in a thread, so that a KeyboardInterrupt in this thread (raised between
    bytecodes: one blocked waiting on a worker would not see it for as long as the worker
    runs) stops the workers at once: SIGTERM, then SIGKILL, as batch.run does on Ctrl-C. New
    workers are refused meanwhile, and allowed again after (this Ray worker runs later tasks)."""
    result: list[Report] = []
    failure: list[BaseException] = []

    def target() -> None:
        try:
            result.append(check())
        except BaseException as exc:  # noqa: BLE001 - handed to the main thread
            failure.append(exc)

    thread = threading.Thread(target=target, name="aotipre-ray-check", daemon=True)
    thread.start()
    try:
        while thread.is_alive():
            thread.join(POLL_S)
    except BaseException:
        if proc.kill_all_children(signal.SIGTERM, refuse_new=True):
            deadline = time.monotonic() + _STOP_GRACE_S
            with contextlib.suppress(BaseException):
                while thread.is_alive() and time.monotonic() < deadline:
                    thread.join(0.05)
        proc.kill_all_children()
        with contextlib.suppress(BaseException):
            thread.join(CANCEL_GRACE_S)
        proc.allow_new_children()
        raise
    if failure:
        raise failure[0]
    return result[0]
