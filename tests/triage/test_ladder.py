"""The ladder is data: unique steps, known tools and needs, and applicability with reasons."""

from __future__ import annotations

from dataclasses import replace

from aotipre.findings import codes
from aotipre.triage.ladder import (
    BY_ID,
    LADDER,
    NEEDS,
    PRINTER,
    PRINTER_FILTER,
    SYNC_ENV,
    Facts,
    Need,
    Phase,
    skip_reason,
    step_configs,
    step_env,
)

CPU = Facts(device_type="cpu", has_exported_program=True, exported_program_source="the archive")
CUDA = replace(CPU, device_type="cuda")


def test_steps_are_unique_ordered_and_well_formed() -> None:
    ids = [s.id for s in LADDER]
    assert len(ids) == len(set(ids))
    assert [s.level for s in LADDER] == sorted(s.level for s in LADDER)
    for step in LADDER:
        assert step.tool in ("rerun", "printer", "stats", "sanitizer", "minify")
        assert all(a in BY_ID and ids.index(a) < ids.index(step.id) for a in step.after)
        assert all(n in NEEDS for n in step.needs)
        assert step.purpose and step.title
        assert (step.phase is Phase.COMPILE_TIME) == (step.tool in ("printer", "minify"))
        assert step.stage_name == f"triage:{step.id}"


def test_every_need_has_a_reason() -> None:
    for need, (check, reason) in NEEDS.items():
        assert isinstance(check(CPU), bool)
        assert reason(CPU), need


def test_cpu_skips_cuda_steps_but_keeps_the_printer() -> None:
    assert "synchronously" in (skip_reason(BY_ID["sync-rerun"], CPU) or "")
    assert "CUDA kernels only" in (skip_reason(BY_ID["sanitizer"], CPU) or "")
    assert skip_reason(BY_ID["printer-3"], CPU) is None
    assert "no faulting kernel" in (skip_reason(BY_ID["printer-2"], CPU) or "")
    assert skip_reason(BY_ID["printer-2"], replace(CPU, kernel="k")) is None


def test_cuda_runs_step_one_and_the_sanitizer_only_when_asked_and_present() -> None:
    assert skip_reason(BY_ID["sync-rerun"], CUDA) is None
    san = BY_ID["sanitizer"]
    assert "--sanitizer" in (skip_reason(san, CUDA) or "")
    assert "not found" in (skip_reason(san, replace(CUDA, sanitizer_flag=True)) or "")
    ready = replace(CUDA, sanitizer_flag=True, sanitizer_tool="/usr/bin/compute-sanitizer")
    assert skip_reason(san, ready) is None


def test_an_aoti_only_package_names_the_missing_exported_program() -> None:
    facts = replace(CPU, has_exported_program=False, exported_program_source="it holds AOTI only")
    why = skip_reason(BY_ID["printer-3"], facts) or ""
    assert "--exported-program FILE" in why and "it holds AOTI only" in why


def test_minifier_is_opt_in_and_needs_a_catchable_failure_and_an_eager_run() -> None:
    mini = BY_ID["minify"]
    assert "--minify" in (skip_reason(mini, CPU) or "")
    on = replace(CPU, minify_flag=True)
    assert skip_reason(mini, on) is None
    assert "SIGSEGV" in (skip_reason(mini, replace(on, signal="SIGSEGV")) or "")
    assert "poisons" in (skip_reason(mini, replace(on, failure_kind="device_fault")) or "")
    eager_fails = replace(on, eager="failed", eager_error="IndexError: index out of range")
    assert "IndexError" in (skip_reason(mini, eager_fails) or "")


def test_nan_asserts_only_when_still_unexplained() -> None:
    nan = BY_ID["nan-asserts"]
    assert skip_reason(nan, CPU) is None
    assert "explain" in (skip_reason(nan, replace(CPU, explained=True)) or "")


def test_env_and_configs_per_device() -> None:
    assert step_env(BY_ID["printer-3"], "cpu") == {}
    assert step_env(BY_ID["printer-3"], "cuda") == dict(SYNC_ENV)
    assert step_env(BY_ID["sync-rerun"], "cuda") == dict(SYNC_ENV)
    assert step_configs(BY_ID["printer-3"], []) == {PRINTER: "3"}
    assert step_configs(BY_ID["printer-2"], ["k1", "k0"]) == {PRINTER: "2", PRINTER_FILTER: "k1,k0"}


def test_family_8_codes_exist() -> None:
    family = {c.code: c.category.value for c in codes.ALL_CODES if c.code.startswith("AOT8")}
    assert sorted(family) == [f"AOT80{i}" for i in range(1, 10)]  # AOT809: unregistered pytree
    assert family["AOT803"] == "runtime" and family["AOT804"] == "nan"


def test_need_enum_is_covered() -> None:
    assert set(NEEDS) == set(Need)
