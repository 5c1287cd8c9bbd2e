"""The input contract of an ExportedProgram, read from `models/<name>.json` (torch's export schema)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from aotipre.pt2 import symexpr
from aotipre.pt2.dtypes import EXPORT_SCHEMA_DTYPES
from aotipre.pt2.spec import (
    CallSignature,
    Dim,
    InputSpec,
    ModelInfo,
    StateTensor,
    SymbolRange,
    TensorSpec,
    TreeSpec,
)

if TYPE_CHECKING:
    from aotipre.pt2.archive import Archive

INT_OO = 2**62
"""Range bounds at or beyond this are treated as unbounded (export writes int_oo as a huge int)."""
EMBEDDING_TARGETS = {
    "torch.ops.aten.embedding.default": ("weight", "indices"),
    "torch.ops.aten._embedding_bag.default": ("weight", "indices"),
    "torch.ops.aten.embedding_bag.default": ("weight", "indices"),
    "torch.ops.aten.embedding_bag.padding_idx": ("weight", "indices"),
}
"""The operators that gather rows of a table by index: (the table's argument, the indices')."""
EMBEDDING_PASSTHROUGH = re.compile(
    r"torch\.ops\.aten\.(view|reshape|_to_copy|to|clone|contiguous|unsqueeze|squeeze|flatten"
    r"|permute|transpose|expand|slice|select|alias|_unsafe_view|t|long|int)\b"
)
"""The operators that pass an index tensor's values on unchanged (views, casts, copies)."""


class ContractError(ValueError):
    """The JSON is valid but not of the shape aotipre expects; the message says where."""


@dataclass(frozen=True)
class ExportedContract:
    """What the ExportedProgram says about calling the model."""

    torch_version: str | None
    schema_version: str | None
    inputs: tuple[InputSpec, ...]
    outputs: tuple[TensorSpec | None, ...]
    symbols: tuple[SymbolRange, ...]
    signature: CallSignature | None
    device: str | None
    mutated_buffers: tuple[str, ...] = ()
    """Buffers (their fqn) the program writes: BUFFER_MUTATION outputs of a functional graph,
    or in-place ops (`aten.add_`, `aten.copy_`, ...) on a buffer input of a non-functional
    one. Such a model carries state from one call to the next."""
    state: tuple[StateTensor, ...] = ()
    """The program's state_dict: its parameters and persistent buffers, in signature order."""


def parse_treespec(text: str) -> TreeSpec:
    """Parse torch's serialized TreeSpec (`[1, {"type": ..., "context": ..., "children_spec": [...]}]`)."""
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise ContractError(f"in_spec is not JSON: {exc}") from None
    if isinstance(data, list) and len(data) == 2 and isinstance(data[1], dict):
        data = data[1]
    return _treespec(data, 0)


def _treespec(node: Any, depth: int) -> TreeSpec:
    if depth > 200:
        raise ContractError("in_spec is nested more than 200 levels")
    if not isinstance(node, dict):
        raise ContractError("in_spec node is not an object")
    typ = node.get("type")
    context = node.get("context")
    if isinstance(context, str):
        try:
            context = json.loads(context)
        except ValueError:
            pass
    children = node.get("children_spec") or []
    if not isinstance(children, list):
        raise ContractError("in_spec children_spec is not a list")
    return TreeSpec(
        type=typ if isinstance(typ, str) else None,
        context=context,
        children=tuple(_treespec(c, depth + 1) for c in children),
    )


def call_signature(spec: TreeSpec, arg_names: tuple[str, ...] = ()) -> CallSignature:
    """Split a `(args, kwargs)` TreeSpec into positional and keyword parts."""
    if spec.type != "builtins.tuple" or len(spec.children) != 2:
        raise ContractError("in_spec is not an (args, kwargs) tuple")
    args_spec, kwargs_spec = spec.children
    keys = kwargs_spec.context if isinstance(kwargs_spec.context, list) else []
    if len(keys) != len(kwargs_spec.children):
        raise ContractError("in_spec kwargs keys and children differ in number")
    return CallSignature(
        args=args_spec.children,
        kwargs=tuple((str(k), c) for k, c in zip(keys, kwargs_spec.children)),
        arg_names=arg_names,
    )


