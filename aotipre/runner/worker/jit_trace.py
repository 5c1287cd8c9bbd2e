"""Accuracy triage's fast route to each kernel's outputs: compile the ExportedProgram's module
with Inductor's Python wrapper (what `torch.compile` runs; no C++ wrapper to build, which is most
of a diagnostic AOTI build's time on CPU), run it once under a line tracer that saves each
launch's tensor arguments before and after it, and hand back what the printer build's run gives
(Traced). The caller uses it only when the run's outputs are the deployed package's bit
for bit: then the kernels computed what the deployed ones compute.

What it relies on (torch 2.11-2.15): `compile_fx` resets provenance tracking's tables when it
returns (`debug.reset_provenance_globals`), so their content is read as the reset ends; the
wrapper module comes from `GraphLowering.compile_to_module` (the FX graph cache is off for this
compile, so the module is generated, with its provenance, every time); its `call` function puts
`# [Provenance debug handles] KERNEL:N` before each launch (kernelmap.python_launches)."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from types import CodeType, FrameType
from typing import Any

import torch
import torch.utils._pytree as pytree

from . import kernelmap
from .host import users_tempdir
from .protocol import StepError

PROVENANCE = {"trace.provenance_tracking_level": 1, "fx_graph_cache": False}
"""Configs of the Python-wrapper compile on top of the deployed package's: kernel -> FX node
provenance, and a generated (not cached) wrapper, which is where provenance is recorded."""


@dataclass
class Traced:
    """One instrumented run of the compiled program: its outputs, its launches in order, the
    files of each launch's saved arguments (`ARG`: after it, `before:ARG`: before it) and the
    provenance (kernel_information.json's mapping: `kernel:N` -> FX nodes)."""

    compiled: Any
    launches: list[kernelmap.Launch]
    files: list[dict[str, str]]
    provenance: dict[str, Any]


def trace_program(
    module: Any,
    flat: list[Any],
    configs: dict[str, Any],
    scratch: str,
    seed: int,
    phase: Callable[[str], None],
) -> Traced:
    """Compile `module` (a fresh `ep.module()`) with Inductor's Python wrapper and `configs`,
    call it on `flat` after seeding torch's generator with `seed`, saving each launch's
    arguments in `scratch`."""
    from torch._inductor.compile_fx import compile_fx

    os.makedirs(scratch, exist_ok=True)
    with (
        users_tempdir(),
        kept_provenance() as provenance,
        generated_modules() as modules,
        torch.no_grad(),
    ):
        compiled_fn = compile_fx(module, flat, config_patches={**configs, **PROVENANCE})
    if len(modules) != 1:
        raise StepError(f"the Python-wrapper compile generated {len(modules)} wrapper module(s)")
    wrapper = modules[0]
    path = str(getattr(wrapper, "__file__", "") or "")
    try:
        with open(path, encoding="utf-8") as f:
            source = f.read()
    except OSError as exc:
        raise StepError(f"the Python wrapper's source cannot be read: {exc}") from exc
    launches = kernelmap.python_launches(source)
    if not launches:
        raise StepError("the Python wrapper holds no launch with a provenance comment")
    phase("call")
    saver = LaunchSaver(launches, scratch, path)
    torch.manual_seed(seed)
    with torch.no_grad(), saver.tracing():
        out = compiled_fn(*flat)
    if saver.error:
        raise StepError(f"saving the launches' arguments failed: {saver.error}")
    out_spec = getattr(module, "_out_spec", None)
    leaves = pytree.tree_flatten(out)[0]
    if out_spec is not None and out_spec.num_leaves == len(leaves):
        out = pytree.tree_unflatten(leaves, out_spec)
    return Traced(out, launches, saver.files, provenance)


@contextlib.contextmanager
def kept_provenance() -> Iterator[dict[str, Any]]:
    """kernel_information.json's mapping of the compiles inside the block: read from torch's
    provenance tables when each compile's reset of them ends."""
    import torch._inductor.debug as inductor_debug

    kept: dict[str, Any] = {}
    original = inductor_debug.reset_provenance_globals

    @contextlib.contextmanager
    def keeping() -> Iterator[None]:
        with original():
            try:
                yield
            finally:
                kept.update(inductor_debug.create_kernel_information_json())

    inductor_debug.reset_provenance_globals = keeping
    try:
        yield kept
    finally:
        inductor_debug.reset_provenance_globals = original


@contextlib.contextmanager
def generated_modules() -> Iterator[list[Any]]:
    """The wrapper modules Inductor generates inside the block."""
    from torch._inductor.graph import GraphLowering

    found: list[Any] = []
    original = GraphLowering.compile_to_module

    def capture(self: Any, *args: Any, **kwargs: Any) -> Any:
        compiled = original(self, *args, **kwargs)
        found.append(compiled)
        return compiled

    GraphLowering.compile_to_module = capture  # type: ignore[method-assign]
    try:
        yield found
    finally:
        GraphLowering.compile_to_module = original  # type: ignore[method-assign]


class LaunchSaver:
    """A line tracer over the wrapper's `call`: at a launch's first line it saves the launch's
    tensor arguments (`before:ARG`), at the next line the wrapper runs (or its return) their
    values after it (`ARG`), each a copy of the view the launch saw, in its own file."""

    def __init__(self, launches: list[kernelmap.Launch], scratch: str, path: str) -> None:
        self.launches = launches
        self.scratch = scratch
        self.path = path
        self.starts = {launch.lines[0]: i for i, launch in enumerate(launches)}
        self.files: list[dict[str, str]] = [{} for _ in launches]
        self.pending: int | None = None
        self.error = ""

    @contextlib.contextmanager
    def tracing(self) -> Iterator[None]:
        previous = sys.gettrace()
        sys.settrace(self._global)
        try:
            yield
        finally:
            sys.settrace(previous)
        if self.pending is not None:
            self.error = self.error or "the run left a launch without its values after it"

    def _mine(self, code: CodeType) -> bool:
        return code.co_name == "call" and code.co_filename == self.path

    def _global(self, frame: FrameType, event: str, arg: Any) -> Any:
        return self._local if event == "call" and self._mine(frame.f_code) else None

    def _local(self, frame: FrameType, event: str, arg: Any) -> Any:
        if self.error:
            return None
        try:
            if event == "line":
                if self.pending is not None:
                    first, last = self.launches[self.pending].lines
                    if not first <= frame.f_lineno <= last:
                        self._save(frame, self.pending, after=True)
                        self.pending = None
                k = self.starts.get(frame.f_lineno)
                if k is not None and self.pending is None:
                    self._save(frame, k, after=False)
                    self.pending = k
            elif event == "return" and self.pending is not None:
                self._save(frame, self.pending, after=True)
                self.pending = None
        except Exception as exc:  # a full disk: the route fails, the printer build follows
            self.error = f"{type(exc).__name__}: {exc}"
            return None
        return self._local

    def _save(self, frame: FrameType, k: int, after: bool) -> None:
        launch = self.launches[k]
        names = launch.args if after else [a for a in launch.args if a not in launch.outputs]
        values = frame.f_locals
        for name in names:
            value = values.get(name)
            if not isinstance(value, torch.Tensor):
                continue
            key = name if after else f"before:{name}"
            file = os.path.join(self.scratch, f"{k}-{'after' if after else 'before'}-{name}.pt")
            torch.save(value.detach().clone(), file)
            self.files[k][key] = file
