"""Tests for the torch-free sample-input reader, cross-checked against torch.load(weights_only)."""

from __future__ import annotations

import io
import os
import pickle
import struct
import sys
import zipfile
from collections import namedtuple
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aotipre.foundation.errors import InputsError
from aotipre.inputs import load
from aotipre.inputs.load import (
    DeviceValue,
    DtypeValue,
    find_unsafe_globals,
    load_sample_inputs,
    load_sample_inputs_bytes,
    pickle_globals,
)
from aotipre.inputs.meta import SampleInputs, TensorMeta

torch = pytest.importorskip("torch")


class Pkl:
    """Builds raw pickle opcodes by hand, so that crafted files need neither torch nor imports."""

    PROTO = b"\x80\x02"
    STOP = b"."
    NONE = b"N"
    TRUE = b"\x88"
    FALSE = b"\x89"
    EMPTY_DICT = b"}"

    @staticmethod
    def glob(module: str, name: str) -> bytes:
        return b"c" + f"{module}\n{name}\n".encode()

    @staticmethod
    def string(text: str) -> bytes:
        data = text.encode()
        return b"X" + struct.pack("<I", len(data)) + data

    @staticmethod
    def integer(n: int) -> bytes:
        return b"J" + struct.pack("<i", n)

    @staticmethod
    def tup(*items: bytes) -> bytes:
        return b"(" + b"".join(items) + b"t"

    @staticmethod
    def call(func: bytes, *args: bytes) -> bytes:
        return func + Pkl.tup(*args) + b"R"

    @staticmethod
    def dump(body: bytes) -> bytes:
        return Pkl.PROTO + body + Pkl.STOP

    @staticmethod
    def storage(
        key: str = "0", cls: str = "FloatStorage", location: str = "cpu", numel: int = 6
    ) -> bytes:
        pid = Pkl.tup(
            Pkl.string("storage"),
            Pkl.glob("torch", cls),
            Pkl.string(key),
            Pkl.string(location),
            Pkl.integer(numel),
        )
        return pid + b"Q"

    @staticmethod
    def tensor(
        storage: bytes | None = None,
        size: tuple[int, ...] = (2, 3),
        stride: tuple[int, ...] = (3, 1),
        offset: int = 0,
    ) -> bytes:
        return Pkl.call(
            Pkl.glob("torch._utils", "_rebuild_tensor_v2"),
            Pkl.storage() if storage is None else storage,
            Pkl.integer(offset),
            Pkl.tup(*map(Pkl.integer, size)),
            Pkl.tup(*map(Pkl.integer, stride)),
            Pkl.FALSE,
            Pkl.call(Pkl.glob("collections", "OrderedDict")),
        )


def write_pt(
    path: Path, pkl: bytes, storages: dict[str, int] | None = None, prefix: str = "archive"
) -> Path:
    """Write a zip laid out like torch.save output, with zero-filled storages of the given sizes."""
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr(f"{prefix}/data.pkl", pkl)
        zf.writestr(f"{prefix}/byteorder", "little")
        for key, nbytes in (storages or {}).items():
            zf.writestr(f"{prefix}/data/{key}", b"\0" * nbytes)
        zf.writestr(f"{prefix}/version", "3\n")
    return path


Point = namedtuple("Point", "x y")


@dataclass
class Batch:
    x: Any


class Custom:
    def __init__(self, x: Any) -> None:
        self.x = x


def save(tmp_path: Path, obj: Any, name: str = "inputs.pt", **kwargs: Any) -> Path:
    path = tmp_path / name
    torch.save(obj, path, **kwargs)
    return path


def meta_of(t: Any) -> TensorMeta:
    """What the reader should say about a real tensor."""
    return TensorMeta(
        dtype=str(t.dtype).removeprefix("torch."),
        shape=tuple(t.shape),
        strides=tuple(t.stride()),
        device=t.device.type,
        storage_offset=t.storage_offset(),
        requires_grad=t.requires_grad,
    )


