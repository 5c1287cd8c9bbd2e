"""Read an AOTI model's input contract from its generated `<hash>.wrapper.cpp`, without torch.

Longer than the ~600 lines of the other modules on purpose: it is one parser of one generated
file format. Every part (constructor counts, names, constants, specs, the per-input checks,
symbol bindings, asserts, kernel casts, alignment) shares the same patterns, the per-input draft
and the bounded warnings collector, and the result types are what it returns; split, the
knowledge of one format (and of how it changed between torch 2.11 and 2.15) would be spread over
several modules that only make sense together."""

from __future__ import annotations

import bisect
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from .dtypes import ALL_DTYPES, C10_DTYPES, canonical
from .spec import DataSymbol, Dim, DimBound

# c10 DeviceType numbers (torch/headeronly/core/DeviceType.h), as torch names the device types.
DEVICE_TYPES: dict[int, str] = {
    0: "cpu",
    1: "cuda",
    2: "mkldnn",
    3: "opengl",
    4: "opencl",
    5: "ideep",
    6: "hip",
    7: "fpga",
    8: "maia",
    9: "xla",
    10: "vulkan",
    11: "metal",
    12: "xpu",
    13: "mps",
    14: "meta",
    15: "hpu",
    16: "ve",
    17: "lazy",
    18: "ipu",
    19: "mtia",
    20: "privateuseone",
}

# ATen scalar-type constants (`at::kFloat`) as the wrapper writes them (cpp_utils.DTYPE_TO_ATEN).
ATEN_DTYPES: dict[str, str] = {
    "kFloat": "float32",
    "kDouble": "float64",
    "kHalf": "float16",
    "kBFloat16": "bfloat16",
    "kLong": "int64",
    "kInt": "int32",
    "kShort": "int16",
    "kChar": "int8",
    "kByte": "uint8",
    "kUInt16": "uint16",
    "kUInt32": "uint32",
    "kUInt64": "uint64",
    "kBool": "bool",
    "kComplexHalf": "complex32",
    "kComplexFloat": "complex64",
    "kComplexDouble": "complex128",
    "kFloat8_e4m3fn": "float8_e4m3fn",
    "kFloat8_e5m2": "float8_e5m2",
    "kFloat8_e4m3fnuz": "float8_e4m3fnuz",
    "kFloat8_e5m2fnuz": "float8_e5m2fnuz",
    "kFloat8_e8m0fnu": "float8_e8m0fnu",
}

# C++ element types of CPU kernel pointer casts (cpp_utils.DTYPE_TO_CPP).
CPP_DTYPES: dict[str, str] = {
    "float": "float32",
    "double": "float64",
    "at::Half": "float16",
    "half": "float16",
    "at::BFloat16": "bfloat16",
    "bfloat16": "bfloat16",
    "int64_t": "int64",
    "int32_t": "int32",
    "int16_t": "int16",
    "int8_t": "int8",
    "uint64_t": "uint64",
    "uint32_t": "uint32",
    "uint16_t": "uint16",
    "uint8_t": "uint8",
    "bool": "bool",
    "at::complex<at::Half>": "complex32",
    "at::complex<float>": "complex64",
    "at::complex<double>": "complex128",
    "c10::complex<float>": "complex64",
    "c10::complex<double>": "complex128",
    "at::Float8_e4m3fn": "float8_e4m3fn",
    "at::Float8_e5m2": "float8_e5m2",
    "at::Float8_e4m3fnuz": "float8_e4m3fnuz",
    "at::Float8_e5m2fnuz": "float8_e5m2fnuz",
}

MAX_INPUTS = 100_000
"""A constructor declaring more inputs than this is not believed (no giant allocations)."""

_C10_CODES: dict[str, int] = {name: code for code, name in C10_DTYPES.items()}

MAX_WARNINGS = 200
"""Warnings beyond this many are summarized in one line (a hostile file cannot flood a report)."""
MAX_SPEC_ASSIGNMENTS = 16
"""in_spec_/out_spec_ assignments read (torch writes each once)."""

