"""Plan the worker steps that build and run aotipre's C++ harness, and read their records.

The harness (harness.cpp, beside this module) loads a package with
`torch::inductor::AOTIModelPackageLoader`, as a C++ server does. The worker builds it against the
installed torch (`cpp_build`: headers and libraries of the wheel, rpath to its lib folder, the
wheel's C++ ABI, the compiler torch's inductor uses), cached under
`<cache dir>/cpp-harness/harness-<key>/` where the key holds the torch version and location, the
compiler and its version, and the source's hash; it is built in a `.tmp-` folder and renamed into
place. Before a worker may use that cache (`prepare_build`, run by launch.run_job_file) every
entry in it is verified (`entry_problem`: the manifest `seal_build` wrote after the build, the
hashes, owner and permissions); an entry that fails is moved away, so the worker builds afresh,
or the cache is not used for that job. `cpp_inputs` writes the flat inputs as
AOTICompiledModel passes them to the loader,
`cpp_run` runs the harness in a child process (mode run, loaders or runners) under a time limit,
`cpp_compare` compares its outputs with the Python loader's. Nothing here imports torch.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from aotipre.findings import Finding, Severity, codes
from aotipre.runner import cache as cache_mod

SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "harness.cpp")
CACHE_SUBDIR = "cpp-harness"
BUILD_TIMEOUT_S = 600.0
"""g++ over the torch headers: ~25 s on 2 shared cores, 8 s on the GPU test machine."""
MODES = ("run", "loaders", "runners")
LOAD_PHASES = ("load_library", "read_inputs", "construct", "concurrent_construct")
"""Harness phases before any model code ran."""
BINARY = "aotipre_harness"
"""The binary's name in its entry (the worker's HARNESS_BINARY)."""
BUILD_RECORD = "build.json"
"""What the worker built from: the identity the key hashes, the command, the build time."""
MANIFEST = "aotipre-manifest.json"
"""Written by aotipre after a successful build (`seal_build`): what proves an entry is its own."""
MANIFEST_KIND = "cpp-harness"
IN_FLIGHT_S = 3600.0
"""An entry of this user's without a manifest yet, younger than this, may be another aotipre's
build whose job has not ended (it seals after the job): it is neither used nor removed, the job
builds in its own folder instead."""


def cache_root(cache_dir: str | None, use_cache: bool, workdir: str) -> str:
    """Where the harness binary is kept: the compile cache's sibling, or `workdir` without it."""
    if not use_cache:
        return os.path.join(workdir, CACHE_SUBDIR)
    return os.path.join(cache_dir or cache_mod.default_cache_dir(), CACHE_SUBDIR)


def harness_digest(ident: Mapping[str, Any]) -> str:
    """sha256 of the build's identity (toolchain, torch, protocol, source hash) as the worker
    hashes it; the entry's key is its first 24 hex digits."""
    return hashlib.sha256(json.dumps(dict(ident), sort_keys=True).encode()).hexdigest()


def _identity(directory: str) -> dict[str, Any]:
    """The identity in an entry's build record (the record less the command and build time).
    Raises OSError, ValueError."""
    with open(os.path.join(directory, BUILD_RECORD), "rb") as f:
        record = json.loads(f.read(1 << 20))
    if not isinstance(record, dict):
        raise ValueError(f"{BUILD_RECORD} is not an object")
    return {k: v for k, v in record.items() if k not in ("command", "build_s")}


def entry_problem(directory: str) -> str | None:
    """Why the harness entry `directory` (`harness-<key>`) must not be run (None: it may): its
    manifest (cache_mod.verify_entry: owner, permissions, links, exactly the files listed, each
    file's size and sha256), the binary and build record in it, and a build identity that
    hashes to the entry's key and to the manifest's record of its inputs."""
    key = os.path.basename(directory).removeprefix("harness-")
    manifest, why = cache_mod.verify_entry(directory, MANIFEST, {"kind": MANIFEST_KIND, "key": key})
    if manifest is None:
        return why
    if set(manifest["files"]) != {BINARY, BUILD_RECORD}:
        return f"{directory}: its manifest does not list {BINARY} and {BUILD_RECORD}"
    try:
        ident = _identity(directory)
    except (OSError, ValueError) as exc:
        return f"{directory}: {exc}"
    digest = harness_digest(ident)
    recorded = manifest.get("inputs")
    inputs: dict[str, Any] = recorded if isinstance(recorded, dict) else {}
    if digest[:24] != key or inputs.get("toolchain_sha256") != digest:
        return f"{directory}: its build record is not what its key and manifest were made from"
    if inputs.get("source_sha256") != ident.get("source"):
        return f"{directory}: its manifest names another source than its build record"
    return None


