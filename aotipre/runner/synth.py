"""Torch-free planning of worker inputs: synthesized sample inputs and the probe plan.

A little over the ~600 lines of the other modules: synthesis and the probe plan share the one
model of a package's symbols (their ranges, the shapes they bind, derived dims, index bounds);
the probe stage's verdicts are runner/stages/probe.py's.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from typing import Any

from aotipre.inputs.meta import SampleInputs, TensorMeta
from aotipre.pt2 import symexpr
from aotipre.pt2.archive import Archive, archive_at
from aotipre.pt2.exported import embedding_rows
from aotipre.pt2.spec import InputSpec, ModelInfo, PackageInfo, TreeSpec

DEFAULT_INT_HIGH = 2
"""Synthesized integer inputs lie in [0, DEFAULT_INT_HIGH) unless an embedding size is known."""
TYPICAL_DIM = 8
"""The value a synthesized dynamic dim takes when its range allows it."""

_PATH_TOKEN = re.compile(r"\[(\d+|'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\")\]")
_SYMBOL = re.compile(r"[A-Za-z_]\w*")


class PlanError(ValueError):
    """The contract does not allow planning (unknown shapes, unevaluable dims)."""


# --------------------------------------------------------------------------------------------
# Dims and symbols


def _expr(dim_expr: str) -> symexpr.Expr | None:
    try:
        return symexpr.parse(dim_expr)
    except symexpr.ExprError:
        return None


def effective_ranges(model: ModelInfo) -> dict[str, tuple[int, int | None]]:
    """Each dynamic symbol's allowed range: the export range narrowed by the AOTI wrapper's
    per-dim bounds (where a dim is exactly that symbol)."""
    ranges: dict[str, tuple[int, int | None]] = {s.symbol: (s.min, s.max) for s in model.symbols}
    for spec in model.tensor_inputs:
        t = spec.tensor
        assert t is not None
        for d, dim in enumerate(t.shape):
            if dim.expr is None:
                continue
            e = _expr(dim.expr)
            if e is None or e.op != "sym":
                continue
            lo, hi = ranges.get(e.name, (0, None))
            bound = t.bounds[d] if d < len(t.bounds) else None
            if bound is not None:
                if bound.min is not None:
                    lo = max(lo, bound.min)
                if bound.max is not None:
                    hi = bound.max if hi is None else min(hi, bound.max)
            ranges[e.name] = (lo, hi)
    return ranges


def bind_symbols(model: ModelInfo, shapes: dict[int, tuple[int, ...]]) -> dict[str, int]:
    """Symbol values read off the sample tensors' shapes (dims that are a bare symbol)."""
    env: dict[str, int] = {}
    for spec in model.tensor_inputs:
        t = spec.tensor
        shape = shapes.get(spec.tensor_index) if spec.tensor_index is not None else None
        if t is None or shape is None or len(shape) != len(t.shape):
            continue
        for dim, size in zip(t.shape, shape):
            if dim.expr is None:
                continue
            e = _expr(dim.expr)
            if e is not None and e.op == "sym":
                env.setdefault(e.name, size)
    return env


