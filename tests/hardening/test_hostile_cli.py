"""Issue #12, classes 5 and 10-16, through the real CLI in a subprocess: outputs aimed at inputs,
hostile numbers, configuration, manifest and baseline files, untrusted configuration
discovery, closed, full and broken streams, non-UTF-8 and control-character paths and metadata,
and wrong option types. Each case states its exit code; every case must also end without a
traceback, with at most one stderr line (exactly one `aotipre: error:` line for exit 2), in
bounded memory and time, and without writing anything but the outputs it names."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.hardening.craft import edit_json, read_members, rewrite, write_members
from tests.hardening.harness import RSS_BOUND_MB, Run, run_aotipre

ESC = "\x1b"
BIDI = "\u202e"


@dataclass
class Setup:
    """What a case needs: its folder, the fixture packages, and what it wants checked after."""

    d: Path
    pkg: Callable[[str], Path]
    env: dict[str, str] = field(default_factory=dict)
    outputs: list[str] = field(default_factory=list)
    """Files (relative to the case folder) the case is expected to write."""
    unchanged: list[Path] = field(default_factory=list)
    """Files whose bytes must be the same afterwards (the inputs an output aimed at)."""
    cwd: Path | None = None
    stdout: str = "file"
    """file, closed, full (/dev/full) or broken (a pipe nobody reads)."""
    stderr: str = "file"
    """file or closed."""
    after: Callable[[Run, Path], None] | None = None

    def copy(self, fixture: str, name: str) -> str:
        shutil.copyfile(self.pkg(fixture), self.d / name)
        return name


@dataclass(frozen=True)
class CliCase:
    name: str
    klass: int
    """The issue's class number (5, 10-16)."""
    what: str
    exit_code: int
    build: Callable[[Setup], list[str]]


CASES: list[CliCase] = []


def cli_case(klass: int, what: str, exit_code: int) -> Callable:
    def register(build: Callable[[Setup], list[str]]) -> Callable[[Setup], list[str]]:
        CASES.append(CliCase(build.__name__.removeprefix("c_"), klass, what, exit_code, build))
        return build

    return register


def _pass(s: Setup, *extra: str) -> list[str]:
    """`check` of a package that passes statically.

    The ExportedProgram-only fixture is an AOT015 error unless the deployment compiles at
    deploy time, so the check says so (--compile-at-deploy).
    """
    return [
        "check",
        s.copy("ep_only", "pkg.pt2"),
        "--static-only",
        "--no-config",
        "--compile-at-deploy",
        *extra,
    ]


def _fail(s: Setup, *extra: str) -> list[str]:
    """`check` of a package whose inputs fail statically (AOT201)."""
    pkg, inputs = s.copy("aoti", "aoti.pt2"), s.copy("aoti_inputs_bad_dtype", "bad.pt")
    return ["check", pkg, "--inputs", inputs, "--static-only", *extra]


# --- 5: outputs that are inputs, atomic writes ---------------------------------------------------


def _guard(s: Setup, *names: str) -> None:
    s.unchanged.extend(s.d / n for n in names)


@cli_case(5, "-o names the package", 2)
def c_output_is_the_package(s: Setup) -> list[str]:
    _guard(s, "pkg.pt2")
    return _pass(s, "-o", "pkg.pt2")


@cli_case(5, "--report json:PATH names the --inputs file", 2)
def c_report_is_the_inputs(s: Setup) -> list[str]:
    _guard(s, "bad.pt")
    return _fail(s, "--no-config", "--report", "json:bad.pt")


@cli_case(5, "--write-baseline is a symbolic link to the package", 2)
def c_baseline_is_a_link_to_the_package(s: Setup) -> list[str]:
    (s.d / "base.json").symlink_to("pkg.pt2")
    _guard(s, "pkg.pt2")
    return _pass(s, "--write-baseline", "base.json")


