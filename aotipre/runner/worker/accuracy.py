"""Accuracy triage's worker step: run a package compiled with the intermediate value printer's
save mode and provenance tracking, compare each kernel's saved outputs with the ExportedProgram's
FX nodes run eagerly (torch.fx.Interpreter over `ep.module()`, the graph whose node names the
provenance file holds), and measure both sides against an fp64 eager run."""

from __future__ import annotations

import contextlib
import copy
import ctypes
import json
import os
import re
import zipfile
from typing import Any

import torch
import torch.utils._pytree as pytree

from . import kernelmap
from .compare import compare_leaf, compare_outputs
from .core import WorkerCore
from .inputs import dtype_name
from .jit_trace import Traced, trace_program
from .loading import load_direct
from .protocol import StepError

RNG_OPS = re.compile(r"rand|bernoulli|dropout|normal|multinomial|uniform|exponential|poisson")
"""Op names that draw random numbers (fallback_random's class)."""
REDUCING_OPS = frozenset(
    {
        "softmax", "_softmax", "log_softmax", "_log_softmax", "_safe_softmax",
        "layer_norm", "native_layer_norm", "group_norm", "native_group_norm", "rms_norm",
        "_fused_rms_norm", "instance_norm", "batch_norm", "native_batch_norm",
        "_native_batch_norm_legit", "_native_batch_norm_legit_functional",
        "_batch_norm_with_update", "cumsum", "cumprod", "logcumsumexp", "cummax", "cummin",
    }
)  # fmt: skip
"""aten ops that reduce inside although their schema carries no `reduction` tag (softmax, the
norms, the scans); every op tagged `torch.Tag.reduction` (sum, mean, amax, max.dim, var, std,
norm, prod, argmax, logsumexp, any, ...) reduces too. Pointwise ops (maximum, clamp_max,
max.other) are neither."""
LOW_PRECISION = ("bfloat16", "float16")
MAX_NODES_RECORDED = 4096
"""Eager values kept at most (the nodes the provenance file names), so memory stays bounded."""


def model_members(package: str, model: str) -> tuple[str, str, dict[str, Any]]:
    """(wrapper.cpp text, the C++ kernels' text, kernel_information.json) of `model` in a
    package aotipre compiled; StepError when the package lacks them."""
    with zipfile.ZipFile(package) as zf:
        names = zf.namelist()
        folder = f"/data/aotinductor/{model}/"
        mine = [n for n in names if folder in f"/{n}"]
        wrapper = [n for n in mine if n.endswith(".wrapper.cpp")]
        kernels = [n for n in mine if n.endswith(".kernel.cpp")]
        info = [n for n in mine if n.endswith("kernel_information.json")]
        if not wrapper or not info:
            raise StepError(
                "the diagnostic rebuild holds no wrapper.cpp or kernel_information.json "
                f"(provenance tracking did not write it): {len(mine)} member(s) for {model!r}"
            )
        text = zf.read(wrapper[0]).decode("utf-8", "replace")
        kernel_text = "\n".join(zf.read(n).decode("utf-8", "replace") for n in kernels)
        provenance = json.loads(zf.read(info[0]))
    return text, kernel_text, provenance if isinstance(provenance, dict) else {}


@contextlib.contextmanager
def stdout_to(path: str) -> Any:
    """fd 1 (where the printer's C++ lines go) into `path` while the block runs."""
    libc = ctypes.CDLL(None)
    libc.fflush(None)
    saved = os.dup(1)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.dup2(fd, 1)
        yield
    finally:
        libc.fflush(None)
        os.dup2(saved, 1)
        os.close(saved)
        os.close(fd)


def node_facts(nodes: list[Any]) -> dict[str, bool]:
    """What decides the cause ladder's order, over FX nodes: bf16/fp16 values, RNG ops,
    reductions."""
    low = rng = red = False
    for node in nodes:
        name = str(getattr(node.target, "__name__", node.target))
        val = node.meta.get("val")
        vals = val if isinstance(val, (list, tuple)) else [val]
        for v in [*vals, *(getattr(a, "meta", {}).get("val") for a in node.all_input_nodes)]:
            if isinstance(v, torch.Tensor) and dtype_name(v.dtype) in LOW_PRECISION:
                low = True
        rng = rng or bool(RNG_OPS.search(name))
        red = red or reduces(node)
    return {"low_precision": low, "rng": rng, "reduction": red, **fp32_matmul_facts(nodes)}