def leaf_paths(sig: CallSignature) -> list[tuple[str, str]]:
    """(name, path) of every leaf in flattening order: args first, then kwargs in spec order."""
    out: list[tuple[str, str]] = []

    def walk(node: TreeSpec, name: str, path: str) -> None:
        if node.is_leaf:
            out.append((name, path))
            return
        keys = node.context if isinstance(node.context, list) else None
        for i, child in enumerate(node.children):
            key = keys[i] if keys is not None and i < len(keys) else i
            sub = f"[{key!r}]" if isinstance(key, str) else f"[{key}]"
            walk(child, name + sub, path + sub)

    for i, arg in enumerate(sig.args):
        name = sig.arg_names[i] if i < len(sig.arg_names) else f"args[{i}]"
        walk(arg, name, f"args[{i}]")
    for key, child in sig.kwargs:
        walk(child, key, f"kwargs[{key!r}]")
    return out


def _dim(entry: Any) -> Dim:
    if not isinstance(entry, dict):
        raise ContractError("size entry is not an object")
    if "as_int" in entry:
        return Dim(value=int(entry["as_int"]))
    if "as_expr" in entry:
        expr = entry["as_expr"].get("expr_str", "")
        return Dim(expr=symexpr.pretty(str(expr)))
    raise ContractError(f"unknown size entry {sorted(entry)}")


def tensor_spec(meta: dict[str, Any]) -> TensorSpec:
    dtype_num = meta.get("dtype")
    dtype = (
        EXPORT_SCHEMA_DTYPES.get(dtype_num, f"unknown({dtype_num})")
        if isinstance(dtype_num, int)
        else f"unknown({dtype_num})"
    )
    sizes = meta.get("sizes")
    if not isinstance(sizes, list):
        raise ContractError("tensor meta has no sizes list")
    strides = meta.get("strides")
    device = meta.get("device") or {}
    return TensorSpec(
        dtype=dtype,
        shape=tuple(_dim(s) for s in sizes),
        strides=tuple(_dim(s) for s in strides) if isinstance(strides, list) else None,
        device=str(device.get("type", "cpu")) if isinstance(device, dict) else "cpu",
    )


def parse_exported(data: Any) -> ExportedContract:
    """Parse a decoded models/<name>.json. Raises ContractError naming what is missing, or what
    Python tripped on in JSON of an unexpected shape (a list where an object belongs, ...)."""
    try:
        return _parse_exported(data)
    except ContractError:
        raise
    except (AttributeError, TypeError, KeyError, IndexError, ValueError, RecursionError) as exc:
        raise ContractError(f"unexpected structure ({type(exc).__name__}: {exc})") from None


def _parse_exported(data: Any) -> ExportedContract:
    if not isinstance(data, dict) or "graph_module" not in data:
        raise ContractError("model JSON has no graph_module")
    gm = data["graph_module"]
    graph = _obj(gm, "graph")
    signature = _obj(gm, "signature")
    tensor_values = _obj(graph, "tensor_values")
    input_specs = signature.get("input_specs")
    output_specs = signature.get("output_specs")
    if not isinstance(input_specs, list) or not isinstance(output_specs, list):
        raise ContractError("signature has no input_specs/output_specs lists")

    sig = _call_signature(gm)
    leaves = leaf_paths(sig) if sig is not None else []

    inputs: list[InputSpec] = []
    tensor_index = 0
    devices: set[str] = set()
    user_pos = 0
    for spec in input_specs:
        if not isinstance(spec, dict):
            raise ContractError("input spec is not an object")
        if "user_input" in spec:
            arg = spec["user_input"].get("arg", {})
            kind, graph_name, value = _arg_kind(arg)
        elif "constant_input" in spec:
            graph_name = str(spec["constant_input"].get("name", ""))
            kind, _, value = _arg_kind(spec["constant_input"].get("value", {}))
            kind = "constant" if kind not in ("none",) else kind
        else:
            continue  # parameters, buffers, constants, tokens: not user inputs
        name, path = leaves[user_pos] if user_pos < len(leaves) else (graph_name, f"[{user_pos}]")
        tspec = None
        if kind == "tensor":
            meta = tensor_values.get(graph_name)
            if not isinstance(meta, dict):
                raise ContractError(f"no tensor meta for input {graph_name}")
            tspec = tensor_spec(meta)
            devices.add(tspec.device)
        inputs.append(
            InputSpec(
                name=name,
                position=user_pos,
                path=path,
                kind=kind,
                tensor=tspec,
                tensor_index=tensor_index if tspec is not None else None,
                value=value,
            )
        )
        if tspec is not None:
            tensor_index += 1
        user_pos += 1
    if sig is not None and len(leaves) != user_pos:
        raise ContractError(
            f"in_spec has {len(leaves)} leaves but the signature lists {user_pos} user inputs"
        )

    outputs: list[TensorSpec | None] = []
    for spec in output_specs:
        arg = (spec.get("user_output") or {}).get("arg", {}) if isinstance(spec, dict) else {}
        tname = (arg.get("as_tensor") or {}).get("name") if isinstance(arg, dict) else None
        meta = tensor_values.get(tname) if tname else None
        if "user_output" in (spec if isinstance(spec, dict) else {}):
            outputs.append(tensor_spec(meta) if isinstance(meta, dict) else None)

    version = data.get("schema_version")
    schema = f"{version.get('major')}.{version.get('minor')}" if isinstance(version, dict) else None
    return ExportedContract(
        torch_version=str(data["torch_version"]) if data.get("torch_version") else None,
        schema_version=schema,
        inputs=tuple(inputs),
        outputs=tuple(outputs),
        symbols=_symbols(data.get("range_constraints") or {}),
        signature=sig,
        device=sorted(devices)[0] if len(devices) == 1 else (",".join(sorted(devices)) or None),
        mutated_buffers=_mutated_buffers(graph, input_specs, output_specs),
        state=_state(input_specs, tensor_values),
    )


