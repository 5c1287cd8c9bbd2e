"""What a deployment pays, from the worker's measurements (runner/worker/coldstart.py
`measure_load`, runner/worker/perf.py `latency_runs`): the cold-start breakdown, memory and latency of one model as a record, and the
judgements on it: budgets, a regression against a baseline package, a leak, and what the user
can do about a slow load. Pure functions on plain data (no torch, no processes).

Longer than the ~600 lines of the other modules on purpose: the record and every judgement on it
(budgets, --against, regression, leak, advice) read the same fields with the same statistics (the
interval cut, the samples compared); each function is short, and their agreement matters more than
their number.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from aotipre.foundation import jsonfields

MB = 1024 * 1024


@dataclass(frozen=True)
class ColdStart:
    """The load a deployment does (`aoti_load_package` after `import torch`), in seconds."""

    before_load_s: float | None
    """The worker process's age when the load began: the interpreter's start and `import
    torch` (10 ms resolution)."""
    loader_import_s: float
    """Importing the loader's Python modules (torch._inductor, torch.export: seconds)."""
    cuda_init_s: float | None
    load_s: float
    """The load call itself."""
    probe_s: float | None
    """torch's CPU-ISA probe (get_device_information), part of load_s."""
    probe_programs: int
    """Check programs the probe built (or found built) and dlopened in a child process each."""
    probe_compiles: int
    """Of those, how many ran g++ now (the inductor cache did not have them)."""
    probe_compiles_failed: int
    """g++ builds that failed: not cached, so every cold start pays them again."""
    probe_base_checks_s: float
    """The part TORCHINDUCTOR_VEC_ISA_OK=1 skips (the base check of every ISA)."""
    exported_program_s: float | None
    """Deserializing the archive's ExportedProgram (load_pt2 does it), part of load_s."""
    loader_s: float | None
    """The C++ AOTIModelPackageLoader: extraction, dlopen, constants to the device."""
    extraction_s: float | None
    extraction_bytes: int | None
    extraction_files: int | None
    extraction_folder: str | None
    dlopen_constants_s: float | None
    first_call_s: float | None
    fresh_process: bool
    """False when the worker had compiled or loaded before (the probe was then cached)."""
    torch_version: str | None = None
    probe_measured_at: str | None = None
    """When the probe's figures were measured, when not in this load: its answer came from the
    host's record (runner/loadcost.py), measured once in a fresh process like this one."""
    import_measured_at: str | None = None
    """The same for the loader's imports: set when this load did not import them (the C++
    loader alone, for a package that aoti_load_package loads with nothing else)."""

    @property
    def total_s(self) -> float:
        """Loader imports, CUDA start and the load call: what `aoti_load_package` costs."""
        return self.loader_import_s + (self.cuda_init_s or 0.0) + self.load_s

    @property
    def package_s(self) -> float:
        """total_s without torch's CPU-ISA probe: the probe is the host's, the same for any
        package (it compiles its check programs only when the inductor cache lacks them, so
        the first of two loads may pay g++ builds the second does not)."""
        return self.total_s - (self.probe_s or 0.0)


@dataclass(frozen=True)
class Memory:
    """Peaks in bytes. GPU: the driver's view (nvidia-smi's used) minus what was used before
    the load, so the model's constants (cudaMalloc'd outside the caching allocator) count."""

    host_peak_after_load: int | None
    host_peak_after_run: int | None
    gpu_after_load: int | None = None
    gpu_after_run: int | None = None
    gpu_max_allocated: int | None = None
    gpu_max_reserved: int | None = None

    @property
    def host_peak(self) -> int | None:
        values = [v for v in (self.host_peak_after_load, self.host_peak_after_run) if v]
        return max(values) if values else None

    @property
    def gpu_peak(self) -> int | None:
        values = [v for v in (self.gpu_after_load, self.gpu_after_run) if v is not None]
        return max(values) if values else None


@dataclass(frozen=True)
class Latency:
    runs: int
    warmup: int
    p50_ms: float
    p99_ms: float
    min_ms: float
    mean_ms: float
    max_ms: float
    host_growth_per_run: float
    """Bytes per run (least-squares slope of the RSS after each run)."""
    host_series: tuple[int, ...] = ()
    gpu_growth_per_run: float | None = None
    """Bytes per run of the caching allocator's allocated memory."""
    gpu_series: tuple[int, ...] = ()


