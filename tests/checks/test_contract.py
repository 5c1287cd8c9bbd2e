"""Unit tests (no compile) of the deployment-contract checks: specialized arguments, loading,
checkpoints given as inputs, out-of-range index chains, foreign zips, integer values."""

from __future__ import annotations

import dataclasses
import re

import pytest

from aotipre.checks.contract import (
    check_checkpoint,
    check_loading,
    check_specialized,
    checkpoint_kind,
)
from aotipre.findings import Severity
from aotipre.inputs.meta import SampleInputs, TensorMeta
from aotipre.pt2.foreign import describe_foreign_zip
from aotipre.pt2.spec import CallSignature, InputSpec, ModelInfo, PackageInfo, TreeSpec
from aotipre.pt2.wrapper import WrapperConstant, WrapperContract, WrapperInput
from aotipre.pt2.wrapper_contract import tensor_leaf_positions
from aotipre.triage.parsers import IndexChain, index_chain, plain_index_chain

LEAF = TreeSpec(None)


def _model(
    inputs: tuple[InputSpec, ...], source: str = "exported_program", **kw: object
) -> ModelInfo:
    return ModelInfo(
        name="model",
        has_exported_program=source == "exported_program",
        aoti=None,
        torch_version=None,
        schema_version=None,
        inputs=inputs,
        outputs=(),
        symbols=(),
        signature=kw.pop("signature", None),  # type: ignore[arg-type]
        contract_source=source,
        **kw,  # type: ignore[arg-type]
    )


def _package(*names: str) -> PackageInfo:
    models = tuple(_model(()) for _ in names)
    models = tuple(
        ModelInfo(**{**m.__dict__, "name": n}) for m, n in zip(models, names, strict=True)
    )
    return PackageInfo("p.pt2", "aoti", "p", "pt2", "0", models, ())


ALPHA = InputSpec("alpha", 1, "args[1]", "constant", value=0.5)
NORMALIZE = InputSpec("normalize", 2, "kwargs['normalize']", "constant", value=True)
X = TensorMeta("float32", (3, 8), (8, 1))


def test_exported_values_are_listed_as_ignored_at_call_time() -> None:
    (f,) = check_specialized(
        _model((ALPHA, NORMALIZE)), SampleInputs((X, 0.5), {"normalize": True})
    )
    assert f.code == "AOT107" and f.severity is Severity.INFO
    assert "alpha (args[1]) = 0.5" in f.message and "ignores any value passed" in f.message


def test_a_differing_sample_leaves_it_to_the_error() -> None:
    sample = SampleInputs((X, 2.0), {"normalize": True})
    assert check_specialized(_model((ALPHA, NORMALIZE)), sample) == []


def test_aoti_only_specialized_values_are_unknown() -> None:
    fixed = (InputSpec("args[1]", 1, "args[1]", "constant"),)
    (f,) = check_specialized(_model(fixed, "wrapper_cpp"), SampleInputs((X, 2.0)))
    assert f.code == "AOT108" and f.severity is Severity.WARNING
    assert "(the sample inputs pass args[1]=2.0: not what will run" in f.message


def test_an_exported_program_given_for_an_aoti_only_package_supplies_the_values() -> None:
    """--exported-program: the program records what the compiled code computes with."""
    from aotipre.pt2.reader import with_reference_values

    aoti = _model((InputSpec("args[1]", 1, "args[1]", "constant"),), "wrapper_cpp")
    merged = with_reference_values(aoti, _model((ALPHA,)))
    assert merged.inputs[0].name == "alpha" and merged.inputs[0].value == 0.5
    (f,) = check_specialized(merged, SampleInputs((X, 0.5)))
    assert f.code == "AOT107"
    assert check_specialized(merged, SampleInputs((X, 2.0))) == []  # AOT105 says it


def _wrapper(names: list[str], constants: int) -> WrapperContract:
    return WrapperContract(
        inputs=tuple(WrapperInput(index=i, name=n) for i, n in enumerate(names)),
        constants=tuple(
            WrapperConstant(
                name=f"c{i}", original_fqn=None, dtype=None, shape=None, kind="Parameter"
            )
            for i in range(constants)
        ),
    )


