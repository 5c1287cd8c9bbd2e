"""worker/startstate.py on in-memory programs and a stand-in loader: what is put back before a
compared call, and that a model that mutates nothing holds nothing."""

from __future__ import annotations

from typing import Any

import torch

from aotipre.runner.worker.startstate import CompiledStart, EagerStart, mutated_in_program


class Stateful(torch.nn.Module):
    """A counter, a slot of a cache written through a view, and BatchNorm's running stats
    (which `aten.batch_norm` updates without saying so in its schema)."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("calls", torch.tensor(0, dtype=torch.int64))
        self.register_buffer("cache", torch.zeros(3, 4))
        self.bn = torch.nn.BatchNorm1d(4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls.add_(1)
        self.cache[1] = x[0]
        return self.bn(x) + self.cache.sum(0) * self.calls


class Stateless(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("table", torch.ones(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.table


def test_the_eager_module_starts_every_call_from_its_state_as_made() -> None:
    x = torch.randn(5, 4, generator=torch.Generator().manual_seed(0))
    ep = torch.export.export(Stateful().train(), (x,))
    assert {"calls", "cache"} <= set(mutated_in_program(ep))
    module = ep.module()
    start = EagerStart(ep, module)
    first = module(x)
    assert not torch.equal(module(x), first)  # plain torch: the state advanced
    start.reset()
    assert torch.equal(module(x), first)
    start.reset()
    fresh = dict(ep.module().named_buffers())  # every buffer, the running stats included
    for name, value in module.named_buffers():
        assert torch.equal(value, fresh[name]), name


def test_a_model_that_mutates_nothing_holds_nothing() -> None:
    x = torch.randn(2, 4)
    ep = torch.export.export(Stateless(), (x,))
    assert mutated_in_program(ep) == []
    start = EagerStart(ep, ep.module())
    assert start.initial == {}
    read: list[Any] = []
    compiled = CompiledStart((), read.append)
    compiled.reset(object(), "cpu")  # no loader needed, nothing read
    assert read == [] and compiled.error is None


class Loader:
    """Stands in for AOTIModelPackageLoader: load_constants records the tensors it is given."""

    def __init__(self) -> None:
        self.given: list[tuple[dict[str, Any], tuple[Any, ...]]] = []

    def load_constants(self, tensors: dict[str, Any], *flags: Any) -> None:
        self.given.append((tensors, flags))


class Copy:
    def __init__(self) -> None:
        self.loader = Loader()


def test_a_compiled_copy_gets_its_own_buffers_once_and_they_are_put_back() -> None:
    reads: list[list[str]] = []

    def initial(names: list[str]) -> dict[str, Any]:
        reads.append(names)
        return {"calls": torch.tensor(0), "total": torch.zeros(())}

    start = CompiledStart(("calls", "total"), initial)
    a, b = Copy(), Copy()
    start.reset(a, "cpu")
    (live, flags), *more = a.loader.given
    assert not more and flags == (False, False, True)  # user-managed: the code writes them
    live["calls"].add_(3)  # what a call does
    start.reset(a, "cpu")
    assert int(live["calls"]) == 0 and len(a.loader.given) == 1
    start.reset(b, "cpu")  # a second copy: its own tensors, the values read once
    assert b.loader.given[0][0]["calls"] is not live["calls"]
    assert reads == [["calls", "total"]]


def test_initial_values_that_cannot_be_read_leave_the_calls_as_they_come() -> None:
    def fails(names: list[str]) -> dict[str, Any]:
        raise RuntimeError("no .so")

    start = CompiledStart(("calls",), fails)
    copy = Copy()
    start.reset(copy, "cpu")
    start.reset(copy, "cpu")
    assert start.error == "RuntimeError: no .so" and copy.loader.given == []
