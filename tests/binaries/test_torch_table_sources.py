"""scripts/build_torch_table.py --sources: a release's row read from its C shim headers and
interface.cpp instead of a wheel (torch 2.15 could not be installed here). No torch import.
"""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest

from aotipre.binaries.versions import load_table

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "build_torch_table.py"

SHIM_H = """\
#include <torch/csrc/inductor/aoti_torch/c/macros.h>
// AOTI_TORCH_EXPORT int32_t aoti_torch_in_a_comment();
/* AOTI_TORCH_EXPORT int32_t aoti_torch_in_a_block_comment(); */
AOTI_TORCH_EXPORT int32_t aoti_torch_device_type_cpu();
#if TORCH_FEATURE_VERSION >= TORCH_VERSION_2_15_0
AOTI_TORCH_EXPORT int32_t aoti_torch_dtype_new_in_215();
#endif
AOTI_TORCH_EXPORT AOTITorchError
aoti_torch_get_sizes(AtenTensorHandle tensor, int64_t** ret_sizes);
#ifdef USE_CUDA
AOTI_TORCH_EXPORT AOTITorchError aoti_torch_create_cuda_guard(
    int32_t device_index,
    CUDAGuardHandle* ret_guard);
#endif
"""
INTERFACE_CPP = """\
extern "C" {
AOTIRuntimeError AOTInductorModelContainerCreate(
    AOTInductorModelContainerHandle* container_handle) AOTI_RUNTIME_TRY({ return 0; })
AOTIRuntimeError AOTInductorGetLastError(const char** msg) { return 0; }
// AOTIRuntimeError AOTInductorCommentedOut(
}
"""


@pytest.fixture(scope="module")
def script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("build_torch_table", SCRIPT)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    path = list(sys.path)
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path[:] = path
    return module


def _checkout(root: Path) -> Path:
    """A pytorch checkout holding only what --sources reads."""
    c = root / "torch/csrc/inductor/aoti_torch/c"
    g = root / "torch/csrc/inductor/aoti_torch/generated"
    c.mkdir(parents=True)
    g.mkdir(parents=True)
    (c / "macros.h").write_text("#define AOTI_TORCH_EXPORT\n")
    (c / "shim.h").write_text(SHIM_H)
    (c / "shim_mps.h").write_text("AOTI_TORCH_EXPORT AOTITorchError aoti_torch_mps_free(void*);\n")
    (c / "shim_xpu.h").write_text("AOTI_TORCH_EXPORT AOTITorchError aoti_torch_xpu_x();\n")
    for backend in ("cpu", "cuda", "aten"):
        (g / f"c_shim_{backend}.h").write_text(
            f"AOTI_TORCH_EXPORT AOTITorchError aoti_torch_{backend}_abs("
            "AtenTensorHandle self, AtenTensorHandle* ret0);\n"
        )
    (g / "c_shim_xpu.h").write_text("AOTI_TORCH_EXPORT AOTITorchError aoti_torch_xpu_abs();\n")
    (g / "c_shim_cuda.cpp").write_text("AOTITorchError aoti_torch_cuda_defined_only() {}\n")
    interface = root / "torch/_inductor/codegen/aoti_runtime/interface.cpp"
    interface.parent.mkdir(parents=True)
    interface.write_text(INTERFACE_CPP)
    return root


def test_sources_row_from_a_checkout(script: ModuleType, tmp_path: Path) -> None:
    got = script.read_sources(_checkout(tmp_path / "pytorch"), "2.15.0")
    assert set(got["shim"]) == {
        "aoti_torch_device_type_cpu",
        "aoti_torch_dtype_new_in_215",  # under an #if: declared counts (superset, safe side)
        "aoti_torch_get_sizes",  # name on the line after AOTI_TORCH_EXPORT
        "aoti_torch_create_cuda_guard",  # under #ifdef USE_CUDA
        "aoti_torch_cpu_abs",
        "aoti_torch_cuda_abs",
        "aoti_torch_aten_abs",
    }  # no comments, no mps/xpu headers, no .cpp
    assert got["entry_points"] == ["AOTInductorGetLastError", "AOTInductorModelContainerCreate"]
    assert got["derived"] == "sources" and got["cuda"] is True
    assert "c/shim.h" in got["source"] and "generated/c_shim_cuda.h" in got["source"]
    assert "mps" not in got["source"] and "xpu" not in got["source"]