def test_leaf_positions_only_when_the_bounds_pin_them() -> None:
    # forward(self, x, alpha) with 2 parameters kept: x is arg2_1, leaf 0 of 2
    assert tensor_leaf_positions(_wrapper(["arg2_1"], 2), 2) == [0]
    # the last tensor is the last leaf: arg5_1 of 3 leaves -> K = 3, so arg3_1 is leaf 0
    assert tensor_leaf_positions(_wrapper(["arg3_1", "arg5_1"], 0), 3) == [0, 2]
    # inductor dropped constants: K could be 3 or 4 -> not told (torch 2.13 measured case)
    assert tensor_leaf_positions(_wrapper(["arg4_1", "arg6_1"], 1), 4) is None
    assert tensor_leaf_positions(_wrapper(["x"], 0), 1) is None


def test_multi_model_without_a_default_model() -> None:
    (f,) = check_loading(_package("decoder", "encoder"), [], compile_at_deploy=False)
    assert f.code == "AOT016" and f.severity is Severity.WARNING
    assert "load_package(path, model_name='decoder')" in f.message


def test_multi_model_with_a_default_model() -> None:
    (f,) = check_loading(_package("model", "tokenizer"), [], compile_at_deploy=False)
    assert f.code == "AOT017" and f.severity is Severity.INFO
    assert "model_name='tokenizer'" in f.message and "model_name='model'" not in f.message


def test_exported_program_without_aoti_code() -> None:
    model = _model(())
    (f,) = check_loading(_package("model"), [model], compile_at_deploy=False)
    assert f.code == "AOT015" and f.severity is Severity.ERROR
    assert check_loading(_package("model"), [model], compile_at_deploy=True) == []


def test_state_dict_and_checkpoints() -> None:
    model = _model((), signature=CallSignature(args=(LEAF,), kwargs=()))
    sd = SampleInputs((), {"lin.weight": X, "lin.bias": X}, source="sd.pt")
    assert "a state_dict" in (checkpoint_kind(model, sd) or "")
    (f,) = check_checkpoint(model, sd)
    assert f.code == "AOT109" and f.message.startswith("sd.pt holds a state_dict")
    ckpt = SampleInputs((), {"model": {"w": X}, "optimizer": {}, "epoch": 3})
    assert "training checkpoint" in (checkpoint_kind(model, ckpt) or "")
    # real kwargs are never mistaken for one
    kw_model = _model((), signature=CallSignature(args=(), kwargs=(("model", LEAF),)))
    assert checkpoint_kind(kw_model, ckpt) is None
    assert checkpoint_kind(model, SampleInputs((), {"mask": X, "ids": X})) is None


# torch 2.13's vectorised CPU kernel of `table[ids] * x` (the ids loaded 16 at a time, wrapped,
# then checked through a buffer round trip), and a Triton kernel's wrap
VECTOR_WRAP = """
auto tmp0 = at::vec::VectorizedN<int64_t,2>::loadu(in_ptr0 + static_cast<int64_t>(x0), static_cast<int64_t>(16));
auto tmp13 = at::vec::Vectorized<float>::loadu(in_ptr2 + static_cast<int64_t>(x0), static_cast<int64_t>(16));
auto tmp1 = 100L;
auto tmp2 = c10::convert<int64_t>(tmp1);
auto tmp3 = at::vec::VectorizedN<int64_t,2>(tmp2);
auto tmp4 = tmp0 + tmp3;
auto tmp5 = static_cast<int64_t>(0);
auto tmp6 = at::vec::VectorizedN<int64_t,2>(tmp5);
auto tmp7 = at::vec::VecMask<int64_t,2>(tmp0 < tmp6);
auto tmp8 = decltype(tmp4)::blendv(tmp0, tmp4, tmp7.template cast<int64_t,2>());
auto tmp9 =
[&]
{
    __at_align__ std::array<int64_t, 16> tmpbuf;
    tmp8.store(tmpbuf.data(), static_cast<int64_t>(16));
    return tmpbuf;
}
()
;
auto tmp10 =
[&]
{
    __at_align__ std::array<int64_t, 16> tmpbuf;
    #pragma GCC unroll 16
    for (long x0_inner = 0; x0_inner < static_cast<int64_t>(16); x0_inner++)
    {
        tmpbuf[x0_inner] = static_cast<int64_t>(tmp9[x0_inner]);
    }
    return at::vec::VectorizedN<int64_t,2>::loadu(tmpbuf.data(), static_cast<int64_t>(16));
}
()
;
AOTI_TORCH_CHECK(((tmp10 < at::vec::VectorizedN<int64_t,2>(100L))).all_masked(), "index out of bounds: 0 <= tmp10 < 100L");"""
TRITON_WRAP = """
tmp0 = tl.load(in_ptr0 + (x1), xmask, eviction_policy='evict_last')
tmp1 = tl.full([XBLOCK], 100, tl.int32)
tmp2 = tmp0 + tmp1
tmp3 = tmp0 < 0
tmp4 = tl.where(tmp3, tmp2, tmp0)
tl.device_assert(((0 <= tmp4) & (tmp4 < 100)) | ~(xmask), "index out of bounds: 0 <= tmp4 < 100")"""


