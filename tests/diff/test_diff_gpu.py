"""`aotipre diff` on a real CUDA package pair (gpu marker; skipped without CUDA): one model
compiled by torch's default (a Triton cubin per kernel) and with
aot_inductor.emit_multi_arch_kernel=True (a fatbin per kernel), built by
tests/diff/build_cuda_pairs.py in a fresh process that also loads and runs both with plain torch.
The GPU-code rules each direction reports (SASS_ARCH_DROPPED/ADDED, PTX_DROPPED, PTX_RAISED) and
the exit code are derived from what cuobjdump says each package holds (the builder's
facts.json), not from constants."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.building import build

pytestmark = [pytest.mark.gpu, pytest.mark.slow]

BUILDER = Path(__file__).with_name("build_cuda_pairs.py")
GPU_RULES = ("SASS_ARCH_DROPPED", "SASS_ARCH_ADDED", "PTX_DROPPED", "PTX_RAISED")
"""The rules of the GPU code a package carries (aotipre/diff/rules.py)."""
BREAKING_GPU_RULES = {"SASS_ARCH_DROPPED", "PTX_DROPPED", "PTX_RAISED"}


@pytest.fixture(scope="module")
def cuda_pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """(folder with default.pt2 and multi.pt2, facts.json), or a skip saying why not."""
    out = build(BUILDER, tmp_path_factory.mktemp("cuda_pair"), timeout=600)
    facts = json.loads((out / "facts.json").read_text())
    print("facts:", json.dumps(facts, indent=1))  # for the closing note (-rA)
    if "skip" in facts:
        pytest.skip(facts["skip"])
    for name, entry in facts["packages"].items():
        if "error" in entry:
            pytest.skip(f"plain torch could not build or run {name}.pt2: {entry['error']}")
    return out, facts


def _sass(package: dict[str, Any]) -> set[str]:
    """The SASS architectures cuobjdump lists in the package's GPU members ('90a')."""
    return {s.removeprefix("sm_") for m in package["members"].values() for s in m["sass"]}


def _ptx_reach(package: dict[str, Any]) -> int | None:
    """The oldest compute capability (as 90) the package's portable PTX is JIT-compiled for: PTX
    for compute_XY runs on X.Y and every newer GPU (an arch-specific `a`/`f` target: its own only,
    not counted). None without such PTX."""
    targets = [
        p["target"].removeprefix("sm_") for m in package["members"].values() for p in m["ptx"]
    ]
    portable = [int(t) for t in targets if t.isdigit()]
    return min(portable) if portable else None


def _sass_runs_on(cc: int, archs: set[str]) -> bool:
    """Does SASS of one of `archs` run on compute capability `cc` (as 86)? sm_XY on X.Z with
    Z >= Y (sm_XYf too), sm_XYa on X.Y only (CUDA's binary compatibility rules)."""
    for arch in archs:
        number = int(arch.rstrip("af"))
        if arch.endswith("a") and cc == number:
            return True
        if not arch.endswith("a") and cc // 10 == number // 10 and cc >= number:
            return True
    return False


def _driver_need(package: dict[str, Any]) -> tuple[int, int] | None:
    """The driver the package's GPU code needs, as a PTX ISA version: its newest PTX ISA, and for
    SASS the first ISA of the CUDA major that made it (minor-version compatibility: SASS of CUDA
    N.x runs on any driver of N.0; PTX ISA (N-4).0 came with CUDA N.0)."""
    needs: list[tuple[int, int]] = []
    for member in package["members"].values():
        needs += [tuple(map(int, p["version"].split("."))) for p in member["ptx"]]  # type: ignore[misc]
        needs += [(int(r.split(".")[0]) - 4, 0) for r in member["release"]]
    return max(needs) if needs else None


