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

from fake_torch_worker import _default_entry  # same folder: sys.path[0]
from protocol import WorkerResult


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
    result = WorkerResult(job)
    for step in job["steps"]:
        sid, op = step["id"], step["op"]
        behaviour = script.get(sid) or script.get(op) or {}
        for key in (f"canary.{sid}", f"canary.{op}") if canary else ():
            if key in script:
                behaviour = script[key]
                break
        with result.step(sid, op) as entry:
            if behaviour.get("log"):
                os.write(2, behaviour["log"].encode())
            unless = behaviour.get("unless_preload")
            spared = bool(unless) and unless in os.environ.get("LD_PRELOAD", "")
            if behaviour.get("crash") and not spared:
                os.kill(os.getpid(), getattr(signal, behaviour["crash"]))
                time.sleep(5)
            entry.update(_default_entry(op, step))
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
        if entry["status"] == "error" and op in ("compile", "load"):
            result.stop(sid, f"{op} failed")
            break
    result.finish()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
