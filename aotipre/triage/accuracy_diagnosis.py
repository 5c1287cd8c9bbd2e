"""Accuracy triage's conclusion as data (the JSON report's `accuracy`): the error of each kernel
launch, each cause-ladder rebuild and the diagnosis of one model (aotipre.triage.accuracy
produces them)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class KernelError:
    """One kernel launch's error against its eager FX nodes."""

    kernel: str
    nodes: tuple[str, ...]
    max_abs: float | None
    """The largest absolute error over its compared outputs (None: none compared)."""
    max_rel: float | None
    mismatches: int
    """Elements beyond tolerance over its compared outputs."""
    compared: int
    """Outputs compared with an eager node."""
    internal: int
    """Outputs with no eager counterpart (kernel-internal buffers)."""
    nonfinite: int = 0
    """NaN/Inf in its compared outputs where the eager node is finite, or in internal outputs."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "kernel": self.kernel,
            "nodes": list(self.nodes),
            "max_abs": opt_float(self.max_abs),
            "max_rel": opt_float(self.max_rel),
            "mismatches": self.mismatches,
            "compared": self.compared,
            "internal": self.internal,
            "nonfinite": self.nonfinite,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> KernelError:
        return cls(
            kernel=str(d["kernel"]),
            nodes=tuple(str(n) for n in d.get("nodes") or ()),
            max_abs=opt_float(d.get("max_abs")),
            max_rel=opt_float(d.get("max_rel")),
            mismatches=int(d.get("mismatches") or 0),
            compared=int(d.get("compared") or 0),
            internal=int(d.get("internal") or 0),
            nonfinite=int(d.get("nonfinite") or 0),
        )


@dataclass(frozen=True)
class KnobTrial:
    """One cause-ladder rebuild and what it showed."""

    knob: str
    configs: Mapping[str, Any]
    verdict: str
    """`cause` (its rebuild matches eager), `not the cause` (still differs), `not testable on
    this torch`, `inconclusive` (the rebuild failed) or `not run` (the budget ran out)."""
    detail: str
    max_abs: float | None = None
    """The rebuild's largest output error against eager."""
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "knob": self.knob,
            "configs": dict(self.configs),
            "verdict": self.verdict,
            "detail": self.detail,
            "max_abs": opt_float(self.max_abs),
            "seconds": round(self.seconds, 3),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> KnobTrial:
        return cls(
            knob=str(d["knob"]),
            configs=dict(d.get("configs") or {}),
            verdict=str(d["verdict"]),
            detail=str(d.get("detail") or ""),
            max_abs=opt_float(d.get("max_abs")),
            seconds=float(d.get("seconds") or 0.0),
        )


@dataclass(frozen=True)
class Repro:
    """The smallest subgraph around the divergent kernel that still differs from eager when
    compiled alone, verified by compiling it before it is reported."""

    verified: bool
    route: str
    """How it was made: `subgraph` (the kernel's FX nodes cut out of the program, grown by
    their inputs' producers until the cut differs alone); `` when none was verified."""
    nodes: tuple[str, ...] = ()
    """The FX nodes of `ep.module()` it holds."""
    program_nodes: int = 0
    """Operator nodes of the whole program (the repro's count is len(nodes))."""
    max_abs: float | None = None
    """Its compiled output's largest error against its eager run."""
    path: str | None = None
    """The folder it was kept in (--artifacts); None: not kept."""
    detail: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "verified": self.verified,
            "route": self.route,
            "nodes": list(self.nodes),
            "node_count": {"program": self.program_nodes, "repro": len(self.nodes)},
            "max_abs": opt_float(self.max_abs),
            "path": self.path,
            "detail": self.detail,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Repro:
        count = d.get("node_count") or {}
        return cls(
            verified=bool(d.get("verified")),
            route=str(d.get("route") or ""),
            nodes=tuple(str(n) for n in d.get("nodes") or ()),
            program_nodes=int(count.get("program") or 0),
            max_abs=opt_float(d.get("max_abs")),
            path=str(d["path"]) if d.get("path") is not None else None,
            detail=str(d.get("detail") or ""),
        )


