"""Tests for the torch-free wrapper.cpp parser: real torch 2.11 / 2.13 wrappers and broken text."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from aotipre.pt2.spec import Dim, DimBound
from aotipre.pt2.wrapper import (
    MAX_DATA_SYMBOLS,
    MAX_WARNINGS,
    WrapperContract,
    parse_wrapper_cpp,
    wrapper_input_names,
)

DATA = Path(__file__).parent / "data"
VERSIONS = ("211", "213")


def load(name: str) -> str:
    return (DATA / f"{name}.wrapper.cpp").read_text()


def parse(name: str) -> WrapperContract:
    return parse_wrapper_cpp(load(name))


def spec_json(spec: str | None) -> list:
    assert spec is not None
    version, tree = json.loads(spec)
    assert version == 1
    return tree


def call_leaves(in_spec: str | None) -> tuple[int, list[str]]:
    """(number of positional leaves, kwarg names) of an in_spec `((args...), {kwargs})`."""
    tree = spec_json(in_spec)
    args, kwargs = tree["children_spec"]
    return len(args["children_spec"]), json.loads(kwargs["context"])


# --- every fixture -------------------------------------------------------------------------

ALL_FIXTURES = sorted(p.name[: -len(".wrapper.cpp")] for p in DATA.glob("*.wrapper.cpp"))


@pytest.mark.parametrize("name", ALL_FIXTURES)
def test_every_fixture_parses_cleanly(name: str) -> None:
    c = parse(name)
    assert c.recognized
    assert c.warnings == ()
    assert len(c.inputs) == c.num_inputs == len(c.input_names)
    assert len(c.output_names) == c.num_outputs
    assert len(c.constants) == c.num_constants
    assert all(i.dtype is not None for i in c.inputs)
    assert all(i.rank is not None for i in c.inputs) == c.check_functions_present


def test_input_names_alone_are_the_full_parse_names() -> None:
    """wrapper_input_names (the index check reads only the names) gives parse_wrapper_cpp's
    input_names: every fixture wrapper, and text with a name set twice (the first wins), a gap
    in the indices (the names before it), no table, nothing."""
    broken = {
        'inputs_info_[0].name = "a";\ninputs_info_[0].name = "b";\ninputs_info_[1].name = "c";': (
            "a",
            "c",
        ),
        'inputs_info_[0].name = "a";\ninputs_info_[2].name = "c";': ("a",),
        'outputs_info_[0].name = "out";': (),
        "int main() { return 0; }": (),
        "  \n": (),
    }
    for text, names in broken.items():
        assert wrapper_input_names(text) == parse_wrapper_cpp(text).input_names == names
    for name in ALL_FIXTURES:
        text = load(name)
        assert wrapper_input_names(text) == parse_wrapper_cpp(text).input_names != ()


def test_fixtures_are_small() -> None:
    assert all(p.stat().st_size < 60_000 for p in DATA.iterdir())


# --- (a) two inputs sharing dynamic dims: int64 index + float mask --------------------------


@pytest.mark.parametrize("version", VERSIONS)
def test_dynamic_counts_names_constants(version: str) -> None:
    c = parse(f"dynamic_{version}")
    assert (c.num_inputs, c.num_outputs, c.num_constants) == (2, 1, 2)
    assert c.input_names == ("arg3_1", "arg4_1")
    assert c.output_names == ("output0",)
    assert [(k.name, k.original_fqn, k.dtype, k.shape) for k in c.constants] == [
        ("emb_weight", "emb.weight", "float32", (100, 16)),
        ("lin_weight", "lin.weight", "float32", (8, 16)),
    ]
    emb = c.constants[0]
    assert (emb.stride, emb.device_type, emb.kind, emb.data_size, emb.from_folded) == (
        (16, 1),
        "cpu",
        "Parameter",
        6400,
        False,
    )
    assert call_leaves(c.in_spec) == (2, [])
    assert spec_json(c.out_spec)["type"] is None  # a single tensor


@pytest.mark.parametrize("version", VERSIONS)
def test_dynamic_checks(version: str) -> None:
    c = parse(f"dynamic_{version}")
    assert c.check_functions_present and c.check_style == "per_input"
    assert c.checks_env_gated is True
    idx, mask = c.inputs
    assert (idx.index, idx.name, idx.dtype, idx.dtype_code) == (0, "arg3_1", "int64", 4)
    assert (mask.index, mask.name, mask.dtype, mask.dtype_code) == (1, "arg4_1", "float32", 6)
    for i in c.inputs:
        assert i.dtype_source == "check_function"
        # export declared batch in [1, 64]: the wrapper checks >= 2 (0/1 specialization)
        assert i.bounds == {0: (2, 64), 1: (2, 128)}
        assert i.static_dims == {}
        assert i.static_strides == {1: 1}  # stride 0 is symbolic (s64): not checked
        assert (i.device_type, i.device) == (0, "cpu")
        assert i.rank == 2
        assert i.has_check_function and i.check_complete is True
        assert i.dim_bounds() == (DimBound(2, 64), DimBound(2, 128))
        assert i.alignment is None


@pytest.mark.parametrize("version", VERSIONS)
def test_dynamic_symbol_bindings(version: str) -> None:
    c = parse(f"dynamic_{version}")
    idx, mask = c.inputs
    assert idx.size_symbols == {0: "s31", 1: "s64"}
    assert mask.size_symbols == {}  # bound once, from the first input that has the symbol
    sizes = [(b.symbol, b.input_name, b.dim) for b in c.symbols if b.kind == "size"]
    assert sizes == [("s31", "arg3_1", 0), ("s64", "arg3_1", 1)]
    assert c.symbol_sources("s31") == (("arg3_1", 0),)


def test_dynamic_213_aliases_and_asserts() -> None:
    c = parse("dynamic_213")
    assert c.aliases == {"s95": "s31", "s75": "s64"}
    assert [b.kind for b in c.symbols] == ["size", "alias", "size", "alias"]
    assert c.symbol_sources("s95") == (("arg3_1", 0),)
    assert c.asserts_present
    for i in c.inputs:
        assert i.sizes == (Dim(expr="s31"), Dim(expr="s64"))
        assert i.strides == (Dim(expr="s64"), Dim(value=1))
        assert i.size_exprs == ("s31", "s64")
        assert i.stride_exprs == ("s64", "1")
    assert [str(d) for d in c.inputs[1].shape or ()] == ["s31", "s64"]


def test_dynamic_211_has_no_aliases_or_asserts() -> None:
    c = parse("dynamic_211")
    assert c.aliases == {}
    assert not c.asserts_present
    idx, mask = c.inputs
    assert idx.sizes is None and idx.size_exprs == ("s31", "s64")
    assert idx.stride_exprs == (None, "1")
    # nothing in a 2.11 wrapper ties the mask's dims to s31/s64
    assert mask.size_exprs == (None, None)
    assert mask.shape == (Dim(), Dim())


def test_dynamic_cuda_211() -> None:
    c = parse("dynamic_cuda_211")
    assert c.warnings == ()
    for i in c.inputs:
        assert (i.device_type, i.device) == (1, "cuda")
        assert i.alignment == 16
        assert i.bounds == {0: (2, 64), 1: (2, 128)}
    assert [i.dtype for i in c.inputs] == ["int64", "float32"]
    # the message prints the number twice: "expected: 11(cuda)"
    assert '<< "1(cuda), "' in load("dynamic_cuda_211")


# --- (b) derived dim: y.shape[0] == 2 * x.shape[0] ------------------------------------------


@pytest.mark.parametrize("version", VERSIONS)
def test_derived_bounds(version: str) -> None:
    c = parse(f"derived_{version}")
    assert c.input_names == ("arg0_1", "arg1_1")
    assert c.constants == ()
    x, y = c.inputs
    assert x.bounds == {0: (2, 32)}  # export: dx in [1, 32]
    assert y.bounds == {0: (4, 64)}  # 2 * dx
    for i in (x, y):
        assert i.static_dims == {1: 3}
        assert i.static_strides == {0: 3, 1: 1}
        assert i.dtype == "float32"
    assert x.size_symbols == {0: "s77"}


def test_derived_213_assert_has_the_relation() -> None:
    x, y = parse("derived_213").inputs
    assert x.sizes == (Dim(expr="s77"), Dim(value=3))
    assert y.sizes == (Dim(expr="2*s77"), Dim(value=3))
    assert y.size_exprs == ("2*s77", "3")


def test_derived_211_cannot_tell_the_relation() -> None:
    x, y = parse("derived_211").inputs
    assert x.size_exprs == ("s77", "3")
    assert y.size_exprs == (None, "3")


# --- (c) static bf16 + int64 + kwarg ---------------------------------------------------------


@pytest.mark.parametrize("version", VERSIONS)
def test_static_dtypes_and_kwarg(version: str) -> None:
    c = parse(f"static_{version}")
    assert c.input_names == ("arg1_1", "arg2_1", "arg3_1")  # arg0_1 is the parameter
    assert call_leaves(c.in_spec) == (2, ["scale"])
    assert [(k.name, k.original_fqn, k.dtype, k.shape) for k in c.constants] == [
        ("w", "w", "bfloat16", (8, 4))
    ]
    x, ids, scale = c.inputs
    assert (x.dtype, x.dtype_code, x.static_dims, x.static_strides) == (
        "bfloat16",
        15,
        {0: 2, 1: 8},
        {0: 8, 1: 1},
    )
    assert (ids.dtype, ids.static_dims, ids.static_strides, ids.rank) == (
        "int64",
        {0: 2},
        {0: 1},
        1,
    )
    assert (scale.dtype, scale.static_dims) == ("float32", {0: 2, 1: 4})
    for i in c.inputs:
        assert i.bounds == {} and i.size_symbols == {}
        assert i.dim_bounds() == (None,) * (i.rank or 0)
    assert c.symbols == ()
    assert [str(d) for d in x.shape or ()] == ["2", "8"]


def test_static_213_asserts() -> None:
    c = parse("static_213")
    assert c.input("arg2_1").sizes == (Dim(value=2),)  # `{2L, }`
    assert c.input("arg3_1").strides == (Dim(value=4), Dim(value=1))


# --- (d) many inputs, (e) a long chunked in_spec ---------------------------------------------


@pytest.mark.parametrize("version", VERSIONS)
def test_many_inputs(version: str) -> None:
    c = parse(f"many_inputs_{version}")
    assert c.num_inputs == 12 and c.num_outputs == 2
    assert c.input_names == tuple(f"arg{i}_1" for i in range(12))
    assert call_leaves(c.in_spec) == (12, [])
    assert len(spec_json(c.out_spec)["children_spec"]) == 2
    assert [i.index for i in c.inputs] == list(range(12))
    assert {(i.dtype, tuple(i.static_dims.items())) for i in c.inputs} == {
        ("float32", ((0, 3), (1, 5)))
    }


def test_long_in_spec_is_concatenated_from_chunks() -> None:
    text = load("long_spec_213")
    assert text.count('\n    R"(') >= 2  # written as several raw-string chunks
    c = parse_wrapper_cpp(text)
    truth = json.loads((DATA / "long_spec_213.call_spec.json").read_text())
    assert c.in_spec == truth["in_spec"]  # == loader.get_call_spec()[0]
    assert c.out_spec == truth["out_spec"]
    assert len(c.in_spec or "") > 16_000
    tree = spec_json(c.in_spec)
    feats = tree["children_spec"][0]["children_spec"][0]
    assert feats["type"] == "builtins.dict"
    assert len(json.loads(feats["context"])) == 8 == c.num_inputs


def test_synthetic_chunks() -> None:
    text = 'in_spec_ =\nR"([1, {"a")"\n  R"(: [))"R"(1]}])"\n;\nout_spec_ = R"([1, null])";\n'
    c = parse_wrapper_cpp(text)
    assert c.in_spec == '[1, {"a": [)1]}]'  # chunk ending in ")" is kept
    assert c.out_spec == "[1, null]"
    assert any("in_spec_ is not valid JSON" in w for w in c.warnings)
    assert c.recognized


def test_escaped_literal_spec() -> None:
    c = parse_wrapper_cpp('in_spec_ = "[1, {\\"type\\": null}]";')
    assert c.in_spec == '[1, {"type": null}]'


# --- torch 2.11 vs 2.13 and older layouts -----------------------------------------------------


@pytest.mark.parametrize("sample", ["dynamic", "derived", "static", "many_inputs"])
def test_211_and_213_agree_on_checks(sample: str) -> None:
    old, new = parse(f"{sample}_211"), parse(f"{sample}_213")
    fields = ("in_spec", "out_spec", "input_names", "output_names", "constants", "num_inputs")
    assert [getattr(old, f) for f in fields] == [getattr(new, f) for f in fields]
    keep = ("index", "name", "dtype", "static_dims", "bounds", "static_strides", "device", "rank")
    for a, b in zip(old.inputs, new.inputs, strict=True):
        assert [getattr(a, k) for k in keep] == [getattr(b, k) for k in keep]
    assert (old.asserts_present, new.asserts_present) == (False, True)


def test_legacy_without_check_functions_falls_back_to_run_impl() -> None:
    c = parse("legacy_no_checks")
    assert not c.check_functions_present
    assert (c.check_style, c.checks_env_gated) == (None, None)
    assert c.warnings == ()
    assert c.in_spec == parse("dynamic_211").in_spec  # unescaped from "..."
    assert [k.dtype for k in c.constants] == ["float32", "float32"]  # static_cast<int32_t>(...)
    idx, mask = c.inputs
    assert (idx.dtype, idx.dtype_source) == ("int64", "kernel_call")
    assert (mask.dtype, mask.dtype_source) == ("float32", "kernel_call")
    assert idx.size_symbols == {0: "s31", 1: "s64"}
    assert idx.bounds == {} and idx.device is None and idx.rank is None
    assert not idx.has_check_function and idx.check_complete is None
    assert idx.dtype_code == 4


def test_legacy_inline_debug_compile_checks() -> None:
    c = parse("legacy_inline_checks")
    assert c.check_functions_present
    assert (c.check_style, c.checks_env_gated) == ("inline", False)
    ref = parse("dynamic_211")
    for a, b in zip(c.inputs, ref.inputs, strict=True):
        assert (a.name, a.dtype, a.bounds, a.static_strides) == (
            b.name,
            b.dtype,
            b.bounds,
            b.static_strides,
        )
        assert a.device is None  # old checks had no device check
        assert a.check_complete is True


# --- absent, empty, truncated, foreign and misleading text ----------------------------------


@pytest.mark.parametrize("text", [None, "", "   \n\t", b"", b"\xff\xfe garbage"])
def test_empty_or_absent(text: str | bytes | None) -> None:
    c = parse_wrapper_cpp(text)
    assert not c.recognized
    assert c.inputs == () and c.in_spec is None and not c.check_functions_present
    assert c.warnings


def test_random_cpp_is_not_a_wrapper() -> None:
    text = "#include <vector>\nint main() {\n  if (x != y) { return 1; }\n  return 0;\n}\n"
    c = parse_wrapper_cpp(text)
    assert not c.recognized
    assert any("does not look like an AOTI wrapper" in w for w in c.warnings)


def test_truncated_in_a_check_function() -> None:
    text = load("dynamic_213")
    cut = text.index("dim value is too large at 1", text.index("check_input_1("))
    c = parse_wrapper_cpp(text[:cut])
    assert c.recognized and c.check_functions_present
    idx, mask = c.inputs
    assert idx.check_complete is True and idx.bounds == {0: (2, 64), 1: (2, 128)}
    assert mask.check_complete is False
    assert mask.bounds == {0: (2, 64), 1: (2, 128)}  # the `if` was read before the cut
    assert mask.device is None and mask.static_strides == {}
    assert any("check_input_1 is cut off" in w for w in c.warnings)
    assert any("run_impl not found" in w for w in c.warnings)


def test_truncated_inside_the_spec() -> None:
    text = load("long_spec_213")
    c = parse_wrapper_cpp(text[: text.index('R"(') + 5000])
    assert c.in_spec is None
    assert any("not terminated" in w for w in c.warnings)
    assert c.input_names == tuple(f"arg{i}_{1}" for i in range(8))


def test_truncation_anywhere_never_raises() -> None:
    text = load("dynamic_cuda_211")
    for cut in range(0, len(text), 997):
        parse_wrapper_cpp(text[:cut])


def _misleading(old: str, new: str) -> WrapperContract:
    text = load("dynamic_213")
    assert old in text
    return parse_wrapper_cpp(text.replace(old, new, 1))


def test_garbage_number_in_a_condition() -> None:
    c = _misleading("if (arg3_1_size[0] > 64)", "if (arg3_1_size[0] > 6.4e1)")
    assert c.inputs[0].bounds[0] == (2, None)
    assert c.inputs[0].check_complete is False
    assert any("not understood" in w and "6.4e1" in w for w in c.warnings)


def test_condition_and_message_disagree() -> None:
    c = _misleading("if (arg3_1_size[0] < 2)", "if (arg3_1_size[0] < 7)")
    assert c.inputs[0].bounds[0] == (7, 64)  # the condition is what runs
    assert any("message says lower value 2" in w for w in c.warnings)


def test_empty_range_and_negative_values() -> None:
    c = _misleading("if (arg3_1_size[1] > 128)", "if (arg3_1_size[1] > -1)")
    assert any("negative value" in w for w in c.warnings)
    assert any("range is empty" in w for w in c.warnings)


def test_check_of_the_wrong_handle_or_name() -> None:
    c = _misleading("ConstantHandle(input_handles[1])", "ConstantHandle(input_handles[0])")
    assert any("check_input_1 checks input_handles[0]" in w for w in c.warnings)
    assert any("more than one check function" in w for w in c.warnings)
    c = _misleading("if (arg4_1_size[0] < 2)", "if (arg3_1_size[0] < 2)")
    assert any("tests arg3_1, not arg4_1" in w for w in c.warnings)


def test_unknown_dtype_and_device() -> None:
    c = _misleading("aoti_torch_dtype_int64()", "aoti_torch_dtype_int99()")
    assert c.inputs[0].dtype == "int99"
    assert any("unknown dtype 'int99'" in w for w in c.warnings)
    c = _misleading("arg3_1_expected_device_type = 0;", "arg3_1_expected_device_type = 99;")
    assert (c.inputs[0].device_type, c.inputs[0].device) == (99, None)
    assert any("unknown device type number 99" in w for w in c.warnings)


def test_counts_that_do_not_add_up() -> None:
    c = _misleading("AOTInductorModelBase(2,", "AOTInductorModelBase(3,")
    assert len(c.inputs) == 3 and c.inputs[2].name is None
    assert any("declares 3 inputs but inputs_info_ names 2" in w for w in c.warnings)
    assert any("no check function for inputs [2]" in w for w in c.warnings)


def test_implausible_input_count() -> None:
    c = _misleading("AOTInductorModelBase(2,", "AOTInductorModelBase(999999999,")
    assert c.num_inputs == 999999999 and len(c.inputs) == 2
    assert any("implausible input count" in w for w in c.warnings)


def test_a_check_function_full_of_garbage() -> None:
    text = (
        "static void check_input_0(AtenTensorHandle* input_handles) {\n"
        "  if (foo(bar) != 3) { boom(); }\n"
        "  if (1 != x_size[0]) { }\n"
        "}\n"
        "static void check_input_1(AtenTensorHandle* input_handles) {\n"
        "  auto x = input_handles[99999999];\n"
        "  if (x_size[0] < 1e309) { }\n"
        "}\n"
    )
    c = parse_wrapper_cpp(text)
    assert not c.recognized and not c.check_functions_present and c.inputs == ()
    assert any("no input handle" in w for w in c.warnings)
    assert any("input_handles[99999999] but only 0 inputs exist" in w for w in c.warnings)


def test_check_for_an_undeclared_input_is_skipped() -> None:
    c = _misleading("ConstantHandle(input_handles[1])", "ConstantHandle(input_handles[7])")
    assert len(c.inputs) == 2 and not c.inputs[1].has_check_function
    assert any("input_handles[7] but only 2 inputs exist" in w for w in c.warnings)


def test_warnings_are_capped() -> None:
    body = "".join(f"  if (junk{i}) {{ }}\n" for i in range(3 * MAX_WARNINGS))
    text = (
        "static void check_input_0(AtenTensorHandle* input_handles) {\n"
        "  ConstantHandle a = ConstantHandle(input_handles[0]);\n" + body + "}\n"
    )
    c = parse_wrapper_cpp(text)
    assert len(c.warnings) == MAX_WARNINGS + 1
    assert c.warnings[-1].endswith("more warnings not shown")


def test_adversarial_large_text_is_fast() -> None:
    chunks = [
        "if (" * 200_000,
        'in_spec_ = R"(' + "x" * 500_000,
        "int64_t s = " * 100_000,
        "assert_size_stride(a, {" + "1, " * 100_000,
        "(const float*)(" * 100_000,
        "void M::run_impl(" + "a" * 300_000,
    ]
    start = time.perf_counter()
    for chunk in chunks:
        parse_wrapper_cpp(chunk)
    parse_wrapper_cpp("\n".join(chunks))
    assert time.perf_counter() - start < 10


def test_package_does_not_import_torch() -> None:
    code = "import sys, aotipre.pt2.wrapper; sys.exit('torch' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0


def _run_impl(body: str) -> str:
    return (
        "void AOTInductorModel::run_impl(AtenTensorHandle* input_handles) {\n"
        + body
        + "\n} // AOTInductorModel::run_impl\n"
    )


def test_data_dependent_values_and_their_checks() -> None:
    """`.item()` values (lines as torch 2.11-2.15 write them): which checks name each, whether
    a constant bounds it (what unsafe_skip_scalar_range_asserts drops), whether it sizes a
    tensor."""
    text = _run_impl(
        "AOTI_TORCH_ERROR_CODE_CHECK(aoti_torch_item_int64(buf0, &u0_raw));\n"
        "auto u0 = u0_raw;\n"
        'if (!(u0 <= 8L)) { throw std::runtime_error("Expected u0 <= 8 but received " + '
        "std::to_string(u0)); }\n"
        'if (!(u0 <= 8L)) { throw std::runtime_error("Expected u0 <= 8 to be True but received '
        '" + std::to_string(u0)); }\n'
        "AOTI_TORCH_ERROR_CODE_CHECK(aoti_torch_item_int64(buf1, &u1_raw));\n"
        'if (!(u1 == 2L*s0)) { throw std::runtime_error("Expected u1 == 2*s0 but received " + '
        "std::to_string(u1)); }\n"
        "AOTI_TORCH_ERROR_CODE_CHECK(aoti_torch_item_float64(buf2, &u2_raw));\n"
        "const int64_t int_array_1[] = {u0, 4L};\n"
        "static constexpr int64_t int_array_2[] = {u1, 1L};\n"
    )
    found = {d.symbol: d for d in parse_wrapper_cpp(text).data_symbols}
    assert list(found) == ["u0", "u1", "u2"]
    u0, u1, u2 = found["u0"], found["u1"], found["u2"]
    assert u0.checks == ("u0 <= 8",) and u0.range_checked and u0.sizes_tensor
    assert u1.checks == ("u1 == 2*s0",) and not u1.range_checked and u1.sizes_tensor
    assert (u2.dtype, u2.checks, u2.range_checked, u2.sizes_tensor) == ("float64", (), False, False)


def test_data_dependent_values_are_bounded() -> None:
    items = "".join(
        f"AOTI_TORCH_ERROR_CODE_CHECK(aoti_torch_item_int64(b{i}, &u{i}_raw));\n"
        for i in range(MAX_DATA_SYMBOLS + 50)
    )
    assert len(parse_wrapper_cpp(_run_impl(items)).data_symbols) == MAX_DATA_SYMBOLS
