"""Torch-free, weights-only reader of torch.save sample-input files into SampleInputs.

Longer than the ~600 lines of the other modules on purpose: it is a security boundary (a
hostile .pt file is unpickled here, in aotipre's own process). The allow-list of globals, one
small rebuild function for each, the restricted unpickler and the walk that turns what it built
into SampleInputs are kept together so that the whole boundary is reviewed in one place; the
budgets it enforces are in inputs/budget.py."""

from __future__ import annotations

import io
import json
import os
import pickle
import pickletools
import re
import reprlib
import stat
import zipfile
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import IO, Any

from aotipre.foundation.errors import InputsError, UnsafeInputsError
from aotipre.inputs.budget import MAX_DEPTH, MAX_MEMO, MAX_OPCODES, Simulation, python3_name
from aotipre.inputs.meta import SampleInputs, TensorMeta
from aotipre.pt2.archive import ZipRefused, open_zip
from aotipre.pt2.dtypes import EXPORT_SCHEMA_DTYPES, ITEMSIZE, STORAGE_DTYPES

MAX_PICKLE_BYTES = 64 * 1024 * 1024
"""A data.pkl larger than this is refused without being read."""
MAX_NODES = 1_000_000
"""At most this many containers and leaves are walked (shared references count every time)."""

# torch.serialization.MAGIC_NUMBER pickled with protocol 2: the head of a legacy (pre-1.6) file.
_LEGACY_MAGIC = b"\x80\x02\x8a\x0al\xfc\x9cF\xf9 j\xa8P\x19"
_ZIP_MAGIC = b"PK\x03\x04"
_EMPTY_ZIP_MAGIC = b"PK\x05\x06"

# Dtypes torch allows in a weights-only load that aotipre.pt2.dtypes.ITEMSIZE does not list.
_EXTRA_ITEMSIZE: dict[str, int] = {
    "float4_e2m1fn_x2": 1,
    "bits8": 1,
    "bits16": 2,
    "bits1x8": 1,
    "bits2x4": 1,
    "bits4x2": 1,
}
_LOCATION = re.compile(r"^([a-z_][a-z0-9_]*)(?::(\d+))?$")
_STRIDED_LAYOUT = 7  # torch/_export/serde/schema.py: Layout.Strided


@dataclass(frozen=True)
class DtypeValue:
    """A `torch.dtype` that appears as a non-tensor leaf (e.g. a `dtype=` keyword)."""

    name: str
    """Canonical name (float32, bfloat16, ...)."""

    def __str__(self) -> str:
        return f"torch.{self.name}"


@dataclass(frozen=True)
class DeviceValue:
    """A `torch.device` that appears as a non-tensor leaf."""

    type: str
    index: int | None = None

    def __str__(self) -> str:
        return self.type if self.index is None else f"{self.type}:{self.index}"


def load_sample_inputs(path: str | os.PathLike[str]) -> SampleInputs:
    """Read a `torch.save` file of sample inputs without torch and without running its pickle.

    The saved object is normalized into `(args, kwargs)` the way torch's own `sample_inputs`
    convention reads it:

    - a single tensor (or other single value) `t` -> `args=(t,)`;
    - a 2-tuple/list `(tuple_or_list, dict_with_str_keys)` -> `(args, kwargs)`;
    - a dict whose keys are all strings -> `kwargs`;
    - any other tuple or list -> `args`.

    Tensors become `TensorMeta`; ints, floats, bools, strings, bytes and None are kept; a
    `torch.dtype` becomes `DtypeValue`, a `torch.device` `DeviceValue`, a `torch.Size` a tuple.
    Nested tuples, lists and dicts keep their structure. Storage bytes are never read: only
    the zip directory and `data.pkl` are. What torch.load(weights_only=True) would refuse
    (other globals, pickle protocol 4 opcodes) is refused too. Any problem raises
    `InputsError` with a one-line message.
    """
    source = os.fspath(path)
    with _guard(source), _open(source) as fileobj:
        return _load(fileobj, source)


def load_sample_inputs_bytes(data: bytes, source: str) -> SampleInputs:
    """Like `load_sample_inputs`, for bytes already in memory (e.g. a .pt2 member).

    `source` names the bytes in messages, e.g. `pkg.pt2:data/sample_inputs/model.pt`.
    """
    with _guard(source):
        if not data:
            raise InputsError(
                f"{source}: sample inputs are empty (0 bytes)",
                "a .pt2 package stores an empty member when it was built without example inputs",
            )
        return _load(io.BytesIO(data), source)