def infer_aliases(
    model: ModelInfo, shapes: dict[int, tuple[int, ...]] | None, env: dict[str, int]
) -> dict[tuple[int, int], str]:
    """Guess the symbol of dims whose expression is opaque (torch 2.11 wrappers leave a shared
    dim as `arg4_1.size(0)`): the one symbol with the same sample value (when `shapes` are
    known) and the same bounds, preferring one that sits at the same dim index of another
    input. Dims left ambiguous get none."""
    ranges = effective_ranges(model)
    at_index: dict[int, set[str]] = {}
    for spec in model.tensor_inputs:
        assert spec.tensor is not None
        for d, dim in enumerate(spec.tensor.shape):
            e = _expr(dim.expr) if dim.expr else None
            if e is not None and e.op == "sym":
                at_index.setdefault(d, set()).add(e.name)
    out: dict[tuple[int, int], str] = {}
    for spec in model.tensor_inputs:
        t = spec.tensor
        if t is None or spec.tensor_index is None:
            continue
        sample = shapes.get(spec.tensor_index) if shapes is not None else None
        if shapes is not None and (sample is None or len(sample) != len(t.shape)):
            continue
        for d, dim in enumerate(t.shape):
            if dim.expr is None or _evaluable(dim.expr, env):
                continue
            bound = t.bounds[d] if d < len(t.bounds) else None
            if sample is None and bound is None:
                continue
            candidates = [
                name
                for name, value in env.items()
                if (sample is None or value == sample[d])
                and (
                    bound is None
                    or (bound.min, bound.max) == ranges.get(name, (bound.min, bound.max))
                )
            ]
            if len(candidates) > 1:
                candidates = [c for c in candidates if c in at_index.get(d, set())]
            if len(candidates) == 1:
                out[(spec.tensor_index, d)] = candidates[0]  # type: ignore[index]
    return out


def _evaluable(text: str, env: dict[str, int]) -> bool:
    e = _expr(text)
    return e is not None and e.symbols() <= set(env)


def evaluate_shapes(
    model: ModelInfo,
    env: dict[str, int],
    aliases: dict[tuple[int, int], str] | None = None,
) -> dict[int, tuple[int, ...]]:
    """Every tensor input's concrete shape under `env` (`aliases`: opaque dims that follow a
    symbol, from infer_aliases). Raises PlanError."""
    out: dict[int, tuple[int, ...]] = {}
    for spec in model.tensor_inputs:
        t = spec.tensor
        assert t is not None and spec.tensor_index is not None
        dims = []
        for d, dim in enumerate(t.shape):
            alias = (aliases or {}).get((spec.tensor_index, d))
            if alias is not None and alias in env:
                dims.append(env[alias])
                continue
            if dim.expr is None:
                if dim.value is None:
                    raise PlanError(f"{spec.name}: dim {d} has neither a size nor an expression")
                dims.append(dim.value)
                continue
            e = _expr(dim.expr)
            if e is None:
                raise PlanError(f"{spec.name}: cannot evaluate dim {d} ({dim.expr})")
            try:
                value = e.evaluate(env)
            except KeyError as exc:
                raise PlanError(
                    f"{spec.name}: dim {d} ({dim.expr}) uses symbol {exc.args[0]}, "
                    "which no input binds"
                ) from None
            except (ZeroDivisionError, OverflowError) as exc:
                raise PlanError(
                    f"{spec.name}: cannot evaluate dim {d} ({dim.expr}): {exc}"
                ) from None
            if value < 0:
                raise PlanError(f"{spec.name}: dim {d} ({dim.expr}) is negative ({value})")
            dims.append(value)
        out[spec.tensor_index] = tuple(dims)
    return out


def _numel(shape: tuple[int, ...]) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


# --------------------------------------------------------------------------------------------
# Sample inputs (torch-free metadata) -> tensor shapes


def parse_path(path: str) -> tuple[str, list[Any]]:
    """`kwargs['mask'][0]` -> ('kwargs', ['mask', 0]). Raises PlanError."""
    head, _, rest = path.partition("[")
    rest = "[" + rest if rest else ""
    keys: list[Any] = []
    pos = 0
    for m in _PATH_TOKEN.finditer(rest):
        if m.start() != pos:
            raise PlanError(f"cannot parse input path {path!r}")
        token = m.group(1)
        keys.append(int(token) if token.isdigit() else ast.literal_eval(token))
        pos = m.end()
    if pos != len(rest) or head not in ("args", "kwargs"):
        raise PlanError(f"cannot parse input path {path!r}")
    return head, keys


