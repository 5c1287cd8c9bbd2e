"""nn.Modules that torch.export cannot export, one per class of failure aotipre reports
(tests/test_api_export_failures.py). Run as a script, it exports each with plain torch.export
in this fresh process and prints what torch raised, and what torch.export.draft_export reports
on the same module and inputs, as JSON: {"raised": {name: [exception types of the chain, first
message line]}, "drafted": {name: [[failure type, expression, result], ...] or "raised: Type"}}."""

from __future__ import annotations

import json
import random
import sys
import time

import torch


class ValueBranch(torch.nn.Module):
    """Branches on a tensor's value (non-strict: GuardOnDataDependentSymNode)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.sum() > 0:  # branch on a value
            return x + 1
        return x - 1


class SizeBranch(torch.nn.Module):
    """Branches on a data-dependent size (strict: UserError from GuardOnDataDependentSymNode)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n = x.nonzero().shape[0]
        return x[:n] if n > 2 else x  # branch on a size


class RandomScale(torch.nn.Module):
    """Calls Python's random (strict: a Dynamo graph break, torch._dynamo.exc.Unsupported)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * random.random()  # a graph break


class ToNumpy(torch.nn.Module):
    """Leaves torch through .numpy() (non-strict: RuntimeError)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.from_numpy(x.numpy() * 2)  # not traceable


class SlowAfterBranch(torch.nn.Module):
    """Branches on a value (export fails there), then sleeps: draft_export, which goes on past
    the branch, runs into the sleep (a draft that outlives its budget)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.sum() > -1e9:  # branch on a value
            time.sleep(600)
        return x


CASES = {
    "ValueBranch": (ValueBranch, False),
    "SizeBranch": (SizeBranch, True),
    "RandomScale": (RandomScale, True),
    "ToNumpy": (ToNumpy, False),
}
"""name -> (module class, strict)."""


def raised() -> dict[str, list[object]]:
    out: dict[str, list[object]] = {}
    for name, (cls, strict) in CASES.items():
        try:
            torch.export.export(cls(), (torch.randn(4),), strict=strict)
        except Exception as exc:
            chain, e = [], exc
            while e is not None:
                chain.append(type(e).__name__)
                e = e.__cause__ or e.__context__
            out[name] = [chain, str(exc).strip().splitlines()[0]]
        else:
            out[name] = [[], "exported"]
    return out


def drafted() -> dict[str, object]:
    out: dict[str, object] = {}
    for name, (cls, strict) in CASES.items():
        try:
            ep = torch.export.draft_export(cls(), (torch.ones(4),), strict=strict)
        except Exception as exc:
            out[name] = f"raised: {type(exc).__name__}"
        else:
            out[name] = [
                [f.failure_type.name, str(f.data.get("expr")), str(f.data.get("result"))]
                for f in ep._report.failures
            ]
    return out


if __name__ == "__main__":
    json.dump({"raised": raised(), "drafted": drafted()}, sys.stdout)
