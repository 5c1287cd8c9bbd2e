"""In-memory programs for `aotipre.check`: an ExportedProgram or nn.Module written to a temporary .pt2.

This module imports torch inside its functions only. It is reached only when a caller passes a
torch object, so torch is already loaded in that process; the rest of aotipre stays torch-free.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class WrittenProgram:
    """A program saved for checking."""

    package: str
    """The .pt2 written by torch.export.save (ExportedProgram only, no AOTI code)."""
    inputs: str | None
    """A torch.save of `(args, kwargs)`, when example inputs were given."""
    label: str
    """What reports call it: the given name, `<ExportedProgram>` or `<ModuleClass>`."""


def is_path(subject: object) -> bool:
    return isinstance(subject, (str, os.PathLike))


def write_program(
    subject: Any,
    directory: str,
    *,
    example_inputs: tuple[Any, ...] | None = None,
    example_kwargs: dict[str, Any] | None = None,
    dynamic_shapes: Any = None,
    name: str | None = None,
) -> WrittenProgram:
    """Export `subject` if it is an nn.Module (in this process: the module lives here), save the
    ExportedProgram with torch.export.save, and save the example inputs next to it.

    Raises TypeError for anything but an ExportedProgram or nn.Module; torch's own exception
    when export fails (the caller's model is at fault, and torch's message says why).
    """
    import torch  # the caller passed a torch object, so torch is loaded already

    kwargs = dict(example_kwargs or {})
    if isinstance(subject, torch.export.ExportedProgram):
        program = subject
        label = name or "<ExportedProgram>"
        if dynamic_shapes is not None:
            raise TypeError("dynamic_shapes applies to an nn.Module (it is exported here)")
    elif isinstance(subject, torch.nn.Module):
        if example_inputs is None and not kwargs:
            raise TypeError(
                "checking an nn.Module needs example_inputs (and/or example_kwargs) to export it"
            )
        args = tuple(example_inputs or ())
        program = torch.export.export(subject, args, kwargs, dynamic_shapes=dynamic_shapes)
        label = name or f"<{type(subject).__name__}>"
    else:
        raise TypeError(
            "aotipre.check takes a .pt2 path, a torch.export.ExportedProgram or an "
            f"nn.Module with example inputs, not {type(subject).__name__}"
        )
    package = os.path.join(directory, "program.pt2")
    torch.export.save(program, package)
    inputs = None
    if example_inputs is not None or kwargs:
        inputs = os.path.join(directory, "example_inputs.pt")
        torch.save((tuple(example_inputs or ()), kwargs), inputs)
    return WrittenProgram(package=package, inputs=inputs, label=label)
