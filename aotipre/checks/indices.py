"""Out-of-range indices found before anything runs: integer sample inputs whose values lie past
the rows of the embedding (or other gather) the package indexes with them."""

from __future__ import annotations

import json
import os
from collections.abc import Set

from aotipre.checks.contract import at_path
from aotipre.checks.inputs import _flatten as flatten
from aotipre.findings import Finding, codes
from aotipre.foundation.errors import PackageError
from aotipre.inputs.meta import SampleInputs, TensorMeta
from aotipre.inputs.values import int_extremes
from aotipre.pt2.archive import Archive, archive_at
from aotipre.pt2.exported import embedding_rows
from aotipre.pt2.spec import InputSpec, ModelInfo, PackageInfo


def check_index_values(
    package: PackageInfo, model: ModelInfo, sample: SampleInputs, archive: Archive | None = None
) -> list[Finding]:
    """AOT308 for each integer input holding a value outside [0, rows) of what it indexes.
    `archive`: the package's open archive (else it is opened here)."""
    ints = [
        (spec, meta)
        for spec, meta in _tensor_pairs(model, sample)
        if spec.tensor is not None and spec.tensor.dtype.startswith(("int", "uint"))
    ]
    if not ints:
        return []
    wanted = {_index_of(spec) for spec, _ in ints}
    with archive_at(package.path, archive) as opened:
        bounds = index_bounds_of_inputs(package, model, opened, wanted)
        source = _sample_bytes_or_path(sample.source, opened)
    out: list[Finding] = []
    for spec, meta in ints:
        found = bounds.get(_index_of(spec))
        if found is None or source is None:
            continue
        rows, where, lowest = found
        ext = int_extremes(source, meta)
        if ext is None:
            continue
        bad = [(ext.max, ext.max_at)] if ext.max >= rows else []
        if ext.min < lowest:
            bad.insert(0, (ext.min, ext.min_at))
        wrapped = " (a negative id counts from the end)" if lowest < 0 else ""
        for value, at in bad[:1]:
            out.append(
                codes.get("AOT308").finding(
                    f"input '{spec.name}' holds {value} at position {list(at)}, outside the "
                    f"{rows} rows of {where} it indexes (valid {lowest}..{rows - 1}{wrapped}; "
                    f"the input's values span {ext.min}..{ext.max}): the compiled model's index "
                    "check fails on it, or, compiled without index asserts, it reads out of "
                    "bounds",
                    model=model.name,
                    input=spec.name,
                    position=spec.position,
                    stage="static",
                    expected=f"{lowest}..{rows - 1}",
                    actual=value,
                )
            )
    return out


def _index_of(spec: InputSpec) -> int:
    """The key of a tensor input in index_bounds_of_inputs' answer (-1: none it can have)."""
    return spec.tensor_index if spec.tensor_index is not None else -1


def index_bounds_of_inputs(
    package: PackageInfo, model: ModelInfo, archive: Archive, wanted: Set[int] | None = None
) -> dict[int, tuple[int, str, int]]:
    """{tensor index: (rows, what it indexes, the lowest valid value)} from the ExportedProgram
    graph (an embedding's indices, directly or through views and casts: 0 is the lowest), else
    from the AOTI kernels' bounds checks whose index is loaded straight from a model input,
    in whatever kernel it is fused (-rows is the lowest where the kernel wraps negative
    indices, as `table[ids]` does). `wanted`: the tensor indices asked about (None: every
    input); the kernels are read only when the graph leaves one of them without a bound."""
    out: dict[int, tuple[int, str, int]] = {}
    try:
        if model.has_exported_program:
            per_input = embedding_rows(archive, package.root, model.name)
            out.update({i: (rows, "the embedding", 0) for i, rows in per_input.items()})
        if wanted is not None and wanted <= out.keys():
            return out  # the kernels would only add bounds for inputs not asked about
        if model.aoti is not None and model.aoti.wrapper_cpp is not None:
            for i, (rows, lowest) in _kernel_bounds(model, archive).items():
                out.setdefault(i, (rows, "the table", lowest))
    except (PackageError, OSError, ValueError, KeyError, TypeError, json.JSONDecodeError):
        return out
    return out