def as_meta(obj: Any) -> Any:
    """Map a torch.load result onto what the torch-free reader returns."""
    if isinstance(obj, torch.Tensor):
        return meta_of(obj)
    if isinstance(obj, torch.dtype):
        return DtypeValue(str(obj).removeprefix("torch."))
    if isinstance(obj, torch.device):
        return DeviceValue(obj.type, obj.index)
    if isinstance(obj, tuple):  # torch.Size included
        return tuple(as_meta(v) for v in obj)
    if isinstance(obj, list):
        return [as_meta(v) for v in obj]
    if isinstance(obj, dict):
        return {k: as_meta(v) for k, v in obj.items()}
    return obj


def refuse(source: Any, *needles: str) -> str:
    with pytest.raises(InputsError) as info:
        if isinstance(source, bytes):
            load_sample_inputs_bytes(source, "mem.pt")
        else:
            load_sample_inputs(source)
    text = str(info.value)
    assert "\n" not in text
    for needle in needles:
        assert needle in text
    return text


# --- tensors ----------------------------------------------------------------------------------

DTYPES = ["float32", "int64", "bfloat16", "bool", "float8_e4m3fn", "float16", "uint16", "int8"]


@pytest.mark.parametrize("dtype", DTYPES)
def test_dtype_matches_torch(tmp_path: Path, dtype: str) -> None:
    t = torch.zeros(2, 3, dtype=getattr(torch, dtype))
    path = save(tmp_path, t)
    got = load_sample_inputs(path)
    assert got.args == (meta_of(torch.load(path, weights_only=True)),)
    assert got.args[0].dtype == dtype
    assert got.kwargs == {}
    assert got.source == str(path)


def test_transposed_tensor_keeps_strides(tmp_path: Path) -> None:
    t = torch.arange(6.0).reshape(2, 3).t()
    (meta,) = load_sample_inputs(save(tmp_path, t)).args
    assert (meta.shape, meta.strides) == ((3, 2), (1, 3))
    assert not meta.is_contiguous


def test_slice_keeps_storage_offset(tmp_path: Path) -> None:
    t = torch.arange(10)[3:7]
    (meta,) = load_sample_inputs(save(tmp_path, t)).args
    assert meta == TensorMeta("int64", (4,), (1,), "cpu", 3, False)


@pytest.mark.parametrize("shape", [(0,), (0, 3), (2, 0, 4)])
def test_zero_size_tensor(tmp_path: Path, shape: tuple[int, ...]) -> None:
    t = torch.empty(shape)
    (meta,) = load_sample_inputs(save(tmp_path, t)).args
    assert meta == meta_of(t)
    assert meta.numel() == 0


def test_parameter_and_requires_grad(tmp_path: Path) -> None:
    p = torch.nn.Parameter(torch.ones(2, 3))
    g = torch.ones(4, requires_grad=True)
    got = load_sample_inputs(save(tmp_path, (p, g)))
    assert [m.requires_grad for m in got.args] == [True, True]
    assert got.args == (meta_of(p), meta_of(g))


def test_tensor_with_python_attribute(tmp_path: Path) -> None:
    t = torch.ones(2)
    t.tag = "x"  # pickled through torch._tensor._rebuild_from_type_v2
    assert load_sample_inputs(save(tmp_path, t)).args == (meta_of(t),)


def test_views_sharing_one_storage(tmp_path: Path) -> None:
    base = torch.arange(12.0)
    got = load_sample_inputs(save(tmp_path, (base[:6].view(2, 3), base[6:])))
    assert got.args == (
        TensorMeta("float32", (2, 3), (3, 1)),
        TensorMeta("float32", (6,), (1,), storage_offset=6),
    )


@pytest.mark.filterwarnings("ignore:Detected pickle protocol")
def test_pickle_protocol_4_is_refused_like_torch(tmp_path: Path) -> None:
    # torch's weights-only unpickler cannot run FRAME / SHORT_BINUNICODE / STACK_GLOBAL / MEMOIZE
    path = save(tmp_path, ((torch.ones(2, 3),), {}), pickle_protocol=4)
    with pytest.raises(pickle.UnpicklingError, match="Unsupported operand"):
        torch.load(path, weights_only=True)
    refuse(
        path, "opcodes that torch.load(weights_only=True) cannot run", "FRAME", "pickle_protocol=2"
    )