@cli_case(5, "-o is a hard link to the package", 2)
def c_output_is_a_hard_link_to_the_package(s: Setup) -> list[str]:
    args = _pass(s, "-o", "hard.json")
    os.link(s.d / "pkg.pt2", s.d / "hard.json")
    _guard(s, "pkg.pt2")
    return args


@cli_case(5, "-o is the manifest, spelled another way", 2)
def c_output_is_the_manifest(s: Setup) -> list[str]:
    s.copy("ep_only", "pkg.pt2")
    (s.d / "m.toml").write_text('[defaults]\nstatic-only = true\n[[package]]\npath = "pkg.pt2"\n')
    _guard(s, "m.toml")
    return ["check", "--manifest", "m.toml", "--no-config", "-o", "./sub/../m.toml"]


@cli_case(5, "--report PATH is the configuration file in use", 2)
def c_report_is_the_config(s: Setup) -> list[str]:
    # compile-at-deploy: an ExportedProgram-only archive is an AOT015 error otherwise
    (s.d / "aotipre.toml").write_text("static-only = true\ncompile-at-deploy = true\n")
    _guard(s, "aotipre.toml")
    return ["check", s.copy("ep_only", "pkg.pt2"), "--report", "json:aotipre.toml"]


@cli_case(5, "-o /dev/full: the write fails, no partial file anywhere", 2)
def c_output_to_a_full_device(s: Setup) -> list[str]:
    return _pass(s, "-o", "/dev/full")


@cli_case(5, "-o under a regular file: cannot write, nothing left", 2)
def c_output_under_a_file(s: Setup) -> list[str]:
    (s.d / "afile").write_text("x")
    s.outputs.append("afile")
    return _pass(s, "-o", "afile/report.json")


@cli_case(5, "-o /dev/null still works (special files are written in place, not replaced)", 0)
def c_output_to_dev_null(s: Setup) -> list[str]:
    def after(run: Run, d: Path) -> None:
        assert Path("/dev/null").is_char_device()

    s.after = after
    return _pass(s, "-o", "/dev/null")


@cli_case(5, "--write-baseline over the configured baseline (regenerating it is allowed)", 0)
def c_rewrite_the_configured_baseline(s: Setup) -> list[str]:
    (s.d / "base.json").write_text('{"schema_version": 1, "findings": []}\n')
    s.outputs.append("base.json")
    return _pass(s, "--baseline", "base.json", "--write-baseline", "base.json")


# --- 10: numbers ---------------------------------------------------------------------------------

for _flags in (
    ["--timeout", "nan"],
    ["--timeout", "inf"],
    ["--timeout", "1e10"],
    ["--compile-timeout", "-inf"],
    ["--rtol", "nan"],
    ["--atol", "inf"],
    ["--seed", "12345678901234567890123"],
    ["--seed", "-1"],
    ["--probe-budget", "0"],
    ["--jobs", "100000"],
):

    def _numbers(s: Setup, flags: list[str] = _flags) -> list[str]:
        return ["check", s.copy("ep_only", "pkg.pt2"), "--no-config", *flags]

    _numbers.__name__ = "c_flag_" + "_".join(_flags).strip("-").replace("-", "_")
    cli_case(10, " ".join(_flags) + " (dynamic run requested)", 2)(_numbers)

for _i, _line in enumerate(
    (
        "timeout = nan",
        "timeout = inf",
        "compile-timeout = 1e400",
        "atol = -nan",
        "seed = 9223372036854775808",
        "jobs = 0",
    )
):

    def _config_number(s: Setup, line: str = _line) -> list[str]:
        (s.d / "aotipre.toml").write_text(line + "\n")
        return ["check", s.copy("ep_only", "pkg.pt2")]

    _config_number.__name__ = f"c_config_number_{_i}_" + _line.split(" =")[0].replace("-", "_")
    cli_case(10, f"aotipre.toml: {_line}", 2)(_config_number)

for _value in ("-1", "nan", "inf", "1e10"):

    def _doctor(s: Setup, value: str = _value) -> list[str]:
        return ["doctor", "--timeout", value]

    _doctor.__name__ = f"c_doctor_timeout_{_value.replace('-', 'minus').replace('.', '_')}"
    cli_case(10, f"doctor --timeout {_value}", 2)(_doctor)


