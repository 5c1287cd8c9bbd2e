"""Models for the C-shim tests (tests/runner/test_c_shims.py): measured with torch 2.13 CPU, a
plain aoti_compile_and_package warns "aten._linalg_det.default is missing a c-shim
implementation, using proxy executor as fallback" for DetAndHistc (histc falls back too, with a
C shim), and under lite mode (fallback_by_default + selective_decompose) warns so for
aten.sub.Tensor and aten.relu.default of SubRelu, whose package then fails at run time with
"Mismatch between ints consumed and num_ints"."""

from __future__ import annotations

import json
import sys

import torch

LITE = {"fallback_by_default": True, "selective_decompose": True}
"""Inductor's lite mode (every op an ATen fallback), as the diagnostic rebuilds use it."""


class DetAndHistc(torch.nn.Module):
    """torch.linalg.det: a fallback with no C shim; torch.histc: a fallback with one."""

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        d = torch.linalg.det(x)  # the op with no C shim
        h = torch.histc(x, bins=4)
        return d.relu() + 1, h


class SubRelu(torch.nn.Module):
    """Lowered by Inductor (no fallback) unless lite mode sends every op to ATen."""

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return (x - y).relu()


def listings() -> dict[str, list[dict[str, str]]]:
    """What the worker's listing (runner/worker/shims.py) says for each model and config."""
    from aotipre.runner.worker.shims import shimless_ops

    det = torch.export.export(DetAndHistc(), (torch.rand(3, 3, 3),))
    sub = torch.export.export(SubRelu(), (torch.rand(4), torch.rand(4)))
    return {
        "det": shimless_ops(det, {}),
        "sub": shimless_ops(sub, {}),
        "sub_lite": shimless_ops(sub, LITE),
    }


if __name__ == "__main__":
    json.dump(listings(), sys.stdout)
