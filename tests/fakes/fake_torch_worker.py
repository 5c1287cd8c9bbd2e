"""A stand-in for aotipre/runner/worker/ that speaks its protocol and misbehaves on demand.

`python fake_torch_worker.py JOB.json`; the script comes from `$AOTIPRE_FAKE_SCRIPT` (JSON):
`{step id or op: behaviour}` where a behaviour is a dict with any of
- `entry`: merged into the step's record (e.g. `outputs`, `outputs` of a compare, `outcome`);
- `error`: `{"type", "message"}` -> the step fails with that Python exception;
- `log`: text written to stderr (fd 2) while the step runs;
- `crash`: `SIGSEGV`, `SIGABRT`, `SIGKILL`, ... -> the process dies by it mid-step;
- `hang`: true -> sleeps until the per-step watchdog (real faulthandler) or the parent kills it;
- `hang_hard`: true -> sleeps with no watchdog, so only the parent's backstop timeout ends it;
- `exit`: N -> exits with N mid-step;
- `once`: true -> the crash/hang/exit happens only in the first worker that reaches the step;
- `unrecorded`: true -> the step runs, but the result file never gets its record (a worker
  that says it is done without having reported every step).
Three script keys are not steps: `__stop_after__` (a step id: the worker stops after it, as the
real one does on CUDA after an error), `__teardown__` (a signal the worker dies by after
writing its final result, as a CUDA teardown can) and `__perf_scale__` (see _scaled).
Every step not in the script succeeds with a plausible record. Standard library only.
"""

from __future__ import annotations

import faulthandler
import json
import os
import resource
import signal
import sys
import time

from protocol import WorkerResult  # same folder: sys.path[0]

FAKE_LOAD_PERF = {
    "fresh_process": True,
    "process_age_s": 1.0,
    "torch_version": "fake",
    "import_s": 0.5,
    "total_s": 0.5,
    "probe": {"seconds": 0.1, "check_programs": 1, "gxx_builds": 0, "gxx_failed": 0},
    "loader_s": 0.2,
    "memory_before": {"host": {"peak_rss": 100 << 20}},
    "memory_after": {"host": {"peak_rss": 120 << 20}},
}
"""A measured load's `perf` entry (worker.measure_load's shape, made-up numbers)."""
FAKE_LATENCY_PERF = {
    "warmup": 3,
    "runs": 5,
    "samples_ms": [1.0] * 5,
    "p50_ms": 1.0,
    "p99_ms": 1.0,
    "min_ms": 1.0,
    "max_ms": 1.0,
    "mean_ms": 1.0,
    "memory": {"host_rss": [120 << 20] * 5, "host_rss_growth_per_run": 0.0},
}
DEFAULT_OUTPUT = {"kind": "tensor", "dtype": "float32", "shape": [2, 4], "nan": 0, "inf": 0}


def _default_entry(op: str, step: dict) -> dict:
    if op in ("run", "eager"):
        return {"outputs": [dict(DEFAULT_OUTPUT)]}
    if op == "compare":
        return {
            "structure": None,
            "outputs": [
                {
                    "index": 0,
                    "kind": "tensor",
                    "dtype": "float32",
                    "eager_dtype": "float32",
                    "shape": [2, 4],
                    "eager_shape": [2, 4],
                    "numel": 8,
                    "rtol": 1e-4,
                    "atol": 1e-5,
                    "mismatches": 0,
                    "max_abs": 0.0,
                    "max_rel": 0.0,
                }
            ],
        }
    if op == "probe":
        if step.get("layout"):  # as measured on a pointwise model: refused, else read wrongly
            if step.get("unchecked"):
                differ = {
                    **_default_entry("compare", step)["outputs"][0],
                    "mismatches": 8,
                    "max_abs": 1.5,
                }
                return {
                    "outcome": "accepted",
                    "outputs": [dict(DEFAULT_OUTPUT)],
                    "layout_compare": {"structure": None, "outputs": [differ]},
                }
            return {
                "outcome": "rejected",
                "aoti_error": {
                    "type": "RuntimeError",
                    "message": "input_handles[0]: unmatched stride value at 0, expected: 4, "
                    "but got: 1",
                },
            }
        if step.get("offset"):  # as measured on CPU and CUDA code: runs, same outputs
            return {
                "outcome": "accepted",
                "outputs": [dict(DEFAULT_OUTPUT)],
                "layout_compare": _default_entry("compare", step),
            }
        if step.get("unchecked"):  # as measured: without the runtime check, out-of-range runs
            return {"outcome": "accepted", "outputs": [dict(DEFAULT_OUTPUT)]}
        if step.get("expect") == "reject":
            return {
                "outcome": "rejected",
                "aoti_error": {
                    "type": "RuntimeError",
                    "message": "input_handles[0]: dim value is too large at 0, expected to be "
                    "<= 64, but got: 65",
                },
            }
        return {"outcome": "accepted", "outputs": [dict(DEFAULT_OUTPUT)]}
    if op == "load":
        if step.get("measure"):
            return {"how": "fake", "perf": dict(FAKE_LOAD_PERF)}
        return {"how": "fake"}
    if op == "latency":
        return {"perf": dict(FAKE_LATENCY_PERF)}
    if op == "compile":
        out = step.get("out")
        if out:
            os.makedirs(os.path.dirname(out), exist_ok=True)
            with open(out, "wb") as f:
                f.write(b"PK fake package")
        return {"package": out}
    return {}


