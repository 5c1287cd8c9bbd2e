"""The probe step: the model called on inputs of other shapes (derived from the sample) or other
layouts, expected to accept or reject them, compared with the eager model or the sample's layout."""

from __future__ import annotations

from typing import Any

import torch
import torch.utils._pytree as pytree

from .compare import compare_outputs
from .core import WorkerCore
from .inputs import derive_tensor, flat_tensors, tensor_summary
from .protocol import StepError, exception_info


def transposed_layout(t: Any) -> Any:
    """The same shape and values with the last two dims swapped in memory (strides
    `(..., 1, rows)`): what a caller passing `x.T`-style views hands the model."""
    if not isinstance(t, torch.Tensor) or t.dim() < 2:
        raise StepError("a layout probe needs a tensor input of rank 2 or more")
    return t.contiguous().transpose(-1, -2).contiguous().transpose(-1, -2)


def offset_view(t: Any) -> Any:
    """The same values, contiguous, one element into a larger buffer (`buf[1:]`): storage
    offset 1, so not 16-byte aligned for any dtype under 16 bytes."""
    if not isinstance(t, torch.Tensor) or t.numel() == 0:
        raise StepError("an offset probe needs a tensor input with values")
    buf = torch.empty(t.numel() + 1, dtype=t.dtype, device=t.device)
    view = buf[1:].view(t.shape)
    view.copy_(t)
    return view


def _check_plan_indices(indices: Any, tensors: list[int]) -> None:
    """Refuse a probe plan that names a tensor input the inputs do not hold."""
    if indices and max(indices) >= len(tensors):
        raise StepError(
            f"the probe plan names tensor input {max(indices)}, the inputs hold {len(tensors)}"
        )


class ProbeOps(WorkerCore):
    """Steps `probe` and `sample_layout`."""

    def op_sample_layout(self, step: dict[str, Any], entry: dict[str, Any]) -> None:
        """The sample as given (tensors in their own layouts) through the model as a default
        deployment runs it, without the runtime check, compared with the same values laid out
        as compiled through the same copy of the model."""
        given = self.inputs_as_given(entry)
        compiled = self.get_inputs(entry)
        entry["inputs"] = [tensor_summary(t) for t in flat_tensors(given)]
        self.phase(entry, "call")
        try:
            out = self.call_unchecked(*given)
        except Exception as exc:
            entry["aoti_error"] = exception_info(exc)
            raise
        entry["outputs"] = [tensor_summary(t) for t in flat_tensors(out)]
        entry["outcome"] = "accepted"
        self.phase(entry, "reference")
        ref = self.call_unchecked(*compiled)
        entry["layout_compare"] = compare_outputs(
            out, ref, self.job.get("rtol"), self.job.get("atol")
        )

    def op_probe(self, step: dict[str, Any], entry: dict[str, Any]) -> None:
        args, kwargs = self.get_inputs(entry)
        leaves, spec = pytree.tree_flatten((args, self.ordered_kwargs(kwargs)))
        shapes = {int(k): v for k, v in step["shapes"].items()}
        tensors = [i for i, leaf in enumerate(leaves) if isinstance(leaf, torch.Tensor)]
        _check_plan_indices(shapes, tensors)
        gen = torch.Generator().manual_seed(int(self.job.get("seed", 0)) + 7919)
        new = list(leaves)
        for t_index, shape in shapes.items():
            leaf_i = tensors[t_index]
            new[leaf_i] = derive_tensor(leaves[leaf_i], list(shape), gen)
        layout = [int(t) for t in step.get("layout") or ()]
        _check_plan_indices(layout, tensors)
        for t_index in layout:
            new[tensors[t_index]] = transposed_layout(leaves[tensors[t_index]])
        offset = [int(t) for t in step.get("offset") or ()]
        _check_plan_indices(offset, tensors)
        for t_index in offset:
            new[tensors[t_index]] = offset_view(leaves[tensors[t_index]])
        p_args, p_kwargs = pytree.tree_unflatten(new, spec)
        entry["inputs"] = [tensor_summary(t) for t in flat_tensors((p_args, p_kwargs))]
        self.phase(entry, "call")
        unchecked = bool(step.get("unchecked"))
        call = self.call_unchecked if unchecked else self.call_aoti
        try:
            out = call(tuple(p_args), dict(p_kwargs))
        except Exception as exc:
            entry["aoti_error"] = exception_info(exc)
            clean = "input_handles[" in str(exc) or not self.device.startswith("cuda")
            if step.get("expect") == "reject" and clean:
                entry["outcome"] = "rejected"
                return
            raise  # on CUDA anything but the input check may have poisoned the context
        entry["outputs"] = [tensor_summary(t) for t in flat_tensors(out)]
        entry["outcome"] = "accepted"
        if layout or offset:
            # the reference: the same model on the same values, laid out as in the sample
            self.phase(entry, "reference")
            r_args, r_kwargs = pytree.tree_unflatten(leaves, spec)
            ref = call(tuple(r_args), dict(r_kwargs))
            entry["layout_compare"] = compare_outputs(
                out, ref, self.job.get("rtol"), self.job.get("atol")
            )
            return
        if unchecked:
            return  # past the range: no reference to compare with (the eager graph refuses it)
        if step.get("eager") and step.get("expect") != "reject":
            self.phase(entry, "eager")
            try:
                ref = self.call_eager(tuple(p_args), dict(p_kwargs))
            except Exception as exc:
                entry["eager_error"] = exception_info(exc)
                return
            entry["compare"] = compare_outputs(out, ref, self.job.get("rtol"), self.job.get("atol"))
