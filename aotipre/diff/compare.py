"""Compare two read packages (PackageInfo, plus what else the archives say) model by model: every
change between OLD and NEW as a Change decided by one rule of aotipre/diff/rules.py.

Longer than the ~600 lines of the other modules on purpose: one comparison per side of a package
(inputs, outputs, deployment: versions, ISA, shims, libtorch, GPU images; weights), each a short
function that emits Changes decided by diff/rules.py; they share the views of a package built once
(SideView, ModelExtras), and what a change means is read in the rules, not here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from aotipre.binaries.elf import version_key
from aotipre.binaries.versions import load_table, release_key
from aotipre.diff.rules import Rule, rule
from aotipre.pt2.spec import InputSpec, ModelInfo, PackageInfo, TensorSpec, TreeSpec

Range = tuple[int, "int | None"]
"""A dim's accepted sizes: (min, max), max None when unbounded."""


@dataclass(frozen=True)
class Change:
    """One difference between OLD and NEW, with the rule that decided what it does to callers."""

    rule: Rule
    model: str | None
    message: str
    """One sentence naming the thing, OLD's value and NEW's."""
    old: Any = None
    new: Any = None
    input: str | None = None
    """The input's (or output's, weight's) name, when the change is about one."""
    dim: int | None = None


@dataclass(frozen=True)
class ModelExtras:
    """What the diff needs of one model beyond its ModelInfo, read from its open archive."""

    custom_ops: tuple[str, ...] = ()
    """`ns::op` (`ns::op.overload`) of the custom operators it calls; `(python)` marks a
    torch.library.custom_op."""
    weight_digests: Mapping[str, tuple[int, int]] = field(default_factory=dict)
    """fqn -> (bytes, CRC-32) of the weight's values: the archive member holding them (the
    ExportedProgram's data/weights), else its bytes in the compiled code's constants blob
    (binaries/constants_blob.py), by `weights_source`."""
    weights_source: str = "member"
    """Where `weight_digests` were read: `member` or `compiled` (padded to 64 bytes: the two
    digest other byte runs, so they are compared only with their own kind)."""
    weights_unread: str | None = None
    """Why the compiled weights' values could not be read (None: read, or none to read)."""


@dataclass(frozen=True)
class SideView:
    """One side of the diff: the package and the per-model extras read from its archive."""

    package: PackageInfo
    extras: Mapping[str, ModelExtras] = field(default_factory=dict)

    def extra(self, model: str) -> ModelExtras:
        return self.extras.get(model, ModelExtras())


def compare(old: SideView, new: SideView) -> list[Change]:
    """Every change from `old` to `new`, models matched by name, in a stable order."""
    out: list[Change] = []
    old_models = {m.name: m for m in old.package.models}
    new_models = {m.name: m for m in new.package.models}
    for name in sorted(old_models.keys() - new_models.keys()):
        out.append(Change(rule("MODEL_REMOVED"), name, f"model '{name}' is not in NEW"))
    for name in sorted(new_models.keys() - old_models.keys()):
        out.append(Change(rule("MODEL_ADDED"), name, f"model '{name}' is new in NEW"))
    for name in sorted(old_models.keys() & new_models.keys()):
        a, b = old_models[name], new_models[name]
        out.extend(compare_model(a, b, old.extra(name), new.extra(name)))
    return out


def compare_model(
    old: ModelInfo, new: ModelInfo, old_extra: ModelExtras, new_extra: ModelExtras
) -> list[Change]:
    """Every change of one model: its parts, interface, outputs, deployment and weights."""
    out: list[Change] = []
    if old.has_aoti and not new.has_aoti:
        out.append(_c("AOTI_REMOVED", old, "NEW has no compiled AOTI code for it"))
    if old.has_exported_program and not new.has_exported_program:
        out.append(_c("EXPORTED_PROGRAM_REMOVED", old, "NEW has no ExportedProgram for it"))
    out.extend(compare_inputs(old, new))
    out.extend(compare_outputs(old, new))
    out.extend(compare_deployment(old, new, old_extra, new_extra))
    out.extend(compare_weights(old, new, old_extra, new_extra))
    unseen = values_unseen(old_extra, new_extra)
    if unseen is not None:
        out.append(_c("WEIGHT_VALUES_NOT_COMPARED", old, f"weight values not compared: {unseen}"))
    return out


