"""Settings: defaults, then `[tool.aotipre]` (pyproject.toml) or `aotipre.toml`, then the flags."""

from __future__ import annotations

import dataclasses
import difflib
import os
import re
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path, PurePath
from typing import TYPE_CHECKING, Any

from aotipre import codes
from aotipre.errors import UsageError
from aotipre.findings import Severity

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

if TYPE_CHECKING:
    from aotipre.api import CheckOptions
    from aotipre.baseline import Baseline

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
    seed: int = 0
    cache: bool = True
    cache_dir: str | None = None
    baseline: str | None = None
    jobs: int = 1
    escalate: bool = True
    """Crash triage after a run that crashed inside the model (aotipre.triage)."""
    minify: bool = False
    sanitizer: bool = False
    artifacts: str | None = None
    exported_program: str | None = None
    compile_at_deploy: bool = False
    """The deployment compiles ExportedProgram-only archives at deploy time (no AOT015)."""
    imports: tuple[str, ...] = ()
    """Modules imported in every worker before anything is loaded (custom operators)."""
    libraries: tuple[str, ...] = ()
    """Shared libraries loaded in every worker (torch.ops.load_library) and the C++ harness."""
    cpp: bool = False
    """The package is deployed with the C++ loader (AOTIModelPackageLoader)."""
    inputs: tuple[tuple[str, str], ...] = ()
    """Per-package sample inputs: (absolute package path or glob, inputs file); first match wins."""
    source: str | None = None
    """The configuration file these settings came from (None: built-in defaults only)."""

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
            if not os.path.isfile(lib):
                raise UsageError(f"library {display_path(lib)}: no such file")
        here = (os.getcwd(),) + ((os.path.dirname(self.source),) if self.source else ())
        registration = Registration(self.imports, self.libraries, import_path=here)
        dynamic = None
        if not self.static_only:
            from aotipre.runner.stages import DynamicOptions

            dynamic = DynamicOptions(
                device=self.device,
                recompile=self.recompile,
                timeout_s=self.timeout,
                compile_timeout_s=self.compile_timeout,
                rtol=self.rtol,
                atol=self.atol,
                probe=self.probe,
                probe_budget=self.probe_budget,
                seed=self.seed,
                cache_dir=self.cache_dir,
                use_cache=self.cache,
                extra_env=registration.env(),
                cpp=self.cpp,
            )
        triage = None
        if not self.static_only:
            from aotipre.triage.escalate import TriageOptions

            triage = TriageOptions(
                escalate=self.escalate,
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
        )


# --------------------------------------------------------------------------------------------
# The keys, as data: name in the file (= the flag without `--`), field, parser, scope


Parser = Callable[[Any, Path], Any]
"""(raw value, folder that relative paths are relative to) -> value; ValueError says why not."""


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


def _number(minimum: float, *, inclusive: bool) -> Parser:
    def parse(value: Any, base: Path) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError("expected a number")
        if value < minimum or (not inclusive and value == minimum):
            raise ValueError(f"must be {'>=' if inclusive else '>'} {minimum:g}")
        return float(value)

    return parse


def _integer(minimum: int | None) -> Parser:
    def parse(value: Any, base: Path) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError("expected an integer")
        if minimum is not None and value < minimum:
            raise ValueError(f"must be >= {minimum}")
        return value

    return parse


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
    from aotipre.host import is_target_name, parse_targets

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


