"""The typer app: parse options, call the library, render, return an exit code. Nothing else."""

from __future__ import annotations

import signal
import sys
import threading
import traceback
from enum import Enum
from pathlib import Path

import typer

from aotipre import __version__, api, codes, config
from aotipre.errors import AotipreError
from aotipre.findings import ExitCode
from aotipre.report import (
    json_format,
    parse_report_spec,
    render_report,
    render_reports,
    table,
)
from aotipre.report.common import worst_exit_code

app = typer.Typer(
    add_completion=True,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="Deployment preflight checks for PyTorch AOTInductor (.pt2) packages.",
)


class Format(str, Enum):
    table = "table"
    json = "json"
    junit = "junit"
    sarif = "sarif"
    github = "github"
    markdown = "markdown"


class InfoFormat(str, Enum):
    """Formats of `inspect` and `codes`."""

    table = "table"
    json = "json"


class FailOn(str, Enum):
    error = "error"
    warning = "warning"


@app.command()
def check(
    packages: list[Path] | None = typer.Argument(
        None,
        help="The .pt2 package(s) to check.",
        show_default=False,
        readable=False,  # aotipre reports an unreadable file itself (AOT001, in every format)
    ),
    inputs: Path | None = typer.Option(
        None,
        "--inputs",
        "-i",
        help="Sample inputs: a torch.save of a tensor, args, kwargs or "
        "(args, kwargs). Loaded weights-only; never executes code.",
        readable=False,  # reported as AOT020 by the reader
    ),
    model: str | None = typer.Option(None, "--model", "-m", help="Model name in the package."),
    target: str | None = typer.Option(
        None,
        "--target",
        help="Deployment host, e.g. 'cuda,cc=9.0' or 'cpu,isa=avx2'. Default: this machine.",
    ),
    static_only: bool | None = typer.Option(
        None,
        "--static-only/--no-static-only",
        help="Only read and check; compile, load and run nothing.",
        show_default=False,
    ),
    fmt: Format = typer.Option(Format.table, "--format", "-f", help="Output format."),
    output: Path | None = typer.Option(
        None, "--output", "-o", help="Write the report to this file instead of stdout."
    ),
    reports_to: list[str] | None = typer.Option(
        None,
        "--report",
        help="Also write a report as FORMAT:PATH (e.g. junit:out.xml); repeatable.",
        show_default=False,
    ),
    fail_on: FailOn | None = typer.Option(
        None, "--fail-on", help="Lowest severity that fails the gate (exit 1). (default: error)"
    ),
    select: list[str] | None = typer.Option(
        None,
        "--select",
        help="Report only codes with these prefixes (AOT3,AOT201).",
        show_default=False,
    ),
    ignore: list[str] | None = typer.Option(
        None, "--ignore", help="Never report codes with these prefixes.", show_default=False
    ),
    baseline: Path | None = typer.Option(
        None, "--baseline", help="Accept the findings listed in this baseline file."
    ),
    write_baseline: Path | None = typer.Option(
        None, "--write-baseline", help="Write every current finding to this baseline file."
    ),
    jobs: int | None = typer.Option(
        None, "--jobs", "-j", help="Packages checked in parallel. (default: 1)"
    ),
    manifest: Path | None = typer.Option(
        None, "--manifest", help="TOML file listing packages with their inputs and options."
    ),
    config_file: Path | None = typer.Option(
        None, "--config", help="Configuration file. Default: aotipre.toml or pyproject.toml."
    ),
    no_config: bool = typer.Option(False, "--no-config", help="Ignore configuration files."),
    device: str | None = typer.Option(
        None, "--device", help="cpu, cuda or cuda:N for the runs. Default: the package's device."
    ),
    recompile: bool | None = typer.Option(
        None,
        "--recompile/--no-recompile",
        help="Compile the ExportedProgram even if AOTI code is packaged.",
        show_default=False,
    ),
    timeout: float | None = typer.Option(
        None, "--timeout", help="Seconds allowed for each load, run and probe step. (default: 300)"
    ),
    compile_timeout: float | None = typer.Option(
        None, "--compile-timeout", help="Seconds allowed for a compile. (default: 1800)"
    ),
    rtol: float | None = typer.Option(None, "--rtol", help="Relative tolerance vs eager."),
    atol: float | None = typer.Option(None, "--atol", help="Absolute tolerance vs eager."),
    probe: bool | None = typer.Option(
        None,
        "--probe/--no-probe",
        help="Run each dynamic dim at its min, max and max+1. (default: probe)",
        show_default=False,
    ),
    probe_budget: int | None = typer.Option(
        None, "--probe-budget", help="Most elements an input may have in a probe run."
    ),
    seed: int | None = typer.Option(None, "--seed", help="Seed of synthesized and probe inputs."),
    cache: bool | None = typer.Option(
        None,
        "--cache/--no-cache",
        help="Use the compile cache (see --cache-dir). (default: cache)",
        show_default=False,
    ),
    cache_dir: Path | None = typer.Option(
        None,
        "--cache-dir",
        help="Compile cache. Default: ${XDG_CACHE_HOME:-~/.cache}/aotipre/compile.",
    ),
    escalate: bool | None = typer.Option(
        None,
        "--escalate/--no-escalate",
        help="After a crash inside the model, run the triage ladder to name the faulting "
        "kernel. (default: escalate)",
        show_default=False,
    ),
    minify: bool | None = typer.Option(
        None,
        "--minify/--no-minify",
        help="Crash triage: also run the AOTI minifier for a minimal repro.py (slow).",
        show_default=False,
    ),
    sanitizer: bool | None = typer.Option(
        None,
        "--sanitizer/--no-sanitizer",
        help="Crash triage: also run compute-sanitizer memcheck when installed (CUDA, slow).",
        show_default=False,
    ),
    artifacts: Path | None = typer.Option(
        None,
        "--artifacts",
        help="Crash triage: write a repro bundle (package, inputs, environment, commands, "
        "logs) into this folder.",
    ),
    exported_program: Path | None = typer.Option(
        None,
        "--exported-program",
        help="Crash triage: the ExportedProgram (.pt2) of an AOTI-only package, to recompile "
        "it with the debug printer.",
    ),
) -> None:
    """Check packages (and sample inputs) before deployment. Flags override the config file."""
    specs = [parse_report_spec(spec) for spec in reports_to or []]
    settings = config.load_config(config_file, isolated=no_config)
    flags = config.parse_flags(
        {
            "fail-on": fail_on.value if fail_on is not None else None,
            "target": target,
            "static-only": static_only,
            "select": select,
            "ignore": ignore,
            "device": device,
            "recompile": recompile,
            "timeout": timeout,
            "compile-timeout": compile_timeout,
            "rtol": rtol,
            "atol": atol,
            "probe": probe,
            "probe-budget": probe_budget,
            "seed": seed,
            "cache": cache,
            "cache-dir": None if cache_dir is None else str(cache_dir),
            "baseline": None if baseline is None else str(baseline),
            "jobs": jobs,
            "escalate": escalate,
            "minify": minify,
            "sanitizer": sanitizer,
            "artifacts": None if artifacts is None else str(artifacts),
            "exported-program": None if exported_program is None else str(exported_program),
        }
    )
    show_progress = fmt is Format.table and output is None and sys.stderr.isatty()
    from aotipre import batch  # imported here: only `check` runs packages (start-up time)

    reports = batch.check_packages(
        [str(p) for p in packages or []],
        settings,
        manifest=batch.load_manifest(manifest) if manifest is not None else None,
        flags=flags,
        inputs=str(inputs) if inputs is not None else None,
        model=model,
        write_baseline_to=str(write_baseline) if write_baseline is not None else None,
        progress=_progress if show_progress else None,
    )
    single = manifest is None and len(reports) == 1

    def render(name: str) -> str:
        return render_report(reports[0], name) if single else render_reports(reports, name)

    if not single or reports[0].error is None or fmt is not Format.table or output is not None:
        _emit(render(fmt.value), output)
    for name, path in specs:
        _emit(render(name), Path(path))
    if fmt is Format.github or any(name == "github" for name, _ in specs):
        from aotipre.report import github

        github.append_step_summary(reports)
    for report in reports:
        if report.error is not None:
            named = single or report.error.startswith(report.package_path)
            _say_error(report.error if named else f"{report.package_path}: {report.error}")
    raise typer.Exit(int(worst_exit_code(reports)))


