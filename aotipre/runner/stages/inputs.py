"""Which inputs the workers get: the user's file, the sample inputs stored in the archive, or
inputs synthesized from the contract (seeded); and their shapes, which the probes start from."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from aotipre.errors import InputsError
from aotipre.inputs.load import load_sample_inputs, load_sample_inputs_bytes
from aotipre.runner.synth import sample_tensor_shapes, synthesize

if TYPE_CHECKING:
    from aotipre.runner.stages.session import Session


@dataclass(frozen=True)
class WorkerInputs:
    """The worker's inputs spec, the tensor shapes it implies, and how the run stage says it."""

    spec: dict[str, Any]
    """`{"kind": "file", "path"}`, `{"kind": "member", "member"}` or `{"kind": "synth", ...}`."""
    shapes: dict[int, tuple[int, ...]]
    """tensor_index -> shape (empty when unknown)."""
    note: str


def plan_inputs(s: Session) -> WorkerInputs:
    """Raises PlanError or InputsError when there is nothing to run with (sets s.probe_note when
    the inputs are known but their shapes are not)."""
    m = s.model
    shapes: dict[int, tuple[int, ...]] = {}
    if s.inputs_path is not None:
        spec: dict[str, Any] = {"kind": "file", "path": os.path.abspath(s.inputs_path)}
        try:
            sample = s.sample if s.sample is not None else load_sample_inputs(s.inputs_path)
            shapes = sample_tensor_shapes(m, sample)
        except InputsError as exc:
            s.probe_note = f"input shapes unknown ({exc})"
        return WorkerInputs(spec, shapes, f"inputs from {s.inputs_path}")
    if s.inputs_member is not None:
        spec = {"kind": "member", "member": s.inputs_member}
        try:
            if s.sample is not None:
                shapes = sample_tensor_shapes(m, s.sample)
            else:
                data = s.archive.read(s.inputs_member)
                source = f"{s.package.path}:{s.inputs_member}"
                shapes = sample_tensor_shapes(m, load_sample_inputs_bytes(data, source))
        except Exception as exc:
            s.probe_note = f"input shapes unknown ({exc})"
        return WorkerInputs(spec, shapes, f"inputs stored in the archive ({s.inputs_member})")
    try:
        archive = s.archive
    except Exception:  # synthesize only wants index hints from it: it does without them
        archive = None
    plan = synthesize(s.package, m, archive=archive)
    note = "synthesized inputs (seed {}): {}".format(
        s.opts.seed, "; ".join(plan.notes) or "static shapes"
    )
    return WorkerInputs(
        {"kind": "synth", "tree": plan.tree, "seed": s.opts.seed}, dict(plan.shapes), note
    )
