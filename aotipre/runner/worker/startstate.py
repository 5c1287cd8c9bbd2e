"""Every comparison from the same state: the buffers a stateful model mutates in forward (a step
counter, running statistics, a cache), on the compiled side and the eager side, put back to their
values as loaded before each compared call, so that a probe or a comparison sees what its inputs
cause and not how many calls came before (the state stage alone asks that question).

Compiled side: an AOTI copy's constants cannot be read through the loader, so the initial values
are read once from a copy never called (loading.StateRunner: the model's .so under torch's
container runner, `extract_constants_map`), and each loaded copy is given aotipre's own tensors
for those buffers (`load_constants(..., user_managed=True)`: the compiled code then reads and
writes them in place); putting them back is one `copy_` per buffer, no reload. Eager side: the
module's buffers, cloned when it is made, copied back the same way. A model that mutates nothing
(neither the compiled code nor the ExportedProgram) holds no names and pays one emptiness test
per call."""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

import torch


class CompiledStart:
    """The initial values of the compiled model's mutated buffers (read once, lazily) and, per
    loaded copy, the tensors that copy reads and writes them in."""

    def __init__(
        self, names: tuple[str, ...], read_initial: Callable[[list[str]], dict[str, Any]]
    ) -> None:
        self.names = names
        """The buffers (state_dict names) the compiled code writes; empty: nothing to do."""
        self._read_initial = read_initial
        self._initial: dict[str, Any] | None = None
        self.error: str | None = None
        """Why the initial values could not be read or given to a copy (the worker then loads
        a fresh copy for each compared call: core.WorkerCore.spent); None when all is well."""
        self._live: weakref.WeakKeyDictionary[Any, dict[str, Any]] = weakref.WeakKeyDictionary()

    def reset(self, model: Any, device: str) -> None:
        """Put `model`'s mutated buffers back to their initial values (the first time: give the
        copy aotipre's tensors for them, holding those values)."""
        if not self.names or self.error is not None:
            return
        live = self._live.get(model)
        if live is not None:
            for name, tensor in live.items():
                tensor.copy_(self._initial[name])  # type: ignore[index]
            return
        try:
            if self._initial is None:
                self._initial = {
                    k: v.to(device) for k, v in self._read_initial(list(self.names)).items()
                }
            live = {k: v.clone() for k, v in self._initial.items()}
            if live:
                model.loader.load_constants(live, False, False, True)
            self._live[model] = live
        except Exception as exc:
            self.error = f"{type(exc).__name__}: {str(exc)[:300]}"


class EagerStart:
    """The eager module's buffers as the module was made, before any call: all of them, for a
    stateful model (an op may write a buffer without saying so in its schema: the eager
    `aten.batch_norm` updates its running statistics), none for one that mutates nothing."""

    def __init__(self, ep: Any, module: Any, compiled_writes: tuple[str, ...] = ()) -> None:
        self.module = module
        stateful = bool(compiled_writes) or bool(mutated_in_program(ep))
        self.initial = (
            {name: b.detach().clone() for name, b in module.named_buffers()} if stateful else {}
        )

    def reset(self) -> None:
        """Copy the initial values back into the module's buffers (looked up by name: a buffer
        the module reassigned is found too)."""
        if not self.initial:
            return
        with torch.no_grad():
            for name, value in self.initial.items():
                self.module.get_buffer(name).copy_(value)


def mutated_in_program(ep: Any) -> list[str]:
    """The buffers an ExportedProgram mutates: its signature's buffer mutations, and the buffers
    an in-place op writes in its graph, directly or through views (torch 2.13's export keeps
    `aten.mul_(b_mean, ...)` on the buffer's placeholder, with no mutation output)."""
    signature = getattr(ep, "graph_signature", None)
    found = list((getattr(signature, "buffers_to_mutate", None) or {}).values())
    placeholders = dict(getattr(signature, "inputs_to_buffers", None) or {})
    for node in ep.graph.nodes:
        first = _first_alias(node)
        if first is None or not first.is_write:
            continue
        base = node.args[0]
        while _first_alias(base) is not None:  # a view or an in-place result: its input
            base = base.args[0]
        if getattr(base, "op", None) == "placeholder" and base.name in placeholders:
            found.append(placeholders[base.name])
    return found


def _first_alias(node: Any) -> Any:
    """The alias annotation of an op node's first argument (`Tensor(a!)` written in place,
    `Tensor(a)` a view of it), or None."""
    schema = getattr(getattr(node, "target", None), "_schema", None)
    if getattr(node, "op", None) != "call_function" or schema is None or not node.args:
        return None
    if not schema.arguments or not hasattr(node.args[0], "op"):
        return None
    return schema.arguments[0].alias_info
