"""Static boundaries (no torch): every dynamic dim at min-1, min, max, max+1 against the real
fixture contracts (ExportedProgram, AOTI-only, both with the AOTI code's narrower minimum),
derived dims at their edges, symbolic strides (padded and sliced inputs) and size-1 dims.

What the deployment does at these points is measured in test_boundaries_run.py (plain torch
and the real dynamic stages); the expectations here are those measured facts:
`input_handles[0]: dim value is too small at 0, expected it to be >= 2, but got: 1` for a
batch of 1 on aoti.pt2 (compiled min 2 although the export said 1), `... too large at 1,
expected to be <= 128, but got: 129`, and AOTI's runtime check skipping symbolic strides
(a padded mask runs and returns different numbers), so the static check is the only guard.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

import pytest

from aotipre.checks import run_static_checks
from aotipre.checks.inputs import (
    LAYOUT_REFUSED,
    LAYOUT_UNSETTLED,
    check_inputs,
    compiled_layouts,
)
from aotipre.environment.host import parse_target
from aotipre.findings import Finding, Severity
from aotipre.inputs.meta import SampleInputs, TensorMeta
from aotipre.pt2.reader import read_package
from aotipre.pt2.spec import ModelInfo

Pkg = Callable[[str], Path]


def contiguous(shape: tuple[int, ...]) -> tuple[int, ...]:
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(step)
        step *= size
    return tuple(reversed(strides))


def t(dtype: str, *shape: int, strides: tuple[int, ...] | None = None) -> TensorMeta:
    return TensorMeta(dtype, tuple(shape), strides or contiguous(tuple(shape)))


def model(pkg: Pkg, name: str) -> ModelInfo:
    return read_package(pkg(name)).models[0]


def found(findings: list[Finding]) -> list[tuple[str, str | None, int | None, object, object]]:
    return [(f.code, f.input, f.dim, f.expected, f.actual) for f in findings]


def token(batch: int, seq: int) -> SampleInputs:
    return SampleInputs((t("int64", batch, seq), t("float32", batch, seq)))


# (package, dim, value, expected findings) -- names: both.pt2 names its inputs, aoti.pt2 has
# only the wrapper's `args[0]`, `args[1]`
TOKEN_CASES = [
    # aoti.pt2 (AOTI-only contract): batch [2, 64], seq [2, 128]
    ("aoti", 0, 1, [("AOT303", "args[0]", 0, ">= 2", 1)]),
    ("aoti", 0, 2, []),
    ("aoti", 0, 64, []),
    ("aoti", 0, 65, [("AOT304", "args[0]", 0, "<= 64", 65)]),
    ("aoti", 1, 1, [("AOT303", "args[0]", 1, ">= 2", 1)]),
    ("aoti", 1, 2, []),
    ("aoti", 1, 128, []),
    ("aoti", 1, 129, [("AOT304", "args[0]", 1, "<= 128", 129)]),
    # both.pt2: the export says batch >= 1, the AOTI code checks >= 2 (AOT013's case)
    ("both", 0, 0, [("AOT303", "input_ids", 0, ">= 2", 0)]),
    ("both", 0, 1, [("AOT303", "input_ids", 0, ">= 2", 1)]),
    ("both", 0, 2, []),
    ("both", 0, 64, []),
    ("both", 0, 65, [("AOT304", "input_ids", 0, "<= 64", 65)]),
    ("both", 1, 1, [("AOT303", "input_ids", 1, ">= 2", 1)]),
    ("both", 1, 2, []),
    ("both", 1, 128, []),
    ("both", 1, 129, [("AOT304", "input_ids", 1, "<= 128", 129)]),
]


@pytest.mark.parametrize("package, dim, value, expected", TOKEN_CASES)
def test_token_dims_at_their_edges(
    pkg: Pkg, package: str, dim: int, value: int, expected: list[tuple]
) -> None:
    shape = [3, 10]
    shape[dim] = value
    assert found(check_inputs(model(pkg, package), token(*shape))) == expected


def test_aoti_narrower_minimum_is_named_in_the_message(pkg: Pkg) -> None:
    (f,) = check_inputs(model(pkg, "both"), token(1, 10))
    assert "export allows 1 but the compiled AOTI code checks >= 2" in f.message
    assert f.severity.value == "error"


def test_narrower_aoti_bounds_are_a_warning_and_the_sample_still_fails(pkg: Pkg) -> None:
    m = model(pkg, "both")
    findings, _ = run_static_checks(
        read_package(pkg("both")),
        [m],
        {m.name: token(1, 10)},
        [parse_target("cpu")],
        soft_host=False,
    )
    codes = [(f.code, f.severity.value, f.dim) for f in findings]
    assert ("AOT013", "warning", 0) in codes  # batch: export min 1, AOTI min 2
    assert ("AOT303", "error", 0) in codes
    assert not any(c == "AOT013" and d == 1 for c, _, d in codes)  # seq: both say 2..128


MLP_CASES = [
    # ep_only.pt2 (ExportedProgram only): x [batch 1..32, seq 2..64, 8]
    (0, 0, [("AOT303", "x", 0, ">= 1", 0)]),
    (0, 1, []),
    (0, 32, []),
    (0, 33, [("AOT304", "x", 0, "<= 32", 33)]),
    (1, 1, [("AOT303", "x", 1, ">= 2", 1)]),
    (1, 2, []),
    (1, 64, []),
    (1, 65, [("AOT304", "x", 1, "<= 64", 65)]),
]


@pytest.mark.parametrize("dim, value, expected", MLP_CASES)
def test_exported_program_dims_at_their_edges(
    pkg: Pkg, dim: int, value: int, expected: list[tuple]
) -> None:
    shape = [2, 16, 8]
    shape[dim] = value
    assert found(check_inputs(model(pkg, "ep_only"), SampleInputs((t("float32", *shape),)))) == (
        expected
    )


def test_exported_program_static_dim(pkg: Pkg) -> None:
    sample = SampleInputs((t("float32", 2, 16, 9),))
    # a contiguous [2, 16, 9] has stride 144 at dim 0 where the package derives 8*16: that
    # follows from the wrong size, so no AOT307 on a contiguous tensor (only AOT302)
    assert found(check_inputs(model(pkg, "ep_only"), sample)) == [("AOT302", "x", 2, 8, 9)]


@pytest.mark.parametrize(
    "n, y_rows, expected",
    [
        # derived.pt2: x [n 2..32, 4], y [2*n, 4] (the AOTI code bounds y's dim by 4..64)
        (1, 2, [("AOT303", "x", 0, ">= 2", 1), ("AOT303", "y", 0, ">= 4", 2)]),
        (2, 4, []),
        (32, 64, []),
        (33, 66, [("AOT304", "x", 0, "<= 32", 33), ("AOT304", "y", 0, "<= 64", 66)]),
        (3, 7, [("AOT306", "y", 0, 6, 7)]),
        (3, 5, [("AOT306", "y", 0, 6, 5)]),
    ],
)
def test_derived_dims_at_their_edges(pkg: Pkg, n: int, y_rows: int, expected: list[tuple]) -> None:
    sample = SampleInputs((t("float32", n, 4), t("float32", y_rows, 4)))
    assert found(check_inputs(model(pkg, "derived"), sample)) == expected


def test_shared_dim_disagreeing_at_the_edge(pkg: Pkg) -> None:
    sample = SampleInputs((t("int64", 3, 128), t("float32", 3, 129)))
    # contiguous [3, 129]: its stride 129 (not s53) follows from the size, so no AOT307
    assert found(check_inputs(model(pkg, "both"), sample)) == [
        ("AOT305", "attention_mask", 1, 128, 129),
    ]


# Strides: both.pt2 compiled input_ids/attention_mask [s43, s53] with strides (s53, 1)


@pytest.mark.parametrize(
    "which, strides, expected",
    [
        ("mask", (10, 1), []),
        ("mask", (16, 1), [("AOT307", "attention_mask", 0, 10, 16)]),  # padded: [:, :10] of 16
        ("mask", (1, 3), [("AOT307", "attention_mask", 0, 10, 1)]),  # transposed: first dim off
        ("ids", (20, 1), [("AOT307", "input_ids", 0, 10, 20)]),  # sliced: [::2] of [6, 10]
        ("ids", (9, 1), [("AOT307", "input_ids", 0, 10, 9)]),  # one below the symbolic stride
    ],
)
def test_symbolic_strides(pkg: Pkg, which: str, strides: tuple, expected: list[tuple]) -> None:
    ids = t("int64", 3, 10, strides=strides if which == "ids" else None)
    mask = t("float32", 3, 10, strides=strides if which == "mask" else None)
    assert found(check_inputs(model(pkg, "both"), SampleInputs((ids, mask)))) == expected


def test_symbolic_stride_is_evaluated_from_the_bound_symbols(pkg: Pkg) -> None:
    # ep_only.pt2: x [s77, s27, 8] with strides (8*s27, 8, 1)
    m = model(pkg, "ep_only")
    ok = SampleInputs((t("float32", 2, 16, 8),))
    assert check_inputs(m, ok) == []
    padded = SampleInputs((t("float32", 2, 16, 8, strides=(136, 8, 1)),))
    assert found(check_inputs(m, padded)) == [("AOT307", "x", 0, 128, 136)]


def test_strides_of_size_one_dims_are_not_checked(pkg: Pkg) -> None:
    # batch 1 is valid for ep_only.pt2; a size-1 dim's stride does not change the layout
    m = model(pkg, "ep_only")
    odd = SampleInputs((t("float32", 1, 16, 8, strides=(8, 8, 1)),))
    assert check_inputs(m, odd) == []
    also_seq = SampleInputs((t("float32", 1, 16, 8, strides=(999, 8, 1)),))
    assert check_inputs(m, also_seq) == []
    # ...but the other dims of the same input still are
    wrong = SampleInputs((t("float32", 1, 16, 8, strides=(128, 1, 16)),))
    assert found(check_inputs(m, wrong)) == [("AOT307", "x", 1, 8, 1)]


def test_static_strides_of_a_static_contract(pkg: Pkg) -> None:
    m = model(pkg, "strides")  # x [4, 8] static, strides (8, 1)
    assert check_inputs(m, SampleInputs((t("float32", 4, 8),))) == []
    assert found(check_inputs(m, SampleInputs((t("float32", 4, 8, strides=(1, 4)),)))) == [
        ("AOT307", "args[0]", 0, 8, 1)
    ]


def with_bounds(m: ModelInfo, dim: int, **bound: int | None) -> ModelInfo:
    """The real contract with one AOTI bound changed (as another compile could have set it)."""
    inputs = []
    for i in m.inputs:
        bounds = list(i.tensor.bounds)
        bounds[dim] = dataclasses.replace(bounds[dim], **bound)
        inputs.append(
            dataclasses.replace(i, tensor=dataclasses.replace(i.tensor, bounds=tuple(bounds)))
        )
    return dataclasses.replace(m, inputs=tuple(inputs))


def test_the_narrower_of_the_two_maxima_wins(pkg: Pkg) -> None:
    # the export says seq <= 128; an AOTI code checking <= 100 refuses 101
    m = with_bounds(model(pkg, "both"), 1, max=100)
    assert check_inputs(m, token(3, 100)) == []
    assert found(check_inputs(m, token(3, 101))) == [("AOT304", "input_ids", 1, "<= 100", 101)]
    # and an AOTI code wider than the export does not widen it
    wide = with_bounds(model(pkg, "both"), 1, max=200)
    assert found(check_inputs(wide, token(3, 129))) == [("AOT304", "input_ids", 1, "<= 128", 129)]


def test_the_narrower_minimum_is_named_only_when_the_export_allows_the_value(pkg: Pkg) -> None:
    (zero,) = check_inputs(model(pkg, "both"), token(0, 10))  # below the export's min 1 too
    assert "export allows" not in zero.message
    (one,) = check_inputs(model(pkg, "aoti"), token(1, 10))  # AOTI-only: one range
    assert "export allows" not in one.message
    assert one.message == (
        "input 'args[0]' dim 0 (s43) is 1, below the minimum 2 of its range [2, 64]"
    )


def test_a_dim_without_an_aoti_bound_uses_the_export_range(pkg: Pkg) -> None:
    m = model(pkg, "both")
    no_bounds = dataclasses.replace(m, inputs=tuple(
        dataclasses.replace(i, tensor=dataclasses.replace(i.tensor, bounds=())) for i in m.inputs
    ))  # fmt: skip
    assert check_inputs(no_bounds, token(1, 10)) == []  # the export allows batch 1
    assert found(check_inputs(no_bounds, token(65, 10))) == [
        ("AOT304", "input_ids", 0, "<= 64", 65)
    ]


def test_derived_dims_are_checked_without_known_strides(pkg: Pkg) -> None:
    m = model(pkg, "derived")
    m = dataclasses.replace(m, inputs=tuple(
        dataclasses.replace(i, tensor=dataclasses.replace(i.tensor, strides=None)) for i in m.inputs
    ))  # fmt: skip
    sample = SampleInputs((t("float32", 3, 4), t("float32", 7, 4, strides=(1, 7))))
    assert found(check_inputs(m, sample)) == [
        ("AOT306", "y", 0, 6, 7)
    ]  # strides unknown: no AOT307


def test_without_an_export_range_the_aoti_bound_is_the_range(pkg: Pkg) -> None:
    # a contract that knows the AOTI code's bounds but no range for the symbol: the message
    # must not claim what the export allows
    m = dataclasses.replace(model(pkg, "both"), symbols=())
    (f,) = check_inputs(m, token(1, 10))
    assert (f.code, f.expected, f.actual) == ("AOT303", ">= 2", 1)
    assert f.message == (
        "input 'input_ids' dim 0 (s43) is 1, below the minimum 2 of its range [2, 64]"
    )
    assert check_inputs(m, token(2, 10)) == []


def test_narrower_minimum_over_an_export_minimum_of_zero(pkg: Pkg) -> None:
    m = model(pkg, "both")
    m = dataclasses.replace(m, symbols=tuple(
        dataclasses.replace(s, min=0) if s.symbol == "s43" else s for s in m.symbols
    ))  # fmt: skip
    (f,) = check_inputs(m, token(0, 10))
    assert "export allows 0 but the compiled AOTI code checks >= 2" in f.message


def test_derived_dims_without_aoti_bounds(pkg: Pkg) -> None:
    m = model(pkg, "derived")
    m = dataclasses.replace(m, inputs=tuple(
        dataclasses.replace(i, tensor=dataclasses.replace(i.tensor, bounds=())) for i in m.inputs
    ))  # fmt: skip
    assert check_inputs(m, SampleInputs((t("float32", 3, 4), t("float32", 6, 4)))) == []
    got = check_inputs(m, SampleInputs((t("float32", 33, 4), t("float32", 66, 4))))
    assert found(got) == [("AOT304", "x", 0, "<= 32", 33), ("AOT304", "y", 0, "<= 64", 66)]


def test_the_stride_message_says_whether_the_package_wants_a_contiguous_layout(pkg: Pkg) -> None:
    (f,) = check_inputs(model(pkg, "strides"), SampleInputs((t("float32", 4, 8, strides=(1, 4)),)))
    assert f.message == (
        "input 'args[0]' has stride 1 at dim 0, the package was compiled for 8 (contiguous "
        "layout; the input's strides are [1, 4]); " + LAYOUT_UNSETTLED
    )
    assert f.severity is Severity.WARNING  # only a run tells whether the outputs are wrong
    (f,) = check_inputs(
        model(pkg, "strides"),
        SampleInputs((t("float32", 4, 8, strides=(1, 4)),)),
        deployment_checks_inputs=True,
    )
    assert f.severity is Severity.ERROR and f.message.endswith(LAYOUT_REFUSED)
    # the checked runs get it laid out as compiled: every dim compared, a size-1 dim's too
    (x,) = compiled_layouts(
        model(pkg, "strides"), SampleInputs((t("float32", 4, 8, strides=(1, 4)),))
    )
    assert (x.leaf, x.dim, x.strides, x.actual) == (0, 0, (8, 1), (1, 4))
    assert compiled_layouts(model(pkg, "strides"), SampleInputs((t("float32", 4, 8),))) == []
    # a package compiled for a transposed (column-major) [4, 8] input
    m = model(pkg, "strides")
    (x,) = m.inputs
    cols = dataclasses.replace(x, tensor=dataclasses.replace(
        x.tensor, strides=tuple(dataclasses.replace(d, value=v) for d, v in zip(x.tensor.strides, (1, 4)))
    ))  # fmt: skip
    m = dataclasses.replace(m, inputs=(cols,))
    assert check_inputs(m, SampleInputs((t("float32", 4, 8, strides=(1, 4)),))) == []
    (f,) = check_inputs(m, SampleInputs((t("float32", 4, 8),)))
    assert "(compiled layout; the input's strides are [8, 1])" in f.message
    # symbolic strides: contiguous when they evaluate to the row-major ones
    (f,) = check_inputs(
        model(pkg, "both"), SampleInputs((t("int64", 3, 10, strides=(16, 1)), t("float32", 3, 10)))
    )
    assert "(contiguous layout;" in f.message
    # a size-1 dim does not make a layout non-contiguous
    (f,) = check_inputs(
        model(pkg, "ep_only"), SampleInputs((t("float32", 1, 16, 8, strides=(128, 1, 16)),))
    )
    assert "(contiguous layout;" in f.message


def test_layout_words_with_size_one_and_unknown_strides(pkg: Pkg) -> None:
    m = model(pkg, "strides")
    (x,) = m.inputs
    static = x.tensor.shape[0]

    def contract(shape: tuple, strides: tuple) -> ModelInfo:
        dims = tuple(dataclasses.replace(static, value=v, expr=None) for v in shape)
        sdims = tuple(
            dataclasses.replace(static, value=v, expr=None) if isinstance(v, int)
            else dataclasses.replace(static, value=None, expr=v)
            for v in strides
        )  # fmt: skip
        t_ = dataclasses.replace(x.tensor, shape=dims, strides=sdims, bounds=())
        return dataclasses.replace(m, inputs=(dataclasses.replace(x, tensor=t_),))

    # compiled [4, 1, 8] with strides (8, 1, 1): contiguous (a size-1 dim's stride is free)
    unit = contract((4, 1, 8), (8, 1, 1))
    (f,) = check_inputs(unit, SampleInputs((t("float32", 4, 1, 8, strides=(16, 8, 1)),)))
    assert (f.dim, f.expected, f.actual) == (0, 8, 16)
    assert "(contiguous layout;" in f.message
    # a stride the contract cannot evaluate: the layout is not claimed to be contiguous
    odd = contract((4, 8), ("s99", 1))
    (f,) = check_inputs(odd, SampleInputs((t("float32", 4, 8, strides=(8, 2)),)))
    assert (f.dim, f.expected, f.actual) == (1, 1, 2)
    assert "(compiled layout;" in f.message


def with_export_min(m: ModelInfo, symbol: str, low: int) -> ModelInfo:
    return dataclasses.replace(m, symbols=tuple(
        dataclasses.replace(s, min=low) if s.symbol == symbol else s for s in m.symbols
    ))  # fmt: skip


def test_sizes_0_and_1_below_the_aoti_minimum_of_2_carry_the_zero_one_hint(pkg: Pkg) -> None:
    # the AOTI code compiles dynamic dims for sizes >= 2 whatever the export's Dim min
    (one,) = check_inputs(model(pkg, "both"), token(1, 10))  # export min 1
    assert one.hint is not None
    assert one.hint.startswith("AOTInductor specializes sizes 0 and 1 away")
    assert "to accept 1, export under" in one.hint
    (zero,) = check_inputs(with_export_min(model(pkg, "both"), "s43", 0), token(0, 10))
    assert zero.hint is not None and "to accept 0, export under" in zero.hint
    (seq,) = check_inputs(model(pkg, "aoti"), token(3, 1))  # AOTI-only, seq [2, 128]
    assert (seq.code, seq.dim) == ("AOT303", 1)
    assert seq.hint is not None and "to accept 1, export under" in seq.hint


def test_other_minimums_carry_no_zero_one_hint(pkg: Pkg) -> None:
    # no AOTI bound (ExportedProgram only, seq min 2): the export's own minimum
    (seq,) = check_inputs(model(pkg, "ep_only"), SampleInputs((t("float32", 2, 1, 8),)))
    assert (seq.code, seq.dim, seq.expected) == ("AOT303", 1, ">= 2")
    assert "specializes sizes 0 and 1" not in (seq.hint or "")
    # an AOTI minimum other than 2 (derived.pt2's y: 4)
    _, y = check_inputs(
        model(pkg, "derived"), SampleInputs((t("float32", 1, 4), t("float32", 2, 4)))
    )
    assert (y.code, y.input, y.expected) == ("AOT303", "y", ">= 4")
    assert "specializes sizes 0 and 1" not in (y.hint or "")
    # a size of 2 or more below an AOTI minimum of 3
    m = with_bounds(with_export_min(model(pkg, "both"), "s43", 3), 0, min=3)
    (two,) = check_inputs(m, token(2, 10))
    assert (two.code, two.expected, two.actual) == ("AOT303", ">= 3", 2)
    assert "specializes sizes 0 and 1" not in (two.hint or "")


def test_a_size_one_dim_stride_is_skipped_on_a_non_contiguous_input(pkg: Pkg) -> None:
    # ep_only.pt2 x [s77, s27, 8], strides (8*s27, 8, 1); batch 1 with an arbitrary stride at
    # dim 0 and a transposed seq/feature: the finding is about dim 1, not the size-1 dim 0
    sample = SampleInputs((t("float32", 1, 16, 8, strides=(5, 1, 16)),))
    (f,) = check_inputs(model(pkg, "ep_only"), sample)
    assert found([f]) == [("AOT307", "x", 1, 8, 1)]


def test_an_unknown_stride_of_a_size_one_dim_is_not_called_contiguous(pkg: Pkg) -> None:
    # a compiled [1, 8] whose dim-0 stride the contract cannot evaluate: the layout is the
    # compiled one, not claimed contiguous
    m = model(pkg, "strides")
    (x,) = m.inputs
    static = x.tensor.shape[0]
    shape = (dataclasses.replace(static, value=1), dataclasses.replace(static, value=8))
    strides = (
        dataclasses.replace(static, value=None, expr="s99"),
        dataclasses.replace(static, value=1),
    )
    tensor = dataclasses.replace(x.tensor, shape=shape, strides=strides, bounds=())
    m = dataclasses.replace(m, inputs=(dataclasses.replace(x, tensor=tensor),))
    (f,) = check_inputs(m, SampleInputs((t("float32", 1, 8, strides=(8, 2)),)))
    assert found([f]) == [("AOT307", "args[0]", 1, 1, 2)]
    assert "(compiled layout; the input's strides are [8, 2])" in f.message
