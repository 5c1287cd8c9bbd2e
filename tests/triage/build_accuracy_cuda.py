"""Builds the CUDA accuracy-triage fixtures in a fresh interpreter, as users build them
(torch.export.export, torch.export.save, torch._inductor.aoti_compile_and_package, on CUDA):
`python build_accuracy_cuda.py OUT_DIR KIND` writes OUT_DIR/KIND.pt2 (the ExportedProgram),
OUT_DIR/KIND_inputs.pt (`(args, kwargs)`, CPU tensors), OUT_DIR/KIND_aoti.pt2 (the package) and
OUT_DIR/KIND_facts.json: what plain torch does with it in this fresh process (the package's
largest error against eager run at this process's default float32 matmul precision, and the
same for a rebuild with each setting of `rebuilds`), the card's name and the torch version.

Kinds: `tf32` (a 1024x1024 fp32 linear, no bias, times 0.5, compiled with max_autotune's Triton
mm template under `torch.set_float32_matmul_precision("high")`: Inductor bakes ALLOW_TF32 into
the template while eager runs full fp32), `bf16` (build_accuracy.py's bf16 chain on CUDA)."""

from __future__ import annotations

import json
import sys
import zipfile
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
from build_accuracy import Bf16Chain  # noqa: E402 - the CPU fixtures' model, on CUDA here


class Fp32Linear(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(1024, 1024, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.lin(x) * 0.5


MAX_AUTOTUNE = {"max_autotune": True, "max_autotune_gemm_backends": "TRITON"}
"""The tf32 package's inductor_configs: an mm Triton template, whose TF32 is decided at compile
time (the default compile calls cuBLAS, which reads the flags when it runs)."""
KINDS = {
    "tf32": (Fp32Linear, (64, 1024), torch.float32, MAX_AUTOTUNE, "high", [("highest", {})]),
    "bf16": (Bf16Chain, (4, 16), torch.bfloat16, {}, None, [(None, {"emulate_precision_casts": True})]),
}  # fmt: skip
"""kind: (module, input shape and dtype, inductor_configs, float32 matmul precision of the
package's compile (None: the default), rebuilds measured: (precision, configs))."""
TF32_MARK = "ALLOW_TF32 : tl.constexpr = True"


def compiled(ep: torch.export.ExportedProgram, configs: dict, precision: str | None, path: str):
    """Compile `ep` to `path` under `precision` (None: as it is), then restore it."""
    before = torch.get_float32_matmul_precision()
    if precision is not None:
        torch.set_float32_matmul_precision(precision)
    try:
        torch._inductor.aoti_compile_and_package(ep, package_path=path, inductor_configs=configs)
    finally:
        torch.set_float32_matmul_precision(before)
    return path


def gap(ep: torch.export.ExportedProgram, x: torch.Tensor, path: str) -> float:
    """The largest |package - eager| (both at this process's own precision settings)."""
    runner = torch._inductor.aoti_load_package(path)
    with torch.no_grad():
        got, want = runner(x), ep.module()(x)
    return float((got.double() - want.double()).abs().max())


def main(out: Path, kind: str) -> None:
    module, shape, dtype, configs, precision, rebuilds = KINDS[kind]
    torch.manual_seed(0)
    model = module().to(dtype).cuda().eval()
    x = torch.randn(*shape, dtype=dtype)
    ep = torch.export.export(model, (x.cuda(),))
    out.mkdir(parents=True, exist_ok=True)
    torch.export.save(ep, out / f"{kind}.pt2")
    torch.save(((x,), {}), out / f"{kind}_inputs.pt")
    aoti = compiled(ep, dict(configs), precision, str(out / f"{kind}_aoti.pt2"))
    with zipfile.ZipFile(aoti) as zf:
        sources = [
            zf.read(n).decode("utf-8", "replace") for n in zf.namelist() if n.endswith(".cpp")
        ]
    facts = {
        "gpu": torch.cuda.get_device_name(0),
        "torch": torch.__version__,
        "eager_precision": torch.get_float32_matmul_precision(),
        "package_tf32": any(TF32_MARK in s for s in sources),
        "gap": gap(ep, x.cuda(), aoti),
        "rebuilds": [],
    }
    for i, (prec, extra) in enumerate(rebuilds):
        path = compiled(ep, {**configs, **extra}, prec, str(out / f"{kind}_rebuild{i}.pt2"))
        facts["rebuilds"].append(
            {"precision": prec, "configs": extra, "gap": gap(ep, x.cuda(), path)}
        )
    (out / f"{kind}_facts.json").write_text(json.dumps(facts))


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2])
