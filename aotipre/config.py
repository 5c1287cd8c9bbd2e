"""Settings: defaults, then `[tool.aotipre]` (pyproject.toml) or `aotipre.toml`, then the flags.

Longer than the ~600 lines of the other modules because of its table: one entry per setting
(the config key, the flag, its parser and bounds) in one place, so that a key and its flag can
never disagree; config discovery and its trust checks (owner, permissions, the filesystem
boundary) sit beside the reader that uses them."""

from __future__ import annotations

import dataclasses
import os
import re
import stat
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path, PurePath
from typing import TYPE_CHECKING, Any

from aotipre.findings import Severity, codes
from aotipre.foundation import safeio
from aotipre.foundation.bounds import RUN_NUMBERS, TRIAGE_NUMBERS, Parser, integer, number
from aotipre.foundation.errors import UsageError
from aotipre.foundation.safeio import MAX_SETTINGS_BYTES, read_text

if TYPE_CHECKING:
    from aotipre.api import CheckOptions
    from aotipre.findings.baseline import Baseline

CONFIG_FILE = "aotipre.toml"
PYPROJECT = "pyproject.toml"


@dataclass(frozen=True)
class Settings:
    """Everything `aotipre check` can be configured with; field defaults are the built-in ones."""

    fail_on: Severity = Severity.ERROR
    target: str | None = None
    targets: tuple[tuple[str, str], ...] = ()
    """Named deployment targets (`[tool.aotipre.targets]`): name -> target spec."""
    static_only: bool = False
    select: tuple[str, ...] = ()
    """Only report codes that start with one of these prefixes (empty: every code)."""
    ignore: tuple[str, ...] = ()
    """Never report codes that start with one of these prefixes (wins over select)."""
    device: str | None = None
    recompile: bool = False
    timeout: float = 300.0
    compile_timeout: float = 1800.0
    rtol: float | None = None
    atol: float | None = None
    probe: bool = True
    probe_budget: int = 1 << 22
    state_calls: int = 3
    """Calls of one copy of a model that mutates buffers (the state stage); 0/1: off."""
    seed: int = 0
    cache: bool = True
    cache_dir: str | None = None
    baseline: str | None = None
    jobs: int = 1
    progress: bool | None = None
    """Stage lines and step messages on stderr (commands.check); None: on, unless every package
    is checked static-only (no worker runs)."""
    gpus: tuple[int, ...] | None = None
    """The GPUs (nvidia-smi indices) a run's packages are spread over, one package per GPU at a
    time (aotipre.fleet.gpus); None: every visible GPU, pinned only when several run at once."""
    escalate: bool = True
    """Crash triage after a run that crashed inside the model (aotipre.triage)."""
    accuracy_budget: float = 900.0
    """Seconds for accuracy triage of one model (its diagnostic rebuild and cause ladder)."""
    minify: bool = False
    sanitizer: bool = False
    artifacts: str | None = None
    exported_program: str | None = None
    """The ExportedProgram of an AOTI-only package: compare's, probe's and triage's reference."""
    expected: str | None = None
    """Golden outputs for the sample inputs, which compare checks the compiled outputs against."""
    weights: str | None = None
    """A weights file swapped in without recompiling (torch.save state_dict or safetensors):
    checked statically and by the weights stage."""
    compile_at_deploy: bool = False
    """The deployment compiles ExportedProgram-only archives at deploy time (no AOT015)."""
    perf: bool = True
    """The perf stage: cold-start breakdown, latency, memory (runner/perf.py)."""
    perf_runs: int = 20
    max_load_s: float | None = None
    max_latency_ms: float | None = None
    max_rss_mb: float | None = None
    max_gpu_mb: float | None = None
    against: str | None = None
    """A baseline package measured in the same run; regressions beyond perf_tolerance fail."""
    perf_tolerance: float = 0.2
    python: tuple[str, ...] = ()
    """Interpreters the workers run in (aotipre.environment.runtimes); several: a version matrix; empty:
    the one running aotipre."""
    imports: tuple[str, ...] = ()
    """Modules imported in every worker before anything is loaded (custom operators)."""
    libraries: tuple[str, ...] = ()
    """Shared libraries loaded in every worker (torch.ops.load_library) and the C++ harness."""
    cpp: bool = False
    """The package is deployed with the C++ loader (AOTIModelPackageLoader)."""
    deployment_checks_inputs: bool = False
    """The serving process sets AOTI_RUNTIME_CHECK_INPUTS (the probe stage judges by it)."""
    allow_pickle: bool = False
    """Load packages holding members torch unpickles without restriction (AOT081 a warning)."""
    inputs: tuple[tuple[str, str], ...] = ()
    """Per-package sample inputs: (absolute package path or glob, inputs file); first match wins."""
    source: str | None = None
    """The configuration file these settings came from (None: built-in defaults only)."""
    ignored: tuple[str, ...] = ()
    """Configuration files the search found but did not trust (`ignored <path>: <why>`)."""

    def describe(self) -> str:
        """Which configuration file this run used, for every report."""
        used = self.source or "none (built-in defaults)"
        return used + "".join(f"; {note}" for note in self.ignored)

    def merged(self, values: Mapping[str, Any]) -> Settings:
        """These settings with `values` (field name -> validated value) on top."""
        return dataclasses.replace(self, **values)

    def inputs_for(self, package: str) -> str | None:
        """The configured sample-inputs file of `package`, if a pattern matches it."""
        here = Path(os.path.abspath(package)).as_posix()
        for pattern, inputs in self.inputs:
            if fnmatchcase(here, pattern):
                return inputs
        return None

    def check_options(
        self,
        *,
        inputs: str | None = None,
        model: str | None = None,
        baseline: Baseline | None = None,
        progress: Callable[[str], None] | None = None,
    ) -> CheckOptions:
        """The api.CheckOptions for one package."""
        from aotipre.api import CheckOptions
        from aotipre.checks.custom_ops import Registration

        for lib in self.libraries:
            if not os.path.lexists(lib):
                raise UsageError(f"library {display_path(lib)}: no such file")
            # a link loop, a dangling link, a folder or a FIFO is said as what it is
            safeio.require_file(lib, f"library {display_path(lib)}")
        here = (os.getcwd(),) + ((os.path.dirname(self.source),) if self.source else ())
        registration = Registration(self.imports, self.libraries, import_path=here)
        dynamic = None
        if not self.static_only:
            from aotipre.runner.perf import Budgets
            from aotipre.runner.stages import DynamicOptions, PerfOptions

            perf = None
            if self.perf:
                perf = PerfOptions(
                    runs=self.perf_runs,
                    budgets=Budgets(
                        max_load_s=self.max_load_s,
                        max_latency_ms=self.max_latency_ms,
                        max_rss_mb=self.max_rss_mb,
                        max_gpu_mb=self.max_gpu_mb,
                    ),
                    against=self.against,
                    tolerance=self.perf_tolerance,
                )
            dynamic = DynamicOptions(
                device=self.device,
                recompile=self.recompile,
                timeout_s=self.timeout,
                compile_timeout_s=self.compile_timeout,
                rtol=self.rtol,
                atol=self.atol,
                probe=self.probe,
                probe_budget=self.probe_budget,
                state_calls=self.state_calls,
                seed=self.seed,
                cache_dir=self.cache_dir,
                use_cache=self.cache,
                perf=perf,
                python=self.python[0] if len(self.python) == 1 else None,
                extra_env=registration.env(),
                cpp=self.cpp,
                deployment_checks_inputs=self.deployment_checks_inputs,
                allow_pickle=self.allow_pickle,
                exported_program=self.exported_program,
                expected=self.expected,
                weights=self.weights,
            )
        if self.exported_program or self.expected:  # one line and exit 2 when either is bad
            from aotipre.runner.reference import check_reference_files

            check_reference_files(self.exported_program, self.expected)
        triage = None
        if not self.static_only:
            from aotipre.triage.escalate import TriageOptions

            triage = TriageOptions(
                escalate=self.escalate,
                accuracy_budget_s=self.accuracy_budget,
                minify=self.minify,
                sanitizer=self.sanitizer,
                artifacts=self.artifacts,
                exported_program=self.exported_program,
            )
        return CheckOptions(
            inputs=inputs,
            model=model,
            target=self.target,
            targets=self.targets,
            static_only=self.static_only,
            fail_on=self.fail_on,
            dynamic=dynamic,
            triage=triage,
            progress=progress,
            select=self.select,
            ignore=self.ignore,
            baseline=baseline,
            compile_at_deploy=self.compile_at_deploy,
            registration=registration,
            cpp=self.cpp,
            exported_program=self.exported_program,
            weights=self.weights,
            allow_pickle=self.allow_pickle,
            deployment_checks_inputs=self.deployment_checks_inputs,
            against=self.against,
        )