def _c(rule_id: str, model: ModelInfo, message: str, **fields: Any) -> Change:
    return Change(rule(rule_id), model.name, message, **fields)


# --- inputs ----------------------------------------------------------------------------------


def _is_kwarg(inp: InputSpec) -> bool:
    return inp.path.startswith("kwargs")


def _top(inp: InputSpec) -> str:
    """The top-level argument a leaf belongs to: `args[0]`, `kwargs['mask']`."""
    path = inp.path
    end = path.find("]")
    return path[: end + 1] if end >= 0 else path


def _named(inp: InputSpec) -> bool:
    """The package records the input's own name (an AOTI-only package may know only its
    place: its name is then its path, `args[0]`)."""
    return inp.name != inp.path


def compare_inputs(old: ModelInfo, new: ModelInfo) -> list[Change]:
    """Call structure (positional and keyword inputs, their kinds and baked values) and each
    matched tensor's dtype, device, rank and dims."""
    if old.contract_source == "none" or new.contract_source == "none":
        side = "OLD" if old.contract_source == "none" else "NEW"
        return [
            _c(
                "CONTRACT_UNAVAILABLE",
                old,
                f"{side}'s input contract cannot be read (no ExportedProgram and no wrapper.cpp): "
                "its interface is not compared",
            )
        ]
    out: list[Change] = []
    pairs: list[tuple[InputSpec, InputSpec]] = []
    old_by_path = {i.path: i for i in old.inputs}
    new_by_path = {i.path: i for i in new.inputs}
    old_pos = [i for i in old.inputs if not _is_kwarg(i)]
    new_pos = [i for i in new.inputs if not _is_kwarg(i)]
    old_names = [i.name for i in old_pos]
    new_names = [i.name for i in new_pos]
    reordered = (
        all(map(_named, old_pos + new_pos))
        and old_names != new_names
        and sorted(old_names) == sorted(new_names)
        and len(set(old_names)) == len(old_names)
    )
    if reordered:
        out.append(
            _c(
                "INPUT_REORDERED",
                old,
                f"positional inputs were ({', '.join(old_names)}), now ({', '.join(new_names)})",
                old=old_names,
                new=new_names,
            )
        )
        by_name = {i.name: i for i in new_pos}
        pairs.extend((i, by_name[i.name]) for i in old_pos)
    else:
        for inp in old_pos:
            other = new_by_path.get(inp.path)
            if other is None:
                out.append(
                    _c(
                        "INPUT_REMOVED",
                        old,
                        f"input '{inp.name}' ({inp.path}) is not in NEW",
                        input=inp.name,
                    )
                )
                continue
            if other.name != inp.name and _named(inp) and _named(other):
                out.append(
                    _c(
                        "INPUT_RENAMED",
                        old,
                        f"input {inp.path} was named '{inp.name}', now '{other.name}'",
                        input=inp.name,
                        old=inp.name,
                        new=other.name,
                    )
                )
            pairs.append((inp, other))
        for other in new_pos:
            if other.path not in old_by_path:
                out.append(
                    _c(
                        "INPUT_ADDED",
                        old,
                        f"input '{other.name}' ({other.path}) is new in NEW",
                        input=other.name,
                    )
                )
    for inp in old.inputs:
        if not _is_kwarg(inp):
            continue
        other = new_by_path.get(inp.path)
        if other is None:
            out.append(
                _c("KWARG_REMOVED", old, f"keyword input {inp.path} is not in NEW", input=inp.name)
            )
        else:
            pairs.append((inp, other))
    for other in new.inputs:
        if _is_kwarg(other) and other.path not in old_by_path:
            out.append(
                _c(
                    "KWARG_ADDED",
                    old,
                    f"keyword input {other.path} is new in NEW",
                    input=other.name,
                )
            )
    for a, b in pairs:
        out.extend(_compare_input(old, new, a, b))
    return out


