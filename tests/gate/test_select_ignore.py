"""--select/--ignore on real reports, and which static findings keep the dynamic stages from
running (errors of the model or of the package do; warnings and info do not). The dynamic
stages here run the FAKE torch worker (tests/fakes/fake_torch_worker.py): only whether and
with what reason they run is under test."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from aotipre.api import CheckOptions, check
from aotipre.findings import Report, Severity, StageStatus, Verdict
from aotipre.runner.stages import STAGES, DynamicOptions

Pkg = Callable[[str], Path]
FAKE_WORKER = str(Path(__file__).resolve().parents[1] / "fakes" / "fake_torch_worker.py")


def static(pkg: Pkg, inputs: str, **kw: object) -> Report:
    return check(pkg("both"), CheckOptions(inputs=str(pkg(inputs)), static_only=True, **kw))  # type: ignore[arg-type]


def codes(report: Report) -> list[str]:
    return sorted(f.code for f in report.findings)


# both.pt2 with aoti_inputs_out_of_range: AOT013 (warning: the AOTI code's narrower batch min),
# AOT051 (info: the -march its .so was compiled for) and AOT304 (error: seq 129 > 128)


def test_without_select_or_ignore_every_finding_is_reported(pkg: Pkg) -> None:
    report = static(pkg, "aoti_inputs_out_of_range")
    assert codes(report) == ["AOT013", "AOT051", "AOT304"]
    assert report.exit_code == 1


@pytest.mark.parametrize(
    "select, ignore, left, rc",
    [
        (("AOT3",), (), ["AOT304"], 1),
        (("AOT30",), (), ["AOT304"], 1),
        (("AOT304",), (), ["AOT304"], 1),
        (("AOT0",), (), ["AOT013", "AOT051"], 0),
        (("AOT01",), (), ["AOT013"], 0),
        (("AOT013", "AOT304"), (), ["AOT013", "AOT304"], 1),
        ((), ("AOT304",), ["AOT013", "AOT051"], 0),
        ((), ("AOT05", "AOT304"), ["AOT013"], 0),
        ((), ("AOT3", "AOT0"), [], 0),
        (("AOT3",), ("AOT304",), [], 0),  # ignore wins over select
        (("AOT9",), (), [], 0),
    ],
)
def test_select_and_ignore_by_prefix(
    pkg: Pkg, select: tuple, ignore: tuple, left: list[str], rc: int
) -> None:
    report = static(pkg, "aoti_inputs_out_of_range", select=select, ignore=ignore)
    assert codes(report) == left
    assert report.exit_code == rc
    stage = {s.name: s for s in report.stages}["static"]
    assert stage.status is (StageStatus.FAILED if rc else StageStatus.PASSED)


def test_select_cannot_hide_an_unreadable_package(pkg: Pkg) -> None:
    report = check(pkg("broken_json"), CheckOptions(static_only=True, ignore=("AOT",)))
    assert report.verdict is Verdict.ERROR and codes(report) == ["AOT006"]


def run_fake(pkg: Pkg, tmp_path: Path, inputs: str, **kw: object) -> Report:
    dynamic = DynamicOptions(
        worker_command=(sys.executable, FAKE_WORKER), cache_dir=str(tmp_path), probe=False
    )
    opts = CheckOptions(inputs=str(pkg(inputs)), dynamic=dynamic, canary=False, **kw)  # type: ignore[arg-type]
    return check(pkg("both"), opts)


def test_a_warning_does_not_keep_the_dynamic_stages_from_running(pkg: Pkg, tmp_path: Path) -> None:
    report = run_fake(pkg, tmp_path, "aoti_inputs")  # AOT013 is a warning
    stages = {s.name: s for s in report.stages}
    assert [stages[n].status for n in ("load", "run")] == [StageStatus.PASSED] * 2
    assert report.verdict is Verdict.PASS


def test_errors_keep_the_dynamic_stages_from_running(pkg: Pkg, tmp_path: Path) -> None:
    report = run_fake(pkg, tmp_path, "aoti_inputs_out_of_range")
    dynamic = [s for s in report.stages if s.name in STAGES]
    assert [s.name for s in dynamic] == list(STAGES)
    assert all(s.status is StageStatus.SKIPPED for s in dynamic)
    assert dynamic[0].detail == "static checks found errors (AOT304); fix them first"


def test_errors_of_the_package_block_too_and_are_listed_once(pkg: Pkg, tmp_path: Path) -> None:
    report = run_fake(
        pkg, tmp_path, "aoti_inputs_transposed", target="cuda,cc=9.0,checks-inputs=yes"
    )
    dynamic = [s for s in report.stages if s.name in STAGES]
    assert all(s.status is StageStatus.SKIPPED for s in dynamic)
    # AOT307 (the model's: the target's runtime check refuses the layout), then the AOT40x of
    # this cpu package on a cuda-only target, sorted, once each
    assert dynamic[0].detail.startswith("static checks found errors (AOT307, AOT40")


def test_ignored_errors_still_block_the_dynamic_stages(pkg: Pkg, tmp_path: Path) -> None:
    # select/ignore choose what is reported, not what is safe to run
    report = run_fake(pkg, tmp_path, "aoti_inputs_out_of_range", ignore=("AOT304",))
    assert {s.status for s in report.stages if s.name in STAGES} == {StageStatus.SKIPPED}
    assert codes(report) == ["AOT013", "AOT051"]


def test_fail_on_warning_does_not_block_the_dynamic_stages(pkg: Pkg, tmp_path: Path) -> None:
    report = run_fake(pkg, tmp_path, "aoti_inputs", fail_on=Severity.WARNING)
    stages = {s.name: s for s in report.stages}
    assert stages["run"].status is StageStatus.PASSED
    assert report.verdict is Verdict.FAIL  # the AOT013 warning fails the gate
