"""Builds the weight-swap test packages through the public API (run in a subprocess by
tests/runner/test_weights_real.py): `lin` (Linear(8, 16) and a 16-element buffer: every
tensor a constant), `small` (Linear(4, 3): its 3-element bias and buffer are inlined into the
kernels), `fold` (runtime constant folding: a FoldedConstant), `two` (Linear(8, 16) then
Linear(16, 4): only the second bias, 4 values, is inlined), each with its ExportedProgram, the
sample inputs, and state_dicts of the same and of new weights, and of new weights spoiled (a
tensor missing or renamed, another dtype or layout, a folded constant swapped)."""

from __future__ import annotations

import sys
from pathlib import Path

import torch


class Lin(torch.nn.Module):
    def __init__(self, n_in: int, n_out: int) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(n_in, n_out)
        self.register_buffer("scale", torch.ones(n_out))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x) * self.scale


class Two(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = torch.nn.Linear(8, 16)
        self.fc2 = torch.nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(torch.relu(self.fc1(x)))


class Fold(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(8, 16))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x @ (self.w * 2 + 1)


def build(out: Path, name: str, model: torch.nn.Module, x: torch.Tensor, **configs: object) -> None:
    ep = torch.export.export(model, (x,))
    torch._inductor.aoti_compile_and_package(
        ep, package_path=str(out / f"{name}.pt2"), inductor_configs=dict(configs)
    )
    torch.export.save(ep, str(out / f"{name}_ep.pt2"))
    torch.save(model.state_dict(), out / f"{name}_same.pt")


def main(out: Path) -> None:
    torch.manual_seed(0)
    x = torch.randn(2, 8)
    torch.save((x,), out / "inputs.pt")
    torch.save((x[:, :4].contiguous(),), out / "inputs4.pt")
    build(out, "lin", Lin(8, 16).eval(), x)
    build(out, "small", Lin(4, 3).eval(), x[:, :4].contiguous())
    build(out, "fold", Fold().eval(), x, **{"aot_inductor.use_runtime_constant_folding": True})
    build(out, "two", Two().eval(), x)
    torch.manual_seed(1)
    new = Lin(8, 16)
    new.scale.fill_(2.0)
    torch.save(new.state_dict(), out / "lin_new.pt")
    small = Lin(4, 3)
    small.scale.fill_(3.0)
    torch.save(small.state_dict(), out / "small_new.pt")
    two = Two().state_dict()
    torch.save(two, out / "two_new.pt")
    torch.save({k: v for k, v in two.items() if k != "fc2.bias"}, out / "two_new_no_fc2_bias.pt")
    # lin_new.pt spoiled one way each, and fold's weights with its folded constant swapped
    new_sd = new.state_dict()
    torch.save({k: v for k, v in new_sd.items() if k != "fc.bias"}, out / "lin_missing.pt")
    renamed = {("fc.biass" if k == "fc.bias" else k): v for k, v in new_sd.items()}
    torch.save(renamed, out / "lin_renamed.pt")
    weight = new_sd["fc.weight"]
    torch.save({**new_sd, "fc.weight": weight.double()}, out / "lin_f64.pt")
    torch.save({**new_sd, "fc.weight": weight.half()}, out / "lin_f16.pt")
    torch.save({**new_sd, "fc.weight": weight.t().contiguous()}, out / "lin_transposed.pt")
    same = torch.load(out / "fold_same.pt")
    torch.save({**same, "_FOLDED_CONST_add": torch.zeros(8, 16)}, out / "fold_folded.pt")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
