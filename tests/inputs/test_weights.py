"""The --weights reader (torch.save state_dicts and safetensors, torch-free, every bad file one
UsageError line) and the static swap check (AOT060-AOT066) on in-memory specs."""

from __future__ import annotations

import dataclasses
import json
import os
import pickle
import struct
import zipfile
from pathlib import Path

import pytest

from aotipre.checks.weights import check_weights
from aotipre.errors import UsageError
from aotipre.inputs.weights import read_weights
from aotipre.pt2.spec import ConstantSpec
from tests.fakes.specs import token_model


def write_safetensors(
    path: Path, tensors: dict[str, tuple[str, list[int]]], **extra: object
) -> Path:
    """A safetensors file as the format documents it: 8-byte little-endian header length, the
    JSON header (dtype, shape, data_offsets per tensor), then the bytes (zeros here)."""
    sizes = {"F32": 4, "F64": 8, "F16": 2, "I64": 8}
    header: dict[str, object] = {"__metadata__": {"format": "pt"}}
    offset = 0
    for name, (tag, shape) in tensors.items():
        n = sizes[tag]
        for d in shape:
            n *= d
        header[name] = {"dtype": tag, "shape": shape, "data_offsets": [offset, offset + n]}
        offset += n
    header.update(extra)
    text = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(text)) + text + bytes(offset))
    return path


def constants(*specs: tuple[str, str, tuple[int, ...], str]) -> tuple[ConstantSpec, ...]:
    return tuple(
        ConstantSpec(fqn.replace(".", "_"), fqn, dtype, shape, kind, kind == "FoldedConstant", 0)
        for fqn, dtype, shape, kind in specs
    )


MODEL = dataclasses.replace(
    token_model(),
    constants=constants(
        ("fc.weight", "float32", (16, 8), "Parameter"),
        ("fc.bias", "float32", (16,), "Parameter"),
        ("scale", "float32", (16,), "Buffer"),
        ("_FOLDED_CONST_add", "float32", (8, 16), "FoldedConstant"),
    ),
)


def codes_of(tmp_path: Path, tensors: dict[str, tuple[str, list[int]]]) -> dict[str, str]:
    found = check_weights(
        MODEL, read_weights(write_safetensors(tmp_path / "w.safetensors", tensors))
    )
    return {f.code: f.message for f in found}


GOOD = {"fc.weight": ("F32", [16, 8]), "fc.bias": ("F32", [16]), "scale": ("F32", [16])}


def test_safetensors_that_match_have_no_finding(tmp_path: Path) -> None:
    weights = read_weights(write_safetensors(tmp_path / "w.safetensors", GOOD))
    assert weights.format == "safetensors"
    assert weights.tensors["fc.weight"].shape == (16, 8)
    assert check_weights(MODEL, weights) == []


def test_each_static_mismatch_names_the_constant_and_both_sides(tmp_path: Path) -> None:
    found = codes_of(
        tmp_path,
        {
            "fc.weight": ("F64", [8, 16]),
            "fc.biass": ("F32", [16]),
            "scale": ("F32", [16]),
            "_FOLDED_CONST_add": ("F32", [8, 16]),
            "norm.eps": ("F32", []),
        },
    )
    assert "[16, 8]" in found["AOT062"] and "[8, 16]" in found["AOT062"]
    assert "float64" in found["AOT063"] and "float32" in found["AOT063"]
    assert "did you mean 'fc.bias'" in found["AOT061"]
    assert "lacks 'fc.bias'" in found["AOT060"]
    assert "folded" in found["AOT065"] and "_FOLDED_CONST_add" in found["AOT065"]
    assert "'norm.eps'" in found["AOT066"] and "inlined" in found["AOT066"]


def test_torch_save_state_dict_is_read_without_torch(tmp_path: Path) -> None:
    """A state_dict pickled as torch.save writes it (protocol 2, storages as persistent ids)."""
    path = tmp_path / "w.pt"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as zf:
        zf.writestr("w/data.pkl", _state_dict_pickle())
        zf.writestr("w/data/0", bytes(16 * 8 * 4))
        zf.writestr("w/version", "3\n")
    weights = read_weights(path)
    assert weights.format == "torch.save"
    assert weights.tensors["fc.weight"].dtype == "float32"
    assert weights.tensors["fc.weight"].shape == (16, 8)
    found = {f.code for f in check_weights(MODEL, weights)}
    assert found == {"AOT060"}  # fc.bias and scale missing


