"""Contract items a compile option removes from the generated code, on packages built through
the public API (torch.export + aoti_compile_and_package) by each torch installed here, every
expectation being what plain torch does with the package in a fresh process:

- a value read from an input at run time (`k = n.max().item()`) that sizes a tensor, compiled
  without its scalar range asserts (torch 2.15's unsafe_skip_scalar_range_asserts, or
  scalar_asserts=False in any release): plain torch runs a value past the model's torch._check
  without an error and returns garbage; aotipre says so statically (AOT309);
- a dynamic dim compiled with torch 2.15's aot_inductor.check_upperbound=False: no "dim value is
  too large" check, so the runtime check takes an input over export's max; aotipre's probe says
  the contract has no maximum and runs a size past the sample's.

Slow (real compiles); the 2.15 cases are skipped without .venv-2.15 (bash .ci/run builds it).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.building import build

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
TORCH215 = REPO / ".venv-2.15" / "bin" / "python"
needs_215 = pytest.mark.skipif(
    not TORCH215.is_file() or Path(sys.prefix).resolve() == TORCH215.parents[1].resolve(),
    reason="no .venv-2.15 (bash .ci/run builds it), or running in it already",
)

DATA = """
import sys, torch
out, option = sys.argv[1], sys.argv[2]
class Head(torch.nn.Module):
    def forward(self, x, n):
        k = n.max().item()
        torch._check(k >= 1)
        torch._check(k <= 8)
        return x[:k] * 2
x = torch.randn(8, 4)
ep = torch.export.export(Head(), (x, torch.tensor([3, 1])))
configs = {} if option == "none" else {option: option != "scalar_asserts"}
torch._inductor.aoti_compile_and_package(ep, package_path=f"{out}/head.pt2", inductor_configs=configs)
torch.save(((x, torch.tensor([3, 1])), {}), f"{out}/within.pt")
torch.save(((x, torch.tensor([12, 1])), {}), f"{out}/past.pt")
"""

DYNAMIC = """
import sys, torch
out, option = sys.argv[1], sys.argv[2]
class Rows(torch.nn.Module):
    def forward(self, x):
        return (x * 2 + 1).sum(1)
x = torch.randn(8, 16)
ep = torch.export.export(Rows(), (x,), dynamic_shapes=({0: torch.export.Dim("B", min=2, max=32)},))
configs = {} if option == "none" else {option: False}
torch._inductor.aoti_compile_and_package(ep, package_path=f"{out}/rows.pt2", inductor_configs=configs)
torch.save(((x,), {}), f"{out}/sample.pt")
torch.save(((torch.randn(40, 16),), {}), f"{out}/over.pt")
"""

PLAIN = """
import sys, torch
m = torch._inductor.aoti_load_package(sys.argv[1])
args, kwargs = torch.load(sys.argv[2])
try:
    out = m(*args, **kwargs)
    print("ran", tuple(out.shape))
except Exception as exc:
    print("refused", str(exc).splitlines()[0])
"""


def _plain(python: Path | str, package: Path, inputs: Path) -> str:
    """What a deployment on that torch does, the runtime input check on."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TORCHINDUCTOR_")}
    proc = subprocess.run(
        [str(python), "-c", PLAIN, str(package), str(inputs)],
        capture_output=True, text=True, timeout=600, check=False,
        env={**env, "AOTI_RUNTIME_CHECK_INPUTS": "1"},
    )  # fmt: skip
    lines = proc.stdout.strip().splitlines()
    assert lines, proc.stderr[-3000:]
    return lines[-1]


