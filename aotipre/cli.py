"""The typer app: parse options, call the library, render, return an exit code. Nothing else."""

from __future__ import annotations

import sys
import traceback
from enum import Enum
from pathlib import Path

import typer

from aotipre import __version__, api, codes
from aotipre.errors import AotipreError
from aotipre.findings import ExitCode, Severity
from aotipre.report import json_format, render_report, table

app = typer.Typer(
    add_completion=True,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="Deployment preflight checks for PyTorch AOTInductor (.pt2) packages.",
)


class Format(str, Enum):
    table = "table"
    json = "json"


class FailOn(str, Enum):
    error = "error"
    warning = "warning"


@app.command()
def check(
    package: Path = typer.Argument(..., help="The .pt2 package to check."),
    inputs: Path | None = typer.Option(
        None,
        "--inputs",
        "-i",
        help="Sample inputs: a torch.save of a tensor, args, kwargs or "
        "(args, kwargs). Loaded weights-only; never executes code.",
    ),
    model: str | None = typer.Option(None, "--model", "-m", help="Model name in the package."),
    target: str | None = typer.Option(
        None,
        "--target",
        help="Deployment host, e.g. 'cuda,cc=9.0' or 'cpu,isa=avx2'. Default: this machine.",
    ),
    static_only: bool = typer.Option(
        False, "--static-only", help="Only read and check; compile, load and run nothing."
    ),
    fmt: Format = typer.Option(Format.table, "--format", "-f", help="Output format."),
    output: Path | None = typer.Option(
        None, "--output", "-o", help="Write the report to this file instead of stdout."
    ),
    fail_on: FailOn = typer.Option(
        FailOn.error, "--fail-on", help="Lowest severity that fails the gate (exit 1)."
    ),
) -> None:
    """Check a package (and sample inputs) before deployment."""
    options = api.CheckOptions(
        inputs=str(inputs) if inputs is not None else None,
        model=model,
        target=target,
        static_only=static_only,
        fail_on=Severity(fail_on.value),
    )
    report = api.check(package, options)
    if report.error is None or fmt is not Format.table or output is not None:
        _emit(render_report(report, fmt.value), output)
    if report.error is not None:
        _say_error(report.error)
    raise typer.Exit(int(report.exit_code))


@app.command()
def inspect(
    package: Path = typer.Argument(..., help="The .pt2 package to inspect."),
    fmt: Format = typer.Option(Format.table, "--format", "-f", help="Output format."),
) -> None:
    """Describe a package: models, devices, input contracts, dynamic dims. Loads no code."""
    info = api.inspect(package)
    text = json_format.render_package(info) if fmt is Format.json else table.render_package(info)
    _emit(text, None)


@app.command("codes")
def list_codes(
    fmt: Format = typer.Option(Format.table, "--format", "-f", help="Output format."),
) -> None:
    """List every finding code with its severity, category and summary."""
    rows = [
        [c.code, c.name, c.severity.value, c.category.value, c.summary] for c in codes.ALL_CODES
    ]
    if fmt is Format.json:
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
def version() -> None:
    """Print aotipre's version."""
    _emit(f"aotipre {__version__}\n", None)


def _emit(text: str, output: Path | None) -> None:
    if output is None:
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    try:
        output.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise AotipreError(f"cannot write {output}: {exc.strerror}") from None


def _say_error(message: str) -> None:
    sys.stderr.write(f"aotipre: error: {message}\n")


def main(argv: list[str] | None = None) -> int:
    """Console-script entry point: returns the exit code, never a traceback for user errors."""
    try:
        result = app(args=argv, prog_name="aotipre", standalone_mode=False)
    except typer.Exit as exc:
        return int(exc.exit_code)
    except AotipreError as exc:
        _say_error(str(exc))
        return int(ExitCode.CANNOT_CHECK)
    except KeyboardInterrupt:
        sys.stderr.write("aotipre: interrupted\n")
        return 130
    except Exception as exc:  # noqa: BLE001 - the one place that turns bugs into exit 3
        if type(exc).__name__ == "Abort":
            sys.stderr.write("aotipre: interrupted\n")
            return 130
        if hasattr(exc, "show") and hasattr(exc, "exit_code"):  # click usage errors
            exc.show()
            return int(ExitCode.CANNOT_CHECK)
        sys.stderr.write(
            "aotipre: internal error (a bug in aotipre; please report it with this traceback)\n"
        )
        traceback.print_exc()
        return int(ExitCode.INTERNAL)
    return int(result) if isinstance(result, int) else 0


if __name__ == "__main__":
    sys.exit(main())
