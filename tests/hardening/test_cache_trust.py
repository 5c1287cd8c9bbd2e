"""Caches are verified before what they hold is executed or loaded (issue #30): the C++ harness
cache (a manifest sealed after the build; owner, permissions, hashes checked before a worker may
run an entry) and the compile cache (entry.json; owner, permissions, links)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from aotipre.cpp import harness
from aotipre.runner import cache as cache_mod
from aotipre.runner import launch

# A stand-in for the worker's cpp_build / cpp_run steps with the real worker's cache logic
# (aotipre/runner/worker/cpp.py build_harness): the entry `harness-<key>` is run if it holds an
# executable binary, else one is built in a `.tmp-` folder and renamed into place.
FAKE_WORKER = r"""
import hashlib, json, os, shutil, subprocess, sys, tempfile
job = json.load(open(sys.argv[1]))
done = {}
for step in job["steps"]:
    if step["op"] == "cpp_build":
        root = step["cache_root"]
        ident = json.loads(os.environ["FAKE_IDENT"])
        key = hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:24]
        final = os.path.join(root, "harness-" + key)
        binary = os.path.join(final, "aotipre_harness")
        entry = {"status": "ok", "binary": binary, "key": key, "cached": True}
        if not (os.path.isfile(binary) and os.access(binary, os.X_OK)):
            os.makedirs(root, exist_ok=True)
            tmp = tempfile.mkdtemp(prefix=".tmp-harness-", dir=root)
            with open(os.path.join(tmp, "aotipre_harness"), "w") as f:
                f.write("#!/bin/sh\necho built-by-aotipre\n")
            os.chmod(os.path.join(tmp, "aotipre_harness"), 0o755)
            with open(os.path.join(tmp, "build.json"), "w") as f:
                json.dump({**ident, "command": ["g++"], "build_s": 0.1}, f, indent=1)
            try:
                os.rename(tmp, final)
            except OSError:
                shutil.rmtree(tmp)
            entry["cached"] = False
        done[step["id"]] = entry
    elif step["op"] == "cpp_run":
        binary = done["cpp_build"]["binary"]
        out = subprocess.run([binary], capture_output=True, text=True)
        done[step["id"]] = {"status": "ok", "stdout": out.stdout.strip()}
with open(os.environ["AOTIPRE_RESULT_PATH"], "w") as f:
    json.dump({"steps": done, "done": True}, f)
"""

IDENT: dict[str, Any] = {
    "exe": "/usr/bin/g++",
    "version": "g++ (fake) 12",
    "abi": 1,
    "torch": "2.13.0",
    "torch_file": "/fake/torch/__init__.py",
    "libs": ["torch", "torch_cpu", "c10"],
    "protocol": 1,
    "source": hashlib.sha256(Path(harness.SOURCE).read_bytes()).hexdigest(),
}
KEY = harness.harness_digest(IDENT)[:24]


class Run:
    """Jobs of [cpp_build, cpp_run] through launch.run_job_file, as every worker job runs."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp = tmp_path
        self.cache = tmp_path / "cache"
        self.root = self.cache / harness.CACHE_SUBDIR
        self.entry = self.root / f"harness-{KEY}"
        self.worker = tmp_path / "fake_worker.py"
        self.worker.write_text(FAKE_WORKER)
        self.count = 0

    def __call__(self) -> dict[str, Any]:
        self.count += 1
        workdir = self.tmp / f"work{self.count}"
        workdir.mkdir(mode=0o700)
        root = harness.cache_root(str(self.cache), True, str(workdir))
        job = {
            "tag": "cpp",
            "workdir": str(workdir),
            "steps": [
                harness.build_step(root),
                {"id": "cpp_run", "op": "cpp_run", "requires": ["cpp_build"]},
            ],
        }
        env = {**os.environ, "FAKE_IDENT": json.dumps(IDENT)}
        _, outcome = launch.run_job_file(
            job, lambda path: (sys.executable, str(self.worker), path), env=env, budget_s=60
        )
        assert outcome.ok, outcome.summary + outcome.stderr_tail
        assert outcome.result is not None
        steps: dict[str, Any] = outcome.result["steps"]
        return steps


