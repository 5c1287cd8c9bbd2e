"""The perf stage: what a deployment pays. The load and run steps are timed part by part where
they happen anyway (their `measure` flag), then the model is called `runs` more times (the
`latency` step); runner/perf.py turns the numbers into a record and judges it (advice on the
CPU-ISA probe and the extraction, leaks, budgets). With `against`, a baseline package is
measured the same way, with the same inputs, in a nested session after this one, and what is
worse beyond the tolerance fails the gate."""

from __future__ import annotations

import os
import time
from dataclasses import replace
from typing import Any

from aotipre.diff import behaviour
from aotipre.findings import Severity, StageResult, StageStatus
from aotipre.foundation.errors import AotipreError
from aotipre.foundation.safeio import require_file
from aotipre.pt2.archive import Archive
from aotipre.pt2.spec import PackageInfo
from aotipre.runner import loadcost, perf
from aotipre.runner.stages.base import PlannedStep, ok
from aotipre.runner.stages.session import Session, Stage


class PerfStage(Stage):
    name = "perf"

    def __init__(self, paired: dict[str, Any] | None = None) -> None:
        self.record: perf.PerfRecord | None = None
        self.baseline: perf.PerfRecord | None = None
        self.paired = paired
        """An --against side's worker: the other package (`package`, `model`), whose calls
        the latency step interleaves with this model's (worker.perf.paired_latency)."""
        self.latency: dict[str, Any] = {}
        """The latency step's measurements (its samples, and `paired` ones when asked)."""
        self.direct = False
        """The load went through the C++ loader alone (the host's record allowed it)."""
        self.outputs_compared: dict[str, Any] | None = None
        """An --against baseline's worker: its comparison of the checked package's outputs with
        the baseline's on the same inputs (the compare step's record), when it made one."""

    def progress(self, s: Session, op: str, rest: str) -> str | None:
        if op != "latency" or s.opts.perf is None:
            return None
        return f"timing {s.opts.perf.runs} calls"

    def plan(self, s: Session) -> list[PlannedStep]:
        o = s.opts.perf
        if o is None:
            return []
        body: dict[str, Any] = {
            "runs": o.runs,
            "warmup": o.warmup,
            "budget_s": o.budget_s,
            "requires": ["run"],
        }
        if self.paired is not None:
            body["paired"] = self.paired
        return [PlannedStep("latency", "latency", body)]

    def result(self, s: Session) -> StageResult:
        o = s.opts.perf
        if o is None:
            return s.skipped("perf", "turned off (--no-perf)")
        load, run, lat = (s.records.get(k) for k in ("load", "run", "latency"))
        if load is None or not ok(load):
            return s.skipped("perf", s.upstream_reason())
        if "perf" not in load.entry:
            return s.skipped("perf", "the worker took no measurements")
        self.record = perf.record_from_worker(
            s.model.name,
            s.device,
            _load_perf(s, load.entry),
            run.entry.get("perf") if run is not None and ok(run) else None,
            lat.entry.get("perf") if lat is not None and ok(lat) else None,
            package=os.path.abspath(s.aoti_package or s.package.path),
        )
        if lat is not None and ok(lat) and isinstance(lat.entry.get("perf"), dict):
            self.latency = lat.entry["perf"]
        self.direct = bool((load.entry.get("perf") or {}).get("direct"))
        before = len(s.findings)
        judged = (
            perf.advice_judgements(self.record)
            + perf.leak_judgements(self.record)
            + perf.budget_judgements(self.record, o.budgets)
        )
        judged = _compiled_at_load(s, self.record, judged)
        for code, message, fields in judged:
            s.add(code, message, "perf", **fields)
        if o.against:
            self._against(s, o.against, o.tolerance)
        if s.on_perf is not None:
            s.on_perf(self.record, self.baseline)
        worst = max((f.severity.rank for f in s.findings[before:]), default=-1)
        status = StageStatus.FAILED if worst >= Severity.WARNING.rank else StageStatus.PASSED
        aoti = s.model.aoti
        compiles = aoti is not None and aoti.compiled_at_load and s.aoti_model == s.model.name
        detail = perf.summary(self.record, compiles_at_load=compiles)
        if self.record.notes:
            detail += f" ({'; '.join(self.record.notes)})"
        if self.baseline is not None:
            detail += f"; against: {perf.summary(self.baseline)}"
        recs = [r for r in (lat,) if r is not None]
        return s.stage("perf", status, detail, recs)

    def _against(self, s: Session, path: str, tolerance: float) -> None:
        """Measure the baseline in fresh workers, by the route this package was loaded by, its
        calls interleaved with this package's; while a measure is inconclusive, measure both
        sides again, alternately, up to AGAINST_ROUNDS each or AGAINST_BUDGET_S; then judge
        (runner/perf.py `against_judgements`)."""
        assert self.record is not None
        started = time.monotonic()
        precision = max(0.01, tolerance / 4.0)
        paired = {
            "package": os.path.abspath(s.aoti_package or s.package.path),
            "model": s.aoti_model,
            "precision": precision,
        }
        if s.opts.perf is not None:
            paired.update(runs=s.opts.perf.runs, budget_s=s.opts.perf.budget_s)
        try:
            baseline = measure_baseline(
                s, path, direct=self.direct, paired=paired, compare_outputs=True
            )
        except (AotipreError, OSError) as exc:
            s.add("AOT654", f"the baseline package {path} could not be measured: {exc}", "perf")
            return
        if baseline is None:
            return
        self.baseline = baseline.record
        if baseline.outputs_compared is not None:
            for message, fields in behaviour.outputs_changed(
                baseline.outputs_compared, s.model.name, path
            ):
                s.add(behaviour.CODE, message, "perf", **fields)
        new: list[PerfStage] = [self]
        if baseline.direct != self.direct or not _fresh(self.record):
            # measured by another route (or not in a fresh worker): this package again, the
            # way the baseline was
            again = measure_again(s, direct=baseline.direct)
            if again is None:
                return
            new = [again]
        old = [baseline]
        while (
            perf.undecided(_side(new, old, "a_ms"), _side(old, old, "b_ms"), tolerance)
            and len(old) < AGAINST_ROUNDS
            # the budget ends rounds only once each side has the samples a verdict needs: a
            # slow package must not turn a real regression into "inconclusive"
            and (len(old) < perf.MIN_SAMPLES or time.monotonic() - started < AGAINST_BUDGET_S)
        ):
            again = measure_again(s, direct=baseline.direct)
            more = measure_baseline(s, path, direct=baseline.direct, paired=paired)
            if again is None or more is None:
                return
            new.append(again)
            old.append(more)
        judged = perf.against_judgements(
            _side(new, old, "a_ms"), _side(old, old, "b_ms"), tolerance
        )
        for code, message, fields in judged:
            s.add(code, message, "perf", **fields)


