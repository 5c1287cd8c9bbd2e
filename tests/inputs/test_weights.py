"""The --weights reader (torch.save state_dicts and safetensors, torch-free, every bad file one
UsageError line) and the static swap check (AOT060-AOT066) on in-memory specs."""

from __future__ import annotations

import dataclasses
import json
import os
import pickle
import struct
import subprocess
import sys
import tracemalloc
import zipfile
from pathlib import Path

import pytest

from aotipre.checks.weights import check_weights
from aotipre.foundation.errors import UsageError
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


F32x4 = b'{"dtype":"F32","shape":[4],"data_offsets":[0,16]}'
LAYOUTS: dict[str, tuple[bytes, int]] = {
    # name: (header text, data bytes); what safetensors.torch.load_file does with each is
    # measured in a fresh process by test_safetensors_verdicts_are_the_loaders
    "overlap": (b'{"a":' + F32x4 + b',"b":' + F32x4 + b"}", 16),
    "gap": (b'{"a":' + F32x4 + b',"b":{"dtype":"F32","shape":[4],"data_offsets":[20,36]}}', 36),
    "leading gap": (b'{"a":{"dtype":"F32","shape":[4],"data_offsets":[4,20]}}', 20),
    "trailing bytes": (b'{"a":' + F32x4 + b"}", 20),
    "integer metadata": (b'{"__metadata__":{"format":1},"a":' + F32x4 + b"}", 16),
    "metadata not a map": (b'{"__metadata__":"pt","a":' + F32x4 + b"}", 16),
    "NaN": (b'{"__metadata__":{"x":NaN},"a":' + F32x4 + b"}", 16),
    "lone surrogate": (b'{"\\ud800":' + F32x4 + b"}", 16),
    "two __metadata__": (b'{"__metadata__":{},"__metadata__":{},"a":' + F32x4 + b"}", 16),
    "two dtype fields": (
        b'{"a":{"dtype":"F32","dtype":"F32","shape":[4],"data_offsets":[0,16]}}',
        16,
    ),
    "size overflow": (
        b'{"a":{"dtype":"F32","shape":[4294967296,4294967296,0],"data_offsets":[0,0]}}',
        0,
    ),
    "float dim": (b'{"a":{"dtype":"F32","shape":[4e0],"data_offsets":[0,16]}}', 16),
    "trailing comma": (b'{"a":{"dtype":"F32","shape":[4,],"data_offsets":[0,16]}}', 16),
    "trailing NUL": (b'{"a":' + F32x4 + b"}\x00", 16),
    "unsorted": (
        b'{"b":{"dtype":"F32","shape":[4],"data_offsets":[16,32]},"a":' + F32x4 + b"}",
        32,
    ),
    "leading whitespace": (b' \n{"a":' + F32x4 + b"}   ", 16),
    "duplicate name": (
        b'{"a":' + F32x4 + b',"a":{"dtype":"I32","shape":[2,2],"data_offsets":[0,16]}}',
        16,
    ),
    "escaped name": (
        b'{"\\u0061":{"dtype":"F\\u0033\\u0032","shape":[4],"data_offsets":[0,16]}}',
        16,
    ),
    "null metadata": (b'{"__metadata__":null,"a":' + F32x4 + b"}", 16),
    "scalar extra field": (b'{"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16],"x":1.5}}', 16),
    "zero-size tensors": (
        b'{"a":{"dtype":"F32","shape":[0,3],"data_offsets":[0,0]},"b":' + F32x4 + b"}",
        16,
    ),
}
ACCEPTED = {
    "unsorted",
    "leading whitespace",
    "duplicate name",
    "escaped name",
    "null metadata",
    "scalar extra field",
    "zero-size tensors",
}
"""The cases load_file accepts (measured with safetensors 0.8: the test below re-measures)."""


def write_layouts(folder: Path) -> dict[str, Path]:
    paths = {}
    for i, (what, (text, body)) in enumerate(LAYOUTS.items()):
        paths[what] = folder / f"case{i}.safetensors"
        paths[what].write_bytes(struct.pack("<Q", len(text)) + text + bytes(body))
    return paths


