"""The workaround rung of a classified compile failure (under --escalate): the ExportedProgram
compiled again with the knob that avoids the failing path (the failing op as an ATen fallback, the
implicit fallbacks back on, no max-autotune, the injected test config left out), in a fresh worker
within the escalation budget, and its outputs compared with eager on the sample inputs (the
worker's `compile` and `accuracy_compare` steps, the rebuild accuracy triage runs). A workaround
is quoted only as what its rebuild showed: compiled and matched eager, or the measured failure.
A class that no knob avoids (a data-dependent guard, the toolchain) says why instead."""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from aotipre.runner.compile_classes import CompileClass, classify_compile_class
from aotipre.runner.stages.base import PlannedStep, StepRecord, ok
from aotipre.runner.stages.session import Session

WORKAROUND_ID = "compile-workaround"
COMPARE_ID = "compile-workaround-compare"
MIN_LEFT_S = 5.0
"""A trial starts only with at least this much of the budget left."""
NO_CPP_CODEGEN = "disable_cpp_codegen"
"""The inductor config that turns Inductor's C++ backend off (torch 2.13-2.15), which
AOTInductor's C++ wrapper needs."""
INJECTED_SUFFIX = "_TESTING_ONLY"
"""Inductor's bug-injection configs (`cpp.inject_relu_bug_TESTING_ONLY`; torch 2.13-2.15)."""
NO_AUTOTUNE: Mapping[str, Any] = {
    "max_autotune": False,
    "max_autotune_gemm": False,
    "max_autotune_pointwise": False,
    "triton.autotune_pointwise": False,
}
"""No max-autotune, and one Triton config per pointwise kernel (torch/_inductor/config.py of
torch 2.13-2.15): the fewest kernels compiled and benchmarked while compiling."""
ALL_FALLBACK: Mapping[str, Any] = {"fallback_by_default": True, "selective_decompose": True}
"""Every op as its ATen kernel (Inductor's lite mode; accuracy triage's all-fallback knob)."""


@dataclass(frozen=True)
class Workaround:
    """One knob that may avoid a compile class's failing path."""

    id: str
    configs: Mapping[str, Any]
    """The inductor configs to compile with (the failed compile's own, changed by the knob)."""
    how: str
    """What it changes, in the finding's words."""
    fallback_op: str = ""
    """An op the rebuild worker registers as an ATen fallback before compiling
    (torch._inductor.lowering.make_fallback: no inductor config falls back one op)."""


@dataclass(frozen=True)
class WorkaroundPlan:
    """The knobs to try for one failure, in order, or why there is none."""

    tries: tuple[Workaround, ...] = ()
    none: str = ""
    """Why no knob is tried ('' when some are)."""
    untested: str = ""
    """What the plan is not tested on (the GPU-only knobs)."""


@dataclass
class WorkaroundTrial:
    """One rebuild with a workaround and what it showed."""

    workaround: Workaround
    verdict: str
    """`proven` (it compiled and its outputs match eager), `differs` (compiled, outputs differ),
    `fails` (the compile failed again), `not testable on this torch`, `inconclusive` (the
    rebuild could not be judged) or `not run` (the budget ran out)."""
    detail: str
    records: list[StepRecord] = field(default_factory=list)
    seconds: float = 0.0


@dataclass
class WorkaroundProof:
    """What the workaround rung made of one failed compile."""

    plan: WorkaroundPlan
    trials: list[WorkaroundTrial] = field(default_factory=list)

    @property
    def proven(self) -> WorkaroundTrial | None:
        return next((t for t in self.trials if t.verdict == "proven"), None)


def configs_text(configs: Mapping[str, Any]) -> str:
    """`{'implicit_fallbacks': True}` as Python a user pastes into inductor_configs=."""
    return "{" + ", ".join(f"{k!r}: {v!r}" for k, v in configs.items()) + "}"


