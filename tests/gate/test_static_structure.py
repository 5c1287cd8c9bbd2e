"""Static checks of the call structure (AOT101-106), dtype (AOT201) and device (AOT202) on the
real kwargs.pt2 / both.pt2 / aoti.pt2 contracts, plus one nested contract written by hand
(TreeSpec of a tuple and a dict: no fixture exports nested inputs)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

from aotipre.checks.inputs import check_inputs
from aotipre.findings import Finding, Severity
from aotipre.inputs.meta import SampleInputs, TensorMeta
from aotipre.pt2.reader import read_package
from aotipre.pt2.spec import CallSignature, ModelInfo, TreeSpec

Pkg = Callable[[str], Path]


def t(dtype: str, *shape: int, device: str = "cpu") -> TensorMeta:
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(step)
        step *= size
    return TensorMeta(dtype, tuple(shape), tuple(reversed(strides)), device=device)


def model(pkg: Pkg, name: str) -> ModelInfo:
    return read_package(pkg(name)).models[0]


def found(findings: list[Finding]) -> list[tuple]:
    return [(f.code, f.severity.value, f.input, f.expected, f.actual) for f in findings]


X, MASK = t("float32", 3, 8), t("float32", 3, 8)


def test_kwargs_contract_accepts_its_inputs(pkg: Pkg) -> None:
    assert (
        check_inputs(model(pkg, "kwargs"), SampleInputs((X,), {"mask": MASK, "scale": 0.5})) == []
    )


def test_missing_kwarg(pkg: Pkg) -> None:
    got = check_inputs(model(pkg, "kwargs"), SampleInputs((X,), {"scale": 0.5}))
    assert found(got) == [("AOT102", "error", "mask", "mask", None)]
    assert got[0].message == "keyword argument 'mask' is missing"


def test_unexpected_kwarg_with_a_close_name(pkg: Pkg) -> None:
    got = check_inputs(
        model(pkg, "kwargs"), SampleInputs((X,), {"mask": MASK, "scale": 0.5, "masks": MASK})
    )
    assert found(got) == [("AOT103", "error", "masks", ["mask", "scale"], "masks")]
    assert got[0].hint == "did you mean 'mask'?"


def test_unexpected_kwarg_without_a_close_name(pkg: Pkg) -> None:
    got = check_inputs(
        model(pkg, "kwargs"), SampleInputs((X,), {"mask": MASK, "scale": 0.5, "zzz": 1})
    )
    assert found(got)[0][0] == "AOT103"
    assert got[0].hint == "the model takes keyword arguments ['mask', 'scale']"


def test_a_positional_argument_given_as_keyword(pkg: Pkg) -> None:
    got = check_inputs(model(pkg, "kwargs"), SampleInputs((), {"x": X, "mask": MASK, "scale": 0.5}))
    assert [f.code for f in got] == ["AOT101", "AOT103"]
    assert got[1].hint == "'x' is a positional argument of the exported model; pass it positionally"
    both = check_inputs(model(pkg, "both"), SampleInputs((t("int64", 3, 10),), {"z": 1}))
    assert both[1].hint == "the model takes no keyword arguments"


def test_constant_mismatch_is_an_error(pkg: Pkg) -> None:
    # the compiled model ignores the value passed and computes with the exported one
    got = check_inputs(model(pkg, "kwargs"), SampleInputs((X,), {"mask": MASK, "scale": 0.7}))
    assert found(got) == [("AOT105", "error", "scale", 0.5, 0.7)]


def test_a_tensor_where_a_scalar_was_exported(pkg: Pkg) -> None:
    got = check_inputs(
        model(pkg, "kwargs"), SampleInputs((X,), {"mask": MASK, "scale": t("float32")})
    )
    assert found(got) == [("AOT106", "error", "scale", "constant", "tensor")]


def test_a_scalar_where_a_tensor_was_exported(pkg: Pkg) -> None:
    got = check_inputs(model(pkg, "kwargs"), SampleInputs((X,), {"mask": 1.0, "scale": 0.5}))
    assert found(got) == [("AOT106", "error", "mask", "tensor", "a float")]


def test_arg_count(pkg: Pkg) -> None:
    ids, mask = t("int64", 3, 10), t("float32", 3, 10)
    got = check_inputs(model(pkg, "both"), SampleInputs((ids,)))
    assert found(got) == [("AOT101", "error", None, 2, 1)]
    assert "(input_ids, attention_mask)" in got[0].message
    extra = check_inputs(model(pkg, "both"), SampleInputs((ids, mask, mask)))
    assert found(extra) == [("AOT101", "error", None, 2, 3)]
    # the AOTI-only contract (wrapper.cpp's in_spec) counts the same way
    only = check_inputs(model(pkg, "aoti"), SampleInputs((ids,)))
    assert found(only) == [("AOT101", "error", None, 2, 1)]


def test_rank(pkg: Pkg) -> None:
    got = check_inputs(
        model(pkg, "both"), SampleInputs((t("int64", 3, 10, 1), t("float32", 3, 10)))
    )
    assert found(got) == [("AOT301", "error", "input_ids", 2, 3)]


def test_dtype_and_device(pkg: Pkg) -> None:
    got = check_inputs(model(pkg, "both"), SampleInputs((t("int32", 3, 10), t("float32", 3, 10))))
    assert found(got) == [("AOT201", "error", "input_ids", "int64", "int32")]
    assert got[0].hint == "cast it with .to(torch.int64) before calling the model"
    cuda = check_inputs(
        model(pkg, "both"), SampleInputs((t("int64", 3, 10, device="cuda:0"), t("float32", 3, 10)))
    )
    assert found(cuda) == [("AOT202", "error", "input_ids", "cpu", "cuda:0")]


def test_a_cpu_sample_for_a_cuda_package_is_a_warning(pkg: Pkg) -> None:
    m = model(pkg, "both")
    on_cuda = dataclasses.replace(m, inputs=tuple(
        dataclasses.replace(i, tensor=dataclasses.replace(i.tensor, device="cuda")) for i in m.inputs
    ))  # fmt: skip
    got = check_inputs(on_cuda, SampleInputs((t("int64", 3, 10), t("float32", 3, 10))))
    assert [(f.code, f.severity) for f in got] == [("AOT202", Severity.WARNING)] * 2
    unknown = dataclasses.replace(m, inputs=tuple(
        dataclasses.replace(i, tensor=dataclasses.replace(i.tensor, device="unknown")) for i in m.inputs
    ))  # fmt: skip
    assert (
        check_inputs(unknown, SampleInputs((t("int64", 3, 10, device="cuda"), t("float32", 3, 10))))
        == []
    )


LEAF = TreeSpec(None)


def nested(pkg: Pkg) -> ModelInfo:
    """both.pt2's contract, called as forward(pair: tuple[ids, mask]) / forward(d: dict)."""
    m = model(pkg, "both")
    ids, mask = m.inputs
    tup = TreeSpec("builtins.tuple", None, (LEAF, LEAF))
    return dataclasses.replace(
        m,
        signature=CallSignature(args=(tup,), kwargs=(), arg_names=("pair",)),
        inputs=(
            dataclasses.replace(ids, path="args[0][0]"),
            dataclasses.replace(mask, path="args[0][1]"),
        ),
    )