def find_unsafe_globals(source: str | os.PathLike[str] | bytes) -> list[str]:
    """List the globals a `.pt` file's pickle references that the loader does not allow.

    `source` is a path, or the bytes of a `.pt` file. Nothing is executed: the pickle is only
    disassembled (like `torch.serialization.get_unsafe_globals_in_checkpoint`). A global whose
    name cannot be worked out statically is listed as `<dynamic STACK_GLOBAL>`.
    """
    name = "<bytes>" if isinstance(source, bytes) else os.fspath(source)
    with _guard(name):
        fileobj = io.BytesIO(source) if isinstance(source, bytes) else _open(name)
        with fileobj:
            pkl = _Archive(fileobj, name).read_pickle()
        return _unsafe(_scan(pkl, name)[0])


TORCH_OPCODES: frozenset[str] = frozenset(
    "PROTO STOP GLOBAL REDUCE BUILD NEWOBJ BINPERSID MARK TUPLE TUPLE1 TUPLE2 TUPLE3 EMPTY_TUPLE "
    "EMPTY_LIST APPEND APPENDS EMPTY_DICT SETITEM SETITEMS EMPTY_SET NONE NEWFALSE NEWTRUE "
    "BININT BININT1 BININT2 LONG1 BINFLOAT BINUNICODE SHORT_BINSTRING BINGET LONG_BINGET "
    "BINPUT LONG_BINPUT".split()
)
"""The pickle opcodes torch's weights-only unpickler executes (torch/_weights_only_unpickler.py).

Protocol 2 (torch.save's default) needs nothing else; protocol 4 adds FRAME, MEMOIZE,
SHORT_BINUNICODE and STACK_GLOBAL, which torch.load(weights_only=True) refuses.
"""


def pickle_contents(pkl: bytes, source: str = "<pickle>") -> tuple[list[str], list[str]]:
    """The globals a raw pickle names and the opcodes torch's weights-only unpickler does not
    run, in one bounded pass, unexecuted (InputsError past the bounds)."""
    return _scan(pkl, source)


def pickle_globals(pkl: bytes, source: str = "<pickle>") -> list[str]:
    """Every global (`module.name`) a raw pickle references, in order of first use, unexecuted."""
    return _scan(pkl, source)[0]


def _scan(pkl: bytes, source: str) -> tuple[list[str], list[str]]:
    """Disassemble a pickle: the globals it names and the opcodes torch would not run.

    While it reads, `Simulation` replays what the unpickler would build (until an opcode torch
    would not run: such a file is refused before it is unpickled) and raises InputsError as soon
    as the allocation budget or the nesting bound is exceeded, before any object exists.
    """
    found: dict[str, None] = {}
    unsupported: dict[str, None] = {}
    memo: dict[int, str | None] = {}
    pushed: list[str | None] = [None, None]  # the values of the last two pushes, if strings
    sim: Simulation | None = Simulation(source)
    try:
        for count, (opcode, arg, _) in enumerate(pickletools.genops(pkl)):
            if count >= MAX_OPCODES:  # the globals named so far still decide the answer
                unsafe = _unsafe(list(found))
                if unsafe:
                    raise _unsafe_error(source, unsafe)
                raise InputsError(f"{source}: data.pkl has more than {MAX_OPCODES} opcodes")
            name = opcode.name
            if name not in TORCH_OPCODES:
                unsupported[name] = None
                sim = None  # refused before unpickling: nothing to bound
            elif sim is not None:
                sim.step(name, arg)
            if name in ("GLOBAL", "INST"):
                module, _, attr = str(arg).partition(" ")
                found[python3_name(module, attr)] = None
                pushed.append(None)
            elif name == "STACK_GLOBAL":
                module_s, attr_s = pushed[-2], pushed[-1]
                if module_s is None or attr_s is None:
                    found["<dynamic STACK_GLOBAL>"] = None
                else:
                    found[python3_name(module_s, attr_s)] = None
                pushed.append(None)
            elif name in ("EXT1", "EXT2", "EXT4"):
                found[f"<copyreg extension {arg}>"] = None
                pushed.append(None)
            elif name == "MEMOIZE":
                memo[len(memo)] = pushed[-1]
            elif name in ("PUT", "BINPUT", "LONG_BINPUT") and isinstance(arg, int):
                memo[arg] = pushed[-1]
            elif name in ("GET", "BINGET", "LONG_BINGET") and isinstance(arg, int):
                pushed.append(memo.get(arg))
            elif name == "FRAME":
                pass
            elif isinstance(arg, str) and opcode.stack_after and not opcode.stack_before:
                pushed.append(arg)  # UNICODE, BINUNICODE, SHORT_BINUNICODE, STRING, ...
            else:
                pushed.append(None)
            del pushed[:-2]
            if len(memo) > MAX_MEMO:
                raise InputsError(f"{source}: data.pkl memoizes more than {MAX_MEMO} objects")
    except InputsError:
        raise
    except Exception as exc:  # pickletools raises ValueError and others on garbage
        raise InputsError(
            f"{source}: data.pkl is not a valid pickle ({_short(exc)})",
            "the file is corrupt; re-save the sample inputs with torch.save",
        ) from None
    return list(found), list(unsupported)