def configs_by_facts(nodes: list[Any], choices: list[Any]) -> tuple[str, dict[str, Any]]:
    """The first of `choices` (`[fact, configs]` pairs, in ladder order) whose fact holds over
    `nodes` (node_facts), as (fact, configs): how accuracy triage's speculative rebuild, started
    before the divergent kernel is known, picks the program's likeliest knob. Raises StepError
    when no fact holds (nothing to rebuild)."""
    facts = node_facts(nodes)
    for fact, configs in choices:
        if facts.get(str(fact)):
            return str(fact), dict(configs)
    raise StepError(f"no candidate knob's fact holds on the program ({facts})")


def reduces(node: Any) -> bool:
    """Whether an FX node's aten op reduces (the all-fallback rebuild's class: reduction order,
    decompositions), by its schema: a `reduction` tag or one of REDUCING_OPS; a batch norm
    whose `training` argument is False normalizes with stored statistics and does not."""
    op = node.target
    if not isinstance(op, torch._ops.OpOverload):
        return False
    tag = getattr(torch.Tag, "reduction", None)
    if tag is not None and tag in op.tags:
        return True
    if op._schema.name.split("::")[-1] not in REDUCING_OPS:
        return False
    for i, arg in enumerate(op._schema.arguments):
        if arg.name == "training":
            value = node.kwargs.get("training", node.args[i] if i < len(node.args) else None)
            return value is not False
    return True


MATMUL_OPS = frozenset(
    {"mm", "bmm", "addmm", "baddbmm", "addbmm", "matmul", "linear", "einsum", "mv", "addmv", "dot"}
)
"""aten ops that run fp32 matrix products through cuBLAS or a Triton mm template (TF32's class
with `torch.backends.cuda.matmul`)."""
CONV_OPS = re.compile(r"^_?conv|^cudnn_convolution")
"""aten convolutions (conv1d-3d, conv_transpose*, convolution): cuDNN's TF32 class."""
_PROCESS_TF32: tuple[str, bool] | None = None
"""The worker's own (float32 matmul precision, cuDNN allow_tf32), before accuracy_precision."""


def fp32_matmul_facts(nodes: list[Any]) -> dict[str, bool]:
    """Whether FX nodes hold an fp32 matrix product or an fp32 convolution (the TF32 knob's
    facts; on CUDA only, which the triage decides)."""
    matmul = conv = False
    for node in nodes:
        op = node.target
        name = op._schema.name.split("::")[-1] if isinstance(op, torch._ops.OpOverload) else ""
        val = node.meta.get("val")
        fp32 = isinstance(val, torch.Tensor) and val.dtype == torch.float32
        matmul = matmul or (fp32 and name in MATMUL_OPS)
        conv = conv or (fp32 and bool(CONV_OPS.search(name)))
    return {"fp32_matmul": matmul, "fp32_conv": conv}


def last_launch_of_nodes(
    found: list[kernelmap.Launch], provenance: dict[str, Any]
) -> dict[str, int]:
    """{FX node: the last launch whose provenance names it}. A node split over several kernels
    (a CUDA Linear: an extern mm, then its bias add fused into a Triton kernel) has its eager
    value only after the last; an earlier kernel's output is a partial result."""
    out: dict[str, int] = {}
    for i, launch in enumerate(found):
        for name in (provenance.get(launch.handle or "") or {}).get("pre_grad_nodes") or []:
            out[str(name)] = i
    return out


def tf32_state() -> dict[str, Any]:
    """This process's TF32 settings: float32 matmul precision ('highest': no TF32 for cuBLAS
    and Triton mm templates) and cuDNN's allow_tf32 (convolutions)."""
    return {
        "matmul": torch.get_float32_matmul_precision() != "highest",
        "conv": bool(torch.backends.cudnn.allow_tf32),
    }


def rmse(a: Any, b: Any) -> float | None:
    """Root-mean-square error of `a` against `b` over their floating leaves (None: none)."""
    total, count = 0.0, 0
    for x, y in zip(pytree.tree_flatten(a)[0], pytree.tree_flatten(b)[0]):
        if not (isinstance(x, torch.Tensor) and x.is_floating_point()):
            continue
        d = x.detach().cpu().double() - y.detach().cpu().double()
        d = d[torch.isfinite(d)]
        total += float((d * d).sum())
        count += d.numel()
    return (total / count) ** 0.5 if count else None


