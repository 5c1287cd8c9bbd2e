"""Build a small demo .pt2 (ExportedProgram + AOTI) with good and bad sample inputs, then check it.

Run through `bash scripts/demo.sh` (which installs everything first). Outputs land in ./demo/.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "demo"


def build() -> None:
    import torch

    class Classifier(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.emb = torch.nn.Embedding(1000, 16)
            self.head = torch.nn.Linear(16, 3)

        def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
            h = self.emb(input_ids) * attention_mask.unsqueeze(-1)
            return self.head(h.sum(1) / attention_mask.sum(1, keepdim=True).clamp(min=1))

    torch.manual_seed(0)
    model = Classifier().eval()
    ids = torch.randint(0, 1000, (4, 32))
    mask = torch.ones(4, 32)
    batch = torch.export.Dim("batch", min=1, max=64)
    seq = torch.export.Dim("seq", min=2, max=256)
    ep = torch.export.export(
        model,
        (ids, mask),
        dynamic_shapes={"input_ids": {0: batch, 1: seq}, "attention_mask": {0: batch, 1: seq}},
    )
    OUT.mkdir(exist_ok=True)
    started = time.monotonic()
    print("demo: compiling the demo model with AOTInductor (cpu) ...", file=sys.stderr)
    files = torch._inductor.aot_compile(
        ep.module(), (ids, mask), options={"aot_inductor.package": True}
    )
    from torch.export.pt2_archive._package import package_pt2

    package_pt2(
        OUT / "classifier.pt2", exported_programs={"model": ep}, aoti_files={"model": files}
    )
    print(f"demo: built demo/classifier.pt2 in {time.monotonic() - started:.1f}s", file=sys.stderr)
    torch.save(((ids[:2, :20].contiguous(), mask[:2, :20].contiguous()), {}), OUT / "inputs_ok.pt")
    torch.save(((ids[:2, :20].float().contiguous(), torch.ones(2, 21)), {}), OUT / "inputs_bad.pt")
    torch.save(
        ((torch.randint(0, 1000, (2, 300)), torch.ones(2, 300)), {}), OUT / "inputs_too_long.pt"
    )


def aotipre(*args: str) -> int:
    cmd = ["aotipre", *args]
    print(f"\n$ {' '.join(cmd)}", flush=True)
    return subprocess.run(cmd, cwd=OUT, check=False).returncode


def main() -> int:
    if not (OUT / "classifier.pt2").exists() or "--rebuild" in sys.argv:
        build()
    aotipre("inspect", "classifier.pt2")
    rc_ok = aotipre("check", "classifier.pt2", "--inputs", "inputs_ok.pt")
    rc_bad = aotipre("check", "classifier.pt2", "--inputs", "inputs_bad.pt", "--static-only")
    rc_long = aotipre("check", "classifier.pt2", "--inputs", "inputs_too_long.pt", "--static-only")
    print(f"\ndemo: exit codes: good inputs {rc_ok}, bad inputs {rc_bad}, too long {rc_long}")
    return 0 if (rc_ok, rc_bad, rc_long) == (0, 1, 1) else 1


if __name__ == "__main__":
    sys.exit(main())
