"""The Diagnosis record: which kernel faulted, how aotipre knows, what it computes, its inputs."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from aotipre.foundation import jsonfields


@dataclass(frozen=True)
class TensorStats:
    """One tensor as the intermediate value printer (level 2) showed it."""

    name: str
    """The generated code's name for it (`arg1_1` is a graph input, `buf0` an intermediate)."""
    kernel: str | None = None
    """The kernel whose launch printed it; None for the model-input block."""
    when: str = "before_launch"
    """before_launch, after_launch, or model_input."""
    input: str | None = None
    """The model input's name when the tensor is one (`ids`)."""
    dtype: str | None = None
    shape: tuple[int, ...] | None = None
    stride: tuple[int, ...] | None = None
    device: str | None = None
    numel: int | None = None
    min: float | None = None
    max: float | None = None
    mean: float | None = None
    nan: int | None = None
    """NaN count when the printer showed every value; None when unknown."""
    inf: int | None = None
    has_nonfinite: bool = False
    """A NaN or Inf was seen (in the values or in the min/max/mean)."""
    scalar: float | None = None
    """For a scalar argument (`ks0: 5`): its value."""

    def describe(self) -> str:
        """`ids (arg1_1): int64[2, 5] on cpu, min 124, max 600, mean 341.6`."""
        label = f"{self.input} ({self.name})" if self.input else self.name
        if self.scalar is not None:
            return f"{label} = {_num(self.scalar)}"
        parts = []
        if self.dtype or self.shape is not None:
            shape = ", ".join(str(d) for d in self.shape or ())
            parts.append(
                f"{self.dtype or '?'}[{shape}]" + (f" on {self.device}" if self.device else "")
            )
        for key in ("min", "max", "mean"):
            value = getattr(self, key)
            if value is not None:
                parts.append(f"{key} {_num(value)}")
        if self.nan:
            parts.append(f"{self.nan} NaN")
        if self.inf:
            parts.append(f"{self.inf} Inf")
        if self.has_nonfinite and not self.nan and not self.inf:
            parts.append("holds NaN/Inf")
        return f"{label}: " + ", ".join(parts) if parts else label

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kernel": self.kernel,
            "when": self.when,
            "input": self.input,
            "dtype": self.dtype,
            "shape": list(self.shape) if self.shape is not None else None,
            "stride": list(self.stride) if self.stride is not None else None,
            "device": self.device,
            "numel": self.numel,
            "min": _json_num(self.min),
            "max": _json_num(self.max),
            "mean": _json_num(self.mean),
            "nan": self.nan,
            "inf": self.inf,
            "has_nonfinite": self.has_nonfinite,
            "scalar": _json_num(self.scalar),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TensorStats:
        """The statistics `to_dict` wrote (a non-finite number comes back from its string)."""
        shape, stride = data.get("shape"), data.get("stride")
        return cls(
            name=jsonfields.text(data, "name"),
            kernel=jsonfields.opt_text(data, "kernel"),
            when=jsonfields.text(data, "when", "before_launch"),
            input=jsonfields.opt_text(data, "input"),
            dtype=jsonfields.opt_text(data, "dtype"),
            shape=None if shape is None else jsonfields.integers(data, "shape"),
            stride=None if stride is None else jsonfields.integers(data, "stride"),
            device=jsonfields.opt_text(data, "device"),
            numel=jsonfields.opt_integer(data, "numel"),
            min=_from_json_num(data, "min"),
            max=_from_json_num(data, "max"),
            mean=_from_json_num(data, "mean"),
            nan=jsonfields.opt_integer(data, "nan"),
            inf=jsonfields.opt_integer(data, "inf"),
            has_nonfinite=jsonfields.flag(data, "has_nonfinite", False),
            scalar=_from_json_num(data, "scalar"),
        )