# Every pattern below is linear: no nested quantifiers, and free-text spans are length-capped.
_NUM = r"(-?\d{1,25})[lL]{0,2}"
_CTOR_RE = re.compile(
    r"AOTInductorModelBase\(\s*(\d{1,9})\s*,\s*(\d{1,9})\s*(?:,\s*(\d{1,9})\s*)?[,)]"
)
_INFO_NAME_RE = re.compile(
    r"\b(inputs|outputs)_info_\[(\d{1,9})\]\.name\s*=\s*\"([^\"\\\n]{0,500})\"\s*;"
)
_CONST_FIELD_RE = re.compile(r"\bconstants_info_\[(\d{1,9})\]\.(\w{1,40})\s*=\s*([^;\n]{0,2000});")
_SPEC_RE = re.compile(r"\b(in|out)_spec_\s*=")
_CHECK_DEF_RE = re.compile(
    r"static\s+void\s+check_input_(\d{1,9})\(\s*AtenTensorHandle\s*\*\s*input_handles\s*\)\s*\{"
)
_ENV_FN_RE = re.compile(r"static\s+bool\s+_check_aoti_runtime_check_inputs_env\(")
_CHECK_ALL_RE = re.compile(r"static\s+void\s+__check_inputs_outputs\(")
_RUN_IMPL_RE = re.compile(r"\bvoid\s+(\w{1,200})::run_impl\(")
_HANDLE_RE = re.compile(
    r"(?:ConstantHandle\s+(\w{1,200})\s*=\s*ConstantHandle\(\s*input_handles\[(\d{1,9})\]\s*\)"
    r"|auto\s+(\w{1,200})\s*=\s*input_handles\[(\d{1,9})\])\s*;"
)
# \b: start only at a word's first character (a long word would otherwise cost 200 steps per byte)
_EXPECTED_DTYPE_RE = re.compile(r"\b(\w{1,200})_expected_dtype\s*=\s*([^;\n]{0,200});")
_EXPECTED_DEVICE_RE = re.compile(r"\b(\w{1,200})_expected_device_type\s*=\s*([^;\n]{0,200});")
_IF_RE = re.compile(r"\bif\s*\(([^\n{};]{0,300})\)\s*\{")
_MSG_HANDLE_RE = re.compile(r"\"input_handles\[(\d{1,9})\]: ")
_MSG_DTYPE_RE = re.compile(r"\"\((at::k\w{1,40})\), \"")
_MSG_DEVICE_RE = re.compile(r"_expected_device_type\s*<<\s*\"(\d{1,9})\((\w{1,40})\), \"")
_MSG_VALUE_RES: dict[str, re.Pattern[str]] = {
    "static": re.compile(r"unmatched dim value at (\d{1,9}), \"\s*<<\s*\"expected: (-?\d{1,25}), "),
    "lower": re.compile(r"too small at (\d{1,9}), \"\s*<<\s*\"expected it to be >= (-?\d{1,25}), "),
    "upper": re.compile(r"too large at (\d{1,9}), \"\s*<<\s*\"expected to be <= (-?\d{1,25}), "),
    "stride": re.compile(
        r"unmatched stride value at (\d{1,9}), \"\s*<<\s*\"expected: (-?\d{1,25}), "
    ),
}
_COND_RES: dict[str, re.Pattern[str]] = {
    "static": re.compile(_NUM + r" != (\w{1,200})_size\[(\d{1,9})\]"),
    "lower": re.compile(r"(\w{1,200})_size\[(\d{1,9})\] < " + _NUM),
    "upper": re.compile(r"(\w{1,200})_size\[(\d{1,9})\] > " + _NUM),
    "stride": re.compile(_NUM + r" != (\w{1,200})_stride\[(\d{1,9})\]"),
    "dtype": re.compile(r"(\w{1,200})_expected_dtype != (\w{1,200})_dtype"),
    "device": re.compile(r"(\w{1,200})_expected_device_type != (\w{1,200})_device_type"),
}
_BINDING_RE = re.compile(r"\bint64_t\s+(\w{1,200})\s*=\s*([^;\n]{1,500});")
_SIZE_REF_RE = re.compile(r"(\w{1,200})_(size|stride)\[(\d{1,9})\]")
_IDENT_RE = re.compile(r"[A-Za-z_]\w{0,199}")
_ASSERT_RE = re.compile(
    r"\bassert_size_stride\(\s*(\w{1,200})\s*,\s*\{([^{}\n]{0,2000})\}\s*,"
    r"\s*\{([^{}\n]{0,2000})\}\s*,\s*\"([^\"\n]{0,200})\"\s*\)"
)
_KERNEL_CAST_RE = re.compile(
    r"\((const\s+)?([A-Za-z_][\w:<> ]{0,60}?)\s*\*\)\((\w{1,200})\.data_ptr\(\)\)"
)
_ALIGN_RE = re.compile(
    r"reinterpret_cast<std::uintptr_t>\((\w{1,200})\.data_ptr\(\)\)\s*&\s*\((\d{1,9})\s*-\s*1\)"
)
_ITEM_RE = re.compile(
    r"\baoti_torch_item_(\w{1,20})\(\s*(\w{1,200})\s*,\s*&\s*(\w{1,200})_raw\s*\)"
)
"""`aoti_torch_item_int64(buf0, &u0_raw)`: a value read from a tensor at run time (`.item()`)."""
_SCALAR_ASSERT_RE = re.compile(
    r"\bif\s*\(\s*!\s*\(([^\n{};]{1,300})\)\s*\)\s*\{\s*throw\s+std::runtime_error\(\s*"
    r"\"Expected ([^\"\n]{1,300}?)(?: to be True)? but received \"\s*\+\s*std::to_string\((\w{1,200})\)"
)
"""A torch._check / runtime assert on a scalar, as AssertScalar writes it for the C++ wrapper."""
_INT_ARRAY_RE = re.compile(r"\bint64_t\s+int_array_\d{1,9}\[\]\s*=\s*\{([^{}\n]{0,2000})\}")
"""The sizes/strides of a tensor run_impl allocates or views."""
_ASSERT_ALIGN_RE = re.compile(
    r"(_check_aoti_runtime_check_inputs_env\(\)\s*\)\s*\{\s*)?"
    r"\bassert_alignment\(\s*(\w{1,200})\s*,\s*(\d{1,9})\s*,\s*\"input\"\s*\)"
)
"""torch 2.15: `assert_alignment(arg0_1, 16, "input");`, unconditional when compiled with
alignment_asserts_inputs, else inside `if (_check_aoti_runtime_check_inputs_env()) { ... }`."""
_STRING_LITERAL_RE = re.compile(r'"((?:[^"\\\n]|\\.)*)"')
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "0": "\0"}
_INT_LITERAL_RE = re.compile(r"\b(\d{1,25})[lL]{1,2}\b")

T = TypeVar("T")


@dataclass(frozen=True)
class SymbolBinding:
    """How run_impl binds one C++ local (a shape symbol such as `s43`) to an input."""

    symbol: str
    kind: str
    """size (`= arg3_1_size[0]`), stride (`= arg3_1_stride[0]`), alias (`= s43`), or expr."""
    input_name: str | None = None
    """The graph input the value is read from (size/stride), when it is one."""
    dim: int | None = None
    target: str | None = None
    """For an alias: the symbol it copies. For an expr: the C++ expression."""


@dataclass(frozen=True)
class WrapperConstant:
    """One entry of `constants_info_`: a weight, buffer or lifted constant baked into the model."""

    name: str
    original_fqn: str | None
    """The module path (`lin.weight`), as the user's state_dict names it."""
    dtype: str | None
    shape: tuple[int, ...] | None
    stride: tuple[int, ...] | None = None
    index: int = 0
    device_type: str | None = None
    kind: str | None = None
    """Parameter, Buffer, TensorConstant, FoldedConstant or Unknown (ConstantType)."""
    data_size: int | None = None
    from_folded: bool | None = None


