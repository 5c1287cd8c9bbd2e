"""Build the packages of the serving tests through the public API (run in a fresh interpreter:
`python build_serving.py OUT`): a one-input MLP and a three-input model (two args, one kwarg,
a tuple out), both with a dynamic batch `Dim("batch", min=1, max=32)`, each package's call
spec as the loader reports it (what Triton's torch_aoti backend names inputs and outputs by),
and the MLP's AOTI files packaged (package_aoti) as a model named `mlp`."""

from __future__ import annotations

import json
import sys
import zipfile
from pathlib import Path

import torch


class Mlp(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(8, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.fc(x))


class Ranker(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = torch.nn.Embedding(100, 16)

    def forward(
        self, ids: torch.Tensor, dense: torch.Tensor, *, mask: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        h = self.emb(ids).sum(-1) * mask + dense
        return h.sum(-1), h


def build(out: Path) -> None:
    torch.manual_seed(0)
    batch = torch.export.Dim("batch", min=1, max=32)
    specs = {}
    x = torch.randn(4, 8)
    ep = torch.export.export(Mlp().eval(), (x,), dynamic_shapes=({0: batch},))
    specs["mlp"] = torch._inductor.aoti_compile_and_package(ep, package_path=str(out / "mlp.pt2"))
    ids = torch.randint(0, 100, (4, 16))
    dense = torch.randn(4, 16)
    mask = torch.ones(4, 16)
    ep = torch.export.export(
        Ranker().eval(),
        (ids, dense),
        {"mask": mask},
        dynamic_shapes={"ids": {0: batch}, "dense": {0: batch}, "mask": {0: batch}},
    )
    specs["ranker"] = torch._inductor.aoti_compile_and_package(
        ep, package_path=str(out / "ranker.pt2")
    )
    call_specs = {}
    for name in specs:
        loaded = torch._inductor.aoti_load_package(str(out / f"{name}.pt2"))
        call_specs[name] = list(loaded.loader.get_call_spec())
    (out / "call_specs.json").write_text(json.dumps(call_specs, indent=1))
    # package_aoti over the MLP's AOTI files under the model name 'mlp' (not 'model')
    from torch._inductor.package import package_aoti

    folder = out / "mlp_files"
    folder.mkdir()
    files = []
    with zipfile.ZipFile(out / "mlp.pt2") as zf:
        for name in zf.namelist():
            if "/data/aotinductor/model/" in name:
                path = folder / name.rsplit("/", 1)[1]
                path.write_bytes(zf.read(name))
                files.append(str(path))
    package_aoti(str(out / "renamed.pt2"), {"mlp": files})


if __name__ == "__main__":
    build(Path(sys.argv[1]))
