"""Turn a parsed AOTI wrapper.cpp (WrapperContract) into aotipre's InputSpec / SymbolRange terms."""

from __future__ import annotations

import re
from dataclasses import dataclass

from aotipre.pt2.exported import ContractError, call_signature, leaf_paths, parse_treespec
from aotipre.pt2.spec import (
    CallSignature,
    ConstantSpec,
    DataSymbol,
    Dim,
    DimBound,
    InputSpec,
    SymbolRange,
    TensorSpec,
    TreeSpec,
)
from aotipre.pt2.wrapper import WrapperContract, WrapperInput, parse_wrapper_cpp


@dataclass(frozen=True)
class WrapperView:
    """The contract of an AOTI model as far as its wrapper.cpp tells it."""

    inputs: tuple[InputSpec, ...]
    symbols: tuple[SymbolRange, ...]
    signature: CallSignature | None
    notes: tuple[str, ...]
    specialized: tuple[tuple[str, str], ...] = ()
    """(name, path) of the call's non-tensor leaves: export specialized them, and the compiled
    model ignores whatever is passed there (their values are not recorded in the wrapper)."""
    call_leaves: tuple[tuple[str, str], ...] = ()
    """Every (name, path) leaf of in_spec_, kept when the call has non-tensor leaves whose place
    could not be told (then inputs are matched by tensor order and signature is None)."""
    constants: tuple[ConstantSpec, ...] = ()
    """constants_info_, in the wrapper's order."""
    written: tuple[str, ...] = ()
    """The constants (fqn) that run_impl writes, folded ones left out: state kept across calls."""
    output_tree: TreeSpec | None = None
    """out_spec_: the pytree of the outputs, when it can be read."""
    data_symbols: tuple[DataSymbol, ...] = ()
    """Values run_impl reads from tensors (`.item()`), with the scalar asserts on them."""
    lifted_without_constant: int | None = None
    """Lifted tensors the compiled code keeps no constant for (ModelInfo's field of that name)."""


def contract_from_wrapper(text: str) -> WrapperView:
    """Never raises: what cannot be read becomes a note."""
    contract = parse_wrapper_cpp(text)
    notes = list(contract.warnings)
    signature = None
    leaves: list[tuple[str, str]] = []
    if contract.in_spec:
        try:
            signature = call_signature(parse_treespec(contract.in_spec))
            leaves = leaf_paths(signature)
        except ContractError as exc:
            notes.append(f"in_spec_ cannot be read: {exc}")
    output_tree = None
    if contract.out_spec:
        try:
            output_tree = parse_treespec(contract.out_spec)
        except ContractError as exc:
            notes.append(f"out_spec_ cannot be read: {exc}")
    inputs = _inputs(contract, leaves, notes)
    specialized: tuple[tuple[str, str], ...] = ()
    unplaced: tuple[tuple[str, str], ...] = ()
    if signature is not None and len(leaves) != len(inputs):
        # Non-tensor leaves (Python scalars export specialized) are not AOTI inputs: the
        # Python runner drops every non-tensor before calling the .so.
        positions = tensor_leaf_positions(contract, len(leaves))
        if positions is not None:
            inputs = _inputs(contract, [leaves[p] for p in positions], notes, positions)
            specialized = tuple(leaves[i] for i in range(len(leaves)) if i not in set(positions))
            inputs = _with_specialized(inputs, specialized, leaves)
        else:
            unplaced = tuple(leaves)
            notes.append(
                f"in_spec_ has {len(leaves)} leaves but the wrapper takes {len(inputs)} tensors; "
                "inputs are matched by tensor order"
            )
            signature = None
            inputs = _inputs(contract, [], notes)
    return WrapperView(
        inputs=tuple(inputs),
        symbols=_symbols(contract),
        signature=signature,
        notes=tuple(notes),
        specialized=specialized,
        call_leaves=unplaced,
        constants=tuple(
            ConstantSpec(
                name=c.name,
                fqn=c.original_fqn,
                dtype=c.dtype,
                shape=c.shape,
                kind=c.kind,
                from_folded=c.from_folded,
                data_size=c.data_size,
            )
            for c in contract.constants
        ),
        written=tuple(
            c.original_fqn or c.name
            for c in contract.constants
            if c.name in contract.written_constants and c.from_folded is not True
        ),
        output_tree=output_tree,
        data_symbols=contract.data_symbols,
        lifted_without_constant=_lifted_without_constant(contract, len(leaves)),
    )