@app.command()
def inspect(
    package: Path = typer.Argument(..., help="The .pt2 package to inspect.", readable=False),
    fmt: InfoFormat = typer.Option(InfoFormat.table, "--format", "-f", help="Output format."),
) -> None:
    """Describe a package: models, devices, input contracts, dynamic dims. Loads no code."""
    info = api.inspect(package)
    text = (
        json_format.render_package(info) if fmt is InfoFormat.json else table.render_package(info)
    )
    _emit(text, None)


@app.command("codes")
def list_codes(
    fmt: InfoFormat = typer.Option(InfoFormat.table, "--format", "-f", help="Output format."),
) -> None:
    """List every finding code with its severity, category and summary."""
    rows = [
        [c.code, c.name, c.severity.value, c.category.value, c.summary] for c in codes.ALL_CODES
    ]
    if fmt is InfoFormat.json:
        keys = ["code", "name", "severity", "category", "summary"]
        _emit(json_format.dumps([dict(zip(keys, r)) for r in rows]), None)
    else:
        from tabulate import tabulate

        _emit(
            tabulate(
                rows,
                headers=["code", "name", "severity", "category", "summary"],
                maxcolwidths=[None, None, None, None, 60],
            )
            + "\n",
            None,
        )


@app.command()
def doctor(
    devices: list[str] | None = typer.Option(
        None,
        "--device",
        help="cpu, cuda or cuda:N to prove with the canary; repeatable. "
        "Default: cpu, plus cuda when torch can use it.",
        show_default=False,
    ),
    fmt: InfoFormat = typer.Option(InfoFormat.table, "--format", "-f", help="Output format."),
    reports_to: list[str] | None = typer.Option(
        None,
        "--report",
        help="Also write the report as FORMAT:PATH (table or json); repeatable.",
        show_default=False,
    ),
    timeout: float = typer.Option(300.0, "--timeout", help="Seconds for each load and run step."),
    cache_dir: Path | None = typer.Option(
        None,
        "--cache-dir",
        help="Compile cache (the canary compiles once per host and torch version). "
        "Default: ${XDG_CACHE_HOME:-~/.cache}/aotipre/compile.",
    ),
    progress: bool | None = typer.Option(
        None,
        "--progress/--no-progress",
        help="Say what is running on stderr. (default: when stderr is a terminal)",
        show_default=False,
    ),
) -> None:
    """Check this host can compile, load and run AOTI packages: facts plus a canary model."""
    from aotipre.doctor import DoctorOptions, run_doctor
    from aotipre.doctor.render import render as render_doctor
    from aotipre.runner.stages import DynamicOptions

    specs = [_doctor_report_spec(spec) for spec in reports_to or []]
    show = sys.stderr.isatty() if progress is None else progress
    dynamic = DynamicOptions(
        timeout_s=timeout, cache_dir=str(cache_dir) if cache_dir is not None else None
    )
    result = run_doctor(
        DoctorOptions(
            devices=tuple(devices or ()), dynamic=dynamic, progress=_progress if show else None
        )
    )
    _emit(render_doctor(result, fmt.value), None)
    for name, path in specs:
        _emit(render_doctor(result, name), Path(path))
    if result.error is not None:
        _say_error(result.error)
    raise typer.Exit(int(result.exit_code))


