"""Static checks of sample inputs against a model's contract: structure, dtype, device, shape, strides.

A little over the ~600 lines of the other modules: one walk of the sample inputs against the
contract; structure, dtype, device, shape, range, derived dims and strides are checked leaf by leaf
in one context (_Ctx: the symbols bound so far), so that a dim bound by one input is checked against
every other; split by property, each part would need that shared binding state.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from aotipre.findings import Finding, Severity, codes
from aotipre.inputs.meta import SampleInputs, TensorMeta, is_contiguous
from aotipre.pt2 import symexpr
from aotipre.pt2.dtypes import ITEMSIZE
from aotipre.pt2.spec import DimBound, InputSpec, ModelInfo, SymbolRange, TreeSpec

_SEQ_TYPES = {"builtins.tuple": (tuple,), "builtins.list": (list,)}
_VALUE_KINDS = ("constant", "int", "float", "bool", "str")
_DICT_TYPES = ("builtins.dict", "collections.OrderedDict", "collections.defaultdict")


@dataclass
class _Ctx:
    model: ModelInfo
    findings: list[Finding] = field(default_factory=list)
    bindings: dict[str, tuple[int, InputSpec, int]] = field(default_factory=dict)
    """symbol -> (value, the input that bound it, its dim)."""
    deployment_checks_inputs: bool = False
    """The deployment sets AOTI_RUNTIME_CHECK_INPUTS, whose check refuses another layout."""

    def add(self, code: str, message: str, spec: InputSpec | None = None, **kw: Any) -> None:
        if spec is not None:
            kw.setdefault("input", spec.name)
            kw.setdefault("position", spec.position)
        self.findings.append(
            codes.get(code).finding(message, model=self.model.name, stage="static", **kw)
        )


def check_inputs(
    model: ModelInfo, sample: SampleInputs, *, deployment_checks_inputs: bool = False
) -> list[Finding]:
    """Every static finding about `sample` for `model` (empty list: the inputs fit the contract).
    `deployment_checks_inputs`: the deployment sets AOTI_RUNTIME_CHECK_INPUTS, so an input laid
    out otherwise than compiled is refused there (AOT307 is an error, else a warning)."""
    ctx = _Ctx(model, deployment_checks_inputs=deployment_checks_inputs)
    deferred = _checked_leaves(ctx, sample)
    for spec, meta in deferred:
        _check_derived(ctx, spec, meta)
    return ctx.findings


@dataclass(frozen=True)
class CompiledLayout:
    """A sample tensor laid out otherwise than the package was compiled for: the checked runs
    get its values in the compiled layout, and it runs once as given without the runtime check
    (runner/stages/probe.py)."""

    leaf: int
    """Its position among the sample's tensors, in the order the sample holds them (args, then
    kwargs, each flattened in order)."""
    input: str
    """The contract input's name."""
    position: int | None
    """The contract input's position."""
    dim: int
    """The first dim whose stride differs."""
    strides: tuple[int, ...]
    """The strides the compiled code reads it with, for the sample's sizes."""
    actual: tuple[int, ...]
    """The sample's strides."""


def compiled_layouts(model: ModelInfo, sample: SampleInputs) -> list[CompiledLayout]:
    """The sample tensors whose strides differ, in any dim (a size-1 dim too: the runtime check
    compares every stride), from the dense layout the package was compiled for, evaluated with
    the sample's sizes. Inputs whose compiled strides are unknown or not dense are left out."""
    ctx = _Ctx(model)
    deferred = _checked_leaves(ctx, sample)
    env = {sym: v for sym, (v, _, _) in ctx.bindings.items()}
    flat = [
        m for m in _flatten([*sample.args, *sample.kwargs.values()]) if isinstance(m, TensorMeta)
    ]
    leaf_of = {id(m): i for i, m in enumerate(flat)}
    out = []
    for spec, meta in deferred:
        t = spec.tensor
        if t is None or t.strides is None or len(t.strides) != len(meta.shape):
            continue
        strides = [d.value if d.is_static else _evaluate(d.expr or "", env) for d in t.strides]
        if None in strides or id(meta) not in leaf_of:
            continue
        compiled = tuple(int(s) for s in strides)  # type: ignore[arg-type]  # no None left
        if compiled == tuple(meta.strides) or not _dense(meta.shape, compiled):
            continue
        dim = next(d for d, (a, b) in enumerate(zip(compiled, meta.strides)) if a != b)
        out.append(
            CompiledLayout(
                leaf_of[id(meta)], spec.name, spec.position, dim, compiled, tuple(meta.strides)
            )
        )
    return out