_ARG_NAME_RE = re.compile(r"arg(\d{1,9})_1")
_LIFTED_KINDS = ("Parameter", "Buffer", "TensorConstant")


def tensor_leaf_positions(contract: WrapperContract, n_leaves: int) -> list[int] | None:
    """Which in_spec leaves the wrapper's tensor inputs are, or None when it cannot be told.

    The AOTI graph names its placeholders `arg<N>_1`, N counting every placeholder of the
    ExportedProgram in order: the lifted parameters, buffers and tensor constants (K of them)
    first, then every user input leaf, the specialized non-tensor ones included (torch
    2.11-2.13: with 2 parameters, `forward(self, x, alpha: float)` has `x` as `arg2_1`). So a
    tensor's leaf is N - K. K is not recorded (inductor drops constants it inlines: a model
    with 3 lifted constants kept 1 in constants_info_), but it is bounded: K >= the lifted
    constants still listed, K >= N_last - (leaves - 1) (the last tensor is a leaf), and
    K <= N_first (the first is). Only a K that the bounds pin down is used.
    """
    numbers = _arg_numbers(contract)
    lifted = _lifted_count(contract, numbers, n_leaves)
    if lifted is None:
        return None
    return [n - lifted for n in numbers]


def _arg_numbers(contract: WrapperContract) -> list[int]:
    """N of each input's `arg<N>_1` name, in order; [] when a name is not of that form or the
    numbers do not increase."""
    numbers = []
    for w in contract.inputs:
        m = _ARG_NAME_RE.fullmatch(w.name or "")
        if m is None:
            return []
        numbers.append(int(m.group(1)))
    if any(a >= b for a, b in zip(numbers, numbers[1:])):
        return []
    return numbers


def _listed_lifted(contract: WrapperContract) -> int:
    return sum(
        1 for c in contract.constants if c.kind in _LIFTED_KINDS and c.from_folded is not True
    )


def _lifted_count(contract: WrapperContract, numbers: list[int], n_leaves: int) -> int | None:
    """K of tensor_leaf_positions: how many lifted tensors precede the user inputs, when the
    bounds pin it down."""
    if not numbers or n_leaves < 1:
        return None
    low = max(_listed_lifted(contract), numbers[-1] - (n_leaves - 1))
    return low if low == numbers[0] else None


def _lifted_without_constant(contract: WrapperContract, n_leaves: int) -> int | None:
    """How many of the K lifted tensors constants_info_ does not list: inductor inlined them
    into the kernels (small ones: torch/_inductor/graph.py can_inline_constant) or dropped them
    (unused). Linear(8, 16) then Linear(16, 4) takes `arg4_1` and lists 3 constants: the
    second bias (4 values) was inlined."""
    lifted = _lifted_count(contract, _arg_numbers(contract), n_leaves)
    return None if lifted is None else max(0, lifted - _listed_lifted(contract))


def _with_specialized(
    inputs: list[InputSpec], specialized: tuple[tuple[str, str], ...], leaves: list[tuple[str, str]]
) -> list[InputSpec]:
    """Add the non-tensor leaves as inputs of kind `constant` whose value is not recorded."""
    out = list(inputs)
    for name, path in specialized:
        out.append(
            InputSpec(name=name, position=leaves.index((name, path)), path=path, kind="constant")
        )
    return sorted(out, key=lambda i: i.position)