def sample_tensor_shapes(model: ModelInfo, sample: SampleInputs) -> dict[int, tuple[int, ...]]:
    """tensor_index -> shape of the matching sample tensor (by input path, else by order)."""
    out: dict[int, tuple[int, ...]] = {}
    for spec in model.tensor_inputs:
        meta = _lookup(sample, spec)
        if isinstance(meta, TensorMeta) and spec.tensor_index is not None:
            out[spec.tensor_index] = tuple(meta.shape)
    if len(out) == len(model.tensor_inputs):
        return out
    flat = [
        m
        for m in _flatten(list(sample.args)) + _flatten(list(sample.kwargs.values()))
        if isinstance(m, TensorMeta)
    ]
    if len(flat) == len(model.tensor_inputs):
        return {i: tuple(m.shape) for i, m in enumerate(flat)}
    return out


def _lookup(sample: SampleInputs, spec: InputSpec) -> Any:
    try:
        head, keys = parse_path(spec.path)
    except PlanError:
        return None
    node: Any = sample.args if head == "args" else sample.kwargs
    for key in keys:
        try:
            node = node[key]
        except (KeyError, IndexError, TypeError):
            return None
    return node


def _flatten(value: Any) -> list[Any]:
    if isinstance(value, (list, tuple)):
        return [leaf for v in value for leaf in _flatten(v)]
    if isinstance(value, dict):
        return [leaf for v in value.values() for leaf in _flatten(v)]
    return [value]


# --------------------------------------------------------------------------------------------
# Index-input hints


def index_input_bounds(
    package: PackageInfo, model: ModelInfo, archive: Archive | None = None
) -> tuple[dict[int, int], int | None]:
    """Upper bounds for integer inputs that index an embedding.

    Returns ({tensor_index: rows} from the ExportedProgram graph, where an input feeds an
    embedding's indices directly or through views/casts; the smallest `index out of bounds:
    0 <= tmp < N` bound in the packaged AOTI kernel sources, or None). Reads `archive` (the
    package's, open), else opens `package.path`.
    """
    with archive_at(package.path, archive) as opened:
        return _index_input_bounds(package, model, opened)


def _index_input_bounds(
    package: PackageInfo, model: ModelInfo, archive: Archive
) -> tuple[dict[int, int], int | None]:
    """index_input_bounds(), read from the open `archive`."""
    from aotipre.triage.codegen import index_checks  # (the static lane does not import it)

    per_input: dict[int, int] = {}
    kernel_bound: int | None = None
    if model.has_exported_program:
        per_input = embedding_rows(archive, package.root, model.name)
    if model.aoti is not None:
        for name in archive.names():
            if name.startswith(model.aoti.directory) and name.endswith(".cpp"):
                try:
                    text = archive.read(name).decode("utf-8", errors="replace")
                except Exception:
                    continue
                for _, n, _ in index_checks(text):
                    kernel_bound = n if kernel_bound is None else min(kernel_bound, n)
    return per_input, kernel_bound


# --------------------------------------------------------------------------------------------
# Synthesized inputs


@dataclass(frozen=True)
class SynthPlan:
    """Inputs for the worker to generate: a JSON tree of (args, kwargs) and what was assumed."""

    tree: dict[str, Any]
    """{"args": [node, ...], "kwargs": {name: node}}; a node is {"kind": "tensor", "dtype",
    "shape", "low", "high"}, {"kind": "tuple"|"list", "items": [...]}, {"kind": "dict",
    "items": {...}} or {"kind": "value", "value": ...}."""
    shapes: dict[int, tuple[int, ...]]
    """tensor_index -> the synthesized shape."""
    notes: tuple[str, ...] = field(default=())


def choose_symbol_values(ranges: dict[str, tuple[int, int | None]]) -> dict[str, int]:
    """A typical value per symbol: TYPICAL_DIM clamped into its range."""
    out = {}
    for name, (lo, hi) in ranges.items():
        v = max(lo, TYPICAL_DIM)
        if hi is not None:
            v = min(v, hi)
        out[name] = v
    return out


