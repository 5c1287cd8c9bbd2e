"""inputs/values.int_extremes: integer sample values read without torch, checked against what
torch computes of the same saved tensors (views included: a transposed view, an offset slice)."""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from aotipre.inputs import values
from aotipre.inputs.load import load_sample_inputs
from aotipre.inputs.values import MAX_VALUE_BYTES, MAX_VALUES, int_extremes


def unravel(flat: int, shape: tuple[int, ...]) -> tuple[int, ...]:
    out = []
    for n in reversed(shape):
        out.append(flat % n)
        flat //= n
    return tuple(reversed(out))


@pytest.mark.parametrize(
    "make",
    [
        lambda: torch.tensor([[3, -7, 12], [12, 0, -7]], dtype=torch.int64),
        lambda: torch.arange(24, dtype=torch.int32).reshape(4, 6).t()[1:, ::2] * 5 - 40,
        lambda: torch.randint(-100, 100, (3, 5, 2), generator=torch.Generator().manual_seed(0)).to(
            torch.int16
        ),
        lambda: torch.tensor(7, dtype=torch.uint8),
        lambda: torch.tensor([[4, -2, 9]]).expand(3, 3),
        lambda: torch.arange(12).reshape(3, 4)[:, None, 1:3].expand(3, 2, 2),
    ],
    ids=["int64", "int32 view", "int16", "uint8 scalar", "expanded", "expanded view"],
)
def test_extremes_count_and_total_agree_with_torch(tmp_path: Path, make) -> None:  # type: ignore[no-untyped-def]
    t = make()
    path = tmp_path / "sample.pt"
    torch.save(((t,), {}), path)
    (meta,) = load_sample_inputs(path).args
    ext = int_extremes(str(path), meta)
    assert ext is not None
    wide = t.to(torch.int64)
    assert (ext.min, ext.max) == (int(wide.min()), int(wide.max()))
    assert (ext.count, ext.total) == (t.numel(), int(wide.sum()))
    # the first occurrence of each, in row-major order of the view
    flat = wide.reshape(-1)
    first_min = int((flat == wide.min()).nonzero()[0])
    first_max = int((flat == wide.max()).nonzero()[0])
    assert ext.min_at == unravel(first_min, tuple(t.shape))
    assert ext.max_at == unravel(first_max, tuple(t.shape))
    assert ext.total / ext.count == pytest.approx(float(wide.double().mean()))


def test_floats_empty_and_oversized_storages_are_not_read(tmp_path: Path) -> None:
    big = MAX_VALUE_BYTES // 8 + 1
    for t in (
        torch.ones(3),
        torch.zeros(0, dtype=torch.int64),
        torch.zeros(big, dtype=torch.int64),
    ):
        path = tmp_path / "sample.pt"
        torch.save(((t,), {}), path)
        (meta,) = load_sample_inputs(path).args
        assert int_extremes(str(path), meta) is None, t.dtype


def test_a_file_of_a_few_bytes_claiming_a_billion_values_costs_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # torch.save keeps an expanded view as it is: a few KB that hold 10**9 token ids; a strided
    # base makes it go through the element loop, whose reads are counted
    read: list[tuple[int, ...]] = []

    def product(*ranges: range) -> Iterator[tuple[int, ...]]:
        for index in itertools.product(*ranges):
            read.append(index)
            assert len(read) <= 1000, "the expanded dims are read element by element"
            yield index

    monkeypatch.setattr(values, "itertools", SimpleNamespace(product=product))
    path = tmp_path / "sample.pt"
    base = torch.tensor([[5, 600, 7], [-3, 9, 600]]).t()  # (3, 2), strides (1, 3)
    torch.save(((base[:, None, :].expand(3, 10**8 // 6 * 2, 2),), {}), path)
    assert path.stat().st_size < 4096
    (meta,) = load_sample_inputs(path).args
    ext = int_extremes(str(path), meta)
    assert ext is not None and len(read) == 6  # one per distinct element, not 10**8
    assert (ext.min, ext.min_at, ext.max, ext.max_at) == (-3, (0, 0, 1), 600, (1, 0, 0))
    repeats = 10**8 // 6 * 2
    assert (ext.count, ext.total) == (6 * repeats, (5 + 600 + 7 - 3 + 9 + 600) * repeats)
    # overlapping strides over a small storage claiming more than MAX_VALUES distinct reads
    side = int(MAX_VALUES**0.5) + 1
    torch.save(((torch.arange(2 * side).as_strided((side, side), (1, 1)),), {}), path)
    (meta,) = load_sample_inputs(path).args
    read.clear()
    assert int_extremes(str(path), meta) is None and read == []


def test_metadata_no_torch_view_has_is_not_read(tmp_path: Path) -> None:
    # a hand-made file: strides that do not match the shape, or a negative stride
    path = tmp_path / "sample.pt"
    torch.save(((torch.arange(6).reshape(2, 3),), {}), path)
    (meta,) = load_sample_inputs(path).args
    assert int_extremes(str(path), meta) is not None
    for strides in ((1,), (3, 1, 1), (-3, 1), (3, -1)):
        assert int_extremes(str(path), dataclasses.replace(meta, strides=strides)) is None
    assert int_extremes(str(path), dataclasses.replace(meta, storage_offset=4)) is None  # past
