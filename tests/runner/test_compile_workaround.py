"""The workaround rung of a classified compile failure (aotipre/runner/stages/compile_workaround.py):
which knob each class gets (the plan, as data), how a rebuild's records are judged, what the
finding's next step then says; nothing of it under --no-escalate or for a compile that did not
raise. The real rebuilds are in tests/gate/test_compile_classes_real.py."""

from __future__ import annotations

from typing import Any

import pytest

from aotipre.foundation.errors import UsageError
from aotipre.runner.compile_classes import CompileClass
from aotipre.runner.stages import DynamicOptions
from aotipre.runner.stages.base import StepRecord
from aotipre.runner.stages.compile_workaround import (
    NO_AUTOTUNE,
    Workaround,
    WorkaroundPlan,
    WorkaroundProof,
    WorkaroundTrial,
    judge,
    plan_workarounds,
    prove_workaround,
    workaround_hint,
)


def _known(kind: str) -> CompileClass:
    return CompileClass(kind, "", "what", "", "the class's own hint")


def _ids(plan: WorkaroundPlan) -> list[str]:
    return [w.id for w in plan.tries]


def test_a_lowering_failure_tries_the_op_as_a_fallback_then_every_op() -> None:
    plan = plan_workarounds(_known("lowering"), {"a": 1}, "cpu", "aten.cummin.default")
    assert _ids(plan) == ["op-fallback", "all-fallback"]
    op, every = plan.tries
    assert op.fallback_op == "aten.cummin.default" and dict(op.configs) == {"a": 1}
    assert dict(every.configs) == {"a": 1, "fallback_by_default": True, "selective_decompose": True}
    assert not every.fallback_op
    # no op named: only the global switch
    assert _ids(plan_workarounds(_known("lowering"), {}, "cpu", "")) == ["all-fallback"]


def test_a_missing_lowering_turns_the_implicit_fallbacks_back_on() -> None:
    plan = plan_workarounds(
        _known("missing_lowering"), {"implicit_fallbacks": False, "b": 2}, "cpu", "aten.x.default"
    )
    assert [dict(w.configs) for w in plan.tries] == [{"implicit_fallbacks": True, "b": 2}]


def test_a_triton_failure_drops_autotuning_on_cuda_only_and_says_it_is_untested() -> None:
    plan = plan_workarounds(_known("triton"), {"max_autotune": True}, "cuda", "")
    assert _ids(plan) == ["no-autotune"]
    assert dict(plan.tries[0].configs) == dict(NO_AUTOTUNE)
    assert "not on a GPU" in plan.untested
    cpu = plan_workarounds(_known("triton"), {}, "cpu", "")
    assert not cpu.tries and "CUDA" in cpu.none


def test_a_triton_failure_with_an_injected_config_is_rebuilt_without_it_first() -> None:
    injected = {"triton.inject_relu_bug_TESTING_ONLY": "compile_error", "keep": 1}
    plan = plan_workarounds(_known("triton"), injected, "cuda", "")
    assert _ids(plan) == ["without-injected", "no-autotune"]
    assert dict(plan.tries[0].configs) == {"keep": 1}


def test_a_cpp_error_is_rebuilt_without_the_injected_config_only() -> None:
    injected = {"cpp.inject_relu_bug_TESTING_ONLY": "compile_error", "keep": 1}
    plan = plan_workarounds(_known("cpp_compile"), injected, "cpu", "")
    assert [dict(w.configs) for w in plan.tries] == [{"keep": 1}]
    assert "cpp.inject_relu_bug_TESTING_ONLY" in plan.tries[0].how
    plain = plan_workarounds(_known("cpp_compile"), {"keep": 1}, "cpu", "")
    assert not plain.tries and plain.none


def test_cpp_codegen_turned_off_is_tried_without_that_config() -> None:
    plan = plan_workarounds(
        _known("wrapper_codegen"), {"disable_cpp_codegen": True, "k": 1}, "cpu", ""
    )
    assert [(w.id, dict(w.configs), w.how) for w in plan.tries] == [
        ("cpp-codegen-on", {"k": 1}, "without disable_cpp_codegen")
    ]
    # another wrapper failure: no knob
    assert plan_workarounds(_known("wrapper_codegen"), {"k": 1}, "cpu", "").none


@pytest.mark.parametrize(
    ("kind", "said"),
    [
        ("data_dependent", "a data-dependent guard: the fix is in the model"),
        ("toolchain", "toolchain"),
        ("unsupported", "support a dtype or an op: the fix is in the model"),
        ("wrapper_codegen", "wrapper"),
        ("unknown", "does not classify"),
    ],
)
def test_a_class_no_knob_avoids_says_why(kind: str, said: str) -> None:
    plan = plan_workarounds(_known(kind), {}, "cpu", "aten.x.default")
    assert not plan.tries and said in plan.none
    hint = workaround_hint(WorkaroundProof(plan), "the hint")
    assert hint.startswith("the hint (no workaround: ") and said in hint


def _rec(sid: str, status: str, **entry: Any) -> StepRecord:
    return StepRecord(sid, "compile", status, entry=entry)


