"""diff_packages(): OLD and NEW .pt2 paths -> one Report whose findings are the changes, each
breaking (error) or compatible (info), read without torch: each archive opened once."""

from __future__ import annotations

import json
import os
import time
from contextlib import ExitStack

from aotipre import codes, safeio
from aotipre.diff.compare import Change, ModelExtras, SideView, compare, values_compared
from aotipre.errors import PackageError, UsageError
from aotipre.findings import Finding, Report, Severity, StageResult, StageStatus
from aotipre.pt2 import layout
from aotipre.pt2.archive import Archive
from aotipre.pt2.ops import archive_custom_ops
from aotipre.pt2.reader import MAX_JSON_CONTAINERS, OpenPackage, open_package
from aotipre.pt2.spec import PackageInfo, package_to_dict

FAIL_ON: dict[str, Severity] = {"breaking": Severity.ERROR, "any": Severity.INFO}
"""`--fail-on` -> the lowest severity that fails the gate: a breaking change is an error, a
compatible one info."""

STAGE = "diff"
COMPATIBLE_HINT = "compatible: OLD's callers run with NEW as they ran with OLD (docs/diff.md)"
"""The hint of a compatible change (a code's own hint says what to do about a breaking one)."""


def diff_packages(
    old: str | os.PathLike[str], new: str | os.PathLike[str], *, fail_on: str = "breaking"
) -> Report:
    """The release diff of OLD -> NEW as a Report (exit code by `fail_on`). A side that cannot
    be read gives a Report with `error` set (exit 2), never a clean one. UsageError (one line)
    when OLD and NEW are one file (the same path twice, or two links to it)."""
    old_name, new_name = os.fspath(old), os.fspath(new)
    threshold = FAIL_ON.get(fail_on)
    if threshold is None:
        raise UsageError(f"--fail-on {fail_on!r}: use breaking or any")
    _refuse_same_file(old_name, new_name)
    report = Report(
        package_path=f"{old_name} -> {new_name}", fail_on=threshold, tool_version=_version()
    )
    started = time.monotonic()
    with ExitStack() as stack:
        sides: list[SideView] = []
        for label, name in (("OLD", old_name), ("NEW", new_name)):
            try:
                opened = open_package(name, verify_crc=False)  # see weight_digests
            except PackageError as exc:
                report.error = (
                    f"{label} {exc}" if str(exc).startswith(name) else f"{label} {name}: {exc}"
                )
                return report
            stack.enter_context(opened.archive)
            try:
                sides.append(_side(opened))
            except PackageError as exc:
                report.error = f"{label} {name}: {exc}"
                return report
        changes = compare(sides[0], sides[1])
    report.package = package_to_dict(sides[1].package)
    report.findings = [to_finding(c) for c in changes]
    report.stages = [
        StageResult(
            STAGE,
            StageStatus.PASSED,
            duration_s=time.monotonic() - started,
            detail=_summary(changes, sides[0], sides[1]),
        )
    ]
    return report


def diff_against(
    old: str | os.PathLike[str], new: OpenPackage, models: tuple[str, ...] | None = None
) -> tuple[StageResult, list[Finding]]:
    """`check NEW --against OLD`'s release diff: OLD -> NEW's changes as findings (of the
    models named in `models`, and the package-wide ones; None: all) and the `diff` stage that
    found them, reading NEW through the archive `check` holds open (never opened twice). No
    findings, and the stage an ERROR whose detail is one line, when OLD cannot be read; SKIPPED
    when OLD is NEW's file (nothing changes)."""
    started = time.monotonic()
    old_name = os.fspath(old)
    try:
        _refuse_same_file(old_name, new.info.path)
    except UsageError as exc:
        return StageResult(STAGE, StageStatus.SKIPPED, time.monotonic() - started, str(exc)), []
    try:
        opened = open_package(old_name, verify_crc=False)  # see weight_digests
        with opened.archive:
            old_side = _side(opened)
    except PackageError as exc:
        why = str(exc) if str(exc).startswith(old_name) else f"{old_name}: {exc}"
        failed = StageResult(STAGE, StageStatus.ERROR, time.monotonic() - started, f"OLD {why}")
        return failed, []
    new_side = _side(new)
    changes = [
        c for c in compare(old_side, new_side) if models is None or c.model in (None, *models)
    ]
    stage = StageResult(
        STAGE,
        StageStatus.PASSED,
        duration_s=time.monotonic() - started,
        detail=_summary(changes, old_side, new_side),
    )
    return stage, [to_finding(c) for c in changes]