@dataclass(frozen=True)
class WrapperInput:
    """What the wrapper reveals about one graph input (`input_handles[index]`)."""

    index: int
    name: str | None
    """The graph input name (`arg3_1`), as in `inputs_info_[index].name`."""
    dtype: str | None = None
    """Canonical dtype name, from `aoti_torch_dtype_<name>()` (or a kernel pointer cast)."""
    dtype_code: int | None = None
    """c10 ScalarType number of dtype: what runtime messages print (`expected: 6(at::kFloat)`)."""
    dtype_source: str | None = None
    """check_function, or kernel_call (inferred from `(const float*)(arg0_1.data_ptr())`)."""
    static_dims: dict[int, int] = field(default_factory=dict)
    """dim -> required size (`unmatched dim value at`)."""
    bounds: dict[int, tuple[int | None, int | None]] = field(default_factory=dict)
    """dim -> (min, max) of a dynamic dim, as checked (`too small` / `too large`); None: unchecked.
    The max is clamped to 2**63-1 by the codegen when the symbol is unbounded but finite."""
    static_strides: dict[int, int] = field(default_factory=dict)
    """dim -> required stride; symbolic strides are not checked by the wrapper."""
    device_type: int | None = None
    """c10 DeviceType number (0 cpu, 1 cuda); only cpu and cuda get a device check."""
    device: str | None = None
    rank: int | None = None
    """Number of dims: from assert_size_stride when present, else 1 + the highest dim the check
    function tests (every dim is normally tested: static ones for equality, dynamic ones for
    their lower bound)."""
    size_symbols: dict[int, str] = field(default_factory=dict)
    """dim -> the symbol run_impl reads from this input's size (`int64_t s43 = arg3_1_size[0];`)."""
    stride_symbols: dict[int, str] = field(default_factory=dict)
    sizes: tuple[Dim, ...] | None = None
    """From `assert_size_stride(arg3_1, {s43, 5L}, ...)` (torch >= 2.13 writes these)."""
    strides: tuple[Dim, ...] | None = None
    alignment: int | None = None
    """Byte alignment the compiled code assumes (CUDA wrappers copy misaligned inputs)."""
    alignment_policy: str | None = None
    """What run_impl does with a misaligned input: `copy` (clones it at every call, with a
    warning: torch 2.11-2.15's default for CUDA), `assert` (refuses it at every call:
    `assert_alignment(x, 16, "input")`, torch 2.15 compiled with alignment_asserts_inputs) or
    `assert_checked` (refuses it only under AOTI_RUNTIME_CHECK_INPUTS)."""
    has_check_function: bool = False
    check_complete: bool | None = None
    """False when the check code was cut off or had parts that did not parse; None: no checks."""

    @property
    def shape(self) -> tuple[Dim, ...] | None:
        """The best known shape: assert_size_stride's, else rebuilt from checks and bindings.

        A dim known neither way is `Dim()` (value and expr both None).
        """
        if self.sizes is not None:
            return self.sizes
        if self.rank is None:
            return None
        dims: list[Dim] = []
        for d in range(self.rank):
            if d in self.static_dims:
                dims.append(Dim(value=self.static_dims[d]))
            elif d in self.size_symbols:
                dims.append(Dim(expr=self.size_symbols[d]))
            else:
                dims.append(Dim())
        return tuple(dims)

    @property
    def size_exprs(self) -> tuple[str | None, ...]:
        """Per dim up to rank, the size as text: assert_size_stride's (`s31`, `2*s77`, `3`), else
        the symbol run_impl reads from this dim, else the static value; None where unknown."""
        if self.sizes is not None:
            return tuple(str(d) for d in self.sizes)
        return tuple(
            self.size_symbols.get(d)
            or (str(self.static_dims[d]) if d in self.static_dims else None)
            for d in range(self.rank or 0)
        )

    @property
    def stride_exprs(self) -> tuple[str | None, ...]:
        """Per dim up to rank, the stride as text (same sources as size_exprs)."""
        if self.strides is not None:
            return tuple(str(d) for d in self.strides)
        return tuple(
            self.stride_symbols.get(d)
            or (str(self.static_strides[d]) if d in self.static_strides else None)
            for d in range(self.rank or 0)
        )

    def dim_bounds(self) -> tuple[DimBound | None, ...]:
        """Per-dim bounds in spec form (TensorSpec.bounds); None for dims without a range check."""
        rank = self.rank if self.rank is not None else (max(self.bounds, default=-1) + 1)
        out: list[DimBound | None] = []
        for d in range(rank):
            b = self.bounds.get(d)
            out.append(None if b is None else DimBound(min=b[0], max=b[1]))
        return tuple(out)


@dataclass(frozen=True)
class WrapperContract:
    """Everything `parse_wrapper_cpp` could read; `warnings` says what it could not."""

    in_spec: str | None = None
    """The pytree in_spec JSON (`[1, {...}]`), chunks concatenated."""
    out_spec: str | None = None
    input_names: tuple[str, ...] = ()
    output_names: tuple[str, ...] = ()
    constants: tuple[WrapperConstant, ...] = ()
    num_inputs: int | None = None
    """From the `AOTInductorModelBase(<n_in>, <n_out>, <n_const>, ...)` constructor call."""
    num_outputs: int | None = None
    num_constants: int | None = None
    inputs: tuple[WrapperInput, ...] = ()
    symbols: tuple[SymbolBinding, ...] = ()
    """Every `int64_t x = ...;` binding at the top of run_impl, in order."""
    aliases: dict[str, str] = field(default_factory=dict)
    """Replaced symbol -> canonical symbol (`int64_t s95 = s31;`; torch >= 2.13)."""
    check_functions_present: bool = False
    """True when per-input check code (dtype/shape/stride/device) was found."""
    check_style: str | None = None
    """per_input (`check_input_<i>()`, torch 2.11+) or inline (older: in __check_inputs_outputs)."""
    checks_env_gated: bool | None = None
    """True: checks run only with AOTI_RUNTIME_CHECK_INPUTS set; False: always on (old
    debug_compile builds); None: no checks."""
    asserts_present: bool = False
    """True when run_impl has `assert_size_stride(<input>, ..., "input")` (torch >= 2.13)."""
    data_symbols: tuple[DataSymbol, ...] = ()
    """Values run_impl reads from tensors at run time (`.item()`), in order, with their checks."""
    written_constants: tuple[str, ...] = ()
    """Constants (their compiled names) that run_impl writes: a kernel's non-const pointer on
    the CPU, an `out_ptr`/`in_out_ptr` argument of a Triton launcher, the first argument of
    an in-place or `_out` shim call. A buffer among them is state the model carries across
    calls."""
    recognized: bool = False
    """False when the text has none of the markers of an AOTI wrapper.cpp."""
    warnings: tuple[str, ...] = ()

    def input(self, name: str) -> WrapperInput | None:
        return next((i for i in self.inputs if i.name == name), None)

    def symbol_sources(self, symbol: str) -> tuple[tuple[str, int], ...]:
        """(input name, dim) pairs whose size defines `symbol` (aliases followed)."""
        seen: set[str] = set()
        while symbol in self.aliases and symbol not in seen:
            seen.add(symbol)
            symbol = self.aliases[symbol]
        return tuple(
            (b.input_name, b.dim)
            for b in self.symbols
            if b.symbol == symbol
            and b.kind == "size"
            and b.input_name is not None
            and b.dim is not None
        )


