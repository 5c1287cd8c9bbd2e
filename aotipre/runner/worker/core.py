"""One job in the worker: its state (the loaded model, the ExportedProgram, inputs, outputs),
the step loop (per-step log, watchdog and record), and what every step family shares (calling the
model, compiled or eager). The families add their `op_*` steps as subclasses (see job.py)."""

from __future__ import annotations

import contextlib
import faulthandler
import gc
import json
import os
import time
from typing import Any

import torch
import torch.utils._pytree as pytree

from .inputs import lay_out_as_compiled, load_inputs, to_device
from .loading import (
    StateRunner,
    as_archive,
    device_index,
    load_direct,
    load_exported_program,
    pin_vec_isa_on_import,
    read_weights_file,
)
from .protocol import (
    CHECK_INPUTS_ENV,
    MARKER,
    CustomOpsFailed,
    InputsFailed,
    Recorder,
    StepError,
    StepLog,
    exception_info,
)
from .startstate import CompiledStart, EagerStart


class WorkerCore:
    """A job's state and step loop; `run` calls `op_<step op>` of the composed Worker."""

    def __init__(self, job: dict[str, Any], recorder: Recorder, real_fd: int) -> None:
        self.job = job
        self.rec = recorder
        self.real_fd = real_fd
        self.device: str = job["device"]
        self.index = device_index(self.device) if self.device.startswith("cuda") else -1
        self.workdir: str = job["workdir"]
        self.tag: str = job.get("tag", "job")
        self.runner: Any = None
        self.loaded: tuple[str, str] | None = None
        """(package, model) of the last load."""
        self.unchecked: Any = None
        """A second copy of the model whose first run had AOTI_RUNTIME_CHECK_INPUTS unset (what
        a default deployment runs): see call_unchecked."""
        self.ep: Any = None
        self.ep_module: Any = None
        self.compiled_start = CompiledStart(
            tuple(job.get("mutated_buffers") or ()), self._initial_buffers
        )
        """The compiled model's mutated buffers put back before each compared call."""
        self.eager_start: EagerStart | None = None
        """The eager module's, likewise (made with the module)."""
        self.called: set[str] = set()
        """The compiled copies ("runner", "unchecked") called since they were loaded: where the
        initial state cannot be put back (compiled_start.error), such a copy is replaced by a
        fresh one before the next compared call."""
        self.ep_error: Exception | None = None
        self.inputs: tuple[tuple[Any, ...], dict[str, Any]] | None = None
        """The inputs every step calls the model with (tensors laid out as compiled)."""
        self.given: tuple[tuple[Any, ...], dict[str, Any]] | None = None
        """The inputs as the sample holds them (its own layouts)."""
        self.outputs: dict[str, Any] = {}
        self.step_ids = {step["id"] for step in job["steps"]}

    # -- helpers

    def marker(self, text: str) -> None:
        with contextlib.suppress(OSError):
            os.write(self.real_fd, f"{MARKER} {text}\n".encode())

    def path(self, name: str) -> str:
        return os.path.join(self.workdir, name)

    def phase(self, entry: dict[str, Any], name: str) -> None:
        """Record what the step is doing now (also in `current`, in case the process dies), and
        in `phase_at` when it first entered each phase (seconds into the step: where its time
        went)."""
        entry["phase"] = name
        current = self.rec.data.get("current")
        if isinstance(current, dict):
            at = entry.setdefault("phase_at", {})
            at.setdefault(name, round(time.time() - float(current.get("started") or 0), 3))
            current["phase"] = name
            self.rec.flush()

    def get_inputs(self, entry: dict[str, Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """The inputs on the device, each tensor the sample lays out otherwise than compiled
        copied into the compiled layout (the spec's `compiled_strides`)."""
        if self.inputs is None:
            given = self.inputs_as_given(entry)
            try:
                self.inputs = lay_out_as_compiled(
                    given, self.job["inputs"].get("compiled_strides") or []
                )
            except Exception as exc:
                raise InputsFailed(f"{type(exc).__name__}: {exc}") from exc
        return self.inputs

    def inputs_as_given(self, entry: dict[str, Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """The inputs on the device in the sample's own layouts."""
        if self.given is None:
            self.phase(entry, "inputs")
            try:
                args, kwargs = load_inputs(self.job["inputs"], self.job["source_package"])
                self.given = to_device((args, kwargs), self.device)
            except Exception as exc:
                raise InputsFailed(f"{type(exc).__name__}: {exc}") from exc
        return self.given

    def get_ep(self) -> Any:
        if self.ep is None:
            if self.ep_error is not None:
                # the first failure again, as it was: each step that needs the program (the
                # c_shims listing, then the compile) reports torch's own error, which the
                # stages classify (a custom op not registered: AOT121)
                raise self.ep_error
            try:
                source = self.job.get("ep_package") or self.job["source_package"]
                ep = load_exported_program(
                    as_archive(source, self.workdir), self.job.get("ep_model") or self.job["model"]
                )
            except Exception as exc:
                self.ep_error = exc
                raise
            self.ep = self.move_ep(ep)
            if self.job.get("ep_weights"):
                self.swap_into_program(self.ep, self.job["ep_weights"])
        return self.ep

    def swap_into_program(self, ep: Any, weights: dict[str, str]) -> None:
        """Copy a weights file's tensors into the ExportedProgram's state (the job's
        `ep_weights`: accuracy triage of a difference after a weight swap), so that its rebuilds
        and its eager runs carry the swapped weights; StepError for a name or shape it lacks."""
        tensors = read_weights_file(weights["file"], weights.get("format", ""), self.device)
        for name, tensor in tensors.items():
            held = ep.state_dict.get(name, ep.constants.get(name))
            if not isinstance(held, torch.Tensor):
                raise StepError(f"the ExportedProgram has no state tensor {name!r} to swap")
            if held.shape != tensor.shape or held.dtype != tensor.dtype:
                raise StepError(
                    f"the ExportedProgram's {name!r} is {held.dtype}{list(held.shape)}, the "
                    f"weights file's {tensor.dtype}{list(tensor.shape)}"
                )
            with torch.no_grad():
                held.copy_(tensor)

    def move_ep(self, ep: Any) -> Any:
        target = torch.device(self.device).type
        devices = {
            t.device.type
            for t in list(ep.state_dict.values()) + list(ep.constants.values())
            if isinstance(t, torch.Tensor)
        }
        if devices and devices != {target}:
            from torch.export.passes import move_to_device_pass

            return move_to_device_pass(ep, self.device)
        return ep

    def fresh_ep(self) -> Any:
        """Another copy of the reference ExportedProgram, on the device: for steps that change
        its buffers or weights (state, weights), which the eager step's copy must not see."""
        source = self.job.get("ep_package") or self.job["source_package"]
        name = self.job.get("ep_model") or self.job["model"]
        return self.move_ep(load_exported_program(as_archive(source, self.workdir), name))

    def eager_module(self) -> Any:
        if self.ep_module is None:
            self.ep_module = self.get_ep().module()
            self.eager_start = EagerStart(self.ep, self.ep_module, self.compiled_start.names)
        return self.ep_module

    def _initial_buffers(self, names: list[str]) -> dict[str, Any]:
        """The compiled model's buffers `names` as loaded, from a copy never called."""
        if self.loaded is None:
            raise StepError("the model is not loaded (the load step did not succeed)")
        return StateRunner(*self.loaded, self.device, self.workdir).buffers(names)

    def from_start(self, model: Any) -> None:
        """Put a compiled copy's mutated buffers back to their initial values, so that each
        comparison sees the state a fresh copy has (startstate.py). Where that fails, the
        first failure is kept in the result's `start_state_error` and the callers load a fresh
        copy instead (`spent`): slower (a load per compared call), never a call from a state
        that earlier calls left."""
        self.compiled_start.reset(model, self.device)
        if self.compiled_start.error and "start_state_error" not in self.rec.data:
            self.rec.data["start_state_error"] = self.compiled_start.error
            self.rec.data["start_state_route"] = "a fresh copy loaded for each compared call"

    def spent(self, copy: str) -> bool:
        """Whether the compiled copy `copy` ("runner" or "unchecked") must be loaded again
        before a compared call: it was called, and its state cannot be put back."""
        return self.compiled_start.error is not None and copy in self.called

    def save(self, key: str, value: Any, filename: str | None) -> None:
        self.outputs[key] = value
        if filename:
            cpu = pytree.tree_map(
                lambda x: x.detach().cpu() if isinstance(x, torch.Tensor) else x, value
            )
            torch.save(cpu, self.path(filename))

    def outputs_of(self, key: str) -> Any:
        if key in self.outputs:
            return self.outputs[key]
        path = self.path(key)
        if not os.path.exists(path):
            raise StepError(f"no saved outputs {key!r} (the step producing them did not finish)")
        value = torch.load(path, weights_only=True, map_location="cpu")
        self.outputs[key] = value
        return value

    # -- the loop

    def run(self) -> None:
        self.rec.data["cuda_available"] = torch.cuda.is_available()
        if self.job.get("vec_isa") is not None:
            # when a step imports torch's probe, not before (a direct load never does)
            pin_vec_isa_on_import(list(self.job["vec_isa"]), self._pinned)
        self.rec.flush()
        timeout = float(self.job.get("step_timeout_s", 300))
        compile_timeout = float(self.job.get("compile_timeout_s", timeout))
        for step in self.job["steps"]:
            sid = step["id"]
            log_path = self.path(f"{self.tag}.{sid.replace(':', '_')}.log")
            self.rec.data["current"] = {"id": sid, "log": log_path, "started": time.time()}
            self.rec.flush()
            self.marker(f"start {sid}")
            limit = compile_timeout if step["op"] == "compile" else timeout
            limit = float(step.get("timeout_s") or limit)
            entry: dict[str, Any] = {"op": step["op"]}
            unmet = [
                r
                for r in step.get("requires", ())
                if r in self.step_ids and self.rec.data["steps"].get(r, {}).get("status") != "ok"
            ]
            if unmet:
                entry.update(status="skipped", reason=f"needs {', '.join(unmet)}", duration_s=0.0)
                self.rec.data["steps"][sid] = entry
                self.rec.data["current"] = None
                self.rec.flush()
                continue
            started = time.monotonic()
            with StepLog(log_path, self.real_fd, bool(self.job.get("capture_stdout"))) as log:
                faulthandler.dump_traceback_later(limit, exit=True)
                try:
                    self.require_custom_ops()
                    getattr(self, f"op_{step['op']}")(step, entry)
                    entry.setdefault("status", "ok")
                except StepError as exc:
                    entry.update(
                        status="error", error={"type": type(exc).__name__, "message": str(exc)}
                    )
                except Exception as exc:
                    entry.update(status="error", error=exception_info(exc))
                finally:
                    faulthandler.cancel_dump_traceback_later()
            entry["duration_s"] = time.monotonic() - started
            entry["log"] = log.text
            self.rec.data["steps"][sid] = entry
            self.rec.data["current"] = None
            self.rec.flush()
            self.marker(f"end {sid} {entry['status']}")
            if entry["status"] == "error" and self.must_stop(step, entry):
                self.rec.data["stopped"] = {
                    "after": sid,
                    "reason": "a CUDA error may have poisoned the CUDA context",
                }
                break
            if entry["status"] == "error" and step["op"] in ("compile", "load"):
                self.rec.data["stopped"] = {"after": sid, "reason": f"{step['op']} failed"}
                break
        self.rec.data["done"] = True
        self.rec.flush()

    def _pinned(self, done: bool) -> None:
        self.rec.data["vec_isa_pinned"] = done

    def must_stop(self, step: dict[str, Any], entry: dict[str, Any]) -> bool:
        if not self.device.startswith("cuda") or step["op"] not in (
            "run",
            "eager",
            "probe",
            "sample_layout",
        ):
            return False
        text = json.dumps(entry.get("error")) + entry.get("log", "")
        return "input_handles[" not in text and "kwarg keyword mismatch" not in text

    def require_custom_ops(self) -> None:
        """Fail the step when registering the custom ops failed at start-up."""
        info = self.rec.data.get("custom_ops")
        if isinstance(info, dict) and info.get("error"):
            raise CustomOpsFailed(f"registering custom operators failed: {info['error']}")

    # -- calling the model

    def call_aoti(
        self, args: tuple[Any, ...], kwargs: dict[str, Any], *, fresh_state: bool = True
    ) -> Any:
        """Call the loaded model; with `fresh_state` (every comparing step) from the state it
        was loaded in, else (perf's timed calls) from wherever the calls before left it."""
        if self.runner is None:
            raise StepError("the model is not loaded (the load step did not succeed)")
        if fresh_state:
            self.from_start(self.runner)
            if self.spent("runner"):
                assert self.loaded is not None
                self.runner = None
                gc.collect()
                self.runner = load_direct(*self.loaded, self.index)
                self.called.discard("runner")
        self.called.add("runner")
        out = self.runner(*args, **kwargs)
        if self.device.startswith("cuda"):
            torch.cuda.synchronize()
        return out

    def call_unchecked(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """Call the model as a default deployment does, without the runtime input check.

        The generated code reads AOTI_RUNTIME_CHECK_INPUTS once per loaded .so, at its first
        run (a function-local static), and every loader extracts the package into a folder of
        its own, so a second loader is a second .so: its first run happens here with the
        variable unset. The checked copy is released first (one copy of the constants)."""
        if self.unchecked is not None and self.spent("unchecked"):
            self.unchecked = None  # its state cannot be put back: a fresh copy (from_start)
            gc.collect()
        self.called.add("unchecked")
        if self.unchecked is None:
            if self.loaded is None:
                raise StepError("the model is not loaded (the load step did not succeed)")
            self.runner = None
            gc.collect()
            if self.device.startswith("cuda"):
                torch.cuda.empty_cache()
            self.unchecked = load_direct(*self.loaded, self.index)
            saved = os.environ.pop(CHECK_INPUTS_ENV, None)
            try:
                return self._call(self.unchecked, args, kwargs)
            finally:
                if saved is not None:
                    os.environ[CHECK_INPUTS_ENV] = saved
        return self._call(self.unchecked, args, kwargs)

    def _call(
        self,
        model: Any,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        *,
        fresh_state: bool = True,
    ) -> Any:
        """Call a compiled copy, from its initial state unless `fresh_state` is False (the
        state stage's calls, which carry state on purpose)."""
        if fresh_state:
            self.from_start(model)
        out = model(*args, **kwargs)
        if self.device.startswith("cuda"):
            torch.cuda.synchronize()
        return out

    def call_eager(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        module = self.eager_module()
        if self.eager_start is not None:
            self.eager_start.reset()
        with torch.no_grad():
            out = module(*args, **kwargs)
        if self.device.startswith("cuda"):
            torch.cuda.synchronize()
        return out

    def ordered_kwargs(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        """kwargs in the order of the model's in_spec (the order AOTI flattens them in)."""
        if self.runner is None or not kwargs:
            return kwargs
        try:
            from torch.export._tree_utils import reorder_kwargs

            in_spec = pytree.treespec_loads(self.runner.loader.get_call_spec()[0])
            return reorder_kwargs(kwargs, in_spec)
        except Exception:
            return kwargs
