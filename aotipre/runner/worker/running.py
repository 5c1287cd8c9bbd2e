"""The load, run and compare steps: the compiled model loaded (as torch's loaders do, timed, or
on another GPU) and called, the ExportedProgram called eagerly, outputs compared; state across
calls and weight swaps on fresh copies of the compiled model."""

from __future__ import annotations

import contextlib
import inspect
import io
import time
from typing import Any

import torch
import torch.utils._pytree as pytree

from .coldstart import DIRECT_HOW, measure_load, memory_snapshot
from .compare import compare_leaf, compare_outputs
from .core import WorkerCore
from .inputs import _detached, _state_summary, flat_tensors, tensor_summary, to_device
from .loading import (
    StateRunner,
    _so_names,
    load_direct,
    load_package_like_torch,
    load_pt2_failures,
    mapped_shared_objects,
    probed_vec_isa,
    read_member,
    read_weights_file,
    same_as_load_package,
)
from .protocol import StepError, first_error_line, not_available


class RunOps(WorkerCore):
    """Steps `load`, `index_run`, `run`, `disk_weights_run`, `eager`, `compare`, `state` and
    `weights`."""

    def op_load(self, step: dict[str, Any], entry: dict[str, Any]) -> None:
        package = step.get("package") or self.job["package"]
        model = step.get("model") or self.job.get("aoti_model") or self.job["model"]
        want_ep = bool(step.get("with_ep")) and self.ep is None
        failures: list[str] = []
        runner, ep, how = self._load(step, entry, package, model, want_ep, failures)
        self.runner = runner
        self.called.discard("runner")
        self.loaded = (package, model)
        entry["how"] = how
        if failures:
            entry["fallback"] = failures[0]
        names = _so_names(package, model)
        if names:
            entry["mapped"] = mapped_shared_objects(names)
        with contextlib.suppress(Exception):
            entry["vec_isa"] = probed_vec_isa()
        entry["vec_isa_pinned"] = bool(self.rec.data.get("vec_isa_pinned"))
        if ep is not None:
            self.ep = self.move_ep(ep)
        with contextlib.suppress(Exception):
            entry["metadata"] = dict(runner.get_metadata())
        with contextlib.suppress(Exception):
            entry["constants"] = len(runner.get_constant_fqns())

    def _load(
        self,
        step: dict[str, Any],
        entry: dict[str, Any],
        package: str,
        model: str,
        want_ep: bool,
        failures: list[str],
    ) -> tuple[Any, Any, str]:
        direct = False
        if step.get("as_load_package") and not want_ep:
            # the host's probe is known (recorded, or answered earlier; its cost is recorded
            # or measured, or no perf stage reports it): a package that load_package would
            # load with the probe and the C++ loader alone is loaded with the C++ loader alone
            refused = same_as_load_package(package, model)
            direct = refused is None
            if refused is not None:
                entry["direct_refused"] = refused
        if step.get("measure"):
            runner, ep, how, entry["perf"] = measure_load(
                package, model, self.index, want_ep, self.device, failures, direct
            )
            return runner, ep, how
        if direct:
            return load_direct(package, model, self.index), None, DIRECT_HOW
        if step.get("direct") and not want_ep:
            return load_direct(package, model, self.index), None, "direct"
        import torch._inductor.package  # noqa: F401 - the loader load_pt2_failures watches

        with load_pt2_failures(failures):
            return load_package_like_torch(package, model, self.index, want_ep)

    def op_index_run(self, step: dict[str, Any], entry: dict[str, Any]) -> None:
        """Load the package with `device_index` (a second GPU) and run it there: where do the
        outputs live? (The Python loader, like aoti_load_package(..., device_index=N).)"""
        index = int(step["device_index"])
        package = step.get("package") or self.job["package"]
        model = step.get("model") or self.job.get("aoti_model") or self.job["model"]
        self.phase(entry, "load")
        runner, _, how = load_package_like_torch(package, model, index, False)
        entry["how"] = how
        args, kwargs = self.get_inputs(entry)
        args, kwargs = to_device((args, kwargs), f"cuda:{index}")
        self.phase(entry, "call")
        out = runner(*args, **kwargs)
        torch.cuda.synchronize(index)
        entry["outputs"] = [tensor_summary(t) for t in flat_tensors(out)]

    def op_run(self, step: dict[str, Any], entry: dict[str, Any]) -> None:
        args, kwargs = self.get_inputs(entry)
        entry["inputs"] = [tensor_summary(t) for t in flat_tensors((args, kwargs))]
        if self.compiled_start.names and self.runner is not None:  # outside the timing
            self.phase(entry, "initial_state")  # read from a copy never called (startstate.py)
            self.from_start(self.runner)
        self.phase(entry, "call")
        started = time.perf_counter()
        out = self.call_aoti(args, kwargs, fresh_state=False)
        if step.get("measure"):
            entry["perf"] = {
                "call_s": time.perf_counter() - started,
                "memory_after": memory_snapshot(self.device),
            }
        entry["outputs"] = [tensor_summary(t) for t in flat_tensors(out)]
        self.save(step.get("save", "aoti.pt"), out, step.get("save"))

    def op_disk_weights_run(self, step: dict[str, Any], entry: dict[str, Any]) -> None:
        """A package whose weights live outside the .so, loaded the way that reads them
        (load_pt2(..., load_weights_from_disk=True)) and called on the sample inputs."""
        try:
            from torch.export.pt2_archive._package import load_pt2
        except ImportError:
            raise not_available("torch.export.pt2_archive._package.load_pt2") from None
        if "load_weights_from_disk" not in inspect.signature(load_pt2).parameters:
            raise not_available("load_pt2(..., load_weights_from_disk=True)")
        package = self.job["package"]
        model = self.job.get("aoti_model") or self.job["model"]
        args, kwargs = self.get_inputs(entry)
        self.phase(entry, "load")
        contents = load_pt2(package, device_index=self.index, load_weights_from_disk=True)
        if model not in contents.aoti_runners:
            raise StepError(f"load_pt2 found no compiled model {model!r}")
        self.phase(entry, "call")
        out = self._call(contents.aoti_runners[model], args, kwargs, fresh_state=False)  # fresh
        entry["outputs"] = [tensor_summary(t) for t in flat_tensors(out)]

    def op_eager(self, step: dict[str, Any], entry: dict[str, Any]) -> None:
        args, kwargs = self.get_inputs(entry)
        self.phase(entry, "load_exported_program")
        self.eager_module()
        self.phase(entry, "call")
        out = self.call_eager(args, kwargs)
        entry["outputs"] = [tensor_summary(t) for t in flat_tensors(out)]
        self.save(step.get("save", "eager.pt"), out, step.get("save"))

    def op_compare(self, step: dict[str, Any], entry: dict[str, Any]) -> None:
        a = self.outputs_of(step["a"])
        if step.get("b_file"):  # golden outputs (--expected), on the CPU like saved ones
            b = torch.load(step["b_file"], weights_only=True, map_location="cpu")
        elif step.get("b_member"):  # golden outputs a bundle stores
            data = read_member(self.job["source_package"], step["b_member"])
            b = torch.load(io.BytesIO(data), weights_only=True, map_location="cpu")
        else:
            b = self.outputs_of(step["b"])
        entry.update(compare_outputs(a, b, self.job.get("rtol"), self.job.get("atol")))

    def op_state(self, step: dict[str, Any], entry: dict[str, Any]) -> None:
        """State across calls: a fresh copy of the compiled model called `calls` times with the
        same inputs, its mutated buffers read after each call, and (with a reference) a fresh
        ExportedProgram module called the same way; each call's outputs and buffers compared."""
        if self.loaded is None:
            raise StepError("the model is not loaded (the load step did not succeed)")
        n = int(step.get("calls") or 3)
        names = [str(b) for b in step.get("buffers") or []]
        args, kwargs = self.get_inputs(entry)
        kwargs = self.ordered_kwargs(kwargs)
        self.phase(entry, "load")
        try:
            fresh: Any = StateRunner(*self.loaded, self.device, self.workdir)
            entry["how"] = "container runner"
        except Exception as exc:  # outputs still tell, the buffers do not
            fresh = None
            entry["buffers_unreadable"] = f"{type(exc).__name__}: {str(exc)[:300]}"
            direct = load_direct(*self.loaded, self.index)
        aoti: list[tuple[Any, dict[str, Any]]] = []
        for i in range(n):
            self.phase(entry, f"call {i + 1}")
            if fresh is not None:
                out: Any = fresh(args, kwargs)
                state = fresh.buffers(names)
            else:
                out, state = self._call(direct, args, kwargs, fresh_state=False), {}
            if self.device.startswith("cuda"):
                torch.cuda.synchronize()
            aoti.append((_detached(out), state))
        calls = [
            {
                "call": i + 1,
                "outputs": [_state_summary(t) for t in flat_tensors(out)],
                "buffers": {k: _state_summary(v) for k, v in state.items()},
            }
            for i, (out, state) in enumerate(aoti)
        ]
        for i in range(1, len(aoti)):  # buffers bitwise equal to the call before's
            before, after = aoti[i - 1][1], aoti[i][1]
            calls[i]["buffers_unchanged"] = [
                k for k, v in after.items() if k in before and _bitwise_equal(before[k], v)
            ]
        entry["calls"] = calls
        if not step.get("reference"):
            return
        self.phase(entry, "load_exported_program")
        module = self.fresh_ep().module()
        own = dict(module.named_buffers())
        rtol, atol = self.job.get("rtol"), self.job.get("atol")
        for i, record in enumerate(calls):
            self.phase(entry, f"eager call {i + 1}")
            with torch.no_grad():
                out = module(*args, **kwargs)
            if self.device.startswith("cuda"):
                torch.cuda.synchronize()
            got, state = aoti[i]
            eager = [t for t in pytree.tree_leaves(_detached(out)) if isinstance(t, torch.Tensor)]
            mine = [t for t in pytree.tree_leaves(got) if isinstance(t, torch.Tensor)]
            record["compare"] = compare_outputs(mine, eager, rtol, atol)
            record["buffers_compare"] = {
                name: compare_leaf(0, state[name], own[name].detach().cpu(), rtol, atol)
                for name in names
                if name in state and name in own
            }
            record["eager_buffers"] = {
                name: _state_summary(own[name].detach().cpu()) for name in names if name in own
            }

    def op_weights(self, step: dict[str, Any], entry: dict[str, Any]) -> None:
        """A weight swap as a deployment applies it: a fresh copy of the compiled model, run
        on the inputs, its constants replaced with the file's tensors (load_constants keyed by
        state_dict names, check_full_update=True: what torch's load_weights_to_pt2_contents
        does), run again; with a reference, the ExportedProgram's module given the same weights
        (load_state_dict, strict=False) and run, and the outputs compared."""
        if self.loaded is None:
            raise StepError("the model is not loaded (the load step did not succeed)")
        args, kwargs = self.get_inputs(entry)
        self.phase(entry, "read_weights")
        tensors = read_weights_file(str(step["file"]), str(step.get("format")), self.device)
        self.phase(entry, "compiled_constants")
        try:  # the compiled values, to tell whether the swap should change anything
            compiled = StateRunner(*self.loaded, self.device, self.workdir).buffers(list(tensors))
        except Exception as exc:
            compiled = {}
            entry["compiled_unreadable"] = f"{type(exc).__name__}: {str(exc)[:300]}"
        entry["differing"] = [
            name
            for name, t in tensors.items()
            if name not in compiled
            or compiled[name].shape != t.shape
            or compiled[name].dtype != t.dtype
            or not torch.equal(compiled[name], t.detach().cpu())
        ]
        self.phase(entry, "load")
        fresh = load_direct(*self.loaded, self.index)
        before = _detached(self._call(fresh, args, kwargs))
        self.phase(entry, "swap")
        fresh.loader.load_constants(tensors, False, True)
        self.phase(entry, "call")
        after = _detached(self._call(fresh, args, kwargs))
        mine = [t for t in pytree.tree_leaves(after) if isinstance(t, torch.Tensor)]
        old = [t for t in pytree.tree_leaves(before) if isinstance(t, torch.Tensor)]
        entry["outputs"] = [tensor_summary(t) for t in mine]
        entry["changed"] = len(mine) != len(old) or any(
            a.shape != b.shape or not torch.equal(a, b) for a, b in zip(mine, old)
        )
        if not step.get("reference"):
            return
        self.phase(entry, "load_exported_program")
        module = self.fresh_ep().module()
        self.phase(entry, "reference_weights")
        try:
            result = module.load_state_dict(tensors, strict=False)
        except Exception as exc:  # a shape the module refuses: nothing to compare with
            entry["reference_refused"] = first_error_line(exc)
            return
        entry["reference_unexpected"] = list(result.unexpected_keys)
        entry["reference_missing"] = list(result.missing_keys)
        self.phase(entry, "eager_call")
        with torch.no_grad():
            out = module(*args, **self.ordered_kwargs(kwargs))
        if self.device.startswith("cuda"):
            torch.cuda.synchronize()
        eager = [t for t in pytree.tree_leaves(_detached(out)) if isinstance(t, torch.Tensor)]
        entry["compare"] = compare_outputs(mine, eager, self.job.get("rtol"), self.job.get("atol"))


def _bitwise_equal(a: Any, b: Any) -> bool:
    """Whether two CPU tensors hold the same bytes (NaN included) with the same dtype and shape."""
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    try:
        return torch.equal(
            a.contiguous().reshape(-1).view(torch.uint8),
            b.contiguous().reshape(-1).view(torch.uint8),
        )
    except (RuntimeError, TypeError):  # a dtype without a byte view
        return bool(torch.equal(a, b))
