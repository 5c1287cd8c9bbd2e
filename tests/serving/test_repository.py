"""Triton model repositories resolved as Triton resolves them (issue #46): model folders that
are links, version folder names read by std::stoll, the package path built by JoinPath, and
paths no probe may raise on. Fast: no package is compiled (read_model_dir never opens one)."""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
from pathlib import Path

import pytest

from aotipre.cli import main
from aotipre.serving import repository

CONFIG = 'platform: "torch_aoti"\n'


def _model(folder: Path, versions: tuple[str, ...] = ("1",), config: str = CONFIG) -> Path:
    folder.mkdir(parents=True)
    (folder / "config.pbtxt").write_text(config)
    for version in versions:
        (folder / version).mkdir()
        (folder / version / "model.pt2").write_bytes(b"")
    return folder


def _layout(served: list[tuple[str, object]]) -> str:
    return "\n".join(f.message for _, s in served for f in s.layout)  # type: ignore[attr-defined]


# --- version folder names: std::stoll, as the C library reads them --------------------------


def _libc_strtoll() -> object:
    name = ctypes.util.find_library("c")
    if name is None:
        pytest.skip("no C library to read names with strtoll")
    libc = ctypes.CDLL(name, use_errno=True)
    libc.strtoll.restype = ctypes.c_longlong
    libc.strtoll.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p), ctypes.c_int]
    return libc.strtoll


def _triton_reads(strtoll: object, name: str) -> int | str | None:
    """What model_lifecycle.cc VersionsToLoad makes of a sub-folder `name`: the version, None
    (ignored), or "out_of_range"; std::stoll is the C library's strtoll, base 10, with
    std::invalid_argument when nothing was read and std::out_of_range on ERANGE."""
    raw = os.fsencode(name)
    if name in ("warmup", "initial_state", "configs"):
        return None
    if len(raw) > 1 and raw.startswith(b"0"):
        return None
    buf = ctypes.create_string_buffer(raw)
    end = ctypes.c_void_p()
    ctypes.set_errno(0)
    value = strtoll(ctypes.addressof(buf), ctypes.byref(end), 10)  # type: ignore[operator]
    if end.value == ctypes.addressof(buf):
        return None
    if ctypes.get_errno() == errno.ERANGE:
        return "out_of_range"
    return int(value)


NAMES = (
    "1", "0", "7", "10", "00", "01", "0x10", " 01", "+01", " 1", "\t2", "\n3", "+1", "-1",
    "1a", "1.5", "2 ", "a1", "+", "-", " ", "¹", "١", "٣", "１", "warmup", "configs",
    "initial_state", "9223372036854775807", "9223372036854775808", "-9223372036854775808",
    "-9223372036854775809", "99999999999999999999",
)  # fmt: skip


@pytest.mark.parametrize("name", NAMES, ids=[ascii(n) for n in NAMES])
def test_a_version_folder_name_is_read_as_std_stoll_reads_it(tmp_path: Path, name: str) -> None:
    expected = _triton_reads(_libc_strtoll(), name)
    model = _model(tmp_path / "m", versions=(name,))
    served = repository.read_model_dir(str(model))
    layout = _layout(served)
    if expected == "out_of_range":
        assert "std::out_of_range" in layout, layout
        assert all(s.package is None for _, s in served)
    elif expected is None:
        ((path, config),) = served
        assert config.package is None and "version folder" in layout, layout
    else:
        ((path, config),) = served
        assert config.version == str(expected)
        # the backend opens <model>/<std::to_string(version)>/model.pt2, whatever the name
        assert path == f"{model}/{expected}/model.pt2"
        if name != str(expected):
            assert f"as version {expected}" in layout and config.package is None, layout


def test_the_latest_version_is_the_highest_number_triton_reads(tmp_path: Path) -> None:
    model = _model(tmp_path / "m", versions=("0", "2", "10", "01", "x"))
    ((path, config),) = repository.read_model_dir(str(model))
    assert config.version == "10" and path == f"{model}/10/model.pt2"
    all_policy = 'platform: "torch_aoti"\nversion_policy { all {} }\n'
    (model / "config.pbtxt").write_text(all_policy)
    assert [s.version for _, s in repository.read_model_dir(str(model))] == ["0", "2", "10"]


