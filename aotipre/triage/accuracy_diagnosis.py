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
        )


def opt_float(value: Any) -> float | None:
    """A finite number as a float; None for anything else (NaN and Infinity are not JSON)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None
