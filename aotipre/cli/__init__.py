"""The `aotipre` entry point: `main(argv) -> int` runs one command and turns every outcome into a
documented exit code, never a traceback for a user error.

Why a package: the command line is the top layer and nothing else: this module (the entry point, and
the static fast lane that answers `inspect` and `check --static-only` without importing typer),
app.py (the typer app: every command and option) and commands.py (each command's body: settings and
options -> the library -> a renderer -> an exit code). Nothing else in aotipre imports them; they
call the library (aotipre.api, aotipre.fleet.batch) and the renderers (aotipre.report).

Commands go to the typer app (aotipre/cli/app.py), except the hot static ones (`inspect`, `check
--static-only`, `diff`, `explain`, `version`) written in the plain form their options allow: those
take a fast lane straight to aotipre/cli/commands.py. Typer builds a pydantic validator for every
option of every command before it runs one, which costs more start-up than the static check
itself; the lane knows only the options listed below and hands anything else (help, another
option, an unusual spelling) to typer, which runs the same command function.
"""

from __future__ import annotations

import contextlib
import io
import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from aotipre.findings import ExitCode
from aotipre.foundation import safeio
from aotipre.foundation.errors import AotipreError

_VALUE_OPTIONS = {
    "inspect": {"--format": "format", "-f": "format", "--target": "target", "--config": "config"},
    "explain": {"--format": "format", "-f": "format"},
    "diff": {
        "--fail-on": "fail-on",
        "--format": "format",
        "-f": "format",
        "--output": "output",
        "-o": "output",
        "--report": "report",
        "--serving-config": "serving-config",
    },
    "check": {
        "--inputs": "inputs",
        "-i": "inputs",
        "--model": "model",
        "-m": "model",
        "--target": "target",
        "--format": "format",
        "-f": "format",
        "--output": "output",
        "-o": "output",
        "--report": "report",
        "--fail-on": "fail-on",
        "--select": "select",
        "--ignore": "ignore",
        "--baseline": "baseline",
        "--write-baseline": "write-baseline",
        "--config": "config",
        "--serving-config": "serving-config",
    },
}
"""Options with a value that the fast lane reads, per command (spelling -> key)."""
_FLAGS = {
    "check": {
        "--static-only": "static-only",
        "--no-config": "no-config",
        "--compile-at-deploy": "compile-at-deploy",
        "--progress": "progress",
        "--no-progress": "no-progress",
    },
    "inspect": {"--no-config": "no-config"},
}
"""Options without a value that the fast lane reads."""
_REPEATABLE = {"report", "select", "ignore"}


def main(argv: list[str] | None = None, *, fast_lane: bool = True) -> int:
    """Console-script entry point: the exit code of one command (0 pass, 1 gate failed, 2 cannot
    check, 3 internal error, 130 interrupted, 128+N terminated by signal N: SIGTERM, SIGHUP,
    SIGQUIT)."""
    global _first_signal
    _first_signal = None
    safeio.ensure_std_fds()  # a closed stdout/stderr must not become the next file opened
    if threading.current_thread() is threading.main_thread():
        for signum in (signal.SIGINT, *_TERMINATING):
            signal.signal(signum, _on_signal)
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        command = _fast_lane(args) if fast_lane else None
        if command is not None:
            return command()
        with _early_worker(args):
            return _run_app(args)
    except AotipreError as exc:
        from aotipre.cli.commands import say_error

        say_error(str(exc))
        return int(ExitCode.CANNOT_CHECK)
    except KeyboardInterrupt:
        return _interrupted()
    except BrokenPipeError:  # e.g. `aotipre --help | head -1`: the reader went away
        safeio.write_stdout("")
        return 0
    except Exception as exc:  # noqa: BLE001 - the one place that turns bugs into exit 3
        if type(exc).__name__ == "Abort":
            return _interrupted()
        if hasattr(exc, "format_message") and hasattr(exc, "exit_code"):  # click usage errors
            return _usage_error(exc)
        import traceback  # imported here: only a bug needs it

        safeio.write_stderr(
            "aotipre: internal error (a bug in aotipre; please report it with this traceback)\n"
            + traceback.format_exc()
        )
        return int(ExitCode.INTERNAL)


_NO_EARLY_WORKER = {"--static-only", "--manifest", "--python", "--engine", "--help", "-h"}
"""`check` options under which its first worker would not be the one started here."""