def synthesize(
    package: PackageInfo,
    model: ModelInfo,
    *,
    index_hints: bool = True,
    archive: Archive | None = None,
) -> SynthPlan:
    """Plan seeded random inputs from the contract alone (index hints read from `archive`, the
    package's open archive, else from `package.path`). Raises PlanError."""
    if model.contract_source == "none" or not model.inputs:
        raise PlanError(f"model '{model.name}' has no readable input contract to synthesize from")
    ranges = effective_ranges(model)
    env = choose_symbol_values({k: v for k, v in ranges.items() if _SYMBOL.fullmatch(k)})
    shapes = evaluate_shapes(model, env, infer_aliases(model, None, env))
    per_input: dict[int, int] = {}
    kernel_bound: int | None = None
    if index_hints:
        try:
            per_input, kernel_bound = index_input_bounds(package, model, archive)
        except Exception:
            per_input, kernel_bound = {}, None
    notes: list[str] = []
    if env:
        shown = ", ".join(f"{k}={v}" for k, v in sorted(env.items()))
        notes.append(f"dynamic dims set to {shown}")
    leaves: dict[int, dict[str, Any]] = {}
    int_notes: list[str] = []
    for spec in model.inputs:
        if spec.tensor is not None and spec.tensor_index is not None:
            node: dict[str, Any] = {
                "kind": "tensor",
                "dtype": spec.tensor.dtype,
                "shape": list(shapes[spec.tensor_index]),
            }
            if _is_int(spec.tensor.dtype):
                high = per_input.get(spec.tensor_index)
                source = "the embedding it indexes"
                if high is None and kernel_bound is not None:
                    high, source = kernel_bound, "the smallest index bound in the AOTI kernels"
                if high is None:
                    high, source = DEFAULT_INT_HIGH, "a range valid for any index input"
                node.update(low=0, high=high)
                int_notes.append(f"{spec.name} in [0, {high}) ({source})")
            leaves[spec.position] = node
        else:
            leaves[spec.position] = {"kind": "value", "value": _plain(spec.value)}
    if int_notes:
        notes.append("integer inputs " + "; ".join(int_notes))
    sig = model.signature
    tree: dict[str, Any]
    if sig is None:
        tree = {"args": [leaves[p] for p in sorted(leaves)], "kwargs": {}}
    else:
        counter = iter(sorted(leaves))
        args = [_build(child, leaves, counter) for child in sig.args]
        kwargs = {k: _build(child, leaves, counter) for k, child in sig.kwargs}
        tree = {"args": args, "kwargs": kwargs}
    return SynthPlan(tree=tree, shapes=shapes, notes=tuple(notes))


def _is_int(dtype: str) -> bool:
    return dtype.startswith(("int", "uint"))


def _plain(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)


def _build(spec: TreeSpec, leaves: dict[int, dict[str, Any]], counter: Any) -> dict[str, Any]:
    if spec.is_leaf:
        position = next(counter, None)
        if position is None:
            raise PlanError("the call signature has more leaves than the model has inputs")
        return leaves[position]
    children = [_build(c, leaves, counter) for c in spec.children]
    if spec.type in ("builtins.dict", "collections.OrderedDict", "collections.defaultdict"):
        keys = spec.context if isinstance(spec.context, list) else list(range(len(children)))
        return {"kind": "dict", "items": {str(k): c for k, c in zip(keys, children)}}
    if spec.type == "builtins.list":
        return {"kind": "list", "items": children}
    return {"kind": "tuple", "items": children}


# --------------------------------------------------------------------------------------------
# Probes


