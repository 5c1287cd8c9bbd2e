"""Record what plain torch raises when aoti_compile_and_package fails, one JSON file per case
under OUT: the exception as the worker records it (`exception_info`: type, message) and the
worker's facts (`failure_facts`). Each case is a model built and exported as users do and
compiled with torch._inductor.aoti_compile_and_package, with nothing patched.

    python tests/runner/record_compile_failures.py OUT [CASE...]
    python tests/runner/record_compile_failures.py OUT.pt2 CASE   (the case's package, for tests)

tests/data/compile_failures/ holds the recordings of torch 2.13.0 (CPU); the classifier's unit
tests (tests/runner/test_compile_classes.py) read them."""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import torch
from torch import nn

from aotipre.runner.worker.compile_failure import failure_facts
from aotipre.runner.worker.protocol import exception_info


class LinearRelu(nn.Module):
    """x [4, 8] -> relu(linear(x)) * 2: a relu for cpp.inject_relu_bug_TESTING_ONLY."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.lin(x)) * 2


class CumminOutOfRange(nn.Module):
    """torch issue #188224: cummin over dim -46 of an empty 1-D tensor; eager and export accept
    it, Inductor's lowering asserts (`_validate_dim`)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cummin(torch.clone(x), -46)[0]


class GridSample3d(nn.Module):
    """A 3-D grid_sample: aten.grid_sampler_3d has no Inductor lowering and no decomposition, so
    a compile with implicit_fallbacks=False raises MissingOperatorWithoutDecomp (torch's
    default falls back to ATen). (aten.histogram, also unlowered, has no fake kernel: an
    ExportedProgram loaded from a file does not compile at all.)"""

    def forward(self, x: torch.Tensor, grid: torch.Tensor) -> torch.Tensor:
        return nn.functional.grid_sample(x, grid, align_corners=False) * 2


class Float8Sum(nn.Module):
    """A sum over float8_e4m3fn values: CPU has no such kernel (eager: `"sum_cpu" not implemented
    for 'Float8_e4m3fn'`); export accepts it and Inductor's C++ backend has no accumulation
    dtype for it (KeyError: torch.float8_e4m3fn, torch 2.13-2.15)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.to(torch.float8_e4m3fn).sum()


class QuantizeQuint8(nn.Module):
    """A quint8 round trip that eager runs: AOTInductor cannot serialize the quint8 dtype argument
    of the quantize op it calls through the proxy executor (KeyError: torch.quint8, 2.13-2.15)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q = torch.quantize_per_tensor(x, 0.1, 0, torch.quint8)
        return torch.dequantize(q) * 2


class SparseRoundTrip(nn.Module):
    """A sparse round trip that eager and export accept: aten::_to_dense has no fake (Meta)
    kernel, so the compile cannot trace it (NotImplementedError, 2.13-2.15)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.to_sparse().to_dense() * 2


class ConvFirstSamples(nn.Module):
    """A 1-D convolution over the first `n` samples, `n` read from a tensor (.item(): an unbacked
    u0 that the model bounds with torch._check). Eager and export accept it; Inductor's
    convolution lowering needs the output's stride as a number and raises
    GuardOnDataDependentSymNode while compiling (torch 2.13-2.15)."""

    def forward(self, x: torch.Tensor, n: torch.Tensor) -> torch.Tensor:
        u = n.item()
        torch._check(u >= 3)
        torch._check(u <= x.shape[2])
        return nn.functional.conv1d(x[:, :, :u], torch.ones(2, 3, 3))


CASES: dict[str, tuple[nn.Module, tuple[Any, ...], dict[str, Any]]] = {
    "cpp_compile_error": (
        LinearRelu(),
        (torch.randn(4, 8),),
        {"cpp.inject_relu_bug_TESTING_ONLY": "compile_error"},
    ),
    "invalid_cxx": (LinearRelu(), (torch.randn(4, 8),), {"cpp.cxx": ("/nonexistent/g++",)}),
    "lowering_cummin": (
        CumminOutOfRange(),
        (torch.bartlett_window(0, periodic=False),),
        {},
    ),
    "missing_lowering_grid3d": (
        GridSample3d(),
        (torch.randn(1, 2, 3, 4, 4), torch.rand(1, 2, 2, 2, 3) * 2 - 1),
        {"implicit_fallbacks": False},
    ),
    "data_dependent_conv": (ConvFirstSamples(), (torch.randn(1, 3, 8), torch.tensor(5)), {}),
    "unsupported_float8_sum": (Float8Sum(), (torch.randn(4, 8),), {}),
    "unsupported_quint8": (QuantizeQuint8(), (torch.randn(4, 8),), {}),
    "unsupported_sparse": (SparseRoundTrip(), (torch.randn(4, 8),), {}),
}


def record(case: str, out: Path) -> None:
    module, args, configs = CASES[case]
    torch.manual_seed(0)
    ep = torch.export.export(module, args)
    package = os.path.join(tempfile.mkdtemp(), "model.pt2")
    try:
        torch._inductor.aoti_compile_and_package(ep, package_path=package, inductor_configs=configs)
    except Exception as exc:
        info = exception_info(exc)
        data = {
            "torch": torch.__version__,
            "case": case,
            "inductor_configs": {k: list(v) if isinstance(v, tuple) else v
                                 for k, v in configs.items()},
            "error": {"type": info["type"], "message": info["message"]},
            "compile_failure": failure_facts(exc, ep.graph),
        }  # fmt: skip
        (out / f"{case}.json").write_text(json.dumps(data, indent=1) + "\n")
        return
    raise SystemExit(f"{case}: the compile succeeded")


def package(case: str, out: Path) -> None:
    """Save CASE's ExportedProgram (torch.export.save) to OUT, its inputs (`(args, {})`) to
    OUT + `.inputs.pt`, the types plain torch raised compiling it (`[outer, inner]`, `[]`
    when it compiled) to OUT + `.raised.json`, and whether the program runs eagerly on them
    (`{"ok": bool, "error": str}`: torch 2.15's eager rejects what 2.13's accepts) to OUT +
    `.eager.json`."""
    module, args, configs = CASES[case]
    torch.manual_seed(0)
    ep = torch.export.export(module, args)
    torch.export.save(ep, out)
    torch.save((args, {}), f"{out}.inputs.pt")
    eager = {"ok": True, "error": ""}
    try:
        ep.module()(*args)
    except Exception as exc:
        eager = {"ok": False, "error": f"{type(exc).__name__}: {exc}"[:300]}
    Path(f"{out}.eager.json").write_text(json.dumps(eager))
    raised: list[str] = []
    try:
        target = os.path.join(tempfile.mkdtemp(), "model.pt2")
        torch._inductor.aoti_compile_and_package(ep, package_path=target, inductor_configs=configs)
    except Exception as exc:
        raised = [type(exc).__name__, type(getattr(exc, "inner_exception", exc)).__name__]
    Path(f"{out}.raised.json").write_text(json.dumps(raised))


def main(argv: list[str]) -> None:
    out = Path(argv[0])
    if out.suffix == ".pt2":
        package(argv[1], out)
        return
    out.mkdir(parents=True, exist_ok=True)
    for case in argv[1:] or list(CASES):
        record(case, out)


if __name__ == "__main__":
    main(sys.argv[1:])
