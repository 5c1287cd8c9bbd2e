"""Torch-free description of a .pt2 package: its models, their input contracts and dynamic dims."""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from aotipre.binaries.facts import BinaryFacts


@dataclass(frozen=True)
class Dim:
    """One size (or stride) of a tensor: a static int, or a symbolic expression such as `s0`, `2*s0`."""

    value: int | None = None
    expr: str | None = None
    """Sympy-style expression over symbols, present when the dim is dynamic."""

    @property
    def is_static(self) -> bool:
        return self.value is not None and self.expr is None

    def __str__(self) -> str:
        return str(self.value) if self.expr is None else self.expr

    def to_json(self) -> int | str:
        return self.value if self.expr is None and self.value is not None else str(self)


@dataclass(frozen=True)
class SymbolRange:
    """The allowed range of one dynamic-shape symbol."""

    symbol: str
    min: int
    max: int | None
    """None: unbounded."""
    name: str | None = None
    """The user's name for it (torch.export.Dim name) when known."""

    def to_dict(self) -> dict[str, Any]:
        return {"symbol": self.symbol, "name": self.name, "min": self.min, "max": self.max}


@dataclass(frozen=True)
class DimBound:
    """A concrete lower/upper bound on one input dim, as the AOTI wrapper checks it."""

    min: int | None
    max: int | None


@dataclass(frozen=True)
class TensorSpec:
    """What the package expects of one tensor."""

    dtype: str
    """Canonical torch dtype name (float32, int64, ...)."""
    shape: tuple[Dim, ...]
    strides: tuple[Dim, ...] | None
    """None when unknown; entries that are symbolic are not checked statically."""
    device: str
    """Device type: cpu, cuda, ..."""
    bounds: tuple[DimBound | None, ...] = ()
    """Per-dim bounds from the AOTI wrapper's check functions (may be tighter than export's)."""
    alignment: int | None = None
    """Bytes of alignment the compiled code assumes of the input (CUDA code: 16)."""
    alignment_policy: str | None = None
    """What it does with a misaligned input: copy, assert (refuses it at every call) or
    assert_checked (refuses it under AOTI_RUNTIME_CHECK_INPUTS); see WrapperInput."""

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "dtype": self.dtype,
            "shape": [d.to_json() for d in self.shape],
            "strides": None if self.strides is None else [d.to_json() for d in self.strides],
            "device": self.device,
        }
        if self.alignment is not None:
            out["alignment"] = {"bytes": self.alignment, "misaligned": self.alignment_policy}
        return out


@dataclass(frozen=True)
class InputSpec:
    """One leaf of the model's flattened inputs."""

    name: str
    """The user-facing name: the forward() argument or kwarg name, or a pytree path below it."""
    position: int
    """Index in the flattened user inputs (all leaves, tensors and non-tensors)."""
    path: str
    """Where it sits in (args, kwargs): `args[0]`, `kwargs['mask']`, `args[1][0]`."""
    kind: str
    """tensor, int, float, bool, str, none, sym_int, sym_float, sym_bool, constant, other."""
    tensor: TensorSpec | None = None
    tensor_index: int | None = None
    """Index among tensor inputs only (what AOTI's input_handles[i] counts)."""
    value: Any = None
    """The specialized value of a constant (non-tensor) input, when recorded."""

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.name,
            "position": self.position,
            "path": self.path,
            "kind": self.kind,
        }
        if self.tensor is not None:
            out.update(self.tensor.to_dict())
        if self.value is not None:
            out["value"] = (
                self.value if isinstance(self.value, (int, float, str, bool)) else str(self.value)
            )
        return out


@dataclass(frozen=True)
class TreeSpec:
    """A torch pytree TreeSpec, parsed from its JSON form (`in_spec` / `out_spec`)."""

    type: str | None
    """`builtins.tuple`, `builtins.list`, `builtins.dict`, `collections.OrderedDict`, ...; None for a leaf."""
    context: Any = None
    """Dict keys for dicts; field names for namedtuples."""
    children: tuple[TreeSpec, ...] = ()

    @property
    def is_leaf(self) -> bool:
        return self.type is None

    def num_leaves(self) -> int:
        return 1 if self.is_leaf else sum(c.num_leaves() for c in self.children)


