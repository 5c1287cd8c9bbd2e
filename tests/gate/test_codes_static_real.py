"""Finding codes of the static path, each emitted through the real CLI on a real package with a
real torch.save inputs file (tests/gate/build_gate.py): AOT010, AOT012, AOT014, AOT050 (a lost
.so), AOT102-106,
AOT301, AOT404, AOT405. What plain torch does with the same inputs is noted where it
matters (e.g. a different `scale` is silently ignored by the AOTI runner)."""

from __future__ import annotations

import json
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from aotipre.cli import main
from tests.gate.conftest import plain_torch, rewrite

Gate = Callable[[str], Path]


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, Any]]:
    rc = main(["check", *args, "--static-only", "-f", "json", "--no-config"])
    return rc, json.loads(capsys.readouterr().out)


# infos every CPU AOTI package carries (the -march its .so was compiled for, the torch that
# produced an AOTI-only one) and the specialized values of kwargs.pt2 (AOT107): facts of the
# package, not the finding each test is about (they have tests of their own)
FACTS = {"AOT051", "AOT052", "AOT107"}


def codes(data: dict[str, Any]) -> list[tuple[str, str]]:
    return [
        (f["code"], f["severity"])
        for f in data["findings"]
        if not (f["code"] in FACTS and f["severity"] == "info")
    ]


def finding(data: dict[str, Any], code: str) -> dict[str, Any]:
    return next(f for f in data["findings"] if f["code"] == code)


