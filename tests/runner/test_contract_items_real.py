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

import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.building import build, check_json

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
torch.export.save(ep, f"{out}/head_ep.pt2")
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

    ep = str(built / "head_ep.pt2")
    _, doc = check_json(tmp_path, str(package), "--static-only", "--exported-program", ep)
    flagged = [f for f in doc["findings"] if f["code"] == "AOT309"]
    (model,) = doc["package"]["models"]
    (value,) = model["data_dependent_values"]
    if past.startswith("ran"):
        # the value past torch._check(k <= 8) runs: 12 rows out of an 8-row input
        assert past == "ran (12, 4)" and option != "none"
        assert len(flagged) == 1 and "u0" in flagged[0]["message"], doc["findings"]
        # the range the ExportedProgram declares (torch._check(k >= 1), (k <= 8)), named
        assert flagged[0]["expected"] == "1 <= u0 <= 8", flagged
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

    rc, doc = check_json(
        tmp_path, str(package), "--inputs", str(built / "over.pt"), "--static-only"
    )
    refused = [f for f in doc["findings"] if f["code"] == "AOT304"]
    if over.startswith("refused"):  # export's max 32 is in the compiled code
        assert "dim value is too large" in over and option == "none"
        assert refused and rc == 1, doc["findings"]
        return
    assert over == "ran (40,)" and option != "none"
    assert not refused and rc == 0, doc["findings"]

    rc, doc = check_json(
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
from torch.utils._pytree import tree_leaves
m = torch._inductor.aoti_load_package(sys.argv[1])
(x, *rest), _ = torch.load(sys.argv[2])
buf = torch.empty(x.numel() + 1, dtype=x.dtype)
view = buf[1:].view(x.shape)
view.copy_(x)
try:
    pairs = zip(tree_leaves(m(view, *rest)), tree_leaves(m(x, *rest)))
    print("same" if all(torch.equal(a, b) for a, b in pairs) else "differ")
except Exception as exc:
    print("refused", str(exc).strip().splitlines()[-1])
"""


def test_an_input_one_element_into_its_storage_is_probed(
    pkg: Callable[[str], Path], tmp_path: Path
) -> None:
    """A slice of a batch (`buf[1:]`, storage offset 1) of the first input of a public-API
    package (ids into an embedding): the probe's verdict is the fresh process's (CPU code reads
    it as it is)."""
    package, sample = pkg("aoti"), pkg("aoti_inputs")
    env = {k: v for k, v in os.environ.items() if not k.startswith("TORCHINDUCTOR_")}
    proc = subprocess.run(
        [sys.executable, "-c", OFFSET, str(package), str(sample)],
        capture_output=True, text=True, timeout=600, check=False,
        env={**env, "AOTI_RUNTIME_CHECK_INPUTS": "1"},
    )  # fmt: skip
    plain = proc.stdout.strip().splitlines()[-1]

    rc, doc = check_json(tmp_path, str(package), "--inputs", str(sample))
    (probe,) = [s for s in doc["stages"] if s["name"] == "probe"]
    offset = [f for f in doc["findings"] if f["code"] == "AOT616"]
    if plain == "same":
        assert "args[0] at storage offset 1: same outputs as aligned" in probe["detail"], probe
        assert not offset and rc == 0, doc["findings"]
    else:
        assert len(offset) == 1, (plain, doc["findings"])


CUDA_ROWS = """
import os, sys, torch
out, arch = sys.argv[1], sys.argv[2]
if arch != "none":
    os.environ["TORCH_CUDA_ARCH_LIST"] = arch
class Rows(torch.nn.Module):
    def forward(self, x):
        return (x * 2 + 1).sum(1)
x = torch.randn(8, 16, device="cuda")
ep = torch.export.export(Rows(), (x,), dynamic_shapes=({0: torch.export.Dim("B", min=2, max=32)},))
configs = {} if arch == "none" else {"aot_inductor.emit_multi_arch_kernel": True}
torch._inductor.aoti_compile_and_package(ep, package_path=f"{out}/rows.pt2", inductor_configs=configs)
torch.save(((x.cpu(),), {}), f"{out}/sample.pt")
"""

CUDA_OFFSET = OFFSET.replace("dtype=x.dtype)", "dtype=x.dtype, device='cuda')").replace(
    "(x, *rest), _ = torch.load(sys.argv[2])",
    "(x, *rest), _ = torch.load(sys.argv[2]); x = x.cuda()",  # the rows model: no other input
)
assert CUDA_OFFSET.count("cuda") == 2


@pytest.mark.gpu
def test_cuda_an_input_one_element_into_its_storage(tmp_path: Path) -> None:
    """CUDA code assumes 16-byte aligned inputs: the wrapper copies a misaligned one (torch
    2.11-2.15's default); plain torch's outputs for `buf[1:]` are the aligned input's, and the
    probe says so (a torch 2.15 build with alignment_asserts_inputs would refuse it instead)."""
    from aotipre.pt2.reader import read_package

    built = build(CUDA_ROWS, tmp_path, "none")
    package = built / "rows.pt2"
    env = {k: v for k, v in os.environ.items() if not k.startswith("TORCHINDUCTOR_")}
    proc = subprocess.run(
        [sys.executable, "-c", CUDA_OFFSET, str(package), str(built / "sample.pt")],
        capture_output=True, text=True, timeout=600, check=False, env=env,
    )  # fmt: skip
    plain = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else proc.stderr[-2000:]
    (spec,) = read_package(str(package)).models[0].tensor_inputs
    print("plain:", plain, "alignment:", spec.tensor.alignment, spec.tensor.alignment_policy)
    rc, doc = check_json(tmp_path, str(package), "--inputs", str(built / "sample.pt"))
    (probe,) = [s for s in doc["stages"] if s["name"] == "probe"]
    print(probe["detail"])
    if plain == "same":
        assert "args[0] at storage offset 1: same outputs as aligned" in probe["detail"], probe
        assert not [f for f in doc["findings"] if f["code"] == "AOT616"], doc["findings"]
    else:
        assert [f for f in doc["findings"] if f["code"] == "AOT616"], (plain, doc["findings"])


@pytest.mark.gpu
def test_cuda_arch_list_below_the_compile_gpu(tmp_path: Path) -> None:
    """TORCH_CUDA_ARCH_LIST="8.0;9.0" with emit_multi_arch_kernel, built on this GPU: the GPU
    code aotipre reads per kernel decides `--target cuda,cc=8.0` (AOT433 exactly when no kernel
    image runs on 8.0). What this torch kept is printed for the closing note (2.14+ drops the
    entries below the compile GPU)."""
    built = build(CUDA_ROWS, tmp_path, "8.0;9.0")
    package = built / "rows.pt2"
    _, doc = check_json(tmp_path, str(package), "--static-only", "--target", "cuda,cc=8.0")
    (model,) = doc["package"]["models"]
    gpu = model["aoti"]["binaries"]["gpu"]
    labels = sorted({f"{i['kind']}:{i['arch']}" for g in gpu for i in g["images"]})
    print("compile cc", model["aoti"]["compute_capability"], "images", labels)
    runs_on_80 = all(
        any(
            (i["kind"] == "sass" and i["arch"].startswith("8") and i["arch"] <= "80")
            or (
                i["kind"] == "ptx"
                and i["arch"].rstrip("af").isdigit()
                and int(i["arch"].rstrip("af")) <= 80
            )
            for i in g["images"]
        )
        for g in gpu
    )
    stuck = [f for f in doc["findings"] if f["code"] == "AOT433"]
    assert bool(stuck) is (not runs_on_80), (labels, stuck)