@dataclass(frozen=True)
class IndexBound:
    """An indirect-indexing bounds check in the generated kernel (`0 <= tmp2 < 500`)."""

    variable: str
    """The kernel's temporary the check tests (`tmp2`)."""
    upper: int
    """Exclusive upper bound: the size of the indexed dimension (e.g. embedding rows)."""
    line: str
    """The check or assertion message, verbatim."""
    pointer: str | None = None
    """The kernel parameter the index is loaded from (`in_ptr0`), when the source shows it."""
    argument: str | None = None
    """The wrapper's argument passed for that parameter (`arg1_1`)."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "variable": self.variable,
            "upper": self.upper,
            "line": self.line,
            "pointer": self.pointer,
            "argument": self.argument,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> IndexBound:
        return cls(
            variable=jsonfields.text(data, "variable"),
            upper=jsonfields.integer(data, "upper"),
            line=jsonfields.text(data, "line"),
            pointer=jsonfields.opt_text(data, "pointer"),
            argument=jsonfields.opt_text(data, "argument"),
        )


@dataclass(frozen=True)
class Diagnosis:
    """What crash triage concluded about one model's crash."""

    model: str
    kernel: str | None
    """The generated kernel (or extern op) that faulted; None when triage could not tell."""
    identified_by: str | None
    """The ladder step that named it (`printer-3`, `sync-rerun`, `first-error`, ...)."""
    evidence: tuple[str, ...]
    """The decisive lines that show it, verbatim."""
    verdict: str
    """One sentence a deployment engineer can act on."""
    kind: str = "unknown"
    """index_out_of_range, nonfinite_input, kernel_error, memory_fault, not_reproduced, unknown."""
    kernel_source: str | None = None
    """The kernel's code: the cpp function (kernel.cpp) or the Triton function (.py)."""
    kernel_source_from: str | None = None
    """Where the source was read: `<package>:<member>`."""
    fused_nodes: tuple[str, ...] = ()
    """FX nodes of the ExportedProgram the kernel computes (`embedding`, `sum_1`)."""
    aten_ops: tuple[str, ...] = ()
    """Their ATen ops (`aten.embedding`, `aten.sum`)."""
    source_lines: tuple[str, ...] = ()
    """Original model source lines of those nodes (`fixtures/models.py:125  return ...`)."""
    inputs: tuple[TensorStats, ...] = ()
    """Statistics of the kernel's tensors before its launch (printer level 2)."""
    bound: IndexBound | None = None
    previous_kernel: str | None = None
    """The kernel launched just before it (a likely producer of its inputs)."""
    launches: tuple[str, ...] = ()
    """The last launches the level-3 printer showed, oldest first, ending with the fault."""
    first_error: str | None = None
    """The first error of the original run, verbatim."""
    misattributed: str | None = None
    """What the first error blamed when a synchronous run shows another kernel faulting."""
    repro: str | None = None
    """A minified repro.py (its path in the artifacts bundle, or where the minifier wrote it)."""
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "kernel": self.kernel,
            "identified_by": self.identified_by,
            "evidence": list(self.evidence),
            "verdict": self.verdict,
            "kind": self.kind,
            "kernel_source": self.kernel_source,
            "kernel_source_from": self.kernel_source_from,
            "fused_nodes": list(self.fused_nodes),
            "aten_ops": list(self.aten_ops),
            "source_lines": list(self.source_lines),
            "inputs": [t.to_dict() for t in self.inputs],
            "bound": self.bound.to_dict() if self.bound is not None else None,
            "previous_kernel": self.previous_kernel,
            "launches": list(self.launches),
            "first_error": self.first_error,
            "misattributed": self.misattributed,
            "repro": self.repro,
            "notes": list(self.notes),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Diagnosis:
        """The diagnosis `to_dict` wrote; ValueError naming the field for anything else."""
        bound = jsonfields.opt_mapping(data, "bound")
        return cls(
            model=jsonfields.text(data, "model"),
            kernel=jsonfields.opt_text(data, "kernel"),
            identified_by=jsonfields.opt_text(data, "identified_by"),
            evidence=jsonfields.texts(data, "evidence"),
            verdict=jsonfields.text(data, "verdict"),
            kind=jsonfields.text(data, "kind", "unknown"),
            kernel_source=jsonfields.opt_text(data, "kernel_source"),
            kernel_source_from=jsonfields.opt_text(data, "kernel_source_from"),
            fused_nodes=jsonfields.texts(data, "fused_nodes"),
            aten_ops=jsonfields.texts(data, "aten_ops"),
            source_lines=jsonfields.texts(data, "source_lines"),
            inputs=tuple(TensorStats.from_dict(t) for t in jsonfields.objects(data, "inputs")),
            bound=IndexBound.from_dict(bound) if bound is not None else None,
            previous_kernel=jsonfields.opt_text(data, "previous_kernel"),
            launches=jsonfields.texts(data, "launches"),
            first_error=jsonfields.opt_text(data, "first_error"),
            misattributed=jsonfields.opt_text(data, "misattributed"),
            repro=jsonfields.opt_text(data, "repro"),
            notes=jsonfields.texts(data, "notes"),
        )


def _num(value: float) -> str:
    if math.isfinite(value) and value == int(value) and abs(value) < 1e15:
        return str(int(value))
    return f"{value:.6g}"


def _from_json_num(data: Mapping[str, Any], key: str) -> float | None:
    """What `_json_num` wrote: a number, null, or the string of a non-finite one."""
    value = data.get(key)
    if isinstance(value, str) and value in ("inf", "-inf", "nan"):
        return float(value)
    return jsonfields.opt_number(data, key)


def _json_num(value: float | None) -> float | str | None:
    if value is None:
        return None
    if math.isfinite(value):
        return value
    return str(value)  # JSON has no NaN/Inf
