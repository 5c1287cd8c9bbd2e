"""What `aoti_load_package` pays before it touches a package (the loader's imports, torch's
CPU-ISA probe), measured in a fresh process of its own beside the host's first check's worker.

Without the host's record (runner/loadcost.py) a check used to pay that cost in its own first
load, on its critical path, in order to report it: 3-4 s on a 2-core VM, 30-50 s on a GPU host.
Now the session starts one `loadcost` step (worker.coldstart.measure_probe: the same imports and the
same `get_device_information` call torch's `_load_aoti` makes, timed the same way, in the same
kind of fresh process, with the workers' environment) while its first worker loads the package
with the C++ loader alone. The perf stage waits for the answer only when it reports; a compile
that needs the ISA answer gets it the same way. The process is run through runner/proc.py (its
own group, the registry of live children that an interrupt or exit kills) and is stopped when
the session ends, whatever the reason.
"""

from __future__ import annotations

import contextlib
import shutil
import threading
from collections.abc import Callable, Mapping
from typing import Any

from aotipre.foundation import tempdirs
from aotipre.runner import launch
from aotipre.runner.proc import ChildThread

STEP_ID = "loadcost"


class Measurement:
    """One `loadcost` step in a fresh worker started now (`argv_for` and `env`: the session's
    fresh worker's), within `budget_s` plus the start-up slack. `entry()` waits for its step
    record; `error` says why there is none; `stop()` ends the process and removes its folder."""

    def __init__(
        self,
        argv_for: Callable[[str], tuple[str, ...]],
        env: Mapping[str, str],
        *,
        budget_s: float,
    ) -> None:
        self.folder = tempdirs.make_dir("aotipre-loadcost-")
        self.error: str | None = None
        """Why the measurement gave no record (None while it runs, or when it gave one)."""
        self._entry: dict[str, Any] | None = None
        self._done = threading.Event()
        job = {
            "protocol": 1,
            "tag": STEP_ID,
            "device": "cpu",
            "model": "model",
            "workdir": self.folder,
            "step_timeout_s": budget_s,
            "compile_timeout_s": budget_s,
            "steps": [{"id": STEP_ID, "op": STEP_ID}],
        }
        env = dict(env)
        self._child = ChildThread(
            lambda on_start: self._run(job, argv_for, env, budget_s, on_start), "aotipre-loadcost"
        )

    def _run(
        self,
        job: dict[str, Any],
        argv_for: Callable[[str], tuple[str, ...]],
        env: dict[str, str],
        budget_s: float,
        on_start: Callable[[int], None],
    ) -> None:
        try:
            _, outcome = launch.run_job_file(
                job, argv_for, env=env, budget_s=budget_s, on_start=on_start
            )
            steps = (outcome.result or {}).get("steps")
            entry = steps.get(STEP_ID) if isinstance(steps, dict) else None
            if isinstance(entry, dict) and entry.get("status") == "ok":
                self._entry = entry
            elif isinstance(entry, dict) and isinstance(entry.get("error"), dict):
                self.error = str(entry["error"].get("message") or entry["error"])[:300]
            else:
                how = (
                    "timed out"
                    if outcome.timed_out
                    else f"was killed by {outcome.signal_name}"
                    if outcome.signal is not None
                    else outcome.start_error or f"exited with {outcome.returncode}"
                )
                self.error = f"the measuring process {how} without a result"
        except Exception as exc:  # a job file that cannot be written, a bad argument
            self.error = f"the measuring process could not run: {exc}"
        finally:
            self._done.set()

    @property
    def done(self) -> bool:
        return self._done.is_set()

    def entry(self, timeout_s: float | None = None) -> dict[str, Any] | None:
        """The `loadcost` step's record (worker.perf.PerfOps.op_loadcost), waiting for it at
        most `timeout_s` (None: until the process ends); None when there is none (see error)."""
        if not self._done.wait(timeout_s):
            return None
        return self._entry

    def stop(self) -> None:
        """End the process if it still runs, wait for its thread, remove its folder."""
        self._child.stop()
        with contextlib.suppress(OSError):
            shutil.rmtree(self.folder, ignore_errors=True)
