"""What a compiled model's outputs are compared with, found without torch: the ExportedProgram
run eagerly (the package's own, or the one `--exported-program FILE` names, for an AOTI-only
package) and golden outputs (`--expected FILE`, a torch.save of the outputs for the sample
inputs)."""

from __future__ import annotations

import os
from dataclasses import dataclass

from aotipre.foundation.errors import AotipreError, UsageError
from aotipre.foundation.safeio import require_file
from aotipre.inputs.load import load_sample_inputs
from aotipre.pt2.reader import read_package
from aotipre.pt2.spec import ModelInfo, PackageInfo


@dataclass(frozen=True)
class ExportedProgramRef:
    """Where the ExportedProgram of one model is, or why there is none."""

    path: str | None
    """The archive holding it (absolute), or None."""
    model: str | None
    """Its model name in that archive."""
    label: str
    """How findings name it: `the ExportedProgram in the archive`, `the ExportedProgram of
    --exported-program ep.pt2`; when there is none, why."""


def exported_program_for(
    explicit: str | None, package: PackageInfo, model: ModelInfo
) -> ExportedProgramRef:
    """`--exported-program FILE` when given (the ExportedProgram of the same model name, or the
    file's only one), else the package's own."""
    if explicit:
        shown = explicit
        try:
            info = read_package(explicit)
        except AotipreError as exc:
            return ExportedProgramRef(
                None, None, f"--exported-program {shown} cannot be read ({exc})"
            )
        eps = [m for m in info.models if m.has_exported_program]
        pick = next((m for m in eps if m.name == model.name), None)
        if pick is None and len(eps) == 1:
            pick = eps[0]
        if pick is None:
            names = ", ".join(m.name for m in eps) or "none"
            return ExportedProgramRef(
                None,
                None,
                f"--exported-program {shown} has no ExportedProgram for model '{model.name}' "
                f"(it holds: {names})",
            )
        return ExportedProgramRef(
            os.path.abspath(explicit),
            pick.name,
            f"the ExportedProgram of --exported-program {shown}",
        )
    if model.has_exported_program:
        return ExportedProgramRef(
            os.path.abspath(package.path), model.name, "the ExportedProgram in the archive"
        )
    return ExportedProgramRef(None, None, "the archive holds AOTI code only (no ExportedProgram)")


@dataclass(frozen=True)
class ExpectedRef:
    """Golden outputs to compare with: `--expected FILE`, or those a bundle stores."""

    label: str
    """How findings name them."""
    step: dict[str, str]
    """Where the worker's compare step reads them: `b_file` (a path) or `b_member` (a member
    of the package)."""


def expected_outputs_for(expected: str | None, model: ModelInfo) -> ExpectedRef | None:
    if expected:
        return ExpectedRef(
            f"the expected outputs of --expected {expected}",
            {"b_file": os.path.abspath(expected)},
        )
    if model.expected_outputs_member:
        return ExpectedRef(
            f"the expected outputs stored in the archive ({model.expected_outputs_member})",
            {"b_member": model.expected_outputs_member},
        )
    return None


def check_reference_files(exported_program: str | None, expected: str | None) -> None:
    """One UsageError line when `--exported-program FILE` holds no readable ExportedProgram or
    `--expected FILE` is not a torch.save file that torch.load(weights_only=True) would read
    (both read without torch, bounded)."""
    if exported_program:
        require_file(exported_program, f"--exported-program {exported_program}")
        try:
            info = read_package(exported_program)
        except AotipreError as exc:
            raise UsageError(f"--exported-program {exported_program}: {exc}") from None
        if not any(m.has_exported_program for m in info.models):
            raise UsageError(
                f"--exported-program {exported_program}: holds no ExportedProgram (write one "
                "with torch.export.save(ep, path))"
            )
    if expected:
        require_file(expected, f"--expected {expected}")
        try:
            load_sample_inputs(expected)
        except AotipreError as exc:
            why = str(exc).removeprefix(f"{expected}: ")
            raise UsageError(
                f"--expected {expected}: not outputs saved with torch.save ({why})"
            ) from None