def to_fp64(tree: Any) -> Any:
    return pytree.tree_map(
        lambda x: x.double() if isinstance(x, torch.Tensor) and x.is_floating_point() else x, tree
    )


def flat_inputs(gm: Any, args: Any, kwargs: Any) -> list[Any]:
    """The inputs flattened as the program's graph takes them (kwargs in its in_spec's order)."""
    in_spec = getattr(gm, "_in_spec", None)
    if kwargs and in_spec is not None:
        from torch.export._tree_utils import reorder_kwargs

        kwargs = reorder_kwargs(kwargs, in_spec)
    return pytree.tree_flatten((tuple(args), dict(kwargs)))[0]


def bitwise_difference(a: Any, b: Any) -> str:
    """'' when `a` and `b` hold the same leaves bit for bit (NaN where NaN), else what differs."""
    left, right = pytree.tree_flatten(a)[0], pytree.tree_flatten(b)[0]
    if len(left) != len(right):
        return f"{len(left)} output(s) against {len(right)}"
    for i, (x, y) in enumerate(zip(left, right)):
        if not isinstance(x, torch.Tensor) or not isinstance(y, torch.Tensor):
            if x != y:
                return f"output {i}: {x!r} against {y!r}"
            continue
        x, y = x.detach().cpu(), y.detach().cpu()
        if x.dtype != y.dtype or x.shape != y.shape:
            return f"output {i}: {dtype_name(x.dtype)}{list(x.shape)} against {dtype_name(y.dtype)}{list(y.shape)}"
        same = x == y
        if x.is_floating_point() or x.is_complex():
            same |= torch.isnan(x) & torch.isnan(y)
        if not bool(same.all()):
            worst = (x.double() - y.double()).abs().nan_to_num(float("inf")).max()
            return f"output {i}: {int((~same).sum())} element(s) differ, max abs {float(worst):.3g}"
    return ""


