"""Builds two AOTI packages with one static input of shape [4, 8] and a transposed sample for
each (the values of randn(8, 4), passed as `.t()`: strides (1, 4), compiled for (8, 1)), through
the public API (torch.export.export + aoti_compile_and_package): usage `build_layouts.py DIR`.

- `rowwise.pt2`: Linear(8, 3) + relu, whose compiled GEMM reads the input through its strides;
- `scan.pt2`: `(x * 2 + 1).cumsum(1)`, whose fused kernel reads it as laid out contiguously.

Each `<name>_transposed.pt` holds `((x.t(),), {})`; `<name>_eager.pt` the eager outputs for it.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch


class RowWise(torch.nn.Module):
    """Linear + relu: one extern GEMM on the input."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(8, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.lin(x))


class Scan(torch.nn.Module):
    """A pointwise op fused with a scan: one generated kernel indexes the input."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x * 2 + 1).cumsum(1)


def main(out: Path) -> None:
    torch.manual_seed(0)
    transposed = torch.randn(8, 4).t()
    for name, model in (("rowwise", RowWise().eval()), ("scan", Scan().eval())):
        ep = torch.export.export(model, (transposed.contiguous(),))
        torch._inductor.aoti_compile_and_package(ep, package_path=str(out / f"{name}.pt2"))
        torch.save(((transposed,), {}), out / f"{name}_transposed.pt")
        with torch.no_grad():
            torch.save(model(transposed), out / f"{name}_eager.pt")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
