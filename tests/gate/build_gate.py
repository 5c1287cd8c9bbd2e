"""Build the extra packages and sample inputs of tests/gate: `python build_gate.py OUT FIXTURES PART`.

Run in a fresh interpreter by tests/gate/conftest.py (torch stays out of pytest). Packages are
made with the public API only: `torch.export.export` + `torch.export.save` (ExportedProgram)
and `torch._inductor.aoti_compile_and_package` (AOTI code). A few packages pair an
ExportedProgram with AOTI code compiled from a *different* export (a wider range, another
output structure): such an archive is assembled at the zip level from the two archives the
public API wrote, exactly as `package_pt2` lays them out (`<root>/models/...` next to
`<root>/data/aotinductor/...`). `manifest.json` in OUT_DIR lists every file and what it is for.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.export import Dim

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
from fixtures.models import VOCAB, TokenModel  # noqa: E402
from tests.gate.archives import merge  # noqa: E402

MANIFEST: dict[str, str] = {}


def save_inputs(
    out: Path, name: str, args: tuple[Any, ...], kwargs: dict[str, Any], why: str
) -> None:
    torch.save((args, kwargs), out / f"{name}.pt")
    MANIFEST[f"{name}.pt"] = why


def gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def token(batch: int, seq: int) -> tuple[torch.Tensor, torch.Tensor]:
    ids = torch.randint(0, VOCAB, (batch, seq), generator=gen(1), dtype=torch.int64)
    return ids, torch.rand(batch, seq, generator=gen(2)) + 0.5


def token_inputs(out: Path) -> None:
    for b in (1, 2, 64, 65):
        save_inputs(out, f"token_b{b}", token(b, 10), {}, f"TokenModel inputs, batch {b}, seq 10")
    for s in (1, 2, 128, 129):
        save_inputs(out, f"token_s{s}", token(3, s), {}, f"TokenModel inputs, batch 3, seq {s}")
    ids, _ = token(3, 10)
    padded = (torch.rand(3, 16, generator=gen(3)) + 0.5)[:, :10]  # strides (16, 1)
    save_inputs(out, "token_padded_mask", (ids, padded), {}, "mask strides (16, 1), seq 10")
    sliced = torch.randint(0, VOCAB, (6, 10), generator=gen(4), dtype=torch.int64)[::2]
    _, mask = token(3, 10)
    save_inputs(out, "token_sliced_ids", (sliced, mask), {}, "ids strides (20, 1), seq 10")
    ids, mask = token(3, 10)
    save_inputs(out, "token_rank3", (ids.unsqueeze(-1), mask), {}, "ids of rank 3")
    nan = mask.clone()
    nan[0, 0] = float("nan")
    nan[1, 0] = float("inf")
    save_inputs(out, "token_nan_mask", (ids, nan), {}, "mask with one NaN (row 0), one Inf (row 1)")
    oob = ids.clone()
    oob[2, 3] = 600
    save_inputs(out, "token_oob_nan", (oob, nan), {}, "id 600 (out of range) and a NaN mask")


def mlp_inputs(out: Path) -> None:
    for b in (0, 1, 32, 33):
        x = torch.randn(b, 16, 8, generator=gen(5))
        save_inputs(out, f"mlp_b{b}", (x,), {}, f"TinyMLP x [{b}, 16, 8]")
    for s in (1, 2, 64, 65):
        x = torch.randn(2, s, 8, generator=gen(5))
        save_inputs(out, f"mlp_s{s}", (x,), {}, f"TinyMLP x [2, {s}, 8]")


def pair_inputs(out: Path) -> None:
    for n in (1, 2, 32, 33):
        x, y = torch.randn(n, 4, generator=gen(6)), torch.randn(2 * n, 4, generator=gen(7))
        save_inputs(out, f"pair_n{n}", (x, y), {}, f"PairModel x [{n}, 4], y [{2 * n}, 4]")
    x, y = torch.randn(3, 4, generator=gen(6)), torch.randn(7, 4, generator=gen(7))
    save_inputs(out, "pair_off", (x, y), {}, "PairModel x [3, 4], y [7, 4] (2*3 != 7)")


def kwargs_inputs(out: Path) -> None:
    x = torch.randn(3, 8, generator=gen(8))
    mask = (torch.rand(3, 8, generator=gen(9)) > 0.5).float()
    save_inputs(out, "kw_missing_mask", (x,), {"scale": 0.5}, "kwarg mask missing")
    save_inputs(
        out, "kw_extra", (x,), {"mask": mask, "scale": 0.5, "bias": mask}, "extra kwarg bias"
    )
    save_inputs(out, "kw_scale_07", (x,), {"mask": mask, "scale": 0.7}, "scale 0.7 (export: 0.5)")
    save_inputs(
        out, "kw_tensor_scale", (x,), {"mask": mask, "scale": torch.tensor(0.5)}, "scale a tensor"
    )


class UnitDim(nn.Module):
    """x [4, 1, 8] float (a static size-1 dim) -> [4, 8]."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x * 2.0).sum(dim=1)