def _state(input_specs: list[Any], tensor_values: dict[str, Any]) -> tuple[StateTensor, ...]:
    """ExportedContract.state: each `parameter` and persistent `buffer` input spec, with the
    dtype and static shape its tensor meta records (non-persistent buffers are not in the
    state_dict, lifted tensor constants neither)."""
    out: list[StateTensor] = []
    for spec in input_specs:
        if not isinstance(spec, dict):
            continue
        if isinstance(spec.get("parameter"), dict):
            body, kind, key = spec["parameter"], "Parameter", "parameter_name"
        elif isinstance(spec.get("buffer"), dict) and spec["buffer"].get("persistent", True):
            body, kind, key = spec["buffer"], "Buffer", "buffer_name"
        else:
            continue
        arg = body.get("arg")
        meta = tensor_values.get(arg.get("name")) if isinstance(arg, dict) else None
        dtype, shape = None, None
        if isinstance(meta, dict):
            tensor = tensor_spec(meta)
            dtype = tensor.dtype
            if all(d.is_static for d in tensor.shape):
                shape = tuple(int(d.value or 0) for d in tensor.shape)
        if body.get(key):
            out.append(StateTensor(fqn=str(body[key]), kind=kind, dtype=dtype, shape=shape))
    return tuple(out)


def _mutated_buffers(
    graph: dict[str, Any], input_specs: list[Any], output_specs: list[Any]
) -> tuple[str, ...]:
    """ExportedContract.mutated_buffers, in the graph's order."""
    found: dict[str, None] = {}
    for spec in output_specs:
        body = spec.get("buffer_mutation") if isinstance(spec, dict) else None
        if isinstance(body, dict) and body.get("buffer_name"):
            found.setdefault(str(body["buffer_name"]), None)
    buffers: dict[str, str] = {}  # graph input name -> buffer fqn
    for spec in input_specs:
        body = spec.get("buffer") if isinstance(spec, dict) else None
        if isinstance(body, dict) and isinstance(body.get("arg"), dict):
            buffers[str(body["arg"].get("name"))] = str(body.get("buffer_name"))
    for node in graph.get("nodes") or []:
        target = node.get("target") if isinstance(node, dict) else None
        if not isinstance(target, str) or not _in_place(target):
            continue
        first = next(iter(node.get("inputs") or []), None)
        arg = first.get("arg") if isinstance(first, dict) else None
        tensor = arg.get("as_tensor") if isinstance(arg, dict) else None
        name = tensor.get("name") if isinstance(tensor, dict) else None
        if name in buffers:
            found.setdefault(buffers[name], None)
    return tuple(found)


def _in_place(target: str) -> bool:
    """`torch.ops.aten.add_.Tensor`: an op whose name ends in `_` writes its first argument."""
    parts = target.split(".")
    return len(parts) >= 4 and parts[-2].endswith("_") and not parts[-2].startswith("_")


def _obj(parent: dict[str, Any], key: str) -> dict[str, Any]:
    value = parent.get(key) if isinstance(parent, dict) else None
    if not isinstance(value, dict):
        raise ContractError(f"model JSON has no {key} object")
    return value