def _dense(shape: tuple[int, ...], strides: tuple[int, ...]) -> bool:
    """Whether `strides` lay out `shape` densely (a permutation of a contiguous layout: no
    gaps, no overlap), so that a tensor of that layout holds exactly numel elements."""
    expected = 1
    for size, stride in sorted(zip(shape, strides), key=lambda p: (p[1], p[0])):
        if size != 1 and stride != expected:
            return False
        expected *= size
    return True


def _checked_leaves(ctx: _Ctx, sample: SampleInputs) -> list[tuple[InputSpec, TensorMeta]]:
    """Pair the sample with the contract and check each leaf (binding the dynamic dims in
    `ctx`); returns the tensors whose derived dims and strides are checked once all are bound."""
    leaves = _match_structure(ctx, sample)
    deferred: list[tuple[InputSpec, TensorMeta]] = []
    for spec, value in leaves or ():
        _check_leaf(ctx, spec, value, deferred)
    return deferred


def _match_structure(ctx: _Ctx, sample: SampleInputs) -> list[tuple[InputSpec, Any]] | None:
    """Pair contract inputs with sample values by pytree path; report what does not fit.

    Pairing by path (`args[1][0]`, `kwargs['mask']`) means a missing kwarg or an extra
    positional argument does not hide the findings about the inputs that do line up.
    """
    model = ctx.model
    sig = model.signature
    if sig is None:
        # wrapper contract without in_spec: match tensor inputs positionally
        flat = _flatten(list(sample.args)) + _flatten(list(sample.kwargs.values()))
        tensors = [v for v in flat if isinstance(v, TensorMeta)]
        specs = model.tensor_inputs
        if len(tensors) != len(specs):
            ctx.add(
                "AOT101",
                f"the package takes {len(specs)} tensor inputs, the sample inputs hold "
                f"{len(tensors)}",
                expected=len(specs),
                actual=len(tensors),
            )
            return None
        return list(zip(specs, tensors, strict=True))

    if len(sample.args) != len(sig.args):
        names = ", ".join(sig.arg_names[: len(sig.args)]) or _count(len(sig.args), "value")
        ctx.add(
            "AOT101",
            f"{len(sample.args)} positional arguments given, the model was exported with "
            f"{len(sig.args)} ({names})" + _arg_count_effect(sample.args, sig.args, model),
            expected=len(sig.args),
            actual=len(sample.args),
        )
    expected_kw = [k for k, _ in sig.kwargs]
    positional_names = set(sig.arg_names[: len(sig.args)])
    for key in sample.kwargs:
        if key in expected_kw:
            continue
        if key in positional_names:
            hint = f"'{key}' is a positional argument of the exported model; pass it positionally"
        else:
            import difflib  # imported here: only an unknown keyword needs it (start-up time)

            close = difflib.get_close_matches(key, expected_kw, n=1)
            hint = (
                f"did you mean '{close[0]}'?"
                if close
                else (
                    f"the model takes keyword arguments {expected_kw}"
                    if expected_kw
                    else "the model takes no keyword arguments"
                )
            )
        ctx.add(
            "AOT103",
            f"unexpected keyword argument '{key}'",
            hint=hint,
            input=key,
            expected=expected_kw,
            actual=key,
        )
    for key in expected_kw:
        if key not in sample.kwargs:
            ctx.add(
                "AOT102",
                f"keyword argument '{key}' is missing",
                input=key,
                expected=key,
                actual=None,
            )

    found: dict[str, Any] = {}
    for i, (spec, value) in enumerate(zip(sig.args, sample.args)):
        label = sig.arg_names[i] if i < len(sig.arg_names) else f"args[{i}]"
        _walk(ctx, spec, value, label, f"args[{i}]", found)
    for key, spec in sig.kwargs:
        if key in sample.kwargs:
            _walk(ctx, spec, sample.kwargs[key], key, f"kwargs[{key!r}]", found)
    return [(inp, found[inp.path]) for inp in model.inputs if inp.path in found]


