"""Pure parsers for crash triage: printer output, device asserts, cuBLAS and sanitizer errors.
What it reads in generated code and the ExportedProgram's graph is in triage/codegen.py
(re-exported here)."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from aotipre.triage.codegen import (
    FxNode,
    IndexChain,
    fx_nodes,
    index_chain,
    index_checks,
    index_pointer,
    kernel_call_args,
    kernel_call_order,
    kernel_params,
    kernel_source,
    match_nodes,
    source_node_comment,
)
from aotipre.triage.diagnosis import IndexBound, TensorStats

if TYPE_CHECKING:
    from aotipre.runner.sanitizer import SanitizerHit, sanitizer_hits

__all__ = [
    "BlamedOp",
    "FxNode",
    "IndexChain",
    "LaunchFault",
    "SanitizerHit",
    "blamed_op",
    "device_assert_kernels",
    "faulting_launch",
    "first_error",
    "fx_nodes",
    "index_bounds",
    "index_chain",
    "index_pointer",
    "kernel_call_args",
    "kernel_call_order",
    "kernel_params",
    "kernel_source",
    "launches",
    "match_nodes",
    "parse_tensor_blocks",
    "sanitizer_hits",
    "source_node_comment",
]

# --------------------------------------------------------------------------------------------
# The intermediate value printer (aot_inductor.debug_intermediate_value_printer)

_LAUNCH = re.compile(r"^\[ (before_launch|after_launch): (\S+) \]\s*$")
_BLOCK = re.compile(
    r"^\[\s*(?:(?P<model>aoti_model_inputs)|(?P<when>before_launch|after_launch) - (?P<kernel>\S+))"
    r" - (?P<name>[^\]:]+?)(?::\s*(?P<scalar>-?[\w.+-]+))?\s*\]:?(?P<rest>.*)$"
)
_TYPE_LINE = re.compile(
    r"^\[ (?P<dev>CPU|CUDA|MPS|XPU|HIP|Meta)?(?P<type>\w+?)Type\{(?P<dims>[\d,]*)\} \]$"
)
_STAT = re.compile(
    r"^(?P<key>Number of elements|Dtype|Mean value|Min value|Max value|Device|Size|Stride)"
    r":\s*(?P<value>.*)$"
)
_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*(?:e[-+]?\d+)?|\.\d+(?:e[-+]?\d+)?|nan|inf)", re.IGNORECASE)
_SCALE = re.compile(r"^\s*([-+]?\d+(?:\.\d*)?e[-+]?\d+)\s*\*\s*$", re.IGNORECASE)
_NONFINITE = re.compile(r"\b(?:nan|inf)\b", re.IGNORECASE)
_CPP_TYPES = {
    "Long": "int64", "Int": "int32", "Short": "int16", "Char": "int8", "Byte": "uint8",
    "Bool": "bool", "Float": "float32", "Double": "float64", "Half": "float16",
    "BFloat16": "bfloat16",
}  # fmt: skip
_DTYPE_TEXT = {
    "long int": "int64", "int": "int32", "short int": "int16", "signed char": "int8",
    "unsigned char": "uint8", "bool": "bool", "float": "float32", "double": "float64",
    "float32": "float32", "float16": "float16", "bfloat16": "bfloat16", "c10::Half": "float16",
    "c10::BFloat16": "bfloat16",
}  # fmt: skip


def launches(lines: Iterable[str]) -> list[tuple[str, str]]:
    """The level-3 printer's `[ before_launch: K ]` / `[ after_launch: K ]` events, in order."""
    out = []
    for line in lines:
        m = _LAUNCH.match(line.strip())
        if m:
            out.append((m.group(1), m.group(2)))
    return out


@dataclass(frozen=True)
class LaunchFault:
    """The printer's verdict: the last kernel launched whose after_launch never came."""

    kernel: str
    previous: str | None
    """The kernel launched before it (a likely producer of its inputs)."""
    tail: tuple[str, ...]
    """The last few launches, oldest first, ending with `kernel`."""
    evidence: tuple[str, ...]


