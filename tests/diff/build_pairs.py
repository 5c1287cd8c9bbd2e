"""Build the release-diff package pairs through the public API, in one fresh process, and record
what plain torch does when OLD's caller's inputs meet NEW (facts.json): `fails`, `runs wrong`
(outputs differ from OLD's) or `runs right`. Usage: python build_pairs.py OUT_DIR [--aoti]."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import torch
from torch.export import Dim

OUT = Path(sys.argv[1])
AOTI = "--aoti" in sys.argv[2:]


class Net(torch.nn.Module):
    """x @ W + y, and a second output; variants change one thing at a time."""

    def __init__(self, width: int = 8, seed: int = 0, dtype: torch.dtype = torch.float32) -> None:
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.proj = torch.nn.Linear(8, width, bias=False, dtype=dtype)
        with torch.no_grad():
            self.proj.weight.copy_(torch.randn(width, 8, generator=g, dtype=dtype))

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.proj(x) + y[:, : self.proj.out_features], x.sum(dim=1)


class Swapped(Net):
    def forward(self, y: torch.Tensor, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:  # type: ignore[override]
        return super().forward(x, y)


class WithMask(Net):
    def forward(
        self, x: torch.Tensor, y: torch.Tensor, *, mask: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:  # type: ignore[override]
        a, b = super().forward(x, y)
        return a * mask, b


class ThreeOut(Net):
    def forward(self, x: torch.Tensor, y: torch.Tensor):  # type: ignore[override]
        a, b = super().forward(x, y)
        return a, b, a.mean()


class OneInput(Net):
    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:  # type: ignore[override]
        return self.proj(x), x.sum(dim=1)


class Scaled(Net):
    def forward(self, x: torch.Tensor, y: torch.Tensor, alpha: float):  # type: ignore[override]
        a, b = super().forward(x, y)
        return a * alpha, b


def inputs(batch: int, dtype: torch.dtype = torch.float32) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    return torch.randn(batch, 8, generator=g).to(dtype), torch.randn(batch, 8, generator=g).to(
        dtype
    )


def export(
    model: torch.nn.Module,
    batch: tuple[int, int] | None,
    kwargs: dict | None = None,
    dtype: torch.dtype = torch.float32,
):
    args: tuple = inputs(16, dtype)
    names = ("x", "y")
    if isinstance(model, Swapped):
        args, names = args[::-1], ("y", "x")
    if isinstance(model, OneInput):
        args, names = args[:1], ("x",)
    if isinstance(model, Scaled):
        args = (*args, model.alpha)
    shapes = None
    if batch is not None:
        b = Dim("batch", min=batch[0], max=batch[1])
        shapes = {name: {0: b} for name in names}
        if isinstance(model, Scaled):
            shapes["alpha"] = None
        if kwargs:
            shapes["mask"] = {0: b}
    return torch.export.export(model, args, kwargs or {}, dynamic_shapes=shapes)


MASK = {"mask": torch.ones(16, 8)}
VARIANTS = {
    # name: (model, batch range or None for static, kwargs, dtype)
    "base": (Net(), (2, 64), None, torch.float32),
    "narrow": (Net(), (2, 32), None, torch.float32),
    "wide": (Net(), (2, 128), None, torch.float32),
    "static": (Net(), None, None, torch.float32),
    "swapped": (Swapped(), (2, 64), None, torch.float32),
    "kwarg": (WithMask(), (2, 64), MASK, torch.float32),
    "half": (Net(dtype=torch.float16), (2, 64), None, torch.float16),
    "reshaped": (Net(width=4), (2, 64), None, torch.float32),
    "retrained": (Net(seed=7), (2, 64), None, torch.float32),
    "three_out": (ThreeOut(), (2, 64), None, torch.float32),
    "one_input": (OneInput(), (2, 64), None, torch.float32),
}
SCALED = {"scaled_half": 0.5, "scaled_double": 2.0}
"""A pair of its own: `alpha` specialized to 0.5 (OLD, whose caller passes 0.5) and to 2.0."""
AOTI_VARIANTS = ("base", "narrow", "retrained")
"""Compiled with aoti_compile_and_package too (the costly part: three compiles)."""
SAME_INPUTS_BATCH = 16
"""inputs.pt: a batch every AOTI variant accepts, on which `check NEW --against OLD` runs both."""


def call_old_inputs(fn, *extra: object) -> object:
    """OLD's caller: a batch of 48 (inside OLD's 2..64, outside narrow's 2..32), float32."""
    x, y = inputs(48)
    return fn(x, y, *extra)


