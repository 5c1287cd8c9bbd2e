"""The compile cache: content keys, atomic publication, half-written entries never used."""

from __future__ import annotations

import json
import os
import time
import zipfile
from pathlib import Path

import pytest

from aotipre.runner import cache


def _archive(path: Path, model_json: bytes = b"{}", weight: bytes = b"w" * 10) -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("pkg/archive_format", "pt2")
        zf.writestr("pkg/models/model.json", model_json)
        zf.writestr("pkg/models/other.json", b"{}")
        zf.writestr("pkg/data/weights/weight_0", weight)
        zf.writestr("pkg/data/constants/c_0", b"c")
        zf.writestr("pkg/data/sample_inputs/model.pt", b"inputs")
        zf.writestr("pkg/data/sample_inputs/other.pt", b"x")
        zf.writestr("pkg/data/aotinductor/model/a.wrapper.so", b"so")
    return path


def _key(path: Path, **kw: object) -> str:
    with zipfile.ZipFile(path) as zf:
        names = zf.namelist()
    members = cache.exported_program_members(names, "pkg", "model")
    args = {
        "content_hash": cache.hash_members(str(path), members),
        "torch_version": "2.13.0",
        "device": "cpu",
        "configs": {},
        **kw,
    }
    return cache.compile_key(**args)  # type: ignore[arg-type]


def test_members_are_the_program_its_weights_and_its_inputs(tmp_path: Path) -> None:
    with zipfile.ZipFile(_archive(tmp_path / "a.pt2")) as zf:
        names = zf.namelist()
    assert cache.exported_program_members(names, "pkg", "model") == [
        "pkg/data/constants/c_0",
        "pkg/data/sample_inputs/model.pt",
        "pkg/data/weights/weight_0",
        "pkg/models/model.json",
    ]


def test_key_follows_content_torch_device_and_configs(tmp_path: Path) -> None:
    a = _archive(tmp_path / "a.pt2")
    same = _archive(tmp_path / "same.pt2")
    base = _key(a)
    assert _key(same) == base
    assert _key(_archive(tmp_path / "b.pt2", weight=b"v" * 10)) != base
    assert _key(_archive(tmp_path / "c.pt2", model_json=b'{"x": 1}')) != base
    assert _key(a, torch_version="2.11.0") != base
    assert _key(a, device="cuda:0") != base
    assert _key(a, configs={"aot_inductor.debug_compile": True}) != base
    assert _key(a, host={"cpu_isa": ["AVX2"]}) != base
    assert _key(a, example_inputs="abc") != base
    assert _key(a, configs={"b": 1, "a": 2}) == _key(a, configs={"a": 2, "b": 1})


def test_default_dir_honours_xdg(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert cache.default_cache_dir() == str(tmp_path / "aotipre" / "compile")
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache.default_cache_dir() == str(tmp_path / "home" / ".cache" / "aotipre" / "compile")


def test_commit_then_lookup(tmp_path: Path) -> None:
    c = cache.CompileCache(str(tmp_path / "cc"))
    assert c.lookup("k1") is None
    pending = c.begin("k1")
    assert os.path.basename(pending.directory).startswith(".tmp-k1-")
    assert c.lookup("k1") is None  # still being written
    Path(pending.package).write_bytes(b"package bytes")
    entry = c.commit(pending, {"model": "model"})
    assert not os.path.exists(pending.directory)
    assert c.lookup("k1") == entry
    meta = json.loads((Path(entry.directory) / cache.ENTRY_FILE).read_text())
    assert meta["size"] == len(b"package bytes") and meta["model"] == "model"


def test_half_written_or_damaged_entries_are_not_used(tmp_path: Path) -> None:
    c = cache.CompileCache(str(tmp_path))
    # an interrupted compile: only a .tmp- folder
    pending = c.begin("k")
    Path(pending.package).write_bytes(b"half")
    assert c.lookup("k") is None
    # an entry folder without its entry.json (e.g. copied by hand)
    (tmp_path / "k2").mkdir()
    (tmp_path / "k2" / cache.PACKAGE_FILE).write_bytes(b"x")
    assert c.lookup("k2") is None
    # a truncated package
    entry = c.commit(pending)
    with open(entry.package, "r+b") as f:
        f.truncate(2)
    assert c.lookup("k") is None


def test_first_writer_wins_a_race(tmp_path: Path) -> None:
    c = cache.CompileCache(str(tmp_path))
    first, second = c.begin("k"), c.begin("k")
    Path(first.package).write_bytes(b"first")
    Path(second.package).write_bytes(b"second")
    e1 = c.commit(first)
    e2 = c.commit(second)
    assert e1 == e2
    assert Path(e1.package).read_bytes() == b"first"
    assert sorted(os.listdir(tmp_path)) == ["k"]


def test_stale_temporary_folders_are_swept(tmp_path: Path) -> None:
    c = cache.CompileCache(str(tmp_path))
    old = c.begin("old")
    fresh = c.begin("fresh")
    long_ago = time.time() - cache.STALE_TMP_S - 10
    os.utime(old.directory, (long_ago, long_ago))
    c.begin("another")
    assert not os.path.exists(old.directory)
    assert os.path.exists(fresh.directory)


def test_torch_version_without_importing_torch() -> None:
    import sys
    from importlib.metadata import version as installed

    had = "torch" in sys.modules
    version = cache.torch_version()
    assert version == installed("torch")  # torch is installed here: None would be the bug
    assert ("torch" in sys.modules) == had