def _call_signature(gm: dict[str, Any]) -> CallSignature | None:
    for entry in gm.get("module_call_graph") or []:
        if isinstance(entry, dict) and entry.get("fqn") == "" and entry.get("signature"):
            s = entry["signature"]
            in_spec = s.get("in_spec")
            if not isinstance(in_spec, str):
                return None
            names = tuple(str(n) for n in s.get("forward_arg_names") or [])
            return call_signature(parse_treespec(in_spec), names)
    return None


_SCALAR_KINDS = {
    "as_int": "int",
    "as_float": "float",
    "as_bool": "bool",
    "as_string": "str",
    "as_sym_int": "sym_int",
    "as_sym_float": "sym_float",
    "as_sym_bool": "sym_bool",
}


_LIST_KINDS = {"as_ints": "ints", "as_floats": "floats", "as_bools": "bools", "as_strings": "strs"}


def _arg_kind(arg: Any) -> tuple[str, str, Any]:
    """(kind, graph name, constant value) of a serialized Argument."""
    if not isinstance(arg, dict) or not arg:
        return "other", "", None
    key, body = next(iter(arg.items()))
    if key == "as_tensor":
        return "tensor", str((body or {}).get("name", "")), None
    if key == "as_none":
        return "none", "", None
    if key in ("as_sym_int", "as_sym_float", "as_sym_bool"):
        name = body.get("as_name", "") if isinstance(body, dict) else ""
        return _SCALAR_KINDS[key], str(name), None
    if key in _SCALAR_KINDS:
        return _SCALAR_KINDS[key], "", body
    if key in _LIST_KINDS and isinstance(body, list):
        return _LIST_KINDS[key], "", list(body)
    return "other", "", None


def _symbols(ranges: dict[str, Any]) -> tuple[SymbolRange, ...]:
    out = []
    for key, rng in ranges.items():
        if not isinstance(rng, dict):
            continue
        pretty = symexpr.pretty(str(key))
        lo = rng.get("min_val")
        hi = rng.get("max_val")
        lo_i = int(lo) if isinstance(lo, (int, float)) and abs(lo) < INT_OO else 0
        hi_i = int(hi) if isinstance(hi, (int, float)) and abs(hi) < INT_OO else None
        out.append(SymbolRange(symbol=pretty, min=lo_i, max=hi_i))
    return tuple(out)


def graph_ops(data: Any) -> tuple[str, ...]:
    """The operators an ExportedProgram's graph calls (`torch.ops.<ns>.<op>.<overload>` node
    targets, nested graphs of higher-order ops included), in first-use order, without repeats."""
    found: dict[str, None] = {}

    def walk(graph: Any, depth: int) -> None:
        if depth > 50 or not isinstance(graph, dict):
            return
        for node in graph.get("nodes") or []:
            if not isinstance(node, dict):
                continue
            target = node.get("target")
            if isinstance(target, str) and target.startswith("torch.ops."):
                found.setdefault(target, None)
            for item in node.get("inputs") or []:
                arg = item.get("arg") if isinstance(item, dict) else None
                sub = arg.get("as_graph") if isinstance(arg, dict) else None
                if isinstance(sub, dict):
                    walk(sub.get("graph"), depth + 1)

    gm = data.get("graph_module") if isinstance(data, dict) else None
    if isinstance(gm, dict):
        walk(gm.get("graph"), 0)
    return tuple(found)