def test_sources_mode_writes_a_marked_row(script: ModuleType, tmp_path: Path) -> None:
    table = tmp_path / "table.json"
    table.write_text((REPO / "aotipre/binaries/torch_table.json").read_text())
    argv = ["--sources", str(_checkout(tmp_path / "pytorch")), "--version", "2.16.0"]
    assert script.main([*argv, "--output", str(table)]) == 0
    data = json.loads(table.read_text())
    assert data["releases"]["2.16"]["derived"] == "sources"
    assert data["releases"]["2.16"]["version"] == "2.16.0"
    assert "derived" not in data["releases"]["2.15"]  # the wheel rows are kept as they were
    assert data["shim"]["aoti_torch_dtype_new_in_215"] == ["2.16"]
    assert data["entry_points"]["AOTInductorGetLastError"] == ["2.13", "2.14", "2.15", "2.16"]
    # A wheel-derived row is never replaced by one read from sources.
    argv = ["--sources", str(tmp_path / "pytorch"), "--version", "2.14.1"]
    assert script.main([*argv, "--output", str(table)]) == 0
    assert "derived" not in json.loads(table.read_text())["releases"]["2.14"]


def test_sources_and_version_go_together(script: ModuleType, tmp_path: Path) -> None:
    with pytest.raises(SystemExit):
        script.main(["--sources", str(tmp_path)])
    with pytest.raises(SystemExit):
        script.main([])


def _installed_torch_213() -> Path | None:
    spec = importlib.util.find_spec("torch")  # finds, does not import
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(next(iter(spec.submodule_search_locations)))
    version = (folder / "version.py").read_text() if (folder / "version.py").is_file() else ""
    found = re.search(r"__version__\s*=\s*'([^']+)'", version)
    ok = found and found.group(1).startswith("2.13.") and (folder / "include").is_dir()
    return folder if ok else None


def test_the_method_against_a_wheel_row(script: ModuleType) -> None:
    """The headers an installed torch 2.13 ships give exactly the wheel-derived 2.13 row."""
    folder = _installed_torch_213()
    if folder is None:
        pytest.skip("needs an installed torch 2.13 with its include/ headers")
    got = script.read_sources(folder, "2.13.0")
    table = load_table()
    assert set(got["shim"]) == table.exports("2.13")
    assert set(got["entry_points"]) == {n for n, r in table.entry_points.items() if "2.13" in r}


def test_215_row_comes_from_the_wheel() -> None:
    """torch 2.15.0 installs from the package registry (scripts/bootstrap.sh lifts this
    workplace's 2.14.1 cap): its row was read from torch-2.15.0-cp311-...-x86_64.whl (+cu132) by
    `scripts/build_torch_table.py WHEEL`, like every other row; the field notes' counts."""
    table = load_table()
    assert table.releases[-1] == "2.15" and set(table.derived.values()) == {"wheel"}
    assert len(table.exports("2.15")) == 506
    assert sum("2.15" in r for r in table.entry_points.values()) == 47


SECOND_TORCHES = sorted((REPO).glob(".venv-2.1[5-9]/lib/python3*/site-packages/torch"))


@pytest.mark.skipif(not SECOND_TORCHES, reason="no .venv-2.15 (bash .ci/run builds it)")
def test_the_215_row_against_its_installed_wheel(script: ModuleType) -> None:
    """The method, run on the installed 2.15.0 (CI's .venv-2.15): its libraries' exports and
    interface.cpp give the row in the table, and its headers give exactly the same names."""
    folder = SECOND_TORCHES[0]
    table = load_table()
    got = script.read_sources(folder, "2.15.0")
    assert set(got["shim"]) == table.exports("2.15")
    assert set(got["entry_points"]) == {n for n, r in table.entry_points.items() if "2.15" in r}