def plant(entry: Path, marker: Path) -> None:
    """Another executable at the harness cache's predictable path."""
    entry.mkdir(parents=True)
    binary = entry / harness.BINARY
    binary.write_text(f"#!/bin/sh\ntouch {marker}\necho planted\n")
    binary.chmod(0o755)
    (entry / harness.BUILD_RECORD).write_text(json.dumps({**IDENT, "command": []}))


def age(path: Path, seconds: float) -> None:
    then = time.time() - seconds
    os.utime(path, (then, then))


# --- the harness cache, through the job launcher -------------------------------------------------


def test_a_planted_harness_is_never_run(tmp_path: Path) -> None:
    run, marker = Run(tmp_path), tmp_path / "planted-ran"
    plant(run.entry, marker)
    # fresh and this user's, it could be another aotipre's build in progress: left alone, the
    # job builds its own
    steps = run()
    assert not marker.exists()
    assert steps["cpp_run"]["stdout"] == "built-by-aotipre"
    assert "has no manifest" in steps["cpp_build"]["cache_ignored"]
    assert not steps["cpp_build"]["binary"].startswith(str(run.root))
    # older than any build in progress: moved away, rebuilt in its place and sealed
    age(run.entry, harness.IN_FLIGHT_S + 60)
    steps = run()
    assert not marker.exists()
    assert steps["cpp_build"]["cached"] is False and "cache_ignored" not in steps["cpp_build"]
    assert steps["cpp_run"]["stdout"] == "built-by-aotipre"
    assert harness.entry_problem(str(run.entry)) is None
    assert not [n for n in os.listdir(run.root) if n.startswith(".tmp-")]
    # the sealed entry is used as it is
    steps = run()
    assert steps["cpp_build"]["cached"] is True and steps["cpp_run"]["stdout"] == "built-by-aotipre"


def _sealed(tmp_path: Path) -> Run:
    run = Run(tmp_path)
    assert run()["cpp_build"]["cached"] is False
    assert (run.entry / harness.MANIFEST).is_file()
    assert harness.entry_problem(str(run.entry)) is None
    return run


def test_a_sealed_entry_holds_the_hashes_of_its_inputs_and_files(tmp_path: Path) -> None:
    run = _sealed(tmp_path)
    manifest = json.loads((run.entry / harness.MANIFEST).read_text())
    assert manifest["kind"] == "cpp-harness" and manifest["key"] == KEY
    assert manifest["inputs"] == {
        "source_sha256": IDENT["source"],
        "toolchain_sha256": harness.harness_digest(IDENT),
    }
    binary = run.entry / harness.BINARY
    assert manifest["files"][harness.BINARY] == {
        "size": binary.stat().st_size,
        "sha256": hashlib.sha256(binary.read_bytes()).hexdigest(),
    }
    assert set(manifest["files"]) == {harness.BINARY, harness.BUILD_RECORD}


@pytest.mark.parametrize(
    "tamper, words",
    [
        ("binary_replaced", "is not the file that was built"),
        ("binary_group_writable", "writable by group or others"),
        ("folder_world_writable", "writable by group or others"),
        ("binary_symlink", "is a symbolic link"),
        ("extra_file", "does not hold what its manifest lists"),
        ("record_changed", "not the file that was built"),
        ("manifest_garbled", "cannot be read"),
    ],
)
def test_a_tampered_entry_is_rebuilt_never_run(tmp_path: Path, tamper: str, words: str) -> None:
    run, marker = _sealed(tmp_path), tmp_path / "planted-ran"
    binary = run.entry / harness.BINARY
    evil = tmp_path / "evil"
    evil.write_text(f"#!/bin/sh\ntouch {marker}\necho planted\n")
    evil.chmod(0o755)
    if tamper == "binary_replaced":
        binary.write_text(evil.read_text())
    elif tamper == "binary_group_writable":
        binary.write_text(evil.read_text())
        binary.chmod(0o775)
        manifest = json.loads((run.entry / harness.MANIFEST).read_text())
        manifest["files"][harness.BINARY] = cache_mod.file_record(str(binary))
        (run.entry / harness.MANIFEST).write_text(json.dumps(manifest))
    elif tamper == "folder_world_writable":
        run.entry.chmod(0o777)
    elif tamper == "binary_symlink":
        binary.unlink()
        binary.symlink_to(evil)
    elif tamper == "extra_file":
        (run.entry / "libc10.so").write_text("")
    elif tamper == "record_changed":
        (run.entry / harness.BUILD_RECORD).write_text(json.dumps({**IDENT, "exe": "/evil"}))
    elif tamper == "manifest_garbled":
        (run.entry / harness.MANIFEST).write_text('{"files": ')
    why = harness.entry_problem(str(run.entry))
    assert why is not None and words in why, why
    steps = run()
    assert not marker.exists()
    assert steps["cpp_build"]["cached"] is False and "cache_ignored" not in steps["cpp_build"]
    assert steps["cpp_run"]["stdout"] == "built-by-aotipre"
    assert harness.entry_problem(str(run.entry)) is None
    assert stat.S_IMODE(binary.lstat().st_mode) & 0o022 == 0


