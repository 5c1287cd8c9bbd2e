"""torch's CPU-ISA probe, paid once per host instead of once per worker.

`aoti_load_package` runs torch's CPU-ISA probe (`get_device_information` ->
`valid_vec_isa_list`: a check program per ISA, compiled with g++ and dlopened in a child
process; torch #191715) before it touches the package: 1-3 s on a 2-core VM, 33-49 s on the GPU
test machine, for the same answer every time. For an already compiled package the answer only
feeds a device-information warning; for a compile it picks the vector ISA of the generated
code. Every aotipre worker paid it again: the load, a reload in a fresh worker, a compile, each
triage step, and every package of a zoo.

The host's first check measures what the probe found and what it cost, with the loader's
imports, in a fresh process of its own beside its first worker (runner/loadmeasure.py; else the
first timed load, `measure_load` in the worker, does) and records them in aotipre's cache
(`<cache>/loadcost/<key>.json`), keyed
by everything the answer depends on: the interpreter, the torch build, the CPU (model and
flags), the C++ compiler torch would run and the environment variables the probe reads. Later
workers answer the probe with that list (`worker.pin_vec_isa`: torch's own code runs with the
same answer, and `pick_vec_isa` chooses among it as it would), and the perf stage reports the
probe's recorded cost with when it was measured (`with_recorded_probe`), so the load figure is
still what a fresh deployment process pays. With the cache off (`--no-cache`) nothing is read
or kept: each check measures the probe again and hands its answer to its own later workers.

A check without the perf stage (`--no-perf`) reports no cost, so it measures none: without a
record, its first load's answer is kept as a record of the list alone (`costed` false), which
answers the probe for later checks without the perf stage (on a GPU host the probe is tens of
seconds per process). A check with the perf stage reads such a record as absent: it measures,
and its record of the list and the cost takes the place of the list alone.

A record is read only when it is aotipre's own (runner.cache.path_problem: this user's, not
writable by others, no link) and well-formed; anything else is treated as absent.
"""

from __future__ import annotations

import calendar
import contextlib
import hashlib
import json
import math
import os
import re
import shutil
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from aotipre.runner import cache as cache_mod

if TYPE_CHECKING:
    from aotipre.runner.loadmeasure import Measurement

FORMAT = 3
"""Bumped whenever the key or the record changes (2: the loader's import cost; 3: a record of
the list alone). The key includes it, so another format's record is never read."""
FOLDER = "loadcost"
PROBE_ENV = ("CXX", "TORCHINDUCTOR_VEC_ISA_OK", "ATEN_CPU_CAPABILITY", "TORCHINDUCTOR_CACHE_DIR")
"""Environment variables that change what the probe answers or what it costs: the compiler
(torch's config.cpp.cxx reads CXX), the ISA shortcut, the capability override, and where the
probe's built check programs are cached (torch 2.14+ skips the build when they are there)."""
MAX_ISAS = 16
_ISA_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,63}$")
_PROBE_NUMBERS = ("seconds", "dlopen_children_s", "gxx_s", "base_checks_s")
_PROBE_COUNTS = ("check_programs", "dlopen_children", "gxx_builds", "gxx_failed", "base_checks")
_MAX_RECORD_BYTES = 64 * 1024
MAX_AGE_S = 7 * 24 * 3600
"""A record older than this is measured again (a machine that was busy when it was measured
does not speak for it forever)."""
_STAMP = "%Y-%m-%dT%H:%M:%SZ"


@dataclass(frozen=True)
class ProbeRecord:
    """What torch's CPU-ISA probe found and cost on this host, measured in one fresh process."""

    vec_isa: tuple[str, ...]
    """The usable ISAs, by torch's class name (`VecAVX2`, `VecAVX512`...), in torch's order."""
    probe: Mapping[str, Any]
    """measure_load's `probe` breakdown of that load (seconds, check programs, g++ builds)."""
    measured_at: str
    """When (UTC, ISO 8601, seconds)."""
    loader_import_s: float | None = None
    """What importing the loader's modules (torch._inductor, torch.export) cost that process:
    the part of `aoti_load_package` before the package is touched, the same for any package.
    None: not measured (that load's process had imported them before)."""
    costed: bool = True
    """False: the list alone, from a load in a check without the perf stage (no cost measured;
    `probe` is empty): it answers the probe for checks that report no cost, and only them."""

    @property
    def seconds(self) -> float:
        value = self.probe.get("seconds")
        return float(value) if isinstance(value, (int, float)) else 0.0