def embedding_inputs(data: dict[str, Any]) -> dict[int, int]:
    """{user tensor input index: rows}: the inputs of an ExportedProgram (`models/<name>.json`,
    parsed) that feed an embedding's indices, directly or through views and casts
    (EMBEDDING_PASSTHROUGH), with the rows of the smallest table each one indexes. Raises
    (KeyError, TypeError, AttributeError...) on a graph of another shape."""
    gm = data["graph_module"]
    graph = gm["graph"]
    tensor_values = graph.get("tensor_values", {})
    user_inputs: list[str] = []
    for spec in gm["signature"]["input_specs"]:
        ui = spec.get("user_input") if isinstance(spec, dict) else None
        if ui is not None and "as_tensor" in ui.get("arg", {}):
            user_inputs.append(ui["arg"]["as_tensor"]["name"])
    producer: dict[str, dict[str, Any]] = {}
    for node in graph.get("nodes", []):
        for out in node.get("outputs", []):
            name = out.get("as_tensor", {}).get("name") if isinstance(out, dict) else None
            if name:
                producer[name] = node
    found: dict[int, int] = {}
    for node in graph.get("nodes", []):
        roles = EMBEDDING_TARGETS.get(node.get("target", ""))
        if roles is None:
            continue
        args = {a.get("name"): a.get("arg", {}) for a in node.get("inputs", [])}
        weight = args.get(roles[0], {}).get("as_tensor", {}).get("name")
        indices = args.get(roles[1], {}).get("as_tensor", {}).get("name")
        sizes = tensor_values.get(weight, {}).get("sizes", []) if weight else []
        if not indices or not sizes or "as_int" not in sizes[0]:
            continue
        rows = int(sizes[0]["as_int"])
        for _ in range(10):
            if indices in user_inputs:
                break
            src = producer.get(indices)
            if src is None or not EMBEDDING_PASSTHROUGH.match(src.get("target", "")):
                indices = None
                break
            first = next(
                (
                    a["arg"]["as_tensor"]["name"]
                    for a in src.get("inputs", [])
                    if "as_tensor" in a.get("arg", {})
                ),
                None,
            )
            indices = first
        if indices in user_inputs:
            idx = user_inputs.index(indices)
            found[idx] = min(rows, found.get(idx, rows))
    return found


def embedding_rows(archive: Archive, root: str, model: str) -> dict[int, int]:
    """embedding_inputs() of model `model`'s ExportedProgram in the open `archive` (a package
    whose archive root is `root`); {} when that graph cannot be read: a best-effort hint that
    never fails a check."""
    try:
        return embedding_inputs(json.loads(archive.read(f"{root}/models/{model}.json")))
    except Exception:  # noqa: BLE001 - any graph the walk does not understand: no hint
        return {}


def program_difference(aoti: ModelInfo, ep: ModelInfo) -> str | None:
    """How an ExportedProgram (`--exported-program`, a bundle's) differs from the one the AOTI
    code was compiled from, as far as the compiled code tells: its tensor inputs (count, dtype,
    rank, from the wrapper's contract), its output count (out_spec_), and the shape and dtype
    of each parameter and buffer both name (constants_info_ against the state_dict). None when
    they agree, or when the compiled code's contract is unknown (no wrapper.cpp to read it
    from)."""
    want, got = aoti.tensor_inputs, ep.tensor_inputs
    if want:
        if len(want) != len(got):
            return f"{len(got)} tensor input(s), the AOTI code takes {len(want)}"
        for i, (w, g) in enumerate(zip(want, got)):
            assert w.tensor is not None and g.tensor is not None
            if w.tensor.dtype != g.tensor.dtype:
                return f"tensor input {i} is {g.tensor.dtype}, the AOTI code takes {w.tensor.dtype}"
            if len(w.tensor.shape) != len(g.tensor.shape):
                return (
                    f"tensor input {i} has {len(g.tensor.shape)} dims, the AOTI code takes "
                    f"{len(w.tensor.shape)}"
                )
    tree = aoti.output_tree
    if tree is not None and ep.has_exported_program and tree.num_leaves() != len(ep.outputs):
        return f"{len(ep.outputs)} output(s), the AOTI code returns {tree.num_leaves()}"
    return _state_difference(aoti, ep)


def _state_difference(aoti: ModelInfo, ep: ModelInfo) -> str | None:
    """A parameter or buffer the AOTI code keeps (constants_info_, by fqn) with another shape
    or dtype in the ExportedProgram's state_dict: another model's weights (a Linear(16, 256)
    where the code was compiled from a Linear(16, 64))."""
    state = {t.fqn: t for t in ep.state}
    for c in aoti.constants:
        theirs = state.get(c.fqn or "")
        if theirs is None or c.kind not in ("Parameter", "Buffer") or c.from_folded:
            continue
        if c.shape is not None and theirs.shape is not None and c.shape != theirs.shape:
            return (
                f"{theirs.kind.lower()} '{c.fqn}' is {list(theirs.shape)}, the AOTI code holds "
                f"{list(c.shape)}"
            )
        if c.dtype is not None and theirs.dtype is not None and c.dtype != theirs.dtype:
            return (
                f"{theirs.kind.lower()} '{c.fqn}' is {theirs.dtype}, the AOTI code holds {c.dtype}"
            )
    return None
