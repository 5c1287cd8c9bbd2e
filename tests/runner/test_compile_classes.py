"""The class of a failed compile (aotipre/runner/compile_classes.py), on what plain torch
raised: the real recordings of torch 2.13 in tests/data/compile_failures/ (made by
tests/runner/record_compile_failures.py: the worker's facts and the recorded error), and FAKE
message texts of the classes this host cannot produce (versions_fake.json: CUDA, Triton, other
versions, copied from torch's sources and issues)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from aotipre.findings import codes
from aotipre.runner.compile_classes import CODES, classify_compile_class, phase_clause

DATA = Path(__file__).resolve().parents[1] / "data" / "compile_failures"


def recorded(case: str) -> dict[str, Any]:
    return json.loads((DATA / f"{case}.json").read_text())


def classify(data: dict[str, Any], facts: bool = True) -> Any:
    return classify_compile_class(
        data["compile_failure"] if facts else None,
        data["error"]["type"],
        data["error"]["message"],
    )


REAL = {
    # recording -> (what plain torch 2.13 raised inside InductorError, the class)
    "cpp_compile_error": ("CppCompileError", "cpp_compile"),
    "invalid_cxx": ("InvalidCxxCompiler", "toolchain"),
    "lowering_cummin": ("LoweringException", "lowering"),
    "unsupported_float8_sum": ("KeyError", "unsupported"),
    "unsupported_quint8": ("KeyError", "unsupported"),
    "unsupported_sparse": ("NotImplementedError", "unsupported"),
}


@pytest.mark.parametrize("case", sorted(REAL))
def test_real_failures_are_classified_by_type_and_by_message_alone(case: str) -> None:
    data = recorded(case)
    inner, kind = REAL[case]
    chain = [e["type"] for e in data["compile_failure"]["chain"]]
    assert chain[:2] == ["InductorError", inner], chain  # what plain torch raised
    by_type = classify(data)
    assert (by_type.kind, by_type.exc_type, by_type.code) == (kind, inner, CODES[kind])
    # without the worker's facts (a worker that died before recording them, another
    # aotipre's record): InductorError's message names the inner type itself
    by_message = classify(data, facts=False)
    assert (by_message.kind, by_message.code) == (kind, CODES[kind])


def test_a_lowering_crash_names_the_op_the_node_its_inputs_and_the_model_line() -> None:
    found = classify(recorded("lowering_cummin"))
    assert "Inductor's lowering of aten.cummin.default failed (AssertionError, raised at " in (
        found.what
    )
    assert found.where.startswith("node cummin (aten.cummin.default; inputs arg0_1: [0] float32)")
    assert "in forward: return torch.cummin(torch.clone(x), -46)[0]" in found.where
    # the message alone still names the op
    assert "aten.cummin.default" in classify(recorded("lowering_cummin"), facts=False).what


def test_a_cpp_error_quotes_the_compiler_the_generated_line_and_the_fused_nodes() -> None:
    data = recorded("cpp_compile_error")
    found = classify(data)
    assert "the generated C++ does not compile: " in found.what
    assert "error: ‘compile’ was not declared in this scope" in found.what
    assert "generated line 69: `auto tmp1 = compile error!;` in cpp_fused_mul_relu_1" in (
        found.what
    )
    assert "/tmp/" not in found.what.split(" (generated")[0]  # the file's name, not its path
    # cpp_fused_mul_relu_1: the model's mul and relu nodes, each with its source line
    assert found.where.startswith("fused from node ")
    for node in ("node mul (aten.mul.Tensor", "node relu (aten.relu.default"):
        assert node in found.where
    assert "return torch.relu(self.lin(x)) * 2" in found.where
    assert found.evidence[0].endswith("error: ‘compile’ was not declared in this scope")
    assert found.evidence[1].startswith("g++ ")


def test_a_dtype_the_device_lacks_names_the_op_the_dtype_and_the_model_line() -> None:
    # plain torch 2.13: a float8 sum on CPU (eager: "sum_cpu" not implemented for
    # 'Float8_e4m3fn') fails in Inductor's C++ backend as KeyError: torch.float8_e4m3fn
    found = classify(recorded("unsupported_float8_sum"))
    assert found.what.startswith(
        "aten.sum.default on float8_e4m3fn is not supported on this device by the compile: no "
        "table of the compiler has an entry for it (KeyError: torch.float8_e4m3fn, raised at "
        "torch/_inductor/codegen/cpp.py:"
    )
    # the sum the failing kernel came from, not the cast that made the float8 values
    assert found.where.startswith(
        "node sum_1 (aten.sum.default; inputs convert_element_type: [4, 8] float8_e4m3fn) at "
    )
    assert found.where.endswith("in forward: return x.to(torch.float8_e4m3fn).sum()")
    assert "a dtype the device supports" in found.hint and "float8_e4m3fn" in found.hint
    # the message alone still names the dtype
    alone = classify(recorded("unsupported_float8_sum"), facts=False)
    assert alone.what.startswith("dtype float8_e4m3fn is not supported on this device")
    # a quantized dtype: the quantize op AOTInductor calls through the proxy executor
    quint8 = classify(recorded("unsupported_quint8"))
    assert quint8.what.startswith("aten.quantize_per_tensor.default on quint8 is not supported")
    assert "q = torch.quantize_per_tensor(x, 0.1, 0, torch.quint8)" in quint8.where
    assert quint8.hint.startswith("AOTInductor does not compile quantized tensors (quint8)")
    # an op with no fake kernel: the op, not a dtype
    sparse = classify(recorded("unsupported_sparse"))
    assert sparse.what.startswith(
        "the op aten::_to_dense is not supported by the compile: it has no fake (Meta) kernel"
    )
    assert sparse.where.startswith("node _to_dense (aten._to_dense.default; inputs _to_sparse: ")
    assert "torch.library.register_fake" in sparse.hint


def test_the_worker_reads_the_dtype_from_the_exception_and_the_ops_from_the_graph() -> None:
    import torch

    from aotipre.runner.worker.compile_failure import failure_facts

    class Float8Sum(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x.to(torch.float8_e4m3fn).sum() + x.sum()

    graph = torch.export.export(Float8Sum(), (torch.randn(2, 3),)).graph
    # the key itself is a dtype (what Inductor's tables raise): the ops reading it (the float8
    # sum, and the add of its float8 result), not the cast that makes it nor the float32 sum
    facts = failure_facts(KeyError(torch.float8_e4m3fn), graph)["unsupported"]
    assert (facts["dtype"], facts["exc_type"]) == ("torch.float8_e4m3fn", "KeyError")
    assert [n["op"] for n in facts["nodes"]] == ["aten.sum.default", "aten.add.Tensor"]
    assert facts["nodes"][0]["inputs"][0]["dtype"] == "torch.float8_e4m3fn"
    assert "return x.to(torch.float8_e4m3fn).sum() + x.sum()" in facts["nodes"][0]["source"][-1]
    # ATen's kernel without the dtype, an op without a fake kernel
    kernel = NotImplementedError("\"sum_cpu\" not implemented for 'Float8_e4m3fn'")
    facts = failure_facts(kernel, graph)["unsupported"]
    assert (facts["dtype"], facts["kernel"]) == ("Float8_e4m3fn", "sum_cpu")
    meta = NotImplementedError(
        "aten::sum.default: attempted to run this operator with Meta tensors, but there was no "
        "fake impl or Meta kernel registered."
    )
    facts = failure_facts(meta, graph)["unsupported"]
    assert facts["op"] == "aten::sum.default"
    assert [n["name"] for n in facts["nodes"]] == ["sum_1", "sum_2"]
    # a KeyError of anything else, the words in another exception type: nothing recorded
    for other in (KeyError("weight"), KeyError("torch.float8_e4m3fn"), RuntimeError(str(meta))):
        assert "unsupported" not in failure_facts(other, graph)


def test_an_unsupported_dtype_is_read_from_the_exception_never_guessed_fake() -> None:
    # a KeyError of anything but a dtype, or of a name that is no dtype: not this class
    for message in ("KeyError: 'weight'", "KeyError: torch.float99", "KeyError: torch.float32x"):
        found = classify_compile_class(None, "InductorError", message)
        assert (found.kind, found.code) == ("unknown", "AOT501"), message
    facts = {"chain": [{"type": "InductorError"}, {"type": "KeyError", "message": "'weight'"}]}
    assert classify_compile_class(facts, "InductorError", "KeyError: 'weight'").kind == "unknown"
    # a lowering that ran an ATen kernel without the dtype: the dtype, not "lowering failed"
    message = (
        'LoweringException: NotImplementedError: "clamp_min_scalar_cpu" not implemented for '
        "'Float8_e5m2'\n  target: aten.relu.default\n  args[0]: TensorBox()"
    )
    found = classify_compile_class(None, "InductorError", message)
    assert (found.kind, found.exc_type, found.code) == (
        "unsupported",
        "NotImplementedError",
        "AOT547",
    )
    assert found.what.startswith(
        "dtype float8_e5m2 is not supported on this device by the compile: ATen's "
        "clamp_min_scalar_cpu kernel has no case for it (NotImplementedError)"
    )
    message = "LoweringException: KeyError: torch.quint8\n  target: aten.x.default"
    found = classify_compile_class(None, "InductorError", message)
    assert (found.kind, found.exc_type) == ("unsupported", "KeyError")
    assert found.what.startswith("dtype quint8 is not supported on this device")
    # c10's ScalarType names that are not torch's
    message = "NotImplementedError: \"foo_cpu\" not implemented for 'ComplexHalf'"
    assert "dtype complex32 is not" in classify_compile_class(None, "InductorError", message).what


def test_a_real_data_dependent_guard_names_the_expression_the_node_and_the_next_step() -> None:
    # plain torch 2.13: conv1d over the first u0 samples (u0 from .item()) compiles into
    # InductorError(LoweringException(GuardOnDataDependentSymNode)) on the convolution
    data = recorded("data_dependent_conv")
    chain = [e["type"] for e in data["compile_failure"]["chain"]]
    assert chain == ["InductorError", "LoweringException", "GuardOnDataDependentSymNode"]
    for facts in (True, False):
        found = classify(data, facts=facts)
        assert (found.kind, found.exc_type, found.code) == (
            "data_dependent",
            "GuardOnDataDependentSymNode",
            "AOT545",
        )
        assert found.what.startswith(
            "Inductor needed to decide `2*Max(1, u0 - 2)` on a data-dependent size (u0), in "
            "fx/experimental/_size_hinting.py:"
        )
        # Inductor wants a number there: no torch._check range gives one (measured: the same
        # conv with torch._check(u > 4) fails the same way; over a Dim-dynamic input it compiles)
        assert found.hint.startswith("Inductor needs `2*Max(1, u0 - 2)` as a number, which no ")
        assert "torch.export.Dim in dynamic_shapes" in found.hint
        assert "torch._check(u0 > 1)" not in found.hint
    found = classify(data)
    assert found.where.startswith(
        "node convolution (aten.convolution.default; inputs slice_1: [1, 3, u0] float32, "
    )
    assert found.where.endswith(
        "in forward: return nn.functional.conv1d(x[:, :, :u], torch.ones(2, 3, 3))"
    )


def test_the_version_texts_are_classified_fake() -> None:
    cases = json.loads((DATA / "versions_fake.json").read_text())["cases"]
    got = {c["name"]: classify_compile_class(None, c["type"], c["message"]).kind for c in cases}
    assert got == {c["name"]: c["expect"] for c in cases}


def test_a_data_dependent_guard_names_the_expression_symbol_and_the_check_fake() -> None:
    case = next(
        c
        for c in json.loads((DATA / "versions_fake.json").read_text())["cases"]
        if c["name"] == "data_dependent_2.13_issue_193693"
    )
    found = classify_compile_class(None, case["type"], case["message"])
    assert found.code == "AOT545"
    assert "`Eq(Max(1, u0), 1)` on a data-dependent size (u0)" in found.what
    assert "in _inductor/output_code.py:141 in complex_memory_overlap" in found.what
    assert "torch._check(u0 > 1)" in found.hint
    # the worker's facts (the guard's own expression and the node being lowered) come first
    facts = {
        "chain": [
            {"type": "InductorError", "module": "torch._inductor.exc"},
            {"type": "LoweringException", "module": "torch._inductor.exc"},
            {"type": "GuardOnDataDependentSymNode", "module": "torch.fx.experimental"},
        ],
        "guard": {"expression": "Eq(u3, 1)", "symbols": ["u3"]},
        "node": {"name": "view", "op": "aten.view.default", "source": ["m.py:7 in forward: x"]},
    }
    found = classify_compile_class(facts, "InductorError", "LoweringException: ...")
    assert (found.kind, found.exc_type) == ("data_dependent", "GuardOnDataDependentSymNode")
    assert "`Eq(u3, 1)`" in found.what and "torch._check(u3 > 1)" in found.hint
    assert found.where == "node view (aten.view.default) at m.py:7 in forward: x"


def test_unknown_is_said_never_guessed_fake() -> None:
    # a type of no class whose text has words of several classes: unknown, not the first match
    message = "ValueError: while lowering, g++ said: error: boom; target: aten.mm"
    found = classify_compile_class({"chain": [{"type": "ValueError"}]}, "ValueError", message)
    assert (found.kind, found.code) == ("unknown", "AOT501")
    assert "an exception aotipre does not classify (ValueError: " in found.what
    # a CompilationError of a library other than Triton is not a Triton failure
    other = {"chain": [{"type": "CompilationError", "module": "jinja2.exceptions"}]}
    assert classify_compile_class(other, "CompilationError", "x").kind == "unknown"
    triton = {"chain": [{"type": "CompilationError", "module": "triton.compiler.errors"}]}
    assert classify_compile_class(triton, "CompilationError", "x").kind == "triton"


def test_every_class_has_its_code_in_the_table() -> None:
    for kind, code in CODES.items():
        entry = codes.get(code)
        assert entry.code == code and entry.name.startswith("compile-"), kind


def test_the_phase_a_killed_compile_was_in() -> None:
    entry = {"phase": "compile: autotuning > C++ build", "peak_rss_mb": 812.4}
    assert phase_clause(entry) == "while autotuning > C++ build, peak memory 812 MiB"
    assert phase_clause({"phase": "compile"}) == ""
    assert phase_clause({}) == ""


RARE_CLASSES = {
    # code -> the class whose FAKE texts (versions_fake.json) stand in for a real compile: none
    # of them can be produced on a CPU host with torch 2.13 (tests/gate/test_codes_registry.py)
    "AOT541": "missing_lowering",
    "AOT544": "triton",
}


@pytest.mark.parametrize("code", sorted(RARE_CLASSES))
def test_each_rare_class_gets_its_code_fake(code: str) -> None:
    cases = json.loads((DATA / "versions_fake.json").read_text())["cases"]
    texts = [c for c in cases if c["expect"] == RARE_CLASSES[code]]
    assert texts, code
    for case in texts:
        found = classify_compile_class(None, case["type"], case["message"])
        assert found.code == code, case["name"]


TRITON_IMPORT_ERROR = (
    "RuntimeError: Failed to run autotuning code block: Failed to import {path}\n"
    "SyntaxError: invalid syntax (c2x.py, line 5)"
)
"""What torch 2.11.0+cu130 raised on an H200 (inside InductorError) for a relu model compiled
with triton.inject_relu_bug_TESTING_ONLY="compile_error" (tests/gate/test_compile_classes_gpu.py
runs it there); the path is the autotuning code block torch wrote in its cache."""
GENERATED = """import triton