@dataclass(frozen=True)
class PerfRecord:
    """One model's measurements; `to_dict()` is what the JSON report carries."""

    model: str
    device: str
    cold: ColdStart | None
    memory: Memory
    latency: Latency | None
    notes: tuple[str, ...] = ()
    package: str = ""

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        if self.cold is not None:
            out["cold"]["total_s"] = self.cold.total_s
        out["memory"]["host_peak"] = self.memory.host_peak
        out["memory"]["gpu_peak"] = self.memory.gpu_peak
        return _finite(out)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PerfRecord:
        """The record `to_dict` wrote. What it derives (total_s, host_peak, gpu_peak) and the
        report's `against` key are not read; a required number it wrote as null (it was not
        finite) comes back as NaN, which `to_dict` writes as null again."""
        cold = jsonfields.opt_mapping(data, "cold")
        latency = jsonfields.opt_mapping(data, "latency")
        return cls(
            model=jsonfields.text(data, "model"),
            device=jsonfields.text(data, "device"),
            cold=_record_from(ColdStart, cold, "cold") if cold is not None else None,
            memory=_record_from(Memory, jsonfields.mapping(data, "memory"), "memory"),
            latency=_record_from(Latency, latency, "latency") if latency is not None else None,
            notes=jsonfields.texts(data, "notes"),
            package=jsonfields.text(data, "package", ""),
        )


def _record_from(cls: Any, data: Mapping[str, Any], where: str) -> Any:
    """A ColdStart, Memory or Latency from its asdict() form, by the annotation of each field:
    numbers stay as the JSON has them (an integer stays one), tuples come back as tuples."""
    values: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        kind = str(f.type)
        if f.name not in data and not (
            f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        ):
            continue  # the field's default
        try:
            if kind.startswith("tuple"):
                values[f.name] = jsonfields.integers(data, f.name)
            elif kind == "bool":
                values[f.name] = jsonfields.flag(data, f.name)
            elif kind == "str | None":
                values[f.name] = jsonfields.opt_text(data, f.name)
            elif data.get(f.name) is None and kind == "float" and f.name in data:
                values[f.name] = math.nan  # written as null: it was not finite
            elif kind.endswith("| None"):
                values[f.name] = jsonfields.opt_number(data, f.name)
            else:
                values[f.name] = jsonfields.number(data, f.name)
        except ValueError as exc:
            raise ValueError(f"{where}: {exc}") from None
    return cls(**values)


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def _num(d: dict[str, Any], key: str) -> float | None:
    v = d.get(key)
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _gpu_used_delta(snapshot: dict[str, Any], before: dict[str, Any]) -> int | None:
    gpu, base = snapshot.get("gpu"), before.get("gpu")
    if not isinstance(gpu, dict) or not isinstance(base, dict):
        return None
    return max(0, int(gpu.get("device_used", 0)) - int(base.get("device_used", 0)))


