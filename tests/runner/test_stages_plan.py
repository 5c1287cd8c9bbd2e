"""Torch-free planning for the dynamic stages: synthesized inputs and the probe plan (synth.py)."""

from __future__ import annotations

import json
import zipfile
from dataclasses import replace
from pathlib import Path

import pytest

from aotipre.inputs.meta import SampleInputs, TensorMeta
from aotipre.pt2.spec import (
    CallSignature,
    Dim,
    DimBound,
    InputSpec,
    SymbolRange,
    TensorSpec,
    TreeSpec,
)
from aotipre.runner import synth
from aotipre.runner.stages import DynamicOptions
from tests.fakes.specs import token_model, with_bounds, write_package


def test_effective_ranges_take_the_narrower_aoti_bounds() -> None:
    model = with_bounds(token_model(), (DimBound(2, 64), DimBound(2, 100)))
    assert synth.effective_ranges(model) == {"s0": (2, 64), "s1": (2, 100)}
    assert synth.effective_ranges(token_model()) == {"s0": (1, 64), "s1": (2, 128)}


def test_probe_plan_min_max_over() -> None:
    plan = synth.plan_probes(token_model(), {0: (3, 10), 1: (3, 10)}, budget=1 << 22)
    got = [(c.id, c.value, c.shapes[0], c.expect) for c in plan.cases]
    assert got == [
        ("probe:s0:min", 1, (1, 10), "ok"),
        ("probe:s0:max", 64, (64, 10), "ok"),
        ("probe:s0:over", 65, (65, 10), "reject"),
        ("probe:s1:min", 2, (3, 2), "ok"),
        ("probe:s1:max", 128, (3, 128), "ok"),
        ("probe:s1:over", 129, (3, 129), "reject"),
    ]
    assert plan.cases[0].dims == ((0, 0), (1, 0))
    assert plan.notes == ()


def test_layout_cases_need_two_trailing_dims_above_one() -> None:
    # [3, 10] gets the transposed strides (1, 3); a trailing size-1 dim has no other layout
    # the strides check could refuse (torch ignores strides of size-1 dims), nor does rank 1
    cases = synth.plan_layouts(token_model(), {0: (3, 10), 1: (3, 1)})
    assert [(c.id, c.symbol, c.layout, c.strides, c.expect) for c in cases] == [
        ("probe:input0:layout", "input_ids", (0,), (1, 3), "reject")
    ]
    assert synth.plan_layouts(token_model(), {0: (1, 10), 1: (2, 2)})[0].symbol == "attention_mask"
    assert synth.plan_layouts(token_model(), {0: (5,), 1: (1, 1)}) == []
    # rank 3: the last two dims swap, the leading one stays outermost
    assert synth.plan_layouts(token_model(), {0: (2, 3, 4), 1: (1, 1)})[0].strides == (12, 1, 3)
    # rank 4: the leading dims keep their order, outermost first
    assert synth.plan_layouts(token_model(), {0: (2, 3, 4, 5), 1: (1, 1)})[0].strides == (
        60, 20, 1, 4,
    )  # fmt: skip
    # every input that can have the layout gets a case (up to MAX_LAYOUT_CASES)
    both = synth.plan_layouts(token_model(), {0: (3, 10), 1: (3, 10)})
    assert [(c.symbol, c.layout, c.strides) for c in both] == [
        ("input_ids", (0,), (1, 3)), ("attention_mask", (1,), (1, 3)),
    ]  # fmt: skip


def test_probe_budget_caps_the_max_and_drops_the_over_probe() -> None:
    plan = synth.plan_probes(token_model(), {0: (4, 10), 1: (4, 10)}, budget=400)
    by_id = {c.id: c for c in plan.cases}
    s1_max = by_id["probe:s1:max"]
    assert s1_max.capped and s1_max.value == 100 and s1_max.bound == 128
    assert "probe:s1:over" not in by_id
    assert any("exceeds the probe budget of 400" in n for n in plan.notes)


