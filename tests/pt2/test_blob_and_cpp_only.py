"""Two AOTI layouts that --static-only and inspect used to get wrong (issue #27), built with the
public API and loaded with plain torch in fresh processes: a binary_blob package (weights in
`<hash>.wrapper_weights.blob`; with an empty kernel_metadata.json it cannot load: AOT031) and a
package_cpp_only package (no .so, g++ runs inside aoti_load_package: AOT032). A fast part checks
the same on hand-made archives."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path
from typing import Any

import pytest

from aotipre.checks.package import check_package
from aotipre.cli import main
from aotipre.pt2.reader import read_package
from tests.gate.conftest import plain_torch, rewrite

BUILD = (
    "import json, sys, torch\n"
    "class M(torch.nn.Module):\n"
    "    def __init__(self):\n"
    "        super().__init__()\n"
    "        self.lin = torch.nn.Linear(4, 3)\n"
    "    def forward(self, x): return torch.relu(self.lin(x)) + 1\n"
    "torch.manual_seed(0)\n"
    "m = M().eval()\n"
    "x = torch.arange(8.0).reshape(2, 4) / 8 - 0.5\n"
    "ep = torch.export.export(m, (x,))\n"
    "configs = {\n"
    "    'blob': {'aot_inductor.package_constants_in_so': False,\n"
    "             'aot_inductor.package_constants_on_disk_format': 'binary_blob'},\n"
    "    'cpp_only': {'aot_inductor.package_cpp_only': True},\n"
    "}\n"
    "for name, cfg in configs.items():\n"
    "    torch._inductor.aoti_compile_and_package(\n"
    "        ep, package_path=f'{sys.argv[1]}/{name}.pt2', inductor_configs=cfg)\n"
    "print(json.dumps(m(x).tolist()))\n"
)

LOAD = (
    "import json, sys, time, torch\n"
    "t = time.perf_counter()\n"
    "try:\n"
    "    m = torch._inductor.aoti_load_package(sys.argv[1])\n"
    "    x = torch.arange(8.0).reshape(2, 4) / 8 - 0.5\n"
    "    print(json.dumps({'out': m(x).tolist(), 's': time.perf_counter() - t}))\n"
    "except Exception as e:\n"
    "    print(json.dumps({'error': str(e).splitlines()[0], 's': time.perf_counter() - t}))\n"
)

EMPTY_INPUT = (
    "[json.exception.parse_error.101] parse error at line 1, column 1: attempting to parse an "
    "empty input"
)


@pytest.fixture(scope="session")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[list[float]]]:
    """blob.pt2 and cpp_only.pt2 of one model, and its eager output (plain torch, one process)."""
    out = tmp_path_factory.mktemp("blob_cpp_only")
    return out, plain_torch(BUILD, str(out))


def _close(a: list[list[float]], b: list[list[float]]) -> bool:
    return all(abs(x - y) <= 1e-5 for ra, rb in zip(a, b) for x, y in zip(ra, rb))


def _check(capsys: pytest.CaptureFixture[str], path: Path) -> tuple[int, dict[str, Any]]:
    rc = main(["check", str(path), "--static-only", "-f", "json", "--no-config"])
    return rc, json.loads(capsys.readouterr().out)


def _inspect(capsys: pytest.CaptureFixture[str], path: Path, fmt: str) -> str:
    assert main(["inspect", str(path), "-f", fmt, "--no-config"]) == 0
    return capsys.readouterr().out


def _codes(data: dict[str, Any]) -> dict[str, str]:
    return {f["code"]: f["severity"] for f in data["findings"]}


@pytest.mark.slow
def test_aot031_binary_blob_weights_and_an_empty_kernel_metadata(
    capsys: pytest.CaptureFixture[str], built: tuple[Path, list[list[float]]], tmp_path: Path
) -> None:
    folder, eager = built
    path = folder / "blob.pt2"
    with zipfile.ZipFile(path) as z:
        sizes = {i.filename: i.file_size for i in z.infolist()}
    blob = next(n for n in sizes if n.endswith(".wrapper_weights.blob"))
    assert sizes[blob] > 0 and any(n.endswith(".so") for n in sizes)
    # plain torch loads it with the weights from the blob
    said = plain_torch(LOAD, str(path))
    assert "out" in said and _close(said["out"], eager), said
    data = json.loads(_inspect(capsys, path, "json"))
    model = data["package"]["models"][0]
    assert model["weights_location"] == "binary_blob" and model["aoti"]["weights_blob"] == blob
    text = _inspect(capsys, path, "table")
    assert f"binary_blob ({blob.rsplit('/', 1)[-1]})" in text and "in_so" not in text
    rc, report = _check(capsys, path)
    assert rc == 0 and "AOT031" not in _codes(report) and "AOT011" not in _codes(report)

    # the same package with the empty kernel_metadata.json a torch 2.13 binary_blob build
    # was reported with: plain torch cannot load it; --static-only said PASS
    kernel_meta = next(n for n in sizes if n.endswith(".kernel_metadata.json"))
    broken = rewrite(
        path, tmp_path / "blob_empty_meta.pt2", lambda n, d: b"" if n == kernel_meta else d
    )
    said = plain_torch(LOAD, str(broken))
    assert said.get("error", "").startswith(EMPTY_INPUT), said
    rc, report = _check(capsys, broken)
    assert rc == 1 and _codes(report).get("AOT031") == "error", report["findings"]
    found = next(f for f in report["findings"] if f["code"] == "AOT031")
    assert found["actual"] == kernel_meta and kernel_meta in found["message"]
    assert "empty (0 bytes)" in found["message"] and "parse_error.101" in found["message"]


@pytest.mark.slow
def test_aot032_cpp_only_package_compiles_at_every_load(
    capsys: pytest.CaptureFixture[str], built: tuple[Path, list[list[float]]], tmp_path: Path
) -> None:
    folder, eager = built
    path = folder / "cpp_only.pt2"
    with zipfile.ZipFile(path) as z:
        names = z.namelist()
    assert not any(n.endswith(".so") for n in names)
    assert any(n.endswith("CMakeLists.txt") for n in names)
    # plain torch compiles it inside aoti_load_package and runs it
    said = plain_torch(LOAD, str(path))
    assert "out" in said and _close(said["out"], eager), said
    # without g++ on PATH the same load fails, at the compile step or at the link (torch 2.11
    # on the GPU machine: `Failed to link files.`), whichever first needs the missing g++
    no_compiler = tmp_path / "bin"
    no_compiler.mkdir()
    said = plain_torch(LOAD, str(path), env={"PATH": str(no_compiler), "CXX": "g++"})
    assert said.get("error") in ("Failed to compile cpp file.", "Failed to link files."), said

    rc, report = _check(capsys, path)
    assert rc == 0 and _codes(report).get("AOT032") == "warning", report["findings"]
    assert "AOT050" not in _codes(report)
    message = next(f for f in report["findings"] if f["code"] == "AOT032")["message"]
    assert "compiled at load" in message and "g++ and the torch headers" in message
    text = _inspect(capsys, path, "table")
    assert "C++ sources, compiled at load" in text and "compiles at load" in text
    data = json.loads(_inspect(capsys, path, "json"))
    aoti = data["package"]["models"][0]["aoti"]
    assert aoti["compiled_at_load"] is True and aoti["shared_objects"] == []
    assert data["targets"][0]["status"] == "compiles at load"
    assert "needs g++ and the torch headers" in data["targets"][0]["reasons"][0]


@pytest.mark.slow
def test_aot644_the_perf_stage_books_the_compile_at_load(
    capsys: pytest.CaptureFixture[str], built: tuple[Path, list[list[float]]]
) -> None:
    """The dynamic check of a cpp-only package: the load compiles (plain torch's load above),
    and the perf stage says so instead of advising a pre-extracted folder (AOT641)."""
    folder, _ = built
    rc = main(["check", str(folder / "cpp_only.pt2"), "-f", "json", "--no-config", "--no-probe"])
    report = json.loads(capsys.readouterr().out)
    assert rc == 0, report["findings"]
    found = _codes(report)
    assert found.get("AOT644") == "info" and "AOT641" not in found
    perf = next(s for s in report["stages"] if s["name"] == "perf")
    assert "extract and compile" in perf["detail"]


# -- fast: hand-made archives laid out as package_pt2 writes them

DIR = "pkg/data/aotinductor/model/"
META = b'{"AOTI_DEVICE_KEY": "cpu", "AOTI_PLATFORM": "linux"}'


def _archive(path: Path, members: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
        z.writestr("pkg/archive_format", "pt2")
        z.writestr("pkg/archive_version", "0")
        for name, data in members.items():
            z.writestr(DIR + name, data)
    return path


@pytest.mark.parametrize(
    ("kernel_meta", "why"),
    [(b"", "empty (0 bytes)"), (b'{"AOTI_DEVICE_KEY": ', "not valid JSON"),
     (b'{"AOTI_DEVICE_KEY": 1}', "not a JSON object of strings"), (META, None)],
)  # fmt: skip
def test_kernel_metadata_the_loader_parses(
    tmp_path: Path, kernel_meta: bytes, why: str | None
) -> None:
    path = _archive(
        tmp_path / "pkg.pt2",
        {
            "w.wrapper.cpp": b"// wrapper",
            "w.wrapper_metadata.json": META,
            "w.wrapper_weights.blob": b"\0" * 16,
            "k.kernel.cpp": b"// kernel",
            "k.kernel_metadata.json": kernel_meta,
        },
    )
    package = read_package(path)
    model = package.models[0]
    assert model.weights_location == "binary_blob"
    assert model.aoti is not None and model.aoti.weights_blob == DIR + "w.wrapper_weights.blob"
    expected = () if why is None else ((DIR + "k.kernel_metadata.json", why),)
    assert model.aoti.metadata_unreadable == expected
    found = [f for f in check_package(package, list(package.models)) if f.code == "AOT031"]
    assert len(found) == (0 if why is None else 1)


def test_a_kernel_metadata_without_its_cpp_is_not_read(tmp_path: Path) -> None:
    # the loader pairs the metadata with a packaged .cpp; a stray empty one is not its input
    path = _archive(
        tmp_path / "pkg.pt2",
        {"w.wrapper.cpp": b"// w", "w.wrapper_metadata.json": META, "k.kernel_metadata.json": b""},
    )
    model = read_package(path).models[0]
    assert model.aoti is not None and model.aoti.metadata_unreadable == ()
    assert model.weights_location == "in_so"


def test_cpp_sources_with_build_flags_are_compiled_at_load_not_a_lost_so(tmp_path: Path) -> None:
    flags = {"w.wrapper_compile_flags.json": b"{}", "w.wrapper_linker_flags.json": b"{}"}
    base = {"w.wrapper.cpp": b"// w", "w.wrapper_metadata.json": META}
    for members, compiled, code in (
        ({**base, **flags}, True, "AOT032"),
        (base, False, "AOT050"),
    ):
        package = read_package(_archive(tmp_path / f"{code}.pt2", members))
        aoti = package.models[0].aoti
        assert aoti is not None and aoti.compiled_at_load is compiled
        found = {f.code for f in check_package(package, list(package.models))}
        assert code in found and ({"AOT032", "AOT050"} - {code}).isdisjoint(found)