def test_specific_versions_that_are_absent_are_not_served(tmp_path: Path) -> None:
    config = 'platform: "torch_aoti"\nversion_policy { specific { versions: [2, 5] } }\n'
    model = _model(tmp_path / "m", versions=("1", "2"), config=config)
    ((_, served),) = repository.read_model_dir(str(model))
    assert served.version == "2"
    assert "lists version 5, but the model has no folder for it" in _layout([("", served)])
    (model / "config.pbtxt").write_text(config.replace("[2, 5]", "[5]"))
    ((_, none),) = repository.read_model_dir(str(model))
    assert none.package is None and "at least one version must" in _layout([("", none)])


def test_an_entry_triton_cannot_stat_fails_the_listing(tmp_path: Path) -> None:
    model = _model(tmp_path / "repo" / "m")
    (model / "old").symlink_to(tmp_path / "gone")
    assert "Triton cannot stat 'old'" in _layout(repository.read_model_dir(str(model)))
    (model / "old").unlink()
    (tmp_path / "repo" / "stale").symlink_to(tmp_path / "gone")
    served = repository.expand(str(tmp_path / "repo")) or []
    assert "Triton cannot stat 'stale' in the model repository" in _layout(served)


# --- model folders that are links ------------------------------------------------------------


def test_a_model_folder_that_is_a_link_is_served(tmp_path: Path) -> None:
    real = _model(tmp_path / "store" / "resnet")
    (tmp_path / "repo").mkdir()
    (tmp_path / "repo" / "resnet").symlink_to(real)
    assert repository.is_repository(tmp_path / "repo")
    ((path, config),) = repository.expand(str(tmp_path / "repo")) or []
    assert path == f"{tmp_path}/repo/resnet/1/model.pt2" and config.package == path
    (real / "3").symlink_to(real / "1")  # a version folder that is a link is a version too
    ((path, _),) = repository.expand(str(tmp_path / "repo")) or []
    assert path == f"{tmp_path}/repo/resnet/3/model.pt2"


# --- default_model_filename: JoinPath appends an absolute name -------------------------------


def test_join_path_appends_an_absolute_segment() -> None:
    assert repository.join_path("/r/m", "1", "/abs/x.pt2") == "/r/m/1/abs/x.pt2"
    assert repository.join_path("/r/m/", "1/", "x.pt2") == "/r/m/1/x.pt2"
    assert repository.join_path("r/m", "1", "../x.pt2") == "r/m/1/../x.pt2"


def test_an_absolute_default_model_filename_is_looked_up_in_the_version_folder(
    tmp_path: Path,
) -> None:
    outside = tmp_path / "elsewhere" / "real.pt2"
    outside.parent.mkdir()
    outside.write_bytes(b"")
    config = f'platform: "torch_aoti"\ndefault_model_filename: "{outside}"\n'
    model = _model(tmp_path / "m", versions=("1",), config=config)
    (model / "1" / "model.pt2").unlink()
    ((path, served),) = repository.read_model_dir(str(model))
    assert path == f"{model}/1{outside}" and served.package is None
    assert "appends it to the version folder (JoinPath)" in _layout([("", served)])
    inside = Path(f"{model}/1{outside}")
    inside.parent.mkdir(parents=True)
    inside.write_bytes(b"")
    ((path, served),) = repository.read_model_dir(str(model))
    assert served.package == path == str(inside) and not served.layout


# --- the command line: one line, never a traceback ----------------------------------------


def test_a_superscript_version_folder_is_one_finding_not_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _model(tmp_path / "repo" / "m", versions=("¹",))
    code = main(["check", str(tmp_path / "repo"), "--static-only", "--no-config"])
    captured = capsys.readouterr()
    assert code == 2 and "Traceback" not in captured.err, captured.err
    assert "has no numeric version folder" in captured.out + captured.err


@pytest.mark.parametrize("path", ["ab/" * 1365 + "a", "x" * 300], ids=["4096-chars", "long-name"])
def test_a_path_too_long_to_probe_is_one_line(
    path: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["check", path, "--static-only", "--no-config"])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err and err.count("\n") == 1, err