def host_key(
    python: str, torch_version: str, torch_path: str, env: Mapping[str, str]
) -> str | None:
    """The record's key for workers run by `python` (with `torch_version` installed at
    `torch_path`) in `env`; None when the CPU cannot be identified (nothing is cached then)."""
    cpu = _cpu_identity()
    if cpu is None:
        return None
    payload = {
        "format": FORMAT,
        "python": os.path.abspath(python),
        "torch": torch_version,
        "torch_path": torch_path,
        "cpu": cpu,
        "compiler": _compiler_identity(env),
        "env": {k: env.get(k) for k in PROBE_ENV},
    }
    text = json.dumps(payload, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def _cpu_identity() -> str | None:
    """The first CPU's model name and flags from /proc/cpuinfo (what torch's x86 ISA checker
    reads through cpuinfo), or None."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            text = f.read(1 << 20)
    except OSError:
        return None
    return cpu_description(text)


def cpu_description(cpuinfo: str) -> str | None:
    """The identifying lines of the first processor block of a /proc/cpuinfo text (x86:
    vendor, model name, flags; arm: features, implementer, part), or None when it has none."""
    first = cpuinfo.split("\n\n", 1)[0]
    keep = [
        line.strip()
        for line in first.splitlines()
        if line.split(":", 1)[0].strip()
        in ("vendor_id", "model name", "flags", "Features", "CPU implementer", "CPU part")
    ]
    return "\n".join(keep) or None


def _compiler_identity(env: Mapping[str, str]) -> list[Any]:
    """The C++ compiler torch's probe runs (CXX, else g++ on PATH): its resolved path, size and
    modification time, so that an upgraded or replaced compiler is a new key."""
    name = env.get("CXX") or ("clang++" if sys.platform == "darwin" else "g++")
    found = shutil.which(name, path=env.get("PATH"))
    if found is None:
        return [name, None]
    real = os.path.realpath(found)
    try:
        st = os.stat(real)
    except OSError:
        return [name, real]
    return [name, real, st.st_size, st.st_mtime_ns]


def folder(cache_dir: str | None) -> str:
    return os.path.join(cache_dir or cache_mod.default_cache_dir(), FOLDER)


def read(cache_dir: str | None, key: str) -> ProbeRecord | None:
    """The record for `key`, when there is a trusted, well-formed one."""
    root = folder(cache_dir)
    path = os.path.join(root, f"{key}.json")
    if cache_mod.root_problem(root) is not None or not os.path.lexists(path):
        return None
    if cache_mod.path_problem(path, folder=False) is not None:
        return None
    try:
        with open(path, "rb") as f:
            data = json.loads(f.read(_MAX_RECORD_BYTES))
    except (OSError, ValueError):
        return None
    return parse(data, key)


def parse(data: Any, key: str, now: float | None = None) -> ProbeRecord | None:
    """A ProbeRecord from a record file's JSON, or None when any part is not as `write` makes
    it (another format or key, an ISA name that is not a plain identifier, a count that is not
    a non-negative integer, a time that is not a finite non-negative number), or measured more
    than MAX_AGE_S before `now` (default: the current time) or after it."""
    now = time.time() if now is None else now
    if not isinstance(data, dict) or data.get("format") != FORMAT or data.get("key") != key:
        return None
    names = data.get("vec_isa")
    probe = data.get("probe")
    measured_at = data.get("measured_at")
    if not isinstance(names, list) or not 0 < len(names) <= MAX_ISAS:
        return None
    if not _isa_names(names):
        return None
    if len(set(names)) != len(names):
        return None
    if not isinstance(probe, dict) or not isinstance(measured_at, str) or len(measured_at) > 40:
        return None
    costed = data.get("costed", True)
    if not isinstance(costed, bool) or (
        not costed and (probe or data.get("loader_import_s") is not None)
    ):
        return None
    try:
        when = calendar.timegm(time.strptime(measured_at, _STAMP))
    except ValueError:
        return None
    if not 0 <= now - when <= MAX_AGE_S:
        return None
    clean = _clean_probe(probe) if costed else {}
    if clean is None:
        return None
    imports = data.get("loader_import_s")
    if imports is not None and (
        isinstance(imports, bool)
        or not isinstance(imports, (int, float))
        or not math.isfinite(imports)
        or imports < 0
    ):
        return None
    return ProbeRecord(
        tuple(names), clean, measured_at, None if imports is None else float(imports), costed
    )


def _isa_names(names: list[Any]) -> bool:
    """Every name is a plain identifier, as torch's VecISA class names are."""
    return all(isinstance(n, str) and _ISA_NAME.match(n) for n in names)


def _clean_probe(probe: Mapping[str, Any]) -> dict[str, Any] | None:
    """The probe breakdown's numbers (seconds required), or None when one is malformed."""
    out: dict[str, Any] = {}
    for key in _PROBE_NUMBERS:
        value = probe.get(key)
        if value is None and key != "seconds":
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return None
        if not math.isfinite(value) or value < 0:
            return None
        out[key] = float(value)
    for key in _PROBE_COUNTS:
        value = probe.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            return None
        out[key] = value
    ok = probe.get("vec_isa_ok")
    out["vec_isa_ok"] = ok if isinstance(ok, str) and len(ok) <= 16 else None
    return out


def from_load(entry: Mapping[str, Any], *, first_process: bool = False) -> ProbeRecord | None:
    """The record a load step's entry proves (or a `loadcost` step's), or None: only a timed
    load (its `perf`) in a fresh process whose probe really ran (not answered from a pin or
    torch's own cache), found at least one ISA and built none of its check programs (the cost
    every later fresh process on this host pays; the first one into an empty inductor cache
    pays more). `first_process`: one that built them too (what this process paid: reported by
    its own check, never kept for later ones)."""
    perf = entry.get("perf")
    names = entry.get("vec_isa")
    if not isinstance(perf, dict) or not isinstance(names, list):
        return None
    if entry.get("vec_isa_pinned") or perf.get("probe_cached") or not perf.get("fresh_process"):
        return None
    probe = perf.get("probe")
    if not isinstance(probe, dict):
        return None
    built = probe.get("gxx_builds")
    failed = probe.get("gxx_failed")
    if (
        not first_process
        and isinstance(built, int)
        and built > (failed if isinstance(failed, int) else 0)
    ):
        # a probe that built check programs now (an empty inductor cache) costs what only
        # this first process pays: later ones find them built (a failed build is not cached,
        # every process pays it again, so that one is the steady cost and is recorded)
        return None
    stamp = time.strftime(_STAMP, time.gmtime())
    imports = perf.get("import_s")
    return parse(
        {
            "format": FORMAT,
            "key": "",
            "vec_isa": names,
            "probe": probe,
            "measured_at": stamp,
            # measure_load's fresh process imported the loader's modules in that load (a
            # forked worker: its server did, at its own fresh start)
            "loader_import_s": imports
            if isinstance(imports, (int, float)) and not perf.get("loader_partly_imported")
            else None,
        },
        "",
    )


def listed(entry: Mapping[str, Any]) -> ProbeRecord | None:
    """The record of the list alone that a load step's entry proves: the ISAs its own probe
    found (not a list aotipre pinned), or None."""
    names = entry.get("vec_isa")
    if entry.get("vec_isa_pinned") or not isinstance(names, list) or not names:
        return None
    stamp = time.strftime(_STAMP, time.gmtime())
    data = {"format": FORMAT, "key": "", "vec_isa": names, "probe": {}, "measured_at": stamp}
    return parse({**data, "costed": False}, "")


def write(cache_dir: str | None, key: str, record: ProbeRecord) -> None:
    """Keep `record` under `key` (atomically; a folder that is not aotipre's own is left
    alone). Never raises: a record that cannot be kept is measured again next time."""
    root = folder(cache_dir)
    with contextlib.suppress(OSError):
        if cache_mod.root_problem(os.path.dirname(root)) is not None:
            return
        cache_mod.make_private_root(root)
        if cache_mod.path_problem(root, folder=True) is not None:
            return
        data = {
            "format": FORMAT,
            "key": key,
            "vec_isa": list(record.vec_isa),
            "probe": dict(record.probe),
            "measured_at": record.measured_at,
            "loader_import_s": record.loader_import_s,
            "costed": record.costed,
        }
        path = os.path.join(root, f"{key}.json")
        tmp = f"{path}.tmp-{os.getpid()}-{os.urandom(4).hex()}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        try:
            with os.fdopen(fd, "w") as f:
                json.dump(data, f, sort_keys=True)
            os.replace(tmp, path)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)


