"""cubin and fatbin members: real ones made by nvcc 13.0 (scripts/make_cuda_test_binaries.sh),
their images and which compute capabilities and drivers can run them; damaged ones."""

from __future__ import annotations

import pytest

from aotipre.binaries.cuda import CudaBinaryError, read_cubin, read_fatbin
from aotipre.binaries.source import BytesSource
from tests.binaries.synth import DATA


def _images(name: str) -> list[tuple[str, str]]:
    data = BytesSource((DATA / name).read_bytes())
    images = read_fatbin(data) if name.endswith(".fatbin") else (read_cubin(data),)
    return [(i.kind, i.arch) for i in images]


def test_cubin_arch_from_the_elf() -> None:
    assert _images("sm80.cubin") == [("sass", "80")]
    assert _images("sm100.cubin") == [("sass", "100")]
    # ELF ABI 8 keeps only 90 in e_flags; the tool note says sm_90a
    assert _images("sm90a.cubin") == [("sass", "90a")]
    image = read_cubin(BytesSource((DATA / "sm90a.cubin").read_bytes()))
    assert image.toolkit == "13.0" and image.min_driver() == "580.65.06"
    assert [cc for cc in ("8.0", "8.6", "9.0", "10.0") if image.runs_on(cc)] == ["9.0"]
    sm80 = read_cubin(BytesSource((DATA / "sm80.cubin").read_bytes()))
    assert [cc for cc in ("8.0", "8.6", "8.9", "9.0") if sm80.runs_on(cc)] == ["8.0", "8.6", "8.9"]


def test_fatbin_entries() -> None:
    assert _images("multi.fatbin") == [("sass", "80"), ("ptx", "80"), ("sass", "90")]
    (ptx,) = read_fatbin(BytesSource((DATA / "ptx84.fatbin").read_bytes()))
    assert ptx.kind == "ptx" and ptx.ptx_version == (8, 4)
    assert ptx.min_driver() == "550.54.14"  # CUDA 12.4's driver JITs PTX ISA 8.4
    assert all(ptx.runs_on(cc) for cc in ("8.0", "9.0", "10.0", "12.0"))
    assert not ptx.runs_on("7.5")
    compressed = read_fatbin(BytesSource((DATA / "multi.fatbin").read_bytes()))[1]
    assert compressed.ptx_version == (9, 0)  # from the entry header: the payload is zstd


def test_arch_and_family_specific_entries_keep_their_suffix() -> None:
    """A fatbin entry's flags say sm_90a / compute_90a and sm_100f / compute_100f (cuobjdump
    prints `arch = sm_90a` for both kinds): PTX for compute_90a is not JIT-compiled on a newer
    GPU, family PTX only within its family."""
    assert _images("specific.fatbin") == [
        ("sass", "90a"),
        ("ptx", "90a"),
        ("sass", "100f"),
        ("ptx", "100f"),
    ]
    ptx90a, ptx100f = read_fatbin(BytesSource((DATA / "specific.fatbin").read_bytes()))[1::2]
    assert [cc for cc in ("8.0", "9.0", "10.0", "12.0") if ptx90a.runs_on(cc)] == ["9.0"]
    assert [cc for cc in ("9.0", "10.0", "10.3", "12.0") if ptx100f.runs_on(cc)] == ["10.0", "10.3"]


@pytest.mark.parametrize("cut", [0, 8, 16, 40, 100, 3000, 7000])
def test_truncated_fatbin(cut: int) -> None:
    data = (DATA / "multi.fatbin").read_bytes()[:cut]
    with pytest.raises(CudaBinaryError) as exc:
        read_fatbin(BytesSource(data))
    assert "\n" not in str(exc.value)


def test_hostile_fatbin_entry_sizes() -> None:
    data = bytearray((DATA / "multi.fatbin").read_bytes())
    data[16 + 8 : 16 + 16] = (1 << 60).to_bytes(8, "little")  # first entry's payload size
    with pytest.raises(CudaBinaryError, match="runs past"):
        read_fatbin(BytesSource(bytes(data)))


def test_not_a_cubin() -> None:
    with pytest.raises(CudaBinaryError, match="not a cubin"):
        read_cubin(BytesSource(b"\x7fELF" + bytes(10)))
    x86 = bytearray((DATA / "sm80.cubin").read_bytes())
    x86[18:20] = (62).to_bytes(2, "little")
    with pytest.raises(CudaBinaryError, match="x86_64, not a CUDA cubin"):
        read_cubin(BytesSource(bytes(x86)))
