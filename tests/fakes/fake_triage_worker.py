"""A stand-in for aotipre/runner/worker.py that replays crash logs for crash-triage tests.

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
- `minify`: `{"nodes": [9, 3]}` -> the minify op writes repro.py and those checkpoints.
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

OUTPUT = {"kind": "tensor", "dtype": "float32", "shape": [2, 4], "nan": 0, "inf": 0}


def _write(path: str | None, data: dict) -> None:
    if not path:
        return
    tmp = f"{path}.tmp"
    with open(tmp, "w") as f:
        json.dump(data, f)
    os.replace(tmp, path)


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
    with open(argv[1]) as f:
        job = json.load(f)
    scenario = json.loads(os.environ.get("AOTIPRE_FAKE_TRIAGE") or "{}")
    result_path = os.environ.get("AOTIPRE_RESULT_PATH")
    workdir = job["workdir"]
    data: dict = {"protocol": 1, "pid": os.getpid(), "current": None, "done": False, "steps": {}}
    _write(result_path, data)
    real_err = os.dup(2)
    real_out = os.dup(1)
    package = job.get("package")
    for step in job["steps"]:
        sid, op = step["id"], step["op"]
        log_path = os.path.join(workdir, f"{job.get('tag', 'job')}.{sid.replace(':', '_')}.log")
        data["current"] = {"id": sid, "log": log_path, "started": time.time()}
        _write(result_path, data)
        os.write(real_err, f"@@aotipre start {sid}\n".encode())
        started = time.monotonic()
        log = open(log_path, "w+b")  # noqa: SIM115
        os.dup2(log.fileno(), 2)
        if job.get("capture_stdout"):
            os.dup2(log.fileno(), 1)
        entry: dict = {"op": op, "status": "ok"}
        behaviour: dict = {}
        if op == "compile":
            out = step["out"]
            os.makedirs(os.path.dirname(out), exist_ok=True)
            with zipfile.ZipFile(out, "w") as zf:
                zf.writestr("model/archive_format", "pt2")
                zf.writestr("model/archive_version", "0")
                if scenario.get("wrapper"):
                    zf.writestr("model/data/aotinductor/model/c0.wrapper.cpp", scenario["wrapper"])
                if scenario.get("kernel"):
                    zf.writestr("model/data/aotinductor/model/c0.kernel.cpp", scenario["kernel"])
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
        os.dup2(real_err, 2)
        os.dup2(real_out, 1)
        log.seek(0)
        entry["log"] = log.read().decode("utf-8", errors="replace")[-24 * 1024 :]
        log.close()
        entry["duration_s"] = time.monotonic() - started
        data["steps"][sid] = entry
        data["current"] = None
        _write(result_path, data)
        if entry["status"] == "error" and op in ("compile", "load", "run"):
            if op != "run" or job["device"].startswith("cuda"):
                data["stopped"] = {"after": sid, "reason": "error"}
                break
    data["done"] = True
    _write(result_path, data)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
