"""aotipre doctor and the check canary with fake workers and a fake compiler (fast, no torch)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from aotipre import api
from aotipre.doctor import DoctorOptions, DoctorReport, run_doctor
from aotipre.doctor import canary as canary_mod
from aotipre.doctor.render import render
from aotipre.findings import Finding, StageStatus, Verdict
from aotipre.foundation.errors import UsageError
from aotipre.runner import stages as stages_mod
from aotipre.runner.stages import DynamicOptions, libstdcxx

TESTS = Path(__file__).resolve().parent
FAKE_WORKER = TESTS / "fakes" / "fake_doctor_worker.py"
FAKE_CXX = TESTS / "fakes" / "fake_cxx.sh"
CANARY = TESTS / "data" / "doctor_canary.pt2"
TRAMPOLINE = "/lib/x86_64-linux-gnu/libc.so.6(+0x3c050)[0x7f000003c050]"
# what the H100 machine's loader crash looks like through the backtrace helper
REGEX_CRASH_LOG = "\n".join(
    [
        "Fatal Python error: Segmentation fault",
        "",
        "Current thread 0x00007f0000000001 (most recent call first):",
        '  File "/opt/torch/_inductor/package/package.py", line 362 in load_package',
        "",
        "@@aotipre native backtrace",
        "/tmp/d/libaotipre_backtrace.so(+0x1176)[0x7f0000001176]",
        TRAMPOLINE,
        "/lib/x86_64-linux-gnu/libc.so.6(+0x8aeec)[0x7f000008aeec]",
        "/lib/x86_64-linux-gnu/libc.so.6(gsignal+0x12)[0x7f0000059fb2]",
        TRAMPOLINE,
        "/tmp/x/model.wrapper.so(_ZNSt8__detail8_ScannerIcE14_M_scan_normalEv+0x4c)[0x7f01]",
        "/tmp/x/model.wrapper.so(_ZNSt8__detail9_CompilerINSt7__cxx1112regex_traitsIcEEEC1EPKcS6_"
        "RKSt6localeNSt15regex_constants18syntax_option_typeE+0x9e)[0x7f02]",
        "/tmp/x/model.wrapper.so(_ZN5torch12aot_inductor16parse_device_strERKNSt7__cxx1112basic_"
        "stringIcSt11char_traitsIcESaIcEEERiS9_+0x91)[0x7f03]",
        "/opt/torch/lib/libtorch_cpu.so(+0x5d5e1f0)[0x7f04]",
        "@@aotipre mapped 7f10-7f20 r--p 00000000 fd:00 11 /opt/env/lib/libstdc++.so.6.0.29",
        "@@aotipre mapped 7f20-7f30 r-xp 00010000 fd:00 11 /opt/env/lib/libstdc++.so.6.0.29",
        "@@aotipre mapped 7f40-7f50 r-xp 00010000 fd:00 12 /usr/lib/x86_64-linux-gnu/libstdc++.so.6.0.32",
        "@@aotipre end of native backtrace",
        "",
    ]
)

Doctor = Callable[..., DoctorReport]


def codes(findings: list[Finding]) -> list[str]:
    return [f.code for f in findings]


@pytest.fixture
def fake_lib(tmp_path: Path) -> Path:
    """A file standing for a libstdc++ to preload (ld.so ignores it, the fake worker does not)."""
    lib = tmp_path / "sys" / "libstdc++.so.6"
    lib.parent.mkdir()
    lib.write_bytes(b"\x00GLIBCXX_3.4.32\x00")
    return lib


@pytest.fixture
def dynamic(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake_lib: Path
) -> Callable[[dict[str, Any]], DynamicOptions]:
    """dynamic(script) -> DynamicOptions running the fake doctor worker with `script`."""
    monkeypatch.setattr(libstdcxx, "DIAGNOSED", {})
    monkeypatch.setattr(libstdcxx, "find_system_libstdcxx", lambda: str(fake_lib))
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.delenv("LD_PRELOAD", raising=False)
    (tmp_path / "inductor").mkdir()

    def make(script: dict[str, Any]) -> DynamicOptions:
        facts = {
            "compiler": {"chosen": str(FAKE_CXX)},
            "inductor_cache_dir": str(tmp_path / "inductor"),
        }
        full = {**script, "facts": {**facts, **script.get("facts", {})}}
        return DynamicOptions(
            worker_command=(sys.executable, str(FAKE_WORKER)),
            extra_env={"AOTIPRE_FAKE_DOCTOR": json.dumps(full), "AOTIPRE_FAKE_CANARY": str(CANARY)},
            cache_dir=str(tmp_path / "cache"),
            timeout_s=30.0,
        )

    return make


@pytest.fixture
def doctor(dynamic: Callable[[dict[str, Any]], DynamicOptions]) -> Doctor:
    def go(script: dict[str, Any] | None = None, **opts: Any) -> DoctorReport:
        opts.setdefault("nvidia_smi", None)
        return run_doctor(DoctorOptions(dynamic=dynamic(script or {}), **opts))

    return go


def test_healthy_host_passes(doctor: Doctor) -> None:
    report = doctor()
    assert report.verdict is Verdict.PASS, render(report, "table")
    assert report.findings == []
    assert report.devices == ["cpu"]
    (cpu,) = report.canaries
    assert cpu.status == "works"
    assert report.facts["compiler"]["works"] is True
    assert report.facts["compiler"]["version"] == "fake-g++ (Fake) 99.1"
    assert "get_cpp_compiler" in report.facts["compiler"]["how"]
    roles = [d.role for d in report.directories]
    assert roles == [
        "package extraction (TMPDIR)",
        "inductor compile cache",
        "aotipre compile cache",
    ]
    assert all(d.writable and d.executable for d in report.directories)
    table = render(report, "table")
    assert "compiles, loads and runs" in table and "verdict: PASS (exit 0" in table
    data = json.loads(render(report, "json"))
    assert data["schema_version"] == 1 and data["kind"] == "doctor"
    assert data["verdict"] == "pass" and data["exit_code"] == 0
    assert data["canaries"][0]["status"] == "works"
    assert [s["name"] for s in data["stages"]] == list(stages_mod.STAGES)
    assert data["stages"][0]["model"] == "canary [cpu]"


def test_second_run_reuses_the_program_and_the_compile(doctor: Doctor) -> None:
    doctor()
    report = doctor()
    (cpu,) = report.canaries
    compile_stage = next(s for s in cpu.stages if s.name == "compile")
    assert "cache hit" in compile_stage.detail
    assert "compile cache hit" in render(report, "table")


def test_canary_crash_on_load_is_diagnosed(doctor: Doctor, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_CXX_C", "ok")  # the backtrace helper "builds"
    report = doctor({"canary.load": {"crash": "SIGSEGV", "log": REGEX_CRASH_LOG}})
    assert report.verdict is Verdict.FAIL and int(report.exit_code) == 1
    assert codes(report.findings) == ["AOT514", "AOT411"]
    crash, headline = report.findings
    assert "preloading the system libstdc++ did not help" in crash.message
    (cpu,) = report.canaries
    assert cpu.status == "crashes" and cpu.stage == "load" and cpu.signal == "SIGSEGV"
    site = cpu.crash_site
    assert site is not None and site.frame_class == "std-regex"
    assert "_Scanner" in (site.frame or "")
    assert "parse_device_str" in site.description  # the caller
    assert "crashing frame:" in headline.message and "_Scanner" in headline.message
    assert site.runtimes == (
        "/opt/env/lib/libstdc++.so.6.0.29",
        "/usr/lib/x86_64-linux-gnu/libstdc++.so.6.0.32",
    )
    assert "2 libstdc++ copies were mapped" in headline.message
    assert "preloading" in headline.hint and "did not help" in headline.hint
    assert "torch was built with GCC 11.2" in headline.hint
    assert any("re-ran the load with a native backtrace" in n for n in report.notes)
    assert "crashing frame:" in render(report, "table")


def test_crash_only_without_preload_is_verified(
    doctor: Doctor, monkeypatch: pytest.MonkeyPatch, fake_lib: Path
) -> None:
    monkeypatch.setenv("FAKE_CXX_C", "ok")
    script = {
        "canary.load": {
            "crash": "SIGSEGV",
            "unless_preload": "libstdc++",
            "log": REGEX_CRASH_LOG,
        }
    }
    report = doctor(script)
    assert report.verdict is Verdict.FAIL
    assert codes(report.findings) == ["AOT515"]
    (cpu,) = report.canaries
    assert cpu.status == "needs_preload" and cpu.preload == str(fake_lib)
    (finding,) = report.findings
    assert f"verified: with LD_PRELOAD={fake_lib} the canary loads and runs on cpu" in (
        finding.message
    )
    assert "_Scanner" in finding.message
    assert any(n.startswith("cpu: verified") for n in report.notes)
    # the preload fixes it, so the same doctor run under it passes
    monkeypatch.setattr(libstdcxx, "DIAGNOSED", {})  # a new process, in effect
    monkeypatch.setenv("LD_PRELOAD", str(fake_lib))
    assert doctor(script).verdict is Verdict.PASS


def test_compiler_missing(doctor: Doctor) -> None:
    script = {
        "facts": {
            "compiler": {
                "chosen": None,
                "error": "InvalidCxxCompiler: No working C++ compiler found",
            }
        },
        "canary.compile": {
            "error": {
                "type": "InvalidCxxCompiler",
                "message": "No working C++ compiler found in torch._inductor.config.cpp.cxx",
            }
        },
    }
    report = doctor(script)
    assert codes(report.findings) == ["AOT407", "AOT546", "AOT411"]
    assert "none of them runs" in report.facts["compiler"]["how"]
    (cpu,) = report.canaries
    assert cpu.status == "fails" and cpu.stage == "compile"
    assert "AOT407" in report.findings[-1].hint
    assert "DOES NOT WORK" in render(report, "table")


def test_compiler_that_cannot_build(doctor: Doctor, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_CXX_FAIL", "1")
    report = doctor()
    assert codes(report.findings) == ["AOT407"]
    assert "fatal error: string" in report.findings[0].message


def test_noexec_temp_dir_from_the_mount_table(doctor: Doctor, tmp_path: Path) -> None:
    mountinfo = tmp_path / "mountinfo"
    mountinfo.write_text(
        "27 1 254:0 / / rw,relatime - ext4 /dev/vda rw\n"
        f"90 27 0:50 / {tmp_path} rw,nosuid,nodev,noexec,relatime - tmpfs tmpfs rw,size=1024k\n"
    )
    report = doctor(mountinfo=str(mountinfo))
    found = [f for f in report.findings if f.code == "AOT408"]
    assert [f.input for f in found] == [
        "package extraction (TMPDIR)",
        "inductor compile cache",
    ]  # the aotipre cache needs no exec
    assert "mounted noexec" in found[0].message and found[0].actual == "noexec"
    assert report.verdict is Verdict.FAIL
    assert "no (noexec)" in render(report, "table")


def test_torch_211_extracts_into_tmp_whatever_tmpdir_says(doctor: Doctor, tmp_path: Path) -> None:
    """torch 2.11's package loader extracts into /tmp/XXXXXX, not $TMPDIR (measured; plain torch
    loads a package with TMPDIR on a noexec tmpfs): the doctor probes /tmp for it."""
    mountinfo = tmp_path / "mountinfo"
    mountinfo.write_text(
        "27 1 254:0 / / rw,relatime - ext4 /dev/vda rw\n"
        f"90 27 0:50 / {tmp_path} rw,nosuid,nodev,noexec,relatime - tmpfs tmpfs rw,size=1024k\n"
    )
    report = doctor({"facts": {"torch": {"version": "2.11.0+cu130"}}}, mountinfo=str(mountinfo))
    extraction = report.directories[0]
    assert (extraction.role, extraction.path) == ("package extraction (/tmp)", "/tmp")
    found = [f for f in report.findings if f.code == "AOT408"]
    assert [f.input for f in found] == ["inductor compile cache"]


def test_libstdcxx_older_than_the_compilers(
    doctor: Doctor, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    old = tmp_path / "env" / "libstdc++.so.6.0.28"
    old.parent.mkdir()
    old.write_bytes(b"\x00GLIBCXX_3.4.21\x00GLIBCXX_3.4.28\x00CXXABI_1.3.12\x00")
    new = tmp_path / "gcc" / "libstdc++.so.6.0.32"
    new.parent.mkdir()
    new.write_bytes(b"\x00GLIBCXX_3.4.32\x00GLIBCXX_3.4.9\x00")
    monkeypatch.setenv("FAKE_CXX_LIBSTDCXX", str(new))
    report = doctor({"facts": {"loaded_libraries": [str(old), "/lib/libgcc_s.so.1"]}})
    assert codes(report.findings) == ["AOT410"]
    (f,) = report.findings
    assert f.expected == "GLIBCXX_3.4.32" and f.actual == "GLIBCXX_3.4.28"
    assert f"LD_PRELOAD={new}" in f.hint
    assert report.verdict is Verdict.PASS  # a warning: the canary decides
    libs = report.facts["libstdcxx"]
    assert libs["compiler"]["so_version"] == "6.0.32"
    assert [x["glibcxx"] for x in libs["loaded"]] == ["3.4.28"]


def test_cuda_requested_with_a_cpu_only_torch(doctor: Doctor) -> None:
    report = doctor(devices=("cpu", "cuda:0"))
    assert report.devices == ["cpu", "cuda:0"]
    assert codes(report.findings) == ["AOT512"]
    assert "CPU-only build" in report.findings[0].message
    assert report.verdict is Verdict.FAIL


def test_cuda_is_proved_when_available(doctor: Doctor) -> None:
    report = doctor({"facts": {"torch": {"cuda": "13.0"}, "cuda": {"available": True}}})
    assert report.devices == ["cpu", "cuda"]
    assert [c.status for c in report.canaries] == ["works", "works"]


def test_bad_device_is_a_usage_error(doctor: Doctor) -> None:
    with pytest.raises(UsageError):
        doctor(devices=("tpu",))


def test_worker_that_cannot_run_is_could_not_check(doctor: Doctor, tmp_path: Path) -> None:
    options = DynamicOptions(
        worker_command=(
            sys.executable,
            "-c",
            "import sys; print('no torch', file=sys.stderr); sys.exit(3)",
        ),
        cache_dir=str(tmp_path / "cache"),
    )
    report = run_doctor(DoctorOptions(dynamic=options, nvidia_smi=None))
    assert report.verdict is Verdict.ERROR and int(report.exit_code) == 2
    assert report.error is not None and "exited with code 3" in report.error
    assert "no torch" in report.error
    assert report.directories  # what can be told without torch still is
    assert json.loads(render(report, "json"))["error"] == report.error


# --------------------------------------------------------------------------------------------
# Inside check


def test_model_crash_with_a_crashing_canary_blames_the_host(
    dynamic: Callable[[dict[str, Any]], DynamicOptions], tmp_path: Path
) -> None:
    options = dynamic({"load": {"crash": "SIGSEGV"}})
    model = tmp_path / "model.pt2"
    model.write_bytes(CANARY.read_bytes())
    report = api.check(str(model), api.CheckOptions(dynamic=options, compile_at_deploy=True))
    assert codes(report.findings) == ["AOT412"], report.findings
    (f,) = report.findings
    assert f.category.value == "environment" and f.model == "model"
    assert "a trivial canary model compiled on this host crashes too (load on cpu, SIGSEGV)" in (
        f.message
    )
    assert "aotipre doctor --device cpu" in f.hint
    canary_stage = report.stages[-1]
    assert canary_stage.name == "canary" and canary_stage.status is StageStatus.FAILED
    # the result is cached per host and torch version: the next check does not run it again
    again = api.check(str(model), api.CheckOptions(dynamic=options, compile_at_deploy=True))
    assert codes(again.findings) == ["AOT412"]
    assert "(cached result)" in again.stages[-1].detail


def test_model_crash_with_a_working_canary_stays_the_models(
    dynamic: Callable[[dict[str, Any]], DynamicOptions], tmp_path: Path
) -> None:
    options = dynamic({"run": {"crash": "SIGSEGV"}, "canary.run": {}})
    model = tmp_path / "model.pt2"
    model.write_bytes(CANARY.read_bytes())
    report = api.check(str(model), api.CheckOptions(dynamic=options, compile_at_deploy=True))
    (crash,) = [f for f in report.findings if not f.code.startswith("AOT8")]  # 8: triage's
    assert crash.code == "AOT604"
    assert "the crash is specific to this package" in crash.message
    assert report.stages[-1].name == "canary"
    assert report.stages[-1].status is StageStatus.PASSED
    off = api.check(str(model), api.CheckOptions(dynamic=options, canary=False))
    assert "canary" not in [s.name for s in off.stages]
    assert all("specific to this package" not in f.message for f in off.findings)


def test_attribute_crashes_leaves_other_findings_alone(
    dynamic: Callable[[dict[str, Any]], DynamicOptions],
) -> None:
    options = dynamic({})
    clean = [
        Finding("AOT602", *_error_env(), message="raised", model="model"),
        Finding("AOT514", *_error_env(), message="crashed", model="other"),
    ]
    stages, out = canary_mod.attribute_crashes("model", "cpu", clean, options)
    assert stages == [] and out == clean


def _error_env() -> tuple[Any, Any]:
    from aotipre.findings import Category, Severity

    return Severity.ERROR, Category.CRASH


def test_canary_that_cannot_be_made_is_inconclusive(tmp_path: Path) -> None:
    options = DynamicOptions(
        worker_command=(sys.executable, "-c", "import sys; sys.exit(3)"),
        cache_dir=str(tmp_path / "cache"),
    )
    crash = Finding("AOT514", *_error_env(), message="the process was killed by SIGSEGV", model="m")
    stages, (out,) = canary_mod.attribute_crashes("m", "cpu", [crash], options)
    assert out.code == "AOT514" and "inconclusive" in out.message
    assert stages[0].status is StageStatus.ERROR
    assert canary_mod.cached_result("cpu", options) is None  # never cached


# --------------------------------------------------------------------------------------------
# CLI


def test_cli_doctor_json_and_report_file(
    dynamic: Callable[[dict[str, Any]], DynamicOptions], tmp_path: Path
) -> None:
    options = dynamic({})
    env = dict(os.environ, **options.extra_env)
    out = tmp_path / "doctor.json"
    proc = subprocess.run(
        [
            sys.executable,
            str(TESTS / "fakes" / "cli_with_fake_worker.py"),
            str(FAKE_WORKER),
            "doctor",
            "--device",
            "cpu",
            "--cache-dir",
            str(tmp_path / "cache"),
            "--report",
            f"json:{out}",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr + proc.stdout
    assert "verdict: PASS" in proc.stdout
    data = json.loads(out.read_text())
    assert data["verdict"] == "pass" and data["devices"] == ["cpu"]


def test_cli_doctor_rejects_a_bad_report_spec() -> None:
    from aotipre.cli import main

    assert main(["doctor", "--report", "xml:out.xml"]) == 2


def test_machine_text_cannot_control_the_terminal() -> None:
    # a host name, a compiler path and an error carrying escape sequences and a forged line:
    # the table shows them escaped, the JSON keeps them encodable (a lone surrogate from a
    # non-UTF-8 path becomes \xNN in both)
    from aotipre.doctor.report import DoctorReport

    report = DoctorReport(
        facts={"host": {"node": "vm\x1b[2J", "system": "Linux", "machine": "x86_64"},
               "python": {"version": "3.11", "executable": "/opt/py\udcff/bin/python"}},
        error="no torch worker could run here: boom\n::error file=x::forged",
    )  # fmt: skip
    table = render(report, "table")
    assert "\x1b" not in table and "\n::error" not in table and "\udcff" not in table
    assert "\\x1b[2J" in table or "\\u001b[2J" in table
    data = render(report, "json")
    data.encode("utf-8")  # valid UTF-8
    assert json.loads(data)["host"]["host"]["node"] == "vm\x1b[2J"  # JSON escapes it itself


def test_the_known_bugs_of_this_torch_are_listed() -> None:
    """The doctor reads the worker torch's folder (torch.__file__ from its facts) as files and
    lists the known runtime bugs it shows, with who they affect; none without a folder."""
    from aotipre.binaries.torch_bugs import read_known_bugs
    from aotipre.doctor.report import DoctorReport
    from aotipre.doctor.run import _known_bugs

    (folder,) = Path(sys.prefix).glob("lib/python3*/site-packages/torch")
    found = _known_bugs({"file": str(folder / "__init__.py")})
    assert found == [b.to_dict() for b in read_known_bugs(str(folder), str(folder / "lib"))]
    assert _known_bugs({"version": "2.13.0"}) is None and _known_bugs(None) is None
    bug = {"issue": 191715, "applies_to": "python", "what": "the ISA probe at every load"}
    report = DoctorReport(facts={"torch": {"version": "2.13.0"}, "torch_known_bugs": [bug]})
    assert "known bug #191715 (python): the ISA probe at every load" in render(report, "table")
