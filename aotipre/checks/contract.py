"""Static checks of what a deployment's loader and call do with a package: which models a plain
`aoti_load_package` loads, whether there is compiled code at all, and which arguments the
compiled model ignores (non-tensor arguments that export specialized)."""

from __future__ import annotations

import ast
import re
from typing import Any

from aotipre.findings import Finding, codes
from aotipre.inputs.meta import SampleInputs, TensorMeta
from aotipre.pt2.exported import program_difference
from aotipre.pt2.spec import InputSpec, ModelInfo, PackageInfo

_PATH_TOKEN = re.compile(r"\[([^\[\]]*)\]")
DEFAULT_MODEL = "model"
"""The model name `aoti_load_package(path)` loads (torch 2.11-2.13)."""


def check_loading(
    package: PackageInfo, models: list[ModelInfo], *, compile_at_deploy: bool
) -> list[Finding]:
    """What a plain `aoti_load_package(path)` does with this package."""
    out: list[Finding] = []
    names = [m.name for m in package.models]
    if len(names) > 1:
        others = [n for n in names if n != DEFAULT_MODEL]
        calls = ", ".join(f"load_package(path, model_name={n!r})" for n in others)
        if DEFAULT_MODEL in names:
            out.append(
                codes.get("AOT017").finding(
                    f"the package holds {len(names)} models ({', '.join(names)}): "
                    f"aoti_load_package(path) loads only '{DEFAULT_MODEL}'; the others need "
                    f"torch._inductor.package.{calls}",
                    stage="static",
                    actual=names,
                )
            )
        else:
            out.append(
                codes.get("AOT016").finding(
                    f"the package holds {len(names)} models ({', '.join(names)}) and none is "
                    f"named '{DEFAULT_MODEL}': a plain aoti_load_package(path) fails with "
                    f'"Failed to find a generated cpp file or so file for model '
                    f"'{DEFAULT_MODEL}'\"; load them with torch._inductor.package.{calls}",
                    stage="static",
                    expected=DEFAULT_MODEL,
                    actual=names,
                )
            )
    for model in models:
        if model.has_aoti or not model.has_exported_program or compile_at_deploy:
            continue  # compile-at-deploy: the deployment compiles it, as the dynamic stages do
        out.append(
            codes.get("AOT015").finding(
                f"model '{model.name}' is an ExportedProgram without compiled AOTI code (a "
                'torch.export.save file): aoti_load_package cannot load it ("Failed to find a '
                f"generated cpp file or so file for model '{model.name}'\")",
                model=model.name,
                stage="static",
            )
        )
    return out


def check_specialized(model: ModelInfo, sample: SampleInputs | None) -> list[Finding]:
    """The non-tensor arguments export specialized: the compiled model ignores what is passed
    for them (torch's AOTICompiledModel drops every non-tensor leaf before calling the .so).

    With an ExportedProgram the values are known (AOT107, info; a sample value that differs is
    AOT105, from the input checks); an AOTI-only package does not record them (AOT108)."""
    fixed = [i for i in model.inputs if i.tensor is None and i.kind != "none"]
    if not fixed:
        return []
    if model.contract_source == "exported_program" or all(i.value is not None for i in fixed):
        # values known: the package's ExportedProgram, or --exported-program's (reader's
        # with_reference_values)
        if sample is not None and any(_differs(i, sample) for i in fixed):
            return []  # AOT105 (an error) says it with the values
        shown = ", ".join(f"{_label(i)} = {i.value!r}" for i in fixed)
        return [
            codes.get("AOT107").finding(
                f"model '{model.name}': export specialized {shown}; the compiled model ignores "
                "any value passed for "
                + ("it" if len(fixed) == 1 else "them")
                + " and computes with "
                + ("this one" if len(fixed) == 1 else "these"),
                model=model.name,
                stage="static",
                expected={i.name: i.value for i in fixed},
            )
        ]
    passed = _sample_values(fixed, sample)
    shown = ", ".join(_label(i) for i in fixed)
    message = (
        f"model '{model.name}': {shown} "
        + ("is not an input" if len(fixed) == 1 else "are not inputs")
        + " of the compiled model: export specialized "
        + ("it" if len(fixed) == 1 else "them")
        + " to the value"
        + ("" if len(fixed) == 1 else "s")
        + " of the example inputs, which an AOTI-only package does not record; any value "
        "passed is ignored"
    )
    if passed:
        message += (
            f" (the sample inputs pass {passed}: not what will run unless it equals the "
            "exported value; pass --exported-program FILE to compare with it)"
        )
    return [
        codes.get("AOT108").finding(
            message,
            model=model.name,
            stage="static",
            input=fixed[0].name if len(fixed) == 1 else None,
            position=fixed[0].position if len(fixed) == 1 else None,
            actual=[i.name for i in fixed],
        )
    ]