@dataclass(frozen=True)
class CallSignature:
    """How the model is called: positional args and kwargs, from the in_spec."""

    args: tuple[TreeSpec, ...]
    kwargs: tuple[tuple[str, TreeSpec], ...]
    arg_names: tuple[str, ...] = ()
    """forward() argument names, when recorded (ExportedProgram)."""


@dataclass(frozen=True)
class MemberInfo:
    """One member of the zip archive."""

    name: str
    size: int
    compressed_size: int
    crc: int

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "size": self.size, "compressed_size": self.compressed_size}


@dataclass(frozen=True)
class AotiPart:
    """The compiled AOTI code of one model."""

    directory: str
    """Archive member folder: `<root>/data/aotinductor/<name>/`."""
    device_type: str | None
    """AOTI_DEVICE_KEY: cpu, cuda, xpu, ..."""
    platform: str | None
    machine: str | None
    cpu_isa: tuple[str, ...]
    compute_capability: str | None
    metadata: dict[str, str]
    """The whole wrapper metadata JSON (user keys included)."""
    wrapper_cpp: str | None
    """Member name of the generated wrapper.cpp, when packaged."""
    shared_objects: tuple[str, ...]
    cubins: tuple[str, ...]
    weights_on_disk: bool
    """True when weights_config.json says the weights live outside the .so."""
    binaries: BinaryFacts | None = None
    """What the .so / cubin members need, read from them (aotipre.binaries.facts)."""
    build_flags: tuple[str, ...] = ()
    """`*_compile_flags.json` / `*_linker_flags.json` members: with them the C++ loader builds
    a missing .so from the packaged .cpp at load (aot_inductor.package_cpp_only)."""
    weights_blob: str | None = None
    """The `<hash>.wrapper_weights.blob` member: the weights, outside the .so, of a package
    compiled with package_constants_on_disk_format="binary_blob"."""
    metadata_unreadable: tuple[tuple[str, str], ...] = ()
    """(member, why) for each `*_metadata.json` beside a packaged .cpp other than the wrapper's
    (kernel_metadata.json) that is empty, not JSON, or not an object of strings: the C++
    loader reads it and fails (`parse_error.101 ... empty input` on an empty one)."""
    wrapper_metadata_unreadable: tuple[str, str] | None = None
    """(member, why) when the wrapper's metadata cannot be read: torch's load_pt2 fails on it
    and load_package falls back ("Loading outdated pt2 file") to the C++ loader, which loads
    the package (it reads the kernel's copy); `metadata` then comes from that copy."""

    @property
    def compiled_at_load(self) -> bool:
        """A package written with aot_inductor.package_cpp_only: .cpp plus its compile and
        linker flags and no .so; the C++ loader compiles the .so it loads (a compiler on the
        host, at every cold start)."""
        return (
            not self.shared_objects
            and any(f.endswith("_compile_flags.json") for f in self.build_flags)
            and any(f.endswith("_linker_flags.json") for f in self.build_flags)
        )


SWAPPABLE_KINDS = ("Parameter", "Buffer")
"""Constant kinds a weight swap replaces (the module's state_dict); tensor constants are baked
in, and a folded constant is recomputed from the ones it was folded from."""


@dataclass(frozen=True)
class ConstantSpec:
    """One constant of the compiled model (wrapper.cpp's `constants_info_`): a weight, buffer,
    lifted tensor constant or folded constant."""

    name: str
    """The compiled model's own name (`embed_weight`)."""
    fqn: str | None
    """The module path (`embed.weight`): what the user's state_dict and get_constant_fqns say."""
    dtype: str | None
    shape: tuple[int, ...] | None
    kind: str | None
    """Parameter, Buffer, TensorConstant, FoldedConstant or Unknown."""
    from_folded: bool | None
    data_size: int | None
    """Bytes, as the wrapper records them."""

    @property
    def swappable(self) -> bool:
        return self.kind in SWAPPABLE_KINDS and self.from_folded is not True

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "fqn": self.fqn,
            "dtype": self.dtype,
            "shape": list(self.shape) if self.shape is not None else None,
            "kind": self.kind,
            "from_folded": self.from_folded,
            "bytes": self.data_size,
            "swappable": self.swappable,
        }