def _state_dict_pickle() -> bytes:
    """`OrderedDict(fc.weight=<float32[16, 8]>)` in torch.save's pickle form, written by hand."""
    out = bytearray(b"\x80\x02")
    out += b"ccollections\nOrderedDict\nq\x00)Rq\x01"
    out += b"X\t\x00\x00\x00fc.weightq\x02"
    out += b"ctorch._utils\n_rebuild_tensor_v2\nq\x03("
    out += b"(X\x07\x00\x00\x00storageq\x04ctorch\nFloatStorage\nq\x05X\x01\x00\x00\x000q\x06"
    out += b"X\x03\x00\x00\x00cpuq\x07K\x80tq\x08Q"
    out += b"K\x00K\x10K\x08\x86q\tK\x08K\x01\x86q\n\x89ccollections\nOrderedDict\nq\x0b)Rq\x0c"
    out += b"tq\rRq\x0es."
    return bytes(out)


def test_bad_files_are_one_usage_error_line(tmp_path: Path) -> None:
    cases: dict[str, Path] = {"missing": tmp_path / "nope.pt", "directory": tmp_path}
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    cases["fifo"] = fifo
    good = write_safetensors(tmp_path / "good.safetensors", GOOD)
    truncated = tmp_path / "truncated.safetensors"
    truncated.write_bytes(good.read_bytes()[:-100])
    cases["truncated data"] = truncated
    head = tmp_path / "head.safetensors"
    head.write_bytes(good.read_bytes()[:40])
    cases["truncated header"] = head
    huge = tmp_path / "huge.safetensors"
    huge.write_bytes(struct.pack("<Q", 1 << 60) + b"{}")
    cases["hostile header length"] = huge
    deep = tmp_path / "deep.safetensors"
    text = b"{" + b'"a":[' * 100_000 + b"]" * 100_000 + b"}"
    deep.write_bytes(struct.pack("<Q", len(text)) + text)
    cases["hostile nesting"] = deep
    dup = tmp_path / "dup.safetensors"
    text = b'{"a": {"dtype": "F32", "shape": [], "data_offsets": [0, 4]}, "a": 1}'
    dup.write_bytes(struct.pack("<Q", len(text)) + text + bytes(4))
    cases["duplicate key"] = dup
    lying = write_safetensors(
        tmp_path / "lying.safetensors",
        {},
        x={"dtype": "F32", "shape": [1000, 1000], "data_offsets": [0, 4]},
    )
    cases["offsets too short for the shape"] = lying
    evil = tmp_path / "evil.pt"
    with zipfile.ZipFile(evil, "w") as zf:
        zf.writestr("evil/data.pkl", pickle.dumps(os.system, protocol=2))
        zf.writestr("evil/version", "3\n")
    cases["pickle globals"] = evil
    text_file = tmp_path / "notes.txt"
    text_file.write_text("not weights")
    cases["neither format"] = text_file
    for what, path in cases.items():
        with pytest.raises(UsageError) as info:
            read_weights(path)
        message = str(info.value)
        assert "\n" not in message, what
        assert f"--weights {path}" in message, (what, message)
    with pytest.raises(UsageError, match="posix.system|os.system"):
        read_weights(evil)
    with pytest.raises(UsageError, match="more than the 100000000"):
        read_weights(huge)


def test_no_weights_plans_no_stage_step() -> None:
    from aotipre.runner.stages.options import DynamicOptions
    from aotipre.runner.stages.weights import WeightsStage

    class FakeSession:
        opts = DynamicOptions()

    assert WeightsStage().plan(FakeSession()) == []  # type: ignore[arg-type]


def test_a_tensor_on_another_device_is_named(tmp_path: Path) -> None:
    """AOT064: a state_dict saved from a CUDA model (storage location `cuda:0`) for a CPU
    package; written as torch.save writes it (a real CUDA save needs a GPU)."""
    path = tmp_path / "w.pt"
    pkl = _state_dict_pickle().replace(b"X\x03\x00\x00\x00cpu", b"X\x06\x00\x00\x00cuda:0")
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as zf:
        zf.writestr("w/data.pkl", pkl)
        zf.writestr("w/data/0", bytes(16 * 8 * 4))
        zf.writestr("w/version", "3\n")
    found = {f.code: f.message for f in check_weights(MODEL, read_weights(path))}
    assert "on cuda" in found["AOT064"] and "on cpu" in found["AOT064"]
