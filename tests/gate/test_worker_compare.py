"""The real worker's comparison and output summaries (aotipre/runner/worker/), with real
tensors: tolerances at their edge, rtol and atol each doing their own job, NaN/Inf counted."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from aotipre.runner import worker  # noqa: E402


def leaf(a: object, e: object, rtol: float | None = None, atol: float | None = None) -> dict:
    return worker.compare_leaf(0, a, e, rtol, atol)


def test_atol_alone_decides_where_eager_is_zero() -> None:
    e = torch.zeros(4, dtype=torch.float64)
    a = torch.tensor([0.0, 0.5, 1.0, 1.5], dtype=torch.float64)
    assert leaf(a, e, rtol=0.0, atol=1.0)["mismatches"] == 1  # only 1.5 > 1.0
    assert leaf(a, e, rtol=1.0, atol=0.0)["mismatches"] == 3  # rtol * |0| allows nothing
    assert leaf(a, e, rtol=0.0, atol=1.5)["mismatches"] == 0


def test_rtol_scales_with_the_eager_value() -> None:
    e = torch.tensor([100.0, 100.0, 1.0], dtype=torch.float64)
    a = torch.tensor([101.0, 102.5, 1.5], dtype=torch.float64)
    assert leaf(a, e, rtol=0.02, atol=0.0)["mismatches"] == 2  # 102.5 and 1.5
    assert leaf(a, e, rtol=0.0, atol=0.02)["mismatches"] == 3
    rec = leaf(a, e, rtol=0.5, atol=0.25)
    assert (rec["rtol"], rec["atol"], rec["mismatches"]) == (0.5, 0.25, 0)


def test_user_tolerance_replaces_only_its_own_default() -> None:
    e = torch.ones(3)
    rec = leaf(e, e, rtol=0.3)
    assert (rec["rtol"], rec["atol"]) == (0.3, 1e-5)  # float32 default atol
    rec = leaf(e, e, atol=0.7)
    assert (rec["rtol"], rec["atol"]) == (1e-4, 0.7)
    rec = leaf(e.half(), e.half())
    assert (rec["rtol"], rec["atol"]) == (1e-2, 1e-3)
    rec = leaf(e.bfloat16(), e.bfloat16())
    assert (rec["rtol"], rec["atol"]) == (5e-2, 1e-2)


def test_the_tolerance_edge_is_inclusive() -> None:
    e = torch.tensor([1.0], dtype=torch.float64)
    assert leaf(e + 0.25, e, rtol=0.0, atol=0.25)["mismatches"] == 0
    assert leaf(e + 0.2500001, e, rtol=0.0, atol=0.25)["mismatches"] == 1


def test_nan_and_inf_are_counted_on_both_sides() -> None:
    a = torch.tensor([float("nan"), float("inf"), 1.0, float("-inf")])
    e = torch.tensor([float("nan"), 1.0, 1.0, 2.0])
    rec = leaf(a, e)
    assert (rec["nan"], rec["inf"], rec["eager_nan"], rec["eager_inf"]) == (1, 2, 1, 0)
    assert rec["mismatches"] == 2  # NaN == NaN here; the two infinities differ from eager
    assert rec["max_abs"] == 0.0  # measured on the elements finite on both sides only


def test_worst_element_and_its_index() -> None:
    e = torch.zeros(2, 3, 4)
    a = e.clone()
    a[1, 2, 3] = 5.0
    a[0, 1, 1] = -2.0
    rec = leaf(a, e, rtol=0.0, atol=0.0)
    assert rec["mismatches"] == 2
    assert rec["worst_index"] == [1, 2, 3]
    assert (rec["worst_aoti"], rec["worst_eager"], rec["max_abs"]) == (5.0, 0.0, 5.0)
    assert rec["numel"] == 24 and rec["shape"] == [2, 3, 4]


def test_relative_error() -> None:
    e = torch.tensor([2.0, 4.0], dtype=torch.float64)
    a = torch.tensor([3.0, 4.0], dtype=torch.float64)
    rec = leaf(a, e, rtol=0.0, atol=0.0)
    assert rec["max_rel"] == pytest.approx(0.5) and rec["max_abs"] == pytest.approx(1.0)


def test_integers_and_bools_compare_exactly() -> None:
    e = torch.tensor([1, 2, 3])
    rec = leaf(torch.tensor([1, 2, 5]), e, rtol=1.0, atol=10.0)  # tolerances do not apply
    assert (rec["mismatches"], rec["max_abs"]) == (1, 2.0)
    assert leaf(e.clone(), e)["mismatches"] == 0
    rec = leaf(torch.tensor([True, False]), torch.tensor([True, True]))
    assert (rec["mismatches"], rec["max_abs"]) == (1, 1.0)


def test_dtype_or_shape_differences_are_structure() -> None:
    assert leaf(torch.ones(2), torch.ones(2, dtype=torch.float64))["structure"] is True
    assert leaf(torch.ones(2), torch.ones(3))["structure"] is True
    assert "structure" not in leaf(torch.ones(2), torch.ones(2))


def test_non_tensor_outputs_compare_by_value() -> None:
    assert leaf(3, 3)["equal"] is True
    rec = leaf(3, 4)
    assert (rec["kind"], rec["equal"], rec["aoti"], rec["eager"]) == ("value", False, "3", "4")


def test_output_count_difference() -> None:
    out = worker.compare_outputs((torch.ones(1),), (torch.ones(1), torch.ones(1)), None, None)
    assert out["outputs"] == []
    assert out["structure"] == "the compiled model returns 1 output(s), the ExportedProgram 2"
    same = worker.compare_outputs([torch.ones(1), torch.zeros(1)], [torch.ones(1), torch.ones(1)],
                                  None, None)  # fmt: skip
    assert same["structure"] is None
    assert [o["mismatches"] for o in same["outputs"]] == [0, 1]
    assert [o["index"] for o in same["outputs"]] == [0, 1]


def test_output_summary_counts_nan_and_inf() -> None:
    t = torch.tensor([[float("nan"), 1.0], [float("inf"), float("-inf")]])
    s = worker.tensor_summary(t)
    assert (s["nan"], s["inf"], s["dtype"], s["shape"]) == (1, 2, "float32", [2, 2])
    assert s["stride"] == [2, 1]
    clean = worker.tensor_summary(torch.ones(3))
    assert (clean["nan"], clean["inf"]) == (0, 0)
    ints = worker.tensor_summary(torch.ones(3, dtype=torch.int64))
    assert "nan" not in ints and ints["dtype"] == "int64"
    assert worker.tensor_summary(7) == {"kind": "int", "value": "7"}


def test_the_worst_element_is_the_largest_difference_not_the_largest_value() -> None:
    e = torch.tensor([10.0, 0.0], dtype=torch.float64)
    a = torch.tensor([10.5, 2.0], dtype=torch.float64)
    rec = leaf(a, e, rtol=0.0, atol=0.0)
    assert rec["worst_index"] == [1] and (rec["worst_aoti"], rec["worst_eager"]) == (2.0, 0.0)


def test_a_tensor_against_a_value_is_a_structure_difference() -> None:
    rec = leaf(torch.ones(2), 3)
    assert rec["structure"] is True
    assert (rec["dtype"], rec["shape"], rec["eager_dtype"], rec["eager_shape"]) == (
        "float32",
        [2],
        "int",
        "",
    )
    rec = leaf(3, torch.ones(2, dtype=torch.int64))
    assert (rec["dtype"], rec["eager_dtype"], rec["eager_shape"]) == ("int", "int64", [2])


def test_long_values_are_cut_at_200_characters() -> None:
    long = "x" * 300
    rec = leaf(long, long + "y")
    assert len(rec["aoti"]) == 200 and len(rec["eager"]) == 200 and rec["equal"] is False
    assert worker.tensor_summary(long)["value"] == repr(long)[:200]


def test_output_summary_names_the_rows_along_dim_0() -> None:
    # [3, 2]: NaN in row 2 only, Inf in rows 0 and 2 (two in row 0)
    t = torch.tensor([[float("inf"), float("-inf")], [1.0, 2.0], [float("nan"), float("inf")]])
    s = worker.tensor_summary(t)
    assert (s["nan"], s["inf"]) == (1, 3)
    assert (s["nan_rows"], s["nan_row_count"]) == ([2], 1)
    assert (s["inf_rows"], s["inf_row_count"]) == ([0, 2], 2)
    clean = worker.tensor_summary(torch.ones(3, 2))
    assert not any(k.endswith(("_rows", "_row_count")) for k in clean)


def test_output_summary_rows_of_a_vector_and_a_scalar() -> None:
    # a 1-D output: each element is its own row
    s = worker.tensor_summary(torch.tensor([1.0, float("nan"), float("nan")]))
    assert (s["nan_rows"], s["nan_row_count"]) == ([1, 2], 2)
    assert "inf_rows" not in s
    # a 0-dim output has no dim 0: counted, no rows
    s = worker.tensor_summary(torch.tensor(float("nan")))
    assert (s["nan"], s["inf"]) == (1, 0)
    assert "nan_rows" not in s and "nan_row_count" not in s


def test_output_summary_lists_32_rows_at_most_and_counts_them_all() -> None:
    t = torch.ones(40, 3)
    t[:, 1] = float("nan")
    s = worker.tensor_summary(t)
    assert s["nan"] == 40 and s["nan_row_count"] == 40
    assert s["nan_rows"] == list(range(32))
