"""Several GPUs on one machine, for real (`gpu`: skipped without CUDA; the tests that need two
GPUs skip on a host with fewer): packages spread over the GPUs by -j, and a package that leaves
its GPU in a sticky error state (a device-side assert) followed by a healthy one on that GPU."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest

from aotipre.cli import main
from aotipre.fleet import gpus

pytestmark = pytest.mark.gpu


def manifest(tmp_path: Path, entries: list[tuple[str, Path, Path]]) -> Path:
    """A manifest of copies of fixture packages, named so that they run in the order given."""
    lines = []
    for name, package, inputs in entries:
        copy = tmp_path / f"{name}.pt2"
        shutil.copy(package, copy)
        lines += ["[[package]]", f'path = "{copy.name}"', f'inputs = "{inputs}"', ""]
    out = tmp_path / "packages.toml"
    out.write_text("\n".join(lines))
    return out


def check_json(capsys: pytest.CaptureFixture[str], tmp_path: Path, *args: str) -> dict:
    rc = main(["check", *args, "-f", "json", "--no-config", "--cache-dir", str(tmp_path / "c")])
    out = capsys.readouterr().out
    data = json.loads(out)
    assert rc == data["exit_code"]
    return data


def two_gpus() -> list[gpus.Gpu]:
    visible = gpus.visible_gpus()
    if len(visible) < 2:
        pytest.skip(f"needs two GPUs; nvidia-smi shows {len(visible)}")
    return visible


def test_four_cuda_packages_with_j2_use_both_gpus(
    cuda_fixture_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    visible = two_gpus()
    healthy = (cuda_fixture_dir / "aoti_cuda.pt2", cuda_fixture_dir / "aoti_inputs.pt")
    m = manifest(tmp_path, [(n, *healthy) for n in "abcd"])
    data = check_json(capsys, tmp_path, "--manifest", str(m), "-j", "2")
    reports = data["reports"]
    assert len(reports) == 4 and all(r["gpu"] is not None for r in reports), reports
    assert {r["gpu"]["uuid"] for r in reports} == {g.uuid for g in visible[:2]}
    for r in reports:
        run = [s for s in r["stages"] if s["name"] == "run"]
        assert run and run[0]["status"] == "passed", run
        assert run[0]["env"]["CUDA_VISIBLE_DEVICES"] == r["gpu"]["uuid"]


def test_a_sticky_error_does_not_poison_the_next_package_on_that_gpu(
    cuda_fixture_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`a` reads an embedding row out of bounds on the GPU (a device-side assert: the CUDA
    context is unusable from then on), `b` is healthy and runs next on the same GPU."""
    oob = ("embedding_oob_cuda.pt2", "embedding_oob_inputs.pt")
    healthy = ("aoti_cuda.pt2", "aoti_inputs.pt")
    m = manifest(
        tmp_path,
        [
            (name, *(cuda_fixture_dir / f for f in files))
            for name, files in (("a_oob", oob), ("b_healthy", healthy))
        ],
    )
    data = check_json(capsys, tmp_path, "--manifest", str(m), "--gpus", "0", "-j", "1")
    bad, good = data["reports"]
    assert bad["package_path"].endswith("a_oob.pt2")
    assert good["package_path"].endswith("b_healthy.pt2")
    assert bad["gpu"] == good["gpu"] and bad["gpu"]["index"] == 0
    assert any(f["stage"] == "run" for f in bad["findings"]), bad["findings"]  # it did crash
    stages = {s["name"]: s for s in good["stages"]}
    assert stages["load"]["status"] == "passed" and stages["run"]["status"] == "passed", stages
    assert not [f for f in good["findings"] if f["stage"] in ("load", "run", "compare")]


def test_two_gpus_take_at_most_0_6_of_the_serial_wall_time(
    cuda_fixture_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """4 CUDA packages: -j 2 over two GPUs against -j 1, both pinned (--gpus 0,1) so that each
    package does the same work (a pinned package skips the device-index stage), after a warm-up
    run (compile cache, canary cache, page cache)."""
    two_gpus()
    healthy = (cuda_fixture_dir / "aoti_cuda.pt2", cuda_fixture_dir / "aoti_inputs.pt")
    m = str(manifest(tmp_path, [(n, *healthy) for n in "abcd"]))
    check_json(capsys, tmp_path, "--manifest", m, "-j", "2", "--gpus", "0,1")  # warm-up
    took = {}
    for jobs in ("1", "2"):
        started = time.monotonic()
        data = check_json(capsys, tmp_path, "--manifest", m, "-j", jobs, "--gpus", "0,1")
        took[jobs] = time.monotonic() - started
        assert all(r["gpu"] is not None for r in data["reports"])
    ratio = took["2"] / took["1"]
    print(f"-j 1: {took['1']:.1f} s, -j 2: {took['2']:.1f} s, ratio {ratio:.2f}")
    assert ratio <= 0.6, took