def test_nested_tuple_structure(pkg: Pkg) -> None:
    m = nested(pkg)
    ids, mask = t("int64", 3, 10), t("float32", 3, 10)
    assert check_inputs(m, SampleInputs(((ids, mask),))) == []
    assert check_inputs(m, SampleInputs(([ids, mask],))) == []  # a list where a tuple was
    got = check_inputs(m, SampleInputs(((ids,),)))
    assert found(got) == [("AOT104", "error", "pair", 2, 1)]
    got = check_inputs(m, SampleInputs((ids,)))
    assert [f.code for f in got] == ["AOT104"] and "should be a tuple of 2 items" in got[0].message
    got = check_inputs(m, SampleInputs(((ids, t("int64", 3, 10)),)))
    assert found(got) == [("AOT201", "error", "attention_mask", "float32", "int64")]


def test_nested_dict_structure(pkg: Pkg) -> None:
    m = nested(pkg)
    d = TreeSpec("builtins.dict", ["a", "b"], (LEAF, LEAF))
    ids, mask = m.inputs
    m = dataclasses.replace(
        m,
        signature=CallSignature(args=(d,), kwargs=(), arg_names=("d",)),
        inputs=(
            dataclasses.replace(ids, path="args[0]['a']"),
            dataclasses.replace(mask, path="args[0]['b']"),
        ),
    )
    good = {"a": t("int64", 3, 10), "b": t("float32", 3, 10)}
    assert check_inputs(m, SampleInputs((good,))) == []
    got = check_inputs(m, SampleInputs(({"a": good["a"], "c": good["b"]},)))
    assert [f.code for f in got] == ["AOT104"]
    assert got[0].expected == ["a", "b"] and got[0].actual == ["a", "c"]
    got = check_inputs(m, SampleInputs(((good["a"], good["b"]),)))
    assert [f.code for f in got] == ["AOT104"] and "should be a dict with keys" in got[0].message
    got = check_inputs(m, SampleInputs(({"a": good["a"], "b": (good["b"],)},)))
    assert [f.code for f in got] == ["AOT104"] and "expects a single value there" in got[0].message