def test_aot010_an_archive_without_models(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "empty.pt2"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("empty/archive_format", "pt2")
        z.writestr("empty/archive_version", "0")
        z.writestr("empty/.data/version", "1")
    rc, data = cli(capsys, str(path))
    assert rc == 2 and data["verdict"] == "error"
    assert codes(data) == [("AOT010", "error")]
    assert "holds no model" in data["error"]


# kwargs.pt2 also carries AOT013 (its export says batch >= 1, its AOTI code >= 2): ignored below
KW = ("--ignore", "AOT013")


def test_aot102_missing_kwarg(capsys: pytest.CaptureFixture[str], gate: Gate) -> None:
    rc, data = cli(capsys, str(gate("kwargs.pt2")), "-i", str(gate("kw_missing_mask")), *KW)
    assert rc == 1 and codes(data) == [("AOT102", "error")]
    assert finding(data, "AOT102")["input"] == "mask"


def test_aot103_unexpected_kwarg(capsys: pytest.CaptureFixture[str], gate: Gate) -> None:
    rc, data = cli(capsys, str(gate("kwargs.pt2")), "-i", str(gate("kw_extra")), *KW)
    assert rc == 1 and codes(data) == [("AOT103", "error")]
    assert finding(data, "AOT103")["input"] == "bias"


def test_aot105_constant_differs_from_export(
    capsys: pytest.CaptureFixture[str], gate: Gate
) -> None:
    # plain torch: the AOTI runner drops `scale` (0.7 gives the 0.5 result), the
    # ExportedProgram refuses it (`Guard failed: scale == 0.5`): the compiled model silently
    # computes with the exported value, an error
    rc, data = cli(capsys, str(gate("kwargs.pt2")), "-i", str(gate("kw_scale_07")), *KW)
    assert rc == 1 and codes(data) == [("AOT105", "error")]
    f = finding(data, "AOT105")
    assert (f["input"], f["expected"], f["actual"]) == ("scale", 0.5, 0.7)
    assert "silently computes with 0.5" in f["message"]


def test_aot106_tensor_where_a_scalar_was_exported(
    capsys: pytest.CaptureFixture[str], gate: Gate
) -> None:
    rc, data = cli(capsys, str(gate("kwargs.pt2")), "-i", str(gate("kw_tensor_scale")), *KW)
    assert rc == 1 and codes(data) == [("AOT106", "error")]
    assert finding(data, "AOT106")["input"] == "scale"


def test_aot301_rank(capsys: pytest.CaptureFixture[str], gate: Gate) -> None:
    rc, data = cli(capsys, str(gate("both.pt2")), "-i", str(gate("token_rank3")))
    assert rc == 1 and ("AOT301", "error") in codes(data)
    f = next(f for f in data["findings"] if f["code"] == "AOT301")
    assert (f["input"], f["expected"], f["actual"]) == ("input_ids", 2, 3)


@pytest.mark.parametrize(
    "target, message",
    [
        ("cpu,platform=darwin", "compiled for linux, the target runs darwin"),
        # the machine is read from the .so's ELF header
        ("cpu,machine=aarch64", "its .so is x86_64 code (ELF header), the target is aarch64"),
    ],
)
def test_aot404_platform_or_machine(
    capsys: pytest.CaptureFixture[str], gate: Gate, target: str, message: str
) -> None:
    rc, data = cli(
        capsys, str(gate("aoti.pt2")), "-i", str(gate("aoti_inputs")), "--target", target
    )
    assert rc == 1 and codes(data) == [("AOT404", "error")]
    assert f"target {target}:" in finding(data, "AOT404")["message"]
    assert message in finding(data, "AOT404")["message"]


def test_aot405_exported_by_an_unsupported_torch(
    capsys: pytest.CaptureFixture[str], gate: Gate, tmp_path: Path
) -> None:
    def older(name: str, data: bytes) -> bytes:
        if name.endswith("models/model.json"):
            doc = json.loads(data)
            doc["torch_version"] = "2.9.1"
            return json.dumps(doc).encode()
        return data

    path = rewrite(gate("ep_only.pt2"), tmp_path / "ep_only.pt2", older)
    # an ExportedProgram-only archive loads only where the deployment compiles it (else AOT015)
    rc, data = cli(capsys, str(path), "--compile-at-deploy")
    assert rc == 0 and codes(data) == [("AOT405", "warning")]
    assert finding(data, "AOT405")["actual"] == "2.9.1"


def test_aot012_aoti_package_without_its_wrapper_cpp(
    capsys: pytest.CaptureFixture[str], gate: Gate, tmp_path: Path
) -> None:
    # the contract of an AOTI-only package lives in wrapper.cpp; without it nothing is known
    path = rewrite(gate("aoti.pt2"), tmp_path / "aoti.pt2",
                   lambda n, d: None if n.endswith("wrapper.cpp") else d)  # fmt: skip
    rc, data = cli(capsys, str(path), "-i", str(gate("aoti_inputs")))
    assert rc == 0 and codes(data) == [("AOT012", "warning")]


LOAD = (
    "import json, sys, torch\n"
    "try:\n"
    "    m = torch._inductor.aoti_load_package(sys.argv[1])\n"
    "    print(json.dumps(float(m(torch.ones(3, 4)).sum())))\n"
    "except Exception as e:\n"
    "    print(json.dumps(str(e).splitlines()[0]))\n"
)


def test_aot050_aoti_code_without_its_shared_object(
    capsys: pytest.CaptureFixture[str], gate: Gate, tmp_path: Path
) -> None:
    # the .so lost (a packaging script that filters binaries): the C++ loader then looks for
    # the flags to build it from the .cpp, finds none, and fails; --static-only said PASS
    path = rewrite(gate("aoti.pt2"), tmp_path / "aoti.pt2",
                   lambda n, d: None if n.endswith(".so") else d)  # fmt: skip
    said = plain_torch(LOAD, str(path))
    assert "_compile_flags.json" in said, said
    rc, data = cli(capsys, str(path))
    assert rc == 1 and ("AOT050", "error") in codes(data), data["findings"]
    assert "has no shared object (.so)" in finding(data, "AOT050")["message"]


def test_a_cpp_only_package_builds_its_shared_object_at_load(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # aot_inductor.package_cpp_only: .cpp plus compile and linker flags, no .so; plain torch
    # builds and loads it, so no AOT050
    build = (
        "import json, sys, torch\n"
        "class M(torch.nn.Module):\n"
        "    def forward(self, x): return torch.relu(x) + 1\n"
        "ep = torch.export.export(M(), (torch.randn(3, 4),))\n"
        "torch._inductor.aoti_compile_and_package(ep, package_path=sys.argv[1],\n"
        "    inductor_configs={'aot_inductor.package_cpp_only': True})\n"
        "print(json.dumps('built'))\n"
    )
    path = tmp_path / "cpp_only.pt2"
    assert plain_torch(build, str(path)) == "built"
    with zipfile.ZipFile(path) as z:
        assert not any(n.endswith(".so") for n in z.namelist())
    assert plain_torch(LOAD, str(path)) == 24.0  # relu(1) + 1 over 12 elements
    rc, data = cli(capsys, str(path))
    assert rc == 0 and "AOT050" not in [c for c, _ in codes(data)], data["findings"]


def test_aot014_unknown_device_type(
    capsys: pytest.CaptureFixture[str], gate: Gate, tmp_path: Path
) -> None:
    def npu(name: str, data: bytes) -> bytes:
        if name.endswith("wrapper_metadata.json"):
            return json.dumps({**json.loads(data), "AOTI_DEVICE_KEY": "npu"}).encode()
        return data

    rc, data = cli(capsys, str(rewrite(gate("aoti.pt2"), tmp_path / "aoti.pt2", npu)))
    assert ("AOT014", "warning") in codes(data)
    assert next(f for f in data["findings"] if f["code"] == "AOT014")["actual"] == "npu"


def test_aot104_nested_input_structure(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    # a model exported with forward(pair: tuple[Tensor, Tensor]), called with a 3-tuple
    plain_torch(
        "import json, sys, torch\n"
        "class Pair(torch.nn.Module):\n"
        "    def forward(self, pair):\n"
        "        return pair[0] + pair[1]\n"
        "x = torch.ones(2, 3)\n"
        "torch.export.save(torch.export.export(Pair(), ((x, x),)), sys.argv[1])\n"
        "torch.save((((x, x),), {}), sys.argv[2])\n"
        "torch.save((((x, x, x),), {}), sys.argv[3])\n"
        "print(json.dumps('ok'))\n",
        str(tmp_path / "pair.pt2"),
        str(tmp_path / "good.pt"),
        str(tmp_path / "bad.pt"),
    )
    # a torch.export.save file: checked as compiled at deploy time (else AOT015)
    pair = (str(tmp_path / "pair.pt2"), "--compile-at-deploy")
    rc, data = cli(capsys, *pair, "-i", str(tmp_path / "good.pt"))
    assert rc == 0 and codes(data) == []
    rc, data = cli(capsys, *pair, "-i", str(tmp_path / "bad.pt"))
    assert rc == 1 and codes(data) == [("AOT104", "error")]
    f = finding(data, "AOT104")
    assert (f["input"], f["expected"], f["actual"]) == ("pair", 2, 3)


def test_aot030_a_member_compressed_with_a_method_torch_cannot_read(
    capsys: pytest.CaptureFixture[str], gate: Gate, tmp_path: Path
) -> None:
    # aoti.pt2 re-zipped with its wrapper.cpp bzip2-compressed: torch's reader (miniz) takes
    # only stored and deflated members; refused before anything is inflated
    path = tmp_path / "aoti.pt2"
    with zipfile.ZipFile(gate("aoti.pt2")) as z, zipfile.ZipFile(path, "w") as out:
        for info in z.infolist():
            method = zipfile.ZIP_BZIP2 if info.filename.endswith("wrapper.cpp") else None
            out.writestr(info.filename, z.read(info), compress_type=method)
    rc, data = cli(capsys, str(path))
    assert rc == 2 and data["verdict"] == "error"
    assert codes(data) == [("AOT030", "error")]
    assert "uses compression method 12 (bzip2)" in data["error"]