@pytest.mark.parametrize(
    "body, plain",
    [
        (
            "auto tmp0 = in_ptr0[x0];\nauto tmp1 = tmp0;\nauto tmp2 = c10::convert<int64_t>(tmp1);",
            True,
        ),
        (
            "auto tmp0 = in_ptr0[x0];\nauto tmp1 = tmp0 + 500L;\nauto tmp2 = tmp0 < 0;\n"
            "auto tmp3 = tmp2 ? tmp1 : tmp0;",
            True,
        ),
        (  # torch 2.11: the row count in a temporary of its own
            "auto tmp0 = in_ptr0[x0];\nauto tmp1 = 100L;\nauto tmp2 = c10::convert<int64_t>(tmp1);\n"
            "auto tmp3 = int64_t(tmp0 + tmp2);\nauto tmp4 = tmp0 < 0;\n"
            "auto tmp5 = tmp4 ? tmp3 : tmp0;\nauto tmp6 = tmp5;\n"
            "auto tmp7 = c10::convert<int64_t>(tmp6);",
            True,
        ),
        (  # the sum of two inputs' values is a new index
            "auto tmp0 = in_ptr0[x0];\nauto tmp1 = in_ptr1[x0];\nauto tmp2 = int64_t(tmp0 + tmp1);",
            False,
        ),
        ("auto tmp0 = in_ptr0[x0];\nauto tmp1 = tmp0 / 2L;\nauto tmp2 = tmp1;", False),
        ("auto tmp0 = in_ptr0[x0];\nauto tmp1 = tmp0 * tmp0;\nauto tmp2 = tmp1;", False),
        (VECTOR_WRAP, True),
        (VECTOR_WRAP.replace("tmp0 + tmp3", "tmp0 * tmp3"), False),
        (TRITON_WRAP, True),
        (
            TRITON_WRAP.replace(
                "tmp4 = tl.where(tmp3, tmp2, tmp0)", "tmp4 = tl.where(tmp3, tmp0, tmp2)"
            ),
            False,
        ),
    ],
)
def test_index_chains(body: str, plain: bool) -> None:
    checked = re.search(r"index out of bounds: 0 <= (tmp\d+)", body)
    variable = checked.group(1) if checked else body.rsplit("auto ", 1)[1].split(" ", 1)[0]
    assert plain_index_chain(body, variable) is plain


def test_index_chain_says_whether_negative_ids_wrap_and_reads_each_loop_scope() -> None:
    assert index_chain(VECTOR_WRAP, "tmp10") == IndexChain("in_ptr0", 100)
    assert index_chain(TRITON_WRAP, "tmp4") == IndexChain("in_ptr0", 100)
    embedding = "auto tmp0 = in_ptr1[x0];\nauto tmp1 = c10::convert<int64_t>(tmp0);"
    assert index_chain(embedding, "tmp1") == IndexChain("in_ptr1", None)
    # a kernel's second loop reuses tmp0 for another value: each check is read with the
    # definitions before it, and checks of one name that disagree are no chain
    other_loop = "\nauto tmp0 = in_ptr2[x0];\nauto tmp1 = tmp0 * tmp0;"
    check = '\nAOTI_TORCH_CHECK(tmp1 < 9L, "index out of bounds: 0 <= tmp1 < 9L");'
    assert index_chain(embedding + check, "tmp1") == IndexChain("in_ptr1", None)
    assert index_chain(embedding + check + other_loop + check, "tmp1") is None


