"""Build packages that differ only in what they need from the deployment host, through the public
API, in one fresh process of the torch that runs this script: `default.pt2` (inductor's defaults:
-march=native and the host's best vector ISA) and, with `--pinned-isa`, `baseline_isa.pt2` (the
same program compiled for plain x86-64 with vectorization off: `cpp.march="x86-64"`,
`cpp.simdlen=0`), and with `--grid-sampler-3d`, `grid_sampler_3d.pt2`: the same interface with
a 3-D grid_sample added, whose fallback calls the shim function aoti_torch_cpu_grid_sampler_3d
(exported by libtorch from 2.13 on). Run by two torch releases, `default.pt2` is one model built
by each.

Writes `inputs.pt` (OLD's caller's `(args, kwargs)`), `outputs.pt` ({package: its output on
them, run by plain torch here}) and `facts.json` ({"same_outputs": {package: whether its output
is default.pt2's}}). Usage: python build_runtime_pairs.py OUT_DIR [--pinned-isa] [--grid-sampler-3d]."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch
from torch.export import Dim

OUT = Path(sys.argv[1])
PINNED_ISA = "--pinned-isa" in sys.argv[2:]
GRID_SAMPLER_3D = "--grid-sampler-3d" in sys.argv[2:]
BASELINE_ISA_CONFIGS = {"cpp.march": "x86-64", "cpp.simdlen": 0}
"""How a user pins the code to any x86-64 CPU (torch/_inductor/config.py, cpu_vec_isa.py)."""


class Net(torch.nn.Module):
    """A Linear layer (an extern addmm), a vectorizable relu and a sort (a shim fallback)."""

    def __init__(self) -> None:
        super().__init__()
        g = torch.Generator().manual_seed(0)
        self.proj = torch.nn.Linear(8, 8)
        with torch.no_grad():
            self.proj.weight.copy_(torch.randn(8, 8, generator=g))
            self.proj.bias.copy_(torch.randn(8, generator=g))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.relu(self.proj(x)).sort(dim=1).values


class Warped(Net):
    """Net, its output also warped as a 2x2x2 volume by a fixed 3-D sampling grid."""

    def __init__(self) -> None:
        super().__init__()
        g = torch.Generator().manual_seed(2)
        self.register_buffer("grid", torch.rand(1, 2, 2, 2, 3, generator=g) * 2 - 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = super().forward(x)
        volume = y.view(-1, 1, 2, 2, 2)
        grid = self.grid.expand(volume.shape[0], -1, -1, -1, -1)
        warped = torch.nn.functional.grid_sample(volume, grid, align_corners=False)
        return y + warped.reshape(-1, 8)


def main() -> None:
    x = torch.randn(16, 8, generator=torch.Generator().manual_seed(1))
    shapes = {"x": {0: Dim("batch", min=2, max=64)}}
    ep = torch.export.export(Net().eval(), (x,), dynamic_shapes=shapes)
    builds = {"default": (ep, {})}
    if PINNED_ISA:
        builds["baseline_isa"] = (ep, BASELINE_ISA_CONFIGS)
    if GRID_SAMPLER_3D:
        warped = torch.export.export(Warped().eval(), (x,), dynamic_shapes=shapes)
        builds["grid_sampler_3d"] = (warped, {})
    outputs = {}
    for name, (program, configs) in builds.items():
        path = OUT / f"{name}.pt2"
        torch._inductor.aoti_compile_and_package(
            program, package_path=str(path), inductor_configs=configs
        )
        outputs[name] = torch._inductor.aoti_load_package(str(path))(x)
    torch.save(((x,), {}), OUT / "inputs.pt")
    torch.save(outputs, OUT / "outputs.pt")
    same = {name: bool(torch.allclose(out, outputs["default"])) for name, out in outputs.items()}
    (OUT / "facts.json").write_text(json.dumps({"same_outputs": same}))


if __name__ == "__main__":
    main()