@dataclass(frozen=True)
class ProbeCase:
    """One run at a dynamic dim's bound."""

    id: str
    """`probe:<symbol>:min|max|over|beyond`, or `probe:input<tensor index>:layout|offset`."""
    symbol: str
    """The dynamic symbol probed; for a layout case, the input's name."""
    kind: str
    """min, max or over (max + 1, which the runtime check must reject), beyond (a symbol with
    no maximum: twice the sample's value, which must run), layout (one input with the same
    shape and values in a transposed, non-contiguous layout) or offset (one input with the same
    values, contiguous, but one element into its storage: a view such as `buf[1:]`)."""
    value: int
    shapes: dict[int, tuple[int, ...]]
    """tensor_index -> shape for this run (every tensor input)."""
    bound: int | None
    """The range's declared bound (for max: the declared max even when capped)."""
    capped: bool = False
    """max: the declared max exceeded the probe budget; `value` is the largest that fits."""
    dims: tuple[tuple[int, int], ...] = ()
    """(tensor_index, dim) pairs whose size is exactly this symbol."""
    layout: tuple[int, ...] = ()
    """layout: the tensor index re-laid out (the sample's last two dims swapped in memory)."""
    strides: tuple[int, ...] = ()
    """layout: the strides that input gets."""
    offset: tuple[int, ...] = ()
    """offset: the tensor index given storage offset 1 (misaligned for GPU code that assumes
    16-byte aligned inputs)."""

    @property
    def expect(self) -> str:
        return "reject" if self.kind in ("over", "layout") else "ok"


@dataclass(frozen=True)
class ProbePlan:
    cases: tuple[ProbeCase, ...]
    notes: tuple[str, ...] = ()


def plan_probes(model: ModelInfo, shapes: dict[int, tuple[int, ...]], budget: int) -> ProbePlan:
    """Runs at each dynamic symbol's min, max (capped so every input holds at most `budget`
    elements) and max + 1, other symbols kept at their sample values."""
    env = bind_symbols(model, shapes)
    ranges = effective_ranges(model)
    aliases = infer_aliases(model, shapes, env)
    cases: list[ProbeCase] = []
    notes: list[str] = []
    for symbol in sorted(ranges):
        lo, hi = ranges[symbol]
        if not _SYMBOL.fullmatch(symbol):
            continue  # a range on a derived expression (e.g. 2*s0): follows its symbol
        if symbol not in env:
            notes.append(f"{symbol}: no input dim is exactly this symbol; not probed")
            continue
        dims = tuple(
            (spec.tensor_index, d)
            for spec in model.tensor_inputs
            if spec.tensor is not None and spec.tensor_index is not None
            for d, dim in enumerate(spec.tensor.shape)
            if aliases.get((spec.tensor_index, d)) == symbol
            or (
                dim.expr is not None
                and (e := _expr(dim.expr)) is not None
                and e.op == "sym"
                and e.name == symbol
            )
        )

        errors: dict[int, str] = {}

        def shapes_at(
            v: int, symbol: str = symbol, errors: dict[int, str] = errors
        ) -> dict[int, tuple[int, ...]] | None:
            try:
                return evaluate_shapes(model, {**env, symbol: v}, aliases)
            except PlanError as exc:
                errors[v] = str(exc)
                return None

        def fits(s: dict[int, tuple[int, ...]] | None) -> bool:
            return s is not None and all(_numel(x) <= budget for x in s.values())

        low_shapes = shapes_at(lo)
        if low_shapes is None:
            notes.append(f"{symbol}: cannot work out the input shapes ({errors[lo]}); not probed")
            continue
        if fits(low_shapes):
            cases.append(
                ProbeCase(f"probe:{symbol}:min", symbol, "min", lo, low_shapes, lo, dims=dims)
            )
        else:
            notes.append(f"{symbol}: the minimum {lo} gives inputs over the probe budget")
            continue
        if hi is None:
            # No upper bound in the contract: exported without a max, or (AOTI-only) compiled
            # with aot_inductor.check_upperbound=False, which drops the "dim value is too large"
            # check. The runtime check refuses no large size; what does one do?
            want = max(2 * env[symbol], lo + 1)
            far = _largest_fitting(lo + 1, want, lambda v: fits(shapes_at(v)))
            if far is None:
                notes.append(
                    f"{symbol}: no maximum (the runtime check refuses no large size); "
                    f"sizes above {lo} give inputs over the probe budget"
                )
                continue
            s = shapes_at(far)
            assert s is not None
            cases.append(
                ProbeCase(f"probe:{symbol}:beyond", symbol, "beyond", far, s, None, dims=dims)
            )
            notes.append(
                f"{symbol}: no maximum in the contract (exported without one, or compiled "
                "with aot_inductor.check_upperbound=False): the runtime check refuses no large "
                f"size; probed at {far}"
                + (f" (2x the sample's {env[symbol]})" if far == want else " (probe budget)")
            )
            continue
        top = hi
        capped = False
        value: int | None = top
        if not fits(shapes_at(top)):
            capped = True
            value = _largest_fitting(lo, top, lambda v: fits(shapes_at(v)))
        if value is not None and value > lo:
            s = shapes_at(value)
            assert s is not None
            cases.append(
                ProbeCase(
                    f"probe:{symbol}:max", symbol, "max", value, s, top, capped=capped, dims=dims
                )
            )
        if capped:
            notes.append(
                f"{symbol}: the maximum {top} exceeds the probe budget of {budget} elements "
                f"per input; probed at {value} instead, max+1 not probed"
            )
            continue
        over = shapes_at(top + 1)
        if fits(over):
            assert over is not None
            cases.append(
                ProbeCase(f"probe:{symbol}:over", symbol, "over", top + 1, over, top, dims=dims)
            )
        else:
            notes.append(f"{symbol}: max+1 ({top + 1}) gives inputs over the probe budget")
    return ProbePlan(tuple(cases), tuple(notes))


