"""Accuracy triage's repro and its cheap proofs: cut the divergent kernel's FX nodes out of the
ExportedProgram, verify that the cut differs from eager when compiled alone (grown by its
inputs' producers until it does), run the cause ladder's knobs on that repro instead of the
whole program, keep the repro in --artifacts, and time the cause's rebuild against the deployed
package (worker steps of aotipre/runner/worker/subgraph.py)."""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from aotipre.runner.stages.mismatch import OutputMismatch
from aotipre.triage.accuracy_diagnosis import KnobTrial, Latency, Repro, opt_float

GROW = 2
"""Times a cut that does not differ alone is grown by its inputs' producers."""
LATENCY_RUNS = 20
"""Timed calls of each package for the latency cost (after 3 warm-up calls each)."""
LATENCY_BUDGET_S = 60.0


class TriageJobs(Protocol):
    """What these steps need of one model's accuracy triage (accuracy._Triage)."""

    case: OutputMismatch
    workdir: str

    def job(self, name: str, steps: list[dict[str, Any]]) -> tuple[dict[str, Any], str]: ...

    def left_s(self) -> float: ...


class KnobLike(Protocol):
    """A rung of the cause ladder (accuracy.Knob)."""

    @property
    def id(self) -> str: ...

    @property
    def configs(self) -> Mapping[str, Any]: ...

    @property
    def cause(self) -> str: ...


def repro_and_trials(
    triage: TriageJobs, nodes: Sequence[str], knobs: Sequence[KnobLike]
) -> tuple[Repro, list[KnobTrial], str | None]:
    """One worker: cut and verify the repro of the kernel fusing `nodes`, then rebuild it with
    each knob in order until one matches eager. (the repro, the trials on it, the folder it was
    written to in the triage's scratch folder, or None when none was verified)."""
    case = triage.case
    folder = os.path.join(triage.workdir, "repro")
    opts = case.options
    compile_s = min(opts.compile_timeout_s, max(1.0, triage.left_s()))
    steps: list[dict[str, Any]] = [
        {
            "id": "repro",
            "op": "accuracy_repro",
            "nodes": list(nodes),
            "out": folder,
            "scratch": os.path.join(triage.workdir, "repro-scratch"),
            "inductor_configs": dict(case.compiled_with),
            "grow": GROW,
            "timeout_s": compile_s * (GROW + 1) + opts.timeout_s,
        }
    ]
    for knob in knobs:
        steps.append(
            {
                "id": f"trial:{knob.id}",
                "op": "accuracy_repro_trial",
                "repro": folder,
                "out": os.path.join(triage.workdir, "repro-trials", knob.id, "package.pt2"),
                "inductor_configs": {**dict(case.compiled_with), **dict(knob.configs)},
                "unless_matched": [s["id"] for s in steps[1:]],
                "requires": ["repro"],
                "timeout_s": compile_s + opts.timeout_s,
            }
        )
    entries, died = triage.job("repro", steps)
    repro = _repro(entries.get("repro"), died)
    if not repro.verified:
        return repro, [], None
    trials = []
    for knob in knobs:
        trial = _trial(knob, entries.get(f"trial:{knob.id}"), died)
        if trial is None:
            break
        trials.append(trial)
        if trial.verdict == "cause":
            break
    return repro, trials, folder