def _early_worker(args: list[str]) -> contextlib.AbstractContextManager[None]:
    """`check` with workers in this Python: its first worker starts before the options are even
    read, and imports torch while typer, the package's reading and the static checks run
    (runner/prewarm.py first_worker). The first job takes it only if that job's argv and
    environment are its own (a config or flag that sets the workers' environment: they are
    not, and it is stopped)."""
    if not args or args[0] != "check" or _NO_EARLY_WORKER & set(args):
        return contextlib.nullcontext()
    from aotipre.runner import launch, prewarm

    return prewarm.first_worker(
        lambda path: launch.worker_argv(sys.executable, None, path), launch.job_env(), enabled=True
    )


def _usage_error(exc: Exception) -> int:
    """A click usage error (bad option type, bad choice, unknown option, missing argument) as
    one line, like every other error, instead of click's usage block."""
    from aotipre.cli.commands import say_error

    message = " ".join(str(exc.format_message()).split())  # type: ignore[attr-defined]
    if not message:  # `aotipre` alone: click printed the help, there is nothing more to say
        return int(ExitCode.CANNOT_CHECK)
    context = getattr(exc, "ctx", None)
    command = getattr(context, "command_path", "") or "aotipre"
    say_error(f"{message} (see '{command} --help')")
    code = int(getattr(exc, "exit_code", 2))
    return code if code in (0, 2) else int(ExitCode.CANNOT_CHECK)


def _run_app(args: list[str]) -> int:
    import typer

    from aotipre.cli.app import app

    command = typer.main.get_command(app)
    _plain_help_option(command)
    # help goes to stdout through click and rich, which turn a reader that went away into exit
    # 1 and a full disk into a traceback: off a terminal it is written through safeio instead,
    # which never changes the exit code
    helped = (not args or "--help" in args or "-h" in args) and not safeio.is_terminal(1)
    captured = io.StringIO()
    try:
        with contextlib.redirect_stdout(captured) if helped else contextlib.nullcontext():
            result = command.main(args=args, prog_name="aotipre", standalone_mode=False)
    except typer.Exit as exc:
        result = int(exc.exit_code)
    finally:
        if helped:
            safeio.write_stdout(captured.getvalue())
    if result == 130:  # typer turns a Ctrl-C into a silent 130 (no command returns 130 itself)
        return _interrupted()
    return int(result) if isinstance(result, int) else 0


def _plain_help_option(command: Any) -> None:
    """Show typer's own flags (`--help`, `--install-completion`) without a `<bool>` type, and
    arguments by their metavar alone, in every command's help (aotipre's flags have an empty
    metavar in app.py)."""
    from typer._click import Context

    options = [command.get_help_option(Context(command, info_name=command.name))]
    for option in [*options, *command.params]:
        if option is not None and getattr(option, "is_flag", False):
            option.metavar = ""
        elif getattr(option, "param_type_name", "") == "argument" and option.metavar:
            # an argument's metavar (PACKAGE...) says it all; typer would add <list[Path]>
            option.display_type_rich = lambda ctx: None
    for sub in getattr(command, "commands", {}).values():
        _plain_help_option(sub)


