"""The static weight-swap check (aotipre/checks/weights.py) against a package whose compiled
code inlined a parameter: the shapes of Linear(8, 16) then Linear(16, 4), whose 4-value second
bias inductor inlines into the kernels (tests/runner/test_weights_real.py shows it with plain
torch); and a file of very many unknown names, whose work and findings stay bounded."""

from __future__ import annotations

import dataclasses

from aotipre.checks.weights import SHOWN, check_weights
from aotipre.findings import Severity
from aotipre.inputs.meta import TensorMeta
from aotipre.inputs.weights import WeightsFile
from aotipre.pt2.spec import ConstantSpec, ModelInfo, StateTensor
from tests.fakes.specs import token_model

SHAPES = {"fc1.weight": (16, 8), "fc1.bias": (16,), "fc2.weight": (4, 16), "fc2.bias": (4,)}
KEPT = ("fc1.weight", "fc1.bias", "fc2.weight")
"""What constants_info_ lists for that model (measured on torch 2.11, 2.13 and 2.14)."""


def two_layer(*, with_program: bool = True) -> ModelInfo:
    base = token_model()
    assert base.aoti is not None
    return dataclasses.replace(
        base,
        aoti=dataclasses.replace(base.aoti, wrapper_cpp="pkg/data/aotinductor/model/w.wrapper.cpp"),
        constants=tuple(
            ConstantSpec(n.replace(".", "_"), n, "float32", SHAPES[n], "Parameter", False, 0)
            for n in KEPT
        ),
        state=tuple(StateTensor(n, "Parameter", "float32", shape) for n, shape in SHAPES.items())
        if with_program
        else (),
        lifted_without_constant=1,
    )


def weights(names: dict[str, tuple[int, ...]]) -> WeightsFile:
    return WeightsFile(
        "w.pt",
        "torch.save",
        {n: TensorMeta("float32", shape, _contiguous(shape)) for n, shape in names.items()},
    )


def _contiguous(shape: tuple[int, ...]) -> tuple[int, ...]:
    strides, step = [], 1
    for d in reversed(shape):
        strides.insert(0, step)
        step *= d
    return tuple(strides)


def by_code(found: list) -> dict[str, list]:  # type: ignore[type-arg]
    out: dict[str, list] = {}  # type: ignore[type-arg]
    for f in found:
        out.setdefault(f.code, []).append(f)
    return out


def test_the_package_knows_which_parameter_it_inlined() -> None:
    assert [t.fqn for t in two_layer().baked_state] == ["fc2.bias"]
    assert two_layer().baked_state[0].inlinable


def test_a_full_state_dict_names_the_inlined_bias_as_inlined_not_as_a_typo() -> None:
    """The fuzzy match over every name said 'did you mean fc1.bias?' (a name the file holds)."""
    found = by_code(check_weights(two_layer(), weights(SHAPES)))
    assert set(found) == {"AOT066"}, found
    (f,) = found["AOT066"]
    assert f.input == "fc2.bias" and f.severity is Severity.ERROR
    assert "inlined" in f.message and "Constant not found: fc2.bias" in f.message


def test_without_the_program_the_inlined_bias_is_still_not_a_typo_of_another_name() -> None:
    found = by_code(check_weights(two_layer(with_program=False), weights(SHAPES)))
    assert set(found) == {"AOT066"}, found
    assert found["AOT066"][0].input == "fc2.bias"


def test_a_swap_that_leaves_the_inlined_bias_out_is_an_error_naming_it() -> None:
    """Every constant swapped, fc2.bias left out: plain torch accepts it and computes with the
    compiled bias (tests/runner/test_weights_real.py): not a clean swap."""
    found = by_code(check_weights(two_layer(), weights({n: SHAPES[n] for n in KEPT})))
    assert set(found) == {"AOT066"}, found
    (f,) = found["AOT066"]
    assert f.input == "fc2.bias" and f.severity is Severity.ERROR
    assert "compiled value" in f.message and "lacks it" in f.message


def test_without_the_program_a_swap_leaving_it_out_warns_with_the_count() -> None:
    found = by_code(
        check_weights(two_layer(with_program=False), weights({n: SHAPES[n] for n in KEPT}))
    )
    assert set(found) == {"AOT066"}, found
    (f,) = found["AOT066"]
    assert f.severity is Severity.WARNING and "1 lifted tensor(s)" in f.message


def test_very_many_unknown_names_give_a_bounded_number_of_findings() -> None:
    """A file of 200,000 tiny unknown tensors: one finding per name for the first SHOWN, one
    more that counts the rest (a finding and a fuzzy look-up per name grew without bound)."""
    names = {n: SHAPES[n] for n in KEPT}
    names.update({f"junk.{i}": (1,) for i in range(200_000)})
    found = check_weights(two_layer(), weights(names))
    codes = by_code(found)
    assert len(found) <= SHOWN + 2, len(found)
    assert "199,990 more names" in codes["AOT061"][-1].message
