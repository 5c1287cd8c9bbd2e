"""aotipre.diff.behaviour: the worker's comparison of NEW's outputs with OLD's said as AOT790
findings (the records are the worker's compare op's: runner/worker/compare.py, run here on
tensors to produce them)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from aotipre.diff.behaviour import outputs_changed  # noqa: E402
from aotipre.runner.worker.compare import compare_outputs  # noqa: E402


def test_an_output_count_that_differs_names_both_counts() -> None:
    entry = compare_outputs(
        (torch.ones(2), torch.ones(2), torch.ones(1)), (torch.ones(2),), None, None
    )
    ((message, fields),) = outputs_changed(entry, "m", "old.pt2")
    assert "returns 3 output(s) where OLD (old.pt2) returned 1" in message
    assert fields == {"expected": 1, "actual": 3}


def test_each_differing_output_once_and_none_for_matching_ones() -> None:
    new = (torch.tensor([1.0, 2.0, 3.0]), torch.zeros(2, dtype=torch.int64), 4, torch.ones(2))
    old = (torch.tensor([1.0, 2.5, 3.0]), torch.zeros(2, dtype=torch.int64), 5, torch.ones(3))
    said = outputs_changed(compare_outputs(new, old, None, None), "m", "old.pt2")
    assert [m.split("output ", 1)[1].split()[0] for m, _ in said] == ["0", "2", "3"]
    assert "1 of 3 elements" in said[0][0] and "largest error 0.5 at [1]" in said[0][0]
    assert said[0][1] == {"expected": 2.5, "actual": 2.0}
    assert said[1][0].endswith(": 4, was 5")
    assert said[2][0].endswith(": float32 [2], was float32 [3]")
    assert outputs_changed(compare_outputs(new, new, None, None), "m", "old.pt2") == []