# --- 11: configuration, manifest and baseline files ----------------------------------------------

_FILES: list[tuple[str, str, str, bytes | None]] = [
    # id, option, file name, bytes (None: a FIFO)
    ("pyproject_tool_aotipre_int", "--config", "pyproject.toml", b"[tool]\naotipre = 1\n"),
    ("pyproject_tool_int", "--config", "pyproject.toml", b"tool = 1\n"),
    ("config_not_utf8", "--config", "c.toml", b'fail-on = "\xff\xfe"\n'),
    ("config_deep", "--config", "c.toml", b"a = " + b"[" * 100_000 + b"]" * 100_000 + b"\n"),
    ("config_giant_int", "--config", "c.toml", b"seed = " + b"9" * 5000 + b"\n"),
    ("config_fifo", "--config", "c.toml", None),
    ("manifest_fifo", "--manifest", "m.toml", None),
    ("manifest_not_utf8", "--manifest", "m.toml", b'[[package]]\npath = "\xff.pt2"\n'),
    ("manifest_package_int", "--manifest", "m.toml", b"package = 1\n"),
    ("manifest_deep", "--manifest", "m.toml", b"x = " + b"{a=" * 50_000 + b"1" + b"}" * 50_000),
    ("baseline_fifo", "--baseline", "b.json", None),
    ("baseline_deep", "--baseline", "b.json", b"[" * 100_000 + b"]" * 100_000),
    (
        "baseline_giant_int",
        "--baseline",
        "b.json",
        b'{"schema_version": 1, "findings": [{"package": "p", "code": "c", "dim": '
        + b"9" * 5000
        + b"}]}",
    ),
    ("baseline_not_utf8", "--baseline", "b.json", b'{"schema_version": 1, "x": "\xff"}'),
    ("baseline_list", "--baseline", "b.json", b"[1, 2, 3]"),
]

for _id, _option, _file, _data in _FILES:

    def _settings_file(
        s: Setup, option: str = _option, file: str = _file, data: bytes | None = _data
    ) -> list[str]:
        if data is None:
            os.mkfifo(s.d / file)
        else:
            (s.d / file).write_bytes(data)
        pkg = [] if option == "--manifest" else [s.copy("ep_only", "pkg.pt2")]
        rest = [] if option == "--config" else ["--no-config"]
        return ["check", *pkg, option, file, "--static-only", *rest]

    _settings_file.__name__ = f"c_{_id}"
    cli_case(11, f"{_option} {_file}: {_id.replace('_', ' ')}", 2)(_settings_file)

for _device in ("/dev/zero", "/dev/urandom"):

    def _device_file(s: Setup, device: str = _device) -> list[str]:
        return ["check", s.copy("ep_only", "pkg.pt2"), "--config", device, "--static-only"]

    _device_file.__name__ = "c_config_" + _device.rsplit("/", 1)[1]
    cli_case(11, f"--config {_device} (must not read it to the end)", 2)(_device_file)


# --- 12: configuration discovery -----------------------------------------------------------------


def _fail_elsewhere(s: Setup) -> list[str]:
    """`_fail` run from another working directory (`s.cwd`), JSON on stdout, no --no-config."""
    _fail(s)
    pkg, inputs = str(s.d / "aoti.pt2"), str(s.d / "bad.pt")
    return ["check", pkg, "--inputs", inputs, "--static-only", "--format", "json"]


def _planted(s: Setup, where: Path, mode: int | None = None, owner: int | None = None) -> None:
    """`ignore = ["AOT"]` planted in `where` (it would turn the failing check into a pass)."""
    where.mkdir(parents=True, exist_ok=True)
    (where / "aotipre.toml").write_text('ignore = ["AOT"]\n')
    if owner is not None:
        os.chown(where / "aotipre.toml", owner, -1)
    if mode is not None:
        os.chmod(where, mode)

    def after(run: Run, d: Path) -> None:
        assert "ignored" in run.report["config"] or run.report["config"].startswith("none")
        assert run.report["findings"], "the planted configuration hid the findings"

    s.after = after