def _doctor_report_spec(spec: str) -> tuple[str, str]:
    name, sep, path = spec.partition(":")
    if not sep or not path or name not in ("table", "json"):
        raise AotipreError(f"--report {spec!r}: use FORMAT:PATH with FORMAT table or json")
    return name, path


@app.command()
def version() -> None:
    """Print aotipre's version."""
    _emit(f"aotipre {__version__}\n", None)


def _emit(text: str, output: Path | None) -> None:
    if output is None:
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    try:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise AotipreError(f"cannot write {output}: {exc.strerror}") from None


def _progress(message: str) -> None:
    sys.stderr.write(f"aotipre: {message}\n")
    sys.stderr.flush()


def _say_error(message: str) -> None:
    sys.stderr.write(f"aotipre: error: {message}\n")


def main(argv: list[str] | None = None) -> int:
    """Console-script entry point: returns the exit code, never a traceback for user errors."""
    global _terminated
    _terminated = False
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        result = app(args=argv, prog_name="aotipre", standalone_mode=False)
    except typer.Exit as exc:
        return int(exc.exit_code)
    except AotipreError as exc:
        _say_error(str(exc))
        return int(ExitCode.CANNOT_CHECK)
    except KeyboardInterrupt:
        return _interrupted()
    except Exception as exc:  # noqa: BLE001 - the one place that turns bugs into exit 3
        if type(exc).__name__ == "Abort":
            return _interrupted()
        if hasattr(exc, "show") and hasattr(exc, "exit_code"):  # click usage errors
            exc.show()
            return int(ExitCode.CANNOT_CHECK)
        sys.stderr.write(
            "aotipre: internal error (a bug in aotipre; please report it with this traceback)\n"
        )
        traceback.print_exc()
        return int(ExitCode.INTERNAL)
    if result == 130:  # typer turns a Ctrl-C into a silent 130 (no command returns 130 itself)
        return _interrupted()
    return int(result) if isinstance(result, int) else 0


_terminated = False


def _on_sigterm(signum: int, frame: object) -> None:
    """SIGTERM unwinds like Ctrl-C (workers killed, temp dirs removed), then exits 143."""
    global _terminated
    _terminated = True
    raise KeyboardInterrupt


def _interrupted() -> int:
    if _terminated:
        sys.stderr.write("aotipre: terminated\n")
        return 143
    sys.stderr.write("aotipre: interrupted\n")
    return 130


if __name__ == "__main__":
    sys.exit(main())
