"""Hand-built PackageInfo and ModelInfo objects, and a minimal .pt2 zip, for torch-free tests."""

from __future__ import annotations

import json
import zipfile
from dataclasses import replace
from pathlib import Path

from aotipre.pt2.spec import (
    AotiPart,
    CallSignature,
    Dim,
    DimBound,
    InputSpec,
    MemberInfo,
    ModelInfo,
    PackageInfo,
    SymbolRange,
    TensorSpec,
    TreeSpec,
)

LEAF = TreeSpec(type=None)


def token_model(
    *,
    name: str = "model",
    ep: bool = True,
    aoti: bool = True,
    weights_on_disk: bool = False,
    device: str = "cpu",
    batch: tuple[int, int | None] = (1, 64),
    seq: tuple[int, int | None] = (2, 128),
) -> ModelInfo:
    """input_ids int64 [s0, s1], attention_mask float32 [s0, s1] (like fixtures' TokenModel)."""

    def tensor(dtype: str) -> TensorSpec:
        return TensorSpec(
            dtype=dtype,
            shape=(Dim(expr="s0"), Dim(expr="s1")),
            strides=(Dim(expr="s1"), Dim(value=1)),
            device=device,
        )

    inputs = (
        InputSpec("input_ids", 0, "args[0]", "tensor", tensor("int64"), 0),
        InputSpec("attention_mask", 1, "args[1]", "tensor", tensor("float32"), 1),
    )
    part = (
        AotiPart(
            directory=f"pkg/data/aotinductor/{name}/",
            device_type=device,
            platform="linux",
            machine="x86_64",
            cpu_isa=(),
            compute_capability=None,
            metadata={"AOTI_DEVICE_KEY": device},
            wrapper_cpp=None,
            shared_objects=(f"pkg/data/aotinductor/{name}/x.wrapper.so",),
            cubins=(),
            weights_on_disk=weights_on_disk,
        )
        if aoti
        else None
    )
    return ModelInfo(
        name=name,
        has_exported_program=ep,
        aoti=part,
        torch_version="2.13.0" if ep else None,
        schema_version="8.0" if ep else None,
        inputs=inputs,
        outputs=(),
        symbols=(SymbolRange("s0", *batch, name="batch"), SymbolRange("s1", *seq, name="seq")),
        signature=CallSignature(args=(LEAF, LEAF), kwargs=(), arg_names=("input_ids", "mask")),
        contract_source="exported_program" if ep else "wrapper_cpp",
        export_device=device if ep else None,
        weights_location="on_disk" if weights_on_disk else "in_so",
    )


def write_package(path: Path, model: ModelInfo, *, kernel_bound: int | None = 500) -> PackageInfo:
    """A minimal zip laid out like a .pt2 (no loadable code) and its PackageInfo."""
    members: dict[str, bytes] = {
        "pkg/archive_format": b"pt2",
        "pkg/archive_version": b"0",
    }
    if model.has_exported_program:
        members[f"pkg/models/{model.name}.json"] = json.dumps(
            {"graph_module": {"graph": {"nodes": []}, "signature": {"input_specs": []}}}
        ).encode()
        members["pkg/data/weights/weight_0"] = b"\x00" * 64
    if model.aoti is not None:
        check = (
            f'TORCH_CHECK(tmp2 < {kernel_bound}L, "index out of bounds: 0 <= tmp2 < '
            f'{kernel_bound}L");'
            if kernel_bound
            else ""
        )
        members[f"{model.aoti.directory}x.kernel.cpp"] = check.encode()
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    infos = tuple(MemberInfo(n, len(d), len(d), 0) for n, d in members.items())
    kind = (
        "both"
        if model.has_exported_program and model.aoti
        else ("exported_program" if model.has_exported_program else "aoti")
    )
    return PackageInfo(
        path=str(path),
        kind=kind,
        root="pkg",
        archive_format="pt2",
        archive_version="0",
        models=(model,),
        members=infos,
    )


def with_bounds(model: ModelInfo, bounds: tuple[DimBound | None, ...]) -> ModelInfo:
    """The same model with AOTI wrapper bounds on every tensor input."""
    inputs = tuple(
        replace(i, tensor=replace(i.tensor, bounds=bounds)) if i.tensor is not None else i
        for i in model.inputs
    )
    return replace(model, inputs=inputs)
