"""`aotipre diff` on real pairs that differ in what they need from the deployment host
(tests/diff/build_runtime_pairs.py, built through the public API): the same model compiled by
torch 2.13 (this venv) and by torch 2.15 (CI's .venv-2.15), compiled with inductor's defaults
and pinned to plain x86-64, and with a 3-D grid_sample added (a shim function of 2.13). Each
verdict is held against plain torch (a fresh process
that loads NEW and runs OLD's caller's inputs) or, where this host cannot show the failure
(SIGILL on an older CPU), against the machine code itself (objdump).

GLIBCXX/CXXABI stays on rewritten binaries (tests/diff/test_rules.py): this machine has one
C++ toolchain (g++ 12, libstdc++ GLIBCXX_3.4.30), so no real pair needs another version.
Slow (four compiles, shared through tests/building.shared_build); the 2.15 case is skipped
without a torch 2.15 environment."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from aotipre.diff.gate import diff_packages
from tests.building import shared_build

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
BUILDER = Path(__file__).with_name("build_runtime_pairs.py")
CI_CACHE = Path(
    os.environ.get("AOTIPRE_CI_CACHE")
    or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "aotipre-ci"
)
TORCH215 = next(
    (
        p
        for p in (
            REPO / ".venv-2.15" / "bin" / "python",
            CI_CACHE / "venv-torch-2.15.0" / "bin" / "python",
        )
        if p.is_file()
    ),
    None,
)
"""CI's torch 2.15 (.ci/run links it as .venv-2.15; its cache folder otherwise)."""

PLAIN_RUN = """
import sys, torch
pkg, inputs, outputs = sys.argv[1:4]
args, kwargs = torch.load(inputs, weights_only=True)
expected = torch.load(outputs, weights_only=True)["default"]
try:
    got = torch._inductor.aoti_load_package(pkg)(*args, **kwargs)
except Exception as exc:
    print("fails", type(exc).__name__, *str(exc).splitlines()[:1])
else:
    same = got.shape == expected.shape and torch.allclose(got, expected)
    print("runs right" if same else "runs wrong")
"""
"""What a deployment on this torch sees: a fresh `import torch`, aoti_load_package, OLD's
caller's inputs, the answer compared with OLD's."""


def _rules(findings: list) -> dict[str, bool]:
    """rule id -> breaking, from the findings' messages (`RULE_ID: ...`) and severities."""
    return {f.message.split(":", 1)[0]: f.severity.value == "error" for f in findings}


def _extract_so(pkg: Path, tmp: Path) -> Path:
    """The package's one .so, written under `tmp` (objdump reads files)."""
    so = tmp / f"{pkg.stem}.so"
    if not so.is_file():
        with zipfile.ZipFile(pkg) as archive:
            (member,) = [n for n in archive.namelist() if n.endswith(".so")]
            so.write_bytes(archive.read(member))
    return so