def _compare_input(old: ModelInfo, new: ModelInfo, a: InputSpec, b: InputSpec) -> list[Change]:
    kind_a = "tensor" if a.tensor is not None else a.kind
    kind_b = "tensor" if b.tensor is not None else b.kind
    if kind_a != kind_b and not ({kind_a, kind_b} <= _SCALAR_KINDS):
        return [
            _c(
                "INPUT_KIND_CHANGED",
                old,
                f"input '{a.name}' was {kind_a}, now {kind_b}",
                input=a.name,
                old=kind_a,
                new=kind_b,
            )
        ]
    if a.tensor is None or b.tensor is None:
        if a.value is not None and b.value is not None and a.value != b.value:
            return [
                _c(
                    "SCALAR_VALUE_CHANGED",
                    old,
                    f"input '{a.name}' is specialized to {b.value!r}, was {a.value!r}",
                    input=a.name,
                    old=a.value,
                    new=b.value,
                )
            ]
        return []
    return _compare_tensor(old, new, a.name, a.tensor, b.tensor)


_SCALAR_KINDS = frozenset({"int", "float", "bool", "constant", "sym_int", "sym_float", "sym_bool"})
"""Non-tensor kinds that one package may record as a baked `constant` and the other as its
type: compared by value, not by kind."""


def _compare_tensor(
    old: ModelInfo, new: ModelInfo, name: str, a: TensorSpec, b: TensorSpec
) -> list[Change]:
    out: list[Change] = []
    if a.dtype and b.dtype and a.dtype != b.dtype:
        out.append(
            _c(
                "DTYPE_CHANGED",
                old,
                f"input '{name}' dtype {b.dtype}, was {a.dtype}",
                input=name,
                old=a.dtype,
                new=b.dtype,
            )
        )
    if a.device and b.device and a.device != b.device:
        out.append(
            _c(
                "DEVICE_CHANGED",
                old,
                f"input '{name}' device {b.device}, was {a.device}",
                input=name,
                old=a.device,
                new=b.device,
            )
        )
    if len(a.shape) != len(b.shape):
        out.append(
            _c(
                "RANK_CHANGED",
                old,
                f"input '{name}' rank {len(b.shape)}, was {len(a.shape)}",
                input=name,
                old=len(a.shape),
                new=len(b.shape),
            )
        )
        return out
    for d in range(len(a.shape)):
        change = _compare_dim(old, new, name, d, a, b)
        if change is not None:
            out.append(change)
    return out


def dim_range(model: ModelInfo, tensor: TensorSpec, d: int) -> Range | None:
    """The sizes dim `d` of `tensor` accepts: (v, v) when static, else the compiled code's
    bounds (what deploys), else the symbol's range; None when neither tells."""
    dim = tensor.shape[d]
    if dim.is_static:
        assert dim.value is not None
        return dim.value, dim.value
    bound = tensor.bounds[d] if d < len(tensor.bounds) else None
    sym = model.symbol(dim.expr) if dim.expr else None
    lo = bound.min if bound is not None and bound.min is not None else None
    hi = bound.max if bound is not None and bound.max is not None else None
    if sym is not None:
        lo = max(lo, sym.min) if lo is not None else sym.min
        if sym.max is not None:
            hi = min(hi, sym.max) if hi is not None else sym.max
    if lo is None and hi is None:
        return None
    return (lo if lo is not None else 0), hi


def _text(r: Range) -> str:
    lo, hi = r
    return str(lo) if lo == hi else f"{lo}..{'inf' if hi is None else hi}"


def _holds(outer: Range, inner: Range) -> bool:
    return outer[0] <= inner[0] and (
        outer[1] is None or (inner[1] is not None and outer[1] >= inner[1])
    )