def test_safetensors_are_refused_and_accepted_as_the_loader_does(tmp_path: Path) -> None:
    """Overlapping offsets, gaps, trailing bytes, non-string metadata, serde_json's strict
    grammar: refused with one line naming the rule; what load_file reads is read."""
    for what, path in write_layouts(tmp_path).items():
        if what in ACCEPTED:
            assert read_weights(path).tensors, what
            continue
        with pytest.raises(UsageError) as info:
            read_weights(path)
        message = str(info.value)
        assert "\n" not in message and "not a valid safetensors file" in message, (what, message)
        assert "load_file refuses it too" in message, (what, message)
    paths = write_layouts(tmp_path)
    with pytest.raises(UsageError, match="tensor 'b' starts at byte 0 .* it overlaps them"):
        read_weights(paths["overlap"])
    with pytest.raises(UsageError, match="tensor 'b' starts at byte 20 .* a gap of 4 bytes"):
        read_weights(paths["gap"])
    with pytest.raises(UsageError, match="4 trailing bytes"):
        read_weights(paths["trailing bytes"])
    assert read_weights(paths["duplicate name"]).tensors["a"].dtype == "int32"  # the last wins


def test_safetensors_verdicts_are_the_loaders(tmp_path: Path) -> None:
    """The table above, re-measured: safetensors.torch.load_file in a fresh process."""
    pytest.importorskip("safetensors")
    paths = write_layouts(tmp_path)
    script = """
import json, sys
from safetensors.torch import load_file
out = {}
for what, path in json.loads(sys.argv[1]).items():
    try:
        load_file(path)
        out[what] = True
    except Exception:
        out[what] = False
print(json.dumps(out))
"""
    proc = subprocess.run(
        [sys.executable, "-c", script, json.dumps({k: str(v) for k, v in paths.items()})],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    verdicts = json.loads(proc.stdout.splitlines()[-1])
    assert {what for what, ok in verdicts.items() if ok} == ACCEPTED


def _peak_allocated(path: Path) -> int:
    """The most bytes Python held at once (tracemalloc) while read_weights read `path`."""
    tracemalloc.start()
    try:
        read_weights(path)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_memory_stays_a_small_multiple_of_the_header(tmp_path: Path) -> None:
    """A 3 MB tensor name of CJK characters (per-character escaping of the name took 30x)
    and 100k zero-size tensors (valid for load_file: they all sit at [0, 0]; the JSON tree of
    their entries took 13x): each read within 10x the file's size (measured: 4x and 8x)."""
    name = "\u4e00" * 1_000_000
    text = json.dumps(
        {name: {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}, ensure_ascii=False
    ).encode()
    wide = tmp_path / "wide.safetensors"
    wide.write_bytes(struct.pack("<Q", len(text)) + text + bytes(16))
    entries = ",".join(
        f'"t{i}":{{"dtype":"F32","shape":[{i}, 0],"data_offsets":[0,0]}}' for i in range(100_000)
    )
    many = tmp_path / "many.safetensors"
    many.write_bytes(struct.pack("<Q", len(entries) + 2) + b"{" + entries.encode() + b"}")
    for path in (wide, many):
        assert _peak_allocated(path) < 10 * path.stat().st_size, path.name


def test_a_torch_save_record_larger_than_its_storage_is_refused(tmp_path: Path) -> None:
    """torch.load (no mmap) refuses a storage member whose size is not the record's
    numel x itemsize, larger as well as smaller (measured in tests/runner/test_weights_real.py)."""
    path = tmp_path / "w.pt"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as zf:
        zf.writestr("w/data.pkl", _state_dict_pickle())
        zf.writestr("w/data/0", bytes(16 * 8 * 4 + 64))
        zf.writestr("w/version", "3\n")
    with pytest.raises(UsageError, match="has 576 bytes, but 128 x float32 needs 512, exactly"):
        read_weights(path)
