"""Turn a parsed AOTI wrapper.cpp (WrapperContract) into aotipre's InputSpec / SymbolRange terms."""

from __future__ import annotations

from dataclasses import dataclass

from aotipre.pt2.exported import ContractError, call_signature, leaf_paths, parse_treespec
from aotipre.pt2.spec import CallSignature, Dim, DimBound, InputSpec, SymbolRange, TensorSpec
from aotipre.pt2.wrapper import WrapperContract, WrapperInput, parse_wrapper_cpp


@dataclass(frozen=True)
class WrapperView:
    """The contract of an AOTI model as far as its wrapper.cpp tells it."""

    inputs: tuple[InputSpec, ...]
    symbols: tuple[SymbolRange, ...]
    signature: CallSignature | None
    notes: tuple[str, ...]


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
    inputs = _inputs(contract, leaves, notes)
    if signature is not None and len(leaves) != len(inputs):
        # non-tensor leaves (specialized scalars) are not AOTI inputs; the wrapper cannot say
        # which leaf is which, so structure checks fall back to tensor order
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
    )


def _inputs(
    contract: WrapperContract, leaves: list[tuple[str, str]], notes: list[str]
) -> list[InputSpec]:
    out = []
    for w in contract.inputs:
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
                shape.append(Dim(expr=expr or f"{w.name}.size({d})"))
                lo, hi = w.bounds.get(d, (None, None))
                bounds.append(DimBound(lo, hi) if (lo, hi) != (None, None) else None)
        strides = None
        if rank and (w.static_strides or w.stride_exprs):
            strides = tuple(
                Dim(value=w.static_strides[d])
                if d in w.static_strides
                else Dim(expr=w.stride_exprs[d] if d < len(w.stride_exprs) else f"?{d}")
                for d in range(rank)
            )
        out.append(
            InputSpec(
                name=name,
                position=w.index,
                path=path,
                kind="tensor",
                tensor=TensorSpec(
                    dtype=w.dtype or "unknown",
                    shape=tuple(shape),
                    strides=strides,
                    device=w.device or "unknown",
                    bounds=tuple(bounds),
                ),
                tensor_index=w.index,
            )
        )
    return out


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