def _compare_dim(
    old: ModelInfo, new: ModelInfo, name: str, d: int, a: TensorSpec, b: TensorSpec
) -> Change | None:
    static_a, static_b = a.shape[d].is_static, b.shape[d].is_static
    ra, rb = dim_range(old, a, d), dim_range(new, b, d)
    fields: dict[str, Any] = {"input": name, "dim": d}
    if static_a and static_b:
        if a.shape[d].value == b.shape[d].value:
            return None
        return _c(
            "STATIC_DIM_CHANGED",
            old,
            f"input '{name}' dim {d} is {b.shape[d].value}, was {a.shape[d].value}",
            old=a.shape[d].value,
            new=b.shape[d].value,
            **fields,
        )
    if ra is None or rb is None:
        return None  # a dim whose sizes neither side tells: nothing to decide on
    said = f"input '{name}' dim {d} accepts {_text(rb)}, was {_text(ra)}"
    fields.update(old=_text(ra), new=_text(rb))
    if static_a and not static_b:
        rule_id = "DIM_BECAME_DYNAMIC" if _holds(rb, ra) else "DIM_BECAME_DYNAMIC_WITHOUT_OLD_SIZE"
        return _c(rule_id, old, f"{said} (now dynamic)", **fields)
    if static_b and not static_a:
        if ra == rb:
            return None
        return _c("DIM_BECAME_STATIC", old, f"{said} (now static)", **fields)
    if ra == rb:
        return None
    rule_id = "DYNAMIC_RANGE_WIDENED" if _holds(rb, ra) else "DYNAMIC_RANGE_NARROWED"
    return _c(rule_id, old, said, **fields)


# --- outputs ---------------------------------------------------------------------------------


def _tree_text(tree: TreeSpec) -> str:
    if tree.is_leaf:
        return "*"
    kind = (tree.type or "").rsplit(".", 1)[-1]
    inner = ", ".join(_tree_text(c) for c in tree.children)
    if tree.context not in (None, [], "null") and kind in ("dict", "OrderedDict"):
        keys = tree.context if isinstance(tree.context, list) else [tree.context]
        inner = ", ".join(f"{k}: {_tree_text(c)}" for k, c in zip(keys, tree.children))
        return "{" + inner + "}"
    return f"{kind}({inner})"


def _appended(old: TreeSpec, new: TreeSpec) -> bool:
    """`new` is `old` with leaves appended to its top-level tuple or list."""
    return (
        old.type == new.type
        and old.type in ("builtins.tuple", "builtins.list")
        and len(new.children) > len(old.children)
        and new.children[: len(old.children)] == old.children
    )


def compare_outputs(old: ModelInfo, new: ModelInfo) -> list[Change]:
    """The outputs' pytree, count, dtypes and shapes."""
    out: list[Change] = []
    ta, tb = old.output_tree, new.output_tree
    if ta is not None and tb is not None and ta != tb:
        if _appended(ta, tb):
            out.append(
                _c(
                    "OUTPUT_ADDED",
                    old,
                    f"outputs are {_tree_text(tb)}, were {_tree_text(ta)}",
                    old=_tree_text(ta),
                    new=_tree_text(tb),
                )
            )
        elif _appended(tb, ta):
            out.append(
                _c(
                    "OUTPUT_REMOVED",
                    old,
                    f"outputs are {_tree_text(tb)}, were {_tree_text(ta)}",
                    old=_tree_text(ta),
                    new=_tree_text(tb),
                )
            )
        else:
            out.append(
                _c(
                    "OUTPUT_PYTREE_CHANGED",
                    old,
                    f"outputs are {_tree_text(tb)}, were {_tree_text(ta)}",
                    old=_tree_text(ta),
                    new=_tree_text(tb),
                )
            )
    elif (ta is None or tb is None) and old.outputs and new.outputs:
        if len(new.outputs) < len(old.outputs):
            out.append(
                _c(
                    "OUTPUT_REMOVED",
                    old,
                    f"{len(new.outputs)} outputs, was {len(old.outputs)}",
                    old=len(old.outputs),
                    new=len(new.outputs),
                )
            )
        elif len(new.outputs) > len(old.outputs):
            out.append(
                _c(
                    "OUTPUT_ADDED",
                    old,
                    f"{len(new.outputs)} outputs, was {len(old.outputs)}",
                    old=len(old.outputs),
                    new=len(new.outputs),
                )
            )
    for i, (a, b) in enumerate(zip(old.outputs, new.outputs)):
        if a is None or b is None:
            continue
        label = f"output {i}"
        if a.dtype != b.dtype:
            out.append(
                _c(
                    "OUTPUT_DTYPE_CHANGED",
                    old,
                    f"{label} dtype {b.dtype}, was {a.dtype}",
                    input=label,
                    old=a.dtype,
                    new=b.dtype,
                )
            )
        shape_a = [str(d) if d.is_static else "*" for d in a.shape]
        shape_b = [str(d) if d.is_static else "*" for d in b.shape]
        if shape_a != shape_b:
            out.append(
                _c(
                    "OUTPUT_SHAPE_CHANGED",
                    old,
                    f"{label} shape [{', '.join(shape_b)}], was [{', '.join(shape_a)}]",
                    input=label,
                    old=shape_a,
                    new=shape_b,
                )
            )
    return out