def _version() -> str:
    from aotipre import __version__

    return __version__


def _refuse_same_file(old: str, new: str) -> None:
    a, b = safeio.probe(old), safeio.probe(new)
    if a is None or b is None:
        return  # the reader says what is wrong with a path that cannot be probed
    if (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino):
        same = "the same path twice" if old == new else f"{old} and {new} are links to one file"
        raise UsageError(
            f"OLD and NEW are one file ({same}): there is nothing to compare",
            hint="pass the package in production as OLD and the candidate as NEW",
        )


def _side(opened: OpenPackage) -> SideView:
    """The package and, per model, the custom ops it calls and its weights' digests."""
    package, archive = opened.info, opened.archive
    extras = {
        m.name: ModelExtras(
            custom_ops=tuple(
                sorted(
                    op.qualified + (" (python)" if op.python else "")
                    for op in archive_custom_ops(
                        archive, package.root, m.name, m.has_exported_program
                    )
                )
            ),
            weight_digests=weight_digests(archive, package, m.name),
        )
        for m in package.models
    }
    return SideView(package, extras)


def weight_digests(
    archive: Archive, package: PackageInfo, model: str
) -> dict[str, tuple[int, int]]:
    """fqn -> (bytes, CRC-32) of each weight the model's weights config stores as its own
    member (`data/weights/<model>_weights_config.json`: the ExportedProgram's weights). The
    CRC-32 is the one the zip's writer recorded for the member's bytes: free to read, where
    streaming every weight again costs 0.23 s per 100 MB (more than the static lane's budget);
    two different tensors share one with odds of 2**-32. Whether the bytes match it is
    `aotipre check`'s concern (a member that does not: AOT008, member-corrupt); a member the
    reader already found corrupt is left out."""
    config = f"{package.root}/{layout.WEIGHTS_DIR}/{model}_weights_config.json"
    if config not in archive.members:
        return {}
    data = archive.read(config)
    if data.count(b"{") + data.count(b"[") > MAX_JSON_CONTAINERS:
        return {}
    try:
        entries = json.loads(data).get("config")
    except (ValueError, RecursionError, AttributeError):
        return {}
    if not isinstance(entries, dict):
        return {}
    corrupt = set(package.corrupt_members)
    out: dict[str, tuple[int, int]] = {}
    for fqn, meta in entries.items():
        path = meta.get("path_name") if isinstance(meta, dict) else None
        if not isinstance(path, str):
            continue
        member = archive.members.get(f"{package.root}/{layout.WEIGHTS_DIR}/{path}")
        if member is not None and member.name not in corrupt:
            out[str(fqn)] = (member.size, member.crc)
    return out


def to_finding(change: Change) -> Finding:
    """A change as a finding of its rule's family code: error when breaking, info when
    compatible; the message starts with the rule id."""
    code = next(
        c
        for c in ("AOT095", "AOT096", "AOT190", "AOT191", "AOT290", "AOT390", "AOT490")
        if c == change.rule.code
    )
    severity = Severity.ERROR if change.rule.breaking else Severity.INFO
    return codes.get(code).finding(
        f"{change.rule.id}: {change.message}",
        hint=None if change.rule.breaking else COMPATIBLE_HINT,
        severity=severity,
        model=change.model,
        input=change.input,
        dim=change.dim,
        expected=change.old,
        actual=change.new,
        stage=STAGE,
    )


def _summary(changes: list[Change], old: SideView, new: SideView) -> str:
    breaking = sum(1 for c in changes if c.rule.breaking)
    parts = [
        f"against OLD {old.package.path}: {breaking} breaking, {len(changes) - breaking} compatible"
    ]
    common = sorted({m.name for m in old.package.models} & {m.name for m in new.package.models})
    unseen = [m for m in common if not values_compared(old.extra(m), new.extra(m))]
    if unseen:
        parts.append(
            "weight values not compared for "
            + ", ".join(unseen)
            + " (weights compiled into the .so, not stored as members)"
        )
    return "; ".join(parts)