def _arg_count_effect(
    given: tuple[Any, ...], exported: tuple[TreeSpec, ...], model: ModelInfo
) -> str:
    """What the compiled model does with a wrong number of positional arguments, when only
    non-tensors differ: torch's AOTICompiledModel drops every non-tensor leaf, so it runs."""
    if len(given) < len(exported):
        missing = [
            i
            for i in model.inputs
            if any(i.path.startswith(f"args[{n}]") for n in range(len(given), len(exported)))
        ]
        if missing and all(i.tensor is None for i in missing):
            shown = ", ".join(
                f"{i.name}={i.value!r}" if i.value is not None else i.name for i in missing
            )
            return (
                f"; the compiled model runs without the missing non-tensor argument(s) and "
                f"computes with what export specialized ({shown})"
            )
    if len(given) > len(exported):
        extra = _flatten(list(given[len(exported) :]))
        if extra and not any(isinstance(v, TensorMeta) for v in extra):
            shown = ", ".join(repr(v) for v in extra[:4])
            return (
                f"; the compiled model silently ignores the extra non-tensor value(s) {shown} "
                "and computes with the defaults export used"
            )
    return ""


def _walk(
    ctx: _Ctx, spec: TreeSpec, value: Any, label: str, path: str, out: dict[str, Any]
) -> None:
    """Record the leaves of `value` under their paths, reporting where it departs from `spec`."""
    if spec.is_leaf:
        if isinstance(value, (tuple, list, dict)):
            ctx.add(
                "AOT104",
                f"'{label}' is a {type(value).__name__}, the model expects a single value there",
                input=label,
                expected="a tensor or scalar",
                actual=type(value).__name__,
            )
            return
        out[path] = value
        return
    if spec.type in _SEQ_TYPES:
        kind = spec.type.split(".")[-1]
        if not isinstance(value, (tuple, list)):
            ctx.add(
                "AOT104",
                f"'{label}' should be a {kind} of {len(spec.children)} items, got "
                f"{_kind_of(value)}",
                input=label,
                expected=f"{kind}[{len(spec.children)}]",
                actual=_kind_of(value),
            )
            return
        if len(value) != len(spec.children):
            ctx.add(
                "AOT104",
                f"'{label}' has {len(value)} items, the model expects {len(spec.children)}",
                input=label,
                expected=len(spec.children),
                actual=len(value),
            )
        for i, (child, item) in enumerate(zip(spec.children, value)):
            _walk(ctx, child, item, f"{label}[{i}]", f"{path}[{i}]", out)
        return
    if spec.type in _DICT_TYPES:
        keys = spec.context if isinstance(spec.context, list) else []
        if not isinstance(value, dict):
            ctx.add(
                "AOT104",
                f"'{label}' should be a dict with keys {keys}, got {_kind_of(value)}",
                input=label,
                expected=keys,
                actual=_kind_of(value),
            )
            return
        if sorted(map(str, value)) != sorted(map(str, keys)):
            ctx.add(
                "AOT104",
                f"'{label}' has keys {sorted(map(str, value))}, the model expects {keys}",
                input=label,
                expected=keys,
                actual=sorted(map(str, value)),
            )
        for key, child in zip(keys, spec.children):
            if key in value:
                sub = f"[{key!r}]" if isinstance(key, str) else f"[{key}]"
                _walk(ctx, child, value[key], label + sub, path + sub, out)
        return
    # namedtuples, dataclasses and custom pytree nodes: only the leaf count can be compared
    flat = _flatten([value])
    if len(flat) != spec.num_leaves():
        ctx.add(
            "AOT104",
            f"'{label}' flattens to {_count(len(flat), 'value')}, the exported {spec.type} has "
            f"{spec.num_leaves()}",
            input=label,
            expected=spec.num_leaves(),
            actual=len(flat),
        )
        return
    for i, leaf in enumerate(flat):
        out[f"{path}[{i}]"] = leaf


def _flatten(values: list[Any]) -> list[Any]:
    out: list[Any] = []
    for v in values:
        if isinstance(v, (tuple, list)):
            out.extend(_flatten(list(v)))
        elif isinstance(v, dict):
            out.extend(_flatten(list(v.values())))
        else:
            out.append(v)
    return out


def _kind_of(value: Any) -> str:
    if isinstance(value, TensorMeta):
        return f"a tensor {value.describe()}"
    if value is None:
        return "None"
    return f"a {type(value).__name__}"


