"""A compiled model whose outputs are wrong, handed to accuracy triage (aotipre.triage.accuracy)
once every stage has reported, as a crashed run is handed to crash triage (base.RunCrash): its
outputs differ from eager (AOT701) or hold NaN/Inf the reference does not (AOT702) on the
sample inputs, differ from the ExportedProgram given the same weights after a weight swap
(AOT068), or the C++ loader's differ from the Python loader's (AOT525)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from aotipre.findings import Finding
from aotipre.foundation.errors import AotipreError
from aotipre.inputs.weights import read_weights
from aotipre.pt2.archive import Archive
from aotipre.pt2.spec import ModelInfo, PackageInfo
from aotipre.runner.stages.base import ok
from aotipre.runner.stages.options import DynamicOptions
from aotipre.runner.stages.session import Session

TRIGGERS = {"AOT701": "compare", "AOT702": "run", "AOT068": "weights", "AOT525": "cpp-load"}
"""The findings that start accuracy triage, with the stage that reports each on the sample
inputs (the probe stage's AOT701 at other sizes does not)."""


@dataclass(frozen=True)
class OutputMismatch:
    """What accuracy triage needs of one model whose compiled outputs are wrong."""

    package: PackageInfo
    model: ModelInfo
    device: str
    inputs: Mapping[str, Any]
    """The worker's inputs spec (`{"kind": "file" | "member" | "synth", ...}`)."""
    findings: tuple[Finding, ...]
    """The AOT701/AOT702 findings on the sample inputs."""
    reference: str | None
    """The archive holding the ExportedProgram (the package's own or --exported-program's);
    None: there is none (an AOTI-only package)."""
    reference_model: str | None
    reference_label: str
    compiled_with: Mapping[str, Any]
    """The inductor_configs of the check (--compile-at-deploy and the compile stage's)."""
    env: Mapping[str, str]
    options: DynamicOptions
    archive: Archive | None = field(default=None, compare=False, repr=False)
    weights: Mapping[str, str] | None = None
    """The --weights file swapped in (`{"file", "format"}`) when AOT068 is a trigger: a rebuild
    of the program must carry these weights to compare like with like."""
    python_agrees: bool | None = None
    """Whether the Python loader's outputs on the sample inputs were compared with the
    ExportedProgram run eagerly and agree (None: not compared): what AOT525 is judged by."""
    deployed: str | None = None
    """The compiled package the check ran (the archive's AOTI code or aotipre's compile of
    it, alive while triage runs) and its model name: what a rebuild's latency is timed against."""
    deployed_model: str = "model"
    vec_isa: tuple[str, ...] | None = None
    """The CPU ISAs torch's probe found usable in the session's load, handed to triage's
    workers so that their compiles skip the probe (worker.pin_vec_isa); None: unknown."""

    @property
    def codes(self) -> tuple[str, ...]:
        return tuple(sorted({f.code for f in self.findings}))


def hand_mismatch(s: Session) -> None:
    """Call the session's `on_mismatch` when a trigger was found (once per model, after every
    stage has reported, while the session's files exist)."""
    hook = s.on_mismatch
    if hook is None:
        return
    ref = s.reference
    # with a program to rebuild, the difference from eager is what triage localizes; without
    # one, a difference from --expected is what it says it cannot localize
    found = tuple(
        f
        for f in s.findings
        if TRIGGERS.get(f.code) == f.stage
        and (ref.path is None or "compared with the expected" not in f.message)
    )
    if not found:
        return
    hook(
        OutputMismatch(
            package=s.package,
            model=s.model,
            device=s.device,
            inputs=dict(s.inputs.spec),
            findings=found,
            reference=os.path.abspath(ref.path) if ref.path is not None else None,
            reference_model=ref.model,
            reference_label=ref.label,
            compiled_with=dict(s.opts.inductor_configs),
            env={**s.opts.extra_env, **s.extra_env},
            options=s.opts,
            archive=s.callers_archive,
            weights=_weights(s) if any(f.code == "AOT068" for f in found) else None,
            python_agrees=_python_agrees(s),
            deployed=s.aoti_package,
            deployed_model=s.aoti_model,
            vec_isa=s.probe.probed,
        )
    )


def _weights(s: Session) -> dict[str, str] | None:
    """The --weights file the weights stage swapped in, as the worker reads it."""
    if not s.opts.weights:
        return None
    try:
        file = s.weights or read_weights(s.opts.weights)
    except AotipreError:  # read by the weights stage a moment ago: changed since
        return None
    return {"file": os.path.abspath(file.path), "format": file.format}


def _python_agrees(s: Session) -> bool | None:
    """Whether the compare stage compared the Python loader's outputs with the ExportedProgram
    run eagerly and found them equal within tolerance."""
    compared = s.records.get("compare")
    if s.reference.path is None or compared is None or not ok(compared):
        return None
    return not any(
        f.code in ("AOT701", "AOT702") and f.stage in ("compare", "run") for f in s.findings
    )