def with_recorded_probe(perf: Mapping[str, Any], record: ProbeRecord) -> dict[str, Any]:
    """A timed load's `perf` entry whose probe was answered from `record`, as a fresh process
    would have measured it: the recorded probe in place of the pinned one (which cost
    microseconds), the load's total adjusted by the difference, and when it was measured."""
    out = dict(perf)
    pinned = perf.get("probe")
    spent = pinned.get("seconds") if isinstance(pinned, dict) else None
    total = perf.get("total_s")
    if isinstance(total, (int, float)) and not isinstance(total, bool):
        used = float(spent) if isinstance(spent, (int, float)) else 0.0
        out["total_s"] = float(total) - used + record.seconds
    out["probe"] = dict(record.probe)
    out["probe_measured_at"] = record.measured_at
    return out


def with_recorded_load(perf: Mapping[str, Any], record: ProbeRecord) -> dict[str, Any]:
    """A direct load's `perf` entry (the C++ loader alone, worker.coldstart._measure_direct) with
    what `aoti_load_package` pays before it for this package, from the host's record: the
    loader's imports and the CPU-ISA probe, measured once in a fresh process, and when."""
    out = dict(perf)
    out["import_s"] = record.loader_import_s
    out["import_measured_at"] = record.measured_at
    total = perf.get("total_s")
    if isinstance(total, (int, float)) and not isinstance(total, bool):
        out["total_s"] = float(total) + record.seconds
    out["probe"] = dict(record.probe)
    out["probe_measured_at"] = record.measured_at
    return out


