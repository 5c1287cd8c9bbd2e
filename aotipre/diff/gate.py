"""diff_packages(): OLD and NEW .pt2 paths -> one Report whose findings are the changes, each
breaking (error) or compatible (info), read without torch: each archive opened once."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from contextlib import ExitStack
from typing import TYPE_CHECKING

from aotipre.diff.compare import Change, ModelExtras, SideView, compare
from aotipre.diff.rules import rule
from aotipre.findings import Finding, Report, Severity, StageResult, StageStatus, codes
from aotipre.foundation import safeio
from aotipre.foundation.errors import InputsError, PackageError, UsageError
from aotipre.pt2 import layout
from aotipre.pt2.archive import Archive
from aotipre.pt2.ops import archive_custom_ops
from aotipre.pt2.reader import MAX_JSON_CONTAINERS, OpenPackage, open_package
from aotipre.pt2.spec import ModelInfo, PackageInfo, package_to_dict

if TYPE_CHECKING:  # the runner and the serving checks are imported only when asked for
    from aotipre.inputs.meta import SampleInputs
    from aotipre.runner.stages import DynamicOptions
    from aotipre.serving.triton import ServingConfig

FAIL_ON: dict[str, Severity] = {"breaking": Severity.ERROR, "any": Severity.INFO}
"""`--fail-on` -> the lowest severity that fails the gate: a breaking change is an error, a
compatible one info."""

STAGE = "diff"
COMPATIBLE_HINT = "compatible: OLD's callers run with NEW as they ran with OLD (docs/diff.md)"
"""The hint of a compatible change (a code's own hint says what to do about a breaking one)."""


def diff_packages(
    old: str | os.PathLike[str],
    new: str | os.PathLike[str],
    *,
    fail_on: str = "breaking",
    inputs: str | os.PathLike[str] | None = None,
    dynamic: DynamicOptions | None = None,
    serving_config: ServingConfig | None = None,
    progress: Callable[[str], None] | None = None,
) -> Report:
    """The release diff of OLD -> NEW as a Report (exit code by `fail_on`). A side that cannot
    be read gives a Report with `error` set (exit 2), never a clean one. UsageError (one line)
    when OLD and NEW are one file (the same path twice, or two links to it).

    `serving_config`: a Triton config OLD is served with; what its checks (those of `check
    --serving-config`) refuse in NEW and did not in OLD is breaking (serving_changes).
    `inputs`: OLD's caller's inputs (a torch.save file); NEW and OLD run on them in torch
    workers, the way `check NEW --against OLD` runs them (same_inputs), with `dynamic`'s
    options (None: their defaults) and `progress` told each stage's start and end."""
    old_name, new_name = os.fspath(old), os.fspath(new)
    threshold = FAIL_ON.get(fail_on)
    if threshold is None:
        raise UsageError(f"--fail-on {fail_on!r}: use breaking or any")
    _refuse_same_file(old_name, new_name)
    report = Report(
        package_path=f"{old_name} -> {new_name}", fail_on=threshold, tool_version=_version()
    )
    sample = None
    if inputs is not None:
        from aotipre.inputs.load import load_sample_inputs

        try:  # read as `check` reads them: torch-free, refusing what a weights-only load does
            sample = load_sample_inputs(inputs)
        except InputsError as exc:
            named = str(exc).startswith(os.fspath(inputs))
            report.error = f"--inputs {exc}" if named else f"--inputs {os.fspath(inputs)}: {exc}"
            return report
        report.inputs_source = os.fspath(inputs)
    started = time.monotonic()
    with ExitStack() as stack:
        sides: list[SideView] = []
        opened_sides: list[OpenPackage] = []
        for label, name in (("OLD", old_name), ("NEW", new_name)):
            try:
                opened = open_package(name, verify_crc=False)  # see weight_digests
            except PackageError as exc:
                report.error = (
                    f"{label} {exc}" if str(exc).startswith(name) else f"{label} {name}: {exc}"
                )
                return report
            stack.enter_context(opened.archive)
            opened_sides.append(opened)
            try:
                sides.append(_side(opened))
            except PackageError as exc:
                report.error = f"{label} {name}: {exc}"
                return report
        changes = compare(sides[0], sides[1])
        if serving_config is not None:
            changes += serving_changes(serving_config, opened_sides[0], opened_sides[1])
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
        if sample is not None and inputs is not None:
            same_inputs(
                report, sides[0].package, opened_sides[1], os.fspath(inputs), sample, dynamic,
                progress,
            )  # fmt: skip
    return report


def serving_changes(serving: ServingConfig, old: OpenPackage, new: OpenPackage) -> list[Change]:
    """The serving config's refusals that changed: each error the checks of `check
    --serving-config` (serving/triton.py check_config) find in NEW and not in OLD, keyed by
    code, model, input and dim, is SERVING_CONFIG_REFUSES_NEW (breaking: the server that loads
    OLD refuses NEW); each one OLD had and NEW has not, SERVING_CONFIG_ACCEPTS_NEW."""
    from aotipre.serving.triton import check_config

    def refusals(side: OpenPackage) -> dict[tuple[object, ...], Finding]:
        found = check_config(serving, side.info, list(side.info.models), side.archive)
        return {(f.code, f.model, f.input, f.dim): f for f in found if f.severity is Severity.ERROR}

    before, after = refusals(old), refusals(new)
    out = [
        Change(
            rule("SERVING_CONFIG_REFUSES_NEW"),
            f.model,
            f"{serving.source} accepts OLD and refuses NEW ({f.code}: {f.message})",
            old=None,
            new=f.code,
            input=f.input,
            dim=f.dim,
        )
        for key, f in after.items()
        if key not in before
    ]
    out += [
        Change(
            rule("SERVING_CONFIG_ACCEPTS_NEW"),
            f.model,
            f"{serving.source} refused OLD ({f.code}: {f.message}) and accepts NEW there",
            old=f.code,
            new=None,
            input=f.input,
            dim=f.dim,
        )
        for key, f in before.items()
        if key not in after
    ]
    return out


def same_inputs(
    report: Report,
    old: PackageInfo,
    new: OpenPackage,
    inputs: str,
    sample: SampleInputs,
    dynamic: DynamicOptions | None,
    progress: Callable[[str], None] | None,
) -> None:
    """Behaviour on the same inputs, added to `report`: NEW's model run on `inputs` in torch
    workers (the SAME_INPUTS stages), then OLD's by the perf stage's --against path, which
    compares NEW's saved outputs with OLD's in OLD's worker (AOT790, diff/behaviour.py) and
    times both, interleaved (AOT650-AOT655) — what `check NEW --against OLD` runs. The model is
    the one both packages hold (by name, or each one's only model); with none or several, or
    no torch for the workers, the report cannot check (`error`, exit 2)."""
    from dataclasses import replace

    from aotipre.environment.runtimes import probe
    from aotipre.runner.stages import SAME_INPUTS, DynamicOptions, PerfOptions, run_dynamic_stages

    options = dynamic or DynamicOptions()
    if options.worker_command is None:
        try:
            probe(options.python)
        except UsageError as exc:
            report.error = str(exc)
            return
    model = _common_model(old, new.info)
    if isinstance(model, str):
        report.error = model
        return
    perf = replace(options.perf or PerfOptions(), against=old.path)
    stages, findings = run_dynamic_stages(
        new.info,
        model,
        inputs,
        None,
        replace(options, perf=perf, probe=False),
        progress,
        on_perf=lambda rec, base: report.performance.append((rec, base)),
        archive=new.archive,
        sample=sample,
        pipeline=SAME_INPUTS,
    )
    report.stages.extend(stages)
    report.findings.extend(f for f in findings if f.stage != "perf" or f.code in SAME_INPUTS_CODES)


SAME_INPUTS_CODES = frozenset(
    {"AOT650", "AOT651", "AOT652", "AOT653", "AOT654", "AOT655", "AOT790"}
)
"""The perf stage's findings that compare NEW with OLD (regressions, a comparison that could
not be made or decided, other outputs); its advice, budgets and leaks judge NEW alone, which is
`check`'s concern, not a change."""


def _common_model(old: PackageInfo, new: PackageInfo) -> ModelInfo | str:
    """NEW's model that OLD holds too (by name; else each package's only model), or why there
    is no one model to run the inputs through (one line)."""
    names = [m.name for m in old.models]
    common = [m for m in new.models if m.name in names]
    if not common and len(names) == 1 and len(new.models) == 1:
        common = list(new.models)
    if len(common) == 1:
        return common[0]
    held = ", ".join(m.name for m in common) or "none"
    return (
        f"--inputs: the behaviour on the same inputs runs one model that OLD and NEW both hold; "
        f"they have {len(common)} in common ({held})"
    )


def diff_against(
    old: str | os.PathLike[str],
    new: OpenPackage,
    models: tuple[str, ...] | None = None,
    *,
    old_opened: OpenPackage | None = None,
) -> tuple[StageResult, list[Finding]]:
    """`check NEW --against OLD`'s release diff: OLD -> NEW's changes as findings (of the
    models named in `models`, and the package-wide ones; None: all) and the `diff` stage that
    found them, reading NEW through the archive `check` holds open, and OLD through
    `old_opened` when `check` opened it (else it is opened here): neither is opened twice. No
    findings, and the stage an ERROR whose detail is one line, when OLD cannot be read; SKIPPED
    when OLD is NEW's file (nothing changes)."""
    started = time.monotonic()
    old_name = os.fspath(old)
    try:
        _refuse_same_file(old_name, new.info.path)
    except UsageError as exc:
        return StageResult(STAGE, StageStatus.SKIPPED, time.monotonic() - started, str(exc)), []
    try:
        if old_opened is not None:
            old_side = _side(old_opened)
        else:
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
    extras = {}
    for m in package.models:
        ops = archive_custom_ops(archive, package.root, m.name, m.has_exported_program)
        custom_ops = tuple(sorted(op.qualified + (" (python)" if op.python else "") for op in ops))
        digests, source, unread = weight_digests(archive, package, m.name), "member", None
        if not digests and m.aoti is not None and m.constants:
            from aotipre.binaries.constants_blob import compiled_weight_digests

            compiled = compiled_weight_digests(archive, m)
            if isinstance(compiled, str):
                unread = compiled
            else:
                digests, source = compiled, "compiled"
        extras[m.name] = ModelExtras(
            custom_ops=custom_ops,
            weight_digests=digests,
            weights_source=source,
            weights_unread=unread,
        )
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
    return "; ".join(parts)
