"""AOT308 follows an index wherever Inductor fuses its gather (a vectorised kernel with other
ops, Python's wrap-around of negative ids): the static verdict on each sample is what plain torch
does with it in a process of its own, forked from a fresh one that loaded the package (the
compiled model refuses it, or runs it as eager does)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.building import build

pytestmark = pytest.mark.slow

BUILD = r"""
import sys, torch
out = sys.argv[1]
class Gather(torch.nn.Module):  # table[ids]: fused with mul/add/sigmoid, vectorised on the ids
    def __init__(self):
        super().__init__()
        self.scale = torch.nn.Parameter(torch.randn(100))
    def forward(self, ids, x):
        return torch.sigmoid(self.scale[ids] * x + 1.0)
class Embed(torch.nn.Module):  # an embedding: a negative id is out of range
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(100, 64)
    def forward(self, ids):
        return torch.relu(self.emb(ids) * 2.0)
torch.manual_seed(0)
ids, x = torch.randint(0, 100, (4, 64)), torch.randn(4, 64)
for name, model, args in (("gather", Gather(), (ids, x)), ("embed", Embed(), (ids[:, :8].contiguous(),))):
    ep = torch.export.export(model.eval(), args)
    torch._inductor.aoti_compile_and_package(ep, package_path=f"{out}/{name}.pt2")
    torch.save(model.state_dict(), f"{out}/{name}.weights.pt")
    for label, value in (("ok", 7), ("past", 150), ("neg", -5), ("far_neg", -150)):
        bad = args[0].clone()
        bad[1, 3] = value
        torch.save((bad, *args[1:]), f"{out}/{name}_{label}.pt")
"""

PLAIN = r"""
import json, os, sys, torch
out = sys.argv[1]
facts = {}
for name in ("gather", "embed"):
    model = torch._inductor.aoti_load_package(f"{out}/{name}.pt2")  # loaded, never called here
    for label in ("ok", "past", "neg", "far_neg"):
        args = torch.load(f"{out}/{name}_{label}.pt")
        # each call in a child of its own (forked from this fresh process, which has loaded
        # the package but never called it): a refused index may abort the process
        pid = os.fork()
        if pid == 0:
            try:
                model(*args)
                code = 0
            except BaseException:
                code = 1
            os._exit(code)
        _, status = os.waitpid(pid, 0)
        facts[f"{name}_{label}"] = os.waitstatus_to_exitcode(status) == 0
print(json.dumps(facts))
"""


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, bool]]:
    out = tmp_path_factory.mktemp("fused_index")
    build(BUILD, out)
    proc = subprocess.run(
        [sys.executable, "-c", PLAIN, str(out)], capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out, json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("package", ["gather", "embed"])
@pytest.mark.parametrize("sample", ["ok", "past", "neg", "far_neg"])
def test_static_index_verdict_is_what_plain_torch_does(
    built: tuple[Path, dict[str, bool]], package: str, sample: str
) -> None:
    out, runs = built
    proc = subprocess.run(
        [
            sys.executable, "-m", "aotipre", "check", str(out / f"{package}.pt2"),
            "-i", str(out / f"{package}_{sample}.pt"), "--static-only", "--no-config",
            "--format", "json",
        ],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    report = json.loads(proc.stdout)
    found = [f for f in report["findings"] if f["code"] == "AOT308"]
    plain_runs = runs[f"{package}_{sample}"]
    assert bool(found) is (not plain_runs), (package, sample, plain_runs, found)
    if found:
        assert found[0]["actual"] == {"past": 150, "neg": -5, "far_neg": -150}[sample]
        assert found[0]["expected"] == ("-100..99" if package == "gather" else "0..99")