def test_foreign_zips_are_named() -> None:
    ts = ["ts/data.pkl", "ts/code/__torch__.py", "ts/constants.pkl", "ts/version"]
    assert "TorchScript archive (torch.jit.save)" in (describe_foreign_zip(ts, "ts") or "")
    sd = ["sd/data.pkl", "sd/data/0", "sd/version"]
    assert "a torch.save file" in (describe_foreign_zip(sd, "sd") or "")
    assert describe_foreign_zip(["x/readme.txt"], "x") is None


def test_missing_and_extra_positional_scalars_say_what_the_compiled_model_does() -> None:
    """Measured (torch 2.13, AOTI package of forward(x, alpha, top_k=3, *, normalize)): omitting
    alpha, or passing top_k=5 positionally, runs and returns the exported-value output."""
    from aotipre.checks.inputs import check_inputs
    from aotipre.pt2.spec import Dim, TensorSpec

    x = InputSpec(
        "x", 0, "args[0]", "tensor", TensorSpec("float32", (Dim(3), Dim(8)), None, "cpu"), 0
    )
    sig = CallSignature(args=(LEAF, LEAF), kwargs=(("normalize", LEAF),), arg_names=("x", "alpha"))
    model = _model((x, ALPHA, NORMALIZE), signature=sig)
    (f,) = check_inputs(model, SampleInputs((X,), {"normalize": True}))
    assert f.code == "AOT101" and "computes with what export specialized (alpha=0.5)" in f.message
    (g,) = check_inputs(model, SampleInputs((X, 0.5, 5), {"normalize": True}))
    assert g.code == "AOT101" and "silently ignores the extra non-tensor value(s) 5" in g.message


def test_no_compiled_code_does_not_stop_the_compile_stage() -> None:
    """AOT015 is an error of the deployment, but the dynamic stages still check the
    ExportedProgram by compiling it; other errors (bad inputs) still block them."""
    from aotipre.api import _static_blockers
    from aotipre.findings import codes

    model = _model(())
    no_code = codes.get("AOT015").finding("x", model="model")
    bad_dtype = codes.get("AOT201").finding("y", model="model")
    index = codes.get("AOT308").finding("z", model="model")
    assert _static_blockers([no_code, index], model) == []
    assert _static_blockers([no_code, bad_dtype], model) == ["AOT201"]


def test_a_sample_inside_its_storage_against_an_alignment_assert() -> None:
    """torch 2.15 compiled with alignment_asserts_inputs writes `assert_alignment(arg0_1, 16,
    "input");` (unconditional): a sample that starts 1 float into its storage is refused at
    every call (AOT616, static); 4 floats in (16 bytes) is aligned; a wrapper that copies
    misaligned inputs (the default) or checks them only under the runtime check says nothing."""
    from aotipre.checks.inputs import check_inputs
    from aotipre.pt2.spec import Dim, TensorSpec
    from aotipre.pt2.wrapper import parse_wrapper_cpp

    body = (
        "void AOTInductorModel::run_impl(AtenTensorHandle* input_handles) {\n"
        'inputs_info_[0].name = "arg0_1";\n{}\n} // AOTInductorModel::run_impl\n'
    )
    policies = {}
    for line in (
        'assert_alignment(arg0_1, 16, "input");',
        'if (_check_aoti_runtime_check_inputs_env()) { assert_alignment(arg0_1, 16, "input"); }',
        "if ((reinterpret_cast<std::uintptr_t>(arg0_1.data_ptr()) & (16 -1)) != 0) {",
    ):
        text = 'inputs_info_[0].name = "arg0_1";\n' + body.replace("{}\n", line + "\n", 1)
        (w,) = parse_wrapper_cpp(text).inputs
        policies[line[:10]] = (w.alignment, w.alignment_policy)
    assert sorted(policies.values()) == [(16, "assert"), (16, "assert_checked"), (16, "copy")]

    def spec(policy: str) -> InputSpec:
        t = TensorSpec("float32", (Dim(3), Dim(8)), (Dim(8), Dim(1)), "cuda", (), 16, policy)
        return InputSpec("x", 0, "args[0]", "tensor", tensor=t, tensor_index=0)

    def found(policy: str, offset: int) -> list[str]:
        meta = TensorMeta("float32", (3, 8), (8, 1), "cuda", storage_offset=offset)
        return [f.code for f in check_inputs(_model((spec(policy),)), SampleInputs((meta,)))]

    assert found("assert", 1) == ["AOT616"] and found("assert", 4) == []
    assert found("assert", 0) == [] and found("copy", 1) == [] and found("assert_checked", 1) == []
    meta = TensorMeta("float32", (3, 8), (8, 1), "cuda", storage_offset=1)
    (f,) = check_inputs(_model((spec("assert"),)), SampleInputs((meta,)))
    assert f.severity is Severity.ERROR and "4 bytes" in f.message and f.input == "x"