# --- opening the file and the zip -------------------------------------------------------------


def _open(source: str) -> IO[bytes]:
    """The file, opened without blocking (a FIFO put in its place must not hang the open) and
    checked to be a regular file on the open descriptor itself."""
    if os.path.isdir(source):
        raise InputsError(f"{source}: is a directory, expected a .pt file written by torch.save")
    try:
        fd = os.open(source, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        raise InputsError(f"{source}: sample inputs file not found") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise InputsError(f"{source}: is not a regular file")
    return os.fdopen(fd, "rb")


@contextmanager
def _guard(source: str) -> Iterator[None]:
    """Turn every failure into one InputsError line that starts with `source`."""
    try:
        yield
    except InputsError as exc:
        message = (
            exc.message if exc.message.startswith(f"{source}:") else f"{source}: {exc.message}"
        )
        raise type(exc)(_one_line(message), _one_line(exc.hint)) from None
    except RecursionError:
        raise InputsError(f"{source}: sample inputs are nested too deeply") from None
    except MemoryError:
        raise InputsError(f"{source}: sample inputs are too large to read") from None
    except OSError as exc:
        raise InputsError(f"{source}: cannot read sample inputs ({_short(exc)})") from None
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, KeyError, IndexError) as exc:
        raise InputsError(
            f"{source}: data.pkl cannot be unpickled ({_short(exc)})",
            "the file is corrupt or was not written by torch.save",
        ) from None
    except Exception as exc:
        raise InputsError(f"{source}: cannot read sample inputs ({_short(exc)})") from None


def _load(fileobj: IO[bytes], source: str) -> SampleInputs:
    with fileobj:
        archive = _Archive(fileobj, source)
        pkl = archive.read_pickle()
        names, opcodes = _scan(pkl, source)
        unsafe = _unsafe(names)
        if unsafe:
            raise _unsafe_error(source, unsafe)
        if opcodes:
            raise InputsError(
                f"{source}: data.pkl uses pickle opcodes that torch.load(weights_only=True) "
                f"cannot run: {', '.join(opcodes)}",
                "re-save with torch.save(obj, path) and its default pickle_protocol=2",
            )
        return _normalize(_Unpickler(pkl, archive, source).load(), source)