@dataclass
class _Draft:
    """Mutable per-input state while parsing."""

    index: int
    name: str | None = None
    dtype: str | None = None
    dtype_source: str | None = None
    static_dims: dict[int, int] = field(default_factory=dict)
    bounds: dict[int, list[int | None]] = field(default_factory=dict)
    static_strides: dict[int, int] = field(default_factory=dict)
    device_type: int | None = None
    device: str | None = None
    checked_dims: set[int] = field(default_factory=set)
    size_symbols: dict[int, str] = field(default_factory=dict)
    stride_symbols: dict[int, str] = field(default_factory=dict)
    sizes: tuple[Dim, ...] | None = None
    strides: tuple[Dim, ...] | None = None
    alignment: int | None = None
    alignment_policy: str | None = None
    has_check: bool = False
    complete: bool | None = None


class _Warnings:
    def __init__(self) -> None:
        self.items: list[str] = []
        self.dropped = 0

    def add(self, msg: str) -> None:
        if len(self.items) < MAX_WARNINGS:
            self.items.append(msg)
        else:
            self.dropped += 1

    def result(self) -> tuple[str, ...]:
        if self.dropped:
            return (*self.items, f"{self.dropped} more warnings not shown")
        return tuple(self.items)


def parse_wrapper_cpp(text: str | bytes | None) -> WrapperContract:
    """Parse an AOTI `<hash>.wrapper.cpp` into a WrapperContract.

    Never raises on bad input: absent, empty, truncated, foreign or deliberately misleading text
    gives a contract with what could be read, `recognized=False` where nothing matched, and a
    warning for every part that did not parse or contradicts another part.
    """
    w = _Warnings()
    if text is None:
        w.add("no wrapper.cpp text")
        return WrapperContract(warnings=w.result())
    if isinstance(text, (bytes, bytearray)):
        text = bytes(text).decode("utf-8", errors="replace")
    if not text.strip():
        w.add("wrapper.cpp is empty")
        return WrapperContract(warnings=w.result())

    def guard(what: str, fn: Callable[[], T], default: T) -> T:
        try:
            return fn()
        except Exception as exc:  # noqa: BLE001 - a parser bug must not hide the rest
            w.add(f"internal error while reading {what}: {type(exc).__name__}: {exc}")
            return default

    no_ctor: tuple[int | None, int | None, int | None] = (None, None, None)
    no_names: tuple[tuple[str, ...], tuple[str, ...]] = ((), ())
    no_constants: tuple[WrapperConstant, ...] = ()
    ctor = guard("the model constructor", lambda: _parse_constructor(text, w), no_ctor)
    input_names, output_names = guard(
        "inputs_info_/outputs_info_", lambda: _parse_info_names(text, w), no_names
    )
    constants = guard("constants_info_", lambda: _parse_constants(text, w), no_constants)
    in_spec = guard("in_spec_", lambda: _parse_spec(text, "in", w), None)
    out_spec = guard("out_spec_", lambda: _parse_spec(text, "out", w), None)
    run_impl = guard("run_impl", lambda: _find_run_impl(text, w), None)

    num_inputs, num_outputs, num_constants = ctor
    n = max(len(input_names), num_inputs or 0)
    if n > MAX_INPUTS:
        w.add(f"implausible input count {n}; keeping the {len(input_names)} named inputs")
        n = len(input_names)
    drafts = [
        _Draft(index=i, name=input_names[i] if i < len(input_names) else None) for i in range(n)
    ]

    no_checks: tuple[str | None, bool | None] = (None, None)
    style, gated = guard("input check functions", lambda: _parse_checks(text, drafts, w), no_checks)
    symbols: tuple[SymbolBinding, ...] = ()
    aliases: dict[str, str] = {}
    no_bindings: tuple[tuple[SymbolBinding, ...], dict[str, str]] = ((), {})
    asserts = False
    written: tuple[str, ...] = ()
    data: tuple[DataSymbol, ...] = ()
    if run_impl is not None:
        body = text[run_impl[0] : run_impl[1]]
        symbols, aliases = guard(
            "run_impl symbol bindings", lambda: _parse_bindings(body, drafts, w), no_bindings
        )
        asserts = guard("assert_size_stride", lambda: _parse_asserts(body, drafts, w), False)
        guard("kernel calls", lambda: _parse_kernel_casts(body, drafts, w), None)
        guard("alignment checks", lambda: _parse_alignment(body, drafts), None)
        data = guard("data-dependent values", lambda: _parse_data_symbols(body), ())
        names = tuple(c.name for c in constants)
        written = guard("written constants", lambda: written_names(text, body, names), ())

    guard(
        "consistency",
        lambda: _cross_check(drafts, input_names, output_names, ctor, constants, w),
        None,
    )
    inputs = tuple(_freeze(d) for d in drafts)
    recognized = bool(
        num_inputs is not None
        or input_names
        or in_spec is not None
        or run_impl is not None
        or style
    )
    if not recognized:
        w.add(
            "text does not look like an AOTI wrapper.cpp "
            "(no constructor, inputs_info_, in_spec_, run_impl or checks)"
        )
    return WrapperContract(
        in_spec=in_spec,
        out_spec=out_spec,
        input_names=input_names,
        output_names=output_names,
        constants=constants,
        num_inputs=num_inputs,
        num_outputs=num_outputs,
        num_constants=num_constants,
        inputs=inputs,
        symbols=symbols,
        aliases=aliases,
        check_functions_present=style is not None,
        check_style=style,
        checks_env_gated=gated,
        asserts_present=asserts,
        data_symbols=data,
        written_constants=written,
        recognized=recognized,
        warnings=w.result(),
    )


def _parse_constructor(text: str, w: _Warnings) -> tuple[int | None, int | None, int | None]:
    found = [m for m in _CTOR_RE.finditer(text)]
    if not found:
        w.add("AOTInductorModelBase(...) constructor call not found: input/output counts unknown")
        return None, None, None
    m = found[0]
    values = (int(m.group(1)), int(m.group(2)), int(m.group(3)) if m.group(3) else None)
    if any(o.groups() != m.groups() for o in found[1:]):
        w.add("several AOTInductorModelBase(...) calls disagree; using the first")
    return values


def wrapper_input_names(text: str) -> tuple[str, ...]:
    """The inputs' names in a wrapper.cpp (`inputs_info_[i].name`): parse_wrapper_cpp's
    `input_names` without the rest of its parse (for the index check; a 60 KB wrapper: ~1 ms,
    the whole parse ~7 ms). Never raises."""
    if not text.strip():
        return ()
    try:
        return _parse_info_names(text, _Warnings())[0]
    except Exception:  # noqa: BLE001 - as parse_wrapper_cpp's guard: what could be read, nothing
        return ()