@triton.jit
def triton_poi_fused_mul_relu_0(in_out_ptr0, xnumel, XBLOCK: tl.constexpr):
    tmp1 = compile error!
"""


def test_generated_triton_code_that_does_not_compile_names_the_kernel_and_its_line(
    tmp_path: Path,
) -> None:
    from aotipre.runner.worker.compile_failure import generated_python_error

    block = tmp_path / "c2x.py"
    block.write_text(GENERATED)
    message = TRITON_IMPORT_ERROR.format(path=block)
    facts = {"generated_py": generated_python_error(message)}
    assert facts["generated_py"] == {
        "error": "SyntaxError: invalid syntax (c2x.py, line 5)",
        "line": 5,
        "code": "tmp1 = compile error!",
        "function": "triton_poi_fused_mul_relu_0",
    }
    for given in (facts, None):  # the worker's facts, or the message alone
        known = classify_compile_class(given, "InductorError", message)
        assert known.kind == "triton" and CODES["triton"] == "AOT544"
    known = classify_compile_class(facts, "InductorError", message)
    assert known.what == (
        "the generated Triton kernel triton_poi_fused_mul_relu_0 does not compile: SyntaxError: "
        "invalid syntax (c2x.py, line 5) (generated line 5: `tmp1 = compile error!`)"
    )
    assert "triton.inject_*_TESTING_ONLY" in known.hint
    assert generated_python_error("Failed to import x.py") == {}  # no error line: nothing
