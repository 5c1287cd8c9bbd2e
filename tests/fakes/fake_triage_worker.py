"""A stand-in for aotipre/runner/worker/ that replays crash logs for crash-triage tests.

`python fake_triage_worker.py JOB.json`; the scenario comes from `$AOTIPRE_FAKE_TRIAGE` (JSON):
- `modes`: `{mode: behaviour}` for a model call (`run` step), where the mode is chosen the way a
  real run would differ: `printer-3` / `printer-2` / `nan-asserts` when the loaded package was
  compiled with that printer level or nan_asserts (the fake compile records its configs next to
  the package), else `sync` under CUDA_LAUNCH_BLOCKING=1, else `plain`. A behaviour has
  `stdout` (printer output, written to fd 1), `log` (stderr), `error` (`{"type", "message"}`:
  the call raises) and `crash` (a signal name: the process dies by it after writing).
- `wrapper`, `kernel`: the generated code a fake compile puts into its package
  (`model/data/aotinductor/model/c0.wrapper.cpp`, `.kernel.cpp`).
- `eager`: a behaviour for the eager step (default: it succeeds).
- `input_stats`: a behaviour for the kernel-inputs step, with `stats`: `{path: statistics}` of
  the sample's tensors (`args[0]`: {"dtype", "shape", "min", "max", ...}); a path it lacks is
  not returned.
- `minify`: `{"nodes": [9, 3]}` -> the minify op writes repro.py and those checkpoints.
- `jobs_seen`: a file each worker appends its job's tag and `vec_isa` to (a JSON line).
Standard library only; stdout is captured into the step log when the job says so, as the real
worker does.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import sys
import time
import zipfile

from protocol import WorkerResult  # same folder: sys.path[0]

OUTPUT = {"kind": "tensor", "dtype": "float32", "shape": [2, 4], "nan": 0, "inf": 0}


def _configs_of(package: str | None) -> dict:
    try:
        with open(f"{package}.configs.json") as f:
            return json.load(f)
    except (OSError, ValueError, TypeError):
        return {}


def _mode(job: dict, package: str | None) -> str:
    configs = _configs_of(package)
    level = str(configs.get("aot_inductor.debug_intermediate_value_printer", "0"))
    if level in ("2", "3"):
        return f"printer-{level}"
    if configs.get("nan_asserts"):
        return "nan-asserts"
    if os.environ.get("CUDA_LAUNCH_BLOCKING") == "1":
        return "sync"
    return "plain"


def main(argv: list[str]) -> int:
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    prewarmed = "AOTIPRE_PREWARM" in os.environ
    if prewarmed:  # as the real worker's prewarm_and_wait: say it waits, then wait for the job
        started = json.loads(os.environ.get("AOTIPRE_FAKE_TRIAGE") or "{}").get("jobs_seen")
        if started:
            with open(started, "a") as f:
                f.write(json.dumps({"prewarm_pid": os.getpid()}) + "\n")
        open(argv[1] + ".waiting", "w").close()
        deadline = time.monotonic() + float(os.environ.get("AOTIPRE_PREWARM_WAIT_S", "900"))
        while not os.path.exists(argv[1]) and time.monotonic() < deadline:
            time.sleep(0.01)
    with open(argv[1]) as f:
        job = json.load(f)
    scenario = json.loads(os.environ.get("AOTIPRE_FAKE_TRIAGE") or "{}")
    if scenario.get("jobs_seen"):
        with open(scenario["jobs_seen"], "a") as f:
            seen = {"tag": job.get("tag"), "vec_isa": job.get("vec_isa"), "prewarmed": prewarmed}
            f.write(json.dumps(seen) + "\n")
    result = WorkerResult(job)
    package = job.get("package")
    for step in job["steps"]:
        sid, op = step["id"], step["op"]
        capture = bool(job.get("capture_stdout"))
        with result.step(sid, op, capture_stdout=capture, log_tail=24 * 1024) as entry:
            behaviour: dict = {}
            entry["status"] = "ok"
            if op == "compile":
                out = step["out"]
                os.makedirs(os.path.dirname(out), exist_ok=True)
                with zipfile.ZipFile(out, "w") as zf:
                    zf.writestr("model/archive_format", "pt2")
                    zf.writestr("model/archive_version", "0")
                    if scenario.get("wrapper"):
                        zf.writestr(
                            "model/data/aotinductor/model/c0.wrapper.cpp", scenario["wrapper"]
                        )
                    if scenario.get("kernel"):
                        zf.writestr(
                            "model/data/aotinductor/model/c0.kernel.cpp", scenario["kernel"]
                        )
                with open(f"{out}.configs.json", "w") as f:
                    json.dump(step.get("inductor_configs") or {}, f)
                entry["package"] = out
            elif op == "load":
                package = step.get("package") or job.get("package")
                entry["how"] = "fake"
            elif op in ("run", "probe"):
                behaviour = scenario.get("modes", {}).get(_mode(job, package), {})
                entry["outputs"] = [dict(OUTPUT)]
            elif op == "eager":
                behaviour = scenario.get("eager", {})
                entry["outputs"] = [dict(OUTPUT)]
            elif op == "input_stats":
                behaviour = scenario.get("input_stats", {})
                given = behaviour.get("stats", {})
                entry["stats"] = [
                    {"name": t["name"], **given[t["path"]]}
                    for t in step.get("tensors") or []
                    if t["path"] in given
                ]
            elif op == "save_inputs":
                with open(step["out"], "wb") as f:
                    f.write(b"fake inputs")
            elif op == "minify":
                out_dir = step["out_dir"]
                nodes = scenario.get("minify", {}).get("nodes", [9, 3])
                ckpt = os.path.join(out_dir, "debug", "run_0", "minifier", "checkpoints")
                os.makedirs(ckpt, exist_ok=True)
                for n in nodes:
                    open(os.path.join(ckpt, f"{n}.py"), "w").close()
                ep = os.path.join(ckpt, "exported_program.pt2")
                open(ep, "w").close()
                repro = os.path.join(out_dir, "repro.py")
                with open(repro, "w") as f:
                    f.write(f"exported_program = torch.export.load('{ep}')\n")
                entry["repro"] = repro
                entry["check_str"] = step.get("check_str")
            if behaviour.get("stdout"):
                os.write(1, behaviour["stdout"].encode())
            if behaviour.get("log"):
                os.write(2, behaviour["log"].encode())
            if behaviour.get("crash"):
                os.kill(os.getpid(), getattr(signal, behaviour["crash"]))
                time.sleep(5)
            if behaviour.get("error"):
                entry.update(status="error", error=behaviour["error"])
                entry.pop("outputs", None)
        if entry["status"] == "error" and op in ("compile", "load", "run"):
            if op != "run" or job["device"].startswith("cuda"):
                result.stop(sid, "error")
                break
    result.finish()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