def record_from_worker(
    model: str,
    device: str,
    load: dict[str, Any] | None,
    run: dict[str, Any] | None,
    latency: dict[str, Any] | None,
    package: str = "",
) -> PerfRecord:
    """Build the record from the `perf` entries of the worker's load, run and latency steps
    (any may be missing: the record says what was measured)."""
    notes: list[str] = []
    cold: ColdStart | None = None
    before: dict[str, Any] = {}
    after_load: dict[str, Any] = {}
    if load:
        before = load.get("memory_before") or {}
        after_load = load.get("memory_after") or {}
        probe = load.get("probe") or {}
        extraction = load.get("extraction") or {}
        cold = ColdStart(
            before_load_s=_num(load, "process_age_s"),
            loader_import_s=_num(load, "import_s") or 0.0,
            cuda_init_s=_num(load, "cuda_init_s"),
            load_s=_num(load, "total_s") or 0.0,
            probe_s=_num(probe, "seconds"),
            probe_programs=int(probe.get("check_programs") or 0),
            probe_compiles=int(probe.get("gxx_builds") or 0),
            probe_compiles_failed=int(probe.get("gxx_failed") or 0),
            probe_base_checks_s=_num(probe, "base_checks_s") or 0.0,
            exported_program_s=_num(load, "exported_program_s"),
            loader_s=_num(load, "loader_s"),
            extraction_s=_num(extraction, "written_s"),
            extraction_bytes=extraction.get("bytes"),
            extraction_files=extraction.get("files"),
            extraction_folder=extraction.get("folder"),
            dlopen_constants_s=_num(load, "dlopen_constants_s"),
            first_call_s=_num(run or {}, "call_s"),
            fresh_process=bool(load.get("fresh_process")) and not load.get("probe_cached"),
            torch_version=load.get("torch_version"),
            probe_measured_at=load.get("probe_measured_at"),
            import_measured_at=load.get("import_measured_at"),
        )
        if load.get("measure_error"):
            notes.append(f"part of the load's breakdown was not measured: {load['measure_error']}")
        if not cold.fresh_process:
            notes.append(
                "the worker had compiled or loaded before this load, so the load is not a cold "
                "start (the CPU-ISA probe and the loader's imports were already paid)"
            )
    else:
        notes.append("the load was not measured")
    after_run = (run or {}).get("memory_after") or {}
    gpu_run = after_run.get("gpu") if isinstance(after_run.get("gpu"), dict) else {}
    memory = Memory(
        host_peak_after_load=(after_load.get("host") or {}).get("peak_rss"),
        host_peak_after_run=(after_run.get("host") or {}).get("peak_rss"),
        gpu_after_load=_gpu_used_delta(after_load, before),
        gpu_after_run=_gpu_used_delta(after_run, before),
        gpu_max_allocated=(gpu_run or {}).get("max_allocated"),
        gpu_max_reserved=(gpu_run or {}).get("max_reserved"),
    )
    lat: Latency | None = None
    if latency and latency.get("runs"):
        mem = latency.get("memory") or {}
        lat = Latency(
            runs=int(latency["runs"]),
            warmup=int(latency.get("warmup") or 0),
            p50_ms=float(latency["p50_ms"]),
            p99_ms=float(latency["p99_ms"]),
            min_ms=float(latency["min_ms"]),
            mean_ms=float(latency["mean_ms"]),
            max_ms=float(latency["max_ms"]),
            host_growth_per_run=float(mem.get("host_rss_growth_per_run") or 0.0),
            host_series=tuple(int(v) for v in mem.get("host_rss") or ()),
            gpu_growth_per_run=_num(mem, "gpu_allocated_growth_per_run"),
            gpu_series=tuple(int(v) for v in mem.get("gpu_allocated") or ()),
        )
    return PerfRecord(model, device, cold, memory, lat, tuple(notes), package)


# --------------------------------------------------------------------------------------------
# Judgements: each returns (code, message, fields) tuples; the stage turns them into findings.

Judgement = tuple[str, str, dict[str, Any]]


@dataclass(frozen=True)
class Budgets:
    """Limits from the configuration (`max-load-s`, ...); None: no limit."""

    max_load_s: float | None = None
    """On ColdStart.total_s (loader imports, CUDA start, the load call)."""
    max_latency_ms: float | None = None
    """On the median call (p50)."""
    max_rss_mb: float | None = None
    """On the worker's peak host RSS after the load and the first call."""
    max_gpu_mb: float | None = None
    """On the GPU memory the model took (driver view) after the load and the first call."""

    @property
    def any(self) -> bool:
        return any(v is not None for v in asdict(self).values())