# --- deployment requirements -----------------------------------------------------------------


def _versions(model: ModelInfo) -> dict[str, str]:
    """The highest GLIBC, GLIBCXX and CXXABI version the model's .so files need."""
    found: dict[str, str] = {}
    binaries = model.aoti.binaries if model.aoti is not None else None
    for so in binaries.shared_objects if binaries is not None else ():
        for prefix, value in (
            ("GLIBC_", so.glibc),
            ("GLIBCXX_", so.glibcxx),
            ("CXXABI_", so.cxxabi),
        ):
            if value is not None and (
                prefix not in found or version_key(value) > version_key(found[prefix])
            ):
                found[prefix] = value
    return found


NO_VECTOR_ISA = "INVALID_VEC_ISA"
"""AOTI_CPU_ISA of code compiled without a vector ISA (str of torch/_inductor/cpu_vec_isa.py's
InvalidVecISA): it needs no CPU extension."""


def _isa(model: ModelInfo) -> set[str]:
    """The CPU extensions (/proc/cpuinfo flag names) the model's compiled code may use: those
    its AOTI_CPU_ISA words need and the compile flags of its .so files. Torch's words are
    translated as `--target`'s check translates them (AVX2 -> avx2, fma): two packages are
    compared in one vocabulary, and INVALID_VEC_ISA (torch's word for no vector ISA, written
    for code compiled with `cpp.simdlen=0` or ATEN_CPU_CAPABILITY=default) needs nothing. A
    word the table does not know is kept, lower-cased, so that a change of it still shows."""
    from aotipre.environment.host import ISA_FLAGS  # lazily: only a pair of compiled models

    if model.aoti is None:
        return set()
    found: set[str] = set()
    for word in (w.upper() for w in model.aoti.cpu_isa):
        if word in ISA_FLAGS:
            found.update(ISA_FLAGS[word])
        elif word != NO_VECTOR_ISA:
            found.add(word.lower())
    binaries = model.aoti.binaries
    for so in binaries.shared_objects if binaries is not None else ():
        if so.flags is not None:
            found.update(so.flags.enabled)
    return found


def _shim_imports(model: ModelInfo) -> set[str]:
    binaries = model.aoti.binaries if model.aoti is not None else None
    return {
        s
        for so in (binaries.shared_objects if binaries is not None else ())
        for s in so.imports
        if s.startswith("aoti_")
    }


def min_libtorch(imports: Iterable[str]) -> str | None:
    """The oldest release of aotipre's torch table whose libtorch exports every shim function
    in `imports` and every later release does too; None when none does (or no imports)."""
    needed = set(imports)
    if not needed:
        return None
    table = load_table()
    oldest = None
    for release in reversed(table.releases):
        exported = table.exports(release) or frozenset()
        if needed <= exported:
            oldest = release
        else:
            break
    return oldest