def test_a_cache_folder_others_may_write_is_not_used(tmp_path: Path) -> None:
    run = _sealed(tmp_path)
    run.root.chmod(0o777)
    steps = run()
    assert "writable by group or others" in steps["cpp_build"]["cache_ignored"]
    assert not steps["cpp_build"]["binary"].startswith(str(run.root))
    run.root.chmod(0o1777)  # sticky, as /tmp: nobody may replace another's entry
    assert run()["cpp_build"]["cached"] is True


@pytest.mark.skipif(os.getuid() != 0, reason="chown to another user needs root")
def test_an_entry_of_another_user_is_not_run(tmp_path: Path) -> None:
    run, marker = _sealed(tmp_path), tmp_path / "planted-ran"
    binary = run.entry / harness.BINARY
    binary.write_text(f"#!/bin/sh\ntouch {marker}\necho planted\n")
    manifest = json.loads((run.entry / harness.MANIFEST).read_text())
    manifest["files"][harness.BINARY] = cache_mod.file_record(str(binary))
    (run.entry / harness.MANIFEST).write_text(json.dumps(manifest))
    assert harness.entry_problem(str(run.entry)) is None  # consistent, and ours
    os.chown(binary, 4321, -1)
    assert "owned by uid 4321" in (harness.entry_problem(str(run.entry)) or "")
    steps = run()
    assert not marker.exists() and steps["cpp_run"]["stdout"] == "built-by-aotipre"


def test_a_build_record_that_does_not_hash_to_the_key_is_not_sealed(tmp_path: Path) -> None:
    run = Run(tmp_path)
    assert run()["cpp_build"]["cached"] is False
    (run.entry / harness.MANIFEST).unlink()
    (run.entry / harness.BUILD_RECORD).write_text(json.dumps({**IDENT, "torch": "other"}))
    entry = {
        "status": "ok",
        "cached": False,
        "key": KEY,
        "binary": str(run.entry / "aotipre_harness"),
    }
    harness.seal_build({"cache_root": str(run.root)}, entry)
    assert not (run.entry / harness.MANIFEST).exists()
    # and a step's binary outside its cache root is never sealed
    harness.seal_build({"cache_root": str(tmp_path / "elsewhere")}, entry)
    assert not (run.entry / harness.MANIFEST).exists()


# --- the compile cache ---------------------------------------------------------------------------


def _entry(tmp_path: Path, umask: int = 0o022) -> tuple[cache_mod.CompileCache, Path]:
    c = cache_mod.CompileCache(str(tmp_path / "cc"))
    old = os.umask(umask)
    try:
        pending = c.begin("k")
        Path(pending.package).write_bytes(b"a compiled package")
        entry = c.commit(pending)
    finally:
        os.umask(old)
    assert c.lookup("k") == entry
    return c, Path(entry.directory)


def test_committed_entries_are_private_even_with_a_group_umask(tmp_path: Path) -> None:
    c, entry = _entry(tmp_path, umask=0o002)
    for path in (entry, entry / cache_mod.PACKAGE_FILE, entry / cache_mod.ENTRY_FILE):
        assert stat.S_IMODE(path.stat().st_mode) & 0o022 == 0, path
    assert stat.S_IMODE((tmp_path / "cc").stat().st_mode) == 0o700