# --------------------------------------------------------------------------------------------
# The keys, as data: name in the file (= the flag without `--`), field, parser, scope


@dataclass(frozen=True)
class Key:
    """One configuration key."""

    name: str
    """As written in the file, kebab-case; the command-line flag is `--<name>`."""
    field: str
    parse: Parser
    help: str
    per_package: bool = True
    """False: one value per run (jobs, baseline), not allowed in a manifest's package entry."""


def _bool(value: Any, base: Path) -> bool:
    if not isinstance(value, bool):
        raise ValueError("expected true or false")
    return value


def check_number(name: str, value: Any) -> Any:
    """Validate one command-line number by its key (`timeout`, `seed`, ...): UsageError if bad.

    For options without a configuration key (e.g. `doctor --timeout`), the same validators."""
    return parse_flags({name: value})[BY_NAME[name].field]


def _fail_on(value: Any, base: Path) -> Severity:
    choices = ("error", "warning")
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"expected one of {', '.join(choices)}")
    return Severity(value)


def _string(value: Any, base: Path) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError("expected a non-empty string")
    return value


def _target(value: Any, base: Path) -> str:
    from aotipre.environment.host import is_target_name, parse_targets

    text = _string(value, base)
    specs = ";".join(i for i in text.split(";") if i.strip() and not is_target_name(i))
    if specs:  # names of [tool.aotipre.targets] are resolved with the table, later
        try:
            parse_targets(specs)
        except UsageError as exc:
            raise ValueError(exc.message) from None
    return text


