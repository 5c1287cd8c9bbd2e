"""`aotipre merge`: the JSON reports of one run's CI shards (`check --shard I/N`) as one report.

Every package of the run's plan comes out once, ordered as `check` orders them (by package
path, repeats of one path in the plan's order): the report of the shard that checked it, or an error report saying why it was
not checked (its shard gave no report, or gave one without it), so that a missing, crashed or
timed-out shard fails the gate and is never taken for a clean one. The result depends only on
the files' contents, never on their order on the command line.

A report without a `shard` block (a plain `check` report of one or many packages) counts as
shard 1/1 whose plan is its own packages; several of those merge into their union.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from aotipre import __version__, jsonfields, safeio
from aotipre.errors import UsageError
from aotipre.findings import SCHEMA_VERSION, Report
from aotipre.shard import MAX_SHARDS, numbered

MAX_REPORT_BYTES = 256 * 1024 * 1024
"""Largest JSON report `merge` reads."""


@dataclass(frozen=True)
class ShardFile:
    """One JSON report given to `merge`, read and checked."""

    path: str
    index: int
    count: int
    plan: Mapping[str, tuple[int, str]]
    """Every package of the run: key -> (its shard, its path as reports show it)."""
    reports: tuple[tuple[str, Report], ...]
    """(key, report) of each package this shard checked."""
    digest: str
    """SHA-256 of the file: orders files of one shard (1/1 reports) by content, not by name."""

    @property
    def label(self) -> str:
        return f"shard {self.index}/{self.count} ({self.path})"


@dataclass(frozen=True)
class MergeResult:
    """The merged run."""

    reports: tuple[Report, ...]
    """One per package of the plan (and per missing shard that had none), in `check`'s order."""
    count: int
    """The run's number of shards."""
    missing: tuple[int, ...]
    """Shards (1-based) no report was given for."""


def merge(paths: Sequence[str | os.PathLike[str]], expect_shards: int | None = None) -> MergeResult:
    """Merge the JSON reports at `paths`; `expect_shards`: the run's shard count, checked
    against the reports'. UsageError (one line) for a file that is not a complete report of
    this schema version, or for reports that are not the shards of one run."""
    if not paths:
        raise UsageError("no report to merge", hint="give the shards' JSON reports")
    if expect_shards is not None and not 1 <= expect_shards <= MAX_SHARDS:
        raise UsageError(f"--expect-shards {expect_shards}: must be 1 to {MAX_SHARDS}")
    files = sorted((read_shard_file(p) for p in paths), key=lambda f: (f.index, f.digest))
    count = _one_count(files)
    if expect_shards is not None and expect_shards != count:
        raise UsageError(
            f"--expect-shards {expect_shards}, but {files[0].path} is shard "
            f"{files[0].index}/{count}",
            hint="merge the reports of a run split into that many shards",
        )
    plan = _one_plan(files, count)
    given = {f.index for f in files}
    missing = tuple(i for i in range(1, count + 1) if i not in given)
    checked: dict[str, list[tuple[ShardFile, Report]]] = {}
    for file in files:
        for key, report in file.reports:
            checked.setdefault(key, []).append((file, report))
    out: list[tuple[str, Report]] = []
    for key, (index, package) in plan.items():
        if key in checked:
            out.append((key, _agreed(checked[key])))
        elif index in given:
            owner = next(f for f in files if f.index == index)
            out.append((key, _not_checked(package, f"the report of {owner.label} lacks it")))
        else:
            why = f"shard {index}/{count}, which was to check it, gave no report"
            out.append((key, _not_checked(package, f"{why} (did its job fail or time out?)")))
    planned = {index for index, _ in plan.values()}
    for index in missing:
        if index not in planned:
            label = f"<shard {index}/{count}>"
            why = f"shard {index}/{count} gave no report (it had no package to check)"
            out.append((label, _not_checked(label, why)))
    order = {key: i for i, key in enumerate(plan)}  # the run's: repeats of one path in order
    out.sort(key=lambda item: (item[1].package_path, order.get(item[0], -1)))
    return MergeResult(tuple(report for _, report in out), count, missing)


def read_shard_file(path: str | os.PathLike[str]) -> ShardFile:
    """One report file, read bounded (safeio) and checked; UsageError (one line) otherwise."""
    name = os.fspath(path)
    text = safeio.read_text(name, f"report {name}", MAX_REPORT_BYTES)
    try:
        data = json.loads(text)
    except RecursionError:
        raise UsageError(f"report {name} nests too deeply to be an aotipre report") from None
    except ValueError as exc:
        raise UsageError(
            f"report {name} is not complete JSON ({exc})",
            hint="cut off: re-run the shard that wrote it, or fetch it again",
        ) from None
    if not isinstance(data, dict) or not ("reports" in data or "package_path" in data):
        raise UsageError(f"{name} is not the JSON report of `aotipre check`")
    version = data.get("schema_version")
    if version != SCHEMA_VERSION:
        raise UsageError(
            f"report {name} has schema_version {version!r}; "
            f"this aotipre ({__version__}) reads {SCHEMA_VERSION}",
            hint="merge with the aotipre that wrote it",
        )
    try:
        if "reports" in data:
            entries = jsonfields.objects(data, "reports")
        else:
            entries = [data]
        reports = [_report(entry, i) for i, entry in enumerate(entries)]
        block = jsonfields.opt_mapping(data, "shard")
        if block is None:
            keys = numbered([r.package_path for r in reports])
            plan = {key: (1, r.package_path) for key, r in zip(keys, reports)}
            index = count = 1
        else:
            index, count, plan, keys = _shard_block(block, len(reports))
    except ValueError as exc:
        raise UsageError(f"report {name} is not a complete aotipre report: {exc}") from None
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
    return ShardFile(name, index, count, plan, tuple(zip(keys, reports)), digest)