def budget_judgements(rec: PerfRecord, budgets: Budgets) -> list[Judgement]:
    out: list[Judgement] = []
    cold, lat, mem = rec.cold, rec.latency, rec.memory
    if budgets.max_load_s is not None and cold is not None and cold.fresh_process:
        if cold.total_s > budgets.max_load_s:
            out.append(
                (
                    "AOT645",
                    f"loading took {cold.total_s:.2f} s, the budget (max-load-s) is "
                    f"{budgets.max_load_s:g} s{_load_parts(cold)}",
                    {"expected": budgets.max_load_s, "actual": round(cold.total_s, 3)},
                )
            )
    if budgets.max_latency_ms is not None and lat is not None:
        if lat.p50_ms > budgets.max_latency_ms:
            out.append(
                (
                    "AOT646",
                    f"the median call took {lat.p50_ms:.3f} ms over {lat.runs} runs (p99 "
                    f"{lat.p99_ms:.3f} ms), the budget (max-latency-ms) is "
                    f"{budgets.max_latency_ms:g} ms",
                    {"expected": budgets.max_latency_ms, "actual": round(lat.p50_ms, 4)},
                )
            )
    if budgets.max_rss_mb is not None and mem.host_peak is not None:
        if mem.host_peak / MB > budgets.max_rss_mb:
            out.append(
                (
                    "AOT647",
                    f"the process's peak host memory (RSS) was {mem.host_peak / MB:.0f} MB "
                    f"after the load and the first call, the budget (max-rss-mb) is "
                    f"{budgets.max_rss_mb:g} MB",
                    {"expected": budgets.max_rss_mb, "actual": round(mem.host_peak / MB, 1)},
                )
            )
    if budgets.max_gpu_mb is not None and mem.gpu_peak is not None:
        if mem.gpu_peak / MB > budgets.max_gpu_mb:
            out.append(
                (
                    "AOT648",
                    f"the model took {mem.gpu_peak / MB:.0f} MB of GPU memory (driver view, "
                    f"after the load and the first call), the budget (max-gpu-mb) is "
                    f"{budgets.max_gpu_mb:g} MB",
                    {"expected": budgets.max_gpu_mb, "actual": round(mem.gpu_peak / MB, 1)},
                )
            )
    return out


def _load_parts(cold: ColdStart) -> str:
    parts = []
    if cold.probe_s:
        parts.append(f"CPU-ISA probe {cold.probe_s:.2f} s")
    if cold.loader_s is not None:
        parts.append(f"C++ loader {cold.loader_s:.2f} s")
    if cold.loader_import_s >= 0.1:
        parts.append(f"loader imports {cold.loader_import_s:.2f} s")
    return f" ({', '.join(parts)})" if parts else ""


REGRESSION_TOLERANCE = 0.2
"""Default: a measure is a regression when it is worse than the baseline's by more than 20%..."""
REGRESSION_FLOORS = {"load_s": 0.25, "p50_ms": 0.05, "host_mb": 32.0, "gpu_mb": 32.0}
"""...and by more than these absolute amounts (noise of a shared machine)..."""
MIN_SAMPLES = 3
"""...and only from this many samples of each side, whose intervals do not overlap."""
CONFIDENCE = 0.95
"""Of the interval around each side's median (order statistics: no assumption about how a
busy host's noise is distributed)."""


@dataclass(frozen=True)
class Estimate:
    """A measure's median over repeated samples, with a distribution-free interval around it:
    the order statistics that hold the true median with probability CONFIDENCE (fewer than 6
    samples: the smallest and the largest, which hold it with 1 - 2**(1-n))."""

    median: float
    low: float
    high: float
    samples: int


def estimate(samples: Sequence[float]) -> Estimate | None:
    """The Estimate of `samples` (values that are not finite are dropped), or None."""
    values = sorted(float(v) for v in samples if math.isfinite(v))
    n = len(values)
    if n == 0:
        return None
    mid = n // 2
    median = values[mid] if n % 2 else (values[mid - 1] + values[mid]) / 2.0
    cut = _interval_cut(n)
    return Estimate(median, values[cut], values[n - 1 - cut], n)