class _Archive:
    """The members of a torch.save zip: `<prefix>/data.pkl`, `<prefix>/data/<key>`, ..."""

    def __init__(self, fileobj: IO[bytes], source: str) -> None:
        self.source = source
        head = fileobj.read(len(_LEGACY_MAGIC))
        self.size = fileobj.seek(0, os.SEEK_END)
        fileobj.seek(0)
        if not head:
            raise InputsError(f"{source}: sample inputs file is empty (0 bytes)")
        if head.startswith(_LEGACY_MAGIC):
            raise InputsError(
                f"{source}: uses the legacy (pre-1.6, non-zip) torch.save format",
                "load it with a current torch and re-save it with torch.save(obj, path)",
            )
        if not head.startswith((_ZIP_MAGIC, _EMPTY_ZIP_MAGIC)):
            what = "a raw pickle" if head[:1] == b"\x80" else "not a zip archive"
            raise InputsError(
                f"{source}: is {what}, not a file written by torch.save",
                "save sample inputs with torch.save(obj, path)",
            )
        try:
            self.zf = open_zip(fileobj, self.size)  # the guard every zip aotipre opens goes through
        except ZipRefused as exc:
            raise InputsError(f"{source}: {exc.reason}", exc.hint) from None
        except Exception as exc:
            raise InputsError(
                f"{source}: is a truncated or corrupt zip archive ({_short(exc)})",
                "re-save the sample inputs with torch.save",
            ) from None
        self.infos = {info.filename: info for info in self.zf.infolist()}
        names = list(self.infos)
        if not names:
            raise InputsError(f"{source}: is an empty zip archive, not a torch.save file")
        # Like torch's PyTorchStreamReader: the archive name is the first member's top folder.
        prefix, slash, _ = names[0].partition("/")
        if not slash:
            raise InputsError(
                f"{source}: zip has no top-level folder, so it was not written by torch.save"
            )
        self.prefix = prefix + "/"
        if self.prefix + "constants.pkl" in self.infos:
            raise InputsError(
                f"{source}: is a TorchScript archive (torch.jit.save), not torch.save output",
                "save sample inputs with torch.save((args, kwargs), path)",
            )
        if self.prefix + "data.pkl" not in self.infos:
            pt2 = any(n.endswith(("archive_format", ".json")) for n in names)
            raise InputsError(
                f"{source}: has no {self.prefix}data.pkl, so it was not written by torch.save",
                "this looks like a .pt2 package, not a sample-inputs file"
                if pt2
                else "save sample inputs with torch.save(obj, path)",
            )
        # PyTorchStreamReader's own rules (torch 2.11-2.14, measured): every member under the
        # archive's folder, and a version record (`version` or `.data/version`)
        stray = next((n for n in names if not n.startswith(self.prefix)), None)
        if stray is not None:
            raise InputsError(
                f"{source}: member {_one_line(stray)[:200]!r} is outside the archive's folder "
                f"{self.prefix}: torch.load refuses the file",
                "re-save the sample inputs with torch.save",
            )
        if not any(self.prefix + v in self.infos for v in ("version", ".data/version")):
            raise InputsError(
                f"{source}: has no {self.prefix}version record: torch.load refuses the file",
                "re-save the sample inputs with torch.save",
            )
        byteorder = self.infos.get(self.prefix + "byteorder")
        if byteorder is not None:
            mark = self._read_small(byteorder, 16)
            if mark not in (b"little", b"big"):
                raise InputsError(f"{source}: unknown byteorder record {mark[:16]!r}")

    def read_pickle(self) -> bytes:
        info = self.infos[self.prefix + "data.pkl"]
        if info.file_size > MAX_PICKLE_BYTES:
            raise InputsError(
                f"{self.source}: data.pkl is {info.file_size} bytes, more than the "
                f"{MAX_PICKLE_BYTES} this checker reads",
                "sample inputs should be a few tensors, not a whole dataset",
            )
        return self._read_small(info, MAX_PICKLE_BYTES)

    def _read_small(self, info: zipfile.ZipInfo, limit: int) -> bytes:
        try:
            with self.zf.open(info) as member:
                data = member.read(limit + 1)
        except Exception as exc:
            raise InputsError(
                f"{self.source}: cannot read {info.filename} ({_short(exc)})",
                "the zip archive is truncated or corrupt; re-save it with torch.save",
            ) from None
        if len(data) > limit:
            raise InputsError(f"{self.source}: {info.filename} is larger than {limit} bytes")
        return data

    def storage_size(self, key: str) -> int:
        """The byte length of storage `key`, checked to lie inside the file; never read."""
        name = f"{self.prefix}data/{key}"
        info = self.infos.get(name)
        if info is None:
            raise InputsError(
                f"{self.source}: storage member {name} is missing",
                "the file is truncated or was edited; re-save it with torch.save",
            )
        if info.header_offset + info.compress_size > self.size:
            raise InputsError(f"{self.source}: storage member {name} runs past the end of file")
        return info.file_size


# --- the restricted unpickler -----------------------------------------------------------------


class _Sealed:
    """Base of the unpickler's intermediate objects: no `__dict__`, and BUILD is refused."""

    __slots__ = ()

    def __setstate__(self, state: object) -> None:
        raise pickle.UnpicklingError(f"BUILD on {type(self).__name__[1:]} is not allowed")


class _StorageType(_Sealed):
    """A storage class global such as `torch.FloatStorage` (dtype) or `UntypedStorage`."""

    __slots__ = ("dtype",)

    def __init__(self, dtype: str) -> None:
        self.dtype = dtype


class _Storage(_Sealed):
    """A storage met through a persistent id; only its size is known, its bytes are unread."""

    __slots__ = ("dtype", "device", "nbytes", "key")

    def __init__(self, dtype: str, device: str, nbytes: int, key: str) -> None:
        self.dtype, self.device, self.nbytes, self.key = dtype, device, nbytes, key