def _in_flight(directory: str) -> bool:
    if cache_mod.path_problem(directory, folder=True) is not None:
        return False
    if os.path.lexists(os.path.join(directory, MANIFEST)):
        return False
    try:
        return time.time() - os.lstat(directory).st_mtime < IN_FLIGHT_S
    except OSError:
        return False


def prepare_build(step: Mapping[str, Any], workdir: str) -> dict[str, Any]:
    """The `cpp_build` step a worker may run: every `harness-*` entry of its cache root is
    verified first (the worker runs the entry of its key, if there is one). An entry that fails
    is moved away (the worker then builds a fresh one and renames it into place); where it
    cannot be (not ours to move, maybe another aotipre's build in progress), or the root itself
    may be written by others, the step gets a root of its own in `workdir` (the cache is not
    used; `cache_ignored` says why)."""
    root = os.path.abspath(str(step["cache_root"]))
    private = os.path.join(os.path.abspath(workdir), CACHE_SUBDIR)

    def ignored(why: str) -> dict[str, Any]:
        return {**step, "cache_root": private, "cache_ignored": why}

    try:
        cache_mod.make_private_root(root)
        names = sorted(os.listdir(root))
    except OSError as exc:
        return ignored(f"{root}: {exc.strerror or exc}") if root != private else dict(step)
    why = cache_mod.root_problem(root)
    if why is not None:
        return ignored(why)
    for name in names:
        if not name.startswith("harness-"):
            continue  # the worker looks up `harness-<key>` only (`.tmp-` folders are builds)
        entry = os.path.join(root, name)
        why = entry_problem(entry)
        if why is None:
            continue
        if _in_flight(entry):
            return ignored(f"{why} (another aotipre's build in progress?)")
        try:
            cache_mod.move_aside(entry)
        except OSError:
            return ignored(why)
    return {**step, "cache_root": root}


def seal_build(step: Mapping[str, Any], entry: Any) -> None:
    """After the job that ran `step`: write the manifest of the harness its worker built (not
    one it found cached), with the sha256 of its build inputs (the source, the whole build
    identity) and of its files. An entry left unsealed (a build record that does not hash to
    its key, an error) is rebuilt by the next `prepare_build`."""
    if (
        not isinstance(entry, dict)
        or entry.get("status") != "ok"
        or entry.get("cached") is not False
    ):
        return
    key, binary = str(entry.get("key") or ""), str(entry.get("binary") or "")
    directory = os.path.join(os.path.abspath(str(step["cache_root"])), f"harness-{key}")
    if not key or binary != os.path.join(directory, BINARY):
        return
    try:
        if entry_problem(directory) is None:
            return  # sealed already (another process built the same key first)
        ident = _identity(directory)
        digest = harness_digest(ident)
        if digest[:24] != key:
            return
        inputs = {"source_sha256": ident.get("source"), "toolchain_sha256": digest}
        cache_mod.write_manifest(
            directory,
            MANIFEST,
            {"kind": MANIFEST_KIND, "key": key, "inputs": inputs, "identity": ident},
            [BINARY, BUILD_RECORD],
        )
    except (OSError, ValueError):
        return


def build_step(root: str, *, cxx: str | None = None, loader_race: bool = True) -> dict[str, Any]:
    return {
        "id": "cpp_build",
        "op": "cpp_build",
        "source": SOURCE,
        "cache_root": root,
        "cxx": cxx,
        "loader_race": loader_race,
        "build_timeout_s": BUILD_TIMEOUT_S,
        "timeout_s": BUILD_TIMEOUT_S + 60.0,
    }


def inputs_step(out: str, requires: tuple[str, ...] = ()) -> dict[str, Any]:
    return {"id": "cpp_inputs", "op": "cpp_inputs", "out": out, "requires": list(requires)}