def _targets(value: Any, base: Path) -> tuple[tuple[str, str], ...]:
    """`[tool.aotipre.targets]`: a table of name = "target spec" (checked all without --target)."""
    if not isinstance(value, dict) or not value:
        raise ValueError('expected a table of name = "target spec", e.g. a100 = "cuda,cc=8.0"')
    out = []
    for name, spec in value.items():
        if not re.fullmatch(r"[A-Za-z0-9_.-]+", name):
            raise ValueError(f"target name {name!r}: use letters, digits, '_', '-', '.'")
        out.append((name, _target(spec, base)))
    return tuple(out)


_DEVICE = re.compile(r"(cpu|cuda(:\d+)?)")


def _device(value: Any, base: Path) -> str:
    text = _string(value, base)
    if not _DEVICE.fullmatch(text.strip().lower()):
        raise ValueError("expected cpu, cuda or cuda:N")
    return text


def _codes(value: Any, base: Path) -> tuple[str, ...]:
    """A list of code prefixes (`["AOT3", "AOT013"]`); a comma-separated string also works."""
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, (list, tuple)) or not all(isinstance(v, str) for v in items):
        raise ValueError('expected a list of code prefixes, e.g. ["AOT3", "AOT013"]')
    out: list[str] = []
    for item in items:
        for prefix in (p.strip().upper() for p in item.split(",")):
            if not prefix:
                continue
            if not re.fullmatch(r"AOT\d{0,3}", prefix):
                raise ValueError(f"{prefix!r} is not a code prefix (AOT, AOT3, AOT30, AOT301)")
            if not any(c.code.startswith(prefix) for c in codes.ALL_CODES):
                raise ValueError(f"{prefix!r} matches no code (see `aotipre codes`)")
            out.append(prefix)
    return tuple(out)


def _path(value: Any, base: Path) -> str:
    return display_path(base / Path(_string(value, base)).expanduser())