@dataclass(frozen=True)
class Latency:
    """The cause's latency cost: the deployed package and its rebuild with the cause's config,
    timed alternately in one process on the sample inputs (median of `runs` calls each)."""

    runs: int
    deployed_ms: float
    rebuilt_ms: float

    @property
    def cost_pct(self) -> float:
        """The rebuild's latency relative to the deployed package's, in percent."""
        return (self.rebuilt_ms / self.deployed_ms - 1.0) * 100.0 if self.deployed_ms else 0.0

    @property
    def text(self) -> str:
        return (
            f"{self.cost_pct:+.1f}% latency (median of {self.runs}, "
            f"{self.deployed_ms:.3g} vs {self.rebuilt_ms:.3g} ms)"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "runs": self.runs,
            "deployed_ms": self.deployed_ms,
            "rebuilt_ms": self.rebuilt_ms,
            "cost_pct": round(self.cost_pct, 2),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Latency:
        return cls(
            runs=int(d.get("runs") or 0),
            deployed_ms=float(d.get("deployed_ms") or 0.0),
            rebuilt_ms=float(d.get("rebuilt_ms") or 0.0),
        )


@dataclass(frozen=True)
class AccuracyDiagnosis:
    """Accuracy triage's conclusion for one model (the JSON report's `accuracy`)."""

    model: str
    trigger: tuple[str, ...]
    """The findings that started it (AOT701, AOT702)."""
    kernel: str | None
    """The first kernel whose outputs differ (or turn non-finite) while its inputs agree."""
    nodes: tuple[str, ...] = ()
    """The FX nodes of `ep.module()` it fuses (provenance)."""
    source: tuple[str, ...] = ()
    """`file:line code` of those nodes."""
    inputs_agree: bool | None = None
    """Its inputs agree with eager (None: some are internal buffers without an eager value);
    for NaN/Inf: False when non-finite values came in through its inputs."""
    series: tuple[KernelError, ...] = ()
    """Every launch's error in execution order (where divergence starts, how it grows)."""
    output_max_abs: float | None = None
    """The diagnostic rebuild's largest output error against eager."""
    cause: str | None = None
    """The knob whose rebuild matches eager, if one does."""
    trials: tuple[KnobTrial, ...] = ()
    rmse_compiled: float | None = None
    """RMSE of the compiled outputs against the program run in fp64."""
    rmse_eager: float | None = None
    summary: str = ""
    """The one line the table shows."""
    repro: Repro | None = None
    """The verified repro of the divergent kernel (or why none was verified)."""
    trials_on: str = "program"
    """What `trials` rebuilt: `repro` (the verified repro, cheap compiles) or `program`."""
    confirm: KnobTrial | None = None
    """The one full rebuild of the program with the cause proven on the repro."""
    latency: Latency | None = None
    """The cause's latency cost (the deployed package against its rebuild with the cause)."""
    localized_on: str = "printer build"
    """The compile whose kernels' outputs were compared: `python wrapper` (Inductor's
    Python-wrapper compile of the program, its outputs the deployed package's bit for bit) or
    `printer build` (the AOTI rebuild with the intermediate value printer)."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "trigger": list(self.trigger),
            "kernel": self.kernel,
            "nodes": list(self.nodes),
            "source": list(self.source),
            "inputs_agree": self.inputs_agree,
            "series": [k.to_dict() for k in self.series],
            "output_max_abs": opt_float(self.output_max_abs),
            "cause": self.cause,
            "trials": [t.to_dict() for t in self.trials],
            "rmse_compiled": opt_float(self.rmse_compiled),
            "rmse_eager": opt_float(self.rmse_eager),
            "summary": self.summary,
            "repro": self.repro.to_dict() if self.repro else None,
            "trials_on": self.trials_on,
            "localized_on": self.localized_on,
            "confirm": self.confirm.to_dict() if self.confirm else None,
            "latency": self.latency.to_dict() if self.latency else None,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> AccuracyDiagnosis:
        agree = d.get("inputs_agree")
        return cls(
            model=str(d["model"]),
            trigger=tuple(str(c) for c in d.get("trigger") or ()),
            kernel=str(d["kernel"]) if d.get("kernel") is not None else None,
            nodes=tuple(str(n) for n in d.get("nodes") or ()),
            source=tuple(str(n) for n in d.get("source") or ()),
            inputs_agree=bool(agree) if agree is not None else None,
            series=tuple(KernelError.from_dict(k) for k in d.get("series") or ()),
            output_max_abs=opt_float(d.get("output_max_abs")),
            cause=str(d["cause"]) if d.get("cause") is not None else None,
            trials=tuple(KnobTrial.from_dict(t) for t in d.get("trials") or ()),
            rmse_compiled=opt_float(d.get("rmse_compiled")),
            rmse_eager=opt_float(d.get("rmse_eager")),
            summary=str(d.get("summary") or ""),
            repro=Repro.from_dict(d["repro"]) if isinstance(d.get("repro"), Mapping) else None,
            trials_on=str(d.get("trials_on") or "program"),
            localized_on=str(d.get("localized_on") or "printer build"),
            confirm=(
                KnobTrial.from_dict(d["confirm"]) if isinstance(d.get("confirm"), Mapping) else None
            ),
            latency=(
                Latency.from_dict(d["latency"]) if isinstance(d.get("latency"), Mapping) else None
            ),
        )


def opt_float(value: Any) -> float | None:
    """A finite number as a float; None for anything else (NaN and Infinity are not JSON)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None
