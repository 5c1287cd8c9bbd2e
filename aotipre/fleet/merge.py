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
import math
import os
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from aotipre import __version__
from aotipre.findings import SCHEMA_VERSION, Report
from aotipre.fleet.shard import MAX_SHARDS, assign, numbered
from aotipre.foundation import jsonfields, safeio
from aotipre.foundation.errors import UsageError

MAX_REPORT_BYTES = 256 * 1024 * 1024
"""Largest JSON report `merge` reads."""
MAX_NESTING = 100
"""Deepest nesting of objects and arrays in a report `merge` reads (aotipre writes under 20)."""
PARSED_BYTES_PER_BYTE = 12
"""What parsing a report may cost (estimated before parsing: `parsed_size`) per byte of the
file, above PARSED_BYTES_FLOOR: what is read never parses into more. aotipre's reports
estimate under 7 (minified, under 12); a file of empty objects or arrays (`[{},{},...]`,
which parses into 24 times its size) estimates 42, and is refused."""
PARSED_BYTES_FLOOR = 64 * 1024 * 1024
"""What parsing a report may cost whatever its size."""
_CONTAINER_BYTES = 72
"""The most an object or array costs parsed (CPython: an empty dict, 64 bytes, and its slot)."""
_VALUE_BYTES = 56
"""The most one value after a `,` or `:` costs parsed (a float, its slot or dict entry, with
what a growing dict or list holds in reserve)."""
_QUOTE_BYTES = 24
"""Half of what a string value costs parsed beyond its characters (CPython: 49 bytes)."""


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
    digest = _sha256(text)
    size = len(text)
    if parsed_size(text) > PARSED_BYTES_PER_BYTE * size + PARSED_BYTES_FLOOR:
        raise UsageError(
            f"report {name} packs more JSON values into its {size} characters than an aotipre "
            "report does: not parsed (memory)",
            hint="merge the reports that `aotipre check --format json` wrote",
        )
    too_deep = f"report {name} nests too deeply to be an aotipre report (over {MAX_NESTING})"
    try:
        data = json.loads(
            text, parse_constant=_no_constant, parse_float=_finite, parse_int=_float_sized
        )
    except _NotJson as exc:
        raise UsageError(f"report {name} holds {exc}: no number of an aotipre report") from None
    except RecursionError:
        raise UsageError(too_deep) from None
    except ValueError as exc:
        raise UsageError(
            f"report {name} is not complete JSON ({exc})",
            hint="cut off: re-run the shard that wrote it, or fetch it again",
        ) from None
    del text
    if _nesting(data) > MAX_NESTING:
        raise UsageError(too_deep)
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
    return ShardFile(name, index, count, plan, tuple(zip(keys, reports)), digest)


def parsed_size(text: str) -> int:
    """An upper estimate of the bytes that parsing the JSON `text` allocates beyond the text:
    every `{` or `[` may open a container, every `,` or `:` precede a value, every two `"` hold a
    string, a key (`"...":`) counts half (the parser shares a key's string between objects).
    Counted inside strings too: more, never less than the parse needs. Counting is fast and
    allocates nothing."""
    containers = text.count("{") + text.count("[")
    values = text.count(",") + text.count(":")
    strings = text.count('"') - text.count('":')
    return _CONTAINER_BYTES * containers + _VALUE_BYTES * values + _QUOTE_BYTES * strings


def _sha256(text: str) -> str:
    """The SHA-256 of `text` in UTF-8, encoded a slice at a time (no second copy of a file)."""
    digest = hashlib.sha256()
    for start in range(0, len(text), _SLICE_CHARS):
        digest.update(text[start : start + _SLICE_CHARS].encode("utf-8"))
    return digest.hexdigest()


_SLICE_CHARS = 1 << 20


class _NotJson(ValueError):
    """A number JSON does not have: NaN, Infinity, or one too large for a float."""


_FLOAT_DIGITS = len(str(int(sys.float_info.max)))
"""Digits of the largest float: a longer integer has no float (the reports' numbers are)."""


def _float_sized(spelled: str) -> int:
    if len(spelled.lstrip("-")) >= _FLOAT_DIGITS:
        raise _NotJson(f"an integer of {len(spelled.lstrip('-'))} digits (out of a float's range)")
    return int(spelled)


def _no_constant(name: str) -> Any:
    raise _NotJson(name)


def _finite(spelled: str) -> float:
    value = float(spelled)
    if not math.isfinite(value):
        raise _NotJson(f"{spelled[:40]} (out of a float's range)")
    return value


def _nesting(data: Any) -> int:
    """How deeply objects and arrays nest in `data` (0 for a scalar), without recursion; the
    walk holds one iterator per level, so it stops past MAX_NESTING levels."""
    if not isinstance(data, (dict, list)):
        return 0
    stack: list[Iterator[Any]] = [iter(_children(data))]
    deepest = 1
    while stack:
        child = next(stack[-1], _END)
        if child is _END:
            stack.pop()
        elif isinstance(child, (dict, list)):
            stack.append(iter(_children(child)))
            deepest = max(deepest, len(stack))
            if deepest > MAX_NESTING:
                break
    return deepest


_END = object()


def _children(container: dict[str, Any] | list[Any]) -> Iterable[Any]:
    return container.values() if isinstance(container, dict) else container


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
    dealt = assign(plan, count)
    for key, (shard, _) in plan.items():
        if shard != dealt[key]:
            raise ValueError(
                f"plan[{key!r}]: shard {shard}, but --shard deals it to shard {dealt[key]} of "
                f"{count}"
            )
    keys = list(jsonfields.texts(block, "keys"))
    if len(keys) != reports or len(set(keys)) != len(keys):
        raise ValueError(f"shard.keys: {len(keys)} distinct keys needed, one per report")
    for key in keys:
        if key not in plan:
            raise ValueError(f"shard.keys: {key!r} is not in the plan")
        if plan[key][0] != index:  # trusted for its own packages only
            raise ValueError(
                f"shard {index}/{count} reports {plan[key][1]}, a package of shard "
                f"{plan[key][0]}/{count}"
            )
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
