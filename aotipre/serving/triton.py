"""Triton Inference Server's PyTorch backend (platform torch_aoti) against a package's contract.

Torch-free. The config is a parsed `inference.ModelConfig` (aotipre.serving.pbtxt); every rule
below is what the backend's sources do, cited where it is applied. Sources read:
triton-inference-server/pytorch_backend at 266fd38 (2026-05-13): README.md ("AOT Inductor
Support"), src/libtorch.cc, src/libtorch_utils.cc, src/pt2/model_state.{hh,cc},
src/pt2/model_instance_state.cc, src/pt2/call_spec.cc, src/pt2/io_data.cc;
triton-inference-server/common protobuf/model_config.proto; triton-inference-server/backend
src/backend_model_instance.cc; triton-inference-server/server docs/user_guide/
model_configuration.md and model_repository.md.

Longer than the ~600 lines of the other modules on purpose: it is one backend's rules, each
next to the source line it follows; split by topic (names, dtypes, dims, batching, instances),
the rules would lose the one place where a reader checks them against that backend's sources
(the pbtxt reading and writing are aotipre.serving.pbtxt).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from aotipre.findings import Finding, Severity, codes
from aotipre.pt2.spec import Dim, ModelInfo, PackageInfo, TensorSpec, TreeSpec
from aotipre.serving import pbtxt
from aotipre.serving.outputs import with_wrapper_outputs

PLATFORM = "torch_aoti"
"""src/libtorch.cc GetModelInfo: `is_pt2 = (platform == "torch_aoti")`; any other platform
sends the model down the TorchScript path (torch::jit::load of the file)."""
BACKEND = "pytorch"
DEFAULT_FILENAME = "model.pt2"
"""src/pt2/model_state.hh INDUCTOR_MODEL_ARTIFACT_NAME_DEFAULT: the file LoadModel opens at
`<model dir>/<version>/` when the config sets no default_model_filename
(backend_model_instance.cc: ArtifactFilename() is default_model_filename)."""
PACKAGE_MODEL_NAME = "model"
"""src/pt2/model_state.hh INDUCTOR_MODEL_NAME_DEFAULT: the model_name LoadModel hands to
AOTIModelPackageLoader, whatever the package holds."""

TRITON_TO_TORCH: dict[str, str] = {
    "TYPE_BOOL": "bool",
    "TYPE_UINT8": "uint8",
    "TYPE_INT8": "int8",
    "TYPE_INT16": "int16",
    "TYPE_INT32": "int32",
    "TYPE_INT64": "int64",
    "TYPE_FP16": "float16",
    "TYPE_FP32": "float32",
    "TYPE_FP64": "float64",
}
"""src/libtorch_utils.cc ModelConfigDataTypeToTorchType (inputs and outputs of the config) and
ConvertTorchTypeToDataType (what an output is compared with): exactly these nine. TYPE_BF16,
TYPE_UINT16/32/64 and TYPE_STRING have no torch type there ("Unsupported datatype")."""
TORCH_TO_TRITON = {v: k for k, v in TRITON_TO_TORCH.items()}

_CONTAINERS = ("builtins.tuple", "builtins.list", "builtins.dict")
"""src/pt2/call_spec.cc try_parse_spec_object: the only container types of a call spec; any
other (a namedtuple, an OrderedDict, a dataclass) fails the load."""
_BAD_KEY = re.compile(r'["\[\]\s]|[^\x20-\x7e]')
"""README.md: "Dictionary keys cannot contain `"`, `[`, or `]`, nor can they contain whitespace
or non-printable characters"."""


@dataclass(frozen=True)
class ServingConfig:
    """A Triton model configuration to check a package against (read once, before the check)."""

    config: Any
    """The parsed `inference.ModelConfig`."""
    source: str
    """The config.pbtxt it was read from."""
    model_dir: str | None = None
    """The Triton model folder, when the package was found through a model repository."""
    version: str | None = None
    """The version folder the package was found in."""
    layout: tuple[Finding, ...] = ()
    """Layout findings (AOT041) found while reading the model folder."""
    package: str | None = None
    """The package file the backend would load; None when the layout holds none."""


def load_serving_config(path: str) -> ServingConfig:
    """Read a config.pbtxt (aotipre.serving.pbtxt.read_config: one UsageError line for a file
    that is not one) to check a package against, without a model repository's layout."""
    return ServingConfig(config=pbtxt.read_config(path), source=path)


@dataclass(frozen=True)
class Slot:
    """One input or output of the package, as the backend addresses it."""

    index: int
    """Its place in the flattened call (the n of INPUT__n / OUTPUT__n)."""
    ordinal: str
    name: str | None
    """The call-spec name (`ARGS[0]`, `KWARGSmask`, `RESULT[0]`); None when unknown."""
    label: str
    """How findings name the package's side (`args[0]`, `kwargs['mask']`, `output 0`)."""
    tensor: TensorSpec | None = None
    unsupported: str | None = None
    """Why the backend cannot serve it (a non-tensor input, a nested kwarg)."""


def input_slots(model: ModelInfo) -> tuple[list[Slot], list[str]]:
    """The package's inputs as the backend names them, and what in the call the backend cannot
    serve. src/pt2/model_state.cc LoadModel: the input call spec is tuple(args, kwargs); every
    leaf of args is `"ARGS" + name` (call_spec.cc get_names: `[i]` per tuple/list entry, `[key]`
    per dict entry, nested), every kwarg is `"KWARGS" + key` (its top-level key only, with no
    brackets, although the README writes `KWARGS[key]`), at index args-leaves + i; and
    model_instance_state.cc adds the ordinal `INPUT__<index>` of each (io_data::emplace)."""
    by_position = {i.position: i for i in model.inputs}
    problems: list[str] = []
    names: list[tuple[str, str]] = []  # (backend name, aotipre's path)
    sig = model.signature
    if sig is None:
        return [
            Slot(i.position, f"INPUT__{i.position}", None, _label(i.name, i.path), i.tensor)
            for i in sorted(model.inputs, key=lambda i: i.position)
        ], problems
    for i, arg in enumerate(sig.args):
        for sub in _leaf_names(arg, problems, f"args[{i}]") or [""]:
            names.append((f"ARGS[{i}]{sub}", ""))
    for key, child in sig.kwargs:
        if not child.is_leaf:
            problems.append(
                f"keyword argument '{key}' is a {child.type or 'container'}: the backend maps "
                "each keyword argument by its key alone, so only a tensor can be one"
            )
        if _BAD_KEY.search(key):
            problems.append(f"keyword argument {key!r}: keys with quotes, brackets or spaces")
        names.append((f"KWARGS{key}", ""))
    slots = []
    for index, (name, _) in enumerate(names):
        spec = by_position.get(index)
        label = _label(spec.name, spec.path) if spec is not None else f"input {index}"
        why = None
        if spec is not None and spec.tensor is None:
            why = f"it is a {spec.kind}, not a tensor"
        slots.append(
            Slot(index, f"INPUT__{index}", name, label, spec.tensor if spec else None, why)
        )
    return slots, problems


def output_slots(model: ModelInfo) -> tuple[list[Slot] | None, list[str]]:
    """The package's outputs as the backend names them (None: the package records no
    out_spec). src/pt2/model_state.cc LoadModel: an output spec with no children (one tensor)
    is `RESULT`; else `"RESULT" + name` per leaf (get_names), with the ordinal `OUTPUT__<i>`."""
    problems: list[str] = []
    tree = model.output_tree
    if tree is None:
        return None, problems
    subs = [""] if tree.is_leaf else _leaf_names(tree, problems, "the output")
    slots = []
    for index, sub in enumerate(subs):
        spec = model.outputs[index] if index < len(model.outputs) else None
        label = f"output {index}" + (f" ({sub})" if sub else "")
        slots.append(Slot(index, f"OUTPUT__{index}", f"RESULT{sub}", label, spec))
    return slots, problems


def _leaf_names(node: TreeSpec, problems: list[str], where: str) -> list[str]:
    """call_spec.cc get_names: `[i]` for a tuple or list entry, `[key]` for a dict entry."""
    if node.is_leaf:
        return []
    if node.type not in _CONTAINERS:
        problems.append(f"{where} is a {node.type}: the backend reads only dict, tuple and list")
        return [f"[{i}]" for i in range(node.num_leaves())]
    if node.type == "builtins.dict":
        keys = [str(k) for k in (node.context if isinstance(node.context, list) else [])]
        for key in keys:
            if _BAD_KEY.search(key):
                problems.append(f"{where} has the dict key {key!r} (quotes, brackets or spaces)")
    else:
        keys = [str(i) for i in range(len(node.children))]
    out: list[str] = []
    for key, child in zip(keys, node.children):
        sub = _leaf_names(child, problems, f"{where}[{key}]")
        out += [f"[{key}]{s}" for s in sub] if sub else [f"[{key}]"]
    return out


def _label(name: str, path: str) -> str:
    return path if name == path else f"{name} ({path})"


def check_config(
    serving: ServingConfig, package: PackageInfo, models: list[ModelInfo], archive: Any = None
) -> list[Finding]:
    """Every way the config and the package disagree, each naming both sides. `archive` (the
    open package) lets an AOTI-only package's output dtypes be read from its wrapper.cpp."""
    config = serving.config
    src = serving.source
    out: list[Finding] = list(serving.layout)
    out += _platform(config, src)
    model = _served_model(package, models, src, out)
    if model is None:
        return out
    if archive is not None:
        model = with_wrapper_outputs(model, archive)
    out += _device(config, model, src)
    if config.HasField("sequence_batching"):
        # model_instance_state.cc ValidateInputs: throw "Sequence batching is not supported yet."
        out.append(
            _finding(
                "AOT049",
                f"{src}: the config sets sequence_batching, which the torch_aoti backend refuses "
                "at load ('Sequence batching is not supported yet.')",
                model,
            )
        )
    ins, problems = input_slots(model)
    outs, out_problems = output_slots(model)
    for why in problems + out_problems:
        out.append(_finding("AOT049", f"the package's call cannot be served: {why}", model))
    for slot in ins:
        if slot.unsupported:
            out.append(
                _finding(
                    "AOT049",
                    f"package input {slot.label} cannot be served by the backend: "
                    f"{slot.unsupported} (README: every leaf must be a torch.Tensor)",
                    model,
                    input=slot.label,
                    position=slot.index,
                )
            )
    matched_in = _match(config.input, ins, "input", src, model, out)
    _count_inputs(config, ins, src, model, out)
    for entry, slot in matched_in:
        _dtype(entry, slot, "input", src, model, out)
        _dims(entry, slot, config.max_batch_size, src, model, out)
    _batch(config, ins, src, model, out)
    if outs is not None:
        matched_out = _match(config.output, outs, "output", src, model, out)
        _count_outputs(config, outs, src, model, out)
        for entry, slot in matched_out:
            _dtype(entry, slot, "output", src, model, out)
    elif len(config.output) == 0:
        _count_outputs(config, [], src, model, out)
    return out


def _finding(code: str, message: str, model: ModelInfo | None, **fields: Any) -> Finding:
    fields.setdefault("stage", "static")
    return codes.get(code).finding(message, model=model.name if model else None, **fields)


def _platform(config: Any, src: str) -> list[Finding]:
    out = []
    if config.platform != PLATFORM:
        was = f'platform: "{config.platform}"' if config.platform else "no platform"
        out.append(
            _finding(
                "AOT040",
                f"{src} has {was}; the package is an AOTI .pt2, which the PyTorch backend loads "
                f'only with platform: "{PLATFORM}" (else it reads the file as TorchScript)',
                None,
                expected=PLATFORM,
                actual=config.platform,
            )
        )
    if config.backend and config.backend != BACKEND:
        out.append(
            _finding(
                "AOT040",
                f'{src} has backend: "{config.backend}"; a torch_aoti package is served by the '
                f'"{BACKEND}" backend',
                None,
                expected=BACKEND,
                actual=config.backend,
            )
        )
    return out


def _served_model(
    package: PackageInfo, models: list[ModelInfo], src: str, out: list[Finding]
) -> ModelInfo | None:
    """The model the backend loads: the package's `model` (model_state.cc LoadModel passes
    INDUCTOR_MODEL_NAME_DEFAULT to AOTIModelPackageLoader)."""
    found = package.model(PACKAGE_MODEL_NAME)
    if found is not None:
        return found if found in models else None
    names = ", ".join(f"'{m.name}'" for m in package.models)
    out.append(
        _finding(
            "AOT042",
            f"the backend loads the package's model '{PACKAGE_MODEL_NAME}' (for {src}), but "
            f"the package holds {names}: the load fails",
            None,
            expected=PACKAGE_MODEL_NAME,
            actual=[m.name for m in package.models],
        )
    )
    return models[0] if len(models) == 1 else None


def _device(config: Any, model: ModelInfo, src: str) -> list[Finding]:
    """model_instance_state.cc: KIND_GPU makes the instance's device cuda:<id> and the inputs
    are placed there (ProcessRequests: options.device(kCUDA, device_.index())); any other kind
    keeps torch's default CPU device and CPU inputs. The package's code runs where it was
    compiled for, so the two must agree. No instance_group: one KIND_GPU instance per GPU when
    the host has GPUs, else KIND_CPU (server docs, model_configuration.md "Instance Groups")."""
    pb2 = pbtxt.model_config_pb2()
    kinds = [pbtxt.enum_name(pb2.ModelInstanceGroup.Kind, g.kind) for g in config.instance_group]
    device = (model.device_type or "").split(":")[0]
    out: list[Finding] = []
    if device not in ("cpu", "cuda"):
        return out
    for i, kind in enumerate(kinds or ["(none: KIND_GPU on a GPU host)"]):
        where = (
            f"{src} instance_group[{i}] kind {kind}" if kinds else f"{src} has no instance_group"
        )
        bad = (kind == "KIND_GPU" and device == "cpu") or (kind == "KIND_CPU" and device == "cuda")
        if bad:
            out.append(
                _finding(
                    "AOT048",
                    f"{where}, but the package's model '{model.name}' is compiled for {device}: "
                    f"the backend hands it {'GPU' if device == 'cpu' else 'CPU'} tensors",
                    model,
                    expected="KIND_CPU" if device == "cpu" else "KIND_GPU",
                    actual=kind,
                )
            )
        elif (
            device == "cpu"
            and kind in ("KIND_AUTO", "KIND_MODEL")
            or (not kinds and device == "cpu")
        ):
            out.append(
                _finding(
                    "AOT048",
                    f"{where}: on a GPU host that places the instance on a GPU, but the "
                    f"package's model '{model.name}' is compiled for cpu",
                    model,
                    severity=Severity.WARNING,
                    expected="KIND_CPU",
                    actual=kind if kinds else None,
                )
            )
    return out


def _match(
    entries: Any, slots: list[Slot], what: str, src: str, model: ModelInfo, out: list[Finding]
) -> list[tuple[Any, Slot]]:
    """Config entries matched to slots by the backend's names: model_instance_state.cc
    ValidateInputs / ValidateOutputs look each config name up in io_data, which holds the
    call-spec name and the ordinal of every tensor ("... is not found in model input map")."""
    lookup: dict[str, Slot] = {}
    for each in slots:
        lookup[each.ordinal] = each
        if each.name is not None:
            lookup[each.name] = each
    matched: list[tuple[Any, Slot]] = []
    seen: dict[int, str] = {}
    prefix = "INPUT__" if what == "input" else "OUTPUT__"
    for entry in entries:
        slot = lookup.get(entry.name)
        if slot is None:
            accepted = ", ".join(
                f"{s.ordinal}" + (f" or {s.name}" if s.name else "") for s in slots[:6]
            )
            more = "" if len(slots) <= 6 else f" (+{len(slots) - 6})"
            note = ""
            m = re.fullmatch(r"KWARGS\[(.+)\]", entry.name)
            if m and f"KWARGS{m.group(1)}" in lookup:
                note = (
                    f"; the backend's README writes KWARGS[key], but its source (model_state.cc "
                    f"LoadModel) registers 'KWARGS{m.group(1)}': name it "
                    f"{lookup['KWARGS' + m.group(1)].ordinal}"
                )
            out.append(
                _finding(
                    "AOT044",
                    f"{src} {what} '{entry.name}' is not a name the backend gives any of the "
                    f"package's {what}s (it accepts {accepted or 'none'}{more}){note}: the load "
                    "fails",
                    model,
                    input=entry.name if what == "input" else None,
                    expected=[s.ordinal for s in slots],
                    actual=entry.name,
                    hint=f"name {what}s {prefix}<i> by their place in the package's call",
                )
            )
            continue
        if slot.index in seen:
            out.append(
                _finding(
                    "AOT044",
                    f"{src} {what}s '{seen[slot.index]}' and '{entry.name}' both name the "
                    f"package's {what} {slot.label} ({slot.ordinal})",
                    model,
                    input=slot.label if what == "input" else None,
                    position=slot.index,
                )
            )
            continue
        seen[slot.index] = entry.name
        matched.append((entry, slot))
    return matched


def _count_inputs(
    config: Any, slots: list[Slot], src: str, model: ModelInfo, out: list[Finding]
) -> None:
    """model_instance_state.cc ValidateInputs: config inputs + batch_input entries must equal
    the package's inputs ("configuration expects N inputs, but model expects M inputs")."""
    declared = len(config.input) + len(config.batch_input)
    if declared == len(slots):
        return
    extra = f" (+{len(config.batch_input)} batch_input)" if len(config.batch_input) else ""
    out.append(
        _finding(
            "AOT043",
            f"{src} declares {len(config.input)} input{'s' if len(config.input) != 1 else ''}"
            f"{extra}, the package takes {len(slots)} "
            f"({', '.join(s.label for s in slots) or 'none'}): the backend refuses to load it",
            model,
            expected=len(slots),
            actual=declared,
        )
    )


def _count_outputs(
    config: Any, slots: list[Slot], src: str, model: ModelInfo, out: list[Finding]
) -> None:
    """model_instance_state.cc ValidateOutputs: a config without outputs is refused; each
    config output must be one of the package's (no count check: fewer are served)."""
    n = len(config.output)
    if n == 0:
        out.append(
            _finding(
                "AOT043",
                f"{src} declares no output, the package returns {len(slots) or 'at least one'}: "
                "the backend refuses a config without outputs",
                model,
                expected=len(slots) or None,
                actual=0,
            )
        )
    elif n > len(slots):
        out.append(
            _finding(
                "AOT043",
                f"{src} declares {n} outputs, the package returns {len(slots)}",
                model,
                expected=len(slots),
                actual=n,
            )
        )
    elif n < len(slots):
        out.append(
            _finding(
                "AOT043",
                f"{src} declares {n} output{'s' if n != 1 else ''}, the package returns "
                f"{len(slots)}: the others are computed and not served",
                model,
                severity=Severity.INFO,
                expected=len(slots),
                actual=n,
            )
        )


def _dtype(
    entry: Any, slot: Slot, what: str, src: str, model: ModelInfo, out: list[Finding]
) -> None:
    """The backend turns a request into a tensor of the config's type, and compares each output
    with the config's type ("has datatype TYPE_X but model configuration expects TYPE_Y")."""
    pb2 = pbtxt.model_config_pb2()
    declared = pbtxt.enum_name(pb2.DataType, entry.data_type)
    torch_type = TRITON_TO_TORCH.get(declared)
    subject = {"input": slot.label, "position": slot.index} if what == "input" else {}
    if torch_type is None:
        out.append(
            _finding(
                "AOT045",
                f"{src} {what} '{entry.name}' is {declared}, which the backend cannot hand to "
                f"torch (libtorch_utils.cc: 'Unsupported datatype'); the package's {slot.label} "
                f"is {slot.tensor.dtype if slot.tensor else 'a tensor'}",
                model,
                expected=TORCH_TO_TRITON.get(slot.tensor.dtype) if slot.tensor else None,
                actual=declared,
                **subject,
            )
        )
        return
    if slot.tensor is None or slot.tensor.dtype == torch_type:
        return
    wanted = TORCH_TO_TRITON.get(slot.tensor.dtype)
    why = (
        f"use {wanted}"
        if wanted
        else f"the backend has no TYPE_ for {slot.tensor.dtype}: it cannot serve this package"
    )
    out.append(
        _finding(
            "AOT045",
            f"{src} {what} '{entry.name}' is {declared} ({torch_type}), the package's "
            f"{slot.label if slot.label.startswith(what) else f'{what} {slot.label}'} is "
            f"{slot.tensor.dtype}",
            model,
            hint=why,
            expected=wanted or slot.tensor.dtype,
            actual=declared,
            **subject,
        )
    )


def _dims(
    entry: Any, slot: Slot, max_batch: int, src: str, model: ModelInfo, out: list[Finding]
) -> None:
    """Triton accepts a request whose shape matches dims (-1: any size), with a batch dim in
    front when max_batch_size > 0 (model_config.proto max_batch_size); the backend passes that
    shape to the package unchanged (ProcessRequests: batch_n_shape)."""
    tensor = slot.tensor
    if tensor is None:
        return
    shape = tensor.shape[1:] if max_batch > 0 else tensor.shape
    offset = 1 if max_batch > 0 else 0
    # a reshape is the shape the backend sees (model_config.proto ModelTensorReshape)
    dims = list(entry.reshape.shape) if entry.HasField("reshape") else list(entry.dims)
    where = f"{src} input '{entry.name}'"
    pkg = "[" + ", ".join(str(d) for d in tensor.shape) + "]"
    if max_batch > 0 and not tensor.shape:
        return  # a 0-dim input under batching: _batch says so
    if len(dims) != len(shape):
        batch = " after the batch dim (max_batch_size > 0)" if max_batch > 0 else ""
        out.append(
            _finding(
                "AOT046",
                f"{where} has dims {dims} ({len(dims)} dims{batch}), the package's {slot.label} "
                f"has shape {pkg} ({len(shape)} dims{batch})",
                model,
                input=slot.label,
                position=slot.index,
                expected=[d.to_json() for d in shape],
                actual=dims,
            )
        )
        return
    for i, (want, have) in enumerate(zip(dims, shape)):
        d = i + offset
        fields = {"input": slot.label, "position": slot.index, "dim": d}
        if have.is_static:
            if want == -1:
                out.append(
                    _finding(
                        "AOT046",
                        f"{where} dim {i} is -1 (any size), the package's {slot.label} dim {d} "
                        f"is static {have.value}: Triton lets other sizes through to a package "
                        "that refuses them",
                        model,
                        severity=Severity.WARNING,
                        expected=have.value,
                        actual=want,
                        **fields,
                    )
                )
            elif want != have.value:
                out.append(
                    _finding(
                        "AOT046",
                        f"{where} dim {i} is {want}, the package's {slot.label} dim {d} is "
                        f"{have.value}: every request Triton accepts is refused by the package",
                        model,
                        expected=have.value,
                        actual=want,
                        **fields,
                    )
                )
            continue
        if want == -1:
            continue
        lo, hi = dim_range(model, tensor, d)
        if want < lo or (hi is not None and want > hi):
            span = f"[{lo}, {hi if hi is not None else 'inf'}]"
            out.append(
                _finding(
                    "AOT046",
                    f"{where} dim {i} is {want}, outside the range {span} of the package's "
                    f"{slot.label} dim {d} ({have})",
                    model,
                    expected=span,
                    actual=want,
                    **fields,
                )
            )


def dim_range(model: ModelInfo, tensor: TensorSpec, d: int) -> tuple[int, int | None]:
    """The sizes dim `d` takes: the compiled code's bounds where the wrapper states them (they
    may be tighter than export's), else its symbol's range; (0, None) when unknown."""
    bound = tensor.bounds[d] if d < len(tensor.bounds) else None
    dim: Dim = tensor.shape[d]
    sym = model.symbol(dim.expr) if dim.expr else None
    lo = sym.min if sym is not None else 0
    hi = sym.max if sym is not None else None
    if bound is not None:
        lo = max(lo, bound.min) if bound.min is not None else lo
        hi = bound.max if hi is None else (min(hi, bound.max) if bound.max is not None else hi)
    return lo, hi


def _batch(config: Any, slots: list[Slot], src: str, model: ModelInfo, out: list[Finding]) -> None:
    """max_batch_size > 0: every input gets a first dim of 1..max_batch_size (model_config.proto;
    server docs: batching needs the batch dim first in every input). model_instance_state.cc
    ProcessRequests refuses a batch above max_batch_size, and passes the rest to the package."""
    limit = config.max_batch_size
    if limit <= 0:
        return
    firsts = [(s, s.tensor.shape[0]) for s in slots if s.tensor is not None and s.tensor.shape]
    for slot in slots:
        if slot.tensor is not None and not slot.tensor.shape:
            out.append(
                _finding(
                    "AOT047",
                    f"{src} max_batch_size: {limit} batches every input, but the package's "
                    f"{slot.label} is a 0-dim tensor",
                    model,
                    input=slot.label,
                    position=slot.index,
                )
            )
    static = [(s, d) for s, d in firsts if d.is_static]
    for slot, dim in static:
        out.append(
            _finding(
                "AOT047",
                f"{src} max_batch_size: {limit} puts a batch dim of 1..{limit} in front of every "
                f"input, but the package's {slot.label} dim 0 is static {dim.value}",
                model,
                input=slot.label,
                position=slot.index,
                dim=0,
                expected=0,
                actual=limit,
                hint="set max_batch_size: 0 and put the whole shape in dims",
            )
        )
    dynamic = [(s, d) for s, d in firsts if not d.is_static]
    if static or not dynamic:
        return
    exprs = {d.expr for _, d in dynamic}
    if len(exprs) > 1:
        listed = ", ".join(f"{s.label} dim 0 is {d}" for s, d in dynamic)
        out.append(
            _finding(
                "AOT047",
                f"{src} max_batch_size: {limit} gives every input the same batch size, but the "
                f"package's first dims are different dynamic dims ({listed})",
                model,
                actual=limit,
            )
        )
        return
    slot, dim = dynamic[0]
    assert slot.tensor is not None
    lo, hi = dim_range(model, slot.tensor, 0)
    if hi is not None and limit > hi:
        out.append(
            _finding(
                "AOT047",
                f"{src} max_batch_size: {limit}, but the package's batch dim ({slot.label} dim 0, "
                f"{dim}) is exported with max {hi}: batches of {hi + 1} to {limit} are refused "
                "by the package",
                model,
                input=slot.label,
                position=slot.index,
                dim=0,
                expected=hi,
                actual=limit,
                hint=f"set max_batch_size: {hi} (or re-export with a batch Dim max >= {limit})",
            )
        )
    if lo > 1:
        out.append(
            _finding(
                "AOT082",
                f"{src} max_batch_size: {limit} lets Triton send a batch of 1 (a lone request), "
                f"but the package's batch dim ({slot.label} dim 0, {dim}) takes {lo} to "
                f"{hi if hi is not None else 'inf'}: such a request is refused",
                model,
                input=slot.label,
                position=slot.index,
                dim=0,
                expected=1,
                actual=lo,
                hint="AOTInductor compiles Dim(min=1) as min 2; export under "
                "torch.fx.experimental._config.patch(backed_size_oblivious=True) to accept 1",
            )
        )
    if limit > 1:
        out.append(
            _finding(
                "AOT083",
                f"{src} max_batch_size: {limit}: the backend's README says batch sizes above 1 "
                "are not completed for AOT Inductor packages (Triton 26.03+, beta)",
                model,
                actual=limit,
                hint="try the batched config on the Triton release you deploy",
            )
        )


def config_for(model: ModelInfo, *, name: str, max_batch_size: int = 0) -> Any:
    """A ModelConfig the backend loads this model with: platform torch_aoti, inputs and outputs
    by their ordinals (the one naming the README and the source agree on for kwargs too),
    dtypes mapped, -1 for dynamic dims, the batch dim left out when max_batch_size > 0, and an
    instance group of the package's device. ValueError (one line) when it cannot be served."""
    pb2 = pbtxt.model_config_pb2()
    config = pb2.ModelConfig(name=name, platform=PLATFORM, max_batch_size=max_batch_size)
    ins, problems = input_slots(model)
    outs, out_problems = output_slots(model)
    problems += out_problems + [f"{s.label}: {s.unsupported}" for s in ins if s.unsupported]
    if problems:
        raise ValueError(f"the backend cannot serve model '{model.name}': {problems[0]}")
    if outs is None:
        raise ValueError(f"model '{model.name}' records no out_spec: its outputs cannot be named")
    if max_batch_size > 0:
        firsts = {s.tensor.shape[0] for s in ins if s.tensor is not None and s.tensor.shape}
        if len(firsts) != 1 or next(iter(firsts)).is_static:
            raise ValueError(
                f"--max-batch-size {max_batch_size}: the inputs of model '{model.name}' do not "
                "share one dynamic first dim to batch on"
            )
        first = ins[0]
        assert first.tensor is not None
        hi = dim_range(model, first.tensor, 0)[1]
        if hi is not None and max_batch_size > hi:
            raise ValueError(
                f"--max-batch-size {max_batch_size}: the batch dim of model '{model.name}' is "
                f"exported with max {hi}"
            )
    for slot in ins:
        _entry(config.input.add(), slot, max_batch_size)
    for slot in outs:
        _entry(config.output.add(), slot, max_batch_size)
    device = (model.device_type or "cpu").split(":")[0]
    kind = pb2.ModelInstanceGroup.KIND_GPU if device == "cuda" else pb2.ModelInstanceGroup.KIND_CPU
    config.instance_group.add(kind=kind, count=1)
    return config


def _entry(entry: Any, slot: Slot, max_batch_size: int) -> None:
    pb2 = pbtxt.model_config_pb2()
    entry.name = slot.ordinal
    tensor = slot.tensor
    if tensor is None:  # an output the package records no spec of (an AOTI-only package)
        raise ValueError(
            f"the dtype and shape of {slot.label} are not recorded in the package: write its "
            "data_type and dims by hand"
        )
    triton = TORCH_TO_TRITON.get(tensor.dtype)
    if triton is None:
        raise ValueError(f"{slot.label} is {tensor.dtype}, which the backend has no TYPE_ for")
    entry.data_type = pb2.DataType.Value(triton)
    shape = tensor.shape[1:] if max_batch_size > 0 else tensor.shape
    entry.dims.extend(d.value if d.is_static and d.value is not None else -1 for d in shape)
    if max_batch_size > 0 and not shape:
        # a [batch] tensor: server docs (model_configuration.md, "Reshape") write it as
        # dims: [1] with an empty reshape
        entry.dims.append(1)
        entry.reshape.SetInParent()


@dataclass(frozen=True)
class WrittenConfig:
    """A config.pbtxt `aotipre serving-config` writes, with what `aotipre check` says of it."""

    text: str
    """The config.pbtxt text (protobuf's text format writer)."""
    notes: tuple[Finding, ...]
    """The warnings and infos check_config gives this config against its package (a batch of
    1 the package refuses, the backend's batching caveat): no config avoids them for this
    package and max_batch_size, so the writer says them instead of writing them away."""


def write_serving_config(
    path: str,
    *,
    max_batch_size: int = 0,
    name: str | None = None,
    model: str | None = None,
    source: str = "config.pbtxt",
) -> WrittenConfig:
    """The config that serves the package at `path`, checked by check_config as `aotipre
    check` would check it (`source` names it in the notes); no `name` unless given (Triton
    then takes the model folder's). UsageError, one line, when the package cannot be served by
    the backend or read, or when the check would refuse the config (an error finding)."""
    from aotipre.foundation.errors import UsageError
    from aotipre.pt2.reader import open_package

    pbtxt.model_config_pb2()  # the install line before the package is read
    opened = open_package(path)
    with opened.archive:
        package = opened.info
        wanted = model or PACKAGE_MODEL_NAME
        found = package.model(wanted)
        if found is None:
            names = ", ".join(f"'{m.name}'" for m in package.models) or "none"
            raise UsageError(
                f"{path}: no model '{wanted}' (models: {names}); the backend loads the model "
                f"'{PACKAGE_MODEL_NAME}'"
            )
        if not found.has_aoti:
            raise UsageError(f"{path}: model '{found.name}' holds no AOTI code to serve")
        served = with_wrapper_outputs(found, opened.archive)
        try:
            config = config_for(served, name=name or "", max_batch_size=max_batch_size)
        except ValueError as exc:
            raise UsageError(f"{path}: {exc}") from None
        said = check_config(ServingConfig(config, source), package, [found], opened.archive)
    refused = [f for f in said if f.severity == Severity.ERROR]
    if refused:
        raise UsageError(f"{path}: aotipre check would refuse the config: {refused[0].message}")
    return WrittenConfig(pbtxt.format_config(config), tuple(said))