AGAINST_ROUNDS = 5
"""Fresh workers per side at most in an --against comparison (the first of the package's own
included when its route matches the baseline's)."""
AGAINST_BUDGET_S = 120.0
"""No further round starts after this many seconds of comparison, once each side has
perf.MIN_SAMPLES rounds."""


def _fresh(record: perf.PerfRecord) -> bool:
    return record.cold is not None and record.cold.fresh_process


def _side(stages: list[PerfStage], baselines: list[PerfStage], key: str) -> perf.Side:
    """One side's records, and its call latencies: the interleaved ones (`key` of the baseline
    workers' `paired` series: `a_ms` the package's, `b_ms` the baseline's); each side's own
    calls only when no baseline worker could interleave them."""
    records = tuple(st.record for st in stages if st.record is not None)
    interleaved = [st.latency.get("paired") for st in baselines]
    series = [p[key] for p in interleaved if isinstance(p, dict) and isinstance(p.get(key), list)]
    if series:
        return perf.Side(records, tuple(float(v) for one in series for v in one))
    own = [st.latency.get("samples_ms") for st in stages]
    return perf.Side(records, tuple(float(v) for one in own if isinstance(one, list) for v in one))


def _load_perf(s: Session, entry: dict[str, Any]) -> Any:
    """The load's timings; when its probe was answered from the host's record
    (runner/loadcost.py), with the probe's recorded cost in them: what a fresh process pays;
    a direct load (the C++ loader alone) with the loader's imports and the probe recorded, or
    measured by this check beside its first worker (runner/loadmeasure.py)."""
    timed = entry.get("perf")
    direct = isinstance(timed, dict) and bool(timed.get("direct"))
    # without the host's record: the check's own measurement, beside the first worker
    if direct and s.probe.measuring:
        s.say("perf: waiting for the measure of the loader's imports and the CPU-ISA probe")
    recorded = s.probe.await_measured() if direct else s.probe.recorded
    if direct and recorded is not None:
        return loadcost.with_recorded_load(timed, recorded)
    if direct:
        why = s.probe.unmeasured or "no measurement ran"
        return {**timed, "measure_error": f"the loader's imports and torch's CPU-ISA probe: {why}"}
    if (
        isinstance(timed, dict)
        and entry.get("vec_isa_pinned")
        and recorded is not None
        and entry.get("vec_isa") == list(recorded.vec_isa)
    ):
        return loadcost.with_recorded_probe(timed, recorded)
    return timed