def _compare(*outputs: dict[str, Any], structure: str | None = None) -> StepRecord:
    return _rec("cmp", "ok", structure=structure, outputs=list(outputs))


def test_a_rebuild_that_compiles_and_matches_eager_is_proven() -> None:
    leaf = {"kind": "tensor", "mismatches": 0, "max_abs": 0.0, "numel": 12}
    verdict, detail = judge(_rec("c", "ok"), _compare(leaf))
    assert verdict == "proven"
    assert detail == (
        "compiled and matched eager on the sample inputs (1 output(s), 12 element(s), "
        "max abs error 0)"
    )


def test_a_rebuild_whose_outputs_differ_is_not_proven() -> None:
    leaf = {"kind": "tensor", "mismatches": 3, "max_abs": 0.5, "numel": 12}
    assert judge(_rec("c", "ok"), _compare(leaf))[0] == "differs"
    shape = {"kind": "tensor", "structure": True}
    assert judge(_rec("c", "ok"), _compare(shape))[0] == "differs"
    value = {"kind": "value", "equal": False}
    assert judge(_rec("c", "ok"), _compare(value))[0] == "differs"
    assert judge(_rec("c", "ok"), _compare(structure="2 outputs against 1"))[0] == "differs"


def test_a_rebuild_that_fails_says_how() -> None:
    err = {"type": "InductorError", "message": "LoweringException: AssertionError: x\n  target"}
    verdict, detail = judge(_rec("c", "error", error=err), None)
    assert verdict == "fails"
    assert detail == "the compile still fails: InductorError: LoweringException: AssertionError: x"
    missing = {"type": "StepError", "message": "the inductor config 'x' is not available in torch"}
    assert judge(_rec("c", "error", error=missing), None)[0] == "not testable on this torch"
    assert judge(_rec("c", "timeout"), None)[0] == "inconclusive"
    assert judge(None, None)[0] == "inconclusive"
    broken = _rec("cmp", "error", error={"type": "RuntimeError", "message": "boom"})
    assert judge(_rec("c", "ok"), broken) == (
        "inconclusive",
        "it compiled, but comparing it with eager failed: boom",
    )


def test_the_next_step_quotes_the_proven_config_first() -> None:
    w = Workaround("implicit-fallbacks", {"implicit_fallbacks": True}, "implicit_fallbacks=True")
    proof = WorkaroundProof(WorkaroundPlan((w,)), [WorkaroundTrial(w, "proven", "it matched")])
    assert workaround_hint(proof, "the hint") == (
        "workaround, proven: implicit_fallbacks=True: compile with "
        "inductor_configs={'implicit_fallbacks': True}; "
        "it matched. Else: the hint"
    )
    op = Workaround("op-fallback", {}, "aten.cummin.default as an ATen fallback kernel",
                    fallback_op="aten.cummin.default")  # fmt: skip
    proof = WorkaroundProof(WorkaroundPlan((op,)), [WorkaroundTrial(op, "proven", "it matched")])
    hint = workaround_hint(proof, "h")
    assert hint.startswith(
        "workaround, proven: aten.cummin.default as an ATen fallback kernel: run "
        "torch._inductor.lowering.make_fallback("
        "torch.ops.aten.cummin.default, warn=False, override_decomp=True) before compiling"
    )
    assert hint.endswith("then compile as before; it matched. Else: h")


def test_a_workaround_that_was_not_proven_is_quoted_with_its_measured_failure() -> None:
    w = Workaround("no-autotune", dict(NO_AUTOTUNE), "no max-autotune")
    plan = WorkaroundPlan((w,), untested="untested on a GPU")
    proof = WorkaroundProof(plan, [WorkaroundTrial(w, "fails", "the compile still fails: X")])
    assert workaround_hint(proof, "the hint") == (
        "no workaround proven: tried no max-autotune: fails (the compile still fails: X) "
        "(untested on a GPU). the hint"
    )
    assert workaround_hint(None, "the hint") == "the hint"


class _Session:
    """A session whose followup workers must not run (the rung does not apply)."""

    def __init__(self, workaround: bool) -> None:
        self.opts = DynamicOptions(compile_workaround=workaround)

    def run_followup(self, *args: object, **kwargs: object) -> list[StepRecord]:
        raise AssertionError("a workaround was rebuilt")


@pytest.mark.parametrize(
    ("workaround", "status"), [(False, "error"), (True, "ok"), (True, "timeout"), (True, "crash")]
)
def test_no_rebuild_without_escalation_or_for_a_compile_that_did_not_raise(
    workaround: bool, status: str
) -> None:
    err = {"type": "InductorError", "message": "MissingOperatorWithoutDecomp: missing lowering"}
    failed = StepRecord("compile", "compile", status, entry={"error": err})
    assert prove_workaround(_Session(workaround), failed, {}) is None  # type: ignore[arg-type]


@pytest.mark.parametrize("budget", [0.0, float("nan"), -1.0])
def test_a_library_callers_bad_budget_is_one_usage_error(budget: float) -> None:
    with pytest.raises(UsageError, match="DynamicOptions.workaround_budget_s"):
        DynamicOptions(workaround_budget_s=budget)