@cli_case(12, "an aotipre.toml in a world-writable (sticky, /tmp-like) parent folder", 1)
def c_config_in_a_world_writable_parent(s: Setup) -> list[str]:
    shared = s.d / "shared"
    _planted(s, shared, mode=0o1777)
    s.cwd = shared / "proj"
    s.cwd.mkdir()
    return _fail_elsewhere(s)


@cli_case(12, "an aotipre.toml owned by another user", 1)
def c_config_owned_by_another_user(s: Setup) -> list[str]:
    _planted(s, s.d / "other", owner=65534)
    s.cwd = s.d / "other" / "proj"
    s.cwd.mkdir()
    return _fail_elsewhere(s)


@cli_case(12, "a group-writable aotipre.toml", 1)
def c_config_group_writable(s: Setup) -> list[str]:
    _planted(s, s.d / "grp")
    os.chmod(s.d / "grp" / "aotipre.toml", 0o664)
    s.cwd = s.d / "grp"
    return _fail_elsewhere(s)


@cli_case(12, "an aotipre.toml above $HOME", 1)
def c_config_above_home(s: Setup) -> list[str]:
    _planted(s, s.d / "above")
    home = s.d / "above" / "home"
    s.cwd = home / "proj"
    s.cwd.mkdir(parents=True)
    s.env["HOME"] = str(home)
    return _fail_elsewhere(s)


@cli_case(12, "an aotipre.toml above the repository root (.git)", 1)
def c_config_above_the_repository(s: Setup) -> list[str]:
    _planted(s, s.d / "outer")
    repo = s.d / "outer" / "repo"
    (repo / ".git").mkdir(parents=True)
    s.cwd = repo / "src"
    s.cwd.mkdir()
    return _fail_elsewhere(s)


@cli_case(12, "a trusted aotipre.toml is used, and named in the report", 0)
def c_trusted_config_is_named(s: Setup) -> list[str]:
    # compile-at-deploy: an ExportedProgram-only archive is an AOT015 error otherwise
    (s.d / "aotipre.toml").write_text("static-only = true\ncompile-at-deploy = true\n")

    def after(run: Run, d: Path) -> None:
        assert run.report["config"] == "aotipre.toml"

    s.after = after
    return ["check", s.copy("ep_only", "pkg.pt2"), "--format", "json"]


# --- 13: streams ---------------------------------------------------------------------------------

for _stream, _mode, _exit, _maker in (
    ("stdout", "closed", 0, _pass),
    ("stdout", "closed", 1, _fail),
    ("stdout", "full", 0, _pass),
    ("stdout", "full", 1, _fail),
    ("stdout", "broken", 0, _pass),
    ("stdout", "broken", 1, _fail),
    ("stderr", "closed", 2, None),
    ("stderr", "closed", 1, _fail),
):

    def _streams(
        s: Setup, stream: str = _stream, mode: str = _mode, maker: Callable | None = _maker
    ) -> list[str]:
        setattr(s, stream, mode)
        if maker is None:
            return ["check", "missing.pt2", "--static-only", "--no-config"]
        return maker(s, "--no-config") if maker is _fail else maker(s)

    _streams.__name__ = f"c_{_stream}_{_mode}_exit_{_exit}"
    cli_case(13, f"{_stream} {_mode}; the check's own exit code {_exit}", _exit)(_streams)

# help goes through click and rich: a reader that went away made it exit 1, a full disk a
# traceback and exit 3 (found by a sweep); nothing about stdout changes an exit code
for _mode, _args in (
    ("full", ("--help",)),
    ("broken", ("--help",)),
    ("full", ("check", "--help")),
    ("broken", ("doctor", "--help")),
    ("closed", ("codes", "--help")),
):

    def _help(s: Setup, mode: str = _mode, args: tuple[str, ...] = _args) -> list[str]:
        s.stdout = mode
        return list(args)

    _help.__name__ = f"c_help_{'_'.join(a.strip('-') for a in _args)}_stdout_{_mode}"
    cli_case(13, f"{' '.join(_args)} with stdout {_mode}: exit 0", 0)(_help)