def _fast_lane(args: list[str]) -> Callable[[], int] | None:
    """The command function for `args` when the fast lane knows every word of them, else None."""
    if args in (["version"], ["--version"]):
        from aotipre.cli import commands

        return commands.version
    if not args or args[0] not in _VALUE_OPTIONS:
        return None
    name = args[0]
    parsed = _read_options(args[1:], _VALUE_OPTIONS[name], _FLAGS.get(name, {}))
    if parsed is None:
        return None
    values, positional = parsed
    from aotipre.cli import commands

    if name == "explain":
        fmt = values.get("format", "table")
        if len(positional) != 1 or fmt not in commands.INFO_FORMATS:
            return None
        return lambda: commands.explain(positional[0], fmt)
    if name == "diff":
        fmt = values.get("format", "table")
        fail_on = values.get("fail-on", "breaking")
        if len(positional) != 2 or fmt not in commands.CHECK_FORMATS:
            return None
        if fail_on not in ("breaking", "any"):
            return None
        old, new = (Path(p) for p in positional)
        output = Path(values["output"]) if "output" in values else None
        serving = values.get("serving-config")
        return lambda: commands.diff(
            old,
            new,
            fail_on=fail_on,
            fmt=fmt,
            output=output,
            reports_to=values.get("report", []),
            serving_config=Path(serving) if serving is not None else None,
        )
    if name == "inspect":
        fmt = values.get("format", "table")
        if len(positional) != 1 or fmt not in commands.INFO_FORMATS:
            return None
        config = Path(values["config"]) if "config" in values else None
        return lambda: commands.inspect(
            Path(positional[0]),
            fmt,
            values.get("target"),
            config,
            bool(values.get("no-config")),
        )
    fmt = values.get("format", "table")
    if (
        not values.get("static-only")
        or not positional
        or fmt not in commands.CHECK_FORMATS
        or values.get("fail-on", "error") not in ("error", "warning")
        or ("progress" in values and "no-progress" in values)  # typer: the last one wins
    ):
        return None

    def path(key: str) -> Path | None:
        return Path(values[key]) if key in values else None

    flags = {
        "static-only": True,
        "fail-on": values.get("fail-on"),
        "target": values.get("target"),
        "select": values.get("select"),
        "ignore": values.get("ignore"),
        "baseline": str(Path(values["baseline"])) if "baseline" in values else None,
        "compile-at-deploy": values.get("compile-at-deploy"),
        "progress": True if "progress" in values else False if "no-progress" in values else None,
    }
    return lambda: commands.check(
        [str(Path(p)) for p in positional],
        flags=flags,
        fmt=fmt,
        output=path("output"),
        reports_to=values.get("report", []),
        inputs=str(Path(values["inputs"])) if "inputs" in values else None,
        model=values.get("model"),
        config_file=path("config"),
        no_config=bool(values.get("no-config")),
        write_baseline=path("write-baseline"),
        serving_config=path("serving-config"),
    )


def _read_options(
    words: list[str], with_value: dict[str, str], flags: dict[str, str]
) -> tuple[dict, list[str]] | None:
    """Options by key (lists for repeatable ones) and positional words; None for anything the
    lane leaves to typer: an unknown option, a missing or empty value, a value that looks like an
    option, a repeated single option, `--`."""
    values: dict = {}
    positional: list[str] = []
    i = 0
    while i < len(words):
        word = words[i]
        i += 1
        if not word.startswith("-"):
            if not word:
                return None
            positional.append(word)
            continue
        if word in flags:
            if flags[word] in values:
                return None
            values[flags[word]] = True
            continue
        spelled, eq, value = word.partition("=")
        if not spelled.startswith("--"):
            spelled, eq, value = word, "", ""
        if spelled not in with_value:
            return None
        if not eq:
            if i == len(words):
                return None
            value = words[i]
            i += 1
        if not value or value.startswith("-"):
            return None
        key = with_value[spelled]
        if key in _REPEATABLE:
            values.setdefault(key, []).append(value)
        elif key in values:
            return None
        else:
            values[key] = value
    return values, positional


_TERMINATING = tuple(
    getattr(signal, name) for name in ("SIGTERM", "SIGHUP", "SIGQUIT") if hasattr(signal, name)
)
"""Signals that end aotipre the way Ctrl-C does: a closed terminal or SSH session (SIGHUP), a
CI runner's stop (SIGTERM), Ctrl-\\ (SIGQUIT)."""
_first_signal: int | None = None
"""The SIGINT or terminating signal this command is ending for; None: none came."""


def _on_signal(signum: int, frame: object) -> None:
    """The first SIGINT or terminating signal unwinds like Ctrl-C (workers stopped, temporary
    folders removed), then the command exits 130, or 128 + signum. Any later one (Ctrl-C twice,
    a SIGTERM after a SIGINT) is ignored: raised in the middle of that clean-up, it cut it short
    and left workers' folders behind, and it does not change what the first one said."""
    global _first_signal
    if _first_signal is None:
        _first_signal = signum
        raise KeyboardInterrupt


def _interrupted() -> int:
    if _first_signal is not None and _first_signal != signal.SIGINT:
        name = signal.Signals(_first_signal).name
        safeio.write_stderr(f"aotipre: terminated ({name})\n")
        return 128 + _first_signal
    safeio.write_stderr("aotipre: interrupted\n")
    return 130


if __name__ == "__main__":
    sys.exit(main())