def _inputs(
    contract: WrapperContract,
    leaves: list[tuple[str, str]],
    notes: list[str],
    positions: list[int] | None = None,
) -> list[InputSpec]:
    """The wrapper's tensor inputs, named by `leaves` (the i-th tensor's leaf, in order)."""
    out = []
    earlier: dict[str, tuple[int | None, int | None]] = {}  # symbol -> range, earlier inputs'
    for w in contract.inputs:
        read_as = _symbols_read_from_earlier(contract, w, earlier)
        if w.index < len(leaves):
            name, path = leaves[w.index]
        else:
            name, path = f"args[{w.index}]", f"args[{w.index}]"
        rank = _rank(w)
        shape = []
        bounds: list[DimBound | None] = []
        for d in range(rank):
            if d in w.static_dims:
                shape.append(Dim(value=w.static_dims[d]))
                bounds.append(None)
            else:
                expr = w.size_exprs[d] if d < len(w.size_exprs) else None
                shape.append(Dim(expr=expr or read_as.get(d) or f"{w.name}.size({d})"))
                lo, hi = w.bounds.get(d, (None, None))
                bounds.append(DimBound(lo, hi) if (lo, hi) != (None, None) else None)
        strides = None
        if rank and (w.static_strides or w.stride_exprs):
            dense = {} if contract.asserts_present else _unchecked_contiguous_strides(w, shape)
            strides = tuple(
                Dim(value=w.static_strides[d])
                if d in w.static_strides
                else Dim(
                    expr=(w.stride_exprs[d] if d < len(w.stride_exprs) else f"?{d}") or dense.get(d)
                )
                for d in range(rank)
            )
        out.append(
            InputSpec(
                name=name,
                position=positions[w.index] if positions is not None else w.index,
                path=path,
                kind="tensor",
                tensor=TensorSpec(
                    dtype=w.dtype or "unknown",
                    shape=tuple(shape),
                    strides=strides,
                    device=w.device or "unknown",
                    bounds=tuple(bounds),
                    alignment=w.alignment,
                    alignment_policy=w.alignment_policy,
                ),
                tensor_index=w.index,
            )
        )
    return out


def _symbols_read_from_earlier(
    contract: WrapperContract,
    w: WrapperInput,
    earlier: dict[str, tuple[int | None, int | None]],
) -> dict[int, str]:
    """Dim -> symbol for `w`'s dynamic dims that run_impl reads as a symbol an earlier input
    defines, when the wrapper has no assert_size_stride to say so (torch 2.11-2.12). run_impl
    binds each symbol once, from the first input that has it (`int64_t s53 = arg8_1_size[1];`),
    and a later input sharing it gets no binding and no equality check: its dim is then only
    range-checked, with that symbol's range. The one earlier symbol with exactly that range is
    taken; none or several: unknown, as before. `earlier` gains `w`'s own symbols."""
    found: dict[int, str] = {}
    exprs = w.size_exprs
    if not contract.asserts_present:
        for d, bound in w.bounds.items():
            if d in w.static_dims or (d < len(exprs) and exprs[d]):
                continue
            same = [sym for sym, rng in earlier.items() if rng == bound]
            if len(same) == 1:
                found[d] = same[0]
    for d, expr in enumerate(exprs):
        if expr and expr.isidentifier() and d in w.bounds:
            earlier.setdefault(expr, w.bounds[d])
    return found


def _unchecked_contiguous_strides(w: WrapperInput, shape: list[Dim]) -> dict[int, str]:
    """Dim -> stride for `w`'s symbolic strides that run_impl neither binds nor checks, when the
    layout is the contiguous one (torch 2.11-2.12: a stride equal to a symbol bound from a size,
    `s53` of a [s43, s53] input, gets no binding and no check; the kernels read the input with
    it). Only when every stride the wrapper does state (static, checked) is the contiguous one
    and every size is known; otherwise nothing is assumed."""
    if w.stride_symbols or not w.static_strides:
        return {}
    found: dict[int, str] = {}
    running: str | None = "1"
    for d in range(len(shape) - 1, -1, -1):
        if d in w.static_strides:
            if running != str(w.static_strides[d]):
                return {}
        elif running is None:
            return {}
        else:
            found[d] = running
        size = shape[d]
        text = str(size.value) if size.is_static else size.expr
        if text is None or not (text.isdigit() or text.isidentifier()):
            running = None
        elif running == "1":
            running = text
        elif text.isdigit() and running.isdigit():
            running = str(int(text) * int(running))
        else:
            running = f"{text}*{running}"
    return found


def _rank(w: WrapperInput) -> int:
    if w.rank is not None:
        return w.rank
    dims = set(w.static_dims) | set(w.bounds) | set(range(len(w.size_exprs)))
    return max(dims) + 1 if dims else 0


def _symbols(contract: WrapperContract) -> tuple[SymbolRange, ...]:
    """Symbol ranges from the bounds of the first input dim bound to each symbol."""
    out: dict[str, SymbolRange] = {}
    for w in contract.inputs:
        for d, expr in enumerate(w.size_exprs or ()):
            if expr and expr.isidentifier() and expr not in out and d in w.bounds:
                lo, hi = w.bounds[d]
                out[expr] = SymbolRange(symbol=expr, min=lo if lo is not None else 0, max=hi)
    return tuple(out.values())