# --- normalization ----------------------------------------------------------------------------


def test_containers(tmp_path: Path) -> None:
    a, b = torch.ones(2), torch.zeros(3, dtype=torch.int32)
    ma, mb = meta_of(a), meta_of(b)
    cases = {
        "tensor": (a, (ma,), {}),
        "tuple": ((a, b), (ma, mb), {}),
        "list": ([a, b], (ma, mb), {}),
        "dict": ({"x": a, "y": b}, (), {"x": ma, "y": mb}),
        "args_kwargs": (((a,), {"y": b}), (ma,), {"y": mb}),
        "list_args_kwargs": ([[a], {"y": b}], (ma,), {"y": mb}),
        "nested": (
            ((a, [b, (a,)], {"k": [b]}), {"opt": {"inner": (a, b)}}),
            (ma, [mb, (ma,)], {"k": [mb]}),
            {"opt": {"inner": (ma, mb)}},
        ),
    }
    for name, (obj, args, kwargs) in cases.items():
        got = load_sample_inputs(save(tmp_path, obj, f"{name}.pt"))
        assert (got.args, got.kwargs) == (args, kwargs), name


def test_non_tensor_leaves(tmp_path: Path) -> None:
    obj = (
        (torch.ones(1), 3, 2.5, None, "mean", True, torch.bfloat16, torch.device("cuda", 1)),
        {"size": torch.Size([2, 3]), "dev": torch.device("cpu"), "b": b"raw"},
    )
    got = load_sample_inputs(save(tmp_path, obj))
    assert got.args[1:] == (
        3,
        2.5,
        None,
        "mean",
        True,
        DtypeValue("bfloat16"),
        DeviceValue("cuda", 1),
    )
    assert got.kwargs == {"size": (2, 3), "dev": DeviceValue("cpu"), "b": b"raw"}
    assert str(got.args[6]) == "torch.bfloat16" and str(got.args[7]) == "cuda:1"


def test_single_scalar_and_non_str_keys(tmp_path: Path) -> None:
    assert load_sample_inputs(save(tmp_path, 7, "int.pt")).args == (7,)
    refuse(save(tmp_path, {0: torch.ones(1)}, "keys.pt"), "non-string keys")


@pytest.mark.parametrize(
    "obj",
    [
        lambda: (torch.randn(2, 3).t(), {"x": torch.arange(10)[2:5]}),
        lambda: [torch.ones(2, dtype=torch.float8_e5m2), torch.nn.Parameter(torch.ones(1))],
        lambda: {"a": [torch.empty(0, 2), (1, None, "s")], "b": torch.float16},
        lambda: ((torch.ones(4, 4)[::2, 1:],), {}),
        lambda: torch.ones(2, 3, 4).permute(2, 0, 1)[1:],
        lambda: (torch.tensor(3.0), torch.tensor([1, 2], dtype=torch.int32)[1]),
    ],
)
def test_cross_check_against_torch_load(tmp_path: Path, obj: Any) -> None:
    path = save(tmp_path, obj())
    reference = as_meta(torch.load(path, weights_only=True))
    got = load_sample_inputs(path)
    if isinstance(reference, dict):
        assert (got.args, got.kwargs) == ((), reference)
    elif isinstance(reference, (tuple, list)):
        if (
            len(reference) == 2
            and isinstance(reference[0], (tuple, list))
            and isinstance(reference[1], dict)
        ):
            assert (got.args, got.kwargs) == (tuple(reference[0]), reference[1])
        else:
            assert (got.args, got.kwargs) == (tuple(reference), {})
    else:
        assert (got.args, got.kwargs) == ((reference,), {})


def test_hand_made_cuda_location(tmp_path: Path) -> None:
    body = Pkl.tup(Pkl.tensor(Pkl.storage(location="cuda:0")))
    path = write_pt(tmp_path / "cuda.pt", Pkl.dump(body), {"0": 24})
    assert load_sample_inputs(path).args == (TensorMeta("float32", (2, 3), (3, 1), "cuda"),)