@pytest.mark.parametrize(
    "tamper", ["package_group_writable", "record_world_writable", "folder_group_writable"]
)
def test_a_compile_cache_entry_others_may_write_is_not_loaded(tmp_path: Path, tamper: str) -> None:
    c, entry = _entry(tmp_path)
    target = {
        "package_group_writable": entry / cache_mod.PACKAGE_FILE,
        "record_world_writable": entry / cache_mod.ENTRY_FILE,
        "folder_group_writable": entry,
    }[tamper]
    target.chmod(stat.S_IMODE(target.stat().st_mode) | 0o022)
    assert c.lookup("k") is None
    assert "writable by group or others" in (cache_mod.entry_problem(str(entry), "k") or "")
    # the next compile replaces it whole
    pending = c.begin("k")
    Path(pending.package).write_bytes(b"recompiled")
    fresh = c.commit(pending)
    assert c.lookup("k") == fresh and Path(fresh.package).read_bytes() == b"recompiled"


def test_a_compile_cache_package_that_is_a_link_is_not_loaded(tmp_path: Path) -> None:
    c, entry = _entry(tmp_path)
    package = entry / cache_mod.PACKAGE_FILE
    elsewhere = tmp_path / "elsewhere.pt2"
    elsewhere.write_bytes(package.read_bytes())
    package.unlink()
    package.symlink_to(elsewhere)
    assert c.lookup("k") is None


def test_a_compile_cache_others_may_write_is_not_used(tmp_path: Path) -> None:
    c, _ = _entry(tmp_path)
    (tmp_path / "cc").chmod(0o777)
    assert c.lookup("k") is None
    with pytest.raises(cache_mod.CacheUnavailable) as err:
        c.begin("k2")
    assert "not private to this user" in str(err.value.strerror)
    (tmp_path / "cc").chmod(0o1777)
    assert c.lookup("k") is not None


@pytest.mark.skipif(os.getuid() != 0, reason="chown to another user needs root")
def test_a_compile_cache_entry_of_another_user_is_not_loaded(tmp_path: Path) -> None:
    c, entry = _entry(tmp_path)
    os.chown(entry / cache_mod.PACKAGE_FILE, 4321, -1)
    assert c.lookup("k") is None


# --- the real harness build (slow: g++ over the torch headers, ~30 s a build) --------------------


@pytest.mark.slow
def test_real_a_tampered_harness_is_rebuilt_not_run(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """The harness entry a real build sealed, tampered with in a cache of this test's own: the
    worker rebuilds it with g++ and never runs the planted binary. The sealed entry is the run's
    (tests/building.py run_cache_dir: built there once per run), copied as it is."""
    from aotipre.doctor.canary import run_worker_job
    from aotipre.runner.stages import DynamicOptions
    from tests.building import run_cache_dir

    shared = run_cache_dir(tmp_path_factory.getbasetemp())
    cache = tmp_path / "cache"
    marker = tmp_path / "planted-ran"

    def job(n: int, cache_dir: Path) -> dict[str, Any]:
        workdir = tmp_path / f"w{n}"
        workdir.mkdir()
        root = harness.cache_root(str(cache_dir), True, str(workdir))
        run = harness.run_step(
            "cpp_run",
            mode="run",
            package=str(tmp_path / "none.pt2"),
            model="model",
            inputs=str(tmp_path / "none.pt"),
        )
        run["requires"] = ["cpp_build"]
        options = DynamicOptions(cache_dir=str(cache_dir))
        result = run_worker_job(
            [harness.build_step(root, loader_race=False), run], options, str(workdir), tag="cpp"
        )
        return result.steps

    first = job(1, shared)
    assert first["cpp_build"]["status"] == "ok", first
    built = Path(first["cpp_build"]["binary"])
    assert harness.entry_problem(str(built.parent)) is None, "sealed after the build"
    entry = cache / harness.CACHE_SUBDIR / built.parent.name
    entry.parent.mkdir(mode=0o700, parents=True)
    shutil.copytree(built.parent, entry)  # modes too: the copy is as sound as the original
    assert harness.entry_problem(str(entry)) is None
    binary = entry / built.name
    binary.write_text(f"#!/bin/sh\ntouch {marker}\n")
    second = job(2, cache)
    assert not marker.exists(), "the planted binary ran"
    assert second["cpp_build"]["cached"] is False and second["cpp_build"]["binary"] == str(binary)
    assert second["cpp_run"]["harness"]["returncode"] not in (0, None)  # no such package
    assert harness.entry_problem(str(binary.parent)) is None
