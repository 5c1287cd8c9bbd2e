"""Tests of scripts/build_fixtures.py: cache reuse, atomic writes, --jobs, and the fixtures it
makes."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import zipfile
import zlib
from pathlib import Path
from types import ModuleType

import pytest

from tests.conftest import BUILDER, REPO, read_manifest, run_builder

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


def test_a_zero_bomb_is_made_without_deflating_and_reads_back_whole(tmp_path: Path) -> None:
    """How broken_bomb gets its 2 GiB member without deflating or reading 2 GiB, on a small
    member: zipfile reads it back whole (checking its declared size and CRC)."""
    for nbytes in (0, 1, 12_345, (1 << 20) - 1, 1 << 20, 3 << 20, (5 << 20) + 7):
        assert builder.crc32_of_zeros(nbytes) == zlib.crc32(bytes(nbytes)), nbytes
    assert builder.crc32_combine(zlib.crc32(b"ab"), zlib.crc32(b"cde"), 3) == zlib.crc32(b"abcde")
    nbytes = 3 << 20
    stream = builder.deflated_zeros(nbytes)
    assert len(stream) < 8 * 1024
    src, dst = tmp_path / "src.pt2", tmp_path / "dst.pt2"
    with zipfile.ZipFile(src, "w") as zf:
        zf.writestr("src/archive_format", b"pt2")
    builder.rewrite_archive(src, dst)
    zeros = builder.crc32_of_zeros(nbytes)
    builder.append_deflated_member(dst, "dst/data/zeros.bin", stream, nbytes, zeros)
    with zipfile.ZipFile(dst) as zf:
        assert zf.testzip() is None  # every member read whole: sizes and CRCs
        assert zf.read("dst/archive_format") == b"pt2"
        info = zf.getinfo("dst/data/zeros.bin")
        assert (info.file_size, info.compress_type) == (nbytes, zipfile.ZIP_DEFLATED)
        assert zf.read(info) == bytes(nbytes)


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


# --- --jobs: the plan, then real builds of two small packages in child processes ---------


def _target(name: str, *shares: str, kind: str = "package", estimate: float = 0.0) -> object:
    depends = tuple(s.removeprefix("file:") for s in shares if kind == "broken")
    return builder.Target(
        name, kind, f"{name}.pt2", "", lambda o, d: None, depends, {}, shares, estimate
    )


def _names(plan: list) -> list[list[str]]:
    return [[t.name for t in job] for job in plan]


def test_plan_jobs_keeps_shared_work_together_and_balances() -> None:
    targets = [
        _target("ep_only", "export:mlp", "file:ep_only"),
        _target("aoti", "compile:token", "export:token", "file:aoti"),
        _target("both", "export:token", "compile:token", "file:both"),
        _target("derived", "compile:pair", "export:pair", "file:derived"),
        _target("weights", "compile:w", "export:token", "file:weights"),
        _target("broken_bomb", "file:ep_only", kind="broken", estimate=7.0),
    ]
    # estimates: token group 2 compiles + 1 export = 17, derived 9, ep_only + bomb 8
    assert _names(builder.plan_jobs(targets, {}, 2)) == [
        ["aoti", "both", "weights"],
        ["ep_only", "derived", "broken_bomb"],
    ]
    assert _names(builder.plan_jobs(targets, {}, 1)) == [[t.name for t in targets]]
    assert len(builder.plan_jobs(targets, {}, 8)) == 3
    seconds = {"ep_only": 30.0, "broken_bomb": 1.0, "aoti": 5.0, "both": 0.1, "weights": 5.0}
    seconds["derived"] = 5.0  # the manifest's seconds win over the estimates
    assert _names(builder.plan_jobs(targets, seconds, 2)) == [
        ["ep_only", "broken_bomb"],
        ["aoti", "both", "derived", "weights"],
    ]


def test_plan_jobs_groups_the_real_recipes_by_export_and_compile() -> None:
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    targets = [
        t
        for t in builder.all_targets("cpu", builder.TorchBuilder("cpu"))
        if t.kind == "package" or t.depends
    ]
    plan = builder.plan_jobs(targets, {}, 99)
    groups = {frozenset(t.name for t in job) for job in plan}
    token = {"aoti", "both", "multi", "mismatch", "weights_on_disk"}  # export:token
    assert token | {"broken_crc", "broken_truncated"} in groups
    from_ep_only = {"broken_escape", "broken_version", "broken_json", "broken_bomb"}
    assert {"ep_only", "broken_wrong_format"} | from_ep_only in groups
    assert {"derived"} in groups and {"strides"} in groups
    assert len(plan) == 7


def test_with_shared_adds_the_share_group_and_what_shares_nothing() -> None:
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    targets = builder.all_targets("cpu", builder.TorchBuilder("cpu"))
    shares_nothing = {t.name for t in targets if not t.shares}
    assert {"aoti_inputs", "broken_empty"} <= shares_nothing
    assert {t.name for t in builder.select(targets, ["both"])} == {"both"}
    selected = {t.name for t in builder.select(targets, ["both"], with_shared=True)}
    token = {"aoti", "both", "multi", "mismatch", "weights_on_disk"}  # export:token
    assert selected == token | {"broken_crc", "broken_truncated"} | shares_nothing
    selected = {t.name for t in builder.select(targets, ["broken_bomb"], with_shared=True)}
    assert selected == {"ep_only", "broken_bomb", "broken_escape", "broken_version"} | {
        "broken_json", "broken_wrong_format"
    } | shares_nothing  # fmt: skip


@pytest.mark.slow
def test_a_session_builds_only_the_fixtures_it_asks_for(tmp_path: Path) -> None:
    """`pkg` builds a fixture when first asked for, with its share group: a session asking for
    one cheap fixture compiles nothing (CI's other torch versions need a few of them)."""
    (tmp_path / "test_one.py").write_text(
        "def test_one(pkg):\n"
        "    assert pkg('broken_empty').stat().st_size == 0\n"
        "    assert pkg('aoti_inputs.pt').is_file()\n"
    )
    out = tmp_path / "fixtures"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "tests.conftest"]
        + ["--rootdir", str(tmp_path), "--basetemp", str(tmp_path / "t"), str(tmp_path)],
        cwd=REPO,
        env={**os.environ, "AOTIPRE_FIXTURE_DIR": str(out)},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    built = set(read_manifest(out))
    assert {"broken_empty", "aoti_inputs"} <= built
    assert not built & {"ep_only", "aoti", "both", "strides", "derived"}, sorted(built)


