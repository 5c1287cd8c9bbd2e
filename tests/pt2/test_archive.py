"""Bad archives: each yields a CodedPackageError with the right code and one clear line."""

from __future__ import annotations

import json
import os
import stat
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from aotipre.pt2.archive import CodedPackageError, open_archive, unsafe_member_name
from aotipre.pt2.reader import read_package


def _pt2(path: Path, members: dict[str, bytes], root: str = "pkg") -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as zf:
        zf.writestr(f"{root}/archive_format", b"pt2")
        zf.writestr(f"{root}/archive_version", b"0")
        for name, data in members.items():
            zf.writestr(name, data)
    return path


def _error(path: Path) -> CodedPackageError:
    with pytest.raises(CodedPackageError) as info:
        read_package(path)
    err = info.value
    assert "\n" not in str(err), "the message must be one line"
    return err


def test_missing_file(tmp_path: Path) -> None:
    err = _error(tmp_path / "nope.pt2")
    assert err.code == "AOT001" and "no such file" in str(err)


def test_directory(tmp_path: Path) -> None:
    err = _error(tmp_path)
    assert err.code == "AOT001" and "directory" in str(err)


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files without permission bits")
def test_unreadable(tmp_path: Path) -> None:
    p = _pt2(tmp_path / "a.pt2", {})
    p.chmod(0)
    err = _error(p)
    assert err.code == "AOT001"


def test_empty_file(tmp_path: Path) -> None:
    p = tmp_path / "empty.pt2"
    p.write_bytes(b"")
    err = _error(p)
    assert err.code == "AOT002" and "empty" in str(err)


def test_not_a_zip(tmp_path: Path) -> None:
    p = tmp_path / "text.pt2"
    p.write_text("hello, I am not a zip\n")
    err = _error(p)
    assert err.code == "AOT002" and "not a zip" in str(err)


