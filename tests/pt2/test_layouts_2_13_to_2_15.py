"""What torch 2.11-2.15 write, read statically: extracted package folders, sample inputs under
extra/, opaque_obj_* constants, several .so per model, the models/*.json schema (8,20) with dtype
enum values aotipre does not know, torch_version 2.15 in a package.

The packages are real fixtures (built by this torch through the public API) turned into each
layout by moving or adding members the way the v2.15.0 writer names them
(`torch/csrc/export/pt2_archive_constants.h`: `extra/{}.forward.sample_input.pt`,
`data/constants/opaque_obj_{n}`); nothing here imports torch.
"""

from __future__ import annotations

import json
import os
import pickle
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from aotipre.api import CheckOptions, check
from aotipre.findings import Verdict
from aotipre.foundation.errors import PackageError
from aotipre.pt2.reader import read_package
from aotipre.pt2.spec import package_to_dict

Pkg = Callable[[str], Path]


def rewrite(src: Path, dst: Path, edit: Callable[[str, bytes], tuple[str, bytes] | None]) -> Path:
    """Copy a .pt2 member by member; `edit(name, data)` returns the new (name, data) or None to
    drop the member."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w", zipfile.ZIP_STORED) as zout:
        for info in zin.infolist():
            out = edit(info.filename, zin.read(info))
            if out is not None:
                zout.writestr(out[0], out[1])
    return dst


def add_members(src: Path, dst: Path, extra: dict[str, bytes]) -> Path:
    rewrite(src, dst, lambda n, d: (n, d))
    with zipfile.ZipFile(dst, "a", zipfile.ZIP_STORED) as zf:
        for name, data in extra.items():
            zf.writestr(name, data)
    return dst


def comparable(path: Path) -> dict:
    """inspect's JSON without what differs between a zip and its extracted folder."""
    out = package_to_dict(read_package(path))
    for key in ("path", "member_count", "total_size", "extracted"):
        out.pop(key)
    return out


# --- extracted folders -------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["aoti", "both", "multi", "ep_only"])
@pytest.mark.parametrize("layout", ["root", "parent"])
def test_an_extracted_folder_reads_like_its_archive(
    pkg: Pkg, tmp_path: Path, name: str, layout: str
) -> None:
    archive = pkg(name)
    with zipfile.ZipFile(archive) as zf:
        zf.extractall(tmp_path / "x")
        (root,) = {n.split("/", 1)[0] for n in zf.namelist()}
    folder = tmp_path / "x" / root if layout == "root" else tmp_path / "x"
    info = read_package(folder)
    assert info.extracted and info.root == root
    assert comparable(folder) == comparable(archive)


def test_a_folder_package_passes_the_static_check_like_the_archive(
    pkg: Pkg, tmp_path: Path
) -> None:
    with zipfile.ZipFile(pkg("both")) as zf:
        zf.extractall(tmp_path)
    opts = CheckOptions(inputs=str(pkg("aoti_inputs_bad_dtype")), static_only=True)
    from_folder = check(tmp_path, opts)
    from_zip = check(pkg("both"), opts)
    assert from_folder.verdict is Verdict.FAIL
    assert [f.code for f in from_folder.findings] == [f.code for f in from_zip.findings]