class _Dtype(_Sealed):
    """A dtype global such as `torch.float32`; becomes DtypeValue when normalized."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name


class _Device(_Sealed):
    """A rebuilt `torch.device`; becomes DeviceValue when normalized."""

    __slots__ = ("type", "index")

    def __init__(self, type_: str, index: int | None) -> None:
        self.type, self.index = type_, index


class _Global(_Sealed):
    """An allowed function or class; sealed so that BUILD cannot change it between loads."""

    __slots__ = ("name", "func")

    def __init__(self, name: str, func: Callable[..., object]) -> None:
        self.name, self.func = name, func

    def __call__(self, *args: object) -> object:
        return self.func(*args)


class _TensorType(_Sealed):
    """`torch.Tensor` or `torch.nn.Parameter`, as named by `_rebuild_from_type_v2`."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name


class _Tensor(_Sealed):
    """A rebuilt tensor; becomes a TensorMeta when the result is normalized."""

    __slots__ = ("meta",)

    def __init__(self, meta: TensorMeta) -> None:
        self.meta = meta


def _itemsize(dtype: str) -> int:
    size = ITEMSIZE.get(dtype, _EXTRA_ITEMSIZE.get(dtype))
    if size is None:
        raise InputsError(f"unsupported tensor dtype {dtype} in sample inputs")
    return size


def _int(value: object, what: str) -> int:
    if type(value) is not int or not 0 <= value < 2**63:
        raise pickle.UnpicklingError(f"bad {what}: {_brief(value)}")
    return value


def _ints(value: object, what: str) -> tuple[int, ...]:
    if not isinstance(value, (tuple, list)) or len(value) > 64:
        raise pickle.UnpicklingError(f"bad {what}: {_brief(value)}")
    return tuple(_int(v, what) for v in value)


def _make_tensor(
    storage: object,
    storage_offset: object,
    size: object,
    stride: object,
    requires_grad: object = False,
    dtype: str | None = None,
) -> _Tensor:
    if not isinstance(storage, _Storage):
        raise pickle.UnpicklingError("a tensor is rebuilt from something that is not a storage")
    shape = _ints(size, "tensor size")
    strides = _ints(stride, "tensor stride")
    offset = _int(storage_offset, "storage offset")
    if len(shape) != len(strides):
        raise pickle.UnpicklingError(f"size {shape} and stride {strides} differ in length")
    if type(requires_grad) is not bool:
        raise pickle.UnpicklingError(f"bad requires_grad: {_brief(requires_grad)}")
    dtype = dtype or storage.dtype
    if all(shape):
        last = offset + sum((n - 1) * s for n, s in zip(shape, strides, strict=True))
        need = (last + 1) * _itemsize(dtype)
        if need > storage.nbytes:
            raise InputsError(
                f"a {dtype}{list(shape)} tensor (stride {list(strides)}, offset {offset}) "
                f"needs {need} bytes but its storage data/{storage.key} has {storage.nbytes}"
            )
    meta = TensorMeta(dtype, shape, strides, storage.device, offset, requires_grad, storage.key)
    return _Tensor(meta)


def _rebuild_tensor(storage: object, offset: object, size: object, stride: object) -> _Tensor:
    return _make_tensor(storage, offset, size, stride)


def _rebuild_tensor_v2(
    storage: object,
    storage_offset: object,
    size: object,
    stride: object,
    requires_grad: object,
    backward_hooks: object,
    metadata: object = None,
) -> _Tensor:
    return _make_tensor(storage, storage_offset, size, stride, requires_grad)


def _rebuild_tensor_v3(
    storage: object,
    storage_offset: object,
    size: object,
    stride: object,
    requires_grad: object,
    backward_hooks: object,
    dtype: object,
    metadata: object = None,
) -> _Tensor:
    if not isinstance(dtype, _Dtype):
        raise pickle.UnpicklingError(f"bad tensor dtype: {_brief(dtype)}")
    return _make_tensor(storage, storage_offset, size, stride, requires_grad, dtype.name)


def _rebuild_parameter(data: object, requires_grad: object, backward_hooks: object) -> _Tensor:
    if not isinstance(data, _Tensor) or type(requires_grad) is not bool:
        raise pickle.UnpicklingError("a Parameter is rebuilt from something that is not a tensor")
    meta = data.meta
    return _Tensor(
        TensorMeta(
            meta.dtype,
            meta.shape,
            meta.strides,
            meta.device,
            meta.storage_offset,
            requires_grad,
            meta.storage_key,
        )
    )