TWO = ("ep_only", "strides")
"""An export-only package and a small compile: two jobs, nothing shared."""


def _files(directory: Path) -> dict[str, int]:
    return {
        p.name: p.stat().st_size
        for p in directory.iterdir()
        if p.name not in ("manifest.json", builder.LOCK_FILE)
    }


def _processes_naming(path: Path) -> list[int]:
    """Processes (other than this one) with `path` on their command line."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if str(path).encode() in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def _assert_consistent(out: Path) -> dict[str, dict]:
    """The manifest lists files that are on disk with their sizes; nothing half-written."""
    assert not [p.name for p in out.iterdir() if p.name.startswith(".tmp-")]
    fixtures = read_manifest(out) if (out / "manifest.json").exists() else {}
    for entry in fixtures.values():
        for filename, size in entry["files"].items():
            assert (out / filename).stat().st_size == size
    return fixtures


@pytest.fixture(scope="module")
def serial_and_parallel(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, str]:
    """`--only ep_only strides` built by --jobs 1, then by --jobs 2, each with a new inductor
    cache at one path: torch writes that path into the package, and each compile of a graph
    appends its compile command to the cached source that the package copies."""
    serial = tmp_path_factory.mktemp("serial")
    parallel = tmp_path_factory.mktemp("parallel")
    cache = tmp_path_factory.mktemp("inductor") / "cache"
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(cache)}
    stderr = ""
    for out, jobs in ((serial, "1"), (parallel, "2")):
        shutil.rmtree(cache, ignore_errors=True)
        done = subprocess.run(
            [sys.executable, str(BUILDER), "--out", str(out), "--jobs", jobs, "--only", *TWO],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        assert Path(done.stdout.strip().splitlines()[-1]) == out
        stderr = done.stderr
    shutil.rmtree(cache, ignore_errors=True)
    return serial, parallel, stderr


@pytest.mark.slow
def test_parallel_build_writes_what_a_serial_build_writes(serial_and_parallel) -> None:
    serial, parallel, stderr = serial_and_parallel
    assert "building in job 1" in stderr and "building in job 2" in stderr
    assert re.search(r"^2 built, 0 up to date", stderr, re.MULTILINE), stderr
    assert set(_files(serial)) == {"ep_only.pt2", "strides.pt2"}
    assert _files(parallel) == _files(serial)
    ours, theirs = read_manifest(parallel), read_manifest(serial)
    assert set(ours) == set(theirs) == set(TWO)
    for name in TWO:
        assert ours[name].pop("seconds") > 0 and theirs[name].pop("seconds") > 0
        assert ours[name] == theirs[name]
        assert (parallel / f"{name}.pt2").read_bytes() == (serial / f"{name}.pt2").read_bytes()
    _assert_consistent(parallel)


@pytest.mark.slow
def test_parallel_second_run_is_up_to_date(serial_and_parallel) -> None:
    _, parallel, _ = serial_and_parallel
    before = {p.name: p.stat().st_mtime_ns for p in parallel.iterdir()}
    done = run_builder("--out", str(parallel), "--jobs", "2", "--only", *TWO, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert re.search(r"^0 built, 2 up to date", done.stderr, re.MULTILINE), done.stderr
    assert "building" not in done.stderr
    assert {p.name: p.stat().st_mtime_ns for p in parallel.iterdir()} == before


@pytest.mark.slow
def test_a_failed_job_stops_the_others(tmp_path: Path) -> None:
    (tmp_path / "ep_only.pt2" / "in-the-way").mkdir(parents=True)  # os.replace fails
    done = run_builder("--out", str(tmp_path), "--jobs", "2", "--only", *TWO, timeout=600)
    assert done.returncode == 1
    assert done.stdout == ""
    assert re.search(
        r"^build_fixtures.py: job \d \(ep_only\) failed with exit status 1", done.stderr, re.M
    )
    assert done.stderr.rstrip().splitlines()[-1].startswith("IsADirectoryError")
    assert "strides  built" not in done.stderr  # stopped mid-compile
    assert not _processes_naming(tmp_path)
    assert "strides" not in _assert_consistent(tmp_path)
    assert not (tmp_path / "strides.pt2").exists()


@pytest.mark.slow
def test_sigterm_stops_the_jobs_and_keeps_what_finished(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, str(BUILDER), "--out", str(tmp_path), "--jobs", "2", "--only", *TWO],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines = []
    try:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.append(line)
            if re.match(r"\[ ?\d+/\d+\] ep_only +built in", line):
                proc.send_signal(signal.SIGTERM)  # strides is still compiling
                break
        proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == -signal.SIGTERM, "".join(lines)
    assert not _processes_naming(tmp_path)
    fixtures = _assert_consistent(tmp_path)
    assert set(fixtures) == {"ep_only"}
    assert not (tmp_path / "strides.pt2").exists()
    done = run_builder("--out", str(tmp_path), "--only", "ep_only", timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert re.search(r"^0 built, 1 up to date", done.stderr, re.MULTILINE), done.stderr


def test_jobs_must_be_at_least_one() -> None:
    done = run_builder("--jobs", "0", "--list", timeout=120)
    assert done.returncode == 2 and "--jobs must be at least 1" in done.stderr


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
