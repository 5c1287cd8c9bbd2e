"""In-memory programs for `aotipre.check`: an ExportedProgram or nn.Module written to a temporary .pt2.

This module imports torch inside its functions only. It is reached only when a caller passes a
torch object, so torch is already loaded in that process; the rest of aotipre stays torch-free.
"""

from __future__ import annotations

import contextlib
import linecache
import os
import re
import traceback
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from aotipre.findings import Finding, codes


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
    draft_budget_s: float | None = None,
) -> WrittenProgram:
    """Export `subject` if it is an nn.Module (in this process: the module lives here), save the
    ExportedProgram with torch.export.save, and save the example inputs next to it.

    `strict` is torch.export.export's (TorchDynamo traces the module). Raises TypeError for
    anything but an ExportedProgram or nn.Module, ExportFailed when torch.export fails; then,
    with a `draft_budget_s`, torch.export.draft_export's report on the same module and inputs
    (run in a forked worker within that many seconds, in `directory`) is in its finding.
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
            draft = None
            if draft_budget_s is not None:
                draft = draft_report(
                    subject, args, kwargs, dynamic_shapes, strict, draft_budget_s, directory
                )
            raise ExportFailed(export_failure(exc, subject, label, strict, draft), label) from exc
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


def export_failure(
    exc: BaseException, module: Any, label: str, strict: bool, draft: DraftReport | None = None
) -> Finding:
    """The finding for torch.export's `exc` on `module`: by the exception's type first (a guard
    on a data-dependent symbol, a Dynamo graph break), its message second; any other failure is
    AOT557 and quotes torch's exception, never a guessed class. `draft`: draft_export's report on
    the same module and inputs, whose failures (every one it found, with what the real values
    made of each) follow torch's lines in the evidence."""
    text = "\n".join(str(e) for e in _chain(exc))
    lines = [_clip(ln.strip()) for ln in str(exc).splitlines()[:200] if ln.strip()]
    first = lines[0] if lines else type(exc).__name__
    where = model_line(exc, module)
    at = f" at {where}" if where else ""
    drafted = _draft_evidence(draft)
    evidence = (*lines[:EVIDENCE_LINES], *drafted)
    if draft is not None and draft.failures:
        at += (
            f"; draft_export on the same inputs found {draft.total} issue(s), "
            "listed in the evidence"
        )
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


def _draft_evidence(draft: DraftReport | None) -> tuple[str, ...]:
    """Evidence lines for draft_export's report: one per failure, or why it has none."""
    if draft is None:
        return ()
    if draft.failures:
        more = draft.total - len(draft.failures)
        tail = (f"draft_export: {more} more issue(s) not listed",) if more > 0 else ()
        return (*(_clip(f"draft_export: {f.line()}") for f in draft.failures), *tail)
    if draft.note:
        return (_clip(f"draft_export: {draft.note}"),)
    return ("draft_export: no issue found on the same inputs",)


MAX_DRAFT_FAILURES = 6
"""draft_export failures a finding quotes at most."""
DRAFT_KINDS = {
    "DATA_DEPENDENT_ERROR": "data-dependent expression",
    "GUARD_ADDED": "guard added",
    "MISSING_FAKE_KERNEL": "missing fake kernel",
    "MISMATCHED_FAKE_KERNEL": "mismatched fake kernel",
}
"""torch.export._draft_export.FailureType names (torch 2.13-2.15) -> the finding's words."""


@dataclass(frozen=True)
class DraftFailure:
    """One failure of torch.export.draft_export's report (`ep._report.failures`)."""

    kind: str
    """Its FailureType name: DATA_DEPENDENT_ERROR, GUARD_ADDED, MISSING_FAKE_KERNEL, ..."""
    expression: str = ""
    """The data-dependent expression or the guard ('' for a fake-kernel failure)."""
    result: str = ""
    """What the real values of the example inputs made the expression ('' unknown)."""
    op: str = ""
    """The custom op of a fake-kernel failure."""
    reason: str = ""
    where: str = ""
    """The model line: `file:line in function: `code``, '' when none is outside torch."""
    occurrences: int = 1

    def line(self) -> str:
        """`data-dependent expression `Eq(u0, 1)` was True on the example inputs at m.py:4 ...`."""
        what = DRAFT_KINDS.get(self.kind, self.kind.lower())
        text = f"{what} `{self.expression}`" if self.expression else what
        if self.op:
            text += f" of torch.ops.{self.op}" + (f" ({self.reason})" if self.reason else "")
        if self.result:
            text += f" was {self.result} on the example inputs"
        if self.occurrences > 1:
            text += f" ({self.occurrences} times)"
        return _clip(text + (f" at {self.where}" if self.where else ""))


@dataclass(frozen=True)
class DraftReport:
    """What torch.export.draft_export said of a module export could not export."""

    failures: tuple[DraftFailure, ...] = ()
    total: int = 0
    """Failures in its report (more than `failures` holds when it found many)."""
    note: str = ""
    """Why there is no report: it raised too, it ran out of time, it could not run."""