def run_step(
    step_id: str,
    *,
    mode: str,
    package: str,
    model: str,
    inputs: str,
    outputs: str | None = None,
    device_index: int = -1,
    libraries: tuple[str, ...] = (),
    threads: int = 4,
    runners: int = 2,
    iterations: int = 3,
    timeout_s: float | None = None,
    unset_env: tuple[str, ...] = (),
    stateful: bool = False,
) -> dict[str, Any]:
    """A `cpp_run` step; its binary is the one the `cpp_build` step of the same job made.
    `stateful` (mode runners): the model mutates buffers, so the runs are judged against the
    same number of calls made one after another on a fresh loader (harness.cpp --stateful)."""
    if mode not in MODES:
        raise ValueError(f"unknown harness mode {mode!r}")
    step: dict[str, Any] = {
        "id": step_id,
        "op": "cpp_run",
        "binary_from": "cpp_build",
        "mode": mode,
        "package": package,
        "model": model,
        "inputs": inputs,
        "outputs": outputs,
        "device_index": device_index,
        "libraries": list(libraries),
        "unset_env": list(unset_env),
        "requires": ["cpp_build", "cpp_inputs"],
    }
    if mode != "run":
        step.update(threads=threads, runners=runners, iterations=iterations)
    if stateful and mode == "runners":
        step["stateful"] = True
    if timeout_s is not None:
        step["timeout_s"] = timeout_s
    return step


def serial_retry(loaders: dict[str, Any]) -> dict[str, Any]:
    """The `loaders` step again with construction serialized, run only when it failed: whether a
    failure came from constructing concurrently (hit_the_known_race)."""
    return {
        **loaders,
        "id": serial_id(loaders["id"]),
        "serial_construct": True,
        "only_if_failed": loaders["id"],
    }


def serial_id(step_id: str) -> str:
    return f"{step_id}_serial"


def compare_step(cpp_outputs: str, python_outputs: str, requires: str) -> dict[str, Any]:
    return {
        "id": "cpp_compare",
        "op": "cpp_compare",
        "a": cpp_outputs,
        "b": python_outputs,
        "requires": [requires],
    }


@dataclass(frozen=True)
class HarnessRun:
    """What one `cpp_run` step's harness process did."""

    mode: str
    returncode: int | None
    signal: str | None
    timed_out: bool
    phase: str | None
    """The last phase the harness announced (construct, run, concurrent_construct, ...)."""
    result: dict[str, Any] | None
    """Its JSON line, when it wrote one."""
    stderr_tail: str
    duration_s: float
    argv: tuple[str, ...]
    unset_env: tuple[str, ...] = ()
    """Environment variables the harness ran without (a libstdc++ preload only Python needed)."""
    limit_s: float | None = None
    """The harness process's own time limit (the step's, less the worker's margin)."""

    @classmethod
    def from_entry(cls, entry: dict[str, Any], mode: str = "run") -> HarnessRun | None:
        rec = entry.get("harness")
        if not isinstance(rec, dict):
            return None
        result = rec.get("result")
        argv = tuple(str(a) for a in rec.get("argv") or ())
        asked = dict(zip(argv, argv[1:])).get("--mode", mode)  # a crash leaves no result
        return cls(
            mode=str((result or {}).get("mode") or asked) if isinstance(result, dict) else asked,
            returncode=rec.get("returncode"),
            signal=rec.get("signal"),
            timed_out=bool(rec.get("timed_out")),
            phase=rec.get("phase"),
            result=result if isinstance(result, dict) else None,
            stderr_tail=str(rec.get("stderr_tail") or ""),
            duration_s=float(rec.get("duration_s") or 0.0),
            argv=argv,
            unset_env=tuple(str(v) for v in rec.get("unset_env") or ()),
            limit_s=float(rec["limit_s"]) if isinstance(rec.get("limit_s"), (int, float)) else None,
        )

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and bool(self.result and self.result.get("ok"))

    @property
    def error(self) -> dict[str, Any]:
        err = (self.result or {}).get("error")
        return err if isinstance(err, dict) else {}

    @property
    def error_phase(self) -> str | None:
        return (self.result or {}).get("error_phase") or self.phase

    @property
    def stateful(self) -> bool:
        """Mode runners on a model that mutates buffers: its runs were judged against calls
        made one after another on a fresh loader (`--stateful`)."""
        return self.mode == "runners" and "--stateful" in self.argv

    @property
    def differs(self) -> bool:
        """Concurrency modes: outputs of threads or loaders were not identical."""
        return self.returncode == 4 or (self.result or {}).get("identical") is False

    def where(self) -> str:
        """The phase in words."""
        phase = self.error_phase or "start-up"
        return {
            "load_library": "loading the --library files",
            "read_inputs": "reading the inputs",
            "construct": "constructing the loader",
            "sequential_run": "the calls made one after another on a fresh loader",
            "reference_run": "the reference run",
            "concurrent_construct": "constructing the loaders concurrently",
            "concurrent_run": "the concurrent runs",
            "run": "running the model",
            "write_outputs": "writing the outputs",
            "compare": "comparing outputs",
        }.get(phase, phase)

    def evidence(self) -> tuple[str, ...]:
        lines = []
        if self.error.get("message"):
            lines.append(str(self.error["message"]).strip().splitlines()[0][:400])
        tail = [ln.strip() for ln in self.stderr_tail.splitlines() if ln.strip()]
        lines.extend(tail[-4:])
        return tuple(lines)