# --- 14 and 15: non-UTF-8 bytes, control characters, bidi overrides --------------------------------

HOSTILE_NAME = b"bad\xff\x1b[2J\xe2\x80\xae\n::error::forged.pt2"
FORMATS = ("table", "json", "junit", "sarif", "github", "markdown", "html")


def _check_output(fmt: str, data: bytes) -> None:
    text = data.decode("utf-8")  # valid UTF-8 whatever the path held
    if fmt == "json":
        json.loads(text)
        return
    assert ESC not in text and BIDI not in text, text[:500]
    lines = text.splitlines()
    if fmt == "github":
        assert not any("forged" in line and line.startswith("::error::") for line in lines)
    if fmt in ("table", "markdown"):
        assert not any(line.startswith("::error::") for line in lines)


for _fmt in FORMATS:

    def _formats(s: Setup, fmt: str = _fmt) -> list[str]:
        name = os.fsdecode(HOSTILE_NAME)
        shutil.copyfile(s.pkg("ep_only"), s.d / name)
        s.outputs.append(f"out.{fmt}")

        def after(run: Run, d: Path) -> None:
            _check_output(fmt, (d / f"out.{fmt}").read_bytes())

        s.after = after
        return [
            *("check", name, "--static-only", "--no-config", "--compile-at-deploy"),
            *("--format", fmt, "-o", f"out.{fmt}"),
        ]

    _formats.__name__ = f"c_non_utf8_control_path_{_fmt}"
    cli_case(
        14, f"a package named with \\xff, ESC, a bidi override and a newline: --format {_fmt}", 0
    )(_formats)


@cli_case(14, "inspect of that package with PYTHONIOENCODING=utf-8 (stdout checked)", 0)
def c_inspect_non_utf8_path(s: Setup) -> list[str]:
    name = os.fsdecode(HOSTILE_NAME)
    shutil.copyfile(s.pkg("ep_only"), s.d / name)
    s.env["PYTHONIOENCODING"] = "utf-8"
    s.after = lambda run, d: _check_output("table", run.stdout.encode())
    return ["inspect", name]


@cli_case(15, "wrapper metadata values with ESC, CR/LF and bidi: inspect (stdout checked)", 0)
def c_metadata_controls_inspect(s: Setup) -> list[str]:
    hostile = {"owner": f"x{ESC}[2J{ESC}]0;pwned\a", "note": "a\r\n::error::forged", "b": BIDI}
    rewrite(
        s.pkg("aoti"),
        s.d / "meta.pt2",
        edit_json("wrapper_metadata.json", lambda m: {**m, **hostile}),
    )
    s.after = lambda run, d: _check_output("table", run.stdout.encode())
    return ["inspect", "meta.pt2"]


@cli_case(15, "a fake-tensor device string with ESC in stored sample inputs (table)", 0)
def c_fake_tensor_device_escape(s: Setup) -> list[str]:
    from tests.hardening.corpus import _pt
    from tests.hardening.craft import Pkl

    spec = {
        "dtype": 7,
        "sizes": [{"as_int": 2}],
        "strides": [{"as_int": 1}],
        "device": {"type": f"cpu{ESC}[2J\n::error::forged"},
        "layout": 7,
    }
    fake = Pkl.call(
        Pkl.glob("torch._export.serde.serialize", "_reconstruct_fake_tensor"),
        Pkl.call(Pkl.glob("_codecs", "encode"), Pkl.string(json.dumps(spec)), Pkl.string("latin1")),
        b"\x89",
    )
    members = [
        (n, _pt(Pkl.args_kwargs(fake)) if n.endswith("sample_inputs/model.pt") else b)
        for n, b in read_members(s.pkg("ep_only"))
    ]
    write_members(s.d / "fake.pt2", members)
    s.after = lambda run, d: _check_output("table", run.stdout.encode())
    return ["check", "fake.pt2", "--static-only", "--no-config", "--compile-at-deploy"]