def _gpu_images(model: ModelInfo) -> list[Any]:
    binaries = model.aoti.binaries if model.aoti is not None else None
    return [img for g in (binaries.gpu if binaries is not None else ()) for img in g.images]


def _ptx_reach(images: list[Any]) -> int | None:
    """The oldest compute capability (as 90) that portable PTX among `images` is JIT-compiled
    for: PTX for compute_XY runs on X.Y and every newer GPU (an arch-specific compute_XYa on X.Y
    only, so it reaches nothing its SASS does not). None without portable PTX."""
    portable = [int(i.arch) for i in images if i.kind == "ptx" and i.arch.isdigit()]
    return min(portable) if portable else None


def _ptx_lost(reach_old: int, reach_new: int | None, images_new: list[Any]) -> bool:
    """Does a GPU that OLD's portable PTX reaches (compute capability `reach_old` and newer)
    run none of NEW's images? Always, when NEW has no portable PTX (its SASS covers its own
    majors, OLD's PTX every later one too); else some X.Y in [reach_old, reach_new) without
    NEW's SASS."""
    if reach_new is None:
        return True
    return any(
        not any(i.runs_on(f"{cc // 10}.{cc % 10}") for i in images_new)
        for cc in range(reach_old, reach_new)
    )


def _driver_key(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in text.split(".") if p.isdigit())


def compare_deployment(
    old: ModelInfo, new: ModelInfo, old_extra: ModelExtras, new_extra: ModelExtras
) -> list[Change]:
    """Device, CPU ISA, C++ runtime and libtorch versions, GPU code, custom ops, C++ compiled at
    load and where the weights live."""
    out: list[Change] = []
    if old.device_type and new.device_type and old.device_type != new.device_type:
        out.append(
            _c(
                "MODEL_DEVICE_CHANGED",
                old,
                f"compiled for {new.device_type}, was {old.device_type}",
                old=old.device_type,
                new=new.device_type,
            )
        )
    if old.aoti is not None and new.aoti is not None:
        isa_a, isa_b = _isa(old), _isa(new)
        if isa_b - isa_a:
            more = sorted(isa_b - isa_a)
            out.append(
                _c(
                    "CPU_ISA_RAISED",
                    old,
                    f"NEW also needs {', '.join(more)}",
                    old=sorted(isa_a),
                    new=sorted(isa_b),
                )
            )
        elif isa_a - isa_b:
            less = sorted(isa_a - isa_b)
            out.append(
                _c(
                    "CPU_ISA_LOWERED",
                    old,
                    f"NEW no longer needs {', '.join(less)}",
                    old=sorted(isa_a),
                    new=sorted(isa_b),
                )
            )
        va, vb = _versions(old), _versions(new)
        raised = [vb[k] for k in sorted(vb) if k in va and version_key(vb[k]) > version_key(va[k])]
        raised += [vb[k] for k in sorted(vb) if k not in va]
        lowered = [
            f"{vb[k]} (was {va[k]})"
            for k in sorted(vb)
            if k in va and version_key(vb[k]) < version_key(va[k])
        ]
        if raised:
            out.append(
                _c("GLIBCXX_RAISED", old, f"NEW's .so needs {', '.join(raised)}", old=va, new=vb)
            )
        elif lowered:
            out.append(
                _c("GLIBCXX_LOWERED", old, f"NEW's .so needs {', '.join(lowered)}", old=va, new=vb)
            )
        out.extend(_compare_libtorch(old, new))
        out.extend(_compare_gpu(old, new))
        if new.aoti.compiled_at_load and not old.aoti.compiled_at_load:
            out.append(_c("CPP_COMPILED_AT_LOAD", old, "NEW's C++ is compiled when it is loaded"))
        elif old.aoti.compiled_at_load and not new.aoti.compiled_at_load:
            out.append(_c("CPP_NO_LONGER_COMPILED_AT_LOAD", old, "NEW ships its compiled .so"))
        if old.weights_location != new.weights_location:
            out.append(
                _c(
                    "WEIGHTS_LOCATION_CHANGED",
                    old,
                    f"weights are {new.weights_location}, were {old.weights_location}",
                    old=old.weights_location,
                    new=new.weights_location,
                )
            )
    ops_a, ops_b = set(old_extra.custom_ops), set(new_extra.custom_ops)
    for op in sorted(ops_b - ops_a):
        out.append(_c("CUSTOM_OP_ADDED", old, f"NEW calls custom op {op}", input=op))
    for op in sorted(ops_a - ops_b):
        out.append(_c("CUSTOM_OP_REMOVED", old, f"NEW no longer calls custom op {op}", input=op))
    return out


