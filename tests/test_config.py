"""Configuration: discovery, every key's validation, precedence (flag > file > default), errors."""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from aotipre import config
from aotipre.cli import main
from aotipre.findings import Severity
from aotipre.foundation.errors import UsageError
from tests.conftest import tmpfs

Pkg = Callable[[str], Path]


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty repository (a `.git` stops the search) as the working directory."""
    (tmp_path / ".git").mkdir()
    monkeypatch.chdir(tmp_path)
    return tmp_path


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def run_json(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict]:
    rc = main(["check", *args, "--format", "json"])
    out = capsys.readouterr().out
    return rc, json.loads(out) if out else {}


def test_no_file_means_defaults(project: Path) -> None:
    assert config.load_config() == config.Settings()
    write(project / "pyproject.toml", "[project]\nname = 'x'\n")  # no [tool.aotipre]
    assert config.load_config() == config.Settings()


def test_discovery_nearest_and_aotipre_toml_first(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(project / "pyproject.toml", "[tool.aotipre]\nfail-on = 'warning'\n")
    sub = project / "a" / "b"
    sub.mkdir(parents=True)
    monkeypatch.chdir(sub)
    found = config.load_config()
    assert found.fail_on is Severity.WARNING and found.source == str(project / "pyproject.toml")
    write(project / "a" / "aotipre.toml", "jobs = 3\n")
    write(project / "a" / "pyproject.toml", "[tool.aotipre]\njobs = 5\n")
    found = config.load_config()
    assert (
        found.jobs == 3
        and found.fail_on is Severity.ERROR
        and found.source == str(project / "a" / "aotipre.toml")
    )
    assert config.load_config(isolated=True) == config.Settings()
    assert config.load_config(project / "pyproject.toml").fail_on is Severity.WARNING


def test_discovery_stops_at_a_filesystem_boundary(project: Path) -> None:
    # a checkout on its own mount (a tmpfs here) below a folder holding an aotipre.toml: the
    # outer file belongs to another filesystem and is not used, as git stops at mount points
    write(project / "aotipre.toml", "fail-on = 'info'\n")
    with tmpfs(project / "mnt", "size=1m") as mount:
        inner = mount / "checkout" / "sub"
        inner.mkdir(parents=True)
        assert config.find_config(inner) is None
        assert config.find_config(project / "other") is None  # absent: nothing to stat
        (project / "other").mkdir()
        assert config.find_config(project / "other") == project / "aotipre.toml"  # same fs
        write(mount / "checkout" / "aotipre.toml", "jobs = 2\n")
        assert config.find_config(inner) == mount / "checkout" / "aotipre.toml"


def test_every_key(project: Path) -> None:
    write(
        project / "pyproject.toml",
        """
[tool.aotipre]
fail-on = "warning"
target = "cuda,cc=9.0"
static-only = true
select = ["AOT2", "aot3"]
ignore = "AOT013, AOT022"
device = "cuda:1"
recompile = true
timeout = 30
compile-timeout = 600.5
rtol = 0.001
atol = 0
probe = false
probe-budget = 1000
seed = 7
cache = false
cache-dir = "build/cache"
baseline = "ci/aotipre-baseline.json"
jobs = 4

