"""A model's own data-dependent bound (torch._check on `idx.item()`), built through the public
API: plain torch refuses a value past it with `Expected u0 <= 16 but received 20`; aotipre
reports that as the input's value against the bound (AOT615), not as a kernel crash."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from aotipre.api import CheckOptions, check
from aotipre.runner.stages import DynamicOptions
from tests.building import build

pytestmark = pytest.mark.slow

BUILD = """
import sys, torch
out = sys.argv[1]
class Head(torch.nn.Module):
    def forward(self, x, n):
        k = n.item()
        torch._check(k >= 1)
        torch._check(k <= 16)
        return x[:k] * 2
x = torch.randn(32, 3)
ep = torch.export.export(Head(), (x, torch.tensor(4)))
torch._inductor.aoti_compile_and_package(ep, package_path=f"{out}/head.pt2")
torch.save(((x, torch.tensor(4)), {}), f"{out}/within.pt")
torch.save(((x, torch.tensor(20)), {}), f"{out}/past.pt")
"""

PLAIN = """
import sys, torch
m = torch._inductor.aoti_load_package(sys.argv[1] + "/head.pt2")
(x, n), _ = torch.load(sys.argv[1] + "/past.pt")
try:
    m(x, n)
    print("ran")
except Exception as exc:
    print(exc)
"""


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("bound")
    return build(BUILD, out)


def _check(built: Path, inputs: str):  # type: ignore[no-untyped-def]
    dynamic = DynamicOptions(timeout_s=120.0, perf=None, probe=False)
    return check(
        str(built / "head.pt2"),
        CheckOptions(inputs=str(built / inputs), dynamic=dynamic, canary=False),
    )


def test_a_value_past_the_models_bound_is_named_not_triaged(built: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", PLAIN, str(built)], capture_output=True, text=True, timeout=300
    )
    plain = proc.stdout.strip().splitlines()[-1]
    assert "Expected u0 <= 16 but received 20" in plain, proc.stderr[-2000:]

    report = _check(built, "past.pt")

    (f,) = [f for f in report.findings if f.code == "AOT615"]
    assert f.expected == "u0 <= 16" and f.actual == 20
    # the one-element integer input holding 20: the model's second argument (`n`, named by its
    # place in an AOTI-only package)
    assert f.input == "args[1]" and "input 'args[1]' holds 20" in f.message
    assert not [f for f in report.findings if f.code in ("AOT602", "AOT801", "AOT802")]
    assert not [s for s in report.stages if s.name.startswith("triage")]
    assert report.exit_code == 1


def test_a_value_within_the_bound_passes(built: Path) -> None:
    report = _check(built, "within.pt")
    assert report.exit_code == 0, [f.message for f in report.findings]