def outcome(old_fn, new_fn, *extra: object) -> str:
    expected = call_old_inputs(old_fn, *extra)
    try:
        got = call_old_inputs(new_fn, *extra)
    except Exception:  # noqa: BLE001 - any refusal is what a caller sees
        return "fails"
    a = torch.utils._pytree.tree_leaves(expected)
    b = torch.utils._pytree.tree_leaves(got)
    if len(b) > len(a):  # more outputs: OLD's caller reads the ones it knows
        b = b[: len(a)]
    if len(a) != len(b) or any(
        p.shape != q.shape or p.dtype != q.dtype or not torch.allclose(p, q) for p, q in zip(a, b)
    ):
        return "runs wrong"
    return "runs right"


def main() -> None:
    facts: dict[str, dict[str, str]] = {"ep": {}, "aoti": {}}
    programs = {}
    for name, (model, batch, kwargs, dtype) in VARIANTS.items():
        model.eval()
        ep = export(model, batch, kwargs, dtype)
        programs[name] = ep
        torch.export.save(ep, OUT / f"{name}.pt2")
    base = torch.export.load(OUT / "base.pt2").module()
    for name, alpha in SCALED.items():
        model = Scaled().eval()
        model.alpha = alpha
        torch.export.save(export(model, (2, 64)), OUT / f"{name}.pt2")
    half, double = (torch.export.load(OUT / f"{n}.pt2").module() for n in SCALED)
    facts["scaled"] = {"scaled_double": outcome(half, double, SCALED["scaled_half"])}
    for name in VARIANTS:
        facts["ep"][name] = outcome(base, torch.export.load(OUT / f"{name}.pt2").module())
    if AOTI:
        for name in AOTI_VARIANTS:
            torch._inductor.aoti_compile_and_package(
                programs[name], package_path=str(OUT / f"aoti_{name}.pt2")
            )
        old = torch._inductor.aoti_load_package(str(OUT / "aoti_base.pt2"))
        for name in AOTI_VARIANTS:
            facts["aoti"][name] = outcome(
                old, torch._inductor.aoti_load_package(str(OUT / f"aoti_{name}.pt2"))
            )
        # behaviour on the same inputs (inputs.pt): each output's largest |NEW - OLD| and where
        args = inputs(SAME_INPUTS_BATCH)
        torch.save((args, {}), OUT / "inputs.pt")
        facts["aoti_same_inputs"] = {}
        for name in AOTI_VARIANTS:
            new = torch._inductor.aoti_load_package(str(OUT / f"aoti_{name}.pt2"))
            pairs = zip(torch.utils._pytree.tree_leaves(old(*args)), new(*args))
            facts["aoti_same_inputs"][name] = [  # type: ignore[assignment]
                {
                    "max_abs": float((b - a).abs().max()),
                    "worst_index": [
                        int(i) for i in torch.unravel_index((b - a).abs().argmax(), a.shape)
                    ],
                    "allclose": bool(torch.allclose(b, a, rtol=1e-4, atol=1e-5)),
                }
                for a, b in pairs
            ]
        # the compiled code checks its inputs only under AOTI_RUNTIME_CHECK_INPUTS (read at a
        # fresh load's first run): what a deployment that turns the checks on sees
        os.environ["AOTI_RUNTIME_CHECK_INPUTS"] = "1"
        facts["aoti_checked"] = {}
        for name in AOTI_VARIANTS:
            new = torch._inductor.aoti_load_package(str(OUT / f"aoti_{name}.pt2"))
            facts["aoti_checked"][name] = outcome(old, new)
    (OUT / "facts.json").write_text(json.dumps(facts, indent=1))


if __name__ == "__main__":
    main()