def test_unbounded_symbol_is_probed_at_its_min_and_past_the_sample() -> None:
    """No maximum (exported without one, or compiled with check_upperbound=False): nothing
    refuses a large size, so the probe runs twice the sample's value, which must work."""
    model = token_model(seq=(2, None))
    plan = synth.plan_probes(model, {0: (3, 10), 1: (3, 10)}, budget=1 << 22)
    cases = [c for c in plan.cases if c.symbol == "s1"]
    assert [(c.kind, c.value, c.expect) for c in cases] == [("min", 2, "ok"), ("beyond", 20, "ok")]
    assert cases[1].shapes == {0: (3, 20), 1: (3, 20)}
    assert any("s1: no maximum in the contract" in n and "probed at 20" in n for n in plan.notes)
    # the budget caps it: 3 x 13 elements at most per input
    capped = synth.plan_probes(model, {0: (3, 10), 1: (3, 10)}, budget=39)
    (beyond,) = [c for c in capped.cases if c.kind == "beyond"]
    assert beyond.value == 13 and any("(probe budget)" in n for n in capped.notes)
    # not even min + 1 fits: said, not probed
    tight = synth.plan_probes(model, {0: (3, 10), 1: (3, 10)}, budget=6)
    assert not [c for c in tight.cases if c.kind == "beyond"]
    assert any("over the probe budget" in n for n in tight.notes)


def _derived_model() -> object:
    x = TensorSpec("float32", (Dim(expr="s0"), Dim(value=4)), None, "cpu")
    y = TensorSpec("float32", (Dim(expr="2*s0"), Dim(value=4)), None, "cpu")
    leaf = TreeSpec(None)
    return replace(
        token_model(),
        inputs=(
            InputSpec("x", 0, "args[0]", "tensor", x, 0),
            InputSpec("y", 1, "args[1]", "tensor", y, 1),
        ),
        symbols=(SymbolRange("s0", 2, 32), SymbolRange("2*s0", 4, 64)),
        signature=CallSignature(args=(leaf, leaf), kwargs=()),
    )


def test_derived_dims_follow_their_symbol() -> None:
    plan = synth.plan_probes(_derived_model(), {0: (3, 4), 1: (6, 4)}, budget=1 << 22)
    assert [(c.id, c.shapes) for c in plan.cases] == [
        ("probe:s0:min", {0: (2, 4), 1: (4, 4)}),
        ("probe:s0:max", {0: (32, 4), 1: (64, 4)}),
        ("probe:s0:over", {0: (33, 4), 1: (66, 4)}),
    ]
    assert plan.notes == ()


def test_sample_shapes_by_path_and_kwargs() -> None:
    t = TensorSpec("float32", (Dim(expr="s0"), Dim(value=8)), None, "cpu")
    leaf = TreeSpec(None)
    model = replace(
        token_model(),
        inputs=(
            InputSpec("x", 0, "args[0]", "tensor", t, 0),
            InputSpec("mask", 1, "kwargs['mask']", "tensor", t, 1),
            InputSpec("scale", 2, "kwargs['scale']", "constant", None, None, 0.5),
        ),
        signature=CallSignature(args=(leaf,), kwargs=(("mask", leaf), ("scale", leaf))),
    )
    sample = SampleInputs(
        (TensorMeta("float32", (3, 8), (8, 1)),),
        {"scale": 0.5, "mask": TensorMeta("float32", (5, 8), (8, 1))},
    )
    assert synth.sample_tensor_shapes(model, sample) == {0: (3, 8), 1: (5, 8)}
    assert synth.parse_path("kwargs['a b'][0][\"c\"]") == ("kwargs", ["a b", 0, "c"])
    with pytest.raises(synth.PlanError):
        synth.parse_path("argz[0]")


def test_synthesize_uses_the_kernel_index_bound(tmp_path: Path) -> None:
    model = token_model(ep=False)
    package = write_package(tmp_path / "p.pt2", model, kernel_bound=500)
    plan = synth.synthesize(package, model)
    ids, mask = plan.tree["args"]
    assert ids == {"kind": "tensor", "dtype": "int64", "shape": [8, 8], "low": 0, "high": 500}
    assert mask == {"kind": "tensor", "dtype": "float32", "shape": [8, 8]}
    assert plan.tree["kwargs"] == {}
    assert plan.shapes == {0: (8, 8), 1: (8, 8)}
    assert "dynamic dims set to s0=8, s1=8" in plan.notes[0]
    assert "input_ids in [0, 500) (the smallest index bound in the AOTI kernels)" in plan.notes[1]