def faulting_launch(events: list[tuple[str, str]], tail: int = 6) -> LaunchFault | None:
    """The last `before_launch` without its `after_launch`; None when every launch finished."""
    order: list[str] = []
    pending: list[int] = []
    for event, kernel in events:
        if event == "before_launch":
            order.append(kernel)
            pending.append(len(order) - 1)
        else:
            for i in range(len(pending) - 1, -1, -1):
                if order[pending[i]] == kernel:
                    del pending[i]
                    break
    if not pending:
        return None
    at = pending[-1]
    kernel = order[at]
    previous = next((k for k in reversed(order[:at]) if k != kernel), None)
    shown = tuple(order[max(0, at - tail + 1) : at + 1])
    evidence = [f"[ after_launch: {k} ]" for k in order[at - 1 : at]] if at else []
    evidence.append(f"[ before_launch: {kernel} ]  <- no after_launch: the faulting launch")
    return LaunchFault(kernel, previous, shown, tuple(evidence))


@dataclass
class _Block:
    name: str
    kernel: str | None
    when: str
    scalar: float | None = None
    stats: dict[str, str] = field(default_factory=dict)
    type_line: tuple[str, str, tuple[int, ...]] | None = None
    count: int = 0
    lo: float = math.inf
    hi: float = -math.inf
    total: float = 0.0
    nan: int = 0
    inf: int = 0
    scale: float = 1.0
    values_ok: bool = True


def parse_tensor_blocks(
    lines: Iterable[str], kernels: Iterable[str] | None = None
) -> list[TensorStats]:
    """Level-2 printer blocks (`[  before_launch - K - arg1_1  ]:` + values + stats), streamed.

    torch 2.13 prints statistics lines (Number of elements, Dtype, Mean/Min/Max value, Device,
    Size, Stride); older versions print only the values and a `[ CPULongType{2,5} ]` line, so
    min/max/mean and NaN/Inf counts are also computed from the values as they stream by.
    `kernels`: keep only blocks of these kernels (and the model-input blocks).
    """
    wanted = {k.lower() for k in kernels} if kernels is not None else None
    out: list[TensorStats] = []
    block: _Block | None = None
    for raw in lines:
        line = raw.rstrip("\n")
        stripped = line.strip()
        m = _BLOCK.match(stripped)
        if m:
            if block is not None:
                out.append(_finish(block))
            kernel = m.group("kernel")
            when = "model_input" if m.group("model") else m.group("when")
            block = _Block(name=m.group("name").strip(), kernel=kernel, when=when)
            if wanted is not None and kernel is not None and kernel.lower() not in wanted:
                block = None
            elif m.group("scalar") is not None:
                block.scalar = _to_float(m.group("scalar"))
                out.append(_finish(block))
                block = None
            elif m.group("rest").strip():
                _values(block, m.group("rest"))
            continue
        if block is None:
            continue
        if _LAUNCH.match(stripped) or not stripped and block.stats:
            out.append(_finish(block))
            block = None
            continue
        t = _TYPE_LINE.match(stripped)
        if t:
            dims = tuple(int(d) for d in t.group("dims").split(",") if d)
            block.type_line = (t.group("dev"), t.group("type"), dims)
            continue
        s = _STAT.match(stripped)
        if s:
            block.stats[s.group("key")] = s.group("value").strip()
            continue
        if stripped.startswith(("Layout:", "Is contiguous:", "Requires grad:")):
            continue
        _values(block, stripped)
    if block is not None:
        out.append(_finish(block))
    return out


def _values(block: _Block, text: str) -> None:
    if not block.values_ok or block.stats:
        return
    sc = _SCALE.match(text)
    if sc:
        block.scale = float(sc.group(1))
        return
    if re.match(r"^\(\d+(?:,\d+)*,?[.,]*\) = ?$", text.replace(" ", "")) or text.startswith("("):
        return  # `(1,.,.) =` slice headers of a 3-d print
    if "Columns" in text:
        return
    for tok in _NUMBER.findall(text):
        v = _to_float(tok)
        if v is None:
            continue
        v *= block.scale
        block.count += 1
        if math.isnan(v):
            block.nan += 1
            continue
        if math.isinf(v):
            block.inf += 1
        block.lo = min(block.lo, v)
        block.hi = max(block.hi, v)
        block.total += v