def _interval_cut(n: int) -> int:
    """How many order statistics the interval leaves out at each end: the most for which
    2 * P(Binomial(n, 1/2) <= cut) stays within 1 - CONFIDENCE."""
    cut, below = 0, 0.0
    for i in range(n // 2):
        below += math.comb(n, i) / 2**n
        if 2.0 * below > 1.0 - CONFIDENCE:
            break
        cut = i
    return cut


REGRESSION = "regression"
INCONCLUSIVE = "inconclusive"


def verdict(
    new: Sequence[float], old: Sequence[float], tolerance: float, floor: float
) -> str | None:
    """REGRESSION when the new side's median is worse than the baseline's by more than the
    tolerance and the floor AND, over at least MIN_SAMPLES of each, the two intervals do not
    overlap; INCONCLUSIVE when the medians are that far apart but the samples cannot say so
    (too few, or the intervals overlap: a noisy host); None otherwise (lower is better)."""
    a, b = estimate(new), estimate(old)
    if a is None or b is None or not _worse(a.median, b.median, tolerance, floor):
        return None
    if min(a.samples, b.samples) >= MIN_SAMPLES and a.low > b.high:
        return REGRESSION
    return INCONCLUSIVE


@dataclass(frozen=True)
class Side:
    """One side of an `--against` comparison: the records of the fresh workers that measured
    it (each round loads it by the same route as the other side's) and its call latencies, each
    taken right beside a call of the other side (interleaved in one worker)."""

    records: tuple[PerfRecord, ...]
    latency_ms: tuple[float, ...] = ()

    def load_s(self) -> list[float]:
        return [r.cold.package_s for r in self.records if r.cold is not None]

    def host_mb(self) -> list[float]:
        return [r.memory.host_peak / MB for r in self.records if r.memory.host_peak]

    def gpu_mb(self) -> list[float]:
        return [r.memory.gpu_peak / MB for r in self.records if r.memory.gpu_peak is not None]

    def starts(self) -> set[bool]:
        return {r.cold.fresh_process for r in self.records if r.cold is not None}


COMPARED = (
    ("AOT650", "loading (without torch's CPU-ISA probe, the host's cost)", "load_s", "s", ".2f"),
    ("AOT651", "the median call", "p50_ms", "ms", ".3f"),
    ("AOT652", "the peak host memory (RSS)", "host_mb", "MB", ".0f"),
    ("AOT653", "the GPU memory the model takes", "gpu_mb", "MB", ".0f"),
)
"""The measures `--against` compares: (code, what, floor key, unit, number format)."""


def compared_samples(new: Side, old: Side) -> dict[str, tuple[list[float], list[float]]]:
    """Each measure's samples of both sides, by floor key; loads only between the same kind of
    start (all cold, or all in a worker that had compiled or loaded before)."""
    out = {
        "p50_ms": (list(new.latency_ms), list(old.latency_ms)),
        "host_mb": (new.host_mb(), old.host_mb()),
        "gpu_mb": (new.gpu_mb(), old.gpu_mb()),
    }
    if len(new.starts() | old.starts()) == 1:
        out["load_s"] = (new.load_s(), old.load_s())
    return out


def undecided(new: Side, old: Side, tolerance: float) -> bool:
    """Whether more rounds could decide a measure that is now INCONCLUSIVE."""
    return any(
        verdict(a, b, tolerance, REGRESSION_FLOORS[key]) == INCONCLUSIVE
        for key, (a, b) in compared_samples(new, old).items()
    )


def against_judgements(
    new: Side, old: Side, tolerance: float = REGRESSION_TOLERANCE
) -> list[Judgement]:
    """The new package against the baseline package, both measured in the same run: a
    regression (AOT650-AOT653) where the verdict is one, AOT655 (inconclusive, a noisy host)
    where the medians differ beyond the tolerance but the samples cannot show it."""
    samples = compared_samples(new, old)
    out: list[Judgement] = []
    for code, what, key, unit, fmt in COMPARED:
        if key not in samples:
            continue
        a, b = samples[key]
        found = verdict(a, b, tolerance, REGRESSION_FLOORS[key])
        if found is None:
            continue
        ea, eb = estimate(a), estimate(b)
        assert ea is not None and eb is not None
        pct = (ea.median / eb.median - 1.0) * 100.0 if eb.median > 0 else math.inf
        said = (
            f"{what} is {ea.median:{fmt}} {unit}, the baseline package's {eb.median:{fmt}} "
            f"{unit} (+{pct:.0f}%, tolerance {tolerance * 100:.0f}%)"
        )
        spread = (
            f"{ea.samples} against {eb.samples} sample(s), {CONFIDENCE * 100:.0f}% intervals "
            f"{ea.low:{fmt}}-{ea.high:{fmt}} and {eb.low:{fmt}}-{eb.high:{fmt}} {unit}"
        )
        fields: dict[str, Any] = {"expected": round(eb.median, 4), "actual": round(ea.median, 4)}
        if found == REGRESSION:
            out.append((code, f"{said}; medians of {spread}, which do not overlap", fields))
        else:
            why = (
                "the intervals overlap"
                if min(ea.samples, eb.samples) >= MIN_SAMPLES
                else f"fewer than {MIN_SAMPLES} samples of each side were taken"
            )
            out.append(
                (
                    "AOT655",
                    f"inconclusive (noisy host): {said}, but over {spread} {why}, so this "
                    "run cannot tell a regression from the host's noise",
                    fields,
                )
            )
    return out


def regression_judgements(
    new: PerfRecord, old: PerfRecord, tolerance: float = REGRESSION_TOLERANCE
) -> list[Judgement]:
    """`against_judgements` on one record of each side (its median call as the one latency
    sample): a single sample shows no spread, so what differs beyond the tolerance is
    inconclusive (AOT655), never a regression."""
    return against_judgements(_one(new), _one(old), tolerance)


def _one(rec: PerfRecord) -> Side:
    return Side((rec,), (rec.latency.p50_ms,) if rec.latency is not None else ())


def _worse(a: float, b: float, tolerance: float, floor: float) -> bool:
    return a > b * (1.0 + tolerance) and a - b > floor


LEAK_MIN_RUNS = 5
HOST_LEAK_BYTES_PER_RUN = 1 * MB
GPU_LEAK_BYTES_PER_RUN = 64 * 1024


def leak_judgements(rec: PerfRecord) -> list[Judgement]:
    """Memory that grows run over run (outputs are dropped after every call, so what stays is
    the model's). Host RSS: at least 1 MiB a run and growing in most steps; GPU (the caching
    allocator's exact count): at least 64 KiB a run and growing in most steps."""
    lat = rec.latency
    if lat is None or lat.runs < LEAK_MIN_RUNS:
        return []
    out: list[Judgement] = []
    if lat.host_growth_per_run >= HOST_LEAK_BYTES_PER_RUN and _mostly_rising(lat.host_series):
        total = lat.host_series[-1] - lat.host_series[0]
        out.append(
            (
                "AOT642",
                f"host memory grew by {lat.host_growth_per_run / MB:.1f} MB per call over "
                f"{lat.runs} calls ({total / MB:.0f} MB in all) with the outputs dropped",
                {"actual": round(lat.host_growth_per_run)},
            )
        )
    gpu = lat.gpu_growth_per_run
    if gpu is not None and gpu >= GPU_LEAK_BYTES_PER_RUN and _mostly_rising(lat.gpu_series):
        total = lat.gpu_series[-1] - lat.gpu_series[0]
        out.append(
            (
                "AOT643",
                f"GPU memory (caching allocator) grew by {gpu / MB:.2f} MB per call over "
                f"{lat.runs} calls ({total / MB:.1f} MB in all) with the outputs dropped",
                {"actual": round(gpu)},
            )
        )
    return out


def _mostly_rising(series: tuple[int, ...]) -> bool:
    steps = [b - a for a, b in zip(series, series[1:])]
    return bool(steps) and sum(1 for s in steps if s > 0) >= 0.6 * len(steps)


PROBE_WORTH_S = 1.0
"""The ISA probe is worth a finding when it costs at least this and a fifth of the load."""
EXTRACTION_WORTH_S = 0.5


def advice_judgements(rec: PerfRecord) -> list[Judgement]:
    cold = rec.cold
    if cold is None or not cold.fresh_process:
        return []
    out: list[Judgement] = []
    probe = cold.probe_s or 0.0
    if probe >= PROBE_WORTH_S and probe >= 0.2 * cold.load_s:
        compiled = ""
        if cold.probe_compiles:
            compiled = f", {cold.probe_compiles} of them compiled with g++ now"
            if cold.probe_compiles_failed:
                compiled += (
                    f" ({cold.probe_compiles_failed} failed: a failed build is not cached, so "
                    "every cold start compiles it again)"
                )
        out.append(
            (
                "AOT640",
                f"loading spent {probe:.2f} s of {cold.load_s:.2f} s in torch's CPU-ISA probe "
                f"(get_device_information: {cold.probe_programs} check programs, each dlopened "
                f"in a child process{compiled}); for an already compiled package its only "
                "effect is a device-information warning",
                {"actual": round(probe, 3), "hint": _probe_hint(cold)},
            )
        )
    if cold.extraction_s is not None and cold.extraction_s >= EXTRACTION_WORTH_S:
        size = (cold.extraction_bytes or 0) / MB
        out.append(
            (
                "AOT641",
                f"every load extracts {size:.0f} MB ({cold.extraction_files} files) of the "
                f"model into a temporary folder first: {cold.extraction_s:.2f} s of "
                f"{cold.load_s:.2f} s",
                {"actual": round(cold.extraction_s, 3), "hint": folder_hint(cold.torch_version)},
            )
        )
    return out


def _probe_hint(cold: ColdStart) -> str:
    skip = (
        f"TORCHINDUCTOR_VEC_ISA_OK=1 skips {cold.probe_base_checks_s:.2f} s of it here (the base "
        "check of each ISA; inductor then trusts the CPU's flags, which matters only when the "
        "process also compiles), "
        if cold.probe_base_checks_s >= 0.05
        else ""
    )
    return (
        f"{skip}keep the inductor cache (TORCHINDUCTOR_CACHE_DIR) in the image so no check "
        "program is compiled at start, or load with the C++ AOTIModelPackageLoader, which does "
        "not probe"
    )


def folder_hint(torch_version: str | None) -> str:
    """How to load a pre-extracted package with the torch that measured."""
    version = _version(torch_version)
    if version is not None and version >= (2, 15):
        return (
            "extract the package once (when building the image) and pass the folder to "
            "aoti_load_package"
        )
    if version is not None and version >= (2, 13):
        return (
            "extract the package once (when building the image) and load the folder with "
            "torch._C._aoti.AOTIModelPackageLoader(folder, model_name, False, 1, device_index) "
            "(this torch's C++ loader accepts a folder; aoti_load_package does so from torch 2.15)"
        )
    return (
        "this torch loads packages only from the .pt2 file; from torch 2.13 the C++ loader, "
        "from 2.15 aoti_load_package, also load a pre-extracted folder"
    )


def _version(text: str | None) -> tuple[int, int] | None:
    if not text:
        return None
    parts = text.split("+")[0].split(".")
    try:
        return int(parts[0]), int(parts[1])
    except (ValueError, IndexError):
        return None


def summary(rec: PerfRecord, *, compiles_at_load: bool = False) -> str:
    """The stage's one-line detail (`compiles_at_load`: a package_cpp_only package, whose
    extraction time includes g++ building the .so)."""
    parts = []
    cold = rec.cold
    if cold is not None:
        load = f"load {cold.total_s:.2f} s"
        inner = []
        if cold.import_measured_at:
            inner.append(
                f"loader imports {cold.loader_import_s:.2f} s, measured {cold.import_measured_at}"
            )
        if cold.probe_s:
            when = f", measured {cold.probe_measured_at}" if cold.probe_measured_at else ""
            inner.append(f"ISA probe {cold.probe_s:.2f} s{when}")
        if cold.extraction_s is not None:
            what = "extract and compile" if compiles_at_load else "extract"
            inner.append(f"{what} {cold.extraction_s:.2f} s")
        if cold.dlopen_constants_s is not None:
            inner.append(f"dlopen+constants {cold.dlopen_constants_s:.2f} s")
        if inner:
            load += f" ({', '.join(inner)})"
        if not cold.fresh_process:
            load += " (not a cold start)"
        parts.append(load)
        if cold.first_call_s is not None:
            parts.append(f"first call {cold.first_call_s * 1000:.1f} ms")
    if rec.latency is not None:
        lat = rec.latency
        parts.append(f"p50 {lat.p50_ms:.3f} ms, p99 {lat.p99_ms:.3f} ms ({lat.runs} runs)")
    if rec.memory.host_peak:
        parts.append(f"peak RSS {rec.memory.host_peak / MB:.0f} MB")
    if rec.memory.gpu_peak is not None:
        parts.append(f"GPU {rec.memory.gpu_peak / MB:.0f} MB")
    return "; ".join(parts) or "nothing measured"