@cli_case(15, "stderr: a missing package named with ESC and a newline", 2)
def c_stderr_line_escaped(s: Setup) -> list[str]:
    def after(run: Run, d: Path) -> None:
        assert ESC not in run.stderr and run.stderr.count("\n") == 1

    s.after = after
    return ["check", f"x{ESC}[2J\n::error::y.pt2", "--static-only", "--no-config"]


# --- 16: option types ----------------------------------------------------------------------------

for _words in (
    ["check", "P", "--timeout", "abc"],
    ["check", "P", "--fail-on", "bogus"],
    ["check", "P", "--format", "xml"],
    ["check", "P", "--jobs", "two"],
    ["check", "P", "--no-such-option"],
    ["check", "P", "--probe-budget", "1.5"],
    ["inspect"],
    ["doctor", "--timeout", "soon"],
    ["codes", "--format", "yaml"],
    ["check", "P", "--report", "xml:out.xml"],
):

    def _types(s: Setup, words: list[str] = _words) -> list[str]:
        return [s.copy("ep_only", "pkg.pt2") if w == "P" else w for w in words]

    _types.__name__ = "c_usage_" + "_".join(w.strip("-") for w in _words if w != "P")
    cli_case(16, " ".join(_words), 2)(_types)


# --- the runner ----------------------------------------------------------------------------------


def _preexec(stdout: str, stderr: str) -> Callable[[], None] | None:
    if stdout == "file" and stderr == "file":
        return None

    def setup() -> None:
        if stdout == "closed":
            os.close(1)
        elif stdout == "full":
            os.dup2(os.open("/dev/full", os.O_WRONLY), 1)
        elif stdout == "broken":
            r, w = os.pipe()
            os.close(r)
            os.dup2(w, 1)
        if stderr == "closed":
            os.close(2)

    return setup


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_cases_cover_every_class() -> None:
    assert {c.klass for c in CASES} == {5, 10, 11, 12, 13, 14, 15, 16}
    assert len({c.name for c in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"class{c.klass}-{c.name}")
def test_hostile_cli_case(case: CliCase, pkg: Callable[[str], Path], tmp_path: Path) -> None:
    files = tmp_path / "files"
    files.mkdir()
    setup = Setup(files, pkg)
    args = case.build(setup)
    digests = {p: _digest(p) for p in setup.unchanged}
    run = run_aotipre(
        args,
        workdir=tmp_path,
        env=setup.env,
        cwd=setup.cwd or files,
        preexec=_preexec(setup.stdout, setup.stderr),
    )
    where = f"{case.name} ({case.what}): exit {run.returncode}, stderr {run.stderr[-800:]!r}"
    assert not run.killed, where
    assert "Traceback" not in run.stderr, where
    assert run.returncode == case.exit_code, where
    lines = run.stderr.splitlines()
    if setup.stderr == "file":
        if run.returncode == 2:
            assert len(lines) == 1 and lines[0].startswith("aotipre: error: "), where
        elif setup.stdout == "full":
            assert len(lines) == 1 and lines[0].startswith("aotipre: note: "), where
        else:
            assert lines == [], where
    for path, digest in digests.items():
        assert _digest(path) == digest, f"{where}: {path.name} was overwritten"
    allowed = {f"cwd/{name}" for name in setup.outputs}
    if setup.cwd is not None:
        allowed |= {p for p in run.new_files}  # another cwd: checked by the case itself
    assert set(run.new_files) <= allowed, f"{where}; wrote {run.new_files}"
    assert not any(n.startswith("tmp/") for n in run.new_files), where
    assert run.peak_rss_mb <= RSS_BOUND_MB, f"{where}; peak RSS {run.peak_rss_mb:.0f} MB"
    if setup.after is not None:
        setup.after(run, files)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__, "-q"]))
