"""aotipre doctor with real torch workers: the CPU canary (slow) and the CUDA canary (gpu)."""

from __future__ import annotations

import glob
import hashlib
import json
import os
import platform
import shutil
import struct
import subprocess
import zipfile
from importlib import metadata
from pathlib import Path

import pytest

from aotipre.doctor import DoctorOptions, DoctorReport, run_doctor
from aotipre.doctor import canary as canary_mod
from aotipre.doctor.render import render
from aotipre.findings import Verdict
from aotipre.runner.stages import DynamicOptions


@pytest.fixture(scope="module")
def options(tmp_path_factory: pytest.TempPathFactory) -> DynamicOptions:
    """One compile cache for the module: the canary compiles once per device."""
    return DynamicOptions(cache_dir=str(tmp_path_factory.mktemp("doctor-cache")), timeout_s=300.0)


def doctor(device: str, options: DynamicOptions) -> DoctorReport:
    return run_doctor(DoctorOptions(devices=(device,), dynamic=options))


@pytest.fixture(scope="module")
def cpu_report(options: DynamicOptions) -> DoctorReport:
    """The CPU doctor's report, run once for the module: its canary compiled into `options`'
    cache, where the crash test patches it."""
    return doctor("cpu", options)


def check_canary(report: DoctorReport, device: str) -> None:
    """The canary works; or, on a host whose libstdc++ crashes the loader (the torch 2.11 GPU
    machine), it works with the preload the doctor verified, and that is the only finding."""
    table = render(report, "table")
    (canary,) = report.canaries
    assert canary.device == device
    assert canary.status in ("works", "needs_preload"), table
    # AOT528: this torch's C++ loader has the load_json_file race (torch #194128), a fact of the
    # installed libtorch that the doctor's C++ row reports on every host that has it; a run that
    # hits it (the same loaders constructed one at a time pass) adds AOT526 as a warning
    race = [f for f in report.findings if f.code == "AOT526"]
    for f in race:  # the message says which run failed how, when this does not hold
        assert f.severity.value == "warning" and "hit by this run" in f.message, f.message
    codes = [f.code for f in report.findings if f.code not in ("AOT528", "AOT526")]
    if canary.status == "works":
        assert report.verdict is Verdict.PASS, table
        assert codes == [], table
    else:
        assert codes == ["AOT515"], table
        assert canary.preload and f"verified: with LD_PRELOAD={canary.preload}" in table
    (cpp,) = report.cpp
    assert cpp.device == device and cpp.status == "works", table
    assert "loads and runs" in cpp.summary
    assert ("8 loaders constructed at once: ok" in cpp.summary) is not bool(race), cpp.summary
    assert [s.status.value for s in canary.stages if s.name in ("run", "compare")] == [
        "passed",
        "passed",
    ], table


@pytest.mark.slow
def test_cpu_canary_compiles_loads_and_runs(
    options: DynamicOptions, cpu_report: DoctorReport
) -> None:
    report = cpu_report
    check_canary(report, "cpu")
    torch_facts = report.facts["torch"]
    assert torch_facts["version"].split("+")[0] == metadata.version("torch").split("+")[0]
    assert report.facts["compiler"]["works"] is True
    assert any("libstdc++" in lib["path"] for lib in report.facts["libstdcxx"]["loaded"])
    # check's host canary reuses the doctor's result: cached per host and torch version
    cached = canary_mod.host_canary("cpu", options)
    assert cached.cached and cached.status == report.canaries[0].status
    assert Path(canary_mod.program_path(options, "/nonexistent")).is_file()


def _patch_symbol(package: str, name_part: str, code: bytes) -> tuple[int, bytes]:
    """Overwrite the start of a function in the package's wrapper .so (STORED, in place);
    returns (file offset, original bytes). The first LOAD segments of an AOTI .so map file
    offsets 1:1 to addresses, so a symbol's address is its offset in the member."""
    with zipfile.ZipFile(package) as zf:
        (member,) = [n for n in zf.namelist() if n.endswith(".wrapper.so")]
        info = zf.getinfo(member)
        data = zf.read(member)
    with open(package, "rb") as f:
        f.seek(info.header_offset + 26)
        name_len, extra_len = struct.unpack("<HH", f.read(4))
    start = info.header_offset + 30 + name_len + extra_len
    assert data[:4] == b"\x7fELF"
    scratch = Path(package).with_suffix(".so.tmp")
    scratch.write_bytes(data)
    try:
        symbols = subprocess.run(
            ["nm", str(scratch)], capture_output=True, text=True, check=True
        ).stdout
    finally:
        scratch.unlink()
    (address,) = {int(ln.split()[0], 16) for ln in symbols.splitlines() if name_part in ln}
    with open(package, "r+b") as f:
        f.seek(start + address)
        original = f.read(len(code))
        f.seek(start + address)
        f.write(code)
    return start + address, original


@pytest.mark.slow
@pytest.mark.skipif(
    platform.machine() != "x86_64" or shutil.which("nm") is None, reason="x86_64 and nm only"
)
def test_a_canary_that_crashes_in_parse_device_str_is_named(
    options: DynamicOptions, cpu_report: DoctorReport
) -> None:
    """The H100 failure, reproduced: the compiled canary's parse_device_str faults (patched to
    read address 0), so loading dies by SIGSEGV; the preload does not help; the re-run with the
    native backtrace names the frame."""
    assert cpu_report.canaries  # the canary is compiled into the module's cache
    program = canary_mod.program_path(options, "/nonexistent")
    package = canary_mod.compiled_canary(options, program, "cpu")
    assert package is not None
    entry = Path(package).parent / "entry.json"
    meta_text = entry.read_text()
    offset, original = _patch_symbol(package, "parse_device_str", bytes.fromhex("4831c0488b00"))
    try:
        meta = json.loads(meta_text)
        if "sha256" in meta:  # the cache verifies entries: record the patched bytes as valid
            meta["sha256"] = hashlib.sha256(Path(package).read_bytes()).hexdigest()
            entry.write_text(json.dumps(meta))
        report = doctor("cpu", options)
    finally:
        with open(package, "r+b") as f:
            f.seek(offset)
            f.write(original)
        entry.write_text(meta_text)
        for stale in glob.glob(os.path.join(canary_mod.canary_dir(options), "result-*.json")):
            os.unlink(stale)
    table = render(report, "table")
    # the C++ loader runs the same parse_device_str: C++ deployments crash too (AOT523)
    codes = [f.code for f in report.findings if f.code != "AOT528"]
    assert codes == ["AOT514", "AOT411", "AOT523"], table
    assert "C++ deployments are affected" in report.findings[1].message, table
    assert "SIGSEGV while constructing the loader" in report.findings[-1].message, table
    (canary,) = report.canaries
    assert canary.status == "crashes" and canary.stage == "load", table
    site = canary.crash_site
    assert site is not None and site.frame_class == "aoti-device-parser", table
    assert "parse_device_str" in report.findings[1].message
    assert "crashing frame: torch::aot_inductor::parse_device_str(...)" in table


@pytest.mark.gpu
def test_cuda_canary_compiles_loads_and_runs(options: DynamicOptions) -> None:
    report = doctor("cuda", options)
    assert report.facts["cuda"]["available"] is True
    check_canary(report, "cuda")
