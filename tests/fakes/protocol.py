"""The worker result protocol, as the fake workers speak it (what aotipre/runner/worker/ does).

The result file (`$AOTIPRE_RESULT_PATH`, JSON) is rewritten atomically (a temporary file, then
os.replace) at start, when a step starts (`current`: its id, log path and start time), when it
ends (its entry under `steps`) and at the end (`done`, or `stopped`). While a step runs its
stderr (and, when the job asks, stdout) goes to the step's own log file, whose text becomes the
entry's `log`; the parent reads `@@aotipre start <id>` on the real stderr. A worker that dies
mid-step leaves `current` set, which is how the parent knows which step it died in.
Standard library only: the fakes run as plain scripts (`python fake_torch_worker.py JOB`).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


def write_json_atomically(path: str | None, data: dict[str, Any]) -> None:
    if not path:
        return
    tmp = f"{path}.tmp"
    with open(tmp, "w") as f:
        json.dump(data, f)
    os.replace(tmp, path)


class WorkerResult:
    """One fake worker's result file and the per-step log capture."""

    def __init__(self, job: dict[str, Any]) -> None:
        self.job = job
        self.path = os.environ.get("AOTIPRE_RESULT_PATH")
        self.data: dict[str, Any] = {
            "protocol": 1,
            "pid": os.getpid(),
            "current": None,
            "done": False,
            "steps": {},
        }
        self.real_err = os.dup(2)
        self.real_out = os.dup(1)
        self.write()

    def write(self) -> None:
        write_json_atomically(self.path, self.data)

    def log_path(self, sid: str) -> str:
        return os.path.join(
            self.job["workdir"], f"{self.job.get('tag', 'job')}.{sid.replace(':', '_')}.log"
        )

    @contextmanager
    def step(
        self, sid: str, op: str, *, capture_stdout: bool = False, log_tail: int | None = None
    ) -> Iterator[dict[str, Any]]:
        """Run one step: yields its entry (`op` set) for the body to fill (`status`, ...); the
        log, the duration and the entry are recorded when the body ends normally."""
        log_path = self.log_path(sid)
        self.data["current"] = {"id": sid, "log": log_path, "started": time.time()}
        self.write()
        os.write(self.real_err, f"@@aotipre start {sid}\n".encode())
        started = time.monotonic()
        entry: dict[str, Any] = {"op": op}
        with open(log_path, "w+b") as log:
            os.dup2(log.fileno(), 2)
            if capture_stdout:
                os.dup2(log.fileno(), 1)
            try:
                yield entry
            finally:
                os.dup2(self.real_err, 2)
                os.dup2(self.real_out, 1)
            log.seek(0)
            text = log.read().decode("utf-8", errors="replace")
        entry["log"] = text if log_tail is None else text[-log_tail:]
        entry["duration_s"] = time.monotonic() - started
        self.data["steps"][sid] = entry
        self.data["current"] = None
        self.write()

    def stop(self, after: str, reason: str) -> None:
        self.data["stopped"] = {"after": after, "reason": reason}

    def finish(self) -> None:
        self.data["done"] = True
        self.write()