def _plain_run(python: str | Path, pkg: Path, old: Path) -> str:
    """`runs right`, `runs wrong` or `fails ...`: `pkg` loaded by `python`'s torch and called
    with the inputs of OLD's build folder `old`, compared with OLD's outputs."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TORCHINDUCTOR_", "AOTI_"))}
    proc = subprocess.run(
        [str(python), "-c", PLAIN_RUN, str(pkg), str(old / "inputs.pt"), str(old / "outputs.pt")],
        capture_output=True, text=True, timeout=600, check=False, env=env,
    )  # fmt: skip
    lines = proc.stdout.strip().splitlines()
    return lines[-1] if lines else f"fails: exit {proc.returncode}: {proc.stderr[-300:]}"


@pytest.fixture(scope="module")
def built213() -> Path:
    return shared_build(BUILDER, "--pinned-isa", "--grid-sampler-3d")


# -- minimum torch/libtorch: the same model compiled by 2.13 (OLD) and by 2.15 (NEW)


@pytest.mark.skipif(
    TORCH215 is None or Path(sys.prefix).resolve() == TORCH215.parents[1].resolve(),
    reason="no torch 2.15 environment (bash .ci/run builds .venv-2.15), or running in it",
)
def test_a_newer_torchs_build_needs_no_newer_libtorch_and_plain_2_13_runs_it(
    built213: Path,
) -> None:
    """torch 2.15's package imports other aoti_* shim functions than 2.13's (measured:
    aoti_torch_dtype_element_size and aoti_torch_is_defined more), all of which 2.13's
    libtorch exports: the minimum libtorch does not rise, and a fresh 2.13 process loads NEW
    and gives OLD's caller OLD's answers. No deployment rule may call the pair breaking."""
    assert TORCH215 is not None
    built215 = shared_build(BUILDER, python=TORCH215)
    old, new = built213 / "default.pt2", built215 / "default.pt2"
    torch_said = _plain_run(sys.executable, new, built213)
    forward = diff_packages(old, new)
    assert forward.error is None
    rules = _rules(forward.findings)
    assert not any(r.startswith("LIBTORCH_MIN_") for r in rules), rules
    assert any(rules.values()) == (torch_said != "runs right"), (rules, torch_said)
    assert torch_said == "runs right"
    # and back: a deployment on 2.15 that ran NEW loses nothing with OLD's build
    backward = diff_packages(new, old)
    assert not any(r.startswith("LIBTORCH_MIN_") for r in _rules(backward.findings))


SHIM_HEADERS = "include/torch/csrc/inductor/aoti_torch/generated"
GATE = re.compile(r"#if TORCH_FEATURE_VERSION >= TORCH_VERSION_(\d+)_(\d+)_\d+")


def _shim_gate(function: str) -> str | None:
    """The release this torch's generated C shim headers gate `function` behind (`#if
    TORCH_FEATURE_VERSION >= TORCH_VERSION_2_13_0` -> "2.13"); None when ungated or absent."""
    spec = importlib.util.find_spec("torch")  # finds the package without importing it
    assert spec is not None and spec.origin is not None
    for header in sorted((Path(spec.origin).parent / SHIM_HEADERS).glob("c_shim_*.h")):
        gate = None
        for line in header.read_text().splitlines():
            if match := GATE.match(line):
                gate = f"{match[1]}.{match[2]}"
            elif line.startswith("#endif"):
                gate = None
            elif re.search(rf"\b{function}\(", line):
                return gate
    return None


def _so_imports(pkg: Path, tmp: Path) -> set[str]:
    """The dynamic symbols the package's .so leaves undefined, as objdump -T lists them."""
    text = subprocess.run(
        ["objdump", "-T", str(_extract_so(pkg, tmp))],
        capture_output=True, text=True, timeout=120, check=True,
    ).stdout  # fmt: skip
    return {line.split()[-1] for line in text.splitlines() if "*UND*" in line}


@pytest.mark.skipif(shutil.which("objdump") is None, reason="no objdump (binutils)")
def test_a_shim_function_of_a_later_release_raises_the_minimum_libtorch(
    built213: Path, tmp_path: Path
) -> None:
    """default.pt2 -> grid_sampler_3d.pt2 (the same interface, a 3-D grid_sample added): NEW's
    .so imports aoti_torch_cpu_grid_sampler_3d, which torch's own shim header gates behind
    TORCH_VERSION_2_13_0, so a libtorch older than that cannot resolve it: LIBTORCH_MIN_RAISED
    to that release, breaking for a deployment that runs OLD on an older one. This torch (2.13)
    loads and runs NEW (its answers differ from OLD's: the model changed)."""
    old, new = built213 / "default.pt2", built213 / "grid_sampler_3d.pt2"
    function = "aoti_torch_cpu_grid_sampler_3d"
    assert function in _so_imports(new, tmp_path) - _so_imports(old, tmp_path)
    gate = _shim_gate(function)
    assert gate is not None
    report = diff_packages(old, new)
    assert report.error is None
    assert _rules(report.findings) == {"LIBTORCH_MIN_RAISED": True, "WEIGHT_ADDED": False}
    (raised,) = [f for f in report.findings if f.message.startswith("LIBTORCH_MIN_RAISED")]
    assert raised.actual == gate and function in raised.message
    assert not _plain_run(sys.executable, new, built213).startswith("fails")
    back = diff_packages(new, old)
    assert _rules(back.findings) == {"LIBTORCH_MIN_LOWERED": False, "WEIGHT_REMOVED": True}


# -- CPU ISA: one program compiled with inductor's defaults and pinned to plain x86-64

AVX_OPERAND = re.compile(r"%[yz]mm\d|\bv[a-z0-9]+\s+.*%xmm\d")
"""An instruction objdump prints with a ymm/zmm register, or a VEX/EVEX (v-prefixed) one on
xmm registers: AVX or later, which a CPU without it refuses (SIGILL)."""


def _avx_instructions(pkg: Path, tmp: Path) -> int:
    """How many instructions of the package's .so objdump decodes as AVX or later."""
    text = subprocess.run(
        ["objdump", "-d", "--no-show-raw-insn", str(_extract_so(pkg, tmp))],
        capture_output=True, text=True, timeout=120, check=True,
    ).stdout  # fmt: skip
    return sum(1 for line in text.splitlines() if AVX_OPERAND.search(line))


@pytest.mark.skipif(shutil.which("objdump") is None, reason="no objdump (binutils)")
def test_pinning_the_cpu_isa_lowers_it_and_unpinning_raises_it(
    built213: Path, tmp_path: Path
) -> None:
    """default.pt2 -> baseline_isa.pt2: plain torch runs both with the same answers here, and
    the pinned .so holds no AVX instruction, so any x86-64 host runs it: CPU_ISA_LOWERED,
    compatible (torch writes AOTI_CPU_ISA=INVALID_VEC_ISA for it: no vector ISA, nothing more
    to need). The other way, NEW holds the AVX code the host it was built on offers: a host
    without it dies with SIGILL, so CPU_ISA_RAISED is breaking."""
    default, pinned = built213 / "default.pt2", built213 / "baseline_isa.pt2"
    facts = json.loads((built213 / "facts.json").read_text())
    assert facts["same_outputs"]["baseline_isa"]  # plain torch: the same answers
    assert _avx_instructions(pinned, tmp_path) == 0

    lowered = diff_packages(default, pinned)
    assert lowered.error is None
    assert _rules(lowered.findings) == {"CPU_ISA_LOWERED": False}
    (finding,) = lowered.findings
    assert finding.code == "AOT490" and finding.actual == []
    assert lowered.exit_code == 0

    if _avx_instructions(default, tmp_path) == 0:
        pytest.skip("this host offers no AVX: inductor's default build is baseline code too")
    raised = diff_packages(pinned, default)
    assert _rules(raised.findings) == {"CPU_ISA_RAISED": True}
    (finding,) = raised.findings
    assert finding.expected == [] and "avx" in finding.actual
    assert raised.exit_code == 1