def _parse_info_names(text: str, w: _Warnings) -> tuple[tuple[str, ...], tuple[str, ...]]:
    tables: dict[str, dict[int, str]] = {"inputs": {}, "outputs": {}}
    for m in _INFO_NAME_RE.finditer(text):
        table = tables[m.group(1)]
        idx = int(m.group(2))
        if idx in table and table[idx] != m.group(3):
            w.add(
                f"{m.group(1)}_info_[{idx}].name set twice "
                f"({table[idx]!r}, {m.group(3)!r}); using the first"
            )
            continue
        table.setdefault(idx, m.group(3))
    out: list[tuple[str, ...]] = []
    for kind in ("inputs", "outputs"):
        table = tables[kind]
        names = []
        for i in range(len(table)):
            if i not in table:
                w.add(f"{kind}_info_ has no entry {i} (indices: {sorted(table)[:10]})")
                break
            names.append(table[i])
        out.append(tuple(names))
    return out[0], out[1]


def _parse_constants(text: str, w: _Warnings) -> tuple[WrapperConstant, ...]:
    fields_by_idx: dict[int, dict[str, str]] = {}
    for m in _CONST_FIELD_RE.finditer(text):
        fields_by_idx.setdefault(int(m.group(1)), {}).setdefault(m.group(2), m.group(3).strip())
    out = []
    for idx in sorted(fields_by_idx):
        f = fields_by_idx[idx]
        name = _string_literal(f.get("name"))
        if name is None:
            w.add(f"constants_info_[{idx}] has no name")
            name = f"<constant {idx}>"
        dtype = _constant_dtype(f.get("dtype"))
        if f.get("dtype") is not None and dtype is None:
            w.add(f"constants_info_[{idx}].dtype not understood: {f['dtype'][:80]!r}")
        kind = None
        if "type" in f:
            km = re.search(r"ConstantType::(\w{1,40})", f["type"])
            kind = km.group(1) if km else None
        device = None
        if "device_type" in f:
            dm = re.search(r"cached_torch_device_type_(\w{1,40})", f["device_type"])
            device = dm.group(1) if dm else None
        data_size = _int_or_none(f.get("data_size"))
        folded = f.get("from_folded")
        out.append(
            WrapperConstant(
                name=name,
                original_fqn=_string_literal(f.get("original_fqn")),
                dtype=dtype,
                shape=_int_tuple(f.get("shape")),
                stride=_int_tuple(f.get("stride")),
                index=idx,
                device_type=device,
                kind=kind,
                data_size=data_size,
                from_folded=None if folded is None else folded == "true",
            )
        )
    return tuple(out)


def _parse_spec(text: str, which: str, w: _Warnings) -> str | None:
    """Concatenate the `R"(...)"` chunks assigned to in_spec_/out_spec_ (scanned, not regexed)."""
    values: list[str] = []
    assignments = 0
    for m in _SPEC_RE.finditer(text):
        if m.group(1) != which:
            continue
        assignments += 1
        if assignments > MAX_SPEC_ASSIGNMENTS:
            # each one is scanned to its end: a flood of unterminated ones would be quadratic
            w.add(f"{which}_spec_ is assigned more than {MAX_SPEC_ASSIGNMENTS} times; rest ignored")
            break
        pos, chunks, ok = m.end(), [], False
        while True:
            while pos < len(text) and text[pos] in " \t\r\n":
                pos += 1
            if text.startswith('R"(', pos):
                end = text.find(')"', pos + 3)
                if end < 0:
                    w.add(f"{which}_spec_ raw string is not terminated (text truncated?)")
                    break
                chunks.append(text[pos + 3 : end])
                pos = end + 2
            elif text.startswith('"', pos):
                # Older torch wrote one escaped literal: in_spec_ = "[1, {\"type\": ...}]";
                lit = _STRING_LITERAL_RE.match(text, pos)
                if lit is None:
                    w.add(f"{which}_spec_ string literal is not terminated (text truncated?)")
                    break
                chunks.append(_unescape(lit.group(1)))
                pos = lit.end()
            elif text.startswith(";", pos):
                ok = True
                break
            else:
                snippet = text[pos : pos + 40].replace("\n", " ")
                w.add(f"{which}_spec_ has something other than string literals: {snippet!r}")
                break
        if ok and not chunks:
            w.add(f"{which}_spec_ is assigned no string")
        if chunks:
            values.append("".join(chunks))
    if not values:
        w.add(f"{which}_spec_ not found")
        return None
    if any(v != values[0] for v in values[1:]):
        w.add(f"{which}_spec_ is assigned {len(values)} different values; using the first")
    value = values[0]
    try:
        json.loads(value)
    except ValueError:
        w.add(f"{which}_spec_ is not valid JSON (length {len(value)})")
    return value


_CPU_CAST_RE = re.compile(r"\(\s*(const\s+)?[\w:]{1,80}\s*\*\s*\)\s*\(\s*(\w{1,200})\.data_ptr\(\)")
"""`(float*)(acc.data_ptr())`: a kernel argument on the CPU; `const` marks a read."""
_TRITON_DEF = "static inline void call_triton_"
_CALL_RE = re.compile(r"\b(call_triton_\w{1,300}|aoti_torch_\w{1,200})\(")
_MAX_PARAMS = 20_000
"""Characters of a Triton launcher's parameter list read at most (a real one holds a few
hundred)."""


def written_names(text: str, run_impl: str, names: tuple[str, ...]) -> tuple[str, ...]:
    """Which of `names` (constants) run_impl's calls write (WrapperContract.written_constants).
    Linear in the text: every scan resumes where the last one stopped."""
    wanted = set(names)
    written: dict[str, None] = {}
    for m in _CPU_CAST_RE.finditer(run_impl):
        if m.group(2) in wanted and not m.group(1):
            written.setdefault(m.group(2), None)
    launchers: dict[str, list[str]] = {}
    pos = text.find(_TRITON_DEF)
    while pos >= 0:
        open_at = text.find("(", pos)
        close = text.find(")", open_at) if open_at >= 0 else -1
        if close < 0:
            break
        if close - open_at <= _MAX_PARAMS:
            params = text[open_at + 1 : close].split(",")
            launchers[text[pos + len(_TRITON_DEF) - len("call_triton_") : open_at].strip()] = [
                p.strip().split()[-1].lstrip("&*") for p in params if p.strip()
            ]
        pos = text.find(_TRITON_DEF, close)
    for statement in run_impl.split(";"):
        call = _CALL_RE.search(statement)
        if call is None:
            continue
        fn, args = call.group(1), [a.strip() for a in statement[call.end() :].split(",")]
        if fn in launchers:
            params = launchers[fn]
            hits = [
                a
                for a, p in zip(args, params)
                if a in wanted and p.startswith(("out_ptr", "in_out_ptr"))
            ]
        elif fn.endswith(("_", "_out")) and args:  # in-place shim, or an _out op's output
            hits = [args[0]] if args[0] in wanted else []
        else:
            hits = []
        for name in hits:
            written.setdefault(name, None)
    return tuple(written)