def _scaled(perf: dict, factor: float) -> dict:
    """The made-up perf numbers times `factor` (script key `__perf_scale__`: {package file name:
    factor}, to fake a slower or bigger package)."""
    out = json.loads(json.dumps(perf))
    for key in ("total_s", "import_s", "p50_ms", "p99_ms", "min_ms", "max_ms", "mean_ms"):
        if key in out:
            out[key] *= factor
    for snap in ("memory_after",):
        if snap in out:
            out[snap]["host"]["peak_rss"] = int(out[snap]["host"]["peak_rss"] * factor)
    return out


def main(argv: list[str]) -> int:
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    with open(argv[1]) as f:
        job = json.load(f)
    script = json.loads(os.environ.get("AOTIPRE_FAKE_SCRIPT") or "{}")
    workdir = job["workdir"]
    faulthandler.enable()
    result = WorkerResult(job)
    for step in job["steps"]:
        sid, op = step["id"], step["op"]
        behaviour = script.get(sid) or script.get(op) or {}
        with result.step(sid, op) as entry:
            if behaviour.get("log"):
                os.write(2, behaviour["log"].encode())
            marker = os.path.join(workdir, f"fake-once-{sid.replace(':', '_')}")
            fire = not (behaviour.get("once") and os.path.exists(marker))
            if behaviour.get("once"):
                open(marker, "w").close()
            if fire and behaviour.get("crash"):
                os.kill(os.getpid(), getattr(signal, behaviour["crash"]))
                time.sleep(5)
            if fire and behaviour.get("exit") is not None:
                os._exit(int(behaviour["exit"]))
            if fire and behaviour.get("hang_hard"):
                while True:
                    time.sleep(1000)
            if fire and behaviour.get("hang"):
                faulthandler.dump_traceback_later(float(job["step_timeout_s"]), exit=True)
                while True:
                    time.sleep(1000)
            entry.update(_default_entry(op, step))
            entry.update(behaviour.get("entry", {}))
            scales = script.get("__perf_scale__", {})
            scale = scales.get(os.path.basename(job["package"] or ""))
            if scale and "perf" in entry:
                entry["perf"] = _scaled(entry["perf"], float(scale))
            if op == "latency" and isinstance(step.get("paired"), dict):
                # interleaved calls: the other package's (a_ms) and this one's (b_ms), scaled
                other = scales.get(os.path.basename(step["paired"]["package"]), 1.0)
                n = max(2, int(step["paired"].get("runs", 5)))
                entry["perf"]["paired"] = {
                    "a_ms": [float(other)] * n,
                    "b_ms": [float(scale or 1.0)] * n,
                }
            for key in ("package", "source_package"):
                if op == "load" and job.get(key) and not os.path.isabs(job[key]):
                    # the real worker runs in its own cwd: a relative path would not open
                    behaviour = {"error": {"type": "RuntimeError", "message": f"relative {key}"}}
            if behaviour.get("error"):
                entry.update(status="error", error=behaviour["error"])
            else:
                entry["status"] = "ok"
        if behaviour.get("unrecorded"):
            result.data["steps"].pop(sid, None)
            result.write()
        if entry["status"] == "error" and op in ("compile", "load"):
            break
        if script.get("__stop_after__") == sid:
            result.stop(sid, "scripted stop")
            break
    result.finish()
    if script.get("__teardown__"):
        os.kill(os.getpid(), getattr(signal, script["__teardown__"]))
        time.sleep(5)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
