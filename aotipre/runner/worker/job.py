"""The Worker (every step family's `op_*` on one class) and main(argv): one job, read from its
JSON file, run step by step, its result written as it goes (protocol.py)."""

from __future__ import annotations

import contextlib
import faulthandler
import json
import os
import sys

from . import coldstart
from .accuracy import AccuracyOps
from .compiling import CompileOps
from .cpp import CppOps, custom_ops_at_start
from .host import PREWARM_ENV, HostOps, prewarm_and_wait, private_tempdir
from .perf import PerfOps
from .probe import ProbeOps
from .protocol import PROTOCOL, Recorder, _real_stderr, _unbuffer_c_stdout
from .running import RunOps
from .shims import ShimOps
from .subgraph import SubgraphOps
from .triage import TriageOps


class Worker(
    CompileOps,
    ShimOps,
    RunOps,
    ProbeOps,
    PerfOps,
    TriageOps,
    AccuracyOps,
    SubgraphOps,
    CppOps,
    HostOps,
):
    """Runs a job's steps (WorkerCore.run), each by its op: `op_<op>` of one of the families."""


def main(argv: list[str]) -> int:
    if len(argv) == 3 and argv[1] == "--fork-server":
        from .zygote import serve

        return serve(argv[2], main)
    if len(argv) != 2:
        sys.stderr.write("usage: worker.py JOB.json | worker.py --fork-server SOCKET\n")
        return 64
    prewarm_s = None
    if os.environ.get(PREWARM_ENV) is not None:
        prewarm_s, coldstart.WAITED_S = prewarm_and_wait(os.environ[PREWARM_ENV], argv[1])
        if not os.path.exists(argv[1]):
            sys.stderr.write(f"worker: no job at {argv[1]} before the prewarm wait ended\n")
            return 66
    with open(argv[1]) as f:
        job = json.load(f)
    if job.get("protocol") != PROTOCOL:
        sys.stderr.write(f"worker: job protocol {job.get('protocol')!r}, expected {PROTOCOL}\n")
        return 65
    faulthandler.enable(all_threads=True)
    if "libaotipre_backtrace" in os.environ.get("LD_PRELOAD", ""):
        # aotipre doctor's crash re-run: put the helper's faulting-instruction handler in front
        # of faulthandler's (aotipre/doctor/frames.py says why)
        with contextlib.suppress(Exception):
            import ctypes

            ctypes.CDLL(None).aotipre_backtrace_install()
    if job.get("workdir"):
        private_tempdir(job["workdir"])
    if job.get("capture_stdout"):
        _unbuffer_c_stdout()
    recorder = Recorder(os.environ.get("AOTIPRE_RESULT_PATH"))
    recorder.data["prewarm_s"] = prewarm_s
    if coldstart.FORK_BASE is not None:
        recorder.data["forked_from"] = coldstart.FORK_BASE["server_pid"]
        recorder.flush()  # which process this was, even if the user's modules kill it
    custom_ops_at_start(recorder, job)
    recorder.flush()
    with _real_stderr() as real_fd:
        Worker(job, recorder, real_fd).run()
    sys.stdout.flush()
    sys.stderr.flush()
    # Skip interpreter teardown: destructors of loaded AOTI models and CUDA contexts can crash
    # or hang at exit, and every result is already on disk.
    os._exit(0)
