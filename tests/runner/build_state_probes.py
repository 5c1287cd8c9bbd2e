"""Builds the stateful packages of test_state_probes_real.py through the public API and records
what plain torch does with them, in this fresh process, as facts.json (run as
`python build_state_probes.py OUT`).

`tally`: a call counter (int64) and a running total of the inputs' sums, both updated in place,
with a dynamic batch; the outputs depend on the input only through its sum, so its layout or
alignment cannot change them. `tally_bad`: the same model compiled with torch's
`cpp.inject_relu_bug_TESTING_ONLY="accuracy"` (the compiled relu adds 1): wrong at every size."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch


class Tally(torch.nn.Module):
    """A call counter and a running total, updated in place, and one weight."""

    def __init__(self) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(8, 16, generator=torch.Generator().manual_seed(1)))
        self.register_buffer("calls", torch.tensor(0, dtype=torch.int64))
        self.register_buffer("total", torch.zeros(()))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls.add_(1)
        s = x.sum()
        self.total.add_(s)
        return torch.relu(s * self.w + self.total * self.calls)


def transposed(t: torch.Tensor) -> torch.Tensor:
    """aotipre's layout probe: the same values with the last two dims swapped in memory."""
    return t.contiguous().transpose(-1, -2).contiguous().transpose(-1, -2)


def offset(t: torch.Tensor) -> torch.Tensor:
    """aotipre's offset probe: the same values one element into a larger buffer."""
    buf = torch.empty(t.numel() + 1, dtype=t.dtype)
    view = buf[1:].view(t.shape)
    view.copy_(t)
    return view


def diff(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).abs().max())


def main(out: Path) -> None:
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(8, 8, generator=gen)
    torch.save(((x,), {}), out / "inputs.pt")
    # the same values handed over transposed in memory (strides (1, 8)): the sample-layout run
    torch.save(((transposed(x),), {}), out / "inputs_transposed.pt")
    new_w = torch.randn(8, 16, generator=gen)
    torch.save({"w": new_w}, out / "weights.pt")
    batch = torch.export.Dim("batch", min=2, max=16)
    ep = torch.export.export(Tally(), (x,), dynamic_shapes=({0: batch},))
    torch.export.save(ep, str(out / "tally_ep.pt2"))
    for name, configs in (
        ("tally", {}),
        ("tally_bad", {"cpp.inject_relu_bug_TESTING_ONLY": "accuracy"}),
    ):
        torch._inductor.aoti_compile_and_package(
            ep, package_path=str(out / f"{name}.pt2"), inductor_configs=configs
        )

    def fresh_compiled(name: str, t: torch.Tensor) -> torch.Tensor:
        return torch._inductor.aoti_load_package(str(out / f"{name}.pt2"))(t)

    def fresh_eager(
        t: torch.Tensor, weights: dict[str, torch.Tensor] | None = None
    ) -> torch.Tensor:
        module = torch.export.load(str(out / "tally_ep.pt2")).module()
        if weights:
            module.load_state_dict(weights, strict=False)
        with torch.no_grad():
            return module(t)

    probes = {
        "size 2": torch.randn(2, 8, generator=gen),
        "size 16": torch.randn(16, 8, generator=gen),
        "sample": x,
        "transposed": transposed(x),
        "offset": offset(x),
    }
    facts: dict[str, object] = {
        # a fresh compiled copy and a fresh eager module, one call each, on each probe's input
        "fresh_vs_eager": {
            k: diff(fresh_compiled("tally", t), fresh_eager(t)) for k, t in probes.items()
        },
        "bad_fresh_vs_eager": {
            k: diff(fresh_compiled("tally_bad", t), fresh_eager(t)) for k, t in probes.items()
        },
        # the layout or alignment of the input, from the same (fresh) state
        "layout_vs_contiguous": {
            name: {
                k: diff(fresh_compiled(name, probes[k]), fresh_compiled(name, x))
                for k in ("transposed", "offset")
            }
            for name in ("tally", "tally_bad")
        },
    }
    copy = torch._inductor.aoti_load_package(str(out / "tally.pt2"))
    compiled_calls = [copy(x) for _ in range(3)]
    module = torch.export.load(str(out / "tally_ep.pt2")).module()
    with torch.no_grad():
        eager_calls = [module(x) for _ in range(3)]
    # one copy called again: the state advances on both sides
    facts["second_call_vs_first"] = {
        "compiled": diff(compiled_calls[1], compiled_calls[0]),
        "eager": diff(eager_calls[1], eager_calls[0]),
    }
    facts["one_copy_compiled_vs_eager"] = [diff(c, e) for c, e in zip(compiled_calls, eager_calls)]
    # the weight swap from a fresh state: the compiled copy's constants replaced, as aotipre does
    swapped = torch._inductor.aoti_load_package(str(out / "tally.pt2"))
    swapped.load_constants({"w": new_w}, check_full_update=True)
    facts["swapped_vs_eager"] = diff(swapped(x), fresh_eager(x, {"w": new_w}))
    (out / "facts.json").write_text(json.dumps(facts, indent=1))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