def _compare_libtorch(old: ModelInfo, new: ModelInfo) -> list[Change]:
    imports_a, imports_b = _shim_imports(old), _shim_imports(new)
    if not imports_a or not imports_b or imports_a == imports_b:
        return []
    min_a, min_b = min_libtorch(imports_a), min_libtorch(imports_b)
    if min_a == min_b:
        return []
    new_fns = sorted(imports_b - imports_a)
    shown = ", ".join(new_fns[:3]) + (f" and {len(new_fns) - 3} more" if len(new_fns) > 3 else "")
    if min_b is None or (min_a is not None and release_key(min_b) > release_key(min_a)):
        where = f"libtorch {min_b} or newer" if min_b else "a libtorch newer than aotipre's table"
        return [
            _c(
                "LIBTORCH_MIN_RAISED",
                old,
                f"NEW needs {where} (it imports {shown}), OLD loads in {min_a or '?'}",
                old=min_a,
                new=min_b,
            )
        ]
    return [
        _c(
            "LIBTORCH_MIN_LOWERED",
            old,
            f"NEW loads in libtorch {min_b} or newer, OLD needed {min_a or 'newer than the table'}",
            old=min_a,
            new=min_b,
        )
    ]


def _compare_gpu(old: ModelInfo, new: ModelInfo) -> list[Change]:
    out: list[Change] = []
    imgs_a, imgs_b = _gpu_images(old), _gpu_images(new)
    sass_a = {i.arch for i in imgs_a if i.kind == "sass"}
    sass_b = {i.arch for i in imgs_b if i.kind == "sass"}
    if sass_a - sass_b and imgs_b:
        dropped = ", ".join(f"sm_{a}" for a in sorted(sass_a - sass_b))
        out.append(
            _c(
                "SASS_ARCH_DROPPED",
                old,
                f"NEW has no SASS for {dropped}",
                old=sorted(sass_a),
                new=sorted(sass_b),
            )
        )
    elif sass_b - sass_a and imgs_a:
        added = ", ".join(f"sm_{a}" for a in sorted(sass_b - sass_a))
        out.append(
            _c(
                "SASS_ARCH_ADDED",
                old,
                f"NEW also has SASS for {added}",
                old=sorted(sass_a),
                new=sorted(sass_b),
            )
        )
    reach_a, reach_b = _ptx_reach(imgs_a), _ptx_reach(imgs_b)
    if reach_a is not None and imgs_b and _ptx_lost(reach_a, reach_b, imgs_b):
        now = "it has none" if reach_b is None else f"its PTX starts at compute_{reach_b}"
        out.append(
            _c(
                "PTX_DROPPED",
                old,
                f"NEW has no PTX for compute_{reach_a}, through which OLD runs on GPUs newer "
                f"than its SASS ({now})",
                old=f"compute_{reach_a}",
                new=None if reach_b is None else f"compute_{reach_b}",
            )
        )
    drivers_a = [d for d in (i.min_driver() for i in imgs_a) if d]
    drivers_b = [d for d in (i.min_driver() for i in imgs_b) if d]
    if drivers_a and drivers_b:
        da, db = max(drivers_a, key=_driver_key), max(drivers_b, key=_driver_key)
        if _driver_key(db) > _driver_key(da):
            out.append(
                _c(
                    "PTX_RAISED",
                    old,
                    f"NEW's GPU code needs driver {db} or newer, OLD's {da}",
                    old=da,
                    new=db,
                )
            )
    return out


