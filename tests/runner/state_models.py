"""Builds the state-across-calls packages of test_state_real.py through the public API (run in a
fresh interpreter: `python state_models.py OUT`)."""

from __future__ import annotations

import sys
from pathlib import Path

import torch


class Counter(torch.nn.Module):
    """An int64 0-dim call counter and a float accumulator, both updated in place: torch
    2.13's compile folds the counter's update (#185077), the accumulator's is kept."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("calls", torch.tensor(0, dtype=torch.int64))
        self.register_buffer("acc", torch.zeros(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls.add_(1)
        self.acc.add_(x)
        return x * self.calls + self.acc


class Running(torch.nn.Module):
    """A running mean updated in place (float only): its state is carried."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("mean", torch.zeros(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.mean.mul_(0.5).add_(x * 0.5)
        return x - self.mean


def main(out: Path, device: str) -> None:
    x = torch.ones(4, device=device)
    torch.save(((x,), {}), out / "inputs.pt")
    for name, cls in (("counter", Counter), ("running", Running)):
        ep = torch.export.export(cls().to(device), (x,))
        torch.export.save(ep, str(out / f"{name}_ep.pt2"))
        torch._inductor.aoti_compile_and_package(ep, package_path=str(out / f"{name}.pt2"))


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2] if len(sys.argv) > 2 else "cpu")