def measure_baseline(
    s: Session,
    path: str,
    *,
    direct: bool = True,
    paired: dict[str, Any] | None = None,
    compare_outputs: bool = False,
) -> PerfStage | None:
    """Compile (if it must), load, run and time the baseline package with this session's
    inputs, in a nested session (its own workers and temp folder), by the C++ loader alone
    only when `direct` (the route the checked package took) and the host's record allow it,
    with `paired`'s package's calls interleaved with its own; its perf stage (record, latency,
    route), or None, with AOT654 added to `s`, when it could not be measured. The baseline is
    read first the way the checked package is (a regular file or an extracted folder, never a
    pipe that would block; the same reader and its pickle scan): one that holds members torch
    unpickles without restriction is not loaded without --allow-pickle. With `compare_outputs`,
    and inputs from a file or the archive (never synthesized ones, which need not be the same
    for both), its worker also compares the checked run's outputs with the baseline's after its
    run (the stage's `outputs_compared`). Read through Session.baseline (the check's open of
    it) when that is the package at `path`. Raises AotipreError when it cannot be read."""
    from aotipre.pt2.reader import read_package

    held = s.baseline
    if held is not None and os.path.abspath(held.info.path) == os.path.abspath(path):
        info, archive = held.info, held.archive  # the check's one open of it
    else:
        require_file(path, "it", folder_ok=True)
        info, archive = read_package(path), None
    if not s.opts.allow_pickle and _refuse_pickles(s, path, info):
        return None
    model = next((m for m in info.models if m.name == s.model.name), None)
    if model is None and len(info.models) == 1:
        model = info.models[0]
    if model is None:
        names = ", ".join(m.name for m in info.models) or "none"
        s.add(
            "AOT654",
            f"the baseline package {path} has no model '{s.model.name}' (it holds: {names})",
            "perf",
        )
        return None
    inputs_path = s.inputs_path
    if inputs_path is None and s.inputs.spec.get("kind") == "member":
        inputs_path = os.path.join(s.workdir, "against_inputs.pt")
        if not os.path.exists(inputs_path):
            with open(inputs_path, "wb") as f:
                f.write(s.archive.read(str(s.inputs.spec["member"])))
    new_outputs = os.path.join(s.workdir, "aoti_run.pt")
    compare = (
        new_outputs
        if compare_outputs and inputs_path is not None and os.path.exists(new_outputs)
        else None
    )
    stage = _measure_side(
        s, info, model, inputs_path, None, path, direct, paired, compare, archive=archive
    )
    if isinstance(stage, str):
        s.add("AOT654", f"the baseline package {path} could not be measured ({stage})", "perf")
        return None
    return stage


def measure_again(s: Session, *, direct: bool) -> PerfStage | None:
    """The checked package measured again in a fresh worker (a nested session, as the baseline
    is), by the C++ loader alone only when `direct`; None, with AOT654 added, when it failed."""
    path = s.aoti_package or s.package.path
    stage = _measure_side(
        s, s.package, s.model, s.inputs_path, s.inputs_member, path, direct, None, archive=s.archive
    )
    if isinstance(stage, str):
        s.add(
            "AOT654",
            f"the comparison with the baseline package was not finished: measuring "
            f"{os.path.basename(path)} again, the way the baseline was, failed ({stage})",
            "perf",
        )
        return None
    return stage


