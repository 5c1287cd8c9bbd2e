"""Baselines: a file of accepted findings, so that only new findings fail the gate."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import PurePath
from typing import Any

from aotipre.findings import Finding, Report, Severity, StageResult, StageStatus
from aotipre.foundation.errors import UsageError
from aotipre.foundation.safeio import MAX_BASELINE_BYTES, read_text, write_text

BASELINE_VERSION = 1

Key = tuple[str, str, str, str, str]
"""(package, code, model, input, dim): what identifies a finding across runs (not its message,
whose actual values may change)."""


def finding_key(finding: Finding) -> tuple[str, str, str, str]:
    """(code, model, input, dim) as strings; the package is added by the caller."""
    return (
        finding.code,
        finding.model or "",
        finding.input or "",
        "" if finding.dim is None else str(finding.dim),
    )


def fingerprint(finding: Finding) -> str:
    """A short stable hash of `finding_key` (SARIF partialFingerprints)."""
    return hashlib.sha256("\x1f".join(finding_key(finding)).encode()).hexdigest()[:16]


def package_id(package_path: str, base_dir: str | os.PathLike[str]) -> str:
    """A package's name in a baseline: its path relative to the baseline's folder, with `/`.

    Labels of in-memory programs (`<ExportedProgram>`, `<MyModel>`) are used as they are.
    """
    if package_path.startswith("<"):
        return package_path
    rel = os.path.relpath(os.path.abspath(package_path), os.path.abspath(base_dir))
    return PurePath(rel).as_posix()


@dataclass(frozen=True)
class Baseline:
    """Accepted findings, counted by key (two identical findings need two entries)."""

    path: str
    entries: tuple[tuple[Key, int], ...]

    @property
    def base_dir(self) -> str:
        return os.path.dirname(os.path.abspath(self.path))

    def split(self, report: Report) -> tuple[list[Finding], list[Finding]]:
        """(new, known): the report's findings not in the baseline, and those it accepts."""
        left = Counter(dict(self.entries))
        pkg = package_id(report.package_path, self.base_dir)
        new: list[Finding] = []
        known: list[Finding] = []
        for finding in report.findings:
            key = (pkg, *finding_key(finding))
            if left[key] > 0:
                left[key] -= 1
                known.append(finding)
            else:
                new.append(finding)
        return new, known


def load_baseline(path: str | os.PathLike[str]) -> Baseline:
    """Read a baseline written by `write_baseline`. Raises UsageError naming what is wrong."""
    name = os.fspath(path)
    if not os.path.lexists(name):
        raise UsageError(
            f"baseline {name} does not exist", hint=f"create it with --write-baseline {name}"
        )
    text = read_text(name, f"baseline {name}", MAX_BASELINE_BYTES)
    try:
        data = json.loads(text)
    except RecursionError:
        raise UsageError(f"baseline {name} is nested too deeply to be a baseline") from None
    except ValueError as exc:  # not JSON, or an integer of more digits than Python converts
        raise UsageError(f"baseline {name} is not valid JSON ({str(exc)[:120]})") from None
    if not isinstance(data, dict) or data.get("schema_version") != BASELINE_VERSION:
        raise UsageError(
            f"baseline {name}: schema_version is not {BASELINE_VERSION}",
            hint="write it again with --write-baseline",
        )
    items = data.get("findings")
    if not isinstance(items, list):
        raise UsageError(f"baseline {name}: 'findings' is not a list")
    counts: Counter[Key] = Counter()
    for i, item in enumerate(items):
        counts[_entry_key(item, f"baseline {name}: findings[{i}]")] += 1
    return Baseline(name, tuple(sorted(counts.items())))


def _entry_key(item: Any, where: str) -> Key:
    if not isinstance(item, dict):
        raise UsageError(f"{where} is not an object")
    fields = []
    for field in ("package", "code", "model", "input", "dim"):
        value = item.get(field)
        if field in ("package", "code") and not isinstance(value, str):
            raise UsageError(f"{where}: '{field}' must be a string")
        if value is not None and (
            not isinstance(value, (str, int))
            or isinstance(value, bool)
            or (isinstance(value, int) and not -(2**63) <= value < 2**63)  # an int64
        ):
            raise UsageError(f"{where}: '{field}' must be a string, an integer or null")
        fields.append("" if value is None else str(value))
    return (fields[0], fields[1], fields[2], fields[3], fields[4])


def write_baseline(path: str | os.PathLike[str], reports: Sequence[Report]) -> Baseline:
    """Accept every finding of `reports` (not of those that could not be checked at all)."""
    name = os.fspath(path)
    base_dir = os.path.dirname(os.path.abspath(name))
    rows = []
    for report in reports:
        if report.error is not None:
            continue  # could not check: never accepted
        pkg = package_id(report.package_path, base_dir)
        for f in report.findings:
            rows.append(
                {
                    "package": pkg,
                    "code": f.code,
                    "model": f.model,
                    "input": f.input,
                    "dim": f.dim,
                    "severity": f.severity.value,
                    "message": f.message,
                }
            )
    rows.sort(
        key=lambda r: tuple(
            str(r[k]) for k in ("package", "code", "model", "input", "dim", "message")
        )
    )
    data = {"schema_version": BASELINE_VERSION, "tool": "aotipre", "findings": rows}
    text = json.dumps(data, indent=2) + "\n"
    write_text(name, text, subject=f"baseline {name}", make_folders=True)  # atomic
    # what was written, not read back: the output may be /dev/null or a pipe
    counts = Counter(_entry_key(row, f"baseline {name}") for row in rows)
    return Baseline(name, tuple(sorted(counts.items())))


def apply_baseline(report: Report, baseline: Baseline) -> Report:
    """A copy of `report` without the findings the baseline accepts, plus a `baseline` stage.

    A report that could not be checked is returned unchanged: "could not check" is never
    accepted.
    """
    if report.error is not None:
        return report
    new, known = baseline.split(report)
    out = replace_findings(report, new)
    detail = f"{len(known)} known finding(s) accepted ({os.path.basename(baseline.path)})"
    errors = sum(f.severity is Severity.ERROR for f in known)
    if errors:  # accepted like any other, but they are what the gate is for: say so
        detail += (
            f"; {errors} of them {'an error' if errors == 1 else 'errors'}, which no longer "
            f"{'fails' if errors == 1 else 'fail'} the gate"
        )
    out.stages.append(StageResult(name="baseline", status=StageStatus.PASSED, detail=detail))
    return out


def replace_findings(report: Report, kept: Iterable[Finding]) -> Report:
    """A copy of `report` holding only `kept`; a stage that failed only because of findings
    that were dropped is marked passed."""
    kept = list(kept)
    kept_ids = {id(f) for f in kept}
    dropped = [f for f in report.findings if id(f) not in kept_ids]
    stages = []
    for stage in report.stages:
        if (
            stage.status is StageStatus.FAILED
            and _failed_by(stage, dropped, report)
            and not (_failed_by(stage, kept, report))
        ):
            stage = dataclasses.replace(stage, status=StageStatus.PASSED)
        stages.append(stage)
    return dataclasses.replace(report, findings=kept, stages=stages)


def _failed_by(stage: StageResult, findings: Sequence[Finding], report: Report) -> bool:
    return any(
        f.stage == stage.name
        and (stage.model is None or f.model == stage.model)
        and f.severity.rank >= report.fail_on.rank
        for f in findings
    )