def test_an_unchecked_data_dependent_size_is_aot309() -> None:
    """Only an integer `.item()` value that sizes a tensor with no constant bound left is
    reported (tests/runner/test_contract_items_real.py builds the real packages)."""
    from aotipre.checks.contract import check_data_ranges
    from aotipre.pt2.spec import DataSymbol

    def found(*symbols: DataSymbol) -> list[str]:
        return [f.message for f in check_data_ranges(_model((), data_symbols=symbols))]

    unchecked = DataSymbol("u0", "int64", (), sizes_tensor=True)
    (message,) = found(unchecked)
    assert message.startswith("model 'model': u0 (read from a tensor at run time, int64)")
    assert "unsafe_skip_scalar_range_asserts" in message and "it still checks" not in message
    (message,) = found(DataSymbol("u1", "uint8", ("u1 == 2*s0",), sizes_tensor=True))
    assert "(it still checks u1 == 2*s0)" in message
    assert found(DataSymbol("u0", "int64", ("u0 <= 8",), sizes_tensor=True)) == []
    assert found(DataSymbol("u0", "int64", ("8 >= u0",), sizes_tensor=True)) == []
    assert found(DataSymbol("u0", "int64", (), sizes_tensor=False)) == []
    assert found(DataSymbol("u0", "float64", (), sizes_tensor=True)) == []
    assert found(DataSymbol("u0", "bool", (), sizes_tensor=True)) == []
    assert len(found(unchecked, DataSymbol("u1", "int32", (), sizes_tensor=True))) == 2
    (f,) = check_data_ranges(_model((), data_symbols=(unchecked,)))
    assert f.code == "AOT309" and f.severity is Severity.WARNING and f.actual == "u0"
    assert f.expected is None and "a value outside what export assumed" in f.message
    # with the ExportedProgram's range (a package that has it, or --exported-program)
    for rng, said in (((1, 8), "1 <= u0 <= 8"), ((1, None), "u0 >= 1"), ((None, 8), "u0 <= 8")):
        known = DataSymbol("u0", "int64", (), sizes_tensor=True, exported_range=rng)
        (f,) = check_data_ranges(_model((), data_symbols=(known,)))
        assert f.expected == said, rng
        assert f"the ExportedProgram's range {said} is no longer checked" in f.message


def test_the_exported_range_of_a_data_dependent_value_is_found_by_name() -> None:
    from aotipre.pt2.reader import with_reference_values
    from aotipre.pt2.spec import DataSymbol, SymbolRange, with_exported_ranges

    symbols = (DataSymbol("u0", "int64", sizes_tensor=True), DataSymbol("u1", "int64"))
    ranges = (SymbolRange("u0", 1, 8), SymbolRange("s0", 2, None))
    found = with_exported_ranges(symbols, ranges)
    assert [d.exported_range for d in found] == [(1, 8), None]
    assert found[0].to_dict()["exported_range"] == [1, 8]
    reference = dataclasses.replace(_model(()), symbols=ranges)
    merged = with_reference_values(_model((), data_symbols=symbols), reference)
    assert merged.data_symbols == found