class HandOver:
    """One model's checks and the probe: the list each worker is given to answer it with, from
    the host's record (read once, when the first worker starts), from the check's own
    measurement (runner/loadmeasure.py, started beside the first worker when there is no
    record) or from what an earlier load of this check probed; and the record written when this
    check's measurement or timed load is the host's first. `costs`: the check reports what the
    probe costs (its perf stage); without it a record of the list alone is read and written."""

    def __init__(
        self,
        *,
        cache_dir: str | None,
        use_cache: bool,
        python: str | None,
        worker_command: object,
        costs: bool = True,
    ) -> None:
        self._cache_dir = cache_dir
        self._costs = costs
        self._listed = False
        self._use_cache = use_cache and worker_command is None
        self._python = python
        self._key: str | None = None
        self._looked = False
        self.recorded: ProbeRecord | None = None
        """The host's record of the list and its cost that the workers' pins came from (None:
        none was read; a record of the list alone is never held here)."""
        self.probed: tuple[str, ...] | None = None
        """What a load of this check probed (or was pinned with)."""
        self.measurement: Measurement | None = None
        """The check's own measurement of the probe, when there was no record (started once)."""
        self.unmeasured: str | None = None
        """Why that measurement gave no record, once it ended without one."""

    def measure(self, start: Callable[[], Measurement | None]) -> bool:
        """Without the host's record: start the check's own measurement (`start`, once), which
        later answers `pin` and `await_measured`; whether one runs or has run."""
        if self.measurement is None and self.recorded is None and self.unmeasured is None:
            self.measurement = start()
            if self.measurement is None:
                self.unmeasured = "no measuring process could be started"
        return self.measurement is not None

    @property
    def measuring(self) -> bool:
        """The check's measurement runs, and nothing has answered it yet."""
        m = self.measurement
        return m is not None and not m.done and self.recorded is None

    def await_measured(self) -> ProbeRecord | None:
        """The record the check's measurement gave (waiting for it to end), else the host's
        record; None with `unmeasured` saying why."""
        if self.measurement is not None and self.recorded is None:
            self._take(self.measurement.entry())
        return self.recorded

    def stop(self) -> None:
        """End the measurement if it still runs (the session is over)."""
        if self.measurement is not None:
            self.measurement.stop()

    def _take(self, entry: Mapping[str, Any] | None) -> None:
        """Take a finished measurement's step record: this check's record of the probe (what
        a fresh process paid now), kept for later checks only under the steady-cost rule of
        `from_load`."""
        assert self.measurement is not None
        record = from_load(entry, first_process=True) if entry is not None else None
        if record is None:
            self.unmeasured = self.measurement.error or "the measurement found no usable ISA"
            return
        if self._key is not None and from_load(entry or {}) is not None:
            write(self._cache_dir, self._key, record)
        self.recorded = record
        self.probed = record.vec_isa

    def pin(self, env: Mapping[str, str], *, wait: bool = False) -> list[str] | None:
        """The ISA list for the next worker (None: let it probe). `wait`: the worker needs
        the answer (a compile picks its vector ISA from it): wait for a measurement that runs
        rather than let the worker probe again."""
        if (
            self.measurement is not None
            and self.recorded is None
            and self.unmeasured is None
            and (wait or self.measurement.done)
        ):
            self._take(self.measurement.entry())
        if not self._looked:
            self._looked = True
            self._key = self._host_key(env) if self._use_cache else None
            record = read(self._cache_dir, self._key) if self._key is not None else None
            if record is not None and record.costed:
                self.recorded = record
                self.probed = record.vec_isa
            elif record is not None and not self._costs:
                self._listed = True
                self.probed = record.vec_isa
        return list(self.probed) if self.probed is not None else None

    def learn(self, entry: Mapping[str, Any]) -> None:
        """Take what a finished load step's entry says: the list its probe found, and (the
        host's first timed load) the record to keep."""
        names = entry.get("vec_isa")
        if self.probed is None and isinstance(names, list) and names and _isa_names(names):
            self.probed = tuple(names)
        if self._key is None or self.recorded is not None:
            return
        record = from_load(entry)
        if record is not None:
            write(self._cache_dir, self._key, record)
            self.recorded = record
            self.probed = record.vec_isa
        elif not self._costs and not self._listed:
            alone = listed(entry)
            # not in place of a record another check kept since this one looked
            if alone is not None and read(self._cache_dir, self._key) is None:
                write(self._cache_dir, self._key, alone)
                self._listed = True

    def _host_key(self, env: Mapping[str, str]) -> str | None:
        try:
            python, version, path = _runtime(self._python)
        except Exception:  # an interpreter that cannot be probed: its workers say why
            return None
        if not version:
            return None
        return host_key(python, version, path, env)


def _runtime(python: str | None) -> tuple[str, str | None, str]:
    """(interpreter, torch version, torch folder) of the workers' interpreter, without
    importing torch."""
    if python is None:
        import importlib.util

        spec = importlib.util.find_spec("torch")
        where = os.path.dirname(spec.origin) if spec is not None and spec.origin else ""
        return sys.executable, cache_mod.torch_version(), where
    from aotipre.environment import runtimes

    rt = runtimes.probe(python)
    return rt.python, rt.torch_version, rt.torch_path