def test_fake_tensor_example_inputs_from_pt2(tmp_path: Path) -> None:
    # How torch.export pickles FakeTensor example inputs into data/sample_inputs/<model>.pt
    spec = (
        '{"dtype": 7, "sizes": [{"as_int": 3}, {"as_int": 2}], "requires_grad": false, '
        '"device": {"type": "cpu", "index": null}, "strides": [{"as_int": 1}, {"as_int": 3}], '
        '"storage_offset": {"as_int": 0}, "layout": 7}'
    )
    encoded = Pkl.call(Pkl.glob("_codecs", "encode"), Pkl.string(spec), Pkl.string("latin1"))
    fake = Pkl.call(
        Pkl.glob("torch._export.serde.serialize", "_reconstruct_fake_tensor"), encoded, Pkl.FALSE
    )
    body = Pkl.tup(Pkl.tup(fake), Pkl.EMPTY_DICT)
    data = write_pt(tmp_path / "fake.pt", Pkl.dump(body)).read_bytes()
    got = load_sample_inputs_bytes(data, "m.pt2:data/sample_inputs/m.pt")
    assert got.args == (TensorMeta("float32", (3, 2), (1, 3)),)
    assert got.source == "m.pt2:data/sample_inputs/m.pt"


def test_bytes_from_buffer() -> None:
    buf = io.BytesIO()
    torch.save(((torch.ones(2),), {}), buf)
    assert load_sample_inputs_bytes(buf.getvalue(), "x").args == (
        TensorMeta("float32", (2,), (1,)),
    )
    refuse(b"", "empty")


# --- refusals: unsafe globals -------------------------------------------------------------------


def test_numpy_array_is_refused_with_advice(tmp_path: Path) -> None:
    np = pytest.importorskip("numpy")
    path = save(tmp_path, (torch.ones(1), np.ones(3)))
    text = refuse(
        path, "multiarray._reconstruct", "numpy.ndarray", "torch.from_numpy(a)", "torch.save"
    )
    assert "numpy" in text
    assert "numpy.ndarray" in find_unsafe_globals(path)
    assert set(find_unsafe_globals(path.read_bytes())) == set(find_unsafe_globals(path))


def test_namedtuple_dataclass_and_custom_class_are_refused(tmp_path: Path) -> None:
    for name, obj in {
        "Point": Point(torch.ones(1), torch.ones(1)),
        "Batch": Batch(torch.ones(1)),
        "Custom": Custom(torch.ones(1)),
    }.items():
        path = save(tmp_path, (obj,), f"{name}.pt", pickle_protocol=4 if name == "Batch" else 2)
        refuse(
            path, f"{__name__}.{name}", "a tuple or a dict of tensors", "re-save with torch.save"
        )
        assert find_unsafe_globals(path) == [f"{__name__}.{name}"]


class _System:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> Any:
        return os.system, (f"touch {self.marker}",)


class _Eval:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> Any:
        return eval, (f"open({str(self.marker)!r}, 'w').close()",)


@pytest.mark.parametrize("kind", ["system", "eval"])
@pytest.mark.parametrize("static_scan", [True, False])
def test_code_execution_is_refused_and_never_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str, static_scan: bool
) -> None:
    marker = tmp_path / "pwned"
    payload = _System(marker) if kind == "system" else _Eval(marker)
    path = write_pt(tmp_path / "evil.pt", pickle.dumps((1, payload), protocol=2))
    if not static_scan:  # the unpickler's own allowlist must hold even if the scan missed it
        monkeypatch.setattr(load, "_unsafe", lambda names: [])
    name = f"{os.system.__module__}.system" if kind == "system" else "builtins.eval"
    refuse(path, name)
    assert not marker.exists()


