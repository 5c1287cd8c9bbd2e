"""The state stage: a model that mutates buffers in forward (a step counter, running
statistics, a cache updated in place) is called several times in one fresh copy, and each
call's outputs and buffers are compared with the ExportedProgram's own sequence of calls.

One call compared with eager does not show state that the compiled code drops (torch #185077:
an int64 counter's update folded at compile time returned 2, 3, 4 where eager returns 2, 4, 6).
Without an ExportedProgram there is no eager sequence, but the symptom shows in the buffers: one
that the compiled code writes and that holds the same bytes after every call with the same inputs
(the folded counter: 1, 1, 1) is a warning (AOT707). Models that mutate nothing plan no step and
pay nothing."""

from __future__ import annotations

import os
from typing import Any

from aotipre.findings import Severity, StageResult, StageStatus
from aotipre.pt2.reader import read_package
from aotipre.runner.classify import classify_run_failure
from aotipre.runner.stages.base import PlannedStep, failure_of, ok
from aotipre.runner.stages.compare import mismatch_text
from aotipre.runner.stages.session import Session, Stage


class StateStage(Stage):
    name = "state"
    labels = {"state": "calling the model {calls} times in one copy (state across calls)"}

    def __init__(self) -> None:
        self.buffers: tuple[str, ...] = ()

    def progress(self, session: Session, op: str, rest: str) -> str | None:
        if op != "state":
            return None
        return self.labels["state"].format(calls=session.opts.state_calls)

    def plan(self, s: Session) -> list[PlannedStep]:
        self.buffers = mutated_buffers(s)
        if not self.buffers or s.opts.state_calls < 2:
            return []
        body = {
            "calls": s.opts.state_calls,
            "buffers": list(self.buffers),
            "reference": s.reference.path is not None,
            "requires": ["run"],
        }
        return [PlannedStep("state", "state", body)]

    def result(self, s: Session) -> StageResult:
        if not self.buffers:
            return s.skipped("state", "the model mutates no buffer: no state across calls")
        if s.opts.state_calls < 2:
            return s.skipped("state", f"off (state_calls = {s.opts.state_calls})")
        r = s.records.get("state")
        if r is None or r.status == "skipped":
            return s.skipped("state", s.upstream_reason())
        shown = ", ".join(self.buffers)
        if not ok(r):
            if r.status == "worker_error":
                return s.stage("state", StageStatus.ERROR, f"worker failed: {r.detail}", [r])
            fail = failure_of(classify_run_failure, r)
            where = r.entry.get("phase") or "the state step"
            s.add(
                "AOT706",
                f"calling a fresh copy of the model again with the same inputs failed at "
                f"{where} (it mutates {shown}): {fail.summary}",
                "state",
                evidence=fail.evidence,
            )
            return s.stage("state", StageStatus.FAILED, f"{where}: {fail.summary}", [r])
        calls = r.entry.get("calls") or []
        n = len(calls)
        if not any("compare" in c for c in calls):
            stuck = _unchanged_buffers(calls)
            seen = (
                f"model '{s.model.name}' mutates {shown}; {n} calls of one copy with the same "
                f"inputs: {_sequence(calls, r.entry)}"
            )
            if stuck:
                named = ", ".join(f"'{b}'" for b in stuck)
                s.add(
                    "AOT707",
                    f"{seen}; the compiled code writes {named} but {_held(stuck)} the same value "
                    f"after every call: a counter or running statistic whose update the "
                    f"compiled code dropped or folded (torch #185077) looks like this, though so "
                    f"does a buffer overwritten from the inputs alone (a cache of the last "
                    f"input); no ExportedProgram to tell ({s.reference.label})",
                    "state",
                    severity=Severity.WARNING,
                    input=stuck[0],
                    actual=[_call_values(c) for c in calls],
                )
                return s.stage(
                    "state",
                    StageStatus.PASSED,
                    f"{n} calls, not compared: the same value of {named} after every call "
                    f"(AOT707, a warning); {s.reference.label}",
                    [r],
                )
            s.add(
                "AOT707",
                f"{seen}; no ExportedProgram to tell whether eager returns the same sequence "
                f"({s.reference.label})",
                "state",
                actual=[_call_values(c) for c in calls],
            )
            return s.stage(
                "state", StageStatus.PASSED, f"{n} calls, not compared: {s.reference.label}", [r]
            )
        diverged = _first_divergence(calls)
        if diverged is None:
            return s.stage(
                "state",
                StageStatus.PASSED,
                f"{n} calls in one copy match {s.reference.label} run eagerly call by call "
                f"(outputs and the buffers {shown})",
                [r],
            )
        call, outputs, buffers = diverged
        mine, theirs = _call_values(calls[call - 1]), _call_values(calls[call - 1], eager=True)
        parts = [
            f"buffer '{name}' after call {call}: compiled {mine.get(name)}, eager "
            f"{theirs.get(name)}"
            for name, _ in buffers
        ]
        for o in outputs:
            parts.append(f"output {o.get('index')}: {mismatch_text(o, 'eager')}")
        s.add(
            "AOT706",
            f"the compiled model does not carry its state across calls as the ExportedProgram "
            f"does: {n} calls of one copy with the same inputs first differ at call {call} "
            f"(it mutates {shown}): {'; '.join(parts)}",
            "state",
            input=buffers[0][0] if buffers else None,
            expected=[_call_values(c, eager=True) for c in calls],
            actual=[_call_values(c) for c in calls],
        )
        return s.stage(
            "state",
            StageStatus.FAILED,
            f"{n} calls in one copy: call {call} differs from {s.reference.label} run eagerly",
            [r],
        )


