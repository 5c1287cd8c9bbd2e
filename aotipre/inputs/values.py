"""Read the values of small integer sample tensors (token ids, indices) without torch.

Only what a static check (and crash triage) needs: the smallest and largest value and where they
are, their count and sum. The storage member is read from the same torch.save zip the metadata
came from, and only for integer dtypes up to MAX_VALUE_BYTES, so a large file costs nothing.
"""

from __future__ import annotations

import array
import io
import itertools
import math
import os
import struct
import sys
import zipfile
from dataclasses import dataclass
from typing import IO

from aotipre.inputs.meta import TensorMeta, is_contiguous

MAX_VALUE_BYTES = 16 * 1024 * 1024
"""Storages larger than this are not read (2M int64 values: far more than token ids)."""
MAX_VALUES = MAX_VALUE_BYTES // 8
"""Views of more elements than this (after dims of stride 0) are not read (2M values)."""
_FORMATS = {"int64": "q", "int32": "i", "int16": "h", "int8": "b", "uint8": "B"}


@dataclass(frozen=True)
class IntExtremes:
    """The extreme values of an integer tensor, with the index of their first occurrence."""

    min: int
    min_at: tuple[int, ...]
    max: int
    max_at: tuple[int, ...]
    count: int
    total: int
    """The sum of the values (their mean is total / count)."""


def int_extremes(source: str | bytes, meta: TensorMeta) -> IntExtremes | None:
    """Min and max of an integer tensor of a torch.save file (path or bytes); None when the
    tensor is not an integer one, empty, too large, or its storage cannot be read."""
    fmt = _FORMATS.get(meta.dtype)
    if fmt is None or meta.storage_key is None or meta.numel() == 0:
        return None
    if len(meta.strides) != len(meta.shape) or min(meta.strides, default=0) < 0:
        return None  # not a view torch can make
    itemsize = struct.calcsize(fmt)
    try:
        data = _storage_bytes(source, meta.storage_key, itemsize)
    except (OSError, zipfile.BadZipFile, KeyError, ValueError):
        return None
    if data is None:
        return None
    raw, order = data
    flat = array.array(fmt)
    if flat.itemsize != itemsize:
        return None
    flat.frombytes(raw)
    if order != sys.byteorder:
        flat.byteswap()
    # dims of stride 0 (an expanded tensor) repeat the same values: read one of each, scale
    # the count and the sum; what is left is read only up to MAX_VALUES elements, so a file of
    # a few bytes claiming 10**9 elements costs nothing
    shape = tuple(1 if st == 0 else n for n, st in zip(meta.shape, meta.strides))
    repeats = math.prod(meta.shape) // max(1, math.prod(shape))
    n = math.prod(shape)
    if n > MAX_VALUES or meta.storage_offset < 0:
        return None
    if is_contiguous(shape, meta.strides):
        values = flat[meta.storage_offset : meta.storage_offset + n]
        if len(values) != n:
            return None
        lo, hi = min(values), max(values)
        return IntExtremes(
            lo, _unravel(values.index(lo), shape), hi, _unravel(values.index(hi), shape),
            n * repeats, sum(values) * repeats,
        )  # fmt: skip
    lo_v: int | None = None
    hi_v: int | None = None
    lo_at: tuple[int, ...] = ()
    hi_at: tuple[int, ...] = ()
    total = 0
    for index in itertools.product(*(range(k) for k in shape)):
        pos = meta.storage_offset + sum(i * st for i, st in zip(index, meta.strides))
        if pos < 0 or pos >= len(flat):
            return None
        v = int(flat[pos])
        total += v
        if lo_v is None or v < lo_v:
            lo_v, lo_at = v, index
        if hi_v is None or v > hi_v:
            hi_v, hi_at = v, index
    if lo_v is None or hi_v is None:
        return None
    return IntExtremes(lo_v, lo_at, hi_v, hi_at, n * repeats, total * repeats)


def _unravel(flat: int, shape: tuple[int, ...]) -> tuple[int, ...]:
    out = []
    for size in reversed(shape):
        out.append(flat % size)
        flat //= size
    return tuple(reversed(out))


def _storage_bytes(source: str | bytes, key: str, itemsize: int) -> tuple[bytes, str] | None:
    fileobj: IO[bytes]
    fileobj = io.BytesIO(source) if isinstance(source, bytes) else open(os.fspath(source), "rb")
    with fileobj, zipfile.ZipFile(fileobj) as zf:
        names = zf.namelist()
        prefix = names[0].split("/", 1)[0] + "/"
        info = zf.getinfo(f"{prefix}data/{key}")
        if info.file_size > MAX_VALUE_BYTES or info.file_size % itemsize:
            return None
        order = "little"
        if f"{prefix}byteorder" in names:
            order = zf.read(f"{prefix}byteorder")[:16].decode("ascii", "replace")
        with zf.open(info) as member:
            data = member.read(MAX_VALUE_BYTES + 1)
    if len(data) > MAX_VALUE_BYTES:
        return None
    return data, order
