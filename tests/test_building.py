"""tests/building.py's shared builds: one build per builder source, arguments and torch, reused
by every module that asks for the same one; a failed build leaves nothing to reuse."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from aotipre.runner.cache import default_cache_dir
from tests import building

BUILDER = """
import pathlib, sys
out = pathlib.Path(sys.argv[1])
runs = out.parent.parent / "runs.txt"  # outside the shared folders: counts the builder's runs
runs.write_text((runs.read_text() if runs.exists() else "") + " ".join(sys.argv[2:]) + "\\n")
if sys.argv[2:] == ["fail"]:
    (out / "half.txt").write_text("written before the failure")
    sys.exit("the builder failed")
(out / "built.txt").write_text(" ".join(sys.argv[2:]))
"""


@pytest.fixture
def shared(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A builder script whose runs are counted; the shared builds kept under `tmp_path`."""
    monkeypatch.setattr(building, "SHARED_BUILDS", tmp_path / "builds")
    script = tmp_path / "builder.py"
    script.write_text(BUILDER)
    return script


def runs(shared: Path) -> list[str]:
    runs_file = shared.parent / "builds" / "runs.txt"
    return runs_file.read_text().splitlines() if runs_file.exists() else []


def test_the_same_build_is_built_once_and_shared(shared: Path) -> None:
    first = building.shared_build(shared, "a")
    assert (first / "built.txt").read_text() == "a"
    assert building.shared_build(shared, "a") == first
    assert runs(shared) == ["a"]
    other = building.shared_build(shared, "b")  # other arguments: another build
    assert other != first and (other / "built.txt").read_text() == "b"
    assert runs(shared) == ["a", "b"]


def test_a_changed_builder_or_source_is_built_again(shared: Path, tmp_path: Path) -> None:
    first = building.shared_build(shared, "a")
    imported = tmp_path / "models.py"
    imported.write_text("X = 1\n")
    with_source = building.shared_build(shared, "a", sources=(imported,))
    imported.write_text("X = 2\n")
    changed_source = building.shared_build(shared, "a", sources=(imported,))
    shared.write_text(BUILDER + "\n# changed\n")
    changed_builder = building.shared_build(shared, "a")
    assert len({first, with_source, changed_source, changed_builder}) == 4
    assert runs(shared) == ["a"] * 4


def test_another_compile_environment_is_built_again(
    shared: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A simulated AVX2 host (scripts/simulate_host.sh) compiles other code: not the host's."""
    monkeypatch.delenv("ATEN_CPU_CAPABILITY", raising=False)
    host = building.shared_build(shared, "a")
    monkeypatch.setenv("ATEN_CPU_CAPABILITY", "avx2")
    assert building.shared_build(shared, "a") != host
    assert runs(shared) == ["a", "a"]


def test_a_failed_build_leaves_nothing_to_reuse(shared: Path) -> None:
    for _ in range(2):
        with pytest.raises(AssertionError, match="the builder failed"):
            building.shared_build(shared, "fail")
    assert runs(shared) == ["fail", "fail"]  # built again: the failure was not kept
    (home,) = (shared.parent / "builds").glob("torch-*")
    assert sorted(p.name for p in home.iterdir()) == [".build.lock"]


def test_aotipres_default_cache_is_the_runs_own(tmp_path_factory: pytest.TempPathFactory) -> None:
    """tests/conftest.py: a check without --cache-dir, here or in a child (a CLI run), caches
    in the run's base temp folder, never in the user's ~/.cache/aotipre."""
    base = tmp_path_factory.getbasetemp()
    run = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    code = "from aotipre.runner.cache import default_cache_dir as d; print(d())"
    child = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    for where in (Path(child.stdout.strip()), Path(default_cache_dir())):
        assert where.is_relative_to(run / "cache-home"), where
