"""Performance in the worker (the perf stage): what a deployment pays per call (latency, memory
growth over repeated calls, two packages' calls interleaved), and the steps `latency` and
`loadcost`; the cold start is measured by coldstart.py."""

from __future__ import annotations

import math
import time
from typing import Any

import torch

from .coldstart import measure_probe, memory_snapshot
from .core import WorkerCore
from .loading import (
    DirectModel,
    load_direct,
    load_package_like_torch,
    probed_vec_isa,
)


def percentile(sorted_values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of an ascending list."""
    if not sorted_values:
        return math.nan
    rank = max(1, math.ceil(q / 100.0 * len(sorted_values)))
    return sorted_values[min(rank, len(sorted_values)) - 1]


def growth_per_run(series: list[int]) -> float:
    """Least-squares slope of a memory series (bytes per run); 0 for fewer than 2 points."""
    n = len(series)
    if n < 2:
        return 0.0
    mean_x = (n - 1) / 2.0
    mean_y = sum(series) / n
    num = sum((i - mean_x) * (y - mean_y) for i, y in enumerate(series))
    den = sum((i - mean_x) ** 2 for i in range(n))
    return num / den


def latency_runs(call: Any, device: str, warmup: int, runs: int, budget_s: float) -> dict[str, Any]:
    """Up to `warmup` untimed calls, then up to `runs` timed ones (each to the end of its GPU
    work), all within `budget_s` seconds (the warm-up within half of it; at least one warm-up
    and two timed calls), so a slow model does not make the check slow; outputs are dropped at
    once, so memory that grows run over run is the model's (a leak), not ours. Returns the
    samples, p50/p99/min/mean/max in ms, and the memory series after every timed run (host
    RSS; on CUDA the caching allocator and the driver view) with their growth per run."""
    cuda = device.startswith("cuda")
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    started = time.perf_counter()
    done_warmup = 0
    while done_warmup < warmup and (
        done_warmup == 0 or time.perf_counter() - started < budget_s / 2
    ):
        call()
        sync()
        done_warmup += 1
    samples: list[float] = []
    rss: list[int] = []
    allocated: list[int] = []
    device_used: list[int] = []
    deadline = started + budget_s
    while len(samples) < runs and (len(samples) < 2 or time.perf_counter() < deadline):
        started = time.perf_counter()
        call()
        sync()
        samples.append((time.perf_counter() - started) * 1000.0)
        snap = memory_snapshot(device)
        rss.append(int(snap["host"].get("vm_rss", snap["host"]["peak_rss"])))
        if "gpu" in snap:
            allocated.append(int(snap["gpu"]["allocated"]))
            device_used.append(int(snap["gpu"]["device_used"]))
    ordered = sorted(samples)
    out: dict[str, Any] = {
        "warmup": done_warmup,
        "runs": len(samples),
        "samples_ms": samples,
        "p50_ms": percentile(ordered, 50),
        "p99_ms": percentile(ordered, 99),
        "min_ms": ordered[0] if ordered else math.nan,
        "max_ms": ordered[-1] if ordered else math.nan,
        "mean_ms": sum(samples) / len(samples) if samples else math.nan,
        "memory": {"host_rss": rss, "host_rss_growth_per_run": growth_per_run(rss)},
    }
    if allocated:
        out["memory"].update(
            gpu_allocated=allocated,
            gpu_allocated_growth_per_run=growth_per_run(allocated),
            gpu_device_used=device_used,
            gpu_device_used_growth_per_run=growth_per_run(device_used),
        )
    return out


PAIRED_MAX = 5000
"""Interleaved pairs at most, whatever the budget."""


def median_interval(values: list[float]) -> tuple[float, float, float]:
    """(median, low, high) of `values`: the order statistics that hold the median with 95%
    probability (the smallest and largest below 6 values); runner/perf.py `estimate` is the
    parent's copy of this rule."""
    ordered = sorted(values)
    n = len(ordered)
    mid = n // 2
    median = ordered[mid] if n % 2 else (ordered[mid - 1] + ordered[mid]) / 2.0
    cut, below = 0, 0.0
    for i in range(n // 2):
        below += math.comb(n, i) / 2**n
        if 2.0 * below > 0.05:
            break
        cut = i
    return median, ordered[cut], ordered[n - 1 - cut]


def _stable(values: list[float], precision: float) -> bool:
    median, low, high = median_interval(values)
    return median > 0 and (high - low) / 2.0 <= precision * median


def paired_latency(
    call_a: Any, call_b: Any, device: str, runs: int, budget_s: float, precision: float
) -> dict[str, Any]:
    """Calls of two models interleaved in the order A B B A (so neither always goes first),
    each to the end of its GPU work: whatever else the host runs at a moment slows both alike.
    One warm-up call each, at least `runs` pairs (at least 2), then more until each side's
    median is known to within `precision` of itself (the half-width of its 95% interval) or
    `budget_s` seconds have passed (PAIRED_MAX pairs at most). Returns both series in ms."""
    sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)

    def timed(call: Any) -> float:
        started = time.perf_counter()
        call()
        sync()
        return (time.perf_counter() - started) * 1000.0

    started = time.perf_counter()
    timed(call_a)
    timed(call_b)
    a_ms: list[float] = []
    b_ms: list[float] = []
    deadline = started + budget_s
    while len(a_ms) < PAIRED_MAX:
        if len(a_ms) >= max(2, runs) and (
            time.perf_counter() >= deadline
            or (_stable(a_ms, precision) and _stable(b_ms, precision))
        ):
            break
        if len(a_ms) % 2:
            b_ms.append(timed(call_b))
            a_ms.append(timed(call_a))
        else:
            a_ms.append(timed(call_a))
            b_ms.append(timed(call_b))
    return {
        "a_ms": a_ms,
        "b_ms": b_ms,
        "stable": _stable(a_ms, precision) and _stable(b_ms, precision),
        "seconds": time.perf_counter() - started,
    }


class PerfOps(WorkerCore):
    """Steps `latency` and `loadcost` (the load's and the run's measurements are their steps'
    `measure`)."""

    def op_loadcost(self, step: dict[str, Any], entry: dict[str, Any]) -> None:
        """The loader's imports and torch's CPU-ISA probe, in this fresh process (measure_probe),
        and the ISAs the probe found (`vec_isa`): the host's first check measures them here,
        beside its first worker, instead of in that worker's load."""
        entry["perf"] = measure_probe()
        entry["vec_isa"] = probed_vec_isa()
        entry["vec_isa_pinned"] = bool(self.rec.data.get("vec_isa_pinned"))

    def op_latency(self, step: dict[str, Any], entry: dict[str, Any]) -> None:
        """Run latency and memory growth over repeated calls (see latency_runs)."""
        args, kwargs = self.get_inputs(entry)
        self.phase(entry, "calls")
        entry["perf"] = latency_runs(
            lambda: self.call_aoti(args, kwargs, fresh_state=False),
            self.device,
            warmup=int(step.get("warmup", 3)),
            runs=int(step.get("runs", 20)),
            budget_s=float(step.get("budget_s", 5.0)),
        )
        paired = step.get("paired")
        if isinstance(paired, dict):
            self.phase(entry, "interleaved calls")
            try:
                entry["perf"]["paired"] = self._paired(paired, args, kwargs)
            except Exception as exc:  # the comparison falls back on each side's own calls
                entry["perf"]["paired_error"] = f"{type(exc).__name__}: {exc}"[:500]

    def _paired(
        self, paired: dict[str, Any], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> dict[str, Any]:
        """The other package of an --against comparison, loaded by the route this worker's
        model was (the C++ loader alone, or torch's load_package), its calls interleaved with
        this model's (paired_latency): `a_ms` the other's, `b_ms` this model's."""
        if self.runner is None:
            raise RuntimeError("the model is not loaded")
        package, model = str(paired["package"]), str(paired["model"])
        if isinstance(self.runner, DirectModel):
            other = load_direct(package, model, self.index)
        else:
            other = load_package_like_torch(package, model, self.index, False)[0]
        return paired_latency(
            lambda: other(*args, **kwargs),
            lambda: self.call_aoti(args, kwargs, fresh_state=False),
            self.device,
            runs=int(paired.get("runs", 20)),
            budget_s=float(paired.get("budget_s", 2.0)),
            precision=float(paired.get("precision", 0.05)),
        )