def hit_the_known_race(run: HarnessRun, serial: HarnessRun | None) -> bool:
    """A `loaders` run that crashed or raised, where the same loaders constructed one at a time
    (`serial`, a mutex around the constructor) then run at once all passed: the failure came from
    constructing concurrently, what torch #194128 breaks. Measured with scripts/cpp_race.py: on
    the GPU test machine (torch 2.11, H200) 9 runs of 4 CUDA loaders in 20 failed, raising "No
    device information found." or "[json.exception.type_error.302] type must be string, but is
    null", or dying by SIGSEGV or SIGABRT; on torch 2.13 (CPU, 2 cores) about 1 run in 15 raised
    the first. A hang or outputs that differ are never read as the race."""
    if serial is None or "--serial-construct" not in serial.argv:
        return False
    if run.mode != "loaders" or run.ok or run.timed_out or not serial.ok:
        return False
    return bool(run.signal or run.error)


def describe_mode(run: HarnessRun) -> str:
    r = dict(_argv_counts(run.argv))
    r.update({k: v for k, v in (run.result or {}).items() if k in r})
    if run.mode == "loaders" and "--serial-construct" in run.argv:
        return f"{r.get('threads', '?')} loaders constructed one at a time, then run at once"
    if run.mode == "loaders":
        return f"{r.get('threads', '?')} loaders constructed at once on {r.get('threads', '?')} threads"
    if run.mode == "runners":
        text = (
            f"one loader with num_runners={r.get('runners', '?')}, {r.get('threads', '?')} "
            f"threads x {r.get('iterations', '?')} runs at once"
        )
        if run.stateful:
            text += (
                f" (the model mutates buffers: judged against {_sequence_calls(run)} calls made "
                "one after another on a fresh loader)"
            )
        return text
    return "one loader, one run"


def _sequence_calls(run: HarnessRun) -> str:
    """How many calls the stateful runs were judged against: the reference run and every
    concurrent one."""
    calls = (run.result or {}).get("sequence_calls")
    if isinstance(calls, int) and calls > 0:
        return str(calls)
    counts = _argv_counts(run.argv)
    try:
        return str(1 + int(str(counts["threads"])) * int(str(counts["iterations"])))
    except ValueError:
        return "the same number of"


def _argv_counts(argv: tuple[str, ...]) -> dict[str, object]:
    """--threads, --runners, --iterations as the harness was asked (its result may be absent)."""
    out: dict[str, object] = {"threads": "?", "runners": "?", "iterations": "?"}
    for flag, value in zip(argv, argv[1:]):
        if flag.startswith("--") and flag[2:] in out:
            out[flag[2:]] = value
    return out