def check_data_ranges(model: ModelInfo) -> list[Finding]:
    """Values the compiled code reads from an input at run time (`.item()`) and sizes a tensor
    with, where no range check of them is left (AOT309): compiled with torch 2.15's
    unsafe_skip_scalar_range_asserts (or scalar_asserts=False), a value out of range runs
    unchecked and out of bounds.
    Integer values only; one that never sizes a tensor (`x * n.item()`) has no bound to break."""
    out = []
    for d in model.data_symbols:
        if not d.dtype.startswith(("int", "uint")) or not d.sizes_tensor or d.range_checked:
            continue
        other = f" (it still checks {', '.join(d.checks)})" if d.checks else ""
        lo, hi = d.exported_range or (None, None)
        declared = (
            f"{lo} <= {d.symbol} <= {hi}"
            if lo is not None and hi is not None
            else f"{d.symbol} >= {lo}"
            if lo is not None
            else f"{d.symbol} <= {hi}"
            if hi is not None
            else ""
        )
        assumed = (
            f"the ExportedProgram's range {declared} is no longer checked: a value outside it"
            if declared
            else "a value outside what export assumed"
        )
        out.append(
            codes.get("AOT309").finding(
                f"model '{model.name}': {d.symbol} (read from a tensor at run time, {d.dtype}) "
                f"sizes a tensor and the compiled code checks no range of it{other}: compiled "
                "without its scalar range asserts (unsafe_skip_scalar_range_asserts, torch "
                "2.15+, or scalar_asserts=False), so the model's torch._check bounds and "
                f"export's own are gone; {assumed} runs unchecked, even with "
                "AOTI_RUNTIME_CHECK_INPUTS=1, and reads or writes out of bounds without an error",
                model=model.name,
                stage="static",
                expected=declared or None,
                actual=d.symbol,
            )
        )
    return out


def check_unplaced_specialized(model: ModelInfo, sample: SampleInputs | None) -> list[Finding]:
    """AOTI-only, when wrapper.cpp cannot tell which leaves of the call are the specialized
    non-tensor arguments: say how many there are, and which ones the sample inputs fill with
    non-tensors (the places a deployment's values are ignored)."""
    count = len(model.call_leaves) - len(model.tensor_inputs)
    if count <= 0:
        return []
    message = (
        f"model '{model.name}': {count} of the {len(model.call_leaves)} arguments of the call "
        + ("is not a tensor and not an input" if count == 1 else "are not tensors and not inputs")
        + " of the compiled model: export specialized "
        + ("it to the value" if count == 1 else "them to the values")
        + " of the example inputs, which an AOTI-only package does not record; any value "
        "passed is ignored"
    )
    named: list[str] = []
    if sample is not None:
        for name, path in model.call_leaves:
            found, value = at_path(sample, path)
            if found and not isinstance(value, TensorMeta):
                named.append(f"{name}={value!r}" if name == path else f"{name} ({path})={value!r}")
    if named and len(named) == count:
        message += f"; in the sample inputs these are {', '.join(named)}"
    out = [
        codes.get("AOT108").finding(
            message, model=model.name, stage="static", actual=named or count
        )
    ]
    n_args = len(
        {path.split("]", 1)[0] for _, path in model.call_leaves if path.startswith("args[")}
    )
    if sample is not None and len(sample.args) > n_args:
        extra = sample.args[n_args:]
        if not any(isinstance(v, TensorMeta) for v in extra):
            shown = ", ".join(repr(v) for v in extra[:4])
            out.append(
                codes.get("AOT101").finding(
                    f"{len(sample.args)} positional arguments given, the model was exported with "
                    f"{n_args}; the compiled model silently ignores the extra non-tensor "
                    f"value(s) {shown} and computes with the defaults export used",
                    model=model.name,
                    stage="static",
                    expected=n_args,
                    actual=len(sample.args),
                )
            )
    return out


def _differs(spec: InputSpec, sample: SampleInputs) -> bool:
    found, value = at_path(sample, spec.path)
    return found and not isinstance(value, TensorMeta) and value != spec.value


def _label(spec: InputSpec) -> str:
    return spec.name if spec.name == spec.path else f"{spec.name} ({spec.path})"


