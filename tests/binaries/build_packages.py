"""Build the packages of tests/binaries/test_real_packages.py with the public API only
(torch.export.export + torch._inductor.aoti_compile_and_package), in a fresh process:

    python tests/binaries/build_packages.py OUT_DIR [cpu|cuda]

- plain.pt2: a small MLP (weights inside the .so)
- weights_on_disk.pt2: the same with package_constants_in_so=False (weights beside the .so)
- custom_op.pt2: a model calling a torch.library.custom_op (run through the proxy executor)
- multi_arch.pt2 (cuda only): aot_inductor.emit_multi_arch_kernel=True
Prints one JSON line: {name: path or an error string}.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch


class Mlp(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = torch.nn.Linear(16, 32)
        self.b = torch.nn.Linear(32, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.b(torch.relu(self.a(x)))


@torch.library.custom_op("aotipre_test::scale", mutates_args=())
def scale(x: torch.Tensor) -> torch.Tensor:
    return x * 2


@scale.register_fake
def _(x: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(x)


class WithOp(Mlp):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.ops.aotipre_test.scale(super().forward(x))


def build(out: Path, name: str, model: torch.nn.Module, device: str, configs: dict) -> str:
    x = torch.randn(8, 16, device=device)
    ep = torch.export.export(model.to(device), (x,))
    path = out / f"{name}.pt2"
    try:
        torch._inductor.aoti_compile_and_package(
            ep, package_path=str(path), inductor_configs=configs
        )
    except Exception as exc:  # noqa: BLE001 - reported, the caller decides
        return f"error: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    return str(path)


def main() -> None:
    out = Path(sys.argv[1])
    device = sys.argv[2] if len(sys.argv) > 2 else "cpu"
    out.mkdir(parents=True, exist_ok=True)
    built = {
        "plain": build(out, "plain", Mlp(), device, {}),
        "weights_on_disk": build(
            out, "weights_on_disk", Mlp(), device, {"aot_inductor.package_constants_in_so": False}
        ),
        "custom_op": build(out, "custom_op", WithOp(), device, {}),
    }
    if device == "cuda":
        built["multi_arch"] = build(
            out, "multi_arch", Mlp(), device, {"aot_inductor.emit_multi_arch_kernel": True}
        )
    print(json.dumps(built))


if __name__ == "__main__":
    main()