def _finish(b: _Block) -> TensorStats:
    if b.scalar is not None:
        return TensorStats(name=b.name, kernel=b.kernel, when=b.when, scalar=b.scalar)
    st = b.stats
    dtype = None
    device = None
    shape: tuple[int, ...] | None = None
    if b.type_line is not None:
        dev, typ, dims = b.type_line
        dtype = _CPP_TYPES.get(typ, typ.lower())
        device = (
            "cuda" if dev.upper().startswith("CUDA") else ("cpu" if dev.upper() == "CPU" else None)
        )
        shape = dims
    if "Dtype" in st:
        dtype = _DTYPE_TEXT.get(st["Dtype"], dtype or st["Dtype"])
    if "Device" in st:
        device = st["Device"]
    if "Size" in st:
        shape = _int_list(st["Size"]) or shape
    stride = _int_list(st["Stride"]) if "Stride" in st else None
    numel = _to_int(st.get("Number of elements"))
    computed = b.count > 0
    lo = (
        _to_float(st["Min value"])
        if "Min value" in st
        else (b.lo if computed and b.lo <= b.hi else None)
    )
    hi = (
        _to_float(st["Max value"])
        if "Max value" in st
        else (b.hi if computed and b.lo <= b.hi else None)
    )
    finite = b.count - b.nan
    mean = (
        _to_float(st["Mean value"])
        if "Mean value" in st
        else (b.total / finite if computed and finite > 0 else None)
    )
    if numel is None and computed:
        numel = b.count
    nonfinite = bool(b.nan or b.inf) or any(
        v is not None and not math.isfinite(v) for v in (lo, hi, mean)
    )
    return TensorStats(
        name=b.name,
        kernel=b.kernel,
        when=b.when,
        dtype=dtype,
        shape=shape,
        stride=stride,
        device=device,
        numel=numel,
        min=lo,
        max=hi,
        mean=mean,
        nan=b.nan if computed else None,
        inf=b.inf if computed else None,
        has_nonfinite=nonfinite,
    )


def _to_float(text: str | None) -> float | None:
    if text is None:
        return None
    t = text.strip().rstrip("L").lower()
    try:
        return float(t)
    except ValueError:
        return None


def _to_int(text: str | None) -> int | None:
    try:
        return int(str(text).strip()) if text is not None else None
    except ValueError:
        return None


def _int_list(text: str) -> tuple[int, ...] | None:
    items = re.findall(r"-?\d+", text)
    return tuple(int(i) for i in items) if items or text.strip() in ("[]", "") else None


# --------------------------------------------------------------------------------------------
# Errors in run logs


_TRITON_ASSERT = re.compile(
    r"^(?P<file>\S+?):(?P<line>\d+): (?P<func>\w+): block: \[[\d,]+\], thread: \[[\d,]+\] "
    r"Assertion `(?P<msg>.*)` failed\.?"
)
_ERROR_TIERS = (
    # 0: the error message itself
    re.compile(
        r"CUDA (?:driver )?error:|CUBLAS_STATUS_\w+|CUDNN_STATUS_\w+|^Error: |^\w*(?:Error|Exception): "
        r"|what\(\):|^index out of bounds|Unknown exception|illegal memory access"
    ),
    # 1: device assertions and where an exception was raised
    re.compile(r"Assertion `|Exception raised from|device-side assert"),
    # 2: generic wrappers and crash banners
    re.compile(r"API call failed|Segmentation fault|Fatal Python error|Aborted"),
)
_AOTI_OP = re.compile(r"\b(aoti_torch_(?:cuda|cpu)_\w+)")
_RAISED_FROM = re.compile(r"Exception raised from (\w+) at ")
_LATER_SYMPTOM = re.compile(
    r"CUBLAS_STATUS_\w+|CUDNN_STATUS_\w+|cublas\w*Error|unspecified launch failure"
    r"|cudaErrorLaunchFailure|illegal memory access|device-side assert triggered"
)
_CALLING = re.compile(r"when calling `([^`]+)`")


def first_error(*texts: str) -> str | None:
    """The error a user sees first: the first error message (`Error: CUDA error: ...`,
    `RuntimeError: ...`), else the first device assertion, else a generic wrapper line (torch
    2.11's `run_func_(...) API call failed`) or a crash banner; verbatim, cut at 400 chars."""
    best: tuple[int, str] | None = None
    for text in texts:
        for raw in (text or "").splitlines():
            line = raw.strip()
            if not line or line.startswith("@@aotipre"):
                continue
            for tier, pattern in enumerate(_ERROR_TIERS):
                if pattern.search(line) and (best is None or tier < best[0]):
                    if tier == 0 and _GENERIC.search(line):
                        continue
                    best = (tier, line)
                    break
            if best is not None and best[0] == 0:
                break
        if best is not None and best[0] == 0:
            break
    if best is None:
        return None
    line = best[1].replace(" (most recent call first):", "")
    return line if len(line) <= 400 else line[:397] + "..."


_GENERIC = re.compile(r"API call failed")


