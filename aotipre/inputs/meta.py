"""Torch-free description of sample inputs: tensor metadata and the (args, kwargs) tree."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any


def is_contiguous(shape: Sequence[int], strides: Sequence[int]) -> bool:
    """Row-major contiguous as torch judges it: dims of size 1 may have any stride."""
    expected = 1
    for size, stride in zip(reversed(shape), reversed(strides)):
        if size != 1 and stride != expected:
            return False
        expected *= size
    return True


@dataclass(frozen=True)
class TensorMeta:
    """What a static check needs to know about one sample tensor (no data, no torch)."""

    dtype: str
    """Canonical torch dtype name (float32, int64, bfloat16, ...)."""
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    device: str = "cpu"
    """Device type recorded in the file (cpu, cuda, ...)."""
    storage_offset: int = 0
    requires_grad: bool = False
    storage_key: str | None = field(default=None, compare=False)
    """The file's storage member (`<archive>/data/<key>`) holding the values, for readers of
    values (aotipre.inputs.values); None for tensors without data (meta tensors)."""

    @property
    def is_contiguous(self) -> bool:
        return is_contiguous(self.shape, self.strides)

    def numel(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n

    def describe(self) -> str:
        return f"{self.dtype}[{', '.join(map(str, self.shape))}] on {self.device}"


@dataclass(frozen=True)
class SampleInputs:
    """Sample inputs as `(args, kwargs)`; leaves are TensorMeta or plain Python values."""

    args: tuple[Any, ...]
    kwargs: dict[str, Any] = field(default_factory=dict)
    source: str = ""
    """Where they came from: a path, or `<archive>:data/sample_inputs/model.pt`."""
