"""Torch-free reader of a weights file for a swap (`--weights FILE`): a state_dict saved with
torch.save (through the sample-input reader's weights-only unpickler) or a safetensors file
(its header only: 8-byte little-endian length + JSON, bounded). Tensors become TensorMeta."""

from __future__ import annotations

import json
import os
import stat
import struct
from dataclasses import dataclass, field

from aotipre.errors import AotipreError, UsageError
from aotipre.inputs.load import load_sample_inputs
from aotipre.inputs.meta import TensorMeta
from aotipre.safeio import require_file

MAX_SAFETENSORS_HEADER = 100_000_000
"""The safetensors library's own limit on the header (its `MAX_HEADER_SIZE`)."""
MAX_TENSORS = 1_000_000
MAX_RANK = 64

SAFETENSORS_DTYPES: dict[str, tuple[str, int]] = {
    "BOOL": ("bool", 1),
    "U8": ("uint8", 1),
    "I8": ("int8", 1),
    "U16": ("uint16", 2),
    "I16": ("int16", 2),
    "F16": ("float16", 2),
    "BF16": ("bfloat16", 2),
    "U32": ("uint32", 4),
    "I32": ("int32", 4),
    "F32": ("float32", 4),
    "U64": ("uint64", 8),
    "I64": ("int64", 8),
    "F64": ("float64", 8),
    "C64": ("complex64", 8),
    "F8_E4M3": ("float8_e4m3fn", 1),
    "F8_E5M2": ("float8_e5m2", 1),
    "F8_E8M0": ("float8_e8m0fnu", 1),
}
"""safetensors dtype tag -> (torch dtype name, bytes per element)."""


@dataclass(frozen=True)
class WeightsFile:
    """The tensors of a weights file, by name (no values)."""

    path: str
    format: str
    """`torch.save` or `safetensors`."""
    tensors: dict[str, TensorMeta] = field(default_factory=dict)
    """Name (the state_dict key, a module path such as `fc.weight`) -> what it holds."""
    skipped: tuple[str, ...] = ()
    """Entries that are not tensors (a torch.save dict may hold counters or strings)."""

    def describe(self) -> str:
        return f"--weights {self.path} ({self.format}, {len(self.tensors)} tensor(s))"


def read_weights(path: str | os.PathLike[str]) -> WeightsFile:
    """Read `path` without torch; one UsageError line (naming `--weights PATH`) when it is
    missing, not a regular file, truncated, hostile, or neither format."""
    name = os.fspath(path)
    subject = f"--weights {name}"
    st = require_file(name, subject)
    head = _read_head(name, subject, 9)
    if head.startswith((b"PK\x03\x04", b"PK\x05\x06")):
        return _read_torch_save(name, subject)
    if len(head) >= 9 and head[8:9] == b"{":
        return _read_safetensors(name, subject, st.st_size)
    if not head:
        raise UsageError(f"{subject} is empty (0 bytes)")
    raise UsageError(
        f"{subject} is neither a torch.save file (a zip) nor a safetensors file",
        "save the weights with torch.save(model.state_dict(), path) or safetensors' save_file",
    )