[tool.aotipre.inputs]
"models/classifier.pt2" = "models/sample.pt"
"models/*.pt2" = "models/other.pt"
""",
    )
    s = config.load_config()
    assert (s.fail_on, s.target, s.static_only) == (Severity.WARNING, "cuda,cc=9.0", True)
    assert (s.select, s.ignore) == (("AOT2", "AOT3"), ("AOT013", "AOT022"))
    assert (s.device, s.recompile, s.timeout, s.compile_timeout) == ("cuda:1", True, 30.0, 600.5)
    assert (s.rtol, s.atol, s.probe, s.probe_budget, s.seed) == (0.001, 0.0, False, 1000, 7)
    assert (s.cache, s.cache_dir, s.baseline, s.jobs) == (
        False,
        "build/cache",
        "ci/aotipre-baseline.json",
        4,
    )
    assert s.inputs_for("models/classifier.pt2") == "models/sample.pt"
    assert s.inputs_for(str(project / "models" / "x.pt2")) == "models/other.pt"
    assert s.inputs_for("elsewhere/x.pt2") is None
    options = s.check_options()
    assert options.static_only and options.dynamic is None  # static-only: no runner import
    assert options.select == ("AOT2", "AOT3") and options.fail_on is Severity.WARNING


def test_paths_are_relative_to_the_file(project: Path) -> None:
    write(project / "ci" / "aotipre.toml", 'baseline = "base.json"\n[inputs]\n"m.pt2" = "i.pt"\n')
    s = config.load_config("ci/aotipre.toml")
    assert s.baseline == "ci/base.json"
    assert s.inputs_for("ci/m.pt2") == "ci/i.pt" and s.inputs_for("m.pt2") is None


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("fail_on = 'warning'", "unknown key 'fail_on' (did you mean 'fail-on'?)"),
        ("colour = true", "unknown key 'colour'"),
        ("fail-on = 'fatal'", 'fail-on = "fatal": expected one of error, warning'),
        ("timeout = -1", "timeout = -1: must be > 0"),
        ("timeout = '30'", 'timeout = "30": expected a number'),
        ("probe = 'yes'", 'probe = "yes": expected true or false'),
        ("jobs = 0", "jobs = 0: must be >= 1"),
        ("jobs = 1.5", "jobs = 1.5: expected an integer"),
        ("rtol = -0.1", "rtol = -0.1: must be >= 0"),
        ("select = ['XYZ']", "'XYZ' is not a code prefix"),
        ("ignore = ['AOT99']", "'AOT99' matches no code"),
        ("device = 'tpu'", 'device = "tpu": expected cpu, cuda or cuda:N'),
        ("target = 'tpu'", "target = \"tpu\": --target 'tpu' is neither a target spec"),
        ("target = 'cuda,cc=x'", "target = \"cuda,cc=x\": --target cc 'x'"),
        ("inputs = 'x.pt'", "inputs: expected a table"),
        ("[inputs]\n'a.pt2' = 3", '"a.pt2" = 3: expected a file name'),
        ("timeout = ", "is not valid TOML"),
    ],
)
def test_errors_name_the_key(project: Path, line: str, message: str) -> None:
    write(project / "aotipre.toml", line + "\n")
    with pytest.raises(UsageError) as info:
        config.load_config()
    assert message in str(info.value)
    assert str(info.value).startswith("aotipre.toml")


def test_cli_error_is_one_line_exit_2(
    project: Path, pkg: Pkg, capsys: pytest.CaptureFixture[str]
) -> None:
    write(project / "pyproject.toml", "[tool.aotipre]\nprobe_budget = 10\n")
    assert main(["check", str(pkg("aoti")), "--static-only"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("aotipre: error: pyproject.toml [tool.aotipre]: ")
    assert "'probe_budget' (did you mean 'probe-budget'?)" in err[0]
    assert main(["check", str(pkg("aoti")), "--no-config", "--timeout", "-1"]) == 2
    assert "--timeout -1.0: must be > 0" in capsys.readouterr().err


def test_precedence_flag_over_file_over_default(
    project: Path, pkg: Pkg, capsys: pytest.CaptureFixture[str]
) -> None:
    args = [str(pkg("both")), "-i", str(pkg("aoti_inputs")), "--static-only"]  # one warning
    rc, data = run_json(capsys, *args)
    assert (rc, data["fail_on"]) == (0, "error")  # default
    write(project / "aotipre.toml", "fail-on = 'warning'\n")
    rc, data = run_json(capsys, *args)
    assert (rc, data["fail_on"]) == (1, "warning")  # file
    rc, data = run_json(capsys, *args, "--fail-on", "error")
    assert (rc, data["fail_on"]) == (0, "error")  # flag
    rc, data = run_json(capsys, *args, "--no-config")
    assert (rc, data["fail_on"]) == (0, "error")
    write(project / "aotipre.toml", "fail-on = 'warning'\nignore = ['AOT013']\n")
    rc, data = run_json(capsys, *args)
    assert rc == 0 and [f["code"] for f in data["findings"]] == ["AOT051"]  # an info
    rc, data = run_json(capsys, *args, "--ignore", "AOT4", "--select", "AOT0")
    codes = [f["code"] for f in data["findings"]]
    assert rc == 1 and codes == ["AOT013", "AOT051"]  # flag replaces


def test_static_only_from_the_file(
    project: Path, pkg: Pkg, capsys: pytest.CaptureFixture[str]
) -> None:
    write(project / "aotipre.toml", "static-only = true\n")
    rc, data = run_json(capsys, str(pkg("aoti")), "-i", str(pkg("aoti_inputs")))
    assert rc == 0 and [s["name"] for s in data["stages"]] == ["inspect", "inputs", "static"]
    flags = config.parse_flags({"static-only": False, "timeout": None})
    assert config.load_config().merged(flags).static_only is False


def test_per_package_inputs(project: Path, pkg: Pkg, capsys: pytest.CaptureFixture[str]) -> None:
    shutil.copy(pkg("aoti"), project / "model.pt2")
    shutil.copy(pkg("aoti_inputs_bad_dtype"), project / "bad.pt")
    write(
        project / "pyproject.toml",
        '[tool.aotipre]\nstatic-only = true\n[tool.aotipre.inputs]\n"*.pt2" = "bad.pt"\n',
    )
    rc, data = run_json(capsys, "model.pt2")
    assert rc == 1 and data["inputs_source"] == "bad.pt"
    assert [f["code"] for f in data["findings"]] == ["AOT051", "AOT052", "AOT201"]
    rc, data = run_json(capsys, "model.pt2", "-i", str(pkg("aoti_inputs")))  # the flag wins
    assert rc == 0


def toml_blocks(path: Path) -> list[str]:
    import re

    return re.findall(r"```toml\n(.*?)```", path.read_text(), flags=re.S)


def test_documented_examples_are_valid(project: Path) -> None:
    from aotipre.fleet import batch

    repo = Path(__file__).resolve().parents[1]
    pages = [repo / "README.md", *sorted((repo / "docs").glob("*.md"))]
    blocks = [block for page in pages for block in toml_blocks(page)]
    configs = [b for b in blocks if b.startswith("[tool.aotipre]")]
    manifests = [b for b in blocks if "[[package]]" in b]
    assert len(configs) == 2 and len(manifests) == 1
    for text in configs:
        write(project / "pyproject.toml", text)
        assert config.load_config().source == "pyproject.toml"
    write(project / "manifest.toml", manifests[0])
    assert len(batch.load_manifest("manifest.toml").entries) == 2


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("timeout_s", float("nan"), "DynamicOptions.timeout_s = nan: must be a finite number"),
        ("timeout_s", 0, "DynamicOptions.timeout_s = 0: must be > 0"),
        ("compile_timeout_s", 1e9, "must be <= 604800"),
        ("rtol", -1.0, "DynamicOptions.rtol = -1.0: must be >= 0"),
        ("atol", float("inf"), "must be a finite number"),
        ("probe_budget", 0, "DynamicOptions.probe_budget = 0: must be >= 1"),
        ("seed", 10**23, "must be <= 9223372036854775807"),
        ("seed", True, "expected an integer"),
    ],
)
def test_library_dynamic_options_are_checked_like_the_flags(
    field: str, value: object, message: str
) -> None:
    from aotipre.runner.stages import DynamicOptions

    with pytest.raises(UsageError, match=re.escape(message)):
        DynamicOptions(**{field: value})  # type: ignore[arg-type]
    assert DynamicOptions(timeout_s=0.001, rtol=0.0, atol=None, seed=0).timeout_s == 0.001


def _planned(monkeypatch: pytest.MonkeyPatch, *args: str) -> list[bool]:
    """`aotipre check ARGS` up to its plan: each job's deployment_checks_inputs (nothing runs)."""
    from aotipre.fleet import batch

    seen: list[bool] = []

    def capture(jobs: list[batch.PackageJob], **_: object) -> list[batch.PackageJob]:
        seen.extend(j.options.dynamic.deployment_checks_inputs for j in jobs)  # type: ignore[union-attr]
        raise UsageError("planned")

    monkeypatch.setattr(batch, "with_runtimes", capture)
    assert main(["check", *args]) == 2
    return seen