def plan_workarounds(
    known: CompileClass, configs: Mapping[str, Any], device_type: str, target: str
) -> WorkaroundPlan:
    """The knobs that avoid `known`'s failing path, given the failed compile's `configs`, the
    device and the failing op `target` ('' unknown); a class with none says why."""
    base = dict(configs)
    kind = known.kind
    if kind == "lowering":
        tries = []
        if target.count(".") >= 2:  # an op overload, `aten.cummin.default`
            how = f"{target} as an ATen fallback kernel"
            tries.append(Workaround("op-fallback", base, how, fallback_op=target))
        tries.append(
            Workaround(
                "all-fallback",
                {**base, **ALL_FALLBACK},
                "every op as its ATen kernel (no fused kernels: slower)",
            )
        )
        return WorkaroundPlan(tuple(tries))
    if kind == "missing_lowering":
        knob = {**base, "implicit_fallbacks": True}
        return WorkaroundPlan(
            (Workaround("implicit-fallbacks", knob, "the op as its ATen kernel"),)
        )
    injected = sorted(k for k in base if k.endswith(INJECTED_SUFFIX) and base[k])
    without_injected = Workaround(
        "without-injected",
        {k: v for k, v in base.items() if k not in injected},
        f"without {', '.join(injected)}",
    )
    if kind == "triton":
        if device_type != "cuda":
            return WorkaroundPlan(none="the no-autotune knob applies to CUDA compiles only")
        no_autotune = Workaround(
            "no-autotune",
            {**base, **NO_AUTOTUNE},
            "no max-autotune and one Triton config per pointwise kernel",
        )
        return WorkaroundPlan(
            (without_injected, no_autotune) if injected else (no_autotune,),
            untested="the no-autotune rebuild is tested in aotipre's unit tests only, not on a GPU",
        )
    if kind == "wrapper_codegen" and base.get(NO_CPP_CODEGEN):
        # AOTInductor's wrapper is C++: the config that turns Inductor's C++ backend off stops it
        # before it starts (torch 2.13-2.15: CppWrapperCodegenError "C++ codegen is disabled")
        knob = {k: v for k, v in base.items() if k != NO_CPP_CODEGEN}
        return WorkaroundPlan((Workaround("cpp-codegen-on", knob, f"without {NO_CPP_CODEGEN}"),))
    if kind == "cpp_compile":
        if not injected:
            return WorkaroundPlan(
                none="no compile knob avoids generated C++ this compiler rejects: try another "
                "compiler (the cpp.cxx config) or report the generated line"
            )
        return WorkaroundPlan((without_injected,))
    why = {
        "data_dependent": "no compile knob avoids a data-dependent guard: the fix is in the "
        "model (the hint names it)",
        "toolchain": "no compile knob replaces a missing or unusable toolchain: install it",
        "wrapper_codegen": "no compile knob avoids AOTInductor's wrapper generation",
        "unsupported": "no compile knob makes the device support a dtype or an op: the fix is "
        "in the model (the hint names it)",
    }
    return WorkaroundPlan(
        none=why.get(kind, "aotipre knows no knob for a failure it does not classify")
    )


def prove_workaround(
    s: Session, failed: StepRecord, body: Mapping[str, Any]
) -> WorkaroundProof | None:
    """Try the workarounds of the compile `failed` (its step `body`) until one is proven or the
    budget runs out; None when the rung does not apply (--no-escalate, the compile did not
    raise)."""
    if not s.opts.compile_workaround or failed.status != "error":
        return None
    err = failed.error
    facts = failed.entry.get("compile_failure")
    known = classify_compile_class(facts, err.get("type"), err.get("message"))
    target = str(facts.get("target") or "") if isinstance(facts, dict) else ""
    configs = dict(body.get("inductor_configs") or {})
    plan = plan_workarounds(known, configs, s.device_type, target)
    proof = WorkaroundProof(plan)
    deadline = time.monotonic() + s.opts.workaround_budget_s
    for n, workaround in enumerate(plan.tries):
        left = deadline - time.monotonic()
        if left < MIN_LEFT_S:
            proof.trials.append(
                WorkaroundTrial(workaround, "not run", "the escalation budget ran out")
            )
            continue
        s.say(f"the compile failed ({known.code}): compiling again with {workaround.how}")
        trial = _trial(s, workaround, left, n)
        proof.trials.append(trial)
        if trial.verdict == "proven":
            break
    return proof


def _trial(s: Session, workaround: Workaround, left: float, n: int) -> WorkaroundTrial:
    started = time.monotonic()
    out = os.path.join(s.workdir, f"{WORKAROUND_ID}-{n}", "model.pt2")
    compile_body: dict[str, Any] = {
        "out": out,
        "inductor_configs": dict(workaround.configs),
        "timeout_s": max(1.0, min(s.opts.compile_timeout_s, left)),
    }
    if workaround.fallback_op:
        compile_body["fallback_ops"] = [workaround.fallback_op]
    cid, pid = f"{WORKAROUND_ID}-{n}", f"{COMPARE_ID}-{n}"
    steps = [
        PlannedStep(cid, "compile", compile_body),
        PlannedStep(
            pid,
            "accuracy_compare",
            {
                "package": out,
                "model": "model",
                "requires": [cid],
                "timeout_s": max(1.0, min(s.opts.timeout_s, left)),
            },
        ),
    ]
    records = {r.id: r for r in s.run_followup(steps, env={})}
    took = time.monotonic() - started
    kept = [r for r in (records.get(cid), records.get(pid)) if r is not None]
    verdict, detail = judge(records.get(cid), records.get(pid))
    return WorkaroundTrial(workaround, verdict, detail, kept, took)