INLINE_MAX_ELEMENTS = 8
"""Inductor inlines a tensor attribute's compile-time values into the kernels when it is 0-d,
or 1-d with at most this many elements (torch/_inductor/graph.py: `get_attr` turns a 0-d one
into a `Constant`, `can_inline_constant` a small 1-d one into literals), unless the compile
keeps tensor constants (`always_keep_tensor_constants`, runtime constant folding), the tensor is
mutated, or its type cannot be a constant: then it is in constants_info_ like any other."""


def inlinable_shape(shape: tuple[int, ...]) -> bool:
    """A tensor of this shape is small enough for inductor to inline (INLINE_MAX_ELEMENTS)."""
    return len(shape) == 0 or (len(shape) == 1 and shape[0] <= INLINE_MAX_ELEMENTS)


@dataclass(frozen=True)
class StateTensor:
    """One tensor of the ExportedProgram's state_dict (a parameter or a persistent buffer):
    what a weight update (`load_state_dict`, `load_constants`) is keyed by."""

    fqn: str
    """The module path (`fc2.bias`)."""
    kind: str
    """Parameter or Buffer."""
    dtype: str | None
    shape: tuple[int, ...] | None
    """None when a size is symbolic or not recorded."""

    @property
    def inlinable(self) -> bool:
        """Small enough for inductor to inline its values into the kernels."""
        return self.shape is not None and inlinable_shape(self.shape)

    def describe(self) -> str:
        shape = list(self.shape) if self.shape is not None else "?"
        return f"{self.dtype or '?'}{shape}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "fqn": self.fqn,
            "kind": self.kind,
            "dtype": self.dtype,
            "shape": list(self.shape) if self.shape is not None else None,
            "inlined": self.inlinable,
        }


@dataclass(frozen=True)
class DataSymbol:
    """A value run_impl reads from a tensor at run time (`u0` from `.item()`), with the scalar
    asserts the compiled code checks it against (torch._check and export's own bounds)."""

    symbol: str
    dtype: str
    """What `aoti_torch_item_<dtype>` read: int64, float64, bool, ..."""
    checks: tuple[str, ...] = ()
    """The asserted conditions naming the symbol, as their messages spell them (`u0 <= 8`),
    duplicates dropped."""
    sizes_tensor: bool = False
    """The code sizes a tensor with it (`int_array_<n>[] = {u0, 4L}`): a value out of range
    makes kernels read or write out of bounds."""
    exported_range: tuple[int | None, int | None] | None = None
    """The range the ExportedProgram gives the symbol (`u0: VR[1, 8]`), when the package or
    `--exported-program` has one: what its torch._check calls declared."""

    @property
    def range_checked(self) -> bool:
        """True when a check bounds the symbol by a constant (what torch 2.15's
        unsafe_skip_scalar_range_asserts drops)."""
        return any(_is_range_bound(c, self.symbol) for c in self.checks)

    def to_dict(self) -> dict[str, Any]:
        return {
            "symbol": self.symbol,
            "dtype": self.dtype,
            "checks": list(self.checks),
            "range_checked": self.range_checked,
            "sizes_tensor": self.sizes_tensor,
            "exported_range": None if self.exported_range is None else list(self.exported_range),
        }


def with_exported_ranges(
    symbols: tuple[DataSymbol, ...], ranges: tuple[SymbolRange, ...]
) -> tuple[DataSymbol, ...]:
    """`symbols` with the ranges an ExportedProgram gives the same names (`u0`)."""
    by_name = {r.symbol: r for r in ranges}
    return tuple(
        replace(d, exported_range=(by_name[d.symbol].min, by_name[d.symbol].max))
        if d.symbol in by_name
        else d
        for d in symbols
    )


def _is_range_bound(cond: str, symbol: str) -> bool:
    sides = re.split(r"\s*(?:<=|>=|<|>|==|!=)\s*", cond.strip())
    if len(sides) != 2:
        return False
    a, b = (x.strip("() ") for x in sides)
    const = re.compile(r"-?\d{1,25}")
    return (a == symbol and bool(const.fullmatch(b))) or (b == symbol and bool(const.fullmatch(a)))


