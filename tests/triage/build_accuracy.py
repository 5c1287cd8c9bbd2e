"""Builds the accuracy-triage fixtures in a fresh interpreter, as users build them
(torch.export.export, torch.export.save, torch._inductor.aoti_compile_and_package):
`python build_accuracy.py OUT_DIR KIND` writes OUT_DIR/KIND.pt2 (the ExportedProgram),
OUT_DIR/KIND_inputs.pt (`(args, kwargs)`), OUT_DIR/KIND_expected.pt (its eager outputs),
OUT_DIR/KIND_aoti.pt2 (AOTI code only) and
OUT_DIR/KIND_facts.json: what plain torch does with it in this fresh process (the compiled
package's largest error against eager, and with each config of `rebuilds`).

Kinds: `bf16` (linear -> a bf16 pointwise chain whose intermediate rounding matters -> softmax),
`nan` (a bf16 chain that is exactly 0 in fp32, then w / w: NaN only where compiled), `rng`
(x + rand_like(x)), `relu` (linear -> relu, fp32; torch's own
`cpp.inject_relu_bug_TESTING_ONLY="accuracy"` miscompiles it when given), `reduce` (an fp32
weighted sum over 65536 elements per row, `(x * w).sum(-1)` with w = 1e-3, on inputs of about
1000: Inductor's reduction order differs from ATen's by ~4e-4, which the all-fallback rebuild
closes). `reduce` also writes OUT_DIR/reduce_weights.pt (w = 1, a weight swap) and
OUT_DIR/reduce_swap_inputs.pt (inputs of about 1, on which the compiled sum agrees with eager
to ~1e-7 until those weights are swapped in), and its facts say what the swap does."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch


class Bf16Chain(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(16, 16).to(torch.bfloat16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.lin(x)
        z = (y + 100.0) - 100.0  # eager rounds y + 100 to bf16: steps of 0.5
        return torch.softmax(z * 4.0, dim=-1)


class Bf16Nan(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(16, 16).to(torch.bfloat16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.lin(x)
        w = ((y + 100.0) - 100.0) - y  # exactly 0 in fp32 for a bf16 y; eager's rounding is not
        return w / w


class Noisy(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + torch.rand_like(x)


class LinearRelu(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.lin(x)) * 2.0


class RowSum(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(torch.full((65536,), 1e-3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x * self.w).sum(dim=-1)


KINDS = {
    "bf16": (Bf16Chain, torch.bfloat16, {}, [{"emulate_precision_casts": True}]),
    "nan": (Bf16Nan, torch.bfloat16, {}, [{"emulate_precision_casts": True}]),
    "rng": (Noisy, torch.float32, {}, [{"fallback_random": True}]),
    "relu": (LinearRelu, torch.float32, {"cpp.inject_relu_bug_TESTING_ONLY": "accuracy"}, []),
    "reduce": (
        RowSum,
        torch.float32,
        {},
        [{"fallback_by_default": True, "selective_decompose": True}],
    ),
}
"""kind: (module, input dtype, configs the package is compiled with, rebuild configs measured)."""
SHAPES = {"reduce": (4, 65536)}
"""Input shapes of the kinds whose input is not (4, the linear layer's in_features or 8)."""
SCALES = {"reduce": 1000.0}
"""Input scales of the kinds whose input is not standard normal."""


def gap(
    ep: torch.export.ExportedProgram, x: torch.Tensor, configs: dict, path: str | None = None
) -> float:
    """The largest |compiled - eager| with `configs` (the package at `path` when it was compiled
    with them), both sides seeded alike (inf where one side is NaN and the other is not)."""
    if path is None:
        path = torch._inductor.aoti_compile_and_package(ep, inductor_configs=dict(configs))
    compiled = torch._inductor.aoti_load_package(path)
    torch.manual_seed(0)
    with torch.no_grad():
        got = compiled(x)
    torch.manual_seed(0)
    with torch.no_grad():
        want = ep.module()(x)
    if bool((got.isnan() != want.isnan()).any()):
        return float("inf")
    return float((got.double() - want.double()).nan_to_num(0.0).abs().max())


def swap(ep: torch.export.ExportedProgram, out: Path, aoti: str) -> dict:
    """Write the `reduce` kind's weight swap and its inputs; the compiled package's largest
    error against eager on them before and after the swap (load_constants, as a deployment
    swaps; the ExportedProgram's module given the same weights by load_state_dict)."""
    torch.manual_seed(1)
    x = torch.randn(*SHAPES["reduce"])
    weights = {"w": torch.ones(SHAPES["reduce"][1])}
    torch.save(((x,), {}), out / "reduce_swap_inputs.pt")
    torch.save(weights, out / "reduce_weights.pt")
    compiled = torch._inductor.aoti_load_package(aoti)
    module = ep.module()
    with torch.no_grad():
        before = float((compiled(x) - module(x)).abs().max())
        compiled.load_constants(weights, check_full_update=True)
        module.load_state_dict(weights, strict=False)
        after = float((compiled(x) - module(x)).abs().max())
    return {"gap_before": before, "gap": after}


def main(out: Path, kind: str) -> None:
    module, dtype, configs, rebuilds = KINDS[kind]
    torch.manual_seed(0)
    model = module().eval()
    shape = SHAPES.get(kind, (4, model.lin.in_features if hasattr(model, "lin") else 8))
    x = torch.randn(*shape, dtype=dtype) * SCALES.get(kind, 1.0)
    ep = torch.export.export(model, (x,))
    out.mkdir(parents=True, exist_ok=True)
    torch.export.save(ep, out / f"{kind}.pt2")
    torch.save(((x,), {}), out / f"{kind}_inputs.pt")
    with torch.no_grad():
        torch.save(ep.module()(x), out / f"{kind}_expected.pt")
    aoti = str(out / f"{kind}_aoti.pt2")
    torch._inductor.aoti_compile_and_package(ep, package_path=aoti, inductor_configs=dict(configs))
    facts = {
        "gap": gap(ep, x, configs, aoti),
        "rebuilds": [{"configs": c, "gap": gap(ep, x, {**configs, **c})} for c in rebuilds],
    }
    if kind == "reduce":
        facts["swap"] = swap(ep, out, aoti)
    (out / f"{kind}_facts.json").write_text(json.dumps(facts))


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2])
