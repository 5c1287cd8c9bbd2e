"""The minifier rung of a compile that raised (aotipre/runner/stages/compile_minify.py): the
AOTI minifier held to the compile's inner exception type, its repro.py run again in a fresh
process, the repro kept in --artifacts DIR; nothing of it when the compile succeeds or --minify
is off."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from aotipre import CheckOptions, check
from aotipre.findings import Report, StageStatus
from aotipre.runner import contain
from aotipre.runner.stages import DynamicOptions
from aotipre.runner.stages.base import StepRecord
from aotipre.runner.stages.compile_minify import inner_type, minify_failed_compile
from aotipre.triage.escalate import TriageOptions

INJECTED = {"cpp.inject_relu_bug_TESTING_ONLY": "compile_error"}
"""torch's own injected bug: the relu kernel's C++ does not compile (plain torch 2.13 raises
InductorError whose message starts `CppCompileError: C++ compile error`)."""


def _compile_record(status: str, message: str = "", type_: str = "InductorError") -> StepRecord:
    entry = {"error": {"type": type_, "message": message}} if message else {}
    return StepRecord("compile", "compile", status, entry=entry)


def test_the_check_string_is_the_inner_exception_type() -> None:
    cpp = _compile_record("error", "CppCompileError: C++ compile error\n\nCommand:\ng++ ...")
    assert inner_type(cpp) == "CppCompileError"
    guard = _compile_record(
        "error", "GuardOnDataDependentSymNode: Could not guard on data-dependent expression"
    )
    assert inner_type(guard) == "GuardOnDataDependentSymNode"
    plain = _compile_record("error", "got <class 'float'>", type_="AssertionError")
    assert inner_type(plain) == "AssertionError"


class _NoMinifySession:
    """A session whose followup worker must not run (the rung does not apply)."""

    def __init__(self, minify: bool) -> None:
        self.opts = DynamicOptions(compile_minify=minify)

    def run_followup(self, *args: object, **kwargs: object) -> list[StepRecord]:
        raise AssertionError("the minifier ran")


@pytest.mark.parametrize(
    ("minify", "status"), [(False, "error"), (True, "ok"), (True, "timeout"), (True, "crash")]
)
def test_the_minifier_runs_only_for_a_compile_that_raised_under_minify(
    minify: bool, status: str
) -> None:
    failed = _compile_record(status, "CppCompileError: C++ compile error")
    assert minify_failed_compile(_NoMinifySession(minify), failed, {}) is None  # type: ignore[arg-type]


def test_the_repros_run_finds_inductors_headers_where_the_users_process_keeps_them(
    tmp_path: Path,
) -> None:
    """The repro.py run again is a contained child with a private TMPDIR (proc.run_process);
    torch derives the folder of its precompiled C++ headers from tempfile.gettempdir(), not
    from TORCHINDUCTOR_CACHE_DIR: that folder must lead to the user's, or each run rebuilds
    the headers the failed compile just built. Asked of plain torch in the child."""
    users = tmp_path / "users-tmp"
    env = {**os.environ, "TMPDIR": str(users)}
    inductor = users / f"torchinductor_{contain._username(env)}"
    inductor.mkdir(parents=True)
    folder = contain.private_tmp(env)
    assert folder is not None and env["TMPDIR"] == folder
    try:
        code = "from torch._inductor import codecache; print(codecache._HEADER_DIR)"
        header_dir = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300
        ).stdout.strip()
        assert header_dir.startswith(folder)  # torch's own answer: under the private TMPDIR
        assert os.path.realpath(header_dir) == os.path.realpath(inductor / "precompiled_headers")
    finally:
        contain.remove_private_tmp(folder)
    assert not os.path.exists(folder) and inductor.is_dir()  # the link went, the folder stayed


@pytest.fixture(scope="module")
def minified(
    pkg: Callable[[str], Path], tmp_path_factory: pytest.TempPathFactory
) -> tuple[Report, Path]:
    """TinyMLP (Linear -> relu -> Linear, EP only) compiled with the injected relu bug, with
    --minify and --artifacts: one failed compile, the minifier, the repro's run."""
    bundle = tmp_path_factory.mktemp("bundle")
    report = check(
        pkg("ep_only"),
        CheckOptions(
            dynamic=DynamicOptions(
                use_cache=False,
                cache_dir=str(tmp_path_factory.mktemp("cache")),
                probe=False,
                inductor_configs=INJECTED,
                compile_workaround=False,  # its rebuild is tested elsewhere
            ),
            triage=TriageOptions(minify=True, artifacts=str(bundle), minify_timeout_s=900),
        ),
    )
    return report, bundle / "model" / "compile-repro"


@pytest.mark.slow
def test_aot807_a_failed_compile_is_minified_and_its_repro_fails_the_same_way(
    minified: tuple[Report, Path],
) -> None:
    report, kept = minified
    stages = {s.name: s for s in report.stages}
    assert stages["compile"].status is StageStatus.FAILED
    (found,) = [f for f in report.findings if f.code == "AOT807"]
    assert found.stage == "compile"
    assert f": {kept / 'repro.py'}; it fails again with CppCompileError in a fresh process" in (
        found.message
    )
    before, after = (
        int(n) for n in found.message.split("failed compile (")[1].split(" nodes")[0].split(" -> ")
    )
    assert after < before
    assert (kept / "repro.py").is_file() and (kept / "repro_exported_program.pt2").is_file()
    assert "repro_exported_program.pt2" in (kept / "repro.py").read_text()
    assert "the AOTI minifier wrote a minimal repro.py" in stages["compile"].detail