def _rebuild_parameter_with_state(
    data: object, requires_grad: object, backward_hooks: object, state: object
) -> _Tensor:
    return _rebuild_parameter(data, requires_grad, backward_hooks)  # Python attributes dropped


def _rebuild_from_type_v2(func: object, new_type: object, args: object, state: object) -> _Tensor:
    # Used for tensors with Python attributes (`t.name = ...`); the attributes are dropped.
    if not isinstance(func, _Global) or func.func not in _REBUILDERS:
        raise pickle.UnpicklingError("_rebuild_from_type_v2 with a disallowed function")
    if not isinstance(new_type, _TensorType):
        raise pickle.UnpicklingError("_rebuild_from_type_v2 with a disallowed function or type")
    if not isinstance(args, tuple):
        raise pickle.UnpicklingError("_rebuild_from_type_v2 without an argument tuple")
    result = func(*args)
    if not isinstance(result, _Tensor):
        raise pickle.UnpicklingError("_rebuild_from_type_v2 did not rebuild a tensor")
    return result


def _rebuild_meta_tensor_no_storage(
    dtype: object, size: object, stride: object, requires_grad: object
) -> _Tensor:
    if not isinstance(dtype, _Dtype) or type(requires_grad) is not bool:
        raise pickle.UnpicklingError("bad meta tensor")
    shape, strides = _ints(size, "tensor size"), _ints(stride, "tensor stride")
    return _Tensor(TensorMeta(dtype.name, shape, strides, "meta", 0, requires_grad))


def _reconstruct_fake_tensor(serialized: object, is_parameter: object) -> _Tensor:
    """A FakeTensor that torch.export pickled as JSON (`.pt2` built from fake example inputs)."""
    if not isinstance(serialized, bytes) or len(serialized) > 1 << 20:
        raise pickle.UnpicklingError("bad serialized fake tensor")
    spec = json.loads(serialized.decode("utf-8"))

    def sym(value: Any, what: str) -> int:
        if isinstance(value, dict) and "as_int" in value:
            return _int(value["as_int"], what)
        raise InputsError(
            f"a fake tensor in the sample inputs has a symbolic {what}: {_brief(value)}"
        )

    if spec.get("layout", _STRIDED_LAYOUT) != _STRIDED_LAYOUT:
        raise InputsError("a fake tensor in the sample inputs is not strided (sparse?)")
    dtype = EXPORT_SCHEMA_DTYPES.get(spec["dtype"])
    if dtype is None:
        raise InputsError(
            f"a fake tensor in the sample inputs has unknown dtype {_brief(spec['dtype'])}"
        )
    device = spec.get("device") or {}
    device_type = device.get("type", "cpu")
    if not isinstance(device_type, str) or not _LOCATION.match(device_type):
        raise InputsError(f"a fake tensor in the sample inputs has device {_brief(device_type)}")
    requires_grad = spec.get("requires_grad", False)
    return _Tensor(
        TensorMeta(
            dtype,
            tuple(sym(v, "size") for v in spec["sizes"]),
            tuple(sym(v, "stride") for v in spec["strides"]),
            device_type,
            sym(spec.get("storage_offset", {"as_int": 0}), "storage offset"),
            requires_grad if type(requires_grad) is bool else False,
        )
    )


def _codecs_encode(text: object, encoding: object = "utf-8") -> bytes:
    # Protocol 2 pickles `bytes` as `_codecs.encode(str, "latin1")`; nothing else is accepted.
    if not isinstance(text, str) or encoding != "latin1":
        raise pickle.UnpicklingError("_codecs.encode is only allowed as (str, 'latin1')")
    return text.encode("latin1")


def _torch_size(seq: object = ()) -> tuple[int, ...]:
    return _ints(seq, "torch.Size")


def _torch_device(kind: object, index: object = None) -> _Device:
    if not isinstance(kind, str):
        raise pickle.UnpicklingError(f"bad torch.device: {_brief(kind)}")
    match = _LOCATION.match(kind)
    if match is None or (match.group(2) is not None and index is not None):
        raise pickle.UnpicklingError(f"bad torch.device: {_brief(kind)}")
    if match.group(2) is not None:
        index = int(match.group(2))
    if index is not None:
        index = _int(index, "device index")
    return _Device(match.group(1), index)