def mutated_buffers(s: Session) -> tuple[str, ...]:
    """The buffers the model (or its --exported-program reference) mutates."""
    names = list(s.model.mutated_buffers)
    ref = s.reference
    same = ref.path is not None and os.path.abspath(ref.path) == os.path.abspath(s.package.path)
    if ref.path is not None and ref.model is not None and not same:
        try:
            other = read_package(ref.path).model(ref.model)
        except Exception:  # the compare stage reports an unreadable reference
            other = None
        if other is not None:
            names += other.mutated_buffers
    return tuple(dict.fromkeys(names))


def _unchanged_buffers(calls: list[dict[str, Any]]) -> list[str]:
    """The buffers whose bytes every call after the first left as the call before did (the
    worker's `buffers_unchanged`); none with fewer than two calls or unreadable buffers."""
    later = calls[1:]
    if not later or any(not isinstance(c.get("buffers_unchanged"), list) for c in later):
        return []
    names = [str(b) for b in (calls[0].get("buffers") or {})]
    return [b for b in names if all(b in c["buffers_unchanged"] for c in later)]


def _held(names: list[str]) -> str:
    return "it holds" if len(names) == 1 else "they hold"


def _first_divergence(
    calls: list[dict[str, Any]],
) -> tuple[int, list[dict[str, Any]], list[tuple[str, dict[str, Any]]]] | None:
    """(call number, differing outputs, differing buffers) of the first call that differs."""
    for c in calls:
        cmp = c.get("compare") or {}
        outputs = [
            o
            for o in cmp.get("outputs") or []
            if o.get("structure") or int(o.get("mismatches") or 0) or o.get("equal") is False
        ]
        buffers = [
            (name, b)
            for name, b in (c.get("buffers_compare") or {}).items()
            if b.get("structure") or int(b.get("mismatches") or 0)
        ]
        if cmp.get("structure") or outputs or buffers:
            return int(c.get("call") or 0), outputs, buffers
    return None


def _sequence(calls: list[dict[str, Any]], entry: dict[str, Any]) -> str:
    """What the calls returned, in words, and the buffers' values after each call."""
    firsts = [tuple(o.get("first") or ()) for c in calls for o in (c.get("outputs") or [])[:1]]
    same = len(set(firsts)) <= 1
    text = "the first output " + (
        "is the same at every call" if same else "changes from call to call"
    )
    values: dict[str, list[str]] = {}
    for c in calls:
        for name, b in (c.get("buffers") or {}).items():
            values.setdefault(name, []).append(_values(b))
    if values:
        text += "; buffers after each call: " + "; ".join(
            f"{name} {', '.join(v)}" for name, v in values.items()
        )
    elif entry.get("buffers_unreadable"):
        text += f" (its buffers could not be read: {entry['buffers_unreadable']})"
    return text


def _call_values(c: dict[str, Any], *, eager: bool = False) -> dict[str, Any]:
    key = "eager_buffers" if eager else "buffers"
    return {name: _values(b) for name, b in (c.get(key) or {}).items()}


def _values(b: dict[str, Any]) -> str:
    first = b.get("first")
    if not first:
        return f"{b.get('dtype')}{b.get('shape')}"
    more = "" if len(first) >= int(b.get("numel") or 0) else ", ..."
    shown = ", ".join(_num(v) for v in first)
    return shown if b.get("shape") == [] else f"[{shown}{more}]"


def _num(v: Any) -> str:
    return f"{v:.6g}" if isinstance(v, float) else str(v)