def test_deployment_checks_inputs_flag_over_file_over_default(
    project: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--deployment-checks-inputs` / `deployment-checks-inputs = true` reach the probe stage's
    options (DynamicOptions), for one package and for a manifest's entries; the flag wins."""
    write(project / "model.pt2", "")
    write(project / "other.pt2", "")
    assert config.Settings().check_options().dynamic.deployment_checks_inputs is False  # type: ignore[union-attr]
    assert _planned(monkeypatch, "model.pt2") == [False]  # default
    assert _planned(monkeypatch, "model.pt2", "--deployment-checks-inputs") == [True]
    write(project / "pyproject.toml", "[tool.aotipre]\ndeployment-checks-inputs = true\n")
    assert config.load_config().deployment_checks_inputs is True
    assert _planned(monkeypatch, "model.pt2") == [True]  # file
    assert _planned(monkeypatch, "model.pt2", "--no-deployment-checks-inputs") == [False]  # flag
    assert _planned(monkeypatch, "model.pt2", "--no-config") == [False]
    # a manifest entry describes its own deployment; the flag still overrides every entry
    write(
        project / "m.toml",
        '[[package]]\npath = "model.pt2"\ndeployment-checks-inputs = false\n'
        '[[package]]\npath = "other.pt2"\n',
    )
    assert _planned(monkeypatch, "--manifest", "m.toml") == [False, True]
    assert _planned(monkeypatch, "--manifest", "m.toml", "--deployment-checks-inputs") == [
        True,
        True,
    ]
    # the library: the same key through the pytest plugin's and the flags' validators
    assert config.parse_flags({"deployment-checks-inputs": True}) == {
        "deployment_checks_inputs": True
    }
    assert "planned" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (
            "deployment-checks-inputs = 1",
            "deployment-checks-inputs = 1: expected true or false",
        ),
        (
            "deployment_checks_inputs = true",
            "unknown key 'deployment_checks_inputs' (did you mean 'deployment-checks-inputs'?)",
        ),
    ],
)
def test_deployment_checks_inputs_errors(project: Path, line: str, message: str) -> None:
    write(project / "aotipre.toml", line + "\n")
    with pytest.raises(UsageError, match=re.escape(message)):
        config.load_config()


def test_a_target_says_whether_its_deployment_checks_inputs() -> None:
    from aotipre.environment.host import parse_target
    from aotipre.foundation.errors import UsageError

    assert parse_target("cuda,cc=9.0,checks-inputs=yes").checks_inputs is True
    assert parse_target("cpu,checks-inputs=off").checks_inputs is False
    assert parse_target("cpu").checks_inputs is None
    with pytest.raises(UsageError, match="checks-inputs='maybe' is not yes or no"):
        parse_target("cpu,checks-inputs=maybe")