def test_synthesize_without_any_hint_stays_in_0_2(tmp_path: Path) -> None:
    model = token_model(ep=False)
    package = write_package(tmp_path / "p.pt2", model, kernel_bound=None)
    plan = synth.synthesize(package, model)
    assert plan.tree["args"][0]["high"] == 2
    assert "a range valid for any index input" in plan.notes[1]


def test_synthesize_finds_the_embedding_an_input_feeds(tmp_path: Path) -> None:
    model = token_model(aoti=False)
    package = write_package(tmp_path / "p.pt2", model)
    graph = {
        "graph_module": {
            "graph": {
                "tensor_values": {"p_w": {"sizes": [{"as_int": 321}, {"as_int": 8}]}},
                "nodes": [
                    {
                        "target": "torch.ops.aten.view.default",
                        "inputs": [{"name": "self", "arg": {"as_tensor": {"name": "ids"}}}],
                        "outputs": [{"as_tensor": {"name": "view"}}],
                    },
                    {
                        "target": "torch.ops.aten.embedding.default",
                        "inputs": [
                            {"name": "weight", "arg": {"as_tensor": {"name": "p_w"}}},
                            {"name": "indices", "arg": {"as_tensor": {"name": "view"}}},
                        ],
                        "outputs": [{"as_tensor": {"name": "emb"}}],
                    },
                ],
            },
            "signature": {
                "input_specs": [
                    {"parameter": {"arg": {"name": "p_w"}}},
                    {"user_input": {"arg": {"as_tensor": {"name": "ids"}}}},
                    {"user_input": {"arg": {"as_tensor": {"name": "mask"}}}},
                ]
            },
        }
    }
    with zipfile.ZipFile(package.path, "w") as zf:
        zf.writestr("pkg/archive_format", "pt2")
        zf.writestr("pkg/archive_version", "0")
        zf.writestr("pkg/models/model.json", json.dumps(graph))
    plan = synth.synthesize(package, model)
    assert plan.tree["args"][0]["high"] == 321
    assert "(the embedding it indexes)" in plan.notes[1]


def test_synthesize_builds_nested_and_keyword_inputs(tmp_path: Path) -> None:
    t = TensorSpec("bool", (Dim(value=2),), None, "cpu")
    leaf = TreeSpec(None)
    pair = TreeSpec("builtins.tuple", None, (leaf, leaf))
    model = replace(
        token_model(ep=False),
        inputs=(
            InputSpec("a[0]", 0, "args[0][0]", "tensor", t, 0),
            InputSpec("a[1]", 1, "args[0][1]", "int", None, None, 3),
            InputSpec("k", 2, "kwargs['k']", "tensor", t, 1),
        ),
        symbols=(),
        signature=CallSignature(args=(pair,), kwargs=(("k", leaf),)),
    )
    package = write_package(tmp_path / "p.pt2", model)
    plan = synth.synthesize(package, model)
    tensor = {"kind": "tensor", "dtype": "bool", "shape": [2]}
    assert plan.tree == {
        "args": [{"kind": "tuple", "items": [tensor, {"kind": "value", "value": 3}]}],
        "kwargs": {"k": tensor},
    }


def test_synthesize_refuses_without_a_contract(tmp_path: Path) -> None:
    model = replace(token_model(ep=False), inputs=(), contract_source="none")
    package = write_package(tmp_path / "p.pt2", model)
    with pytest.raises(synth.PlanError, match="no readable input contract"):
        synth.synthesize(package, model)