def test_build_cannot_tamper_with_allowed_globals(tmp_path: Path) -> None:
    # BUILD on an allowed global would let one file change the loader for the next one.
    state = Pkl.tup(
        Pkl.NONE, Pkl.EMPTY_DICT + Pkl.string("__defaults__") + Pkl.tup(Pkl.integer(1)) + b"s"
    )
    body = Pkl.glob("torch", "Size") + state + b"b"
    refuse(write_pt(tmp_path / "build.pt", Pkl.dump(body)), "BUILD")
    assert load._GLOBALS["torch.Size"].func.__defaults__ == ((),)


def test_static_scan_follows_memoized_stack_globals() -> None:
    data = pickle.dumps([Point(1, 2), Point(3, 4), Custom(1)], protocol=4)
    assert pickle_globals(data) == [f"{__name__}.Point", f"{__name__}.Custom"]


# --- refusals: broken files ---------------------------------------------------------------------


def test_missing_file_and_directory(tmp_path: Path) -> None:
    refuse(tmp_path / "nope.pt", "not found")
    refuse(tmp_path, "is a directory")


def test_empty_garbage_and_raw_pickle(tmp_path: Path) -> None:
    (tmp_path / "empty.pt").write_bytes(b"")
    refuse(tmp_path / "empty.pt", "empty")
    (tmp_path / "garbage.pt").write_bytes(b"definitely not a torch file\x00\xff" * 3)
    refuse(tmp_path / "garbage.pt", "not a zip archive")
    (tmp_path / "raw.pt").write_bytes(pickle.dumps([1, 2], protocol=2))
    refuse(tmp_path / "raw.pt", "raw pickle")


def test_legacy_format(tmp_path: Path) -> None:
    path = save(tmp_path, torch.ones(2), _use_new_zipfile_serialization=False)
    refuse(path, "legacy", "re-save")


