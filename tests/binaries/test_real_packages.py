"""Packages compiled here through the public API with options that change the binaries (weights
on disk, a custom op, on CUDA multi-arch kernels): what aotipre reads from their members."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from aotipre.api import CheckOptions, check
from aotipre.environment.host import detect_local
from aotipre.findings import Severity, Verdict
from aotipre.pt2.reader import read_package

BUILDER = Path(__file__).with_name("build_packages.py")


def _build(tmp: Path, device: str) -> dict[str, str]:
    done = subprocess.run(
        [sys.executable, str(BUILDER), str(tmp), device],
        capture_output=True,
        text=True,
        timeout=1500,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def cpu_packages(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return _build(tmp_path_factory.mktemp("real-cpu"), "cpu")


@pytest.mark.slow
def test_cpu_packages_built_with_the_public_api(cpu_packages: dict[str, str]) -> None:
    for name, path in cpu_packages.items():
        assert not path.startswith("error"), (name, path)
        (model,) = read_package(path).models
        facts = model.aoti.binaries  # type: ignore[union-attr]
        assert facts is not None
        (so,) = facts.shared_objects
        assert so.error is None and so.machine is not None
        assert "libtorch_cpu.so" in so.needed and so.glibcxx is not None
        report = check(path, CheckOptions(static_only=True))
        codes = {f.code for f in report.findings}
        assert {"AOT051", "AOT052"} <= codes, name  # compiled-for ISA, producing torch
        (producer,) = [f for f in report.findings if f.code == "AOT052"]
        assert producer.actual == ["2.13"], producer.message
        assert report.targets[0]["status"] == "loads", report.targets
        # the torch it was built with, and the oldest supported one (measured: 2.13 CPU
        # packages load on 2.11), accept its shim imports
        for torch in ("2.11", "2.13"):
            there = check(path, CheckOptions(static_only=True, target=f"cpu,torch={torch}"))
            assert "AOT430" not in {f.code for f in there.findings}, (name, torch)
    custom = read_package(cpu_packages["custom_op"]).models[0]
    imports = custom.aoti.binaries.shared_objects[0].imports  # type: ignore[union-attr]
    assert "aoti_torch_proxy_executor_call_function" in imports


@pytest.mark.slow
def test_isa_gap_on_a_real_package(cpu_packages: dict[str, str]) -> None:
    host = detect_local(probe_cuda=False)
    if not host.cpu_flags or "avx512f" not in host.cpu_flags:
        pytest.skip("this machine compiles without AVX-512: no gap to a weaker target")
    report = check(cpu_packages["plain"], CheckOptions(static_only=True, target="cpu,isa=avx2"))
    sigill = [f for f in report.findings if f.code == "AOT436"]
    unused = [f for f in report.findings if f.code == "AOT437"]
    # -march=native with AVX-512 on: either the code uses it (SIGILL on AVX2) or it is harmless
    assert sigill or unused
    if sigill:
        assert report.verdict is Verdict.FAIL and sigill[0].severity is Severity.ERROR


@pytest.mark.gpu
def test_cuda_package_cubins_match_this_card(tmp_path: Path) -> None:
    """On the GPU machine: a CUDA package's cubins are read and matched against the card."""
    built = _build(tmp_path, "cuda")
    host = detect_local()
    assert host.compute_capabilities, "nvidia-smi gave no compute capability"
    cc = host.compute_capabilities[0]
    print("card", cc, "driver", host.driver, "built", built)
    plain = built["plain"]
    assert not plain.startswith("error"), plain
    (model,) = read_package(plain).models
    gpu = model.aoti.binaries.gpu  # type: ignore[union-attr]
    assert gpu and all(g.error is None for g in gpu), gpu
    images = sorted({i.label for g in gpu for i in g.images})
    print("images", images)
    report = check(plain, CheckOptions(static_only=True))  # this host is the target
    assert not [f for f in report.findings if f.code in ("AOT433", "AOT434")], report.findings
    # AOT053: the GPU code facts, the same images the reader found in the cubins
    (facts,) = [f for f in report.findings if f.code == "AOT053"]
    assert facts.actual == images and f"{len(gpu)} GPU code member(s) carry" in facts.message
    assert report.targets[0]["status"] == "loads", report.targets
    other = "8.0" if not cc.startswith("8.") else "9.0"
    elsewhere = check(plain, CheckOptions(static_only=True, target=f"cuda,cc={other}"))
    runs_there = any(i.runs_on(other) for g in gpu for i in g.images)
    assert ("AOT433" in {f.code for f in elsewhere.findings}) is not runs_there
    multi = built.get("multi_arch", "")
    print("multi_arch", multi)
    if multi and not multi.startswith("error"):
        (m,) = read_package(multi).models
        kinds = {i.kind for g in m.aoti.binaries.gpu for i in g.images}  # type: ignore[union-attr]
        print("multi_arch images", sorted({i.label for g in m.aoti.binaries.gpu for i in g.images}))  # type: ignore[union-attr]
        assert "ptx" in kinds
        fleet = check(multi, CheckOptions(static_only=True, target=f"cuda,cc={cc},{other}"))
        # CUDA's rule: SASS sm_XY runs on XY and later minors of that major (sm_XYa on XY only);
        # PTX compute_XY is JIT-compiled on XY and any later card, never on an older one.
        ptx = [int(i.arch.rstrip("a")) for g in m.aoti.binaries.gpu for i in g.images  # type: ignore[union-attr]
               if i.kind == "ptx"]  # fmt: skip
        sass = [i for g in m.aoti.binaries.gpu for i in g.images if i.kind == "sass"]  # type: ignore[union-attr]
        covered = min(ptx) <= int(other.replace(".", "")) or any(i.runs_on(other) for i in sass)
        assert ("AOT433" in {f.code for f in fleet.findings}) is not covered, fleet.findings
        on_card = check(multi, CheckOptions(static_only=True, target=f"cuda,cc={cc}"))
        assert "AOT433" not in {f.code for f in on_card.findings}, on_card.findings