def _open(name: str, subject: str) -> int:
    try:
        # O_NONBLOCK: a FIFO put in the file's place after the stat must not block the open
        fd = os.open(name, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise UsageError(f"cannot read {subject}: {exc.strerror or exc}") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise UsageError(f"{subject} is not a regular file (a pipe or device?)")
    return fd


def _read_head(name: str, subject: str, n: int) -> bytes:
    fd = _open(name, subject)
    try:
        return os.read(fd, n)
    except OSError as exc:
        raise UsageError(f"cannot read {subject}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)


def _read_torch_save(name: str, subject: str) -> WeightsFile:
    try:
        sample = load_sample_inputs(name)
    except AotipreError as exc:
        why = str(exc).removeprefix(f"{name}: ")
        raise UsageError(f"{subject}: not a state_dict saved with torch.save ({why})") from None
    tree: object = sample.kwargs
    if sample.args:
        tree = sample.args[0] if len(sample.args) == 1 else None
    if not isinstance(tree, dict) or not tree:
        raise UsageError(
            f"{subject}: holds no dict of tensors keyed by name",
            "save the weights with torch.save(model.state_dict(), path)",
        )
    tensors = {str(k): v for k, v in tree.items() if isinstance(v, TensorMeta)}
    skipped = tuple(str(k) for k, v in tree.items() if not isinstance(v, TensorMeta))
    if not tensors:
        raise UsageError(
            f"{subject}: its dict holds no tensors",
            "save the weights with torch.save(model.state_dict(), path)",
        )
    return WeightsFile(name, "torch.save", tensors, skipped)


def _no_duplicates(pairs: list[tuple[str, object]]) -> dict[str, object]:
    out: dict[str, object] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"duplicate key {key[:100]!r}")
        out[key] = value
    return out


def _read_safetensors(name: str, subject: str, size: int) -> WeightsFile:
    bad = f"{subject}: not a valid safetensors file"
    fd = _open(name, subject)
    try:
        with os.fdopen(fd, "rb") as fh:
            raw = fh.read(8)
            (n,) = struct.unpack("<Q", raw) if len(raw) == 8 else (0,)
            if n > MAX_SAFETENSORS_HEADER:
                raise UsageError(
                    f"{bad}: its header declares {n} bytes, more than the "
                    f"{MAX_SAFETENSORS_HEADER} safetensors itself reads"
                )
            if n == 0 or 8 + n > size:
                raise UsageError(
                    f"{bad}: its header declares {n} bytes but the file has {size}: truncated?"
                )
            data = fh.read(n)
    except OSError as exc:
        raise UsageError(f"cannot read {subject}: {exc.strerror or exc}") from None
    if len(data) != n:
        raise UsageError(f"{bad}: the file ends inside its header (truncated)")
    try:
        header = json.loads(data.decode("utf-8"), object_pairs_hook=_no_duplicates)
    except RecursionError:
        raise UsageError(f"{bad}: its header is nested too deeply") from None
    except (UnicodeDecodeError, ValueError) as exc:
        raise UsageError(f"{bad}: its header is not JSON ({_short(exc)})") from None
    if not isinstance(header, dict):
        raise UsageError(f"{bad}: its header is not a JSON object")
    body = size - 8 - n
    tensors: dict[str, TensorMeta] = {}
    for key, entry in header.items():
        if key == "__metadata__":
            continue
        if len(tensors) >= MAX_TENSORS:
            raise UsageError(f"{bad}: more than {MAX_TENSORS} tensors")
        tensors[key] = _safetensors_entry(bad, key, entry, body)
    if not tensors:
        raise UsageError(f"{bad}: its header lists no tensors")
    return WeightsFile(name, "safetensors", tensors)


def _safetensors_entry(bad: str, key: str, entry: object, body: int) -> TensorMeta:
    shown = _printable(key)
    if not isinstance(entry, dict):
        raise UsageError(f"{bad}: entry {shown!r} is not an object")
    tag, shape, offsets = entry.get("dtype"), entry.get("shape"), entry.get("data_offsets")
    if not isinstance(tag, str) or tag not in SAFETENSORS_DTYPES:
        raise UsageError(f"{bad}: entry {shown!r} has unknown dtype {_printable(str(tag))!r}")
    ok_shape = (
        isinstance(shape, list)
        and len(shape) <= MAX_RANK
        and all(type(d) is int and 0 <= d < 2**63 for d in shape)
    )
    if not ok_shape or not isinstance(shape, list):  # the second test narrows the type only
        raise UsageError(f"{bad}: entry {shown!r} has a bad shape {_printable(str(shape))[:80]}")
    if (
        not isinstance(offsets, list)
        or len(offsets) != 2
        or not all(type(o) is int for o in offsets)
        or not 0 <= offsets[0] <= offsets[1]
    ):
        raise UsageError(f"{bad}: entry {shown!r} has bad data_offsets")
    dtype, itemsize = SAFETENSORS_DTYPES[tag]
    numel = 1
    for d in shape:
        numel *= d
    if offsets[1] - offsets[0] != numel * itemsize:
        raise UsageError(
            f"{bad}: entry {shown!r} ({dtype}{shape}) needs {numel * itemsize} bytes but its "
            f"data_offsets span {offsets[1] - offsets[0]}"
        )
    if offsets[1] > body:
        raise UsageError(
            f"{bad}: entry {shown!r} ends at byte {offsets[1]} of a {body}-byte data section "
            "(truncated)"
        )
    strides = []
    step = 1
    for d in reversed(shape):
        strides.append(step)
        step *= d
    return TensorMeta(dtype, tuple(shape), tuple(reversed(strides)))


def _printable(text: str) -> str:
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)[:200]


def _short(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:200]
