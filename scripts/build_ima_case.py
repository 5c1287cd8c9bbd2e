"""Build a crash-triage case that is not in fixtures/ (issue #28's benchmark): a gather model
compiled for CUDA with the public API and `assert_indirect_indexing` off, so an id far out of
range is a real illegal memory access that names no kernel (the asynchronous error surfaces at
a later call); crash triage's synchronous re-run names it.

    python scripts/build_ima_case.py OUT_DIR    # writes ima.pt2, ima_ep.pt2, ima_bad.pt,
                                                # ima_good.pt; prints the bench_triage command
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch


class GatherScale(torch.nn.Module):
    """Token ids -> rows of a table, scaled per feature, pooled over the sequence."""

    def __init__(self) -> None:
        super().__init__()
        self.table = torch.nn.Parameter(torch.randn(1000, 64))
        self.scale = torch.nn.Parameter(torch.rand(64) + 0.5)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return (self.table[ids] * self.scale).sum(dim=1)


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    model = GatherScale().cuda().eval()
    good = torch.randint(0, 1000, (4, 16))
    bad = good.clone()
    bad[2, 7] = 10**12
    ep = torch.export.export(model, (good.cuda(),))
    torch.export.save(ep, str(out / "ima_ep.pt2"))
    torch._inductor.aoti_compile_and_package(
        ep,
        package_path=str(out / "ima.pt2"),
        inductor_configs={"assert_indirect_indexing": False},
    )
    torch.save(((bad,), {}), out / "ima_bad.pt")
    torch.save(((good,), {}), out / "ima_good.pt")
    print(
        f"python scripts/bench_triage.py --device cuda --package {out}/ima.pt2 "
        f"--exported-program {out}/ima_ep.pt2 --inputs {out}/ima_bad.pt "
        f"--good-inputs {out}/ima_good.pt"
    )


if __name__ == "__main__":
    main(Path(sys.argv[1]))