def test_a_cuda_index_in_the_sample_matches_the_device_type(pkg: Pkg) -> None:
    m = model(pkg, "both")
    on_cuda = dataclasses.replace(m, inputs=tuple(
        dataclasses.replace(i, tensor=dataclasses.replace(i.tensor, device="cuda")) for i in m.inputs
    ))  # fmt: skip
    sample = SampleInputs((t("int64", 3, 10, device="cuda:1"), t("float32", 3, 10, device="cuda")))
    assert check_inputs(on_cuda, sample) == []


def test_a_contract_without_a_call_signature_counts_tensors(pkg: Pkg) -> None:
    # a wrapper.cpp without in_spec: tensors are matched in order, positional then keyword
    m = dataclasses.replace(model(pkg, "aoti"), signature=None)
    ids, mask = t("int64", 3, 10), t("float32", 3, 10)
    assert check_inputs(m, SampleInputs((ids,), {"attention_mask": mask})) == []
    assert check_inputs(m, SampleInputs(((ids, mask),))) == []
    got = check_inputs(m, SampleInputs((ids, 3), {}))
    assert found(got) == [("AOT101", "error", None, 2, 1)]
    got = check_inputs(m, SampleInputs((ids, mask), {"extra": mask}))
    assert found(got) == [("AOT101", "error", None, 2, 3)]
    wrong = check_inputs(m, SampleInputs((ids,), {"attention_mask": t("float64", 3, 10)}))
    assert found(wrong) == [("AOT201", "error", "args[1]", "float32", "float64")]


def test_a_custom_container_is_compared_by_its_leaf_count(pkg: Pkg) -> None:
    m = model(pkg, "both")
    ids, mask = m.inputs
    point = TreeSpec("mymodule.Point", ["a", "b"], (LEAF, LEAF))
    m = dataclasses.replace(
        m,
        signature=CallSignature(args=(point,), kwargs=(), arg_names=("p",)),
        inputs=(
            dataclasses.replace(ids, path="args[0][0]"),
            dataclasses.replace(mask, path="args[0][1]"),
        ),
    )
    good = (t("int64", 3, 10), t("float32", 3, 10))
    assert check_inputs(m, SampleInputs((good,))) == []
    got = check_inputs(m, SampleInputs(((good[0],),)))
    assert found(got) == [("AOT104", "error", "p", 2, 1)]
    assert "flattens to 1 value, the exported mymodule.Point has 2" in got[0].message


def test_an_input_exported_as_none(pkg: Pkg) -> None:
    m = model(pkg, "kwargs")
    x, mask, scale = m.inputs
    m = dataclasses.replace(
        m, inputs=(x, mask, dataclasses.replace(scale, kind="none", value=None))
    )
    assert check_inputs(m, SampleInputs((X,), {"mask": MASK, "scale": None})) == []
    got = check_inputs(m, SampleInputs((X,), {"mask": MASK, "scale": 0.5}))
    assert found(got) == [("AOT105", "error", "scale", None, "0.5")]
    assert got[0].message == "input 'scale' was None at export, got 0.5"


def test_kind_mismatch_messages_describe_the_exported_input(pkg: Pkg) -> None:
    got = check_inputs(model(pkg, "kwargs"), SampleInputs((X,), {"mask": 1.0, "scale": 0.5}))
    assert got[0].message == "input 'mask' should be a tensor float32[s31, 8], got a float"
    got = check_inputs(
        model(pkg, "kwargs"), SampleInputs((X,), {"mask": MASK, "scale": t("float32")})
    )
    assert (
        got[0].message == "input 'scale' was exported as a constant, got a tensor float32[] on cpu"
    )