class Forever(nn.Module):
    """x [64, 64] float, n int64 scalar -> [64, 64]: n rounds of a matmul in a while_loop. With
    n = 10**12 it never ends (a test times it out or kills its worker while it runs)."""

    def forward(self, x: torch.Tensor, n: torch.Tensor) -> torch.Tensor:
        from torch._higher_order_ops.while_loop import while_loop

        def cond(i: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
            return i < n

        def body(i: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            return i + 1, torch.tanh(y @ y) * 0.5

        _, y = while_loop(cond, body, (torch.zeros((), dtype=torch.int64), x))
        return y


class PosModel(nn.Module):
    """ids [batch, seq] -> [batch, seq]: token + position embedding; 64 positions only."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, 8)
        self.pos = nn.Embedding(64, 8)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(ids.shape[1], device=ids.device)
        return (self.embed(ids) + self.pos(positions)).sum(dim=-1)


class TwoOutputs(TokenModel):
    """TokenModel's weights and signature, returning its output twice."""

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> Any:
        y = super().forward(input_ids, attention_mask)
        return y, y


def export(model: nn.Module, args: tuple[Any, ...], shapes: Any = None) -> Any:
    return torch.export.export(model.eval(), args, dynamic_shapes=shapes)


def token_model(shapes_max_seq: int) -> tuple[nn.Module, Any]:
    torch.manual_seed(0)  # the fixture builder's seed: the same weights as aoti.pt2's
    model = TokenModel().eval()
    batch, seq = Dim("batch", min=1, max=64), Dim("seq", min=2, max=shapes_max_seq)
    shapes = {"input_ids": {0: batch, 1: seq}, "attention_mask": {0: batch, 1: seq}}
    return model, shapes


def assembled(out: Path, fixture_dir: Path) -> None:
    """Packages assembled from exports and aoti.pt2's compiled code (no compile)."""
    work = out / "parts"
    work.mkdir(exist_ok=True)
    aoti = fixture_dir / "aoti.pt2"

    # AOT611: the ExportedProgram declares seq <= 64, the AOTI code (aoti.pt2) checks <= 128
    model, shapes = token_model(64)
    torch.export.save(export(model, token(2, 16), shapes), work / "narrow_ep.pt2")
    merge(out / "wider_aoti.pt2", work / "narrow_ep.pt2", aoti)
    MANIFEST["wider_aoti.pt2"] = "EP seq <= 64 + AOTI of aoti.pt2 (seq <= 128): seq 65 runs"

    # AOT703: the ExportedProgram returns two outputs, the AOTI code (aoti.pt2) one
    torch.manual_seed(0)
    two = TwoOutputs().eval()
    _, shapes = token_model(128)
    torch.export.save(export(two, token(2, 16), shapes), work / "two_ep.pt2")
    merge(out / "two_outputs.pt2", work / "two_ep.pt2", aoti)
    MANIFEST["two_outputs.pt2"] = "EP returns (y, y), AOTI of aoti.pt2 returns y"


def compiled(out: Path) -> None:
    """Packages that need compiles of their own."""
    work = out / "parts"
    work.mkdir(exist_ok=True)

    # AOT612: position table of 64 rows; AOTI compiled for seq <= 128, EP declares <= 64
    torch.manual_seed(0)
    pos = PosModel().eval()
    ids = torch.randint(0, VOCAB, (2, 16), generator=gen(1))
    wide = {"ids": {0: Dim("batch", min=1, max=8), 1: Dim("seq", min=2, max=128)}}
    narrow = {"ids": {0: Dim("batch", min=1, max=8), 1: Dim("seq", min=2, max=64)}}
    torch._inductor.aoti_compile_and_package(
        export(pos, (ids,), wide), package_path=str(work / "pos_aoti.pt2")
    )
    torch.export.save(export(pos, (ids,), narrow), work / "pos_ep.pt2")
    merge(out / "pos_wider.pt2", work / "pos_ep.pt2", work / "pos_aoti.pt2")
    MANIFEST["pos_wider.pt2"] = "PosModel: EP seq <= 64, AOTI seq <= 128: seq 65 fails inside"
    save_inputs(out, "pos_inputs", (ids,), {}, "PosModel ids [2, 16]")

    # size-1 static dim: EP + AOTI of UnitDim
    unit = UnitDim().eval()
    x = torch.randn(4, 1, 8, generator=gen(10))
    ep = export(unit, (x,))
    torch._inductor.aoti_compile_and_package(ep, package_path=str(work / "unit_aoti.pt2"))
    torch.export.save(ep, work / "unit_ep.pt2")
    merge(out / "unit.pt2", work / "unit_ep.pt2", work / "unit_aoti.pt2")
    MANIFEST["unit.pt2"] = "UnitDim x [4, 1, 8] static, EP + AOTI"
    save_inputs(out, "unit_inputs", (x,), {}, "x [4, 1, 8] contiguous, strides (8, 8, 1)")
    odd = torch.randn(4, 8, 1, generator=gen(10)).transpose(1, 2)  # strides (8, 1, 1)
    save_inputs(out, "unit_inputs_size1_stride", (odd,), {}, "x [4, 1, 8], strides (8, 1, 1)")

    # a model that runs until it is stopped (timeouts, a worker killed while running)
    x = torch.randn(64, 64, generator=gen(11))
    torch._inductor.aoti_compile_and_package(
        export(Forever(), (x, torch.tensor(3))), package_path=str(out / "forever.pt2")
    )
    MANIFEST["forever.pt2"] = "AOTI only, Forever: a while_loop of n matmuls"
    save_inputs(out, "forever_inputs", (x, torch.tensor(10**12)), {}, "n = 10**12: never ends")


def main(argv: list[str]) -> int:
    """`build_gate.py OUT FIXTURE_DIR inputs|compiled`: the inputs (and the packages that need
    no compile), or the packages that compile (slow)."""
    out, fixture_dir, part = Path(argv[1]), Path(argv[2]), argv[3]
    out.mkdir(parents=True, exist_ok=True)
    if part == "inputs":
        token_inputs(out)
        mlp_inputs(out)
        pair_inputs(out)
        kwargs_inputs(out)
        assembled(out, fixture_dir)
    else:
        compiled(out)
    (out / "manifest.json").write_text(json.dumps(MANIFEST, indent=2, sort_keys=True) + "\n")
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