def _sample_values(fixed: list[InputSpec], sample: SampleInputs | None) -> str:
    if sample is None:
        return ""
    shown = []
    for spec in fixed:
        found, value = at_path(sample, spec.path)
        if found and not isinstance(value, TensorMeta):
            shown.append(f"{spec.name}={value!r}")
    return ", ".join(shown)


def at_path(sample: SampleInputs, path: str) -> tuple[bool, Any]:
    """The sample's value at a leaf path such as `args[1]` or `kwargs['mask'][0]`."""
    node: Any = {"args": list(sample.args), "kwargs": sample.kwargs}
    head = path.split("[", 1)[0]
    if head not in node:
        return False, None
    node = node[head]
    for token in _PATH_TOKEN.findall(path[len(head) :]):
        try:
            key = ast.literal_eval(token)
            node = node[key]
        except (ValueError, SyntaxError, KeyError, IndexError, TypeError):
            return False, None
    return True, node


_CHECKPOINT_KEYS = frozenset(
    {
        "state_dict",
        "model",
        "model_state_dict",
        "module",
        "optimizer",
        "optimizer_state_dict",
        "optim",
        "scheduler",
        "lr_scheduler",
        "epoch",
        "global_step",
        "step",
        "scaler",
        "ema",
    }
)
_PARAM_SUFFIXES = (
    "weight",
    "bias",
    "running_mean",
    "running_var",
    "num_batches_tracked",
    "inv_freq",
    "embeddings",
)


def checkpoint_kind(model: ModelInfo, sample: SampleInputs) -> str | None:
    """Describe `sample` when it is a state_dict or a training checkpoint saved in place of the
    model's inputs (read as keyword arguments because it is a dict with string keys); None when
    it is not, or when the model takes keyword arguments of those names."""
    if sample.args or not sample.kwargs:
        return None
    expected = {k for k, _ in model.signature.kwargs} if model.signature is not None else set()
    keys = [str(k) for k in sample.kwargs]
    if expected & set(keys):
        return None
    if set(keys) & _CHECKPOINT_KEYS and any(isinstance(v, dict) for v in sample.kwargs.values()):
        shown = ", ".join(repr(k) for k in keys[:6])
        return f"a training checkpoint (a dict with keys {shown})"
    tensors = [k for k, v in sample.kwargs.items() if isinstance(v, TensorMeta)]
    named = [k for k in tensors if "." in k or k.rsplit(".", 1)[-1] in _PARAM_SUFFIXES]
    if len(tensors) == len(keys) and named and len(named) * 2 >= len(keys):
        shown = ", ".join(repr(k) for k in keys[:3])
        return f"a state_dict ({len(keys)} tensors named like parameters: {shown}, ...)"
    return None


def check_checkpoint(model: ModelInfo, sample: SampleInputs) -> list[Finding]:
    """One clear finding when the sample inputs are a state_dict or a checkpoint."""
    kind = checkpoint_kind(model, sample)
    if kind is None:
        return []
    return [
        codes.get("AOT109").finding(
            f"{sample.source or 'the sample inputs'} holds {kind}, not inputs for model "
            f"'{model.name}': weights are inside the package; the sample inputs are what the "
            "model is called with",
            model=model.name,
            stage="static",
            actual=kind,
        )
    ]


def check_contract_conflicts(model: ModelInfo) -> list[Finding]:
    """AOT018: the archive's ExportedProgram and its AOTI code disagree on the inputs; the
    checks use the compiled code's contract (what deploys)."""
    if not model.contract_conflicts:
        return []
    return [
        codes.get("AOT018").finding(
            f"model '{model.name}': the archive's ExportedProgram and the AOTI code that deploys "
            f"take different inputs ({'; '.join(model.contract_conflicts)}): the inputs are "
            "checked against the compiled code, and the eager reference run may refuse them",
            model=model.name,
            stage="static",
            actual=list(model.contract_conflicts),
        )
    ]


def check_reference_program(compiled: ModelInfo, exported: ModelInfo, label: str) -> list[Finding]:
    """AOT070: the ExportedProgram given for an AOTI-only model (`label` names it, e.g. `the
    ExportedProgram of --exported-program ep.pt2`) is not the one its code was compiled from,
    judged as `aotipre bundle` judges it (pt2.exported.program_difference)."""
    differs = program_difference(compiled, exported)
    if differs is None:
        return []
    return [
        codes.get("AOT070").finding(
            f"{label} is not the program model '{compiled.name}' was compiled from ({differs}): "
            "its ranges and outputs are another model's",
            model=compiled.name,
            stage="static",
            actual=differs,
        )
    ]