class AccuracyOps(WorkerCore):
    """Steps `accuracy_trace` and `accuracy_compare`."""

    def op_accuracy_trace(self, step: dict[str, Any], entry: dict[str, Any]) -> None:
        """Run the diagnostic package in `step["scratch"]` (where the printer saves), read its
        manifest, and record per launch each output's error against its eager FX node."""
        package, model, scratch = step["package"], step.get("model", "model"), step["scratch"]
        os.makedirs(scratch, exist_ok=True)
        args, kwargs = self.get_inputs(entry)
        self.phase(entry, "load")
        runner = load_direct(package, model, self.index)
        self.phase(entry, "call")
        manifest = os.path.join(scratch, "printer.log")
        here = os.getcwd()
        seed = int(self.job.get("seed") or 0)
        os.chdir(scratch)
        try:
            torch.manual_seed(seed)
            with stdout_to(manifest), torch.no_grad():
                compiled = runner(*args, **kwargs)
        finally:
            os.chdir(here)
        wrapper, kernel_text, provenance = model_members(package, model)
        found = kernelmap.launches(wrapper, kernel_text)
        with open(manifest, errors="replace") as f:
            paths = kernelmap.saved_paths(f.read())
        files = kernelmap.match_manifest(found, paths)
        entry["saved"] = len(paths)
        if files is None:
            raise StepError(
                f"the run printed {len(paths)} saved tensor(s), the wrapper has "
                f"{sum(len(x.saved) for x in found)} saves: the manifest cannot be matched"
            )
        self.record_launches(entry, Traced(compiled, found, files, provenance), args, kwargs)

    def op_accuracy_trace_jit(self, step: dict[str, Any], entry: dict[str, Any]) -> None:
        """The same record from Inductor's Python-wrapper compile of the program (jit_trace.py:
        no C++ wrapper to build), used only when its outputs are bit for bit the deployed
        package's `step["deployed"]` on the same inputs; StepError otherwise."""
        args, kwargs = self.get_inputs(entry)
        seed = int(self.job.get("seed") or 0)
        configs = dict(step.get("inductor_configs") or {})  # the check's, validated there
        flat = flat_inputs(self.get_ep().module(), args, kwargs)
        self.phase(entry, "compile")
        traced = trace_program(
            self.get_ep().module(), flat, configs, step["scratch"], seed,
            lambda name: self.phase(entry, name),
        )  # fmt: skip
        self.phase(entry, "deployed")
        runner = load_direct(step["deployed"], step.get("deployed_model", "model"), self.index)
        torch.manual_seed(seed)
        with torch.no_grad():
            shipped = runner(*args, **kwargs)
        differs = bitwise_difference(traced.compiled, shipped)
        if differs:
            raise StepError(
                f"the Python-wrapper compile is not the deployed package bit for bit ({differs})"
            )
        self.record_launches(entry, traced, args, kwargs)

    def record_launches(
        self, entry: dict[str, Any], traced: Traced, args: Any, kwargs: Any
    ) -> None:
        """Each launch's outputs against its eager FX node, the run's outputs against eager,
        and both sides against fp64, into `entry`."""
        compiled, found, files, provenance = (
            traced.compiled, traced.launches, traced.files, traced.provenance
        )  # fmt: skip
        seed = int(self.job.get("seed") or 0)
        self.phase(entry, "eager")
        gm = self.eager_module()
        wanted = {n for info in provenance.values() for n in info.get("pre_grad_nodes") or []}
        order = {node.name: i for i, node in enumerate(gm.graph.nodes)}
        torch.manual_seed(seed)
        values = self._eager_values(gm, args, kwargs, wanted)
        rtol, atol = self.job.get("rtol"), self.job.get("atol")
        eager_out = values.pop("__output__")
        entry["reproduced"] = compare_outputs(compiled, eager_out, rtol, atol)
        by_name = {node.name: node for node in gm.graph.nodes}
        records = []
        complete_in = last_launch_of_nodes(found, provenance)
        for i, (launch, saved) in enumerate(zip(found, files)):
            info = provenance.get(launch.handle or "", {})
            nodes = [n for n in info.get("pre_grad_nodes") or [] if n in order]
            nodes.sort(key=lambda n: order[n])
            complete = [n for n in nodes if complete_in.get(n) == i]
            records.append(
                {
                    "kernel": launch.kernel,
                    "handle": launch.handle,
                    "nodes": nodes,
                    "source": [_frame(t) for t in info.get("stack_traces") or []][:4],
                    "outputs_from": launch.how,
                    "inputs": [a for a in launch.args if a not in launch.outputs],
                    "input_nonfinite": _input_nonfinite(launch, saved),
                    "outputs": [
                        _compare_output(arg, saved.get(arg), complete, values, rtol, atol)
                        for arg in launch.outputs
                    ],
                    "facts": node_facts([by_name[n] for n in nodes]),
                }
            )
        entry["launches"] = records
        entry["graph_facts"] = node_facts(list(gm.graph.nodes))
        entry["torch"] = torch.__version__
        entry["eager_tf32"] = tf32_state()
        self.phase(entry, "fp64")
        entry["rmse"] = self._fp64(gm, args, kwargs, compiled, eager_out)

    def op_accuracy_precision(self, step: dict[str, Any], entry: dict[str, Any]) -> None:
        """Set TF32 for this worker's later steps (a compile decides it for Triton matmul and
        convolution templates; eager and extern cuBLAS/cuDNN calls read it when they run):
        `tf32` True or False for CUDA fp32 matmuls and cuDNN convolutions, None: back to the
        process's own settings."""
        global _PROCESS_TF32
        if _PROCESS_TF32 is None:
            _PROCESS_TF32 = (torch.get_float32_matmul_precision(), torch.backends.cudnn.allow_tf32)
        want = step.get("tf32")
        if want is None:
            matmul, conv = _PROCESS_TF32
        else:
            matmul, conv = ("high" if want else "highest"), bool(want)
        torch.set_float32_matmul_precision(matmul)
        torch.backends.cudnn.allow_tf32 = conv
        entry["tf32"] = tf32_state()

    def op_accuracy_compare(self, step: dict[str, Any], entry: dict[str, Any]) -> None:
        """Load a cause-ladder rebuild, call it and the ExportedProgram eagerly, each after
        seeding torch's generator alike (an RNG op then draws the same numbers on both sides
        when the rebuild uses ATen's RNG), and compare their outputs."""
        args, kwargs = self.get_inputs(entry)
        self.phase(entry, "load")
        runner = load_direct(step["package"], step.get("model", "model"), self.index)
        seed = int(self.job.get("seed") or 0)
        self.phase(entry, "call")
        torch.manual_seed(seed)
        with torch.no_grad():
            compiled = runner(*args, **kwargs)
        self.phase(entry, "eager")
        torch.manual_seed(seed)
        eager = self.call_eager(args, kwargs)
        entry.update(compare_outputs(compiled, eager, self.job.get("rtol"), self.job.get("atol")))

    def _eager_values(self, gm: Any, args: Any, kwargs: Any, wanted: set[str]) -> dict[str, Any]:
        """The eager value of every FX node in `wanted` (and `__output__`: the outputs)."""
        values: dict[str, Any] = {}

        class Recording(torch.fx.Interpreter):
            def run_node(self, n: Any) -> Any:
                out = super().run_node(n)
                if n.name in wanted and len(values) < MAX_NODES_RECORDED:
                    values[n.name] = out
                return out

        with torch.no_grad():
            values["__output__"] = Recording(gm).run(*flat_inputs(gm, args, kwargs))
        return values

    def _fp64(self, gm: Any, args: Any, kwargs: Any, compiled: Any, eager: Any) -> dict[str, Any]:
        """RMSE of the compiled and the eager outputs against the program run in fp64."""
        try:
            wide = copy.deepcopy(gm).to(torch.float64)
            with torch.no_grad():
                ref = wide(*to_fp64(tuple(args)), **to_fp64(dict(kwargs)))
        except Exception as exc:  # an op without fp64 support, a dtype assert in the graph
            return {"error": f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"}
        return {"compiled": rmse(compiled, ref), "eager": rmse(eager, ref)}


def _frame(trace: str) -> str:
    """`file:line code` of a stack trace's first frame."""
    lines = [line.strip() for line in str(trace).splitlines() if line.strip()]
    head = re.match(r'File "(?P<file>[^"]+)", line (?P<line>\d+)', lines[0]) if lines else None
    if head is None:
        return lines[0][:200] if lines else ""
    code = lines[1] if len(lines) > 1 and not lines[1].startswith("File ") else ""
    return f"{head.group('file')}:{head.group('line')} {code}".strip()[:300]


def _load(path: str | None) -> Any:
    if not path or not os.path.isfile(path):
        return None
    return torch.load(path, weights_only=True, map_location="cpu")


def _input_nonfinite(launch: kernelmap.Launch, saved: dict[str, str]) -> int:
    """NaN and Inf in the floating inputs of a launch as it read them (before_launch copies)."""
    count = 0
    for arg in launch.args:
        if arg in launch.outputs:
            continue
        t = _load(saved.get(f"before:{arg}"))
        if isinstance(t, torch.Tensor) and t.is_floating_point():
            count += int((~torch.isfinite(t)).sum())
    return count


def _compare_output(
    arg: str,
    path: str | None,
    nodes: list[str],
    values: dict[str, Any],
    rtol: float | None,
    atol: float | None,
) -> dict[str, Any]:
    """One output argument against the last of `nodes` whose eager value has its shape and
    dtype; `node` None (with `why`) when none has."""
    got = _load(path)
    if not isinstance(got, torch.Tensor):
        why = "overwritten by a later launch" if path is None else "not saved"
        return {"arg": arg, "node": None, "why": why}
    for name in reversed(nodes):
        want = values.get(name)
        if (
            isinstance(want, torch.Tensor)
            and want.dtype == got.dtype
            and tuple(want.shape) == tuple(got.shape)
        ):
            rec = compare_leaf(0, got, want.detach().cpu(), rtol, atol)
            keep = ("dtype", "shape", "numel", "mismatches", "max_abs", "max_rel")
            out = {"arg": arg, "node": name, **{k: rec.get(k) for k in keep}}
            out["nonfinite"] = int(rec.get("nan") or 0) + int(rec.get("inf") or 0)
            out["eager_nonfinite"] = int(rec.get("eager_nan") or 0) + int(rec.get("eager_inf") or 0)
            return out
    shape = f"{dtype_name(got.dtype)}{list(got.shape)}"
    nonfinite = int((~torch.isfinite(got)).sum()) if got.is_floating_point() else 0
    why = f"no FX node of the kernel is {shape}"
    return {"arg": arg, "node": None, "why": why, "nonfinite": nonfinite}
