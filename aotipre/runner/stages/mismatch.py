"""A compiled model whose outputs differ from eager (AOT701) or hold NaN/Inf the reference does
not (AOT702) on the sample inputs, handed to accuracy triage (aotipre.triage.accuracy) by the
compare stage, as a crashed run is handed to crash triage (base.RunCrash)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from aotipre.findings import Finding
from aotipre.pt2.archive import Archive
from aotipre.pt2.spec import ModelInfo, PackageInfo
from aotipre.runner.stages.options import DynamicOptions
from aotipre.runner.stages.session import Session

TRIGGERS = {"AOT701": "compare", "AOT702": "run"}
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

    @property
    def codes(self) -> tuple[str, ...]:
        return tuple(sorted({f.code for f in self.findings}))


def hand_mismatch(s: Session) -> None:
    """Call the session's `on_mismatch` when the sample inputs' comparison found AOT701 or
    AOT702 (once per model)."""
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
        )
    )
