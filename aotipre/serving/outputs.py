"""The dtype and shape of an AOTI-only package's outputs, read from its wrapper.cpp (best effort).

A package written by aoti_compile_and_package records no output dtypes or shapes; a server
config needs both. The wrapper's run_impl ends with `output_handles[i] = bufN.release();`, and
bufN is allocated by `aoti_torch_empty_strided(rank, int_array_a, ..., cached_torch_dtype_X,
...)` (possibly renamed by `auto bufN = std::move(bufM);  // reuse`), with
`int_array_a[] = {s23, 16L};`. Any other form (a view, an input returned, a constant) gives
None for that output: nothing is guessed.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

from aotipre.foundation.errors import PackageError
from aotipre.pt2.spec import Dim, ModelInfo, TensorSpec

_OUTPUT = re.compile(r"output_handles\[(\d+)\]\s*=\s*(buf\d+)\.release\(\);")
_MOVE = re.compile(r"auto\s+(buf\d+)\s*=\s*std::move\((buf\d+)\);")
_ALLOC = re.compile(
    r"aoti_torch_empty_strided\(\s*(\d+),\s*(int_array_\d+),\s*\w+,\s*cached_torch_dtype_(\w+),"
    r"\s*cached_torch_device_type_(\w+),[^;]*?&(buf\d+)_handle\)"
)
_ARRAY = re.compile(r"int64_t\s+(int_array_\d+)\[\]\s*=\s*\{([^}]*)\};")
_STATIC = re.compile(r"-?\d+L?")


def output_specs(wrapper_cpp: str, count: int) -> tuple[TensorSpec | None, ...]:
    """One TensorSpec (or None where the form is not the plain one) per output."""
    moved = {m.group(1): m.group(2) for m in _MOVE.finditer(wrapper_cpp)}
    allocs = {m.group(5): m for m in _ALLOC.finditer(wrapper_cpp)}
    arrays = {m.group(1): m.group(2) for m in _ARRAY.finditer(wrapper_cpp)}
    found = {int(m.group(1)): m.group(2) for m in _OUTPUT.finditer(wrapper_cpp)}
    out: list[TensorSpec | None] = []
    for i in range(count):
        buf = found.get(i)
        for _ in range(64):  # a chain of reuses, never a cycle
            if buf is None or buf in allocs or buf not in moved:
                break
            buf = moved[buf]
        alloc = allocs.get(buf) if buf is not None else None
        items = arrays.get(alloc.group(2)) if alloc is not None else None
        if alloc is None or items is None:
            out.append(None)
            continue
        dims = tuple(
            Dim(value=int(t.rstrip("L"))) if _STATIC.fullmatch(t) else Dim(expr=t)
            for t in (x.strip() for x in items.split(","))
            if t
        )
        if len(dims) != int(alloc.group(1)):
            out.append(None)
            continue
        out.append(
            TensorSpec(dtype=alloc.group(3), shape=dims, strides=None, device=alloc.group(4))
        )
    return tuple(out)


def with_wrapper_outputs(model: ModelInfo, archive: Any) -> ModelInfo:
    """`model` with the outputs its wrapper.cpp allocates (output_specs), when it records none
    itself (an AOTI-only package). Here, not in serving/triton.py: `inspect` reads them too."""
    aoti = model.aoti
    if model.outputs or model.output_tree is None or aoti is None or not aoti.wrapper_cpp:
        return model
    try:
        text = archive.read_text(aoti.wrapper_cpp)
    except (PackageError, OSError, ValueError):
        return model
    return dataclasses.replace(model, outputs=output_specs(text, model.output_tree.num_leaves()))