# --- weights ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Weight:
    dtype: str | None
    shape: tuple[int, ...] | None
    swappable: bool


def _weights(model: ModelInfo) -> dict[str, _Weight]:
    """fqn -> what a weight update sees of it: the compiled code's constants when it records
    their fqns, else the ExportedProgram's state_dict."""
    out: dict[str, _Weight] = {}
    for c in model.constants:
        if c.fqn and c.kind in ("Parameter", "Buffer"):
            out[c.fqn] = _Weight(c.dtype, c.shape, c.swappable)
    baked = {t.fqn for t in model.baked_state}
    for t in model.state:
        if t.fqn not in out:
            out[t.fqn] = _Weight(t.dtype, t.shape, model.aoti is None or t.fqn not in baked)
    return out


def compare_weights(
    old: ModelInfo, new: ModelInfo, old_extra: ModelExtras, new_extra: ModelExtras
) -> list[Change]:
    """Weight names, shapes, dtypes, swappability, and values (by the stored members'
    size and CRC-32, which the reader verified against the bytes)."""
    out: list[Change] = []
    wa, wb = _weights(old), _weights(new)
    # a weight baked into one side's code and unknown to the other (an AOTI-only package keeps
    # no record of what it inlined) is nothing a weight update could name: no change
    for fqn in sorted(wa.keys() - wb.keys()):
        if wa[fqn].swappable:
            out.append(_c("WEIGHT_REMOVED", old, f"weight '{fqn}' is not in NEW", input=fqn))
    for fqn in sorted(wb.keys() - wa.keys()):
        if wb[fqn].swappable:
            out.append(_c("WEIGHT_ADDED", old, f"weight '{fqn}' is new in NEW", input=fqn))
    for fqn in sorted(wa.keys() & wb.keys()):
        a, b = wa[fqn], wb[fqn]
        if a.shape is not None and b.shape is not None and a.shape != b.shape:
            out.append(
                _c(
                    "WEIGHT_RESHAPED",
                    old,
                    f"weight '{fqn}' shape {list(b.shape)}, was {list(a.shape)}",
                    input=fqn,
                    old=list(a.shape),
                    new=list(b.shape),
                )
            )
        if a.dtype and b.dtype and a.dtype != b.dtype:
            out.append(
                _c(
                    "WEIGHT_RETYPED",
                    old,
                    f"weight '{fqn}' dtype {b.dtype}, was {a.dtype}",
                    input=fqn,
                    old=a.dtype,
                    new=b.dtype,
                )
            )
        if a.swappable and not b.swappable:
            out.append(
                _c(
                    "WEIGHT_FOLDED",
                    old,
                    f"weight '{fqn}' is folded or baked into NEW's code",
                    input=fqn,
                )
            )
        elif b.swappable and not a.swappable:
            out.append(_c("WEIGHT_UNFOLDED", old, f"weight '{fqn}' is swappable in NEW", input=fqn))
        da, db = old_extra.weight_digests.get(fqn), new_extra.weight_digests.get(fqn)
        if (
            old_extra.weights_source == new_extra.weights_source
            and da is not None
            and db is not None
            and da != db
            and a.shape == b.shape
            and a.dtype == b.dtype
        ):
            out.append(
                _c("WEIGHT_VALUES_CHANGED", old, f"weight '{fqn}' has other values", input=fqn)
            )
    return out


def values_unseen(old: ModelExtras, new: ModelExtras) -> str | None:
    """Why the diff could not compare a model's weight values (one phrase), or None when it
    compared them (or neither side has weights to compare)."""
    for label, extra in (("OLD", old), ("NEW", new)):
        if extra.weights_unread is not None:
            return f"in {label}, {extra.weights_unread}"
    if not old.weight_digests or not new.weight_digests:
        return None  # a side without weights: the weight rules say what was added or removed
    if old.weights_source != new.weights_source:
        where = {"member": "as archive members", "compiled": "in its compiled code"}
        return (
            f"OLD stores them {where[old.weights_source]}, NEW {where[new.weights_source]} "
            "(other byte layouts)"
        )
    return None