def judge(compiled: StepRecord | None, compared: StepRecord | None) -> tuple[str, str]:
    """(verdict, what the rebuild showed) from its compile and compare records."""
    if compiled is None:
        return "inconclusive", "the rebuild's worker did not start the compile"
    if not ok(compiled):
        err = compiled.error
        message = str(err.get("message") or compiled.detail or compiled.status)
        if "is not available in torch" in message:
            return "not testable on this torch", message.splitlines()[0][:300]
        if compiled.status == "timeout":
            return "inconclusive", "the rebuild's compile did not finish within the budget"
        first = message.strip().splitlines()[0][:300] if message.strip() else compiled.status
        return "fails", f"the compile still fails: {err.get('type', compiled.status)}: {first}"
    if compared is None or not ok(compared):
        why = (compared.error.get("message") or compared.detail) if compared else ""
        why = str(why).strip().splitlines()[0][:300] if why else "it did not run"
        return "inconclusive", f"it compiled, but comparing it with eager failed: {why}"
    cmp = compared.entry
    outputs = [o for o in cmp.get("outputs") or [] if isinstance(o, dict)]
    worst = max(
        (float(o["max_abs"]) for o in outputs if o.get("max_abs") is not None), default=None
    )
    worst_text = "n/a" if worst is None else f"{worst:.4g}"
    if cmp.get("structure") or any(_differs(o) for o in outputs):
        mism = sum(int(o.get("mismatches") or 0) for o in outputs)
        what = cmp.get("structure") or f"{mism} element(s) differ, max abs error {worst_text}"
        return "differs", f"it compiled, but its outputs differ from eager ({what})"
    elements = sum(int(o.get("numel") or 0) for o in outputs)
    return (
        "proven",
        f"compiled and matched eager on the sample inputs ({len(outputs)} output(s), "
        f"{elements} element(s), max abs error {worst_text})",
    )


def _differs(leaf: Mapping[str, Any]) -> bool:
    if leaf.get("structure"):
        return True
    if leaf.get("kind") == "value":
        return leaf.get("equal") is False
    return bool(leaf.get("mismatches"))


def workaround_hint(proof: WorkaroundProof | None, hint: str) -> str:
    """The compile finding's next step: the proven workaround first (its config and its proof),
    else what was tried and what it showed, else why no knob applies; then `hint`."""
    if proof is None:
        return hint
    won = proof.proven
    if won is not None:
        w = won.workaround
        return f"workaround, proven: {w.how}: {how_to(w)}; {won.detail}. Else: {hint}"
    if proof.trials:
        tried = "; ".join(f"{t.workaround.how}: {t.verdict} ({t.detail})" for t in proof.trials)
        untested = f" ({proof.plan.untested})" if proof.plan.untested else ""
        return f"no workaround proven: tried {tried}{untested}. {hint}"
    return f"{hint} (no workaround: {proof.plan.none})" if proof.plan.none else hint


def how_to(w: Workaround) -> str:
    """What a user does to compile with workaround `w`, as code."""
    configs = f"inductor_configs={configs_text(w.configs)}"
    if not w.fallback_op:
        return f"compile with {configs}"
    return (
        f"run torch._inductor.lowering.make_fallback(torch.ops.{w.fallback_op}, warn=False, "
        f"override_decomp=True) before compiling (it makes {w.fallback_op} an ATen fallback "
        "in that process's Inductor; no inductor config falls back one op), then compile"
        + (f" with {configs}" if w.configs else " as before")
    )


def workaround_clause(proof: WorkaroundProof | None) -> str:
    """One clause for the compile stage's detail ('' when the rung did not run)."""
    if proof is None or not proof.trials:
        return ""
    won = proof.proven
    if won is not None:
        return f"workaround proven: {won.workaround.id} {won.detail}"
    return (
        "no workaround proven ("
        + ", ".join(f"{t.workaround.id}: {t.verdict}" for t in proof.trials)
        + ")"
    )
