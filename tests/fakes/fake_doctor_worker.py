"""A stand-in for the torch worker for `aotipre doctor` and the check canary (no torch).

`python fake_doctor_worker.py JOB.json`, scripted by `$AOTIPRE_FAKE_DOCTOR` (JSON). It speaks the
worker protocol for every op (facts, canary_program, compile, load, run, eager, compare, probe).
Script keys: a step id or op applies to every job; `canary.<id or op>` only to jobs on the
canary (whose source package is named canary*.pt2), and wins there. A behaviour is a dict:
- `crash`: a signal name: the process dies by it mid-step;
- `unless_preload`: with `crash`, crash only when $LD_PRELOAD does not contain this text;
- `log`: text written to the step's stderr first (e.g. a native backtrace);
- `error`: `{"type", "message"}`: the step fails with that exception;
- `entry`: merged into the step's record.
`facts` (a dict) is merged into the facts the `facts` op reports. `canary_program` copies
`$AOTIPRE_FAKE_CANARY` (a real ExportedProgram .pt2) to the step's `out`.
Standard library only.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import signal
import sys
import time

from fake_torch_worker import _default_entry, _write  # same folder: sys.path[0]


def default_facts() -> dict:
    return {
        "python": sys.version.split()[0],
        "executable": sys.executable,
        "torch": {
            "version": "2.13.0+fake",
            "cuda": None,
            "hip": None,
            "built_with": "GCC 11.2",
            "cxx11_abi": True,
        },
        "cuda": {"available": False},
        "compiler": {"env_cxx": None, "config_cxx": "(None, 'g++')", "chosen": "g++"},
        "inductor_cache_dir": "/tmp/torchinductor_fake",
        "tempdir": "/tmp",
        "loaded_libraries": [],
    }


def _merge(base: dict, extra: dict) -> dict:
    out = dict(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def main(argv: list[str]) -> int:
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    with open(argv[1]) as f:
        job = json.load(f)
    script = json.loads(os.environ.get("AOTIPRE_FAKE_DOCTOR") or "{}")
    canary = os.path.basename(job.get("source_package") or "").startswith("canary")
    result_path = os.environ.get("AOTIPRE_RESULT_PATH")
    workdir = job["workdir"]
    data: dict = {"protocol": 1, "pid": os.getpid(), "current": None, "done": False, "steps": {}}
    _write(result_path, data)
    real = os.dup(2)
    for step in job["steps"]:
        sid, op = step["id"], step["op"]
        behaviour = script.get(sid) or script.get(op) or {}
        for key in (f"canary.{sid}", f"canary.{op}") if canary else ():
            if key in script:
                behaviour = script[key]
                break
        log_path = os.path.join(workdir, f"{job.get('tag', 'job')}.{sid.replace(':', '_')}.log")
        data["current"] = {"id": sid, "log": log_path, "started": time.time()}
        _write(result_path, data)
        os.write(real, f"@@aotipre start {sid}\n".encode())
        started = time.monotonic()
        log = open(log_path, "w+b")  # noqa: SIM115
        os.dup2(log.fileno(), 2)
        if behaviour.get("log"):
            os.write(2, behaviour["log"].encode())
        unless = behaviour.get("unless_preload")
        spared = bool(unless) and unless in os.environ.get("LD_PRELOAD", "")
        if behaviour.get("crash") and not spared:
            os.kill(os.getpid(), getattr(signal, behaviour["crash"]))
            time.sleep(5)
        entry: dict = {"op": op, **_default_entry(op, step)}
        if op == "facts":
            entry["facts"] = _merge(default_facts(), script.get("facts") or {})
        elif op == "canary_program":
            os.makedirs(os.path.dirname(step["out"]), exist_ok=True)
            shutil.copyfile(os.environ["AOTIPRE_FAKE_CANARY"], step["out"])
            entry["package"] = step["out"]
        entry.update(behaviour.get("entry", {}))
        if behaviour.get("error"):
            entry.update(status="error", error=behaviour["error"])
        else:
            entry["status"] = "ok"
        os.dup2(real, 2)
        log.seek(0)
        entry["log"] = log.read().decode("utf-8", errors="replace")
        log.close()
        entry["duration_s"] = time.monotonic() - started
        data["steps"][sid] = entry
        data["current"] = None
        _write(result_path, data)
        if entry["status"] == "error" and op in ("compile", "load"):
            data["stopped"] = {"after": sid, "reason": f"{op} failed"}
            break
    data["done"] = True
    _write(result_path, data)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