def _check_leaf(
    ctx: _Ctx, spec: InputSpec, value: Any, deferred: list[tuple[InputSpec, TensorMeta]]
) -> None:
    if spec.tensor is None:
        _check_scalar(ctx, spec, value)
        return
    if not isinstance(value, TensorMeta):
        ctx.add(
            "AOT106",
            f"input '{spec.name}' should be a tensor {_describe_spec(spec)}, got {_kind_of(value)}",
            spec,
            expected="tensor",
            actual=_kind_of(value),
        )
        return
    t = spec.tensor
    if value.dtype != t.dtype:
        ctx.add(
            "AOT201",
            f"input '{spec.name}' has dtype {value.dtype}, the package expects {t.dtype}",
            spec,
            hint=f"cast it with .to(torch.{t.dtype}) before calling the model",
            expected=t.dtype,
            actual=value.dtype,
        )
    device = value.device.split(":", 1)[0]
    if device != t.device and t.device != "unknown":
        # Sample files are often saved on cpu for portability: a cpu sample for an accelerator
        # package is a warning (aotipre's own runs move it); anything else cannot run.
        portable = device == "cpu"
        ctx.add(
            "AOT202",
            f"input '{spec.name}' is on {value.device}, the package expects {t.device}"
            + ("; move inputs to the device before calling the model" if portable else ""),
            spec,
            hint=f"move it with .to('{t.device}') before calling the model",
            expected=t.device,
            actual=value.device,
            **({"severity": Severity.WARNING} if portable else {}),
        )
    if len(value.shape) != len(t.shape):
        ctx.add(
            "AOT301",
            f"input '{spec.name}' has {len(value.shape)} dims {list(value.shape)}, the package "
            f"expects {len(t.shape)} {[str(d) for d in t.shape]}",
            spec,
            expected=len(t.shape),
            actual=len(value.shape),
        )
        return
    _check_alignment(ctx, spec, value)
    needs_derived = False
    for dim, (want, got) in enumerate(zip(t.shape, value.shape)):
        bound = t.bounds[dim] if dim < len(t.bounds) else None
        if want.is_static:
            if want.value != got:
                ctx.add(
                    "AOT302",
                    f"input '{spec.name}' dim {dim} is {got}, the package was compiled for "
                    f"exactly {want.value}",
                    spec,
                    dim=dim,
                    expected=want.value,
                    actual=got,
                )
            continue
        expr = want.expr or ""
        if expr.isidentifier():
            _bind_symbol(ctx, spec, dim, expr, got, bound)
        else:
            needs_derived = True
    if needs_derived or t.strides is not None:
        deferred.append((spec, value))


def _check_alignment(ctx: _Ctx, spec: InputSpec, value: TensorMeta) -> None:
    """A sample tensor that starts inside its storage (a slice of a batch) where the compiled
    code refuses misaligned inputs at every call (torch 2.15's `assert_alignment(x, 16,
    "input")`, compiled with alignment_asserts_inputs): what the runtime computes is
    storage_offset x itemsize modulo the alignment (aoti_runtime/utils.h)."""
    t = spec.tensor
    if t is None or t.alignment_policy != "assert" or not t.alignment or not value.storage_offset:
        return
    itemsize = ITEMSIZE.get(value.dtype)
    if itemsize is None or value.storage_offset * itemsize % t.alignment == 0:
        return
    ctx.add(
        "AOT616",
        f"input '{spec.name}' starts {value.storage_offset} element(s) "
        f"({value.storage_offset * itemsize} bytes) into its storage, and the compiled code "
        f"refuses inputs that are not {t.alignment}-byte aligned at every call (assert_alignment, "
        "compiled with alignment_asserts_inputs), with or without AOTI_RUNTIME_CHECK_INPUTS",
        spec,
        hint="pass a tensor that owns its storage (x.clone()), or recompile without "
        "alignment_asserts_inputs (misaligned inputs are then copied at each call)",
        expected=f"storage_offset x itemsize a multiple of {t.alignment}",
        actual=f"storage_offset={value.storage_offset} itemsize={itemsize}",
    )


def _bind_symbol(
    ctx: _Ctx, spec: InputSpec, dim: int, symbol: str, got: int, bound: DimBound | None
) -> None:
    first = ctx.bindings.get(symbol)
    if first is not None:
        value, other, other_dim = first
        if value != got:
            ctx.add(
                "AOT305",
                f"input '{spec.name}' dim {dim} is {got} but '{other.name}' dim {other_dim} is "
                f"{value}; both are the dynamic dim {symbol} and must be equal",
                spec,
                dim=dim,
                expected=value,
                actual=got,
            )
        return
    ctx.bindings[symbol] = (got, spec, dim)
    _check_range(ctx, spec, dim, symbol, got, ctx.model.symbol(symbol), bound)