def _report(data: Mapping[str, Any], i: int) -> Report:
    """One report of the file, checked against what it says of itself."""
    try:
        report = Report.from_dict(jsonfields.obj(data, "report"))
        _renderable(report)
    except ValueError as exc:
        raise ValueError(f"reports[{i}]: {exc}") from None
    said = data.get("verdict")
    if said != report.verdict.value:
        raise ValueError(
            f"{report.package_path} says verdict {said!r}, but its findings and stages give "
            f"{report.verdict.value!r}"
        )
    return report


def _renderable(report: Report) -> None:
    """ValueError for the parts of a report that renderers index but the report's types leave
    open: the package's models, the target rows, the runtimes."""
    if report.package is not None:
        jsonfields.text(report.package, "kind")
        for model in jsonfields.objects(report.package, "models", required=True):
            jsonfields.text(model, "name")
            jsonfields.opt_text(model, "device_type")
            jsonfields.flag(model, "has_exported_program")
            jsonfields.flag(model, "has_aoti")
    for row in report.targets:
        for key in ("target", "model", "status"):
            jsonfields.text(row, key)
        jsonfields.texts(row, "reasons")
    for runtime in report.runtimes:
        jsonfields.text(runtime, "torch")
        jsonfields.text(runtime, "python")


def _shard_block(
    block: Mapping[str, Any], reports: int
) -> tuple[int, int, dict[str, tuple[int, str]], list[str]]:
    """(index, count, plan, keys of the reports) of a `shard` block (ShardPlan.to_dict())."""
    index, count = jsonfields.integer(block, "index"), jsonfields.integer(block, "count")
    if not 1 <= index <= count <= MAX_SHARDS:
        raise ValueError(f"shard {index}/{count} does not exist")
    plan = {}
    for key, entry in jsonfields.mapping(block, "plan").items():
        entry = jsonfields.obj(entry, f"plan[{key!r}]")
        shard = jsonfields.integer(entry, "shard")
        if not 1 <= shard <= count:
            raise ValueError(f"plan[{key!r}]: shard {shard} of {count} does not exist")
        plan[key] = (shard, jsonfields.text(entry, "package"))
    keys = list(jsonfields.texts(block, "keys"))
    if len(keys) != reports or len(set(keys)) != len(keys):
        raise ValueError(f"shard.keys: {len(keys)} distinct keys needed, one per report")
    for key in keys:
        if key not in plan:
            raise ValueError(f"shard.keys: {key!r} is not in the plan")
    return index, count, plan, keys


def _one_count(files: Sequence[ShardFile]) -> int:
    """The shard count all files agree on; UsageError naming two that do not."""
    for a, b in zip(files, files[1:]):
        if a.count != b.count:
            first, second = sorted((a, b), key=lambda f: f.count)
            raise UsageError(
                f"{first.path} is shard {first.index}/{first.count} but {second.path} is "
                f"shard {second.index}/{second.count}: not the shards of one run",
                hint="merge the reports of one run",
            )
    return files[0].count


def _one_plan(files: Sequence[ShardFile], count: int) -> dict[str, tuple[int, str]]:
    """The run's plan: the shards' (all equal, each shard once), or for 1/1 reports the union
    of their packages."""
    if count == 1:
        union: dict[str, tuple[int, str]] = {}
        for file in files:
            for key, entry in file.plan.items():
                union.setdefault(key, entry)
        return union
    for a, b in zip(files, files[1:]):
        if a.index == b.index:
            raise UsageError(
                f"shard {a.index}/{count} is given twice: {a.path} and {b.path}",
                hint="give each shard's report once",
            )
        if a.plan != b.plan:
            raise UsageError(
                f"{a.label} and {b.label} plan different packages: not the shards of one run",
                hint="merge shards that checked the same manifest and packages",
            )
    return dict(files[0].plan)


def _agreed(found: Sequence[tuple[ShardFile, Report]]) -> Report:
    """The report of a package checked once, or several times with one verdict (the lowest
    shard's); an error report naming each verdict when they differ."""
    first = found[0][1]
    if len({report.verdict for _, report in found}) == 1:
        return first
    said = "; ".join(f"{file.label} says {report.verdict.value}" for file, report in found)
    return dataclasses.replace(first, error=f"checked twice with different verdicts: {said}")


def _not_checked(package: str, why: str) -> Report:
    return Report(package_path=package, error=f"not checked: {why}", tool_version=__version__)
