"""An output pytree type the serving process never registered is a Python-side failure
(AOT809), not a kernel crash: no kernel hint, no triage (issue 11).

Ground truth, measured with torch 2.13.0+cpu in a fresh process that does not import the
registering module: `aoti_load_package(path)(x)` raises
`NotImplementedError: Deserializing mylib_outputs.Out in pytree is not registered.`
(test_plain_torch_fails_the_same_way re-measures it).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from aotipre.runner.classify import classify_run_failure
from tests.gate.conftest import without_facts

LIB = """
import dataclasses, torch
@dataclasses.dataclass
class Out:
    logits: torch.Tensor
    hidden: torch.Tensor
torch.utils._pytree.register_dataclass(Out, serialized_type_name="mylib_outputs.Out")
"""

BUILD = """
import sys, torch
sys.path.insert(0, sys.argv[1])
from mylib_outputs import Out
class M(torch.nn.Module):
    def __init__(self):
        super().__init__(); self.lin = torch.nn.Linear(8, 4)
    def forward(self, x):
        return Out(logits=self.lin(x), hidden=x * 2)
ep = torch.export.export(M(), (torch.randn(3, 8),))
torch._inductor.aoti_compile_and_package(ep, package_path=sys.argv[2])
torch.save(((torch.randn(3, 8),), {}), sys.argv[3])
"""

PLAIN = """
import sys, torch
m = torch._inductor.aoti_load_package(sys.argv[1])
args, kwargs = torch.load(sys.argv[2])
try:
    m(*args, **kwargs)
    print("RAN")
except Exception as e:
    print("RAISED", type(e).__name__, e)
"""


def test_classified_as_python_side_with_the_type() -> None:
    fail = classify_run_failure(
        exc_type="NotImplementedError",
        message="Deserializing transformers.modeling_outputs.BaseModelOutput in pytree is not "
        "registered.",
    )
    assert fail.kind == "unregistered_pytree" and fail.kernel is None
    assert fail.extra["type"] == "transformers.modeling_outputs.BaseModelOutput"
    other = classify_run_failure(exc_type="RuntimeError", message="something else")
    assert other.kind == "exception"


@pytest.fixture(scope="module")
def package(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Built through the public API in a process that registers the output type."""
    d = tmp_path_factory.mktemp("pytree")
    (d / "mylib_outputs.py").write_text(textwrap.dedent(LIB))
    pkg, inputs = d / "dc.pt2", d / "dc_inputs.pt"
    subprocess.run(
        [sys.executable, "-c", BUILD, str(d), str(pkg), str(inputs)], check=True, cwd=d.parent
    )
    return pkg, inputs


@pytest.mark.slow
def test_plain_torch_fails_the_same_way(package: tuple[Path, Path]) -> None:
    pkg, inputs = package
    out = subprocess.run(
        [sys.executable, "-c", PLAIN, str(pkg), str(inputs)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "RAISED NotImplementedError Deserializing mylib_outputs.Out" in out


@pytest.mark.slow
def test_check_says_which_library_and_does_not_triage(package: tuple[Path, Path]) -> None:
    from aotipre.pt2.reader import read_package
    from aotipre.runner.stages import DynamicOptions, run_dynamic_stages

    pkg, inputs = package
    info = read_package(pkg)
    crashes: list[object] = []
    results, findings = run_dynamic_stages(
        info,
        info.models[0],
        str(inputs),
        None,
        DynamicOptions(probe=False, use_cache=False),
        on_run_crash=crashes.append,
    )
    assert [f.code for f in without_facts(findings)] == ["AOT809"]
    assert "'mylib_outputs'" in findings[0].message
    assert "not a kernel crash" in findings[0].message
    assert crashes == []  # no triage
    run = next(r for r in results if r.name == "run")
    assert run.status.value == "failed"
