"""The torch worker: a child process running compile, load, run, compare, probe and perf steps
(the load timed part by part, run latency and memory: see perf.py).

It is run by path, `python aotipre/runner/worker/__main__.py JOB.json` (launch.WORKER_PATH), in
whatever interpreter `--python` names (a serving venv without aotipre installed), so its modules
import torch, the standard library and each other (relative imports) only, never the aotipre
package: the parent's code and state cannot leak into the process that loads compiled code. It is
the only part of aotipre that imports torch. __main__.py loads it under a private name, so that
its module names (`compare`, `inputs`...) and the user's custom-op modules cannot shadow each other.

One module per step family: protocol (job and result files, step logs, errors), inputs, loading,
running (load, run, compare, state, weights), probe, perf, compiling, triage, cpp (custom ops and
the C++ harness), host (doctor facts, canary, temp folders, prewarm); core holds a job's state and
the step loop (every compared call from the state the model was loaded in: startstate), job the
Worker made of every family, and main(argv).

The names below are re-exported for the parent's tests (`worker.compare_outputs`); patch a name in
the module that defines it, not here.
"""

from __future__ import annotations

from .coldstart import CallTimer, memory_snapshot
from .compare import compare_leaf, compare_outputs
from .compiling import check_inductor_configs, traced_triton_launches
from .cpp import run_harness
from .host import PREWARM_ENV, users_tempdir
from .inputs import (
    derive_tensor,
    load_inputs,
    normalize_inputs,
    synth_node,
    tensor_stats,
    tensor_summary,
    value_at,
)
from .job import Worker, main
from .loading import (
    as_archive,
    load_exported_program,
    pin_vec_isa,
    probed_vec_isa,
    read_member,
)
from .perf import growth_per_run, latency_runs, percentile
from .protocol import StepError
from .triage import minifier_entry

__all__ = [
    "PREWARM_ENV",
    "CallTimer",
    "StepError",
    "Worker",
    "as_archive",
    "check_inductor_configs",
    "compare_leaf",
    "compare_outputs",
    "derive_tensor",
    "growth_per_run",
    "latency_runs",
    "load_exported_program",
    "load_inputs",
    "main",
    "memory_snapshot",
    "minifier_entry",
    "normalize_inputs",
    "percentile",
    "pin_vec_isa",
    "probed_vec_isa",
    "read_member",
    "run_harness",
    "synth_node",
    "tensor_stats",
    "tensor_summary",
    "traced_triton_launches",
    "users_tempdir",
    "value_at",
]