def _find_run_impl(text: str, w: _Warnings) -> tuple[int, int] | None:
    m = _RUN_IMPL_RE.search(text)
    if m is None:
        w.add("run_impl not found: no symbol bindings, asserts or kernel calls read")
        return None
    end = text.find(f"}} // {m.group(1)}::run_impl", m.end())
    if end < 0:
        w.add("end of run_impl not found (text truncated?)")
        end = len(text)
    return m.end(), end


def _check_regions(
    text: str, w: _Warnings
) -> tuple[list[tuple[int | None, int, int, bool]], str | None]:
    """(function index or None, start, end, terminated) of each per-input check body."""
    defs = list(_CHECK_DEF_RE.finditer(text))
    stops = sorted(
        [m.start() for m in _ENV_FN_RE.finditer(text)]
        + [m.start() for m in _CHECK_ALL_RE.finditer(text)]
        + [m.start() for m in _RUN_IMPL_RE.finditer(text)]
        + [m.start() for m in defs]
    )
    regions: list[tuple[int | None, int, int, bool]] = []
    if defs:
        for m in defs:
            at = bisect.bisect_right(stops, m.end())
            end = stops[at] if at < len(stops) else None
            regions.append(
                (int(m.group(1)), m.end(), len(text) if end is None else end, end is not None)
            )
        return regions, "per_input"
    # Older torch (aot_inductor.debug_compile): all checks inline in __check_inputs_outputs.
    all_def = _CHECK_ALL_RE.search(text)
    if all_def is None:
        return [], None
    end = next((s for s in stops if s > all_def.end()), None)
    region_end = len(text) if end is None else end
    handles = list(_HANDLE_RE.finditer(text, all_def.end(), region_end))
    if not handles:
        return [], None
    for i, h in enumerate(handles):
        stop = handles[i + 1].start() if i + 1 < len(handles) else region_end
        last = i + 1 == len(handles)
        regions.append((None, h.start(), stop, (end is not None) if last else True))
    if end is None:
        w.add("__check_inputs_outputs does not end (text truncated?)")
    return regions, "inline"


def _parse_checks(text: str, drafts: list[_Draft], w: _Warnings) -> tuple[str | None, bool | None]:
    regions, style = _check_regions(text, w)
    if style is None:
        return None, None
    gated = "AOTI_RUNTIME_CHECK_INPUTS" in text
    declared = len(drafts)
    parsed_any = False
    for fn_index, start, end, terminated in regions:
        body = text[start:end]
        label = f"check_input_{fn_index}" if fn_index is not None else "__check_inputs_outputs"
        handle = _HANDLE_RE.search(body)
        if handle is None:
            w.add(f"{label}: no input handle (`input_handles[i]`) found; skipped")
            continue
        var = handle.group(1) or handle.group(3)
        idx = int(handle.group(2) or handle.group(4))
        if idx >= (declared or MAX_INPUTS):
            w.add(f"{label} checks input_handles[{idx}] but only {declared} inputs exist; skipped")
            continue
        if fn_index is not None and fn_index != idx:
            w.add(f"{label} checks input_handles[{idx}]; using index {idx}")
        parsed_any = True
        while len(drafts) <= idx:
            drafts.append(_Draft(index=len(drafts)))
        d = drafts[idx]
        if d.has_check:
            w.add(f"input {idx} has more than one check function; merging")
        d.has_check = True
        if d.name is None:
            d.name = var
        elif d.name != var:
            w.add(f"{label} names input {idx} {var!r} but inputs_info_ says {d.name!r}")
        ok = _parse_check_body(label, body, var, idx, d, w)
        if not terminated:
            w.add(f"{label} is cut off (text truncated?); its checks may be incomplete")
        d.complete = bool(ok and terminated) if d.complete is not False else False
    if not parsed_any:
        return None, None
    return style, gated