MAX_LAYOUT_CASES = 3
"""Inputs given a non-contiguous layout by the probe (the first ones that can have one)."""


def plan_layouts(model: ModelInfo, shapes: dict[int, tuple[int, ...]]) -> list[ProbeCase]:
    """One case per tensor input (at most MAX_LAYOUT_CASES) whose sample has two trailing dims
    above 1: the same shape and values laid out transposed (strides `(..., 1, rows)`), which
    the compiled code, built for contiguous inputs, reads as if contiguous unless the runtime
    check refuses it."""
    cases: list[ProbeCase] = []
    for spec in model.tensor_inputs:
        t = spec.tensor_index
        shape = shapes.get(t) if t is not None else None
        if t is None or shape is None or len(shape) < 2 or shape[-1] < 2 or shape[-2] < 2:
            continue
        strides = [0] * len(shape)
        step = 1
        for d in [len(shape) - 2, len(shape) - 1, *range(len(shape) - 3, -1, -1)]:
            strides[d] = step
            step *= shape[d]
        cases.append(
            ProbeCase(
                f"probe:input{t}:layout",
                spec.name,
                "layout",
                0,
                {},
                None,
                layout=(t,),
                strides=tuple(strides),
            )
        )
        if len(cases) == MAX_LAYOUT_CASES:
            break
    return cases


def plan_offsets(model: ModelInfo, shapes: dict[int, tuple[int, ...]]) -> list[ProbeCase]:
    """One case for the first tensor input with values: the same values one element into a
    larger buffer (`buf[1:]`, contiguous, storage offset 1), what a caller passing a slice of a
    batch hands the model. GPU code compiled for 16-byte aligned inputs copies such an input
    (torch 2.11-2.15), or, compiled with alignment_asserts_inputs (2.15), refuses it; CPU code
    reads it as it is. Either way the outputs must be the aligned input's."""
    for spec in model.tensor_inputs:
        t = spec.tensor_index
        shape = shapes.get(t) if t is not None else None
        if t is None or shape is None or not shape or 0 in shape:
            continue
        return [ProbeCase(f"probe:input{t}:offset", spec.name, "offset", 1, {}, None, offset=(t,))]
    return []


def _largest_fitting(lo: int, hi: int, ok: Any) -> int | None:
    """Largest v in [lo, hi] with ok(v), assuming ok is monotone decreasing; None if none."""
    if not ok(lo):
        return None
    a, b = lo, hi
    while a < b:
        mid = (a + b + 1) // 2
        if ok(mid):
            a = mid
        else:
            b = mid - 1
    return a
