"""In-memory programs for `aotipre.check`: an ExportedProgram or nn.Module written to a temporary .pt2.

This module imports torch inside its functions only. It is reached only when a caller passes a
torch object, so torch is already loaded in that process; the rest of aotipre stays torch-free.
"""

from __future__ import annotations

import linecache
import os
import re
import traceback
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from aotipre import codes
from aotipre.findings import Finding


@dataclass(frozen=True)
class WrittenProgram:
    """A program saved for checking."""

    package: str
    """The .pt2 written by torch.export.save (ExportedProgram only, no AOTI code)."""
    inputs: str | None
    """A torch.save of `(args, kwargs)`, when example inputs were given."""
    label: str
    """What reports call it: the given name, `<ExportedProgram>` or `<ModuleClass>`."""


class ExportFailed(Exception):
    """torch.export could not export the nn.Module: `finding` says which class of failure,
    the model line it came from, and what to do (AOT555-AOT557)."""

    def __init__(self, finding: Finding, label: str) -> None:
        super().__init__(finding.message)
        self.finding = finding
        self.label = label


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
    strict: bool = False,
) -> WrittenProgram:
    """Export `subject` if it is an nn.Module (in this process: the module lives here), save the
    ExportedProgram with torch.export.save, and save the example inputs next to it.

    `strict` is torch.export.export's (TorchDynamo traces the module). Raises TypeError for
    anything but an ExportedProgram or nn.Module, ExportFailed when torch.export fails.
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
        label = name or f"<{type(subject).__name__}>"
        try:
            program = torch.export.export(
                subject, args, kwargs, dynamic_shapes=dynamic_shapes, strict=strict
            )
        except Exception as exc:  # the model's failure to export, classified for the report
            raise ExportFailed(export_failure(exc, subject, label, strict), label) from exc
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


_DATA_DEPENDENT = re.compile(
    r"Could not guard on data-dependent expression (.+?)(?: \(unhinted|\n|$)"
)
"""torch's message for a guard on an unbacked symbol (2.11-2.15)."""
_UNBACKED = re.compile(r"\bu\d+\b")
_MESSAGE_FRAME = re.compile(r'File "([^"]+)", line (\d+), in (\w+)')
"""A frame strict export quotes in its message (`# File "m.py", line 4, in forward`)."""
EVIDENCE_LINES = 4
LINE_CHARS = 300
"""Longest line of torch's message a finding quotes."""


def _clip(text: str) -> str:
    return text if len(text) <= LINE_CHARS else text[: LINE_CHARS - 3] + "..."


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """`exc`, then its causes and contexts (each once)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def _type_names(exc: BaseException) -> set[str]:
    return {cls.__name__ for e in _chain(exc) for cls in type(e).__mro__}


def _not_the_models(path: str) -> bool:
    """A file of torch, aotipre or the standard library (never the model's source)."""
    import torch

    roots = (
        os.path.dirname(torch.__file__),
        os.path.dirname(os.path.abspath(__file__)),
        os.path.dirname(os.__file__),
    )
    full = os.path.abspath(path)
    return path.startswith("<") or any(full.startswith(root + os.sep) for root in roots)


def model_line(exc: BaseException, module: Any) -> str:
    """Where in the model's source the export failed: `file:line in function: `code``, from the
    tracebacks (non-strict runs the Python), dynamo's `real_stack` and the frames strict export
    quotes; the innermost frame in the module's own file first, else the innermost outside torch,
    aotipre and the standard library; '' when none is known."""
    frames: list[tuple[str, int, str]] = []
    for e in _chain(exc):
        for fr in traceback.extract_tb(e.__traceback__):
            frames.append((fr.filename, fr.lineno or 0, fr.name))
        for fr in getattr(e, "real_stack", None) or ():
            frames.append((fr.filename, fr.lineno or 0, fr.name))
        for m in _MESSAGE_FRAME.finditer(str(e)):
            frames.append((m.group(1), int(m.group(2)), m.group(3)))
    try:
        import inspect

        own = os.path.abspath(inspect.getsourcefile(type(module)) or "")
    except (TypeError, OSError):
        own = ""
    users = [f for f in frames if not _not_the_models(f[0])]
    mine = [f for f in users if own and os.path.abspath(f[0]) == own]
    if not (mine or users):
        return ""
    path, line, func = (mine or users)[-1]
    code = _clip(linecache.getline(path, line).strip())
    return f"{path}:{line} in {func}" + (f": `{code}`" if code else "")


def export_failure(exc: BaseException, module: Any, label: str, strict: bool) -> Finding:
    """The finding for torch.export's `exc` on `module`: by the exception's type first (a guard
    on a data-dependent symbol, a Dynamo graph break), its message second; any other failure is
    AOT557 and quotes torch's exception, never a guessed class."""
    text = "\n".join(str(e) for e in _chain(exc))
    lines = [_clip(ln.strip()) for ln in str(exc).splitlines()[:200] if ln.strip()]
    first = lines[0] if lines else type(exc).__name__
    where = model_line(exc, module)
    at = f" at {where}" if where else ""
    evidence = tuple(lines[:EVIDENCE_LINES])
    how = " (strict)" if strict else ""
    names = _type_names(exc)
    guard = _DATA_DEPENDENT.search(text)
    if "GuardOnDataDependentSymNode" in names or guard is not None:
        expr = _clip(guard.group(1).strip()) if guard else first
        symbols = sorted(set(_UNBACKED.findall(expr)))
        sym = f" (symbol {', '.join(symbols)})" if symbols else ""
        hint = (
            f"tell export what the model guarantees: torch._check(...) on {' and '.join(symbols)} "
            "right after the line that produces it (e.g. torch._check(n > 2)); if the branch "
            "depends on tensor values, make it data-independent (torch.where, torch.cond)"
            if symbols
            else None
        )
        return codes.get("AOT555").finding(
            f"exporting {label}{how} failed: data-dependent expression `{expr}`{sym}{at}",
            hint=hint,
            stage="export",
            evidence=evidence,
        )
    if "Unsupported" in names and any(
        type(e).__module__.startswith("torch._dynamo") for e in _chain(exc)
    ):
        return codes.get("AOT556").finding(
            f"exporting {label}{how} failed: a graph break ({first}){at}",
            stage="export",
            evidence=evidence,
        )
    return codes.get("AOT557").finding(
        f"exporting {label}{how} failed: {type(exc).__name__}: {first}{at}",
        stage="export",
        evidence=evidence,
    )