def _parse_check_body(label: str, body: str, var: str, idx: int, d: _Draft, w: _Warnings) -> bool:
    ok = True
    for m in _EXPECTED_DTYPE_RE.finditer(body):
        rhs = m.group(2).strip()
        dm = re.fullmatch(r"aoti_torch_dtype_(\w{1,40})\(\)", rhs)
        if dm is None:
            w.add(f"{label}: dtype expression not understood: {rhs[:80]!r}")
            ok = False
            continue
        name = canonical(dm.group(1))
        if name not in ALL_DTYPES:
            w.add(f"{label}: unknown dtype {dm.group(1)!r}")
        _set_once(d, "dtype", name, f"{label}: dtype", w)
        d.dtype_source = "check_function"
    for m in _MSG_DTYPE_RE.finditer(body):
        aten = ATEN_DTYPES.get(m.group(1)[4:])
        if aten is not None and d.dtype is not None and aten != d.dtype:
            w.add(f"{label}: dtype check says {d.dtype} but its message says {m.group(1)}")
    for m in _EXPECTED_DEVICE_RE.finditer(body):
        rhs = m.group(2).strip()
        if not re.fullmatch(r"-?\d{1,9}", rhs):
            w.add(f"{label}: device type expression not understood: {rhs[:80]!r}")
            ok = False
            continue
        _set_once(d, "device_type", int(rhs), f"{label}: device type", w)
        d.device = DEVICE_TYPES.get(int(rhs))
        if d.device is None:
            w.add(f"{label}: unknown device type number {rhs}")
    for m in _MSG_DEVICE_RE.finditer(body):
        # Codegen bug: the message prints the number twice ("expected: 00(cpu)"); the literal
        # after the stream operator is the number again, then the name.
        if d.device_type is not None and (
            int(m.group(1)) != d.device_type or m.group(2) != d.device
        ):
            w.add(
                f"{label}: device check says {d.device_type} "
                f"but its message says {m.group(1)}({m.group(2)})"
            )
    for m in _MSG_HANDLE_RE.finditer(body):
        if int(m.group(1)) != idx:
            w.add(f"{label}: a message names input_handles[{m.group(1)}], not [{idx}]")
            break

    parsed: dict[str, dict[int, int]] = {"static": {}, "lower": {}, "upper": {}, "stride": {}}
    for m in _IF_RE.finditer(body):
        cond = " ".join(m.group(1).split())
        kind, cm = _classify(cond)
        if kind is None or cm is None:
            w.add(f"{label}: check condition not understood: {cond[:100]!r}")
            ok = False
            continue
        if kind in ("dtype", "device"):
            if cm.group(1) != var or cm.group(2) != var:
                w.add(f"{label}: {kind} check compares {cond!r}, not {var}")
            continue
        if kind in ("static", "stride"):
            value, name, dim = int(cm.group(1)), cm.group(2), int(cm.group(3))
        else:
            name, dim, value = cm.group(1), int(cm.group(2)), int(cm.group(3))
        if name != var:
            w.add(f"{label}: condition {cond!r} tests {name}, not {var}")
            ok = False
            continue
        if dim > 64:
            w.add(f"{label}: implausible dim {dim} in {cond!r}; ignored")
            ok = False
            continue
        if value < 0:
            w.add(f"{label}: negative value in {cond!r}")
            ok = False
        if dim in parsed[kind] and parsed[kind][dim] != value:
            w.add(
                f"{label}: dim {dim} has two {kind} checks "
                f"({parsed[kind][dim]}, {value}); using the first"
            )
            ok = False
            continue
        parsed[kind].setdefault(dim, value)

    for kind, pattern in _MSG_VALUE_RES.items():
        for m in pattern.finditer(body):
            dim, value = int(m.group(1)), int(m.group(2))
            if parsed[kind].get(dim) != value:
                w.add(
                    f"{label}: message says {kind} value {value} at dim {dim}, "
                    f"but the condition checks {parsed[kind].get(dim)}"
                )
                ok = False

    for dim, value in parsed["static"].items():
        if dim in d.static_dims and d.static_dims[dim] != value:
            w.add(f"{label}: dim {dim} already required to be {d.static_dims[dim]}")
            continue
        d.static_dims.setdefault(dim, value)
    for dim in sorted(set(parsed["lower"]) | set(parsed["upper"])):
        lo, hi = parsed["lower"].get(dim), parsed["upper"].get(dim)
        if dim in d.static_dims:
            w.add(f"{label}: dim {dim} is both static ({d.static_dims[dim]}) and range-checked")
        if lo is not None and hi is not None and lo > hi:
            w.add(f"{label}: dim {dim} range is empty ({lo} > {hi})")
            ok = False
        cur = d.bounds.setdefault(dim, [None, None])
        cur[0] = lo if cur[0] is None else cur[0]
        cur[1] = hi if cur[1] is None else cur[1]
    for dim, value in parsed["stride"].items():
        d.static_strides.setdefault(dim, value)
    d.checked_dims |= set(parsed["static"]) | set(parsed["lower"]) | set(parsed["upper"])
    return ok


def _classify(cond: str) -> tuple[str | None, re.Match[str] | None]:
    for kind, pattern in _COND_RES.items():
        m = pattern.fullmatch(cond)
        if m is not None:
            return kind, m
    return None, None


def _parse_bindings(
    body: str, drafts: list[_Draft], w: _Warnings
) -> tuple[tuple[SymbolBinding, ...], dict[str, str]]:
    """Read the `int64_t x = ...;` prologue of run_impl (up to `inputs.clear();`)."""
    stop = body.find("inputs.clear();")
    prologue = body if stop < 0 else body[:stop]
    by_name = {d.name: d for d in drafts if d.name}
    bindings: list[SymbolBinding] = []
    aliases: dict[str, str] = {}
    known: set[str] = set()
    for m in _BINDING_RE.finditer(prologue):
        sym, rhs = m.group(1), " ".join(m.group(2).split())
        ref = _SIZE_REF_RE.fullmatch(rhs)
        if ref is not None and ref.group(1) in by_name:
            kind, dim = ref.group(2), int(ref.group(3))
            bindings.append(SymbolBinding(sym, kind, input_name=ref.group(1), dim=dim))
            helper = sym == f"{ref.group(1)}_{kind}_{dim}"
            if not helper:
                table = (
                    by_name[ref.group(1)].size_symbols
                    if kind == "size"
                    else by_name[ref.group(1)].stride_symbols
                )
                table.setdefault(dim, sym)
        elif ref is not None:
            w.add(f"run_impl binds {sym} to {rhs}, which is not a known input")
            bindings.append(SymbolBinding(sym, "expr", target=rhs))
        elif _IDENT_RE.fullmatch(rhs) and rhs in known:
            bindings.append(SymbolBinding(sym, "alias", target=rhs))
            aliases[sym] = rhs
        else:
            bindings.append(SymbolBinding(sym, "expr", target=rhs))
        known.add(sym)
    return tuple(bindings), aliases


def _parse_asserts(body: str, drafts: list[_Draft], w: _Warnings) -> bool:
    by_name = {d.name: d for d in drafts if d.name}
    found = False
    for m in _ASSERT_RE.finditer(body):
        name, op = m.group(1), m.group(4)
        if op != "input" or name not in by_name:
            continue
        found = True
        d = by_name[name]
        sizes, strides = _dims(m.group(2)), _dims(m.group(3))
        if len(sizes) != len(strides):
            w.add(f"assert_size_stride({name}): {len(sizes)} sizes but {len(strides)} strides")
        if d.sizes is not None and (d.sizes, d.strides) != (sizes, strides):
            w.add(
                f"assert_size_stride({name}) appears twice with different values; using the first"
            )
            continue
        d.sizes, d.strides = sizes, strides
    return found


def _parse_kernel_casts(body: str, drafts: list[_Draft], w: _Warnings) -> None:
    """Infer dtypes from CPU kernel calls (`(const int64_t*)(arg3_1.data_ptr())`)."""
    by_name = {d.name: d for d in drafts if d.name}
    seen: dict[str, str] = {}
    for m in _KERNEL_CAST_RE.finditer(body):
        name = m.group(3)
        if name not in by_name:
            continue
        ctype = " ".join(m.group(2).split())
        dtype = CPP_DTYPES.get(ctype)
        if dtype is None:
            continue
        if name in seen and seen[name] != dtype:
            w.add(f"kernel calls read {name} as both {seen[name]} and {dtype}")
            continue
        seen[name] = dtype
        d = by_name[name]
        if d.dtype is None:
            d.dtype, d.dtype_source = dtype, "kernel_call"
        elif d.dtype != dtype and d.dtype_source == "check_function":
            w.add(f"{name}: check function expects {d.dtype} but a kernel reads it as {dtype}")