KEYS: tuple[Key, ...] = (
    Key("fail-on", "fail_on", _fail_on, "lowest severity that fails the gate: error, warning"),
    Key("target", "target", _target, "deployment host, e.g. 'cuda,cc=9.0' or 'cpu,isa=avx2'"),
    Key("targets", "targets", _targets, "named deployment targets: a table of name = spec"),
    Key("static-only", "static_only", _bool, "only read and check; compile, load and run nothing"),
    Key("select", "select", _codes, 'report only codes with these prefixes, e.g. ["AOT2"]'),
    Key("ignore", "ignore", _codes, "never report codes with these prefixes"),
    Key("device", "device", _device, "device of the runs: cpu, cuda or cuda:N"),
    Key("recompile", "recompile", _bool, "compile the ExportedProgram even if AOTI code exists"),
    Key("timeout", "timeout", _number(0, inclusive=False), "seconds for each load, run, probe"),
    Key("compile-timeout", "compile_timeout", _number(0, inclusive=False), "seconds for a compile"),
    Key("rtol", "rtol", _number(0, inclusive=True), "relative tolerance against eager"),
    Key("atol", "atol", _number(0, inclusive=True), "absolute tolerance against eager"),
    Key("probe", "probe", _bool, "run each dynamic dim at its min, max and max+1"),
    Key("probe-budget", "probe_budget", _integer(1), "most elements of an input in a probe run"),
    Key("seed", "seed", _integer(None), "seed of synthesized and probe inputs"),
    Key("cache", "cache", _bool, "use the compile cache"),
    Key("cache-dir", "cache_dir", _path, "compile cache folder"),
    Key("baseline", "baseline", _path, "baseline file of accepted findings", per_package=False),
    Key("jobs", "jobs", _integer(1), "packages checked in parallel", per_package=False),
    Key("escalate", "escalate", _bool, "run crash triage after a run crashes in the model"),
    Key("minify", "minify", _bool, "crash triage: run the AOTI minifier (slow)"),
    Key("sanitizer", "sanitizer", _bool, "crash triage: run compute-sanitizer (CUDA, slow)"),
    Key("artifacts", "artifacts", _path, "crash triage: write a repro bundle into this folder"),
    Key(
        "exported-program",
        "exported_program",
        _path,
        "crash triage: the ExportedProgram (.pt2) of an AOTI-only package",
    ),
    Key(
        "compile-at-deploy",
        "compile_at_deploy",
        _bool,
        "the deployment compiles ExportedProgram-only archives at deploy time",
    ),
    Key("import", "imports", _modules, "modules imported in every worker (custom operators)"),
    Key("library", "libraries", _libraries, "op libraries loaded in every worker and in C++"),
    Key(
        "cpp", "cpp", _bool, "the package is deployed with the C++ loader (AOTIModelPackageLoader)"
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
    close = difflib.get_close_matches(name.replace("_", "-"), known, n=1)
    guess = f" (did you mean {close[0]!r}?)" if close else ""
    return UsageError(
        f"{where}: unknown key {name!r}{guess}", hint=f"known keys: {', '.join(sorted(known))}"
    )


def _show(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_show(v) for v in value) + "]"
    return str(value)


# --------------------------------------------------------------------------------------------
# Files


def read_toml(path: Path) -> dict[str, Any]:
    """Parse a TOML file; UsageError with the file and the parser's message otherwise."""
    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except FileNotFoundError:
        raise UsageError(f"{display_path(path)} does not exist") from None
    except OSError as exc:
        raise UsageError(f"cannot read {display_path(path)}: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{display_path(path)} is not valid TOML ({exc})") from None


def find_config(start: Path) -> Path | None:
    """The nearest `aotipre.toml`, or `pyproject.toml` with `[tool.aotipre]`, from `start` up.

    In one folder `aotipre.toml` wins; the search stops at the first folder holding either
    (or at a repository root, `.git`).
    """
    for folder in (start, *start.parents):
        candidate = folder / CONFIG_FILE
        if candidate.is_file():
            return candidate
        pyproject = folder / PYPROJECT
        if pyproject.is_file() and "aotipre" in read_toml(pyproject).get("tool", {}):
            return pyproject
        if (folder / ".git").exists():
            return None
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
    if path is not None:
        found = Path(path)
    else:
        found_or_none = find_config(Path(start) if start is not None else Path.cwd())
        if found_or_none is None:
            return Settings()
        found = found_or_none
    data = read_toml(found)
    if found.name == PYPROJECT:
        table = data.get("tool", {}).get("aotipre", {})
        where = f"{display_path(found)} [tool.aotipre]"
    else:
        table = data
        where = display_path(found)
    if not isinstance(table, dict):
        raise UsageError(f"{where} is not a table")
    base = found.resolve().parent
    values = parse_values(table, where, base, extra=(INPUTS_TABLE,))
    values["inputs"] = _inputs_table(table.get(INPUTS_TABLE, {}), f"{where} {INPUTS_TABLE}", base)
    _check_target_names(values, where)
    return Settings(**values, source=display_path(found))


def _check_target_names(values: Mapping[str, Any], where: str) -> None:
    """A `target` naming targets must name ones of this file's `[targets]` table."""
    from aotipre.host import is_target_name

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
