"""Tests of scripts/build_fixtures.py: cache reuse, atomic writes, and the fixtures it makes."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
import time
import zipfile
from pathlib import Path
from types import ModuleType

import pytest

from tests.conftest import BUILDER, read_manifest, run_builder

GiB = 1024**3


def _load_builder() -> ModuleType:
    """Import the builder as a module; it imports only the stdlib at module level."""
    spec = importlib.util.spec_from_file_location("build_fixtures", BUILDER)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up here
    spec.loader.exec_module(module)
    return module


builder = _load_builder()


# --- torch-free unit tests -------------------------------------------------------------


def test_atomic_output_keeps_the_old_file_when_the_write_fails(tmp_path: Path) -> None:
    dest = tmp_path / "aoti.pt2"
    dest.write_bytes(b"old")
    with pytest.raises(RuntimeError, match="interrupted"):
        with builder.atomic_output(dest) as tmp:
            assert tmp.name == dest.name  # torch names the archive root after the file
            assert tmp.parent != dest.parent
            tmp.write_bytes(b"half a package")
            raise RuntimeError("interrupted")
    assert dest.read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["aoti.pt2"]


def test_atomic_output_moves_the_file_into_place(tmp_path: Path) -> None:
    dest = tmp_path / "sub" / "x.pt"
    with builder.atomic_output(dest) as tmp:
        tmp.write_bytes(b"new")
        assert not dest.exists()
    assert dest.read_bytes() == b"new"
    assert sorted(p.name for p in dest.parent.iterdir()) == ["x.pt"]


def test_atomic_output_refuses_a_block_that_wrote_nothing(tmp_path: Path) -> None:
    dest = tmp_path / "x.pt2"
    with pytest.raises(RuntimeError, match="wrote nothing"):
        with builder.atomic_output(dest):
            pass
    assert list(tmp_path.iterdir()) == []


def test_build_key_changes_with_sources_torch_version_and_device(tmp_path: Path) -> None:
    source = tmp_path / "models.py"
    source.write_text("a = 1\n")
    key = builder.build_key("2.13.0", "cpu", (source,))
    assert builder.build_key("2.13.0", "cpu", (source,)) == key
    assert builder.build_key("2.11.0", "cpu", (source,)) != key
    assert builder.build_key("2.13.0", "cuda", (source,)) != key
    source.write_text("a = 2\n")
    assert builder.build_key("2.13.0", "cpu", (source,)) != key


def test_select_adds_dependencies_in_build_order() -> None:
    def target(name: str, *depends: str) -> object:
        return builder.Target(name, "package", f"{name}.pt2", "", lambda o, d: None, depends)

    targets = [target("ep_only"), target("aoti"), target("broken_crc", "aoti")]
    assert [t.name for t in builder.select(targets, ["broken_crc"])] == ["aoti", "broken_crc"]
    with pytest.raises(SystemExit, match="unknown fixture"):
        builder.select(targets, ["nope"])


# --- the built fixtures ----------------------------------------------------------------


def test_second_run_builds_nothing(fixture_dir: Path) -> None:
    before = {p.name: p.stat().st_mtime_ns for p in fixture_dir.iterdir()}
    start = time.perf_counter()
    proc = run_builder("--out", str(fixture_dir), timeout=120)
    elapsed = time.perf_counter() - start
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert re.search(r"^0 built, \d+ up to date", proc.stderr, re.MULTILINE), proc.stderr
    assert "building" not in proc.stderr
    assert Path(proc.stdout.strip().splitlines()[-1]) == fixture_dir
    assert elapsed < 30, f"an up-to-date run took {elapsed:.1f} s"
    after = {p.name: p.stat().st_mtime_ns for p in fixture_dir.iterdir()}
    assert after == before


def test_manifest_lists_exactly_the_files_on_disk(fixture_dir: Path) -> None:
    fixtures = read_manifest(fixture_dir)
    listed = {}
    for entry in fixtures.values():
        listed.update(entry["files"])
    on_disk = {
        p.name: p.stat().st_size
        for p in fixture_dir.iterdir()
        if p.name not in ("manifest.json", builder.LOCK_FILE)
    }
    assert on_disk == listed  # sizes match, and no .tmp-* leftovers
    assert {"ep_only", "aoti", "both", "multi", "weights_on_disk", "broken_bomb"} <= set(fixtures)


def test_good_packages_hold_what_their_recipe_says(fixture_dir: Path) -> None:
    for name, entry in read_manifest(fixture_dir).items():
        if entry["kind"] != "package":
            continue
        (filename,) = entry["files"]
        with zipfile.ZipFile(fixture_dir / filename) as zf:
            names = set(zf.namelist())
            root = Path(filename).stem
            assert {n.split("/")[0] for n in names} == {root}, name
            assert zf.read(f"{root}/archive_format") == b"pt2"
            assert zf.read(f"{root}/archive_version") == b"0"
            for model, parts in entry["models"].items():
                has_ep = f"{root}/models/{model}.json" in names
                has_inputs = f"{root}/data/sample_inputs/{model}.pt" in names
                aoti_dir = f"{root}/data/aotinductor/{model}/"
                sos = [n for n in names if n.startswith(aoti_dir) and n.endswith(".so")]
                assert has_ep == has_inputs == bool(parts["exported"]), (name, model)
                assert len(sos) == bool(parts["compiled"]), (name, model)
            weights_config = f"{root}/data/aotinductor/model/weights_config.json"
            assert (weights_config in names) == (name == "weights_on_disk"), name


def test_bomb_is_small_on_disk_but_declares_gigabytes(pkg) -> None:
    path = pkg("broken_bomb")
    assert path.stat().st_size < 8 * 1024**2
    with zipfile.ZipFile(path) as zf:
        biggest = max(zf.infolist(), key=lambda info: info.file_size)
    assert biggest.file_size > GiB
    assert biggest.compress_type == zipfile.ZIP_DEFLATED


def test_truncated_package_is_not_a_valid_zip(pkg) -> None:
    path = pkg("broken_truncated")
    assert path.stat().st_size > 0
    assert not zipfile.is_zipfile(path)
    with pytest.raises(zipfile.BadZipFile):
        zipfile.ZipFile(path)


def test_crc_corruption_is_caught_by_testzip(pkg) -> None:
    with zipfile.ZipFile(pkg("aoti")) as zf:
        assert zf.testzip() is None
    with zipfile.ZipFile(pkg("broken_crc")) as zf:
        bad = zf.testzip()
    assert bad is not None and bad.endswith(".so")


def test_escape_package_names_paths_outside_the_archive(pkg) -> None:
    with zipfile.ZipFile(pkg("broken_escape")) as zf:
        names = zf.namelist()
    assert "../../evil" in names and "/abs/path" in names


def test_metadata_breakages(pkg) -> None:
    with zipfile.ZipFile(pkg("broken_version")) as zf:
        assert zf.read("broken_version/archive_version") == b"99"
    with zipfile.ZipFile(pkg("broken_wrong_format")) as zf:
        assert zf.read("broken_wrong_format/archive_format") != b"pt2"
    with zipfile.ZipFile(pkg("broken_plain_zip")) as zf:
        assert not any(n.endswith("archive_format") for n in zf.namelist())
    assert pkg("broken_empty").stat().st_size == 0
    assert not zipfile.is_zipfile(pkg("broken_not_zip"))


def test_sample_input_files_load_weights_only_except_the_bad_ones(fixture_dir: Path) -> None:
    import pickle

    import torch

    for name, entry in read_manifest(fixture_dir).items():
        if entry["kind"] != "inputs":
            continue
        (filename,) = entry["files"]
        path = fixture_dir / filename
        if name in ("inputs_numpy", "inputs_garbage"):
            with pytest.raises((pickle.UnpicklingError, RuntimeError, IndexError, EOFError)):
                torch.load(path, weights_only=True, map_location="cpu")
            continue
        args, kwargs = torch.load(path, weights_only=True, map_location="cpu")
        assert isinstance(args, tuple) and isinstance(kwargs, dict), name
    unsafe = torch.serialization.get_unsafe_globals_in_checkpoint(fixture_dir / "inputs_numpy.pt")
    assert any(g.startswith("numpy") for g in unsafe)


_RUN_BOTH_AND_MISMATCH = """
import sys, torch
from torch.export.pt2_archive._package import load_pt2
args, kwargs = torch.load(sys.argv[1] + "/aoti_inputs.pt", weights_only=True)
out = {}
for name in ("both", "mismatch"):
    c = load_pt2(sys.argv[1] + f"/{name}.pt2")
    out[name] = (c.exported_programs["model"].module()(*args, **kwargs),
                 c.aoti_runners["model"](*args, **kwargs))
ep, aoti = out["both"]
torch.testing.assert_close(ep, aoti)
ep_shifted, aoti_same = out["mismatch"]
torch.testing.assert_close(aoti_same, aoti)
torch.testing.assert_close(ep_shifted - aoti_same, torch.ones_like(aoti))
print("ok")
"""


@pytest.mark.slow
def test_both_agrees_and_mismatch_differs_by_one(fixture_dir: Path) -> None:
    """Loads real .so files: in a child process, so a crash cannot take pytest down."""
    proc = subprocess.run(
        [sys.executable, "-c", _RUN_BOTH_AND_MISMATCH, str(fixture_dir)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0 and proc.stdout.strip().endswith("ok"), proc.stderr[-3000:]