def test_a_folder_that_is_no_package_is_aot001(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(PackageError) as err:
        read_package(tmp_path)
    assert err.value.code == "AOT001" and "not an extracted .pt2" in str(err.value)


def test_a_symlink_inside_a_folder_package_is_refused_not_followed(
    pkg: Pkg, tmp_path: Path
) -> None:
    with zipfile.ZipFile(pkg("aoti")) as zf:
        zf.extractall(tmp_path)
    secret = tmp_path.parent / f"{tmp_path.name}-secret.json"
    secret.write_text("{}")
    os.symlink(secret, tmp_path / "aoti" / "data" / "link.json")
    with pytest.raises(PackageError) as err:
        read_package(tmp_path)
    assert err.value.code == "AOT003" and "symbolic link" in str(err.value)


def test_a_folder_nested_too_deep_is_refused(pkg: Pkg, tmp_path: Path) -> None:
    with zipfile.ZipFile(pkg("aoti")) as zf:
        zf.extractall(tmp_path)
    deep = tmp_path / "aoti" / "data"
    for i in range(40):
        deep = deep / f"d{i}"
    deep.mkdir(parents=True)
    with pytest.raises(PackageError) as err:
        read_package(tmp_path)
    assert err.value.code == "AOT007"


# --- sample inputs under extra/ ----------------------------------------------------------------


def test_sample_inputs_stored_under_extra_are_used(pkg: Pkg, tmp_path: Path) -> None:
    def move(name: str, data: bytes) -> tuple[str, bytes]:
        if name.endswith("/data/sample_inputs/model.pt"):
            return name.replace(
                "data/sample_inputs/model.pt", "extra/model.forward.sample_input.pt"
            ), data
        return name, data

    moved = rewrite(pkg("ep_only"), tmp_path / "ep_only.pt2", move)
    (model,) = read_package(moved).models
    assert model.sample_inputs_member == "ep_only/extra/model.forward.sample_input.pt"
    report = check(moved, CheckOptions(static_only=True))
    assert report.inputs_source == "archive"
    # The stored inputs match the contract: the one finding is AOT015 (an ExportedProgram-only
    # package, which aoti_load_package refuses), nothing about the inputs (AOT022, AOT1xx/3xx).
    assert [f.code for f in report.findings] == ["AOT015"]


def test_data_sample_inputs_win_over_extra(pkg: Pkg, tmp_path: Path) -> None:
    with zipfile.ZipFile(pkg("ep_only")) as zf:
        stored = zf.read("ep_only/data/sample_inputs/model.pt")
    both = add_members(
        pkg("ep_only"),
        tmp_path / "ep_only.pt2",
        {"ep_only/extra/model.forward.sample_input.pt": stored},
    )
    (model,) = read_package(both).models
    assert model.sample_inputs_member == "ep_only/data/sample_inputs/model.pt"


# --- opaque objects ----------------------------------------------------------------------------


class _Marker:
    """Unpickling this creates a file: proof that nobody unpickled the member."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self) -> tuple:
        return (open, (self.path, "w"))


def test_opaque_objects_are_flagged_and_never_unpickled(pkg: Pkg, tmp_path: Path) -> None:
    marker = tmp_path / "unpickled"
    hostile = pickle.dumps(_Marker(str(marker)))
    package = add_members(
        pkg("both"),
        tmp_path / "both.pt2",
        {"both/data/constants/opaque_obj_0": hostile, "both/data/constants/opaque_obj_1": hostile},
    )
    info = read_package(package)
    assert info.opaque_objects == (
        "both/data/constants/opaque_obj_0",
        "both/data/constants/opaque_obj_1",
    )
    report = check(package, CheckOptions(static_only=True))
    (finding,) = [f for f in report.findings if f.code == "AOT080"]
    assert finding.severity.value == "warning" and "2 opaque" in finding.message
    assert not marker.exists()


# --- several .so per model (Triton CPU: wrapper, launcher, kernel) -----------------------------


def test_several_shared_objects_per_model(pkg: Pkg, tmp_path: Path) -> None:
    with zipfile.ZipFile(pkg("aoti")) as zf:
        so = next(n for n in zf.namelist() if n.endswith(".wrapper.so"))
    directory = so.rsplit("/", 1)[0]
    extra = {
        f"{directory}/kernel_launcher.so": b"\x7fELF stub",
        f"{directory}/libkernel.so": b"\x7fELF",
    }
    package = add_members(pkg("aoti"), tmp_path / "aoti.pt2", extra)
    (model,) = read_package(package).models
    assert model.aoti is not None
    assert set(model.aoti.shared_objects) == {so, *extra}
    assert model.aoti.wrapper_cpp is not None and model.aoti.wrapper_cpp.endswith(".wrapper.cpp")
    assert model.inputs, "the contract still comes from the wrapper"


# --- models/*.json: schema (8,20), unknown dtype values, torch 2.15 ---------------------------


def edit_model_json(src: Path, dst: Path, change: Callable[[dict], None]) -> Path:
    def edit(name: str, data: bytes) -> tuple[str, bytes]:
        if "/models/" in name and name.endswith(".json"):
            doc = json.loads(data)
            change(doc)
            return name, json.dumps(doc).encode()
        return name, data

    return rewrite(src, dst, edit)


def test_schema_8_20_with_a_dtype_this_aotipre_does_not_know(pkg: Pkg, tmp_path: Path) -> None:
    def change(doc: dict) -> None:
        doc["schema_version"] = {"major": 8, "minor": 20}
        doc["torch_version"] = "2.15.0+cpu"
        for meta in doc["graph_module"]["graph"]["tensor_values"].values():
            if meta.get("dtype") == 7:  # FLOAT -> a value past the 2.15 enum (UINT64=35)
                meta["dtype"] = 99

    package = edit_model_json(pkg("ep_only"), tmp_path / "ep_only.pt2", change)
    (model,) = read_package(package).models
    assert model.schema_version == "8.20" and model.torch_version == "2.15.0+cpu"
    assert any(i.tensor is not None and i.tensor.dtype == "unknown(99)" for i in model.inputs)
    report = check(package, CheckOptions(static_only=True))
    assert report.error is None
    assert not any(f.code == "AOT405" for f in report.findings), "2.15 is supported"


@pytest.mark.parametrize("number, name", [(33, "float8_e8m0fnu"), (34, "uint32"), (35, "uint64")])
def test_dtype_enum_values_new_in_2_12(pkg: Pkg, tmp_path: Path, number: int, name: str) -> None:
    def change(doc: dict) -> None:
        for meta in doc["graph_module"]["graph"]["tensor_values"].values():
            if meta.get("dtype") == 7:
                meta["dtype"] = number

    package = edit_model_json(pkg("ep_only"), tmp_path / "ep_only.pt2", change)
    (model,) = read_package(package).models
    assert any(i.tensor is not None and i.tensor.dtype == name for i in model.inputs)


def test_a_torch_newer_than_2_15_is_flagged(pkg: Pkg, tmp_path: Path) -> None:
    package = edit_model_json(
        pkg("ep_only"), tmp_path / "ep_only.pt2", lambda d: d.update(torch_version="2.16.0")
    )
    report = check(package, CheckOptions(static_only=True))
    (finding,) = [f for f in report.findings if f.code == "AOT405"]
    assert "2.11-2.15" in finding.message