def draft_report(
    module: Any,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    dynamic_shapes: Any,
    strict: bool,
    budget_s: float,
    directory: str,
) -> DraftReport:
    """torch.export.draft_export on `module` and the same inputs, in a forked worker (the module
    lives in this process) whose TMPDIR is `directory`, its output discarded, killed with its
    process group after `budget_s` seconds; never raises because it failed."""
    import torch

    if torch.cuda.is_initialized():
        return DraftReport(
            note="not run: CUDA is initialized in this process, and a forked worker cannot use it"
        )
    if not hasattr(torch.export, "draft_export"):
        return DraftReport(note=f"not run: torch {torch.__version__} has no draft_export")
    out = os.path.join(directory, "draft_export.json")

    def run() -> dict[str, Any]:
        return _draft_failures(module, args, kwargs, dynamic_shapes, strict)

    done = _in_forked_worker(run, out, directory, budget_s)
    if done is not None:
        return DraftReport(note=done)
    try:
        import json

        with open(out, encoding="utf-8") as f:
            data = json.loads(f.read(1 << 20))
    except (OSError, ValueError):
        data = None
    if not isinstance(data, dict):
        return DraftReport(note="its worker wrote no report")
    if data.get("raised"):
        return DraftReport(note=f"it raised too ({_clip(str(data['raised']))})")
    failures = tuple(
        DraftFailure(**{k: v for k, v in f.items() if k in DraftFailure.__dataclass_fields__})
        for f in data.get("failures") or []
        if isinstance(f, dict)
    )
    return DraftReport(failures=failures, total=int(data.get("total") or len(failures)))


def _in_forked_worker(
    run: Callable[[], dict[str, Any]], out: str, directory: str, budget_s: float
) -> str | None:
    """Run `run()` in a forked child that writes its JSON result to `out`: None when it did,
    else why not. The child dies with this process (PR_SET_PDEATHSIG), leads its own process
    group (killed whole after `budget_s`), uses one thread and `directory` as its TMPDIR."""
    import json
    import signal
    import tempfile
    import time

    from aotipre.runner.contain import child_setup

    setup = child_setup(os.getpid())
    # Python 3.12+ warns when a multi-threaded process forks: a lock another thread held stays
    # held in the child, and the budget bounds what that can cost
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:  # the child: nothing of it returns to the caller
        code = 1
        try:
            os.setpgid(0, 0)
            if setup is not None:
                setup()
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, 1)
            os.dup2(null, 2)
            os.environ.update(TMPDIR=directory, TMP=directory, TEMP=directory)
            tempfile.tempdir = directory
            import torch

            torch.set_num_threads(1)
            try:
                result = run()
            except Exception as exc:
                first = next((ln for ln in str(exc).splitlines() if ln.strip()), "")
                result = {"raised": f"{type(exc).__name__}: {first.strip()}"}
            with open(out + ".part", "w", encoding="utf-8") as f:
                json.dump(result, f, default=str)
            os.replace(out + ".part", out)
            code = 0
        finally:
            os._exit(code)
    try:
        os.setpgid(pid, pid)
    except OSError:
        pass  # the child did it already, or it is gone
    deadline = time.monotonic() + budget_s
    try:
        while True:
            waited, status = os.waitpid(pid, os.WNOHANG)
            if waited:
                pid = 0
                if os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0:
                    return None
                if os.WIFSIGNALED(status):
                    return f"its worker was killed by signal {os.WTERMSIG(status)}"
                return f"its worker failed (exit {os.WEXITSTATUS(status)})"
            if time.monotonic() >= deadline:
                return f"it did not finish within {budget_s:g} s (the escalation budget)"
            time.sleep(0.05)
    finally:
        if pid:
            with contextlib.suppress(OSError):
                os.killpg(pid, signal.SIGKILL)
            with contextlib.suppress(OSError):
                os.waitpid(pid, 0)


def _draft_failures(
    module: Any, args: tuple[Any, ...], kwargs: dict[str, Any], dynamic_shapes: Any, strict: bool
) -> dict[str, Any]:
    """draft_export's report as JSON-able data (runs in the forked worker)."""
    import torch

    ep = torch.export.draft_export(
        module, args, kwargs, dynamic_shapes=dynamic_shapes, strict=strict
    )
    report = getattr(ep, "_report", None)
    failures = list(getattr(report, "failures", None) or [])
    # the report's file table holds only the names first interned during draft_export: a file
    # this process met before (the failed export did) is in torch's intern table alone
    # (torch/_logging/structured.py INTERN_TABLE, torch 2.13-2.15)
    from torch._logging import structured

    interned = getattr(structured, "INTERN_TABLE", None) or {}
    files = {number: name for name, number in dict(interned).items()}
    files.update(dict(getattr(report, "str_to_filename", None) or {}))
    out = []
    for failure in failures[:MAX_DRAFT_FAILURES]:
        data = failure.data if isinstance(getattr(failure, "data", None), dict) else {}
        kind = getattr(failure.failure_type, "name", str(failure.failure_type))
        out.append(
            {
                "kind": kind,
                "expression": _clip(str(data.get("expr") or "")),
                "result": _clip(str(data.get("result") or "")),
                "op": _clip(str(data.get("op") or "")),
                "reason": _clip(str(data.get("reason") or "")),
                "where": _draft_where(data.get("user_stack"), files),
                "occurrences": int(data.get("occurrences") or 1),
            }
        )
    return {"failures": out, "total": len(failures)}


def _draft_where(stack: Any, files: dict[Any, str]) -> str:
    """The innermost frame of a draft_export failure's user stack outside torch, aotipre and
    the standard library, as `file:line in function: `code``."""
    for frame in reversed(stack if isinstance(stack, list) else []):
        if not isinstance(frame, dict):
            continue
        path = files.get(frame.get("filename"), "")
        if path and not _not_the_models(path):
            code = _clip(str(frame.get("loc") or "").strip())
            where = f"{path}:{frame.get('line')} in {frame.get('name')}"
            return where + (f": `{code}`" if code else "")
    return ""