def raised_in_kernels(text: str) -> list[str]:
    """Generated CPU kernels an exception was raised in (`Exception raised from cpp_fused_... at
    <kernel.cpp>:27`): c10 names the function whose check failed, and a cpp kernel runs
    synchronously, so that kernel is the one that failed."""
    out: list[str] = []
    for m in _RAISED_FROM.finditer(text or ""):
        name = m.group(1)
        if name.startswith("cpp_") and name not in out:
            out.append(name)
    return out


def unnamed_device_asserts(text: str) -> list[str]:
    """Triton device-assert lines whose kernel name is `unknown` (the kernel is then the one
    whose source holds the asserted check)."""
    out: list[str] = []
    for raw in (text or "").splitlines():
        m = _TRITON_ASSERT.match(raw.strip())
        if m and m.group("func") in ("unknown", "") and raw.strip() not in out:
            out.append(raw.strip())
    return out


def index_bounds(text: str) -> list[IndexBound]:
    """Every `index out of bounds: 0 <= tmpN < SIZE` check or message in the text
    (codegen.index_checks, which the static index check reads without this module)."""
    return [IndexBound(variable, upper, line) for variable, upper, line in index_checks(text)]


def device_assert_kernels(text: str) -> list[str]:
    """Kernel names of Triton device-assert lines (`file.py:24: triton_poi_...: block: ...`)."""
    out: list[str] = []
    for raw in (text or "").splitlines():
        m = _TRITON_ASSERT.match(raw.strip())
        if m and m.group("func") not in ("unknown", "") and m.group("func") not in out:
            out.append(m.group("func"))
    return out


@dataclass(frozen=True)
class BlamedOp:
    """What the first error of a run points at."""

    name: str
    """A generated kernel (`cpp_fused_...`, `triton_...`) or an extern op (`aoti_torch_cuda_mm_out`)."""
    line: str
    """The error line that blames it."""
    later_symptom: bool
    """The error is of a kind that CUDA reports at a later call than the one that caused it
    (cuBLAS/cuDNN status errors, illegal memory access, device-side assert triggered)."""


def blamed_op(text: str) -> BlamedOp | None:
    """What the run's error blames: the function named by `Exception raised from`, else the
    first `aoti_torch_<device>_<op>` in the error and its stack, else a kernel the log names."""
    from aotipre.runner.classify import kernel_names

    text = text or ""
    line = first_error(text) or ""
    later = bool(_LATER_SYMPTOM.search(text))
    for m in _RAISED_FROM.finditer(text):
        name = m.group(1)
        if name.startswith(("aoti_torch_", "cpp_", "triton_")):
            return BlamedOp(name, line, later)
    op = _AOTI_OP.search(text)
    if op:
        calling = _CALLING.search(text)
        shown = line or (f"error when calling `{calling.group(1)}`" if calling else op.group(1))
        return BlamedOp(op.group(1), shown, later)
    names = device_assert_kernels(text) or kernel_names(text)
    if names:
        return BlamedOp(names[0], line, later)
    return None


def with_input_names(stats: list[TensorStats], names: dict[str, str]) -> list[TensorStats]:
    """Attach model-input names (`arg1_1` -> `ids`) to printer statistics."""
    return [replace(s, input=names.get(s.name, s.input)) for s in stats]


def read_lines(path: str, max_bytes: int = 256 * 1024 * 1024) -> Iterator[str]:
    """A log file's lines, streamed (level-2 output of a big tensor can be large)."""
    read = 0
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            read += len(line)
            if read > max_bytes:
                return
            yield line


def decisive(text: str, limit: int = 6) -> list[str]:
    """classify.decisive_lines, without printer noise and C++ trace tails."""
    cleaned = "\n".join(
        line.replace(" (most recent call first):", "")
        for line in (text or "").splitlines()
        if not _LAUNCH.match(line.strip()) and not _BLOCK.match(line.strip())
    )
    from aotipre.runner.classify import decisive_lines  # imported here: only a run's log

    return decisive_lines(cleaned, limit=limit)


def plain_index_chain(source: str, variable: str) -> bool:
    """True when every step from one load to `variable` is a copy, cast or wrap
    (codegen.index_chain)."""
    return index_chain(source, variable) is not None


_FROM_SANITIZER = ("SanitizerHit", "sanitizer_hits")
"""Names re-exported from aotipre.runner.sanitizer on first use: the index check (static lane)
imports this module's kernel parsers and reads no sanitizer log."""


def __getattr__(name: str) -> Any:
    """The sanitizer parsers (`_FROM_SANITIZER`), imported when first asked for."""
    if name in _FROM_SANITIZER:
        from aotipre.runner import sanitizer

        return getattr(sanitizer, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