_REBUILDERS: dict[Callable[..., _Tensor], str] = {
    _rebuild_tensor: "_rebuild_tensor",
    _rebuild_tensor_v2: "_rebuild_tensor_v2",
    _rebuild_tensor_v3: "_rebuild_tensor_v3",
    _rebuild_parameter: "_rebuild_parameter",
    _rebuild_parameter_with_state: "_rebuild_parameter_with_state",
    _rebuild_meta_tensor_no_storage: "_rebuild_meta_tensor_no_storage",
}


def _globals() -> dict[str, _Sealed]:
    found: dict[str, _Sealed] = {
        f"torch.{n}": _Dtype(n) for n in sorted(set(ITEMSIZE) | set(_EXTRA_ITEMSIZE))
    }
    for cls, dtype in STORAGE_DTYPES.items():
        for module in ("torch", "torch.cuda"):
            found[f"{module}.{cls}"] = _StorageType(dtype)
    found["torch.storage.UntypedStorage"] = _StorageType("uint8")
    found["torch.Tensor"] = _TensorType("Tensor")
    found["torch.nn.parameter.Parameter"] = _TensorType("Parameter")
    functions: dict[str, Callable[..., object]] = {
        "collections.OrderedDict": OrderedDict,
        "torch.Size": _torch_size,
        "torch.device": _torch_device,
        "torch._tensor._rebuild_from_type_v2": _rebuild_from_type_v2,
        "torch.tensor._rebuild_from_type_v2": _rebuild_from_type_v2,  # torch's module mapping
        "torch._export.serde.serialize._reconstruct_fake_tensor": _reconstruct_fake_tensor,
        "_codecs.encode": _codecs_encode,
        **{f"torch._utils.{name}": func for func, name in _REBUILDERS.items()},
    }
    for name, func in functions.items():
        found[name] = _Global(name, func)
    return found


_GLOBALS = _globals()
ALLOWED_GLOBALS: frozenset[str] = frozenset(_GLOBALS)
"""Every global (`module.name`) the loader resolves, each to a sealed torch-free stand-in."""


def _unsafe(names: list[str]) -> list[str]:
    return [n for n in names if n not in ALLOWED_GLOBALS]


def _unsafe_error(source: str, names: list[str]) -> UnsafeInputsError:
    hints = []
    if any(n.startswith("numpy.") for n in names):
        hints.append("convert numpy arrays with torch.from_numpy(a) and numpy scalars with .item()")
    if any(n.startswith("torch.") for n in names):
        hints.append("use plain dense tensors (no sparse, quantized or subclass tensors)")
    if any(not n.startswith(("numpy.", "torch.")) for n in names):
        hints.append(
            "replace namedtuples, dataclasses and custom classes with a tuple or a dict of tensors"
        )
    hints.append("then re-save with torch.save")
    shown = ", ".join(_one_line(n)[:120] for n in names[:10])
    if len(names) > 10:
        shown += f" and {len(names) - 10} more"
    return UnsafeInputsError(
        f"{source}: sample inputs reference globals that a weights-only load does not allow: "
        + shown,
        "; ".join(hints),
    )


class _Unpickler(pickle.Unpickler):
    """Resolves only ALLOWED_GLOBALS and reads storages as size records (never their bytes)."""

    def __init__(self, pkl: bytes, archive: _Archive, source: str) -> None:
        super().__init__(io.BytesIO(pkl), encoding="utf-8")
        self.archive = archive
        self.source = source
        self.storages: dict[str, _Storage] = {}

    def find_class(self, module: str, name: str) -> Any:
        full = python3_name(module, name)
        if full not in _GLOBALS:
            raise _unsafe_error(self.source, [full])
        return _GLOBALS[full]

    def persistent_load(self, pid: Any) -> _Storage:
        if not isinstance(pid, tuple) or len(pid) != 5 or _text(pid[0]) != "storage":
            raise pickle.UnpicklingError(f"unknown persistent id {_brief(pid)}")
        _, storage_type, key, location, numel = pid
        key, location = _text(key), _text(location)
        if not isinstance(storage_type, _StorageType):
            raise pickle.UnpicklingError(f"bad storage type {_brief(storage_type)}")
        if not isinstance(key, str) or not isinstance(location, str):
            raise pickle.UnpicklingError("bad storage key or location")
        numel = _int(numel, "storage size")
        match = _LOCATION.match(location)
        if match is None:
            raise pickle.UnpicklingError(f"bad storage location {_brief(location)}")
        nbytes = numel * _itemsize(storage_type.dtype)
        cached = self.storages.get(key)
        if cached is not None:  # torch.load reuses a key's first storage, whatever the numel
            return cached
        have = self.archive.storage_size(key)
        if have != nbytes:  # torch.load: "record size (...) does not match expected size"
            raise InputsError(
                f"{self.source}: storage member {self.archive.prefix}data/{key} has {have} bytes, "
                f"but {numel} x {storage_type.dtype} needs {nbytes}, exactly: "
                "torch.load refuses the file",
                "the file is truncated or was edited; re-save it with torch.save",
            )
        storage = _Storage(storage_type.dtype, match.group(1), nbytes, key)
        if nbytes:  # torch.load keeps no storage of 0 bytes: the next use reads it again
            self.storages[key] = storage
        return storage