def _check_range(
    ctx: _Ctx,
    spec: InputSpec,
    dim: int,
    label: str,
    got: int,
    rng: SymbolRange | None,
    bound: DimBound | None,
) -> None:
    """Check `got` against the export range and the (possibly tighter) AOTI wrapper bound."""
    lo = rng.min if rng is not None else None
    hi = rng.max if rng is not None else None
    aoti_lo = bound.min if bound is not None else None
    aoti_hi = bound.max if bound is not None else None
    eff_lo = (
        max(v for v in (lo, aoti_lo) if v is not None) if (lo, aoti_lo) != (None, None) else None
    )
    candidates = [v for v in (hi, aoti_hi) if v is not None]
    eff_hi = min(candidates) if candidates else None
    shown = f"[{eff_lo if eff_lo is not None else 0}, {eff_hi if eff_hi is not None else 'inf'}]"
    if eff_lo is not None and got < eff_lo:
        narrower = aoti_lo is not None and lo is not None and aoti_lo > lo and got >= lo
        hint = {}
        if aoti_lo == 2 and eff_lo == 2 and got in (0, 1):
            # AOTI compiles dynamic dims for sizes >= 2 whatever the Dim min (0/1 specialization)
            hint = {"hint": zero_one_hint(got)}
        ctx.add(
            "AOT303",
            f"input '{spec.name}' dim {dim} ({label}) is {got}, below the minimum {eff_lo} "
            f"of its range {shown}"
            + (
                f"; export allows {lo} but the compiled AOTI code checks >= {aoti_lo}"
                if narrower
                else ""
            ),
            spec,
            dim=dim,
            expected=f">= {eff_lo}",
            actual=got,
            **hint,
        )
    if eff_hi is not None and got > eff_hi:
        ctx.add(
            "AOT304",
            f"input '{spec.name}' dim {dim} ({label}) is {got}, above the maximum {eff_hi} "
            f"of its range {shown}",
            spec,
            dim=dim,
            expected=f"<= {eff_hi}",
            actual=got,
        )


def zero_one_hint(size: int) -> str:
    """How to really accept a size of 0 or 1 that export allows but the AOTI code refuses."""
    return (
        "AOTInductor specializes sizes 0 and 1 away, so a smaller Dim min does not help; to "
        f"accept {size}, export under torch.fx.experimental._config.patch("
        "backed_size_oblivious=True) and recompile (measured on torch 2.13 with Dim(min=1): "
        "the compiled check becomes >= 1 and a batch of 1 runs), or pad the input to 2"
    )


def _check_derived(ctx: _Ctx, spec: InputSpec, meta: TensorMeta) -> None:
    t = spec.tensor
    assert t is not None
    env = {sym: v for sym, (v, _, _) in ctx.bindings.items()}
    for dim, (want, got) in enumerate(zip(t.shape, meta.shape)):
        expr = want.expr or ""
        if want.is_static or expr.isidentifier():
            continue
        value = _evaluate(expr, env)
        if value is None:
            continue
        if value != got:
            ctx.add(
                "AOT306",
                f"input '{spec.name}' dim {dim} is {got}, but the package derives it as "
                f"{expr} = {value}",
                spec,
                dim=dim,
                expected=value,
                actual=got,
            )
        else:
            bound = t.bounds[dim] if dim < len(t.bounds) else None
            _check_range(ctx, spec, dim, expr, got, ctx.model.symbol(expr), bound)
    if t.strides is None or len(t.strides) != len(meta.strides):
        return
    checked = _checked_size_one_strides(ctx, t, meta)
    if meta.is_contiguous and _contiguous_strides(t, env) and not checked:
        # Both contiguous: a stride that differs follows from a size that differs, which the
        # shape checks report; `.contiguous()` would change nothing.
        return
    for dim, (want, got) in enumerate(zip(t.strides, meta.strides)):
        if meta.shape[dim] <= 1 and dim not in checked:
            continue  # the stride of a size-0/1 dim does not change the layout
        expected = want.value if want.is_static else _evaluate(want.expr or "", env)
        if expected is None or expected == got:
            continue
        layout = "contiguous" if _contiguous_strides(t, env) else "compiled"
        ctx.add(
            "AOT307",
            f"input '{spec.name}' has stride {got} at dim {dim}, the package was compiled for "
            f"{expected} ({layout} layout; the input's strides are {list(meta.strides)}); "
            + (LAYOUT_REFUSED if ctx.deployment_checks_inputs else LAYOUT_UNSETTLED),
            spec,
            dim=dim,
            expected=expected,
            actual=got,
            severity=Severity.ERROR if ctx.deployment_checks_inputs else Severity.WARNING,
        )
        return  # one stride finding per input is enough