def _repro(entry: Mapping[str, Any] | None, died: str) -> Repro:
    if entry is None or entry.get("status") != "ok":
        err = (entry or {}).get("error") or {}
        lines = str(err.get("message") or died or "not reached").strip().splitlines()
        why = f"{err.get('type', 'error')}: {lines[0][:300]}" if err else lines[0][:300]
        return Repro(False, "", detail=f"cutting the subgraph failed: {why}")
    attempts = [a for a in entry.get("attempts") or [] if isinstance(a, Mapping)]
    program = int(entry.get("program_nodes") or 0)
    if not entry.get("verified"):
        sizes = ", ".join(str(len(a.get("nodes") or ())) for a in attempts)
        return Repro(
            False,
            "",
            program_nodes=program,
            detail=f"no cut of the kernel's nodes differs when compiled alone (cuts of "
            f"{sizes or 'no'} node(s) tried, grown {GROW} times at most)",
        )
    nodes = tuple(str(n) for n in entry.get("nodes") or ())
    return Repro(
        True,
        "subgraph",
        nodes=nodes,
        program_nodes=program,
        max_abs=opt_float(entry.get("max_abs")),
        detail="the kernel's FX nodes cut out of the program"
        + (f", grown {entry.get('grown')} time(s)" if entry.get("grown") else "")
        + f": {len(nodes)} of {program} operator nodes, compiled alone it differs from eager "
        f"(max abs error {_num(opt_float(entry.get('max_abs')))}, "
        f"{int(entry.get('mismatches') or 0)} element(s) beyond tolerance)",
    )


def _trial(knob: KnobLike, entry: Mapping[str, Any] | None, died: str) -> KnobTrial | None:
    """A knob's rebuild of the repro as a KnobTrial (None: skipped, an earlier one matched)."""
    if entry is None:
        why = died or "not reached"
        return KnobTrial(knob.id, knob.configs, "inconclusive", f"the repro's rebuild: {why}")
    if entry.get("skipped"):
        return None
    seconds = float(entry.get("duration_s") or 0.0)
    if entry.get("status") != "ok":
        err = entry.get("error") or {}
        message = str(err.get("message") or "")
        if "is not available in torch" in message:
            return KnobTrial(knob.id, knob.configs, "not testable on this torch", message)
        line = message.strip().splitlines()[0][:300] if message.strip() else ""
        what = f"the repro's rebuild failed: {err.get('type', 'error')}: {line}"
        return KnobTrial(knob.id, knob.configs, "inconclusive", what, seconds=seconds)
    worst = opt_float(entry.get("max_abs"))
    if entry.get("mismatches"):
        what = f"the repro's rebuild still differs from eager (max abs error {_num(worst)})"
        return KnobTrial(knob.id, knob.configs, "not the cause", what, worst, seconds)
    what = f"the repro's rebuild matches eager (max abs error {_num(worst)}): {knob.cause}"
    return KnobTrial(knob.id, knob.configs, "cause", what, worst, seconds)


def latency_step(case: OutputMismatch, rebuilt: str, gated: bool) -> dict[str, Any] | None:
    """The worker step timing the deployed package against `rebuilt` (`gated`: only when the
    step `compare` matched eager); None: the check ran no compiled package to time against."""
    if not case.deployed:
        return None
    return {
        "id": "latency",
        "op": "accuracy_latency",
        "a": case.deployed,
        "b": rebuilt,
        "a_model": case.deployed_model,
        "model": "model",
        "runs": LATENCY_RUNS,
        "budget_s": LATENCY_BUDGET_S,
        "when_matches": "compare" if gated else None,
        "timeout_s": LATENCY_BUDGET_S + 2 * case.options.timeout_s,
    }


def latency_of(entries: Mapping[str, Mapping[str, Any]]) -> Latency | None:
    """The measured latency cost from a rebuild's job (None: not measured)."""
    entry = entries.get("latency") or {}
    if entry.get("status") != "ok" or entry.get("skipped") or not entry.get("runs"):
        return None
    return Latency(int(entry["runs"]), float(entry["a_ms"]), float(entry["b_ms"]))


def keep(folder: str, artifacts: str | None, model: str) -> str | None:
    """Copy the verified repro into `artifacts`/<model>/accuracy-repro (None: no --artifacts);
    raises OSError."""
    if not artifacts:
        return None
    folder_name = re.sub(r"[^\w.-]+", "_", model) or "model"  # as the crash bundle names it
    out = os.path.join(os.path.abspath(artifacts), folder_name, "accuracy-repro")
    if os.path.isdir(out):
        shutil.rmtree(out)
    shutil.copytree(folder, out)
    return out


def _num(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.4g}"