def _measure_side(
    s: Session,
    info: PackageInfo,
    model: Any,
    inputs_path: str | None,
    inputs_member: str | None,
    path: str,
    direct: bool,
    paired: dict[str, Any] | None,
    compare_with: str | None = None,
    *,
    archive: Archive | None = None,
) -> PerfStage | str:
    """One side of an --against comparison in a nested session: its perf stage, or why it
    could not be measured. `archive`: `info`'s package as the check opened it (the checked
    package's, or the --against package's), never opened again. `compare_with`: the checked run's saved outputs, which this side's
    worker compares with its own after its run (the perf stage's `outputs_compared`)."""
    from aotipre.runner.stages.compile import CompileStage
    from aotipre.runner.stages.load import LoadStage
    from aotipre.runner.stages.run import RunStage

    stage = PerfStage(paired)
    compared = _OutputsCompared(compare_with) if compare_with is not None else None
    opts = replace(
        s.opts,
        probe=False,
        device=s.device,
        perf=replace(s.opts.perf, against=None) if s.opts.perf is not None else None,
    )
    outer = s.progress
    nested = Session(
        [CompileStage(), LoadStage(), RunStage(), stage, *([compared] if compared else [])],
        info,
        model,
        inputs_path,
        inputs_member,
        opts,
        None if outer is None else lambda text: outer(f"against {os.path.basename(path)}: {text}"),
        archive=archive,
    )
    nested.direct_load = direct
    try:
        results, findings = nested.execute()
    finally:
        nested.cleanup()
    # a side that loads but cannot run these inputs leaves a record without latencies:
    # nothing to compare, which must not read as "no regression". Its run must pass (a load
    # that needed the libstdc++ preload, AOT515, still measures; its own budgets do not count)
    ran = any(r.name == "run" and r.status is StageStatus.PASSED for r in results)
    if stage.record is None or not ran:
        failed = next(
            (r for r in results if r.name != "perf" and r.status is not StageStatus.PASSED
             and r.status is not StageStatus.SKIPPED),
            next((r for r in results if r.name == "run"), None),
        )  # fmt: skip
        return f"{failed.name}: {failed.detail}" if failed is not None else "nothing measured"
    if compared is not None:
        stage.outputs_compared = compared.entry
    return stage


class _OutputsCompared(Stage):
    """In the worker that runs an --against baseline: the checked package's outputs (`new`,
    the file its run saved) compared with the baseline's on the same inputs, after the
    baseline's run, with the tolerances of their dtypes (the compare op)."""

    name = "against-outputs"
    labels = {"against-outputs": "comparing the outputs with the checked package's"}

    def __init__(self, new: str) -> None:
        self.new = new
        self.entry: dict[str, Any] | None = None
        """The compare step's record (None: it did not run, or failed)."""

    def plan(self, s: Session) -> list[PlannedStep]:
        body = {"a": self.new, "b": "aoti_run.pt", "requires": ["run"]}
        return [PlannedStep(self.name, "compare", body)]

    def result(self, s: Session) -> StageResult:
        rec = s.records.get(self.name)
        if rec is None:
            return s.skipped(self.name, s.upstream_reason())
        if not ok(rec):
            return s.stage(self.name, StageStatus.ERROR, rec.detail, [rec])
        self.entry = rec.entry
        return s.stage(self.name, StageStatus.PASSED, "outputs compared", [rec])


def _refuse_pickles(s: Session, path: str, info: PackageInfo) -> bool:
    """AOT654 when the baseline holds members that loading it unpickles without restriction
    (the reader's scan, as AOT081 for the checked package): it is not loaded."""
    from aotipre.pt2.reader import FALLBACK, pickle_members

    items = pickle_members(info)
    if not items:
        return False
    shown = "; ".join(
        f"{i.member.split('/', 1)[-1]} ({i.kind}: "
        + ("a weights-only load refuses it, then weights_only=False" if i.loader == FALLBACK
           else i.loader)
        + ")"
        for i in items[:4]
    )  # fmt: skip
    more = f"; and {len(items) - 4} more" if len(items) > 4 else ""
    s.add(
        "AOT654",
        f"the baseline package {path} was not loaded: loading it unpickles {len(items)} "
        f"member(s) without restriction ({shown}{more}), which runs any code a pickle names; "
        "re-export it without pickled members, or pass --allow-pickle if you trust it",
        "perf",
        actual=[i.member for i in items],
    )
    return True


def _compiled_at_load(s: Session, record: Any, judged: list[Any]) -> list[Any]:
    """A package_cpp_only package (AOT032) runs g++ inside every cold load, which the timing
    books as extraction: say what the compile costs instead of advising a pre-extracted folder
    (which compiles just the same)."""
    aoti = s.model.aoti
    cold = getattr(record, "cold", None)
    if aoti is None or not aoti.compiled_at_load or s.aoti_model != s.model.name or cold is None:
        return judged
    load_s = getattr(cold, "load_s", None)
    if load_s is None:
        return judged
    kept = [j for j in judged if j[0] != "AOT641"]
    kept.append(
        (
            "AOT644",
            f"every cold start compiles the package's C++ sources (package_cpp_only): the load "
            f"took {load_s:.2f} s here, g++ included, and needs a C++ toolchain and the torch "
            "headers on the deployment host",
            {"actual": round(load_s, 3)},
        )
    )
    return kept