@dataclass(frozen=True)
class ModelInfo:
    """One model inside the package, with its input contract."""

    name: str
    has_exported_program: bool
    aoti: AotiPart | None
    torch_version: str | None
    """torch version that wrote the ExportedProgram (an AOTI-only package records none)."""
    schema_version: str | None
    inputs: tuple[InputSpec, ...]
    outputs: tuple[TensorSpec | None, ...]
    symbols: tuple[SymbolRange, ...]
    """Dynamic-shape symbols with their ranges."""
    signature: CallSignature | None
    contract_source: str
    """exported_program, wrapper_cpp, or none (no contract could be read)."""
    sample_inputs_member: str | None = None
    expected_outputs_member: str | None = None
    """The expected outputs for the sample inputs an `aotipre bundle` stored (the reference of
    compare), when present."""
    export_device: str | None = None
    """Device type of the ExportedProgram's tensors (cpu/cuda), when it has any."""
    weights_location: str = "none"
    """in_so, on_disk (weights_config.json), binary_blob (a wrapper_weights.blob member),
    exported_program, none."""
    notes: tuple[str, ...] = ()
    """Things the reader noticed (e.g. export and AOTI bounds differ)."""
    call_leaves: tuple[tuple[str, str], ...] = ()
    """AOTI-only, when the call has non-tensor leaves (arguments export specialized) whose place
    could not be told from wrapper.cpp: every (name, path) leaf of its in_spec_. Those that
    could be placed are inputs of kind `constant` instead."""
    constants: tuple[ConstantSpec, ...] = ()
    """The compiled model's constants, from its wrapper.cpp (none without one)."""
    state: tuple[StateTensor, ...] = ()
    """The ExportedProgram's state_dict (packaged, or --exported-program's for AOTI-only)."""
    lifted_without_constant: int | None = None
    """How many lifted tensors (parameters, buffers, tensor constants) the compiled code was
    given but keeps no constant for, told from wrapper.cpp alone (the `arg<N>_1` numbering of its
    inputs against constants_info_); None when the wrapper does not pin it down."""
    contract_conflicts: tuple[str, ...] = ()
    """Where the packaged ExportedProgram and the AOTI code that deploys disagree on an input
    (dtype, static size, rank): the compiled code's side is in `inputs`."""
    mutated_buffers: tuple[str, ...] = ()
    """Buffers (fqn) a call writes, from the ExportedProgram's graph and the compiled code's
    writes: state carried from one call to the next (the state stage calls such a model
    several times)."""
    data_symbols: tuple[DataSymbol, ...] = ()
    """Values the AOTI code reads from tensors at run time (`.item()`), with the scalar asserts
    it checks them against (from wrapper.cpp)."""
    output_tree: TreeSpec | None = None
    """The pytree of the outputs (the AOTI code's out_spec_), when the package records it: how
    a server that flattens them (Triton's torch_aoti backend) names and counts them."""

    @property
    def has_aoti(self) -> bool:
        return self.aoti is not None

    @property
    def device_type(self) -> str | None:
        if self.aoti is not None and self.aoti.device_type:
            return self.aoti.device_type
        return self.export_device

    @property
    def baked_state(self) -> tuple[StateTensor, ...]:
        """The program's state_dict tensors the compiled code keeps no constant for (`state`
        against constants_info_'s fqns): inlined into the kernels when small
        (StateTensor.inlinable), else unused or folded away at compile time. No weight update
        reaches them: load_constants refuses a swap naming one (`Constant not found`), and
        leaving one out keeps its compiled value. Empty when the wrapper.cpp is not packaged or
        a constant's fqn is not recorded (nothing to tell them by)."""
        if self.aoti is None or self.aoti.wrapper_cpp is None:
            return ()
        if any(c.fqn is None for c in self.constants if c.kind in SWAPPABLE_KINDS):
            return ()
        kept = {c.fqn for c in self.constants}
        return tuple(t for t in self.state if t.fqn not in kept)

    @property
    def tensor_inputs(self) -> tuple[InputSpec, ...]:
        return tuple(i for i in self.inputs if i.tensor is not None)

    def symbol(self, name: str) -> SymbolRange | None:
        return next((s for s in self.symbols if s.symbol == name), None)