def _expected_gpu_rules(old: dict[str, Any], new: dict[str, Any]) -> set[str]:
    """The GPU-code rules the cuobjdump facts call for, OLD -> NEW."""
    expected: set[str] = set()
    sass_old, sass_new = _sass(old), _sass(new)
    if sass_old - sass_new:
        expected.add("SASS_ARCH_DROPPED")
    elif sass_new - sass_old:
        expected.add("SASS_ARCH_ADDED")
    reach_old, reach_new = _ptx_reach(old), _ptx_reach(new)
    if reach_old is not None and (
        reach_new is None
        or any(not _sass_runs_on(cc, sass_new) for cc in range(reach_old, reach_new))
    ):
        expected.add("PTX_DROPPED")
    need_old, need_new = _driver_need(old), _driver_need(new)
    if need_old is not None and need_new is not None and need_new > need_old:
        expected.add("PTX_RAISED")
    return expected


def _diff(old: Path, new: Path, report: Path) -> tuple[int, list[dict[str, Any]]]:
    """`aotipre diff OLD NEW` in a fresh process: (exit code, findings of its JSON report)."""
    proc = subprocess.run(
        [sys.executable, "-m", "aotipre", "diff", str(old), str(new),
         "--format", "json", "--output", str(report)],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert report.is_file(), proc.stderr[-3000:]
    return proc.returncode, json.loads(report.read_text())["findings"]


def test_the_pair_is_real_and_cuobjdump_sees_its_gpu_code(
    cuda_pair: tuple[Path, dict[str, Any]],
) -> None:
    """Both packages give eager's outputs, and each has GPU code cuobjdump reads: the multi-arch
    one holds PTX (torch's emit_multi_arch_kernel), the default one none."""
    _, facts = cuda_pair
    default, multi = facts["packages"]["default"], facts["packages"]["multi"]
    for entry in (default, multi):
        assert entry["max_abs_gap"] < 1e-3, entry
        assert entry["members"] and _sass(entry), entry
    assert all(name.endswith(".fatbin") for name in multi["members"]), multi["members"]
    assert all(m["ptx"] for m in multi["members"].values()), multi["members"]
    assert not any(m["ptx"] for m in default["members"].values()), default["members"]


def test_aotipre_reads_each_member_as_cuobjdump_does(
    cuda_pair: tuple[Path, dict[str, Any]],
) -> None:
    """The images the diff compares are cuobjdump's, member by member: SASS `code for sm_XX`
    and PTX `.target sm_XX` (an arch-specific `sm_90a` target included)."""
    from aotipre.pt2.reader import read_package

    folder, facts = cuda_pair
    for name, entry in facts["packages"].items():
        (model,) = read_package(str(folder / f"{name}.pt2")).models
        assert model.aoti is not None and model.aoti.binaries is not None
        read = {
            g.member: sorted({f"{i.kind}:{i.arch}" for i in g.images})
            for g in model.aoti.binaries.gpu
        }
        said = {
            member: sorted(
                {f"sass:{s.removeprefix('sm_')}" for s in m["sass"]}
                | {f"ptx:{p['target'].removeprefix('sm_')}" for p in m["ptx"]}
            )
            for member, m in entry["members"].items()
        }
        assert read == said, name


@pytest.mark.parametrize("old, new", [("default", "multi"), ("multi", "default")])
def test_gpu_code_rules_follow_what_cuobjdump_says(
    cuda_pair: tuple[Path, dict[str, Any]], tmp_path: Path, old: str, new: str
) -> None:
    """Each direction reports exactly the GPU-code rules the facts call for, nothing breaking
    beyond them (same model, same weights), and exits 1 exactly when one is breaking."""
    folder, facts = cuda_pair
    expected = _expected_gpu_rules(facts["packages"][old], facts["packages"][new])
    rc, findings = _diff(folder / f"{old}.pt2", folder / f"{new}.pt2", tmp_path / "diff.json")
    rules = {f["message"].split(":", 1)[0]: f["severity"] == "error" for f in findings}
    print(old, "->", new, "expected", sorted(expected), "reported", rules)
    assert {r for r in rules if r in GPU_RULES} == expected, findings
    assert {r for r, breaking in rules.items() if breaking} == expected & BREAKING_GPU_RULES
    assert rc == (1 if expected & BREAKING_GPU_RULES else 0), findings