def _text(value: object) -> object:
    """Python 2 era files hold bytes where torch now writes str."""
    return value.decode("ascii") if isinstance(value, bytes) else value


# --- normalization into SampleInputs ----------------------------------------------------------


class _Walk:
    def __init__(self, source: str) -> None:
        self.source = source
        self.nodes = 0

    def __call__(self, obj: object, depth: int = 0) -> Any:
        self.nodes += 1
        if self.nodes > MAX_NODES:
            raise InputsError(f"{self.source}: sample inputs have more than {MAX_NODES} elements")
        if depth > MAX_DEPTH:
            raise InputsError(
                f"{self.source}: sample inputs are nested more than {MAX_DEPTH} levels deep "
                "(or contain a cycle)"
            )
        if isinstance(obj, _Tensor):
            return obj.meta
        if isinstance(obj, _Dtype):
            return DtypeValue(obj.name)
        if isinstance(obj, _Device):
            return DeviceValue(obj.type, obj.index)
        if obj is None or type(obj) in (bool, int, float, str, bytes):
            return obj
        if type(obj) is tuple:
            return tuple(self(v, depth + 1) for v in obj)
        if type(obj) is list:
            return [self(v, depth + 1) for v in obj]
        if isinstance(obj, dict) and type(obj) in (dict, OrderedDict):
            for key in obj:
                if key is not None and type(key) not in (bool, int, float, str):
                    raise InputsError(
                        f"{self.source}: sample inputs hold a dict keyed by "
                        f"{type(key).__name__.lstrip('_')}; keys must be str, int, float or None"
                    )
            return {k: self(v, depth + 1) for k, v in obj.items()}
        if isinstance(obj, _Storage):
            raise InputsError(f"{self.source}: sample inputs hold a bare storage, not a tensor")
        raise InputsError(
            f"{self.source}: sample inputs hold an unsupported {type(obj).__name__} value"
        )


def _is_kwargs(obj: object) -> bool:
    return isinstance(obj, dict) and all(isinstance(k, str) for k in obj)


def _normalize(obj: object, source: str) -> SampleInputs:
    tree = _Walk(source)(obj)
    if isinstance(tree, (tuple, list)):
        if len(tree) == 2 and isinstance(tree[0], (tuple, list)) and _is_kwargs(tree[1]):
            return SampleInputs(tuple(tree[0]), dict(tree[1]), source)
        return SampleInputs(tuple(tree), {}, source)
    if isinstance(tree, dict):
        if not _is_kwargs(tree):
            raise InputsError(
                f"{source}: sample inputs are a dict with non-string keys",
                "save keyword inputs as a dict keyed by argument name",
            )
        return SampleInputs((), dict(tree), source)
    return SampleInputs((tree,), {}, source)


def _one_line(text: str) -> str:
    """Escape line breaks and other control characters (from file names or pickled names)."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


_REPR = reprlib.Repr()
_REPR.maxlevel, _REPR.maxstring, _REPR.maxother, _REPR.maxlong = 3, 60, 60, 60
_REPR.maxtuple = _REPR.maxlist = _REPR.maxdict = _REPR.maxset = 6


def _brief(value: object) -> str:
    """A bounded repr: never expands a shared or deep user structure, never longer than ~100."""
    try:
        text = _REPR.repr(value)
    except Exception:  # noqa: BLE001 - a repr that fails says only the type
        text = f"<{type(value).__name__}>"
    return _one_line(text[:120])


def _short(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    text = " ".join(text.split())
    return text if len(text) <= 200 else text[:197] + "..."
