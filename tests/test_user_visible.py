"""Behaviours a user sees in a verdict that no other test held (issue #47): each test fails when
the code that decides the behaviour is wrong.

1. a sample's Python scalar of another numeric type but the exported value (int 2 for an exported
   2.0) is not a changed scalar: plain torch runs it as the exported value;
2. `--perf-tolerance`, from the flag and from the configuration, decides the `--against` verdict;
   and every other key of the configuration reaches the check from its flag and from the file,
   the flag over the file (a new key without a row here fails);
3. with `max_batch_size` > 0, a Triton config's fixed size of a dim after the batch dim is checked
   against that dim's range, not the batch dim's;
4. the state stage fails a model whose buffer update is dropped even when every call's outputs
   still match the ExportedProgram's;
5. Triton version folders are ordered by number (10 after 9), as Triton orders them.

Fast tests on in-memory objects and the fake torch worker; the `slow` ones compile a package and
first show the expectation with plain torch in a fresh process."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from aotipre.checks.contract import check_specialized
from aotipre.checks.inputs import check_inputs
from aotipre.findings import Finding, StageResult, StageStatus
from aotipre.inputs.meta import SampleInputs, TensorMeta
from aotipre.pt2.spec import (
    AotiPart,
    CallSignature,
    Dim,
    DimBound,
    InputSpec,
    ModelInfo,
    PackageInfo,
    SymbolRange,
    TensorSpec,
    TreeSpec,
)
from aotipre.runner import perf
from aotipre.runner.stages import DynamicOptions, run_dynamic_stages
from aotipre.serving import pbtxt, repository
from aotipre.serving.triton import ServingConfig, check_config
from tests.building import build
from tests.fakes.specs import token_model, write_package

LEAF = TreeSpec(type=None)
FAKES = Path(__file__).resolve().parent / "fakes"
FAKE_WORKER = str(FAKES / "fake_torch_worker.py")
CLI_WITH_FAKE_WORKER = str(FAKES / "cli_with_fake_worker.py")


def _codes(findings: list[Finding]) -> list[str]:
    return sorted(f.code for f in findings)


# --- 1. a scalar of another numeric type with the exported value ------------------------------


X4 = TensorMeta("float32", (4,), (1,))


def _scale_model(exported: object) -> ModelInfo:
    """forward(x, alpha) with alpha specialized to `exported`, as an ExportedProgram records it
    (the reader gives a Python scalar input kind 'constant' and its value)."""
    x = TensorSpec("float32", (Dim(4),), (Dim(1),), "cpu")
    return ModelInfo(
        name="model",
        has_exported_program=True,
        aoti=None,
        torch_version="2.13.0",
        schema_version="8.0",
        inputs=(
            InputSpec("x", 0, "args[0]", "tensor", x, 0),
            InputSpec("alpha", 1, "args[1]", "constant", None, None, exported),
        ),
        outputs=(),
        symbols=(),
        signature=CallSignature(args=(LEAF, LEAF), kwargs=(), arg_names=("x", "alpha")),
        contract_source="exported_program",
        output_tree=LEAF,
    )


def test_an_int_with_the_exported_float_value_is_not_a_changed_scalar() -> None:
    """Exported with alpha=2.0, called with alpha=2 (test_the_int_runs_as_the_exported_float
    shows plain torch: the same outputs, and the ExportedProgram's guard `alpha == 2.0` passes):
    no AOT105, and the specialization is still named (AOT107)."""
    model = _scale_model(2.0)
    assert check_inputs(model, SampleInputs((X4, 2))) == []
    (named,) = check_specialized(model, SampleInputs((X4, 2)))
    assert named.code == "AOT107" and "alpha (args[1]) = 2.0" in named.message
    # another value, and True (== 1, which the guard refuses too), are changed scalars
    for other in (3, 2.5, True):
        (changed,) = check_inputs(model, SampleInputs((X4, other)))
        assert (changed.code, changed.actual, changed.expected) == ("AOT105", other, 2.0)
        assert check_specialized(model, SampleInputs((X4, other))) == []  # AOT105 says it


SCALE_BUILD = """
import sys, torch
out = sys.argv[1]
class Scale(torch.nn.Module):
    def forward(self, x, alpha: float):
        return x * alpha
x = torch.ones(4)
ep = torch.export.export(Scale(), (x, 2.0))
torch.export.save(ep, f"{out}/scale_ep.pt2")
torch._inductor.aoti_compile_and_package(ep, package_path=f"{out}/scale.pt2")
torch.save(((x, 2), {}), f"{out}/int_value.pt")
torch.save(((x, 3), {}), f"{out}/other_value.pt")
"""

SCALE_PLAIN = """
import json, sys, torch
out = sys.argv[1]
x = torch.ones(4)
compiled = torch._inductor.aoti_load_package(f"{out}/scale.pt2")
program = torch.export.load(f"{out}/scale_ep.pt2").module()
said = {}
for alpha in (2.0, 2, 3, True):
    try:
        eager = program(x, alpha).tolist()
    except Exception as exc:
        eager = str(exc)
    said[repr(alpha)] = {"compiled": compiled(x, alpha).tolist(), "eager": eager}
print(json.dumps(said))
"""


@pytest.fixture(scope="module")
def scale_built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build(SCALE_BUILD, tmp_path_factory.mktemp("scale"))


@pytest.mark.slow
def test_the_int_runs_as_the_exported_float(scale_built: Path, tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", SCALE_PLAIN, str(scale_built)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    plain = json.loads(proc.stdout.strip().splitlines()[-1])
    assert plain["2"] == plain["2.0"] == {"compiled": [2.0] * 4, "eager": [2.0] * 4}
    assert "Guard failed: alpha == 2.0" in plain["3"]["eager"]
    assert "Guard failed: alpha == 2.0" in plain["True"]["eager"]  # True == 1

    from aotipre.api import CheckOptions, check

    def run(inputs: str):  # type: ignore[no-untyped-def]
        dynamic = DynamicOptions(
            exported_program=str(scale_built / "scale_ep.pt2"),
            cache_dir=str(tmp_path / "cache"),
            timeout_s=120.0,
            perf=None,
            probe=False,
        )
        options = CheckOptions(inputs=str(scale_built / inputs), dynamic=dynamic, canary=False)
        return check(str(scale_built / "scale.pt2"), options)

    report = run("int_value.pt")
    assert report.exit_code == 0, [f.message for f in report.findings]
    assert not [f for f in report.findings if f.code in ("AOT105", "AOT110")]
    (named,) = [f for f in report.findings if f.code == "AOT107"]
    assert "alpha (args[1]) = 2.0" in named.message
    compare = next(s for s in report.stages if s.name == "compare")
    assert compare.status is StageStatus.PASSED, compare.detail
    # the value the guard refuses fails, statically
    other = run("other_value.pt")
    assert other.exit_code == 1 and "AOT105" in _codes(other.findings)


# --- 2. --perf-tolerance decides the --against verdict -----------------------------------------


def _latency(samples: list[float]) -> perf.Side:
    return perf.Side((), tuple(samples))


def test_the_tolerance_decides_the_verdict_on_fixed_series() -> None:
    # the package's calls 1.5 ms against the baseline's 1.0 ms, five interleaved pairs: +50%,
    # beyond the 0.05 ms floor, intervals apart: the tolerance alone decides
    new, old = [1.5, 1.49, 1.51, 1.5, 1.52], [1.0, 1.01, 0.99, 1.0, 1.02]
    floor = perf.REGRESSION_FLOORS["p50_ms"]
    assert perf.verdict(new, old, 0.2, floor) == perf.REGRESSION
    assert perf.verdict(new, old, 0.45, floor) == perf.REGRESSION
    assert perf.verdict(new, old, 0.55, floor) is None
    assert perf.verdict(new, old, 2.0, floor) is None
    # what the perf stage judges with: the tolerance it is given, and says so
    (found,) = perf.against_judgements(_latency(new), _latency(old), 0.45)
    assert found[0] == "AOT651" and "(+50%, tolerance 45%)" in found[1]
    assert perf.against_judgements(_latency(new), _latency(old), 0.55) == []
    # the rounds the stage adds while a measure is undecided follow it too
    assert perf.undecided(_latency(new[:1]), _latency(old[:1]), 0.45)
    assert not perf.undecided(_latency(new[:1]), _latency(old[:1]), 0.55)
    # one record of each side: the same tolerance decides whether it is even inconclusive
    assert perf.regression_judgements(_record(1.5), _record(1.0), 0.45)[0][0] == "AOT655"
    assert perf.regression_judgements(_record(1.5), _record(1.0), 0.55) == []


def _record(p50_ms: float) -> perf.PerfRecord:
    latency = {"runs": 5, "p50_ms": p50_ms, "p99_ms": p50_ms, "min_ms": p50_ms}
    latency.update(max_ms=p50_ms, mean_ms=p50_ms)
    return perf.record_from_worker("model", "cpu", None, None, latency)


def _check_against(
    tmp_path: Path, pkg: Callable[[str], Path], *extra: str, manifest: str | None = None
) -> tuple[int, dict[str, Any]]:
    """The real CLI on aoti.pt2 `--against` a copy of it (old.pt2), with the fake torch worker
    making aoti.pt2's every measure 1.5x the copy's (+50%): (exit code, JSON report). With
    `manifest` (its text, `{new}`, `{inputs}` and `{old}` filled in): the packages it names."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    old = tmp_path / "old.pt2"
    shutil.copy(pkg("aoti"), old)
    env = dict(
        os.environ,
        AOTIPRE_FAKE_SCRIPT=json.dumps({"__perf_scale__": {"aoti.pt2": 1.5}}),
        TMPDIR=str(tmp_path),
    )
    if manifest is None:
        what = [str(pkg("aoti")), "--inputs", str(pkg("aoti_inputs")), "--against", str(old)]
    else:
        path = tmp_path / "manifest.toml"
        path.write_text(manifest.format(new=pkg("aoti"), inputs=pkg("aoti_inputs"), old=old))
        what = ["--manifest", str(path)]
    proc = subprocess.run(
        [sys.executable, CLI_WITH_FAKE_WORKER, FAKE_WORKER, "check", "--no-probe", *what]
        + ["--cache-dir", str(tmp_path / "cache"), "--format", "json", "--no-progress", *extra],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=tmp_path,
        check=False,
    )
    assert proc.stdout.strip(), proc.stderr[-3000:]
    return proc.returncode, json.loads(proc.stdout)


def _regressions(report: dict[str, Any]) -> list[str]:
    """The --against findings of a one-package report (AOT650-AOT655)."""
    return sorted(f["code"] for f in report["findings"] if f["code"].startswith("AOT65"))


def _tolerances(report: dict[str, Any]) -> set[str]:
    """The tolerances the --against findings of a one-package report say they judged by."""
    return {
        f["message"].split("tolerance ")[1].split(")")[0]
        for f in report["findings"]
        if f["code"].startswith("AOT65")
    }


REGRESSED = ["AOT650", "AOT651", "AOT652"]
"""+50% load, median call and peak host memory against a 20% or 30% tolerance."""


def test_perf_tolerance_from_the_flag_and_the_config_decides_against(
    tmp_path: Path, pkg: Callable[[str], Path]
) -> None:
    # the default (20%): +50% is a regression of each measure, and fails the gate
    rc, report = _check_against(tmp_path / "default", pkg, "--no-config")
    assert (rc, _regressions(report)) == (1, REGRESSED), report["findings"]
    assert _tolerances(report) == {"20%"}
    # the flag: 60% takes +50% in
    rc, report = _check_against(tmp_path / "flag", pkg, "--no-config", "--perf-tolerance", "0.6")
    assert (rc, _regressions(report)) == (0, []), report["findings"]
    # the configuration file: the same
    config = tmp_path / "aotipre.toml"
    config.write_text("perf-tolerance = 0.6\n")
    rc, report = _check_against(tmp_path / "config", pkg, "--config", str(config))
    assert (rc, _regressions(report)) == (0, []), report["findings"]
    # the flag overrides the file
    rc, report = _check_against(
        tmp_path / "both", pkg, "--config", str(config), "--perf-tolerance", "0.3"
    )
    assert (rc, _regressions(report)) == (1, REGRESSED), report["findings"]
    assert _tolerances(report) == {"30%"}


MANIFEST = """
[defaults]
perf-tolerance = 0.6
[[package]]
path = "{new}"
inputs = "{inputs}"
against = "{old}"
"""


def test_perf_tolerance_from_a_manifest_decides_against(
    tmp_path: Path, pkg: Callable[[str], Path]
) -> None:
    # [defaults]: 60% takes +50% in
    rc, report = _check_against(tmp_path / "defaults", pkg, "--no-config", manifest=MANIFEST)
    (one,) = report["reports"]
    assert (rc, _regressions(one)) == (0, []), one["findings"]
    # the entry's own key overrides [defaults]
    entry = MANIFEST + "perf-tolerance = 0.3\n"
    rc, report = _check_against(tmp_path / "entry", pkg, "--no-config", manifest=entry)
    (one,) = report["reports"]
    assert (rc, _regressions(one)) == (1, REGRESSED), one["findings"]
    assert _tolerances(one) == {"30%"}


# the same plumbing for every number of the dynamic stages
DYNAMIC_SETTINGS: tuple[tuple[tuple[str, ...], str, str, object], ...] = (
    (("--timeout", "41"), "timeout = 43", "dynamic.timeout_s", 41.0),
    (("--compile-timeout", "42"), "compile-timeout = 44", "dynamic.compile_timeout_s", 42.0),
    (("--rtol", "0.003"), "rtol = 0.005", "dynamic.rtol", 0.003),
    (("--atol", "0.004"), "atol = 0.006", "dynamic.atol", 0.004),
    (("--probe-budget", "17"), "probe-budget = 19", "dynamic.probe_budget", 17),
    (("--state-calls", "5"), "state-calls = 6", "dynamic.state_calls", 5),
    (("--seed", "9"), "seed = 11", "dynamic.seed", 9),
    (("--perf-runs", "7"), "perf-runs = 8", "dynamic.perf.runs", 7),
    (("--max-load-s", "1.5"), "max-load-s = 1.75", "dynamic.perf.budgets.max_load_s", 1.5),
    (
        ("--max-latency-ms", "2.5"),
        "max-latency-ms = 2.75",
        "dynamic.perf.budgets.max_latency_ms",
        2.5,
    ),
    (("--max-rss-mb", "300"), "max-rss-mb = 310", "dynamic.perf.budgets.max_rss_mb", 300.0),
    (("--max-gpu-mb", "400"), "max-gpu-mb = 410", "dynamic.perf.budgets.max_gpu_mb", 400.0),
    (("--perf-tolerance", "0.35"), "perf-tolerance = 0.45", "dynamic.perf.tolerance", 0.35),
)
"""(flag, a configuration line with another value, where it lands in api.CheckOptions, the
flag's value); both differ from the default."""


def _options_of_a_check(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[..., Any]:
    """`options_of(*args)`: the api.CheckOptions `aotipre check PACKAGE *args` runs with, from
    config.Settings.check_options (captured, then the check stops with exit 2); run in
    `tmp_path`, on a package written there."""
    from aotipre import config
    from aotipre.cli import main
    from aotipre.foundation.errors import UsageError

    captured: list[Any] = []
    original = config.Settings.check_options

    def capture(self: config.Settings, **kwargs: Any) -> object:
        captured.append(original(self, **kwargs))
        raise UsageError("captured")

    monkeypatch.setattr(config.Settings, "check_options", capture)
    monkeypatch.chdir(tmp_path)
    package = write_package(tmp_path / "p.pt2", token_model())

    def options_of(*args: str) -> Any:
        captured.clear()
        assert main(["check", package.path, *args]) == 2
        (options,) = captured
        return options

    return options_of


def _at(options: object, where: str) -> object:
    for name in where.split("."):
        options = getattr(options, name)
    return options


@pytest.mark.parametrize(
    ("flag", "line", "where", "value"), DYNAMIC_SETTINGS, ids=[s[2] for s in DYNAMIC_SETTINGS]
)
def test_each_dynamic_number_reaches_the_stages_from_the_flag_and_the_file(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    flag: tuple[str, ...],
    line: str,
    where: str,
    value: object,
) -> None:
    """The options a check runs with (config.Settings.check_options, captured; the check then
    stops), from the flag and from the configuration file, the flag over the file."""
    options_of = _options_of_a_check(tmp_path, monkeypatch)
    toml = tmp_path / "aotipre.toml"
    toml.write_text(line + "\n")
    assert _at(options_of(*flag, "--no-config"), where) == value
    in_file = _at(options_of("--config", str(toml)), where)
    assert in_file == type(value)(line.split("= ")[1]) and in_file != value  # type: ignore[call-arg]
    assert _at(options_of(*flag, "--config", str(toml)), where) == value  # the flag wins
    default = _at(options_of("--no-config"), where)
    assert default not in (value, in_file)


# and every other setting a check runs with: the flag, the file, the flag over the file
Setting = tuple[str, tuple[str, ...], str, tuple[str, ...], Callable[[Any], Any]]
OTHER_SETTINGS: tuple[Setting, ...] = (
    ("fail-on", ("--fail-on", "warning"), 'fail-on = "warning"', ("--fail-on", "error"),
     lambda o: o.fail_on),
    ("target", ("--target", "cpu,isa=avx2"), 'target = "cuda,cc=9.0"',
     ("--target", "cuda,cc=8.0"), lambda o: o.target),
    ("static-only", ("--static-only",), "static-only = true", ("--no-static-only",),
     lambda o: o.static_only),
    ("select", ("--select", "AOT2"), 'select = ["AOT3"]', ("--select", "AOT4"), lambda o: o.select),
    ("ignore", ("--ignore", "AOT2"), 'ignore = ["AOT3"]', ("--ignore", "AOT4"), lambda o: o.ignore),
    ("device", ("--device", "cuda:0"), 'device = "cuda:1"', ("--device", "cpu"),
     lambda o: o.dynamic.device),
    ("recompile", ("--recompile",), "recompile = true", ("--no-recompile",),
     lambda o: o.dynamic.recompile),
    ("probe", ("--no-probe",), "probe = false", ("--probe",), lambda o: o.dynamic.probe),
    ("cache", ("--no-cache",), "cache = false", ("--cache",), lambda o: o.dynamic.use_cache),
    ("cache-dir", ("--cache-dir", "{tmp}/a"), 'cache-dir = "{tmp}/b"', ("--cache-dir", "{tmp}/c"),
     lambda o: o.dynamic.cache_dir),
    ("escalate", ("--no-escalate",), "escalate = false", ("--escalate",),
     lambda o: o.triage.escalate),
    ("accuracy-budget", ("--accuracy-budget", "60"), "accuracy-budget = 90",
     ("--accuracy-budget", "120"), lambda o: o.triage.accuracy_budget_s),
    ("minify", ("--minify",), "minify = true", ("--no-minify",), lambda o: o.triage.minify),
    ("sanitizer", ("--sanitizer",), "sanitizer = true", ("--no-sanitizer",),
     lambda o: o.triage.sanitizer),
    ("artifacts", ("--artifacts", "{tmp}/a"), 'artifacts = "{tmp}/b"', ("--artifacts", "{tmp}/c"),
     lambda o: o.triage.artifacts),
    ("exported-program", ("--exported-program", "{tmp}/a.pt2"),
     'exported-program = "{tmp}/b.pt2"', ("--exported-program", "{tmp}/c.pt2"),
     lambda o: (o.dynamic.exported_program, o.triage.exported_program, o.exported_program)),
    ("expected", ("--expected", "{tmp}/a.pt"), 'expected = "{tmp}/b.pt"',
     ("--expected", "{tmp}/c.pt"), lambda o: o.dynamic.expected),
    ("weights", ("--weights", "{tmp}/a.pt"), 'weights = "{tmp}/b.pt"', ("--weights", "{tmp}/c.pt"),
     lambda o: (o.dynamic.weights, o.weights)),
    ("compile-at-deploy", ("--compile-at-deploy",), "compile-at-deploy = true",
     ("--no-compile-at-deploy",), lambda o: o.compile_at_deploy),
    ("perf", ("--no-perf",), "perf = false", ("--perf",), lambda o: o.dynamic.perf is None),
    ("against", ("--against", "{tmp}/a.pt2"), 'against = "{tmp}/b.pt2"',
     ("--against", "{tmp}/c.pt2"), lambda o: (o.dynamic.perf.against, o.against)),
    ("import", ("--import", "json"), 'import = ["csv"]', ("--import", "string"),
     lambda o: o.registration.imports),
    ("library", ("--library", "{tmp}/a.so"), 'library = ["{tmp}/b.so"]',
     ("--library", "{tmp}/c.so"), lambda o: o.registration.libraries),
    ("cpp", ("--cpp",), "cpp = true", ("--no-cpp",), lambda o: (o.dynamic.cpp, o.cpp)),
    ("deployment-checks-inputs", ("--deployment-checks-inputs",), "deployment-checks-inputs = true",
     ("--no-deployment-checks-inputs",),
     lambda o: (o.dynamic.deployment_checks_inputs, o.deployment_checks_inputs)),
    ("allow-pickle", ("--allow-pickle",), "allow-pickle = true", ("--no-allow-pickle",),
     lambda o: (o.dynamic.allow_pickle, o.allow_pickle)),
)  # fmt: skip
"""(key, a flag, a configuration line, a flag that overrides the line, what the check runs
with from it in api.CheckOptions: a tuple where it reaches several places, each of which must
follow it); `{tmp}` is the test's folder, where a/b/c.pt2 are packages
with an ExportedProgram, a/b/c.pt torch.save files and a/b/c.so files."""

RUN_LEVEL_SETTINGS = {
    "jobs": "packages at once, not how one is checked (test_config.py test_every_key, "
    "test_batch.py test_parallel_report_is_byte_identical_to_serial)",
    "gpus": "where packages run (scale/test_gpus.py test_the_gpus_key_and_flag)",
    "progress": "stderr lines (test_progress_ci.py test_the_configuration_key_and_the_flag_...)",
    "python": "the interpreters, probed before a check (test_runtimes.py test_python_is_a_...)",
    "baseline": "a file read into a Baseline (test_baseline.py test_baseline_from_the_config_file)",
    "targets": "a table of named targets, no flag (binaries/test_targets.py test_cli_inspect_...)",
}
"""Keys that do not land in one package's CheckOptions, with where they are held."""


def test_every_configuration_key_is_held_from_the_flag_and_the_file() -> None:
    """A new key of config.KEYS is added to a table here, so that its plumbing is tested."""
    from aotipre.config import KEYS

    held = {line.split(" = ")[0] for _, line, _, _ in DYNAMIC_SETTINGS}
    held |= {key for key, *_ in OTHER_SETTINGS} | set(RUN_LEVEL_SETTINGS)
    assert {key.name for key in KEYS} == held


@pytest.mark.parametrize(
    ("key", "flag", "line", "back", "where"), OTHER_SETTINGS, ids=[s[0] for s in OTHER_SETTINGS]
)
def test_each_other_setting_reaches_the_check_from_the_flag_and_the_file(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    pkg: Callable[[str], Path],
    key: str,
    flag: tuple[str, ...],
    line: str,
    back: tuple[str, ...],
    where: Callable[[Any], Any],
) -> None:
    """What the check runs with (config.Settings.check_options, captured; the check then
    stops) differs from the default with the flag and with the file, and the flag given with
    the file overrides it."""
    options_of = _options_of_a_check(tmp_path, monkeypatch)
    for name in "abc":
        shutil.copy(pkg("both"), tmp_path / f"{name}.pt2")
        shutil.copy(pkg("aoti_inputs"), tmp_path / f"{name}.pt")
        (tmp_path / f"{name}.so").write_bytes(b"")
    toml = tmp_path / "aotipre.toml"
    toml.write_text(line.format(tmp=tmp_path) + "\n")

    def with_it(*args: str) -> Any:
        return where(options_of(*(a.format(tmp=tmp_path) for a in args)))

    default = with_it("--no-config")
    assert _each_differs(with_it(*flag, "--no-config"), default)
    in_file = with_it("--config", str(toml))
    assert _each_differs(in_file, default)
    assert _each_differs(with_it(*back, "--config", str(toml)), in_file)  # the flag wins


def _each_differs(value: Any, other: Any) -> bool:
    """`value` differs from `other`; for a tuple of the places one setting reaches, in each."""
    if isinstance(value, tuple) and isinstance(other, tuple) and len(value) == len(other):
        return all(a != b for a, b in zip(value, other))
    return bool(value != other)


# --- 3. Triton: the fixed size of a dim after the batch dim ----------------------------------


def _two_ranges(source: str) -> ModelInfo:
    """x float32 [s0, s1]: s0 (the batch dim) takes 4..64, s1 takes 2..16, known from the
    ExportedProgram's symbol ranges or from the AOTI wrapper's per-dim bounds alone."""
    bounds = (DimBound(4, 64), DimBound(2, 16)) if source == "wrapper" else ()
    x = TensorSpec("float32", (Dim(expr="s0"), Dim(expr="s1")), None, "cpu", bounds)
    symbols = (SymbolRange("s0", 4, 64), SymbolRange("s1", 2, 16)) if source == "export" else ()
    return ModelInfo(
        name="model",
        has_exported_program=source == "export",
        aoti=AotiPart("d", "cpu", None, None, (), None, {}, None, (), (), False),
        torch_version=None,
        schema_version=None,
        inputs=(InputSpec("x", 0, "args[0]", "tensor", x, 0),),
        outputs=(TensorSpec("float32", (Dim(expr="s0"),), None, "cpu"),),
        symbols=symbols,
        signature=CallSignature(args=(LEAF,), kwargs=()),
        contract_source="exported_program" if source == "export" else "wrapper_cpp",
        output_tree=LEAF,
    )


def _dims_findings(source: str, dims: str) -> list[Finding]:
    model = _two_ranges(source)
    text = (
        'platform: "torch_aoti" max_batch_size: 8\n'
        f'input [ {{ name: "INPUT__0" data_type: TYPE_FP32 dims: [ {dims} ] }} ]\n'
        'output [ { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ -1 ] } ]\n'
    )
    config = ServingConfig(pbtxt.parse_config(text, "config.pbtxt"), "config.pbtxt")
    package = PackageInfo("p.pt2", "both", "p", "pt2", "0", (model,), ())
    return [f for f in check_config(config, package, [model]) if f.code == "AOT046"]


@pytest.mark.parametrize("source", ["export", "wrapper"])
def test_a_fixed_size_after_the_batch_dim_is_checked_against_its_own_dim(source: str) -> None:
    # 32 is inside the batch dim's 4..64 but outside s1's 2..16: every request is refused
    (f,) = _dims_findings(source, "32")
    assert (f.severity.value, f.dim, f.expected, f.actual) == ("error", 1, "[2, 16]", 32)
    assert "dim 0 is 32, outside the range [2, 16] of the package's" in f.message
    assert f.message.endswith("dim 1 (s1)")
    # 3 is outside the batch dim's 4..64 but inside s1's 2..16: fine
    assert _dims_findings(source, "3") == []
    assert _dims_findings(source, "16") == [] and _dims_findings(source, "-1") == []
    (low,) = _dims_findings(source, "1")
    assert (low.dim, low.expected) == (1, "[2, 16]")


# --- 4. the state stage: a dropped buffer update with matching outputs ------------------------


def _state_call(call: int, compiled: int, eager: int) -> dict[str, Any]:
    """One call's record of the worker's state step (runner/worker/running.py op_state): the
    outputs equal to eager's, the int64 0-dim buffer 'calls' compiled vs eager."""
    out = {"dtype": "float32", "shape": [4], "numel": 4, "first": [2.0, 2.0, 2.0, 2.0]}
    leaf = {"index": 0, "kind": "tensor", "dtype": "float32", "eager_dtype": "float32"}
    return {
        "call": call,
        "outputs": [out],
        "buffers": {"calls": {"dtype": "int64", "shape": [], "numel": 1, "first": [compiled]}},
        "compare": {"structure": None, "outputs": [dict(leaf, mismatches=0, max_abs=0.0)]},
        "buffers_compare": {
            "calls": {
                "index": 0,
                "kind": "tensor",
                "dtype": "int64",
                "eager_dtype": "int64",
                "shape": [],
                "eager_shape": [],
                "numel": 1,
                "mismatches": int(compiled != eager),
                "max_abs": float(abs(compiled - eager)) if compiled != eager else None,
            }
        },
        "eager_buffers": {"calls": {"dtype": "int64", "shape": [], "numel": 1, "first": [eager]}},
    }


def _state_run(tmp_path: Path, calls: list[dict[str, Any]]) -> tuple[StageResult, list[Finding]]:
    model = dataclasses.replace(token_model(), mutated_buffers=("calls",))
    tmp_path.mkdir(parents=True, exist_ok=True)
    package = write_package(tmp_path / "p.pt2", model)
    script = {"state": {"entry": {"calls": calls}}}
    options = DynamicOptions(
        worker_command=(sys.executable, FAKE_WORKER),
        extra_env={"AOTIPRE_FAKE_SCRIPT": json.dumps(script)},
        cache_dir=str(tmp_path / "cache"),
        timeout_s=30.0,
        probe=False,
        perf=None,
        state_calls=3,
    )
    results, findings = run_dynamic_stages(package, model, None, None, options)
    return next(r for r in results if r.name == "state"), findings


def test_a_dropped_buffer_update_fails_even_when_every_output_matches(tmp_path: Path) -> None:
    # the compiled code folds the counter's update: 1, 1, 1 where eager counts 1, 2, 3; the
    # outputs never read it and match at every call (plain torch: test_state_real_silent below)
    state, findings = _state_run(tmp_path / "dropped", [_state_call(i, 1, i) for i in (1, 2, 3)])
    assert state.status is StageStatus.FAILED, state.detail
    (f,) = [f for f in findings if f.code == "AOT706"]
    assert f.severity.value == "error" and f.input == "calls"
    assert "first differ at call 2" in f.message
    assert "buffer 'calls' after call 2: compiled 1, eager 2" in f.message
    assert "output" not in f.message.split("(it mutates calls):")[1]
    # carried as eager carries it: passes
    state, findings = _state_run(tmp_path / "carried", [_state_call(i, i, i) for i in (1, 2, 3)])
    assert state.status is StageStatus.PASSED, state.detail
    assert not [f for f in findings if f.code == "AOT706"]


SILENT_BUILD = """
import sys, torch
out = sys.argv[1]
class Silent(torch.nn.Module):
    '''Counts its calls in an int64 buffer its outputs never read.'''
    def __init__(self):
        super().__init__()
        self.register_buffer("calls", torch.tensor(0, dtype=torch.int64))
    def forward(self, x):
        self.calls.add_(1)
        return x * 2
x = torch.ones(4)
torch.save(((x,), {}), f"{out}/inputs.pt")
ep = torch.export.export(Silent(), (x,))
torch.export.save(ep, f"{out}/silent_ep.pt2")
torch._inductor.aoti_compile_and_package(ep, package_path=f"{out}/silent.pt2")
"""

SILENT_PLAIN = """
import json, os, sys, tempfile, zipfile, torch
pkg, ep = sys.argv[1], sys.argv[2]
x = torch.ones(4)
compiled = torch._inductor.aoti_load_package(pkg)
outputs = [compiled(x).tolist() for _ in range(3)]
program = torch.export.load(ep).module()
eager = [program(x).tolist() for _ in range(3)]
# the buffer as a fresh copy of the compiled code leaves it: torch's container runner (what
# AOTIModelPackageLoader wraps) on the package's .so
folder = tempfile.mkdtemp()
with zipfile.ZipFile(pkg) as zf:
    for name in zf.namelist():
        if "/data/aotinductor/model/" in name and not name.endswith("/"):
            target = os.path.join(folder, name.split("/data/aotinductor/model/")[1])
            os.makedirs(os.path.dirname(target), exist_ok=True)
            with open(target, "wb") as f:
                f.write(zf.read(name))
(so,) = [f for f in os.listdir(folder) if f.endswith(".so")]
runner = torch._C._aoti.AOTIModelContainerRunnerCpu(os.path.join(folder, so), 1)
fqns = dict(runner.get_constant_names_to_original_fqns())
buffers = []
for _ in range(3):
    runner.run([x])
    live = runner.extract_constants_map(False)
    buffers.append({fqns.get(k, k): v.tolist() for k, v in live.items()}["calls"])
print(json.dumps({"compiled": outputs, "eager": eager, "buffers": buffers,
                  "eager_buffer": int(program.calls)}))
"""


@pytest.mark.slow
def test_state_real_silent(tmp_path: Path) -> None:
    """A counter whose outputs never read it: plain torch shows the compiled calls' outputs
    equal eager's while the compiled buffer stays 1 (eager: 3 after three calls); the state
    stage fails it on the buffer alone."""
    built = build(SILENT_BUILD, tmp_path)
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            SILENT_PLAIN,
            str(built / "silent.pt2"),
            str(built / "silent_ep.pt2"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    plain = json.loads(proc.stdout.strip().splitlines()[-1])
    assert plain["compiled"] == plain["eager"]
    assert plain["eager_buffer"] == 3 and plain["buffers"][1] != 2

    from aotipre.api import CheckOptions, check

    dynamic = DynamicOptions(
        exported_program=str(built / "silent_ep.pt2"),
        cache_dir=str(tmp_path / "cache"),
        state_calls=3,
        timeout_s=120.0,
        perf=None,
        probe=False,
    )
    report = check(
        str(built / "silent.pt2"),
        CheckOptions(inputs=str(built / "inputs.pt"), dynamic=dynamic, canary=False),
    )
    stages = {s.name: s for s in report.stages}
    assert stages["compare"].status is StageStatus.PASSED, stages["compare"].detail
    assert stages["state"].status is StageStatus.FAILED, stages["state"].detail
    (f,) = [f for f in report.findings if f.code == "AOT706"]
    assert f.input == "calls" and "first differ at call 2" in f.message
    assert f"buffer 'calls' after call 2: compiled {plain['buffers'][1]}, eager 2" in f.message
    assert "output 0" not in f.message
    assert report.exit_code == 1


# --- 5. Triton version folders by number -----------------------------------------------------


def _model_dir(folder: Path, versions: tuple[str, ...], policy: str = "") -> Path:
    folder.mkdir(parents=True)
    (folder / "config.pbtxt").write_text(f'platform: "torch_aoti"\n{policy}')
    for version in versions:
        (folder / version).mkdir()
        (folder / version / "model.pt2").write_bytes(b"")
    return folder


def _served(folder: Path) -> list[str]:
    return [str(s.version) for _, s in repository.read_model_dir(str(folder))]


def test_version_folders_are_ordered_by_number(tmp_path: Path) -> None:
    # by name "10" < "8" < "9"; by the numbers Triton reads (std::stoll) 8 < 9 < 10
    versions = ("8", "9", "10")
    assert _served(_model_dir(tmp_path / "latest", versions)) == ["10"]
    latest_two = "version_policy { latest { num_versions: 2 } }\n"
    assert _served(_model_dir(tmp_path / "two", versions, latest_two)) == ["9", "10"]
    every = "version_policy { all {} }\n"
    assert _served(_model_dir(tmp_path / "all", versions, every)) == ["8", "9", "10"]
    specific = "version_policy { specific { versions: [10, 9] } }\n"
    assert _served(_model_dir(tmp_path / "specific", versions, specific)) == ["9", "10"]
    # the package path of the latest is its folder's, and a repository expands it the same way
    ((path, served),) = repository.expand(str(tmp_path / "latest")) or []
    assert path == f"{tmp_path}/latest/10/model.pt2" and served.package == path