@dataclass(frozen=True)
class PackageInfo:
    """Everything `aotipre inspect` learns from the archive without loading any code."""

    path: str
    kind: str
    """exported_program, aoti, both, or empty (a pt2 with no model)."""
    root: str
    archive_format: str
    archive_version: str
    models: tuple[ModelInfo, ...]
    members: tuple[MemberInfo, ...]
    corrupt_members: tuple[str, ...] = ()
    """Members whose CRC does not match (a truncated or bit-flipped .so)."""
    total_size: int = 0
    extra: dict[str, Any] = field(default_factory=dict)
    opaque_objects: tuple[str, ...] = ()
    """data/constants/opaque_obj_* members: Python pickles that torch.export.load and load_pt2
    unpickle with plain pickle.loads (torch 2.13+); never unpickled by aotipre."""
    extracted: bool = False
    """The package was given as an already-extracted folder, not a .pt2 file."""

    def model(self, name: str) -> ModelInfo | None:
        return next((m for m in self.models if m.name == name), None)


def model_to_dict(model: ModelInfo) -> dict[str, Any]:
    """JSON form of one model (used by `inspect --format json` and the check report)."""
    aoti = model.aoti
    return {
        "name": model.name,
        "has_exported_program": model.has_exported_program,
        "has_aoti": aoti is not None,
        "device_type": model.device_type,
        "torch_version": model.torch_version,
        "schema_version": model.schema_version,
        "contract_source": model.contract_source,
        "weights_location": model.weights_location,
        "sample_inputs_member": model.sample_inputs_member,
        "expected_outputs_member": model.expected_outputs_member,
        "aoti": None
        if aoti is None
        else {
            "directory": aoti.directory,
            "device_type": aoti.device_type,
            "platform": aoti.platform,
            "machine": aoti.machine,
            "cpu_isa": list(aoti.cpu_isa),
            "compute_capability": aoti.compute_capability,
            "metadata": dict(aoti.metadata),
            "wrapper_cpp": aoti.wrapper_cpp,
            "shared_objects": list(aoti.shared_objects),
            "cubins": len(aoti.cubins),
            "weights_on_disk": aoti.weights_on_disk,
            "weights_blob": aoti.weights_blob,
            "compiled_at_load": aoti.compiled_at_load,
            "wrapper_metadata_unreadable": None
            if aoti.wrapper_metadata_unreadable is None
            else dict(zip(("member", "why"), aoti.wrapper_metadata_unreadable)),
            "metadata_unreadable": [
                {"member": m, "why": why} for m, why in aoti.metadata_unreadable
            ],
            "binaries": None if aoti.binaries is None else aoti.binaries.to_dict(),
        },
        "inputs": [i.to_dict() for i in model.inputs],
        "outputs": [o.to_dict() if o is not None else None for o in model.outputs],
        "dynamic_dims": [s.to_dict() for s in model.symbols],
        "constants": [c.to_dict() for c in model.constants],
        "baked_state": [t.to_dict() for t in model.baked_state],
        "lifted_without_constant": model.lifted_without_constant,
        "mutated_buffers": list(model.mutated_buffers),
        "data_dependent_values": [d.to_dict() for d in model.data_symbols],
        "contract_conflicts": list(model.contract_conflicts),
        "kwargs": [k for k, _ in model.signature.kwargs] if model.signature else None,
        "notes": list(model.notes),
    }


def package_to_dict(package: PackageInfo, *, members: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = {
        "path": package.path,
        "kind": package.kind,
        "root": package.root,
        "archive_format": package.archive_format,
        "archive_version": package.archive_version,
        "total_size": package.total_size,
        "member_count": len(package.members),
        "corrupt_members": list(package.corrupt_members),
        "opaque_objects": list(package.opaque_objects),
        "extracted": package.extracted,
        "models": [model_to_dict(m) for m in package.models],
    }
    if members:
        out["members"] = [m.to_dict() for m in package.members]
    return out
