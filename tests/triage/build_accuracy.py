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
`cpp.inject_relu_bug_TESTING_ONLY="accuracy"` miscompiles it when given)."""

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


KINDS = {
    "bf16": (Bf16Chain, torch.bfloat16, {}, [{"emulate_precision_casts": True}]),
    "nan": (Bf16Nan, torch.bfloat16, {}, [{"emulate_precision_casts": True}]),
    "rng": (Noisy, torch.float32, {}, [{"fallback_random": True}]),
    "relu": (LinearRelu, torch.float32, {"cpp.inject_relu_bug_TESTING_ONLY": "accuracy"}, []),
}
"""kind: (module, input dtype, configs the package is compiled with, rebuild configs measured)."""


def gap(ep: torch.export.ExportedProgram, x: torch.Tensor, configs: dict) -> float:
    """The largest |compiled - eager| with `configs`, both sides seeded alike (inf where one
    side is NaN and the other is not)."""
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


def main(out: Path, kind: str) -> None:
    module, dtype, configs, rebuilds = KINDS[kind]
    torch.manual_seed(0)
    model = module().eval()
    x = torch.randn(4, model.lin.in_features if hasattr(model, "lin") else 8, dtype=dtype)
    ep = torch.export.export(model, (x,))
    out.mkdir(parents=True, exist_ok=True)
    torch.export.save(ep, out / f"{kind}.pt2")
    torch.save(((x,), {}), out / f"{kind}_inputs.pt")
    with torch.no_grad():
        torch.save(ep.module()(x), out / f"{kind}_expected.pt")
    torch._inductor.aoti_compile_and_package(
        ep, package_path=str(out / f"{kind}_aoti.pt2"), inductor_configs=dict(configs)
    )
    facts = {
        "gap": gap(ep, x, configs),
        "rebuilds": [{"configs": c, "gap": gap(ep, x, {**configs, **c})} for c in rebuilds],
    }
    (out / f"{kind}_facts.json").write_text(json.dumps(facts))


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2])