def positional_scalars(pkg: Pkg) -> ModelInfo:
    """kwargs.pt2's contract, called as forward(x, scale, top_k, *, mask): two non-tensor
    positional arguments that export specialized (scale=0.5, top_k=3)."""
    m = model(pkg, "kwargs")
    x, mask, scale = m.inputs
    top_k = dataclasses.replace(scale, name="top_k", position=3, kind="int", value=3)
    return dataclasses.replace(
        m,
        signature=CallSignature(
            args=(LEAF, LEAF, LEAF), kwargs=(("mask", LEAF),), arg_names=("x", "scale", "top_k")
        ),
        inputs=(
            x,
            dataclasses.replace(mask, path="kwargs['mask']"),
            dataclasses.replace(scale, path="args[1]"),
            dataclasses.replace(top_k, path="args[2]"),
        ),
    )


def test_missing_positional_scalars_say_the_compiled_model_runs_without_them(pkg: Pkg) -> None:
    m = positional_scalars(pkg)
    (f,) = check_inputs(m, SampleInputs((X,), {"mask": MASK}))
    assert found([f]) == [("AOT101", "error", None, 3, 1)]
    assert f.message == (
        "1 positional arguments given, the model was exported with 3 (x, scale, top_k); the "
        "compiled model runs without the missing non-tensor argument(s) and computes with what "
        "export specialized (scale=0.5, top_k=3)"
    )
    # only the last one missing
    (g,) = check_inputs(m, SampleInputs((X, 0.5), {"mask": MASK}))
    assert g.message.endswith("computes with what export specialized (top_k=3)")


def test_a_missing_tensor_argument_says_nothing_of_running(pkg: Pkg) -> None:
    # x (a tensor) is missing with the scalars: the compiled model cannot run without it
    (f,) = check_inputs(positional_scalars(pkg), SampleInputs((), {"mask": MASK}))
    assert (
        f.message == "0 positional arguments given, the model was exported with 3 (x, scale, top_k)"
    )
    (g,) = check_inputs(model(pkg, "both"), SampleInputs((t("int64", 3, 10),)))
    assert g.message == (
        "1 positional arguments given, the model was exported with 2 (input_ids, attention_mask)"
    )


def test_extra_positional_scalars_are_silently_ignored(pkg: Pkg) -> None:
    m = positional_scalars(pkg)
    (f,) = check_inputs(m, SampleInputs((X, 0.5, 3, 7, 8, 9, 10, 11), {"mask": MASK}))
    assert found([f]) == [("AOT101", "error", None, 3, 8)]
    assert f.message == (
        "8 positional arguments given, the model was exported with 3 (x, scale, top_k); the "
        "compiled model silently ignores the extra non-tensor value(s) 7, 8, 9, 10 and computes "
        "with the defaults export used"
    )


def test_extra_positional_tensors_are_not_said_to_be_ignored(pkg: Pkg) -> None:
    m = positional_scalars(pkg)
    (f,) = check_inputs(m, SampleInputs((X, 0.5, 3, MASK, 7), {"mask": MASK}))
    assert (
        f.message == "5 positional arguments given, the model was exported with 3 (x, scale, top_k)"
    )
    ids, mask = t("int64", 3, 10), t("float32", 3, 10)
    (g,) = check_inputs(model(pkg, "both"), SampleInputs((ids, mask, mask)))
    assert g.message == (
        "3 positional arguments given, the model was exported with 2 (input_ids, attention_mask)"
    )


def with_scale(pkg: Pkg, value: object) -> ModelInfo:
    m = model(pkg, "kwargs")
    x, mask, scale = m.inputs
    return dataclasses.replace(m, inputs=(x, mask, dataclasses.replace(scale, value=value)))


def test_a_scalar_where_a_sequence_was_specialized(pkg: Pkg) -> None:
    m = with_scale(pkg, [1, 2])
    got = check_inputs(m, SampleInputs((X,), {"mask": MASK, "scale": 1}))
    assert found(got) == [("AOT105", "error", "scale", [1, 2], 1)]
    assert got[0].message.startswith("input 'scale' is 1, but export specialized it to [1, 2]")