def test_truncated_zip(tmp_path: Path) -> None:
    good = _pt2(tmp_path / "good.pt2", {"pkg/models/model.json": b"{}" * 5000})
    data = good.read_bytes()
    cut = tmp_path / "cut.pt2"
    cut.write_bytes(data[: len(data) // 2])
    err = _error(cut)
    assert err.code == "AOT002" and "truncated" in str(err)


@pytest.mark.parametrize(
    "name, why",
    [
        ("pkg/../../evil", ".."),
        ("/abs/path", "absolute"),
        ("pkg\\windows", "backslash"),
        ("C:/windows", "drive"),
    ],
)
def test_escaping_member_names(tmp_path: Path, name: str, why: str) -> None:
    p = _pt2(tmp_path / "evil.pt2", {name: b"x"})
    err = _error(p)
    assert err.code == "AOT003" and why in str(err)


def test_nul_byte_in_name() -> None:
    # zipfile truncates names at NUL when writing, so test the validator directly
    assert unsafe_member_name("pkg/a\x00b") == "contains a NUL byte"
    assert unsafe_member_name("pkg/fine/name.json") is None


def test_symlink_member(tmp_path: Path) -> None:
    p = tmp_path / "link.pt2"
    with zipfile.ZipFile(p, "w") as zf:
        zf.writestr("pkg/archive_format", b"pt2")
        info = zipfile.ZipInfo("pkg/link")
        info.create_system = 3
        info.external_attr = (stat.S_IFLNK | 0o777) << 16
        zf.writestr(info, b"/etc/passwd")
    err = _error(p)
    assert err.code == "AOT003" and "symbolic link" in str(err)


def test_duplicate_member(tmp_path: Path) -> None:
    p = tmp_path / "dup.pt2"
    with zipfile.ZipFile(p, "w") as zf:
        zf.writestr("pkg/archive_format", b"pt2")
        with pytest.warns(UserWarning):
            zf.writestr("pkg/archive_format", b"pt2")
    err = _error(p)
    assert err.code == "AOT003" and "duplicate" in str(err)


def test_plain_zip_is_not_pt2(tmp_path: Path) -> None:
    p = tmp_path / "plain.pt2"
    with zipfile.ZipFile(p, "w") as zf:
        zf.writestr("stuff/readme.txt", b"hi")
    err = _error(p)
    assert err.code == "AOT004" and "archive_format" in str(err)


def test_two_roots(tmp_path: Path) -> None:
    p = _pt2(tmp_path / "two.pt2", {"other/archive_format": b"pt2"})
    err = _error(p)
    assert err.code == "AOT004" and "one root" in str(err)


def test_wrong_archive_format(tmp_path: Path) -> None:
    p = tmp_path / "fmt.pt2"
    with zipfile.ZipFile(p, "w") as zf:
        zf.writestr("pkg/archive_format", b"onnx")
        zf.writestr("pkg/archive_version", b"0")
    err = _error(p)
    assert err.code == "AOT004" and "'onnx'" in str(err)


def test_unknown_archive_version(tmp_path: Path) -> None:
    p = tmp_path / "v.pt2"
    with zipfile.ZipFile(p, "w") as zf:
        zf.writestr("pkg/archive_format", b"pt2")
        zf.writestr("pkg/archive_version", b"99")
    err = _error(p)
    assert err.code == "AOT005" and "'99'" in str(err)


def test_model_json_not_json(tmp_path: Path) -> None:
    p = _pt2(tmp_path / "j.pt2", {"pkg/models/model.json": b"{not json"})
    err = _error(p)
    assert err.code == "AOT006" and "not valid JSON" in str(err)


def test_model_json_wrong_shape(tmp_path: Path) -> None:
    p = _pt2(tmp_path / "j.pt2", {"pkg/models/model.json": json.dumps([1, 2]).encode()})
    err = _error(p)
    assert err.code == "AOT006" and "graph_module" in str(err)


def test_aoti_metadata_wrong_shape(tmp_path: Path) -> None:
    p = _pt2(
        tmp_path / "m.pt2",
        {"pkg/data/aotinductor/model/x.wrapper_metadata.json": b"[]"},
    )
    err = _error(p)
    assert err.code == "AOT006"


@pytest.mark.parametrize(("text", "why"), [(b"", "empty"), (b'{"AOTI_DEV', "not valid JSON")])
def test_aoti_wrapper_metadata_torch_falls_back_on(tmp_path: Path, text: bytes, why: str) -> None:
    # torch's load_pt2 raises on these (nlohmann's parse error) and load_package falls back to
    # the C++ loader, which reads the kernel's copy: readable, with the copy's metadata
    # (tests/runner/test_load_proof_real.py shows plain torch loading such a package)
    d = "pkg/data/aotinductor/model/"
    p = _pt2(
        tmp_path / "m.pt2",
        {
            f"{d}x.wrapper_metadata.json": text,
            f"{d}y.kernel.cpp": b"",
            f"{d}y.kernel_metadata.json": b'{"AOTI_DEVICE_KEY": "cpu"}',
        },
    )
    (model,) = read_package(p).models
    assert model.aoti is not None
    assert model.aoti.wrapper_metadata_unreadable == (f"{d}x.wrapper_metadata.json", why)
    assert model.aoti.device_type == "cpu"


def test_zip_bomb_member_is_refused_without_inflating(tmp_path: Path) -> None:
    p = tmp_path / "bomb.pt2"
    with zipfile.ZipFile(p, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("pkg/archive_format", b"pt2")
        zf.writestr("pkg/archive_version", b"0")
        with zf.open("pkg/models/model.json", "w", force_zip64=True) as fh:
            chunk = b" " * (1 << 20)
            for _ in range(300):  # 300 MiB of spaces, a few hundred KiB on disk
                fh.write(chunk)
    assert p.stat().st_size < 2 * 1024 * 1024
    err = _error(p)
    assert err.code == "AOT007"


def test_read_stops_at_limit_even_if_header_lies(tmp_path: Path) -> None:
    p = _pt2(tmp_path / "a.pt2", {"pkg/big": b"x" * 5000})
    with open_archive(p) as archive:
        with pytest.raises(CodedPackageError) as info:
            archive.read("pkg/big", limit=100)
    assert info.value.code == "AOT007"


def test_corrupt_member_detected_by_crc(tmp_path: Path) -> None:
    p = _pt2(
        tmp_path / "c.pt2", {"pkg/data/aotinductor/model/x.wrapper.so": b"\x7fELF" + bytes(4096)}
    )
    data = bytearray(p.read_bytes())
    at = data.find(b"\x7fELF") + 100
    data[at] ^= 0xFF
    p.write_bytes(bytes(data))
    info = read_package(p)
    assert info.corrupt_members == ("pkg/data/aotinductor/model/x.wrapper.so",)


def test_empty_pt2_has_no_models(tmp_path: Path) -> None:
    info = read_package(_pt2(tmp_path / "e.pt2", {}))
    assert info.kind == "empty" and info.models == ()


def test_bytes_before_the_zip_are_refused_bytes_after_it_are_not(
    tmp_path: Path, pkg: Callable[[str], Path]
) -> None:
    """Python's zipfile reads past bytes in front of a zip; torch's reader (miniz) refuses the
    file (`invalid header or archive is corrupted`), so a static PASS would be wrong. Bytes
    after it (a trailing comment's place) torch loads, and so does aotipre."""
    import torch

    data = pkg("aoti").read_bytes()
    before, after = tmp_path / "before.pt2", tmp_path / "after.pt2"
    before.write_bytes(b"J" * 1000 + data)
    after.write_bytes(data + b"J" * 1000)
    with pytest.raises(Exception, match="invalid header or archive is corrupted"):
        torch._inductor.aoti_load_package(str(before))
    torch._inductor.aoti_load_package(str(after))
    err = _error(before)
    assert err.code == "AOT002" and "1000 bytes precede the zip archive" in str(err)
    assert read_package(after).models[0].has_aoti


def test_prepended_bytes_whatever_place_zipfile_gives_the_zip64_record(
    pkg: Callable[[str], Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """zipfile's end record says where the plain end record is (CPython as released) or, in
    zipfiles patched for CVE-2025-8291 (Ubuntu's Python 3.12.3 on the GPU machine: "924 bytes
    precede" for 1000), where the zip64 one is: the count is the same either way. Both places
    are made from what this Python's zipfile gives (it gives one of them)."""
    import zipfile

    data = pkg("aoti").read_bytes()
    before = tmp_path / "before.pt2"
    before.write_bytes(b"J" * 1000 + data)
    real = zipfile._EndRecData  # type: ignore[attr-defined]
    zip64_record = 56 + 20  # the zip64 end record and its locator, before the plain end record

    def place(zip64: bool):  # type: ignore[no-untyped-def]
        def finder(fh):  # type: ignore[no-untyped-def]
            endrec = real(fh)
            if endrec and endrec[0] == b"PK\x06\x06":
                fh.seek(endrec[9])
                at_zip64 = fh.read(4) == b"PK\x06\x06"
                fh.seek(0)
                if zip64 and not at_zip64:
                    endrec[9] -= zip64_record
                elif at_zip64 and not zip64:
                    endrec[9] += zip64_record
            return endrec

        return finder

    with open(before, "rb") as fh:
        assert real(fh)[0] == b"PK\x06\x06"  # torch writes zip64 end records
        for zip64 in (False, True):  # the places each finder gives are the ones meant
            fh.seek(place(zip64)(fh)[9])
            assert fh.read(4) == (b"PK\x06\x06" if zip64 else b"PK\x05\x06")
    for finder in (real, place(False), place(True)):
        monkeypatch.setattr(zipfile, "_EndRecData", finder)
        assert "1000 bytes precede the zip archive" in str(_error(before))