def _kernel_bounds(model: ModelInfo, archive: Archive) -> dict[int, tuple[int, int]]:
    """{tensor index: (rows, lowest valid value)}: the tightest of the kernels' checks."""
    # imported here: only a sample with integer inputs needs the kernel readers (the static
    # lane's start-up time, tests/test_cli.py); not triage.parsers, whose crash-log parsers
    # and diagnosis records this check never uses
    from aotipre.pt2.wrapper import wrapper_input_names
    from aotipre.triage.codegen import (
        index_chain,
        index_checks,
        kernel_call_args,
        kernel_call_order,
        kernel_params,
        kernel_source,
    )

    assert model.aoti is not None and model.aoti.wrapper_cpp is not None
    wrapper = archive.read_text(model.aoti.wrapper_cpp)
    kernels = "\n".join(
        archive.read_text(n)
        for n in archive.names()
        if n.startswith(model.aoti.directory) and n.endswith(".kernel.cpp")
    )
    names = {name: i for i, name in enumerate(wrapper_input_names(wrapper))}
    out: dict[int, tuple[int, int]] = {}
    for kernel in kernel_call_order(wrapper):
        if not kernel.startswith(("cpp_", "triton_")):
            continue
        src = kernel_source(kernels, kernel) or kernel_source(wrapper, kernel)
        args = kernel_call_args(wrapper, kernel)
        if src is None or args is None:
            continue
        params = kernel_params(src)
        for variable, upper, _ in index_checks(src):
            chain = index_chain(src, variable)
            if chain is None or chain.pointer not in params:
                continue
            if chain.wraps is not None and chain.wraps != upper:
                continue  # wrapped by another size than it is checked against: not plain
            at = params.index(chain.pointer)
            arg = args[at] if at < len(args) else None
            if arg in names:
                i = names[arg]
                lowest = -upper if chain.wraps else 0
                rows, low = out.get(i, (upper, lowest))
                out[i] = (min(rows, upper), max(low, lowest))
    return out


def _tensor_pairs(model: ModelInfo, sample: SampleInputs) -> list[tuple[InputSpec, TensorMeta]]:
    """Each tensor input of the contract with its sample tensor (by path; by order when the
    contract has no call signature)."""
    if model.signature is None:
        flat = flatten([*sample.args, *sample.kwargs.values()])
        tensors = [v for v in flat if isinstance(v, TensorMeta)]
        specs = model.tensor_inputs
        return list(zip(specs, tensors)) if len(specs) == len(tensors) else []
    out = []
    for spec in model.tensor_inputs:
        found, value = at_path(sample, spec.path)
        if found and isinstance(value, TensorMeta):
            out.append((spec, value))
    return out


def inputs_holding(
    model: ModelInfo, sample: SampleInputs, archive: Archive, value: int
) -> list[str]:
    """The integer inputs of one element whose sample value is `value`: where a data-dependent
    bound's `u0` (a tensor's .item()) can come from (the run stage's AOT615)."""
    source = _sample_bytes_or_path(sample.source, archive)
    if source is None:
        return []
    found = []
    for spec, meta in _tensor_pairs(model, sample):
        if spec.tensor is None or not spec.tensor.dtype.startswith(("int", "uint")):
            continue
        if meta.numel() != 1:
            continue
        ext = int_extremes(source, meta)
        if ext is not None and ext.min == value:
            found.append(spec.name)
    return found


def _sample_bytes_or_path(source: str, archive: Archive) -> str | bytes | None:
    """The sample file: a path, or `<package>:<member>` for inputs stored in the (open) archive."""
    if source and os.path.isfile(source):
        return source
    _, sep, member = source.rpartition(":")
    if sep and member in archive.names():
        try:
            return archive.read(member)
        except PackageError:
            return None
    return None
