"""fake_torch_worker.py, recording where and when each worker process ran: it appends a JSON
line to `$AOTIPRE_ENV_LOG` when it starts and another when it ends (none when it is killed by a
signal, e.g. a scripted crash): `event` (start, end), `label` (`$AOTIPRE_ENV_LABEL`: a test sets
it per package through DynamicOptions.extra_env), its CUDA_VISIBLE_DEVICES, pid, and `at` (the
system-wide monotonic clock). Standard library only."""

from __future__ import annotations

import json
import os
import runpy
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def record(event: str) -> None:
    line = {
        "event": event,
        "label": os.environ.get("AOTIPRE_ENV_LABEL"),
        "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "pid": os.getpid(),
        "at": time.monotonic(),
    }
    with open(os.environ["AOTIPRE_ENV_LOG"], "a") as log:
        log.write(json.dumps(line) + "\n")


if __name__ == "__main__":
    record("start")
    sys.path.insert(0, HERE)
    sys.argv = [os.path.join(HERE, "fake_torch_worker.py"), sys.argv[1]]
    try:
        runpy.run_path(sys.argv[0], run_name="__main__")
    finally:
        record("end")