def _parse_alignment(body: str, drafts: list[_Draft]) -> None:
    by_name = {d.name: d for d in drafts if d.name}
    for m in _ASSERT_ALIGN_RE.finditer(body):
        d = by_name.get(m.group(2))
        if d is not None and d.alignment_policy is None:
            d.alignment = int(m.group(3))
            d.alignment_policy = "assert_checked" if m.group(1) else "assert"
    for m in _ALIGN_RE.finditer(body):
        d = by_name.get(m.group(1))
        if d is not None and d.alignment is None:
            d.alignment, d.alignment_policy = int(m.group(2)), "copy"


MAX_DATA_SYMBOLS = 256
"""Data-dependent values kept per model (a real model reads a handful)."""


def _parse_data_symbols(body: str) -> tuple[DataSymbol, ...]:
    """Every `aoti_torch_item_<dtype>(buf, &u0_raw)` of run_impl with the scalar asserts that
    name `u0` (`if (!(u0 <= 8L)) { throw std::runtime_error("Expected u0 <= 8 but ...`)."""
    found: dict[str, str] = {}
    for m in _ITEM_RE.finditer(body):
        if len(found) >= MAX_DATA_SYMBOLS:
            break
        found.setdefault(m.group(3), m.group(1))
    if not found:
        return ()
    checks: dict[str, dict[str, None]] = {sym: {} for sym in found}
    for m in _SCALAR_ASSERT_RE.finditer(body):
        message = " ".join(m.group(2).split())
        for ident in set(_IDENT_RE.findall(m.group(1))):
            if ident in checks and len(checks[ident]) < 64:
                checks[ident].setdefault(message, None)
    sizing = {i for m in _INT_ARRAY_RE.finditer(body) for i in _IDENT_RE.findall(m.group(1))}
    return tuple(
        DataSymbol(sym, dtype, tuple(checks[sym]), sizes_tensor=sym in sizing)
        for sym, dtype in found.items()
    )


def _cross_check(
    drafts: list[_Draft],
    input_names: tuple[str, ...],
    output_names: tuple[str, ...],
    ctor: tuple[int | None, int | None, int | None],
    constants: tuple[WrapperConstant, ...],
    w: _Warnings,
) -> None:
    num_inputs, num_outputs, num_constants = ctor
    if num_inputs is not None and len(input_names) != num_inputs:
        w.add(f"constructor declares {num_inputs} inputs but inputs_info_ names {len(input_names)}")
    if num_outputs is not None and len(output_names) != num_outputs:
        w.add(
            f"constructor declares {num_outputs} outputs "
            f"but outputs_info_ names {len(output_names)}"
        )
    if num_constants is not None and len(constants) != num_constants:
        w.add(
            f"constructor declares {num_constants} constants "
            f"but constants_info_ has {len(constants)}"
        )
    checked = [d for d in drafts if d.has_check]
    if checked:
        missing = [d.index for d in drafts if not d.has_check]
        if missing:
            w.add(f"no check function for inputs {missing[:20]}")
    for d in drafts:
        if d.sizes is None:
            continue
        rank = len(d.sizes)
        for dim, value in d.static_dims.items():
            if dim >= rank:
                w.add(
                    f"input {d.index} ({d.name}): check function tests dim {dim} but rank is {rank}"
                )
            elif d.sizes[dim].is_static and d.sizes[dim].value != value:
                w.add(
                    f"input {d.index} ({d.name}): dim {dim} checked == {value} "
                    f"but assert_size_stride says {d.sizes[dim]}"
                )


def _freeze(d: _Draft) -> WrapperInput:
    if d.sizes is not None:
        rank: int | None = len(d.sizes)
    elif d.checked_dims:
        rank = max(d.checked_dims) + 1
    else:
        rank = None
    return WrapperInput(
        index=d.index,
        name=d.name,
        dtype=d.dtype,
        dtype_code=_C10_CODES.get(d.dtype) if d.dtype else None,
        dtype_source=d.dtype_source,
        static_dims=dict(sorted(d.static_dims.items())),
        bounds={k: (v[0], v[1]) for k, v in sorted(d.bounds.items())},
        static_strides=dict(sorted(d.static_strides.items())),
        device_type=d.device_type,
        device=d.device,
        rank=rank,
        size_symbols=dict(sorted(d.size_symbols.items())),
        stride_symbols=dict(sorted(d.stride_symbols.items())),
        sizes=d.sizes,
        strides=d.strides,
        alignment=d.alignment,
        alignment_policy=d.alignment_policy,
        has_check_function=d.has_check,
        check_complete=d.complete if d.has_check else None,
    )


def _set_once(d: _Draft, attr: str, value: object, what: str, w: _Warnings) -> None:
    current = getattr(d, attr)
    if current is not None and current != value:
        w.add(f"{what} set twice ({current}, {value}); using the first")
        return
    setattr(d, attr, value)


def _dims(text: str) -> tuple[Dim, ...]:
    """`2L*s77, 3L, ` -> (Dim(expr='2*s77'), Dim(value=3))."""
    out = []
    for part in text.split(","):
        part = _INT_LITERAL_RE.sub(r"\1", " ".join(part.split()))
        if not part:
            continue
        if re.fullmatch(r"-?\d{1,25}", part):
            out.append(Dim(value=int(part)))
        else:
            out.append(Dim(expr=part))
    return tuple(out)


def _unescape(body: str) -> str:
    """Undo C escapes in a string literal body (`\\"` -> `"`)."""
    return re.sub(r"\\(.)", lambda m: _ESCAPES.get(m.group(1), m.group(1)), body)


def _string_literal(value: str | None) -> str | None:
    if value is None:
        return None
    m = _STRING_LITERAL_RE.fullmatch(value)
    return _unescape(m.group(1)) if m else None


def _int_or_none(value: str | None) -> int | None:
    if value is None:
        return None
    m = re.fullmatch(r"(-?\d{1,25})[lL]{0,2}", value.strip())
    return int(m.group(1)) if m else None


def _int_tuple(value: str | None) -> tuple[int, ...] | None:
    if value is None:
        return None
    m = re.fullmatch(r"\{([^{}]*)\}", value.strip())
    if m is None:
        return None
    out = []
    for part in m.group(1).split(","):
        part = part.strip()
        if not part:
            continue
        n = _int_or_none(part)
        if n is None:
            return None
        out.append(n)
    return tuple(out)


def _constant_dtype(value: str | None) -> str | None:
    if value is None:
        return None
    m = re.search(r"cached_torch_dtype_(\w{1,40})", value)
    if m:
        return canonical(m.group(1))
    m = re.search(r"at::(k\w{1,40})", value)
    if m:
        return ATEN_DTYPES.get(m.group(1))
    m = re.search(r"aoti_torch_dtype_(\w{1,40})\(\)", value)
    if m:
        return canonical(m.group(1))
    return None