def harness_findings(
    run: HarnessRun,
    *,
    model: str,
    stage: str,
    timeout_s: float,
    known_race: bool | None = None,
    serial: HarnessRun | None = None,
) -> list[Finding]:
    """The findings of a harness run that did not succeed (none when it did). `serial`: the
    same `loaders` run with construction serialized, run only after this one failed."""
    if run.ok:
        return []
    if serial is not None and "--serial-construct" not in serial.argv:
        serial = None  # not a serial retry
    fields: dict[str, Any] = {"model": model, "stage": stage, "evidence": run.evidence()}
    what = describe_mode(run)
    within = _within(run, timeout_s)
    if run.mode in ("loaders", "runners"):
        code = "AOT526" if run.mode == "loaders" else "AOT527"
        if run.timed_out:
            how = f"did not finish within {within} ({run.where()})"
        elif run.signal:
            how = f"crashed with {run.signal} during {run.where()}"
        elif run.error:
            how = f"raised during {run.where()}: {_first_line(run.error)}"
        elif run.differs and run.stateful:
            # the runners of one loader share its buffers and run() takes no lock around them
            # (aoti_runtime/model_container.h): calls that overlap can read and write the
            # state at once. Whether this run's calls overlapped is timing: a warning
            return [
                codes.get("AOT527").finding(
                    f"C++ concurrency, {what}: {_stateful_mismatch(run)}: calls that ran at "
                    "the same time raced on the buffers the runners share; serialize calls "
                    "to this model (a mutex around run), or give each thread its own loader",
                    severity=Severity.WARNING,
                    **fields,
                )
            ]
        elif run.differs:
            how = f"returned outputs that differ between threads or runs ({_max_abs(run)})"
        else:
            how = f"failed ({_exit(run)})"
        race = ""
        if run.mode == "loaders" and serial is not None:
            race = (
                "; constructed one at a time (a mutex around the constructor), the same loaders "
                + (
                    "ran with identical outputs"
                    if serial.ok
                    else "failed too: running the model from several threads at once fails, "
                    "not constructing the loaders"
                )
            )
        if run.mode == "loaders" and known_race and (serial is None or serial.ok):
            race += (
                "; this torch's loader has the data race of torch issue #194128 (a shared static "
                "JSON object in load_json_file)"
            )
            if hit_the_known_race(run, serial):
                # the race AOT528 already reports, hit by this run and gone with construction
                # serialized: a warning, so that whether a run happens to hit it does not decide
                # the verdict; the deployment's fix is the mutex
                return [
                    codes.get("AOT526").finding(
                        f"C++ concurrency, {what}: {how}{race}, hit by this run: serialize "
                        "loader construction in a C++ server (AOT528 reports the risk on every "
                        "run)",
                        severity=Severity.WARNING,
                        **fields,
                    )
                ]
        return [codes.get(code).finding(f"C++ concurrency, {what}: {how}{race}", **fields)]
    before_model = (run.error_phase or "") in LOAD_PHASES
    if run.timed_out:
        return [
            codes.get("AOT524").finding(
                f"the C++ harness did not finish within {within} ({run.where()})",
                **fields,
            )
        ]
    if run.signal:
        return [
            codes.get("AOT523").finding(
                f"the C++ harness crashed with {run.signal} while {run.where()} "
                f"(AOTIModelPackageLoader {'construction' if before_model else 'run'})",
                **fields,
            )
        ]
    if run.error:
        code = "AOT521" if before_model else "AOT522"
        message = _first_line(run.error)
        return [
            codes.get(code).finding(
                f"the C++ loader raised while {run.where()}: {message}", **fields
            )
        ]
    return [
        codes.get("AOT523").finding(
            f"the C++ harness failed without a result ({_exit(run)}, last phase "
            f"{run.phase or 'none'})",
            **fields,
        )
    ]


def _within(run: HarnessRun, timeout_s: float) -> str:
    """The time the harness had: its own limit where recorded (the worker keeps a margin of the
    step's limit to report it), else the step's."""
    if run.limit_s is None or abs(run.limit_s - timeout_s) < 0.05:
        return f"{timeout_s:g} s"
    return f"{run.limit_s:.3g} s (of the step's {timeout_s:g} s limit)"


def _first_line(error: dict[str, Any]) -> str:
    text = str(error.get("message") or error.get("type") or "").strip()
    return (text.splitlines() or [""])[0][:600].rstrip(".")


def _exit(run: HarnessRun) -> str:
    return f"exit status {run.returncode}" if run.returncode is not None else "no exit status"


def _stateful_mismatch(run: HarnessRun) -> str:
    """How a stateful model's concurrent outputs differ from its sequential calls, in words."""
    result = run.result or {}
    parts = []
    unmatched = int(result.get("unmatched") or 0)
    repeated = int(result.get("repeated") or 0)
    if unmatched:
        parts.append(
            f"{unmatched} output(s) that no call of the sequence returned ({_max_abs(run)})"
        )
    if repeated:
        parts.append(
            f"{repeated} output(s) that repeat a call's outputs (two calls read the same state)"
        )
    return "returned " + ("; ".join(parts) or "outputs unlike the sequence's")


def _max_abs(run: HarnessRun) -> str:
    rows = (run.result or {}).get("per_thread") or []
    worst = max((float(r.get("max_abs") or 0.0) for r in rows if isinstance(r, dict)), default=0.0)
    return f"largest absolute difference {worst:g}"