def _pythons(value: Any, base: Path) -> tuple[str, ...]:
    """Interpreter paths (a string or a list); a value with a `/` is a path (relative to the
    file, or to the working folder for the flag) that names exactly that file, a bare name is
    looked up on PATH when the run starts (runtimes._locate)."""
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, (list, tuple)) or not items:
        raise ValueError(
            'expected an interpreter path or a list of them, e.g. [".venv/bin/python"]'
        )
    out = []
    for item in items:
        text = _string(item, base)
        out.append(_interpreter_path(text, base) if "/" in text else text)
    return tuple(out)


def _interpreter_path(text: str, base: Path) -> str:
    """`text` as reports show it (short when under the working folder), still a path: a file
    in the working folder is `./python`, never `python` (a bare name is looked up on PATH)."""
    shown = _path(text, base)
    return shown if "/" in shown else f"./{shown}"


def _strings(value: Any, base: Path) -> list[str]:
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, (list, tuple)) or not all(isinstance(v, str) and v for v in items):
        raise ValueError("expected a string or a list of strings")
    return list(items)


def _modules(value: Any, base: Path) -> tuple[str, ...]:
    """Importable module names (`mypkg.ops`), checked for their form only."""
    out = _strings(value, base)
    for name in out:
        if not re.fullmatch(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*", name):
            raise ValueError(f"{name!r} is not a Python module name")
    return tuple(out)


def _libraries(value: Any, base: Path) -> tuple[str, ...]:
    """Shared libraries, made absolute (the workers run in another folder); that they exist is
    checked when a check starts (Settings.check_options)."""
    return tuple(os.path.abspath(base / Path(item).expanduser()) for item in _strings(value, base))


def _gpus(value: Any, base: Path) -> tuple[int, ...]:
    """nvidia-smi indices (`[0, 2, 3]` or `"0,2,3"`); that they are visible is checked when
    the run starts (aotipre.fleet.gpus.parse_gpus)."""
    from aotipre.fleet.gpus import gpu_indices

    return gpu_indices(value)


KEYS: tuple[Key, ...] = (
    Key("fail-on", "fail_on", _fail_on, "lowest severity that fails the gate: error, warning"),
    Key("target", "target", _target, "deployment host, e.g. 'cuda,cc=9.0' or 'cpu,isa=avx2'"),
    Key("targets", "targets", _targets, "named deployment targets: a table of name = spec"),
    Key("static-only", "static_only", _bool, "only read and check; compile, load and run nothing"),
    Key("select", "select", _codes, 'report only codes with these prefixes, e.g. ["AOT2"]'),
    Key("ignore", "ignore", _codes, "never report codes with these prefixes"),
    Key("device", "device", _device, "device of the runs: cpu, cuda or cuda:N"),
    Key("recompile", "recompile", _bool, "compile the ExportedProgram even if AOTI code exists"),
    Key(
        "timeout",
        "timeout",
        RUN_NUMBERS["timeout"][1],
        "seconds for each load, run, probe",
    ),
    Key(
        "compile-timeout",
        "compile_timeout",
        RUN_NUMBERS["compile-timeout"][1],
        "seconds for a compile",
    ),
    Key("rtol", "rtol", RUN_NUMBERS["rtol"][1], "relative tolerance against eager"),
    Key("atol", "atol", RUN_NUMBERS["atol"][1], "absolute tolerance against eager"),
    Key("probe", "probe", _bool, "run each dynamic dim at its min, max and max+1"),
    Key(
        "probe-budget",
        "probe_budget",
        RUN_NUMBERS["probe-budget"][1],
        "most elements of an input in a probe run",
    ),
    Key("seed", "seed", RUN_NUMBERS["seed"][1], "seed of synthesized and probe inputs"),
    Key(
        "state-calls",
        "state_calls",
        RUN_NUMBERS["state-calls"][1],
        "calls of a model that mutates buffers, compared with eager's (0: off)",
    ),
    Key("cache", "cache", _bool, "use the compile cache"),
    Key("cache-dir", "cache_dir", _path, "compile cache folder"),
    Key("baseline", "baseline", _path, "baseline file of accepted findings", per_package=False),
    Key("jobs", "jobs", integer(1, 256), "packages checked in parallel", per_package=False),
    Key(
        "progress",
        "progress",
        _bool,
        "stage lines with the elapsed time on stderr (default: on, unless static-only)",
        per_package=False,
    ),
    Key(
        "gpus",
        "gpus",
        _gpus,
        "GPUs (nvidia-smi indices) for the packages, one package per GPU at a time",
        per_package=False,
    ),
    Key("escalate", "escalate", _bool, "run crash triage after a run crashes in the model"),
    Key(
        "accuracy-budget",
        "accuracy_budget",
        TRIAGE_NUMBERS["accuracy-budget"][1],
        "accuracy triage: seconds for one model's rebuilds",
    ),
    Key("minify", "minify", _bool, "crash triage, failed compiles: the AOTI minifier (slow)"),
    Key("sanitizer", "sanitizer", _bool, "crash triage: run compute-sanitizer (CUDA, slow)"),
    Key("artifacts", "artifacts", _path, "crash triage: write a repro bundle into this folder"),
    Key(
        "python",
        "python",
        _pythons,
        "interpreter(s) the torch workers run in (several: a version matrix)",
    ),
    Key(
        "exported-program",
        "exported_program",
        _path,
        "the ExportedProgram (.pt2) of an AOTI-only package: compare, probe and triage "
        "run it as the reference",
    ),
    Key(
        "expected",
        "expected",
        _path,
        "golden outputs for the sample inputs (torch.save), compared with the compiled ones",
    ),
    Key(
        "weights",
        "weights",
        _path,
        "a weights file swapped in without recompiling (torch.save state_dict or safetensors): "
        "checked against the package's constants and by the weights stage",
    ),
    Key(
        "compile-at-deploy",
        "compile_at_deploy",
        _bool,
        "the deployment compiles ExportedProgram-only archives at deploy time",
    ),
    Key("perf", "perf", _bool, "measure the load, latency and memory (the perf stage)"),
    Key(
        "perf-runs",
        "perf_runs",
        integer(2, 10_000),
        "timed calls of the perf stage (after warm-up)",
    ),
    Key("max-load-s", "max_load_s", number(0, inclusive=False), "budget: seconds to load"),
    Key("max-latency-ms", "max_latency_ms", number(0, inclusive=False), "budget: median call"),
    Key("max-rss-mb", "max_rss_mb", number(0, inclusive=False), "budget: peak host memory"),
    Key("max-gpu-mb", "max_gpu_mb", number(0, inclusive=False), "budget: GPU memory of the model"),
    Key("against", "against", _path, "perf: a baseline package measured in the same run"),
    Key(
        "perf-tolerance",
        "perf_tolerance",
        number(0, inclusive=True),
        "perf: how much worse than --against is a regression (0.2: 20%)",
    ),
    Key("import", "imports", _modules, "modules imported in every worker (custom operators)"),
    Key("library", "libraries", _libraries, "op libraries loaded in every worker and in C++"),
    Key(
        "cpp", "cpp", _bool, "the package is deployed with the C++ loader (AOTIModelPackageLoader)"
    ),
    Key(
        "deployment-checks-inputs",
        "deployment_checks_inputs",
        _bool,
        "the serving process sets AOTI_RUNTIME_CHECK_INPUTS=1 (no AOT613)",
    ),
    Key(
        "allow-pickle",
        "allow_pickle",
        _bool,
        "load packages (and --against baselines) holding members torch unpickles without "
        "restriction: AOT081 is a warning, not an error",
    ),
)
BY_NAME: dict[str, Key] = {k.name: k for k in KEYS}
INPUTS_TABLE = "inputs"
"""`[tool.aotipre.inputs]`: package path or glob -> sample-inputs file (config files only)."""


def parse_values(
    table: Mapping[str, Any],
    where: str,
    base: Path,
    *,
    allowed: Mapping[str, Key] | None = None,
    extra: tuple[str, ...] = (),
) -> dict[str, Any]:
    """Validate a table of `KEYS` (and the names in `extra`, left to the caller).

    Returns field name -> value. Raises UsageError naming the file, the table and the key.
    """
    allowed = BY_NAME if allowed is None else allowed
    out: dict[str, Any] = {}
    for name, value in table.items():
        if name in extra:
            continue
        key = allowed.get(name)
        if key is None:
            raise _unknown(where, name, [*allowed, *extra])
        try:
            out[key.field] = key.parse(value, base)
        except ValueError as exc:
            raise UsageError(f"{where}: {name} = {_show(value)}: {exc}") from None
    return out


def parse_flags(flags: Mapping[str, Any]) -> dict[str, Any]:
    """Validate command-line values (flag name without `--` -> value; None: not given)."""
    out: dict[str, Any] = {}
    for name, value in flags.items():
        if value is None:
            continue
        key = BY_NAME[name]
        if isinstance(value, Severity):
            value = value.value
        try:
            out[key.field] = key.parse(value, Path.cwd())
        except ValueError as exc:
            raise UsageError(f"--{name} {_show(value)}: {exc}") from None
    return out


def _unknown(where: str, name: str, known: list[str]) -> UsageError:
    import difflib  # imported here: only a misspelt key needs it (start-up time)

    close = difflib.get_close_matches(name.replace("_", "-"), known, n=1)
    guess = f" (did you mean {close[0]!r}?)" if close else ""
    return UsageError(
        f"{where}: unknown key {name!r}{guess}", hint=f"known keys: {', '.join(sorted(known))}"
    )


def _show(value: Any, depth: int = 0) -> str:
    """A value as the file would spell it, bounded (a deep or long value is cut)."""
    if isinstance(value, bool):
        text = "true" if value else "false"
    elif isinstance(value, str):
        text = f'"{value[:80]}"' + ("..." if len(value) > 80 else "")
    elif isinstance(value, (list, tuple)):
        if depth >= 2:
            return "[...]"
        shown = ", ".join(_show(v, depth + 1) for v in value[:8])
        text = "[" + shown + (", ..." if len(value) > 8 else "") + "]"
    elif isinstance(value, dict):
        text = "{...}"
    elif isinstance(value, int) and abs(value) > 10**30:
        text = f"an integer of {value.bit_length()} bits"
    else:
        text = str(value)
    return text[:200]


# --------------------------------------------------------------------------------------------
# Files


def read_toml(path: Path) -> dict[str, Any]:
    """Parse a TOML file (a regular file of at most MAX_SETTINGS_BYTES, UTF-8): UsageError with
    the file and the parser's message otherwise."""
    # imported here: a command that finds no configuration file never parses TOML
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - exercised on Python 3.10 only
        import tomli as tomllib

    name = display_path(path)
    text = read_text(path, name, MAX_SETTINGS_BYTES)
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{name} is not valid TOML ({exc})") from None
    except RecursionError:
        raise UsageError(f"{name} is nested too deeply to be a configuration") from None
    except ValueError as exc:  # e.g. an integer literal of more digits than Python converts
        raise UsageError(f"{name} is not valid TOML ({exc})") from None


def find_config(start: Path) -> Path | None:
    """The nearest trusted configuration file from `start` up (see `discover_config`)."""
    return discover_config(start)[0]


def discover_config(start: Path) -> tuple[Path | None, tuple[str, ...]]:
    """The nearest `aotipre.toml`, or `pyproject.toml` with `[tool.aotipre]`, from `start` up,
    and a note for each file passed over as untrusted.

    In one folder `aotipre.toml` wins. The search stops at a repository root (`.git`), at
    `$HOME`, and before crossing into another filesystem. Like git's `safe.directory`, a file
    is used only when it is owned by this user (or root), and neither it nor its folder is
    writable by group or others: a file another user planted in a shared folder such as /tmp
    (`ignore = ["AOT"]`) must not decide the gate.
    """
    start = Path(os.path.abspath(start))
    ignored: list[str] = []
    home = _home()
    try:
        device = start.stat().st_dev
    except OSError:
        return None, ()
    for folder in (start, *start.parents):
        try:
            folder_st = folder.stat()
        except OSError:
            break
        if folder_st.st_dev != device:
            break
        for name in (CONFIG_FILE, PYPROJECT):
            candidate = folder / name
            why = _untrusted(candidate, folder_st)
            if why == "absent":
                continue
            if why is not None:
                ignored.append(f"ignored {display_path(candidate)}: {why}")
                continue
            if name == CONFIG_FILE:
                return candidate, tuple(ignored)
            tool = read_toml(candidate).get("tool", {})
            if isinstance(tool, dict) and "aotipre" in tool:
                return candidate, tuple(ignored)
        if safeio.exists(folder / ".git") or (home is not None and folder == home):
            break
    return None, tuple(ignored)


def _home() -> Path | None:
    home = os.environ.get("HOME")
    return Path(os.path.abspath(home)) if home else None


def _untrusted(path: Path, folder_st: os.stat_result) -> str | None:
    """Why `path` must not be used as a configuration ("absent" when there is no such file)."""
    try:
        st = path.lstat()
    except OSError:
        return "absent"
    if stat.S_ISLNK(st.st_mode):
        try:
            st = path.stat()
        except OSError:
            return "a broken symbolic link"
    if not stat.S_ISREG(st.st_mode):
        return "not a regular file"
    me = os.geteuid()
    if st.st_uid not in (me, 0):
        return f"owned by another user (uid {st.st_uid})"
    if folder_st.st_uid not in (me, 0) or folder_st.st_mode & 0o022:
        return "its folder is writable by other users"
    if st.st_mode & 0o022:
        return "writable by other users"
    return None


def load_config(
    path: str | os.PathLike[str] | None = None,
    *,
    start: str | os.PathLike[str] | None = None,
    isolated: bool = False,
) -> Settings:
    """Settings from `path`, or from the file `find_config` finds from `start` (default: the
    working directory); built-in defaults when there is none or `isolated`."""
    if isolated:
        return Settings()
    ignored: tuple[str, ...] = ()
    if path is not None:
        found = Path(path)
    else:
        found_or_none, ignored = discover_config(Path(start) if start is not None else Path.cwd())
        if found_or_none is None:
            return Settings(ignored=ignored)
        found = found_or_none
    data = read_toml(found)
    if found.name == PYPROJECT:
        tool = data.get("tool", {})
        if not isinstance(tool, dict):
            raise UsageError(f"{display_path(found)}: tool = {_show(tool)}: expected a table")
        table = tool.get("aotipre", {})
        where = f"{display_path(found)} [tool.aotipre]"
    else:
        table = data
        where = display_path(found)
    if not isinstance(table, dict):
        raise UsageError(f"{where}: expected a table, found {_show(table)}")
    base = found.resolve().parent
    values = parse_values(table, where, base, extra=(INPUTS_TABLE,))
    values["inputs"] = _inputs_table(table.get(INPUTS_TABLE, {}), f"{where} {INPUTS_TABLE}", base)
    _check_target_names(values, where)
    return Settings(**values, source=display_path(found), ignored=ignored)


def _check_target_names(values: Mapping[str, Any], where: str) -> None:
    """A `target` naming targets must name ones of this file's `[targets]` table."""
    from aotipre.environment.host import is_target_name

    text = values.get("target")
    named = dict(values.get("targets", ()))
    for item in (i.strip() for i in (text or "").split(";")):
        if item and is_target_name(item) and item not in named:
            raise UsageError(
                f'{where}: target = "{text}": --target {item!r} is neither a target spec nor a '
                f"name in the targets table ({', '.join(named) or 'none'})"
            )


def _inputs_table(table: Any, where: str, base: Path) -> tuple[tuple[str, str], ...]:
    if not isinstance(table, dict):
        raise UsageError(
            f"{where}: expected a table of package path (or glob) = inputs file",
            hint='e.g. [tool.aotipre.inputs] "models/classifier.pt2" = "models/sample.pt"',
        )
    out = []
    for pattern, inputs in table.items():
        if not isinstance(inputs, str) or not inputs:
            raise UsageError(f'{where}: "{pattern}" = {_show(inputs)}: expected a file name')
        absolute = Path(os.path.abspath(base / pattern)).as_posix()
        out.append((absolute, _path(inputs, base)))
    return tuple(out)


def display_path(path: str | os.PathLike[str]) -> str:
    """A path as reports show it: relative to the working directory when under it."""
    absolute = os.path.abspath(path)
    rel = os.path.relpath(absolute)
    return rel if not rel.startswith("..") else PurePath(absolute).as_posix()