def test_truncated_file(tmp_path: Path) -> None:
    data = save(tmp_path, (torch.ones(64), torch.zeros(8))).read_bytes()
    for cut in (len(data) // 2, len(data) - 10, 40):
        (tmp_path / "cut.pt").write_bytes(data[:cut])
        refuse(tmp_path / "cut.pt", "truncated or corrupt")


def test_zip_without_data_pkl_and_garbage_pickle(tmp_path: Path) -> None:
    with zipfile.ZipFile(tmp_path / "nopkl.pt", "w") as zf:
        zf.writestr("archive/version", "3")
    refuse(tmp_path / "nopkl.pt", "has no archive/data.pkl")
    refuse(write_pt(tmp_path / "bad.pt", b"\x80\x02garbage"), "not a valid pickle")
    refuse(write_pt(tmp_path / "trunc.pt", pickle.dumps([1, 2, 3])[:-3]), "data.pkl")


def test_storage_member_missing_short_or_overrun(tmp_path: Path) -> None:
    body = Pkl.dump(Pkl.tensor())  # a float32[2, 3] over a 6-element storage: 24 bytes
    assert load_sample_inputs(write_pt(tmp_path / "ok.pt", body, {"0": 24})).args[0].shape == (2, 3)
    refuse(write_pt(tmp_path / "missing.pt", body), "archive/data/0 is missing")
    refuse(write_pt(tmp_path / "short.pt", body, {"0": 20}), "has 20 bytes", "needs 24")
    overrun = Pkl.dump(Pkl.tensor(offset=1))
    refuse(write_pt(tmp_path / "overrun.pt", overrun, {"0": 24}), "needs 28 bytes")


def test_bad_persistent_id_and_location(tmp_path: Path) -> None:
    bad_pid = Pkl.dump(Pkl.tup(Pkl.string("module"), Pkl.integer(1)) + b"Q")
    refuse(write_pt(tmp_path / "pid.pt", bad_pid), "persistent id")
    bad_loc = Pkl.dump(Pkl.tensor(Pkl.storage(location="cuda:0; rm -rf /")))
    refuse(write_pt(tmp_path / "loc.pt", bad_loc, {"0": 24}), "location")


def test_too_deep_nesting(tmp_path: Path) -> None:
    deep: Any = torch.ones(1)
    for _ in range(150):
        deep = [deep]
    refuse(save(tmp_path, deep), "nested more than 100 levels")
    # far deeper than Python's recursion limit, built from raw opcodes
    refuse(write_pt(tmp_path / "deeper.pt", Pkl.dump(b"]" * 100_000 + b"a" * 99_999)), "nested")
    # a list that contains itself
    cycle = Pkl.dump(b"]q\x00h\x00a")
    refuse(write_pt(tmp_path / "cycle.pt", cycle), "cycle")


def test_oversized_pickle_is_refused_unread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(load, "MAX_PICKLE_BYTES", 64)
    path = write_pt(tmp_path / "big.pt", Pkl.dump(Pkl.string("x" * 100)))
    refuse(path, "more than the 64 this checker reads")


def test_shared_references_are_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # each level holds the previous list twice: 2**40 leaves if walked naively
    body = b"]q\x00" + b"".join(b"](h%ch%ceq%c" % (i, i, i + 1) for i in range(40))
    monkeypatch.setattr(load, "MAX_NODES", 10_000)
    refuse(write_pt(tmp_path / "dag.pt", Pkl.dump(body)), "more than 10000 elements")


# --- nothing but InputsError, whatever the bytes --------------------------------------------------

_VALID = io.BytesIO()
torch.save(((torch.ones(2, 3).t(), torch.arange(4)[1:]), {"k": 3, "d": torch.float16}), _VALID)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_mutated_files_raise_only_inputs_error(data: st.DataObject) -> None:
    blob = bytearray(_VALID.getvalue())
    for _ in range(data.draw(st.integers(1, 8))):
        blob[data.draw(st.integers(0, len(blob) - 1))] = data.draw(st.integers(0, 255))
    try:
        got = load_sample_inputs_bytes(bytes(blob), "fuzz.pt")
    except InputsError as exc:
        assert "\n" not in str(exc)
    else:
        assert isinstance(got, SampleInputs)


def test_parameter_with_python_attribute(tmp_path: Path) -> None:
    p = torch.nn.Parameter(torch.ones(2, 2))
    p.tag = "w"  # pickled through torch._utils._rebuild_parameter_with_state
    path = save(tmp_path, p)
    assert load_sample_inputs(path).args == (meta_of(torch.load(path, weights_only=True)),)


def test_package_never_imports_torch() -> None:
    import ast
    import inspect

    tree = ast.parse(inspect.getsource(load))
    names = {
        alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
    }
    names |= {node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert not {n for n in names if n.split(".")[0] in ("torch", "numpy")}
    assert "torch" in sys.modules  # the tests themselves did import it


def test_layouts_torch_load_refuses_are_refused(tmp_path: Path) -> None:
    """A member outside the archive's folder, or no version record: torch.load (2.11-2.14)
    refuses both, so the reader does too (it is a stricter subset); `.data/version` in place of
    `version` is fine for both."""
    import torch

    good = tmp_path / "good.pt"
    torch.save(((torch.arange(6),), {}), good)
    with zipfile.ZipFile(good) as z:
        members = [(n, z.read(n)) for n in z.namelist()]
    prefix = members[0][0].split("/")[0]

    def variant(name: str, keep: Any, extra: list[tuple[str, bytes]]) -> Path:
        path = tmp_path / name
        with zipfile.ZipFile(path, "w") as z:
            for n, data in members:
                if keep(n):
                    z.writestr(n, data)
            for n, data in extra:
                z.writestr(n, data)
        return path

    def torch_refuses(path: Path) -> bool:
        try:
            torch.load(path, weights_only=True)
        except Exception:
            return True
        return False

    no_version = variant("nv.pt", lambda n: n != f"{prefix}/version", [])
    stray = variant("stray.pt", lambda n: True, [("README", b"x")])
    moved = variant(
        "moved.pt", lambda n: n != f"{prefix}/version", [(f"{prefix}/.data/version", b"3\n")]
    )
    assert torch_refuses(no_version) and torch_refuses(stray) and not torch_refuses(moved)
    refuse(no_version, f"has no {prefix}/version record: torch.load refuses the file")
    refuse(stray, "member 'README' is outside the archive's folder", "torch.load refuses")
    assert load_sample_inputs(moved).args[0].shape == (6,)
