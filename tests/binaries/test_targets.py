"""Targets judged from the binaries: --target parsing, and each incompatibility on real and
synthetic packages (tests/binaries/synth.py), with the cases that must NOT be flagged."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from aotipre.api import CheckOptions, check, compatibility
from aotipre.binaries.versions import load_table, producer_range
from aotipre.environment.host import detect_local, parse_target, parse_targets
from aotipre.findings import Severity, Verdict
from aotipre.foundation.errors import UsageError
from aotipre.pt2.reader import read_package
from tests.binaries.synth import compile_so, cuda_package, rewrite


def _check(path: Path, target: str, **kw: object):
    return check(path, CheckOptions(static_only=True, target=target, **kw))  # type: ignore[arg-type]


def _codes(report, severity: Severity | None = None) -> list[str]:
    return sorted(f.code for f in report.findings if severity is None or f.severity is severity)


# ------------------------------------------------------------------ parsing


def test_target_spec() -> None:
    t = parse_target(
        "cuda,cc=8.0,8.6,sm_90,isa=avx2,torch=2.12,glibc=2.31,libstdcxx=3.4.29,driver=535"
    )
    assert t.compute_capabilities == ("8.0", "8.6", "9.0")
    assert (
        t.cpu_flags is not None and {"avx2", "fma"} <= t.cpu_flags and "avx512f" not in t.cpu_flags
    )
    assert t.torch is not None and t.torch.release == "2.12"
    assert (t.glibc, t.glibcxx, t.driver, t.primary_device) == ("2.31", "3.4.29", "535", "cuda")
    assert parse_target("cpu,isa=x86-64-v3+avx512f").cpu_flags >= {"avx2", "avx512f"}  # type: ignore[operator]
    two = parse_targets("cpu,isa=avx2; fleet", {"fleet": "cuda,cc=9.0"})
    assert [t.label for t in two] == ["cpu,isa=avx2", "fleet"]
    assert [t.label for t in parse_targets(None, {"a": "cpu", "b": "cuda"})] == ["a", "b"]
    for bad, why in (
        ("cuda,cc=nine", "compute capability"),
        ("cpu,isa=avx9000!", "isa"),
        ("cpu,torch=latest", "torch version"),
        ("cpu,glibc=new", "version number"),
        ("cpu,libtorch=/nonexistent", "libtorch_cpu.so"),
        ("cpu,image=/nonexistent", "not a folder"),
        ("cpu,colour=red", "unknown"),
    ):
        with pytest.raises(UsageError, match=why):
            parse_target(bad)


def test_this_machine_is_read_without_torch() -> None:
    host = detect_local(probe_cuda=False)
    assert host.torch is not None and host.torch.version.startswith("2.")
    assert host.glibc is not None and host.glibc.startswith("2.")
    if Path("/proc/cpuinfo").is_file():
        assert host.cpu_flags and "sse2" in host.cpu_flags
    probe = (
        "import sys; from aotipre.environment.host import detect_local; h = detect_local(probe_cuda=False); "
        "assert h.torch is not None; assert 'torch' not in sys.modules, 'imported torch'"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_libtorch_folder_exports_are_read(fixture_dir: Path) -> None:
    import importlib.util

    spec = importlib.util.find_spec("torch")
    assert spec is not None and spec.submodule_search_locations
    folder = spec.submodule_search_locations[0]
    t = parse_target(f"cpu,libtorch={folder}")
    assert t.torch is not None and t.torch.exports and "aoti_torch_get_sizes" in t.torch.exports
    import torch

    assert t.torch.version == torch.__version__  # read from the folder, not imported
    # the SLEEF vector math libtorch_cpu bundles, which vectorized CPU kernels import
    assert any(name.startswith("Sleef_") for name in t.torch.exports)
    # every real fixture package's .so finds what it imports from torch there
    for name in ("aoti", "both", "embedding_oob", "dtypes"):
        report = _check(fixture_dir / f"{name}.pt2", f"cpu,libtorch={folder}")
        assert "AOT430" not in _codes(report), (name, report.findings)


def test_image_root(tmp_path: Path) -> None:
    libc = Path("/lib/x86_64-linux-gnu/libc.so.6")
    cxx = Path("/usr/lib/x86_64-linux-gnu/libstdc++.so.6")
    if not (libc.is_file() and cxx.is_file()):
        pytest.skip("needs the Debian library paths")
    (tmp_path / "lib/x86_64-linux-gnu").mkdir(parents=True)
    (tmp_path / "usr/lib/x86_64-linux-gnu").mkdir(parents=True)
    shutil.copy(libc, tmp_path / "lib/x86_64-linux-gnu/libc.so.6")
    shutil.copy(cxx, tmp_path / "usr/lib/x86_64-linux-gnu/libstdc++.so.6")
    t = parse_target(f"cpu,image={tmp_path}")
    here = os.confstr("CS_GNU_LIBC_VERSION").split()[1]
    assert t.glibc == here and t.glibcxx is not None and t.glibcxx.startswith("3.4.")


# ------------------------------------------------------------------ torch version table


def test_table_covers_the_wheels() -> None:
    table = load_table()
    assert table.releases[:5] == ("2.11", "2.12", "2.13", "2.14", "2.15")
    assert "AOTInductorModelCreateV2" in table.entry_points
    assert table.entry_points["AOTInductorModelCreateV2"] == {"2.13", "2.14", "2.15"}
    # field notes, "torch 2.15, read from its wheels": 47 entry points, the new one below
    assert table.entry_points["AOTInductorModelContainerSetUseStreamAffinity"] == {"2.15"}


def test_producer_of_a_213_package(fixture_dir: Path) -> None:
    (model,) = read_package(fixture_dir / "aoti.pt2").models
    so = model.aoti.binaries.shared_objects[0]  # type: ignore[union-attr]
    found = producer_range(so.entry_points, so.imports)
    import torch  # the fixtures' torch (2.13 here; 2.11 on the GPU machine)

    release = ".".join(torch.__version__.split(".")[:2])
    assert release in found.releases and not found.newer_than_table
    if release == "2.13":  # 2.11 and 2.12 packages define the same entry points
        assert found.releases == ("2.13",) and any("not 2.12" in e for e in found.evidence)
    newer = producer_range((*so.entry_points, "AOTInductorModelContainerFromTheFuture"), ())
    assert newer.newer_than_table and "newer than 2.15" in newer.text


def test_213_package_loads_on_older_and_newer_torch(fixture_dir: Path) -> None:
    """Measured on the GPU machine: torch 2.13 CPU packages load and run on torch 2.11; and here
    in a fresh torch 2.15.0 process (CI's .venv-2.15; tests/runner/test_torch215.py)."""
    for torch in ("2.11", "2.12", "2.13", "2.14", "2.15"):
        report = _check(fixture_dir / "aoti.pt2", f"cpu,torch={torch}")
        assert "AOT430" not in _codes(report), torch
    unknown = _check(fixture_dir / "aoti.pt2", "cpu,torch=2.16")
    assert "AOT439" in _codes(unknown, Severity.INFO) and unknown.verdict is Verdict.PASS


def test_shim_symbol_missing(fixture_dir: Path, tmp_path: Path) -> None:
    """Synthetic: the fixture's .so swapped for one importing a shim function torch 2.13 added."""
    new = "aoti_torch_cpu_grid_sampler_3d"
    assert load_table().shim[new] == {"2.13", "2.14", "2.15"}
    so = compile_so(
        tmp_path, f"extern int {new}(void); int f(void){{return {new}();}}", name="wrapper.so"
    )
    if so is None:
        pytest.skip("no C compiler")
    pkg = rewrite(
        fixture_dir / "aoti.pt2",
        tmp_path / "synthetic.pt2",
        lambda n, d: so.read_bytes() if n.endswith(".wrapper.so") else d,
    )
    old = _check(pkg, "cpu,torch=2.12")
    (f,) = [f for f in old.findings if f.code == "AOT430"]
    assert f.severity is Severity.ERROR and f"undefined symbol: {new}" in f.message
    assert old.targets[0]["status"] == "cannot load"
    assert "AOT430" not in _codes(_check(pkg, "cpu,torch=2.13"))


def test_glibc_and_libstdcxx() -> None:
    # the fixed package (built with gcc 12 against glibc 2.36): what a .so needs of glibc and
    # libstdc++ depends on the toolchain that built it, not on this host
    report = _check(AVX512, "cpu,glibc=2.17,libstdcxx=3.4.19", model="encoder")
    codes = _codes(report, Severity.ERROR)
    assert codes == ["AOT431", "AOT432"]
    (f,) = [f for f in report.findings if f.code == "AOT431"]
    assert "version `GLIBC_2." in f.message and f.actual == "GLIBC_2.17"
    assert "AOT431" not in _codes(_check(AVX512, "cpu,glibc=2.99", model="encoder"))


# ------------------------------------------------------------------ CPU instructions


def test_amx_host_package_passes_on_avx512_without_amx(fixture_dir: Path) -> None:
    info = read_package(fixture_dir / "aoti.pt2")
    flags = info.models[0].aoti.binaries.shared_objects[0].flags  # type: ignore[union-attr]
    if flags is None or "amx_tile" not in flags.enabled:
        pytest.skip("the fixtures were not compiled on an AMX host")
    report = _check(fixture_dir / "aoti.pt2", "cpu,isa=avx512+avx512_vnni+avx512_bf16+avx512bw")
    assert report.verdict is Verdict.PASS, report.findings
    (f,) = [f for f in report.findings if f.code == "AOT437"]
    assert "AMX_TILE" in f.message and f.severity is Severity.INFO
    avx2 = _check(fixture_dir / "aoti.pt2", "cpu,isa=avx2")
    (sigill,) = [f for f in avx2.findings if f.code == "AOT436"]
    assert "avx512f" in sigill.expected and avx2.verdict is Verdict.FAIL


def test_cpu_package_on_a_gpu_target_fails(fixture_dir: Path) -> None:
    report = _check(fixture_dir / "aoti.pt2", "cuda,cc=9.0")
    assert "AOT406" in _codes(report, Severity.ERROR) and report.exit_code == 1


# ------------------------------------------------------------------ GPU code


def test_gpu_fleet(fixture_dir: Path, tmp_path: Path) -> None:
    """Synthetic CUDA packages: real nvcc cubins/fatbins in torch 2.11's aoti_cuda archive."""
    hopper = cuda_package(tmp_path, ["sm90a.cubin"], fixture_dir / "aoti.pt2")
    report = _check(hopper, "cuda,cc=8.0,9.0")
    (f,) = [f for f in report.findings if f.code == "AOT433"]
    assert f.expected == "8.0" and f.actual == ["sm_90a"] and "no PTX" in f.message
    # compiled on an sm_90 (AOTI_COMPUTE_CAPABILITY "90"): the hint names the dropping of
    # TORCH_CUDA_ARCH_LIST entries below the compile GPU
    assert "compiled on sm_90, and AOTInductor drops TORCH_CUDA_ARCH_LIST" in (f.hint or "")
    assert "AOT433" not in _codes(_check(hopper, "cuda,cc=9.0"))
    assert "AOT402" not in _codes(report)  # the metadata string is not used when cubins read
    (multi_dir := tmp_path / "multi").mkdir()
    multi = cuda_package(multi_dir, ["multi.fatbin"], fixture_dir / "aoti.pt2")
    fleet = _check(multi, "cuda,cc=8.0,8.6,9.0,10.0")
    assert not [f for f in fleet.findings if f.code == "AOT433"], fleet.findings
    jit = [f for f in fleet.findings if f.code == "AOT435"]
    assert [f.expected for f in jit] == ["10.0"]  # SASS for 8.x and 9.0, PTX JIT on 10.0
    old_driver = _check(multi, "cuda,cc=9.0,driver=535.104.05")
    (d,) = [f for f in old_driver.findings if f.code == "AOT434"]
    assert d.expected == "580.65.06" and d.actual == "535.104.05"
    assert fleet.targets[0]["status"] == "loads"


AVX512 = Path(__file__).resolve().parents[1] / "data" / "isa" / "avx512.pt2"
"""Two models (decoder, encoder) compiled for -march=skylake-avx512 with AVX-512 vector code,
whatever the host that runs the tests (tests/data/isa/build.py): never loaded, only read."""


def test_inspect_table_per_target() -> None:
    info = read_package(AVX512)
    findings, rows = compatibility(info, "cpu,isa=avx2;cpu,torch=2.11")
    assert [(r.target, r.model, r.status) for r in rows] == [
        ("cpu,isa=avx2", "decoder", "cannot run"),
        ("cpu,isa=avx2", "encoder", "cannot run"),
        ("cpu,torch=2.11", "decoder", "loads"),
        ("cpu,torch=2.11", "encoder", "loads"),
    ]
    assert {f.code for f in findings} >= {"AOT051", "AOT436"}


# ------------------------------------------------------------------ hostile members, CLI, config


@pytest.mark.parametrize("cut", [10, 100, 4000, -5000])
def test_truncated_so_member_is_one_finding(fixture_dir: Path, tmp_path: Path, cut: int) -> None:
    pkg = rewrite(
        fixture_dir / "aoti.pt2",
        tmp_path / "truncated_so.pt2",
        lambda n, d: d[:cut] if n.endswith(".wrapper.so") else d,
    )
    report = _check(pkg, "cpu,isa=avx2")
    (f,) = [f for f in report.findings if f.code == "AOT050"]
    assert f.severity is Severity.ERROR and "\n" not in f.message
    assert report.error is None and report.verdict is Verdict.FAIL


def test_cli_inspect_and_config_targets(
    fixture_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch
) -> None:
    from aotipre.cli import main

    monkeypatch.chdir(tmp_path)
    (tmp_path / "aotipre.toml").write_text(
        '[targets]\nold-cpus = "cpu,isa=avx2"\nserving = "cpu,isa=avx512,torch=2.11"\n'
    )
    pkg = str(AVX512)
    for fast in (True, False):
        assert main(["inspect", pkg], fast_lane=fast) == 0
        out = capsys.readouterr().out
        assert "target: old-cpus" in out and "target: serving" in out and "cannot run" in out
    assert main(["inspect", pkg, "--target", "serving", "--format", "json"]) == 0
    data = __import__("json").loads(capsys.readouterr().out)
    assert [(r["target"], r["model"]) for r in data["targets"]] == [
        ("serving", "decoder"),
        ("serving", "encoder"),
    ]
    assert main(["check", pkg, "--static-only"]) == 1  # old-cpus: SIGILL
    assert "AOT436" in capsys.readouterr().out
    assert main(["check", pkg, "--static-only", "--target", "serving"]) == 0
    (tmp_path / "aotipre.toml").write_text('[targets]\nbad = "cpu,isa=avx9000!"\n')
    assert main(["check", pkg, "--static-only"]) == 2
    assert "targets" in capsys.readouterr().err


def test_reports_carry_the_target_table() -> None:
    from aotipre.report import markdown, table

    report = _check(AVX512, "cpu,isa=avx2;cpu,isa=avx512", model="encoder")
    md = markdown.render_report(report)
    assert "| target | model | status |" in md
    assert (
        "| cpu,isa=avx2 | encoder | cannot run |" in md
        and "| cpu,isa=avx512 | encoder | loads |" in md
    )
    text = table.render_report(report)
    assert "target: cpu,isa=avx2" in text and "target: cpu,isa=avx512" in text
    assert [r["status"] for r in report.to_dict()["targets"]] == ["cannot run", "loads"]


def test_libtorch_folder_checks_every_torch_symbol(fixture_dir: Path, tmp_path: Path) -> None:
    """Synthetic: a .so importing a shim function and SLEEF's vector exp (what a vectorized
    `exp` on AVX-512 imports from libtorch_cpu) against a libtorch folder that lacks the latter,
    the installed torch (which exports both) and the shipped table (the shim only)."""
    so = compile_so(
        tmp_path,
        "extern int aoti_torch_get_sizes(void); extern int Sleef_expf16_u10(void);\n"
        "int f(void){return aoti_torch_get_sizes() + Sleef_expf16_u10();}",
        name="wrapper.so",
    )
    lib = compile_so(tmp_path, "int aoti_torch_get_sizes(void){return 0;}", name="libtorch_cpu.so")
    if so is None or lib is None:
        pytest.skip("no C compiler")
    (tmp_path / "fake" / "lib").mkdir(parents=True)
    shutil.copy(lib, tmp_path / "fake" / "lib" / "libtorch_cpu.so")
    pkg = rewrite(
        fixture_dir / "aoti.pt2",
        tmp_path / "synthetic.pt2",
        lambda n, d: so.read_bytes() if n.endswith(".wrapper.so") else d,
    )
    fake = _check(pkg, f"cpu,libtorch={tmp_path / 'fake'}")
    (f,) = [f for f in fake.findings if f.code == "AOT430"]
    assert "imports 1 symbol(s) torch unknown does not export" in f.message
    assert "`undefined symbol: Sleef_expf16_u10`" in f.message and f.expected == [
        "Sleef_expf16_u10"
    ]
    import importlib.util

    spec = importlib.util.find_spec("torch")
    assert spec is not None and spec.submodule_search_locations
    installed = _check(pkg, f"cpu,libtorch={spec.submodule_search_locations[0]}")
    assert "AOT430" not in _codes(installed)
    assert "AOT430" not in _codes(_check(pkg, "cpu,torch=2.13"))  # the table: the shim only