def test_opaque_shared_dims_of_torch_211_wrappers_follow_their_symbol(tmp_path: Path) -> None:
    # torch 2.11's wrapper binds s0/s1 from input 0 only; input 1's dims read `arg4_1.size(k)`
    base = with_bounds(token_model(ep=False), (DimBound(2, 64), DimBound(2, 128)))
    mask = base.inputs[1]
    assert mask.tensor is not None
    opaque = replace(mask.tensor, shape=(Dim(expr="arg4_1.size(0)"), Dim(expr="arg4_1.size(1)")))
    model = replace(base, inputs=(base.inputs[0], replace(mask, tensor=opaque)))
    shapes = {0: (3, 10), 1: (3, 10)}
    assert synth.infer_aliases(model, shapes, {"s0": 3, "s1": 10}) == {
        (1, 0): "s0",
        (1, 1): "s1",
    }
    plan = synth.plan_probes(model, shapes, budget=1 << 22)
    assert [c.id for c in plan.cases] == [
        "probe:s0:min", "probe:s0:max", "probe:s0:over",
        "probe:s1:min", "probe:s1:max", "probe:s1:over",
    ]  # fmt: skip
    assert plan.cases[1].shapes == {0: (64, 10), 1: (64, 10)}
    assert plan.cases[1].dims == ((0, 0), (1, 0))
    # both symbols have the sample value 4: the dim index decides
    assert synth.infer_aliases(model, {0: (4, 4), 1: (4, 4)}, {"s0": 4, "s1": 4}) == {
        (1, 0): "s0",
        (1, 1): "s1",
    }
    # without sample inputs, the bounds decide
    plan_in = synth.synthesize(write_package(tmp_path / "p.pt2", model), model)
    assert plan_in.shapes == {0: (8, 8), 1: (8, 8)}


def test_a_relative_cache_folder_is_made_absolute(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # workers, g++ and the C++ harness run in other folders: `--cache-dir dc` given from the
    # user's folder must name that folder to all of them (the harness link and the doctor's
    # canary failed with a relative one)
    monkeypatch.chdir(tmp_path)
    assert DynamicOptions(cache_dir="dc").cache_dir == str(tmp_path / "dc")
    assert DynamicOptions(cache_dir=str(tmp_path / "x")).cache_dir == str(tmp_path / "x")
    assert DynamicOptions().cache_dir is None


def test_the_offset_case_takes_the_first_tensor_input_with_values() -> None:
    """One case: the first tensor input whose sample shape has values (not a scalar, no zero
    size), one element into its storage, expected to run."""
    model = token_model()
    (case,) = synth.plan_offsets(model, {0: (3, 10), 1: (3, 10)})
    assert (case.id, case.symbol, case.kind, case.value) == (
        "probe:input0:offset",
        "input_ids",
        "offset",
        1,
    )
    assert case.offset == (0,) and case.layout == () and case.expect == "ok"
    for first in ((), (0, 10), (3, 0)):  # a scalar, an empty input: the next one
        (case,) = synth.plan_offsets(model, {0: first, 1: (3, 10)})
        assert case.id == "probe:input1:offset" and case.offset == (1,)
    (case,) = synth.plan_offsets(model, {1: (2, 2)})  # the first one's shape not known
    assert case.offset == (1,)
    assert synth.plan_offsets(model, {0: (), 1: (0,)}) == []
    assert synth.plan_offsets(model, {}) == []


def test_an_unbounded_symbol_probes_just_past_its_minimum_when_only_that_fits() -> None:
    """Sample at the minimum: twice it (4); a budget that holds 3 x 3 only: min + 1."""
    model = token_model(seq=(2, None))
    plan = synth.plan_probes(model, {0: (3, 2), 1: (3, 2)}, budget=1 << 22)
    (beyond,) = [c for c in plan.cases if c.kind == "beyond"]
    assert beyond.value == 4 and any("(2x the sample's 2)" in n for n in plan.notes)
    plan = synth.plan_probes(model, {0: (3, 2), 1: (3, 2)}, budget=9)
    (beyond,) = [c for c in plan.cases if c.kind == "beyond"]
    assert beyond.value == 3 and beyond.bound is None


def test_an_unbounded_symbol_sampled_at_zero_probes_one() -> None:
    model = token_model(seq=(0, None))
    plan = synth.plan_probes(model, {0: (3, 0), 1: (3, 0)}, budget=1 << 22)
    (beyond,) = [c for c in plan.cases if c.kind == "beyond"]
    assert beyond.value == 1 and beyond.shapes == {0: (3, 1), 1: (3, 1)}
