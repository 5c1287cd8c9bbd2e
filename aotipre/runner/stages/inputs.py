"""Which inputs the workers get: the user's file, the sample inputs stored in the archive, or
inputs synthesized from the contract (seeded); and their shapes, which the probes start from.
A sample tensor laid out otherwise than compiled reaches the workers' checked runs in the
compiled layout (the runtime check would refuse it as given); the probe runs it as given."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from aotipre.checks.inputs import CompiledLayout, compiled_layouts
from aotipre.foundation.errors import InputsError
from aotipre.inputs.load import load_sample_inputs, load_sample_inputs_bytes
from aotipre.inputs.meta import SampleInputs
from aotipre.pt2.archive import Archive
from aotipre.pt2.spec import ModelInfo, PackageInfo
from aotipre.runner.synth import sample_tensor_shapes, synthesize


@dataclass(frozen=True)
class WorkerInputs:
    """The worker's inputs spec, the tensor shapes it implies, and how the run stage says it."""

    spec: dict[str, Any]
    """`{"kind": "file", "path"}`, `{"kind": "member", "member"}` or `{"kind": "synth", ...}`."""
    shapes: dict[int, tuple[int, ...]]
    """tensor_index -> shape (empty when unknown)."""
    note: str
    shapes_unknown: str = ""
    """Why the shapes are unknown although the inputs are (the probe stage says it)."""
    relaid: tuple[CompiledLayout, ...] = ()
    """The sample tensors laid out otherwise than compiled: the workers lay them out as
    compiled (the spec's `compiled_strides`), except for the probe's run of the sample as given."""


def _relaid(
    spec: dict[str, Any], note: str, model: ModelInfo, sample: SampleInputs
) -> tuple[dict[str, Any], str, tuple[CompiledLayout, ...]]:
    """The spec and note of a sample whose tensors the workers lay out as compiled."""
    relaid = tuple(compiled_layouts(model, sample))
    if not relaid:
        return spec, note, ()
    spec = {**spec, "compiled_strides": [[r.leaf, list(r.strides)] for r in relaid]}
    said = ", ".join(f"'{r.input}' with strides {r.strides} (given {r.actual})" for r in relaid)
    return spec, f"{note}; laid out as compiled: {said}", relaid


def plan_inputs(
    package: PackageInfo,
    model: ModelInfo,
    *,
    inputs_path: str | None,
    inputs_member: str | None,
    sample: SampleInputs | None,
    archive: Callable[[], Archive],
    seed: int,
) -> WorkerInputs:
    """`inputs_path` (a torch.save file), else `inputs_member` (stored in the archive), else
    synthesized; `sample`: those inputs, already read; `archive()`: the package's open archive.
    Raises PlanError or InputsError when there is nothing to run with."""
    if inputs_path is not None:
        spec: dict[str, Any] = {"kind": "file", "path": os.path.abspath(inputs_path)}
        note = f"inputs from {inputs_path}"
        try:
            if sample is None:
                sample = load_sample_inputs(inputs_path)
            shapes = sample_tensor_shapes(model, sample)
        except InputsError as exc:
            return WorkerInputs(spec, {}, note, f"input shapes unknown ({exc})")
        spec, note, relaid = _relaid(spec, note, model, sample)
        return WorkerInputs(spec, shapes, note, relaid=relaid)
    if inputs_member is not None:
        spec = {"kind": "member", "member": inputs_member}
        note = f"inputs stored in the archive ({inputs_member})"
        try:
            if sample is None:
                data = archive().read(inputs_member)
                sample = load_sample_inputs_bytes(data, f"{package.path}:{inputs_member}")
            shapes = sample_tensor_shapes(model, sample)
        except Exception as exc:
            return WorkerInputs(spec, {}, note, f"input shapes unknown ({exc})")
        spec, note, relaid = _relaid(spec, note, model, sample)
        return WorkerInputs(spec, shapes, note, relaid=relaid)
    try:
        opened: Archive | None = archive()
    except Exception:  # synthesize only wants index hints from it: it does without them
        opened = None
    plan = synthesize(package, model, archive=opened)
    note = "synthesized inputs (seed {}): {}".format(seed, "; ".join(plan.notes) or "static shapes")
    return WorkerInputs({"kind": "synth", "tree": plan.tree, "seed": seed}, dict(plan.shapes), note)