def _checked_size_one_strides(ctx: _Ctx, t: Any, meta: TensorMeta) -> set[int]:
    """The size-1 dims whose static compiled stride the sample's differs from, when the
    deployment sets AOTI_RUNTIME_CHECK_INPUTS: its check compares every static stride, a size-1
    dim's too, although the layout is the same. Only where the sample has the compiled static
    sizes (a stride that follows from a wrong size is the shape checks' finding)."""
    if not ctx.deployment_checks_inputs or any(
        d.is_static and d.value != size for d, size in zip(t.shape, meta.shape)
    ):
        return set()
    return {
        dim
        for dim, (want, got) in enumerate(zip(t.strides, meta.strides))
        if meta.shape[dim] == 1 and want.is_static and want.value != got
    }


LAYOUT_REFUSED = (
    "the deployment sets AOTI_RUNTIME_CHECK_INPUTS (--deployment-checks-inputs), whose check "
    "refuses it"
)
"""AOT307's clause when the deployment checks its inputs: an error."""
LAYOUT_UNSETTLED = (
    "a default deployment (AOTI_RUNTIME_CHECK_INPUTS unset) runs it unchecked, and whether its "
    "outputs are right depends on the model's code: it may compute wrong results; the dynamic "
    "stages settle it (they run it as given and compare with its values laid out as compiled)"
)
"""AOT307's clause when only the run can tell: a warning until the dynamic stages settle it."""


def _contiguous_strides(t: Any, env: dict[str, int]) -> bool:
    strides = [d.value if d.is_static else _evaluate(d.expr or "", env) for d in t.strides]
    sizes = [d.value if d.is_static else _evaluate(d.expr or "", env) for d in t.shape]
    if None in strides or None in sizes:
        return False
    return is_contiguous(sizes, strides)  # type: ignore[arg-type]  # no None left


def _evaluate(expr: str, env: dict[str, int]) -> int | None:
    try:
        return symexpr.parse(expr).evaluate(env)
    except (symexpr.ExprError, KeyError, ZeroDivisionError, OverflowError):
        return None


def _check_scalar(ctx: _Ctx, spec: InputSpec, value: Any) -> None:
    if isinstance(value, TensorMeta):
        ctx.add(
            "AOT106",
            f"input '{spec.name}' was exported as a {spec.kind}, got a tensor {value.describe()}",
            spec,
            expected=spec.kind,
            actual="tensor",
        )
        return
    if spec.kind == "none":
        if value is not None:
            ctx.add(
                "AOT105",
                f"input '{spec.name}' was None at export, got {value!r}",
                spec,
                expected=None,
                actual=repr(value),
            )
        return
    if spec.kind in _VALUE_KINDS and spec.value is not None and not _same_value(value, spec.value):
        ctx.add(
            "AOT105",
            f"input '{spec.name}' is {value!r}, but export specialized it to {spec.value!r}: the "
            f"compiled model ignores the value passed and silently computes with "
            f"{spec.value!r} (the ExportedProgram's module() refuses it: Guard failed: "
            f"{spec.name} == {spec.value!r})",
            spec,
            expected=spec.value,
            actual=value,
        )


def _same_value(value: Any, exported: Any) -> bool:
    """Equal as export's guard compares them (`alpha == 0.5`: Python ==), lists and tuples
    alike."""
    if isinstance(exported, (list, tuple)) and isinstance(value, (list, tuple)):
        return len(value) == len(exported) and all(
            _same_value(v, e) for v, e in zip(value, exported)
        )
    return bool(value == exported)


def _describe_spec(spec: InputSpec) -> str:
    t = spec.tensor
    if t is None:
        return spec.kind
    return f"{t.dtype}[{', '.join(str(d) for d in t.shape)}]"


def _count(n: int, noun: str) -> str:
    """`1 value`, `2 values`."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"