def _aotipre(tmp: Path, *args: str) -> tuple[int, dict]:
    out = tmp / f"report-{len(list(tmp.glob('report-*')))}.json"
    proc = subprocess.run(
        [
            sys.executable, "-m", "aotipre", "check", *args, "--no-config",
            "--format", "json", "--output", str(out), "--cache-dir", str(tmp / "cache"),
        ],
        capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip
    assert out.is_file(), proc.stderr[-3000:]
    return proc.returncode, json.loads(out.read_text())


DATA_CASES = [
    pytest.param(sys.executable, "none", id="this-torch-default"),
    pytest.param(sys.executable, "scalar_asserts", id="this-torch-scalar_asserts=False"),
    pytest.param(
        TORCH215, "unsafe_skip_scalar_range_asserts", id="2.15-unsafe_skip", marks=needs_215
    ),
]


@pytest.mark.parametrize(("python", "option"), DATA_CASES)
def test_an_unchecked_data_dependent_size_is_flagged_where_torch_runs_it(
    python: str | Path, option: str, tmp_path: Path
) -> None:
    built = build(DATA, tmp_path, option, python=python)
    package = built / "head.pt2"
    past = _plain(python, package, built / "past.pt")
    assert _plain(python, package, built / "within.pt") == "ran (3, 4)"

    _, doc = _aotipre(tmp_path, str(package), "--static-only")
    flagged = [f for f in doc["findings"] if f["code"] == "AOT309"]
    (model,) = doc["package"]["models"]
    (value,) = model["data_dependent_values"]
    if past.startswith("ran"):
        # the value past torch._check(k <= 8) runs: 12 rows out of an 8-row input
        assert past == "ran (12, 4)" and option != "none"
        assert len(flagged) == 1 and "u0" in flagged[0]["message"], doc["findings"]
        assert value["sizes_tensor"] and not value["range_checked"]
    else:
        assert past == "refused Expected u0 <= 8 but received 12" and option == "none"
        assert not flagged, flagged
        assert value["range_checked"] and "u0 <= 8" in value["checks"]


@needs_215
@pytest.mark.parametrize("option", ["none", "aot_inductor.check_upperbound"])
def test_a_dim_without_an_upper_check_is_probed_past_the_sample(
    option: str, tmp_path: Path
) -> None:
    built = build(DYNAMIC, tmp_path, option, python=TORCH215)
    package = built / "rows.pt2"
    over = _plain(TORCH215, package, built / "over.pt")

    rc, doc = _aotipre(tmp_path, str(package), "--inputs", str(built / "over.pt"), "--static-only")
    refused = [f for f in doc["findings"] if f["code"] == "AOT304"]
    if over.startswith("refused"):  # export's max 32 is in the compiled code
        assert "dim value is too large" in over and option == "none"
        assert refused and rc == 1, doc["findings"]
        return
    assert over == "ran (40,)" and option != "none"
    assert not refused and rc == 0, doc["findings"]

    rc, doc = _aotipre(
        tmp_path, str(package), "--inputs", str(built / "sample.pt"),
        "--python", str(TORCH215),
    )  # fmt: skip
    (probe,) = [s for s in doc["stages"] if s["name"] == "probe"]
    assert "no maximum in the contract" in probe["detail"], probe
    # twice the sample's 8 rows, past nothing the compiled code checks: it runs
    assert re.search(r"\bs\d+=16 \[args\[0\] dim 0\]: ok", probe["detail"]), probe
    assert probe["status"] == "passed" and rc == 0, doc["findings"]


OFFSET = """
import sys, torch
m = torch._inductor.aoti_load_package(sys.argv[1])
(x,), _ = torch.load(sys.argv[2])
buf = torch.empty(x.numel() + 1, dtype=x.dtype)
view = buf[1:].view(x.shape)
view.copy_(x)
try:
    print("same" if torch.equal(m(view), m(x)) else "differ")
except Exception as exc:
    print("refused", str(exc).strip().splitlines()[-1])
"""


def test_an_input_one_element_into_its_storage_is_probed(tmp_path: Path) -> None:
    """A slice of a batch (`buf[1:]`, storage offset 1) is what plain torch makes of it: the
    probe's verdict is the fresh process's (CPU code reads it as it is)."""
    built = build(DYNAMIC, tmp_path, "none")
    package = built / "rows.pt2"
    env = {k: v for k, v in os.environ.items() if not k.startswith("TORCHINDUCTOR_")}
    proc = subprocess.run(
        [sys.executable, "-c", OFFSET, str(package), str(built / "sample.pt")],
        capture_output=True, text=True, timeout=600, check=False,
        env={**env, "AOTI_RUNTIME_CHECK_INPUTS": "1"},
    )  # fmt: skip
    plain = proc.stdout.strip().splitlines()[-1]

    rc, doc = _aotipre(tmp_path, str(package), "--inputs", str(built / "sample.pt"))
    (probe,) = [s for s in doc["stages"] if s["name"] == "probe"]
    offset = [f for f in doc["findings"] if f["code"] == "AOT616"]
    if plain == "same":
        assert "args[0] at storage offset 1: same outputs as aligned" in probe["detail"], probe
        assert not offset and rc == 0, doc["findings"]
    else:
        assert len(offset) == 1, (plain, doc["findings"])
