"""What each CLI command does once its options are parsed: call the library, render, return the
exit code. Shared by the typer app (aotipre/cli/app.py) and the static fast lane (aotipre/cli/__init__.py), so
neither holds behaviour of its own; nothing here imports typer.

Long because it holds one function per CLI command, each short, shared by the typer app and
the static fast lane; a module per command would repeat the shared rendering and exit-code helpers.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Mapping, Sequence
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aotipre import __version__
from aotipre.findings import codes
from aotipre.foundation import safeio, tempdirs
from aotipre.foundation.errors import AotipreError, UsageError
from aotipre.report import (
    json_format,
    parse_report_spec,
    render_package,
    render_report,
    render_reports,
)
from aotipre.report.common import worst_exit_code
from aotipre.report.sanitize import clean, encodable

if TYPE_CHECKING:  # the configuration (tomllib) is read only by the commands that take one
    from aotipre import config
    from aotipre.fleet.shard import Shard


class Format(str, Enum):
    """Formats of `check` (`--format` and `--report FORMAT:PATH`)."""

    table = "table"
    json = "json"
    junit = "junit"
    sarif = "sarif"
    github = "github"
    markdown = "markdown"
    html = "html"


class InfoFormat(str, Enum):
    """Formats of `inspect`, `codes`, `explain` and `doctor`."""

    table = "table"
    json = "json"


CHECK_FORMATS = tuple(f.value for f in Format)
INFO_FORMATS = tuple(f.value for f in InfoFormat)


def check(
    packages: Sequence[str],
    *,
    flags: Mapping[str, Any],
    fmt: str = "table",
    output: Path | None = None,
    reports_to: Sequence[str] = (),
    inputs: str | None = None,
    model: str | None = None,
    config_file: Path | None = None,
    no_config: bool = False,
    manifest: Path | None = None,
    write_baseline: Path | None = None,
    serving_config: Path | None = None,
    engine: str = "local",
    address: str | None = None,
    shard: str | None = None,
) -> int:
    """`aotipre check`. `flags`: command-line values by flag name without `--` (None or absent:
    not given); they override the config file. A Triton model folder or repository among
    `packages` (or `serving_config`) checks each package against its config.pbtxt. `engine`
    `ray` runs the packages on a Ray cluster (`address`: `auto`, HOST:PORT, or None for a
    local Ray of this run). `shard` (`I/N` or `auto`): check only that CI shard's packages
    (aotipre/fleet/shard.py), always in the report of many packages, the JSON one with the plan."""
    run_jobs = _engine(engine, address)
    sharded = _shard(shard, write_baseline)
    specs = [parse_report_spec(spec) for spec in reports_to]
    from aotipre import config

    settings = config.load_config(config_file, isolated=no_config)
    parsed = config.parse_flags(flags)
    from aotipre.fleet import batch  # imported here: only `check` runs packages (start-up time)
    from aotipre.foundation.progress import Heartbeat, stamped

    loaded = batch.load_manifest(manifest) if manifest is not None else None
    # on stderr whatever the format, terminal or --output: never mixed with a report
    once = batch.run_settings(settings, loaded, parsed)
    show_progress = _shows_progress(once, parsed, loaded, packages)
    runs_workers = _runs_workers(once, parsed, loaded, packages)
    given = list(packages)  # a model folder or repository: every file in it is an input
    serving: dict[str, Any] = {}
    if serving_config is not None or any(safeio.is_dir(p) for p in packages):
        from aotipre.serving import repository

        packages, serving = repository.plan(
            list(packages), str(serving_config) if serving_config is not None else None
        )
    outputs: list[tuple[str, Path | str | None]] = [
        ("--output", output),
        *(("--report", path) for _, path in specs),
    ]
    outputs += _step_summary(fmt, specs)
    outputs.append(("--write-baseline", write_baseline))
    baseline_in = parsed.get("baseline", settings.baseline) if write_baseline is None else None
    values = [vars(settings), parsed, *((loaded.defaults,) if loaded else ())]
    values += [e.values for e in (loaded.entries if loaded else ())]
    reads = safeio.ReadPaths().add(
        *given,
        *packages,
        serving_config,
        *(s.source for s in serving.values()),
        inputs,
        manifest,
        config_file,
        settings.source if settings.source else None,
        baseline_in,
        *(value for _, value in settings.inputs),
        *(p for e in (loaded.entries if loaded else ()) for p in (e.package, e.inputs)),
        *(p for v in values for p in _read_paths(v)),
    )
    # an unpacked image can hold a million files: what lies inside it is enough
    reads.add(*(p for v in values for p in _target_folders(v)), members=False)
    folders = [(f"--{k.replace('_', '-')}", parsed.get(k, getattr(settings, k))) for k in _FOLDERS]
    reads.refuse([*outputs, *folders])
    # a report that cannot be written is said now, not after the run it would report
    for option, path in [("--output", output), *(("--report", p) for _, p in specs)]:
        if path is not None:
            safeio.check_writable(path, make_folders=option == "--report")
    if write_baseline is not None:
        safeio.check_writable(write_baseline, make_folders=True)
    plans: list[Any] = []  # the whole run's shard plan, once batch has planned it
    select = None
    if sharded is not None:
        shard_of_run = sharded

        def keep_shard(jobs: list[Any]) -> list[Any]:
            kept, whole = batch.keep_shard(jobs, shard_of_run, loaded)
            plans.append(whole)
            return kept

        select = keep_shard

    if runs_workers:
        tempdirs.sweep()  # the folders of an aotipre that was SIGKILLed (aotipre/foundation/tempdirs.py)
    with Heartbeat(stamped(progress)) as beat:
        reports = batch.check_packages(
            list(packages),
            settings,
            manifest=loaded,
            flags=parsed,
            inputs=inputs,
            model=model,
            write_baseline_to=str(write_baseline) if write_baseline is not None else None,
            progress=beat if show_progress else None,
            serving=serving,
            engine=run_jobs,
            select=select,
            # a shard's or a Ray task's lines interleave with others': each names its package
            prefix=True if sharded is not None or engine == "ray" else None,
        )
    used = "none (--no-config)" if no_config else settings.describe()
    for report in reports:
        report.config = used
    # the inputs each package was really checked with (e.g. matched by a config glob)
    reads.add(
        *(r.package_path for r in reports),
        *(r.inputs_source for r in reports if r.inputs_source != "archive"),
    )
    reads.refuse(outputs[:-1])
    single = sharded is None and manifest is None and len(reports) == 1
    block = plans[0].to_dict() if plans else None

    def render(name: str) -> str:
        if single:
            return render_report(reports[0], name)
        return render_reports(reports, name, shard=block)

    if not single or reports[0].error is None or fmt != "table" or output is not None:
        emit(render(fmt), output)
    for name, path in specs:
        emit(render(name), Path(path), make_folders=True)
    if fmt == "github" or any(name == "github" for name, _ in specs):
        from aotipre.report import github

        github.append_step_summary(reports)
    for report in reports:
        if report.error is not None:
            named = single or report.error.startswith(report.package_path)
            say_error(report.error if named else f"{report.package_path}: {report.error}")
    return int(worst_exit_code(reports))  # whatever became of stdout: the check's own answer


def merge(
    reports: Sequence[Path],
    *,
    expect_shards: int | None = None,
    fmt: str = "table",
    output: Path | None = None,
    reports_to: Sequence[str] = (),
) -> int:
    """`aotipre merge`: the JSON reports of a run's CI shards (`check --shard I/N`) as one
    report in `fmt` (and each `--report`), with one exit code: `check`'s, in which a package
    that no shard checked could not be checked (aotipre/fleet/merge.py)."""
    from aotipre.fleet.merge import merge as merge_shards

    specs = [parse_report_spec(spec) for spec in reports_to]
    outputs = [("--output", output), *(("--report", path) for _, path in specs)]
    safeio.ReadPaths().add(*reports).refuse([*outputs, *_step_summary(fmt, specs)])
    merged = list(merge_shards(reports, expect_shards).reports)
    emit(render_reports(merged, fmt), output)
    for name, path in specs:
        emit(render_reports(merged, name), Path(path), make_folders=True)
    if fmt == "github" or any(name == "github" for name, _ in specs):
        from aotipre.report import github

        github.append_step_summary(merged)
    for report in merged:
        if report.error is not None:
            named = report.error.startswith(report.package_path)
            say_error(report.error if named else f"{report.package_path}: {report.error}")
    return int(worst_exit_code(merged))


def diff(
    old: Path,
    new: Path,
    *,
    fail_on: str = "breaking",
    fmt: str = "table",
    output: Path | None = None,
    reports_to: Sequence[str] = (),
    inputs: Path | None = None,
    serving_config: Path | None = None,
    show_progress: bool | None = None,
) -> int:
    """`aotipre diff OLD NEW`: every change between two packages, each breaking or compatible
    by its rule (aotipre/diff/), in `fmt` (and each `--report`); exit 1 when a change at or
    above `fail_on` (breaking, any) is found, 2 when either side cannot be read. `inputs`:
    OLD and NEW also run on them, compared and timed side by side (torch workers);
    `serving_config`: a Triton config.pbtxt that serves OLD, checked against NEW too."""
    from aotipre.diff.gate import diff_packages

    specs = [parse_report_spec(spec) for spec in reports_to]
    outputs = [("--output", output), *(("--report", path) for _, path in specs)]
    reads = safeio.ReadPaths().add(old, new, inputs, serving_config)
    reads.refuse([*outputs, *_step_summary(fmt, specs)])
    serving = None
    if serving_config is not None:
        from aotipre.serving.triton import load_serving_config

        serving = load_serving_config(str(serving_config))
    if inputs is None:
        report = diff_packages(old, new, fail_on=fail_on, serving_config=serving)
    else:
        from aotipre.foundation.progress import Heartbeat, stamped

        tempdirs.sweep()  # the folders of an aotipre that was SIGKILLed (aotipre/foundation/tempdirs.py)
        with Heartbeat(stamped(progress)) as beat:
            report = diff_packages(
                old,
                new,
                fail_on=fail_on,
                serving_config=serving,
                inputs=inputs,
                progress=beat if show_progress is not False else None,
            )
    emit(render_report(report, fmt), output)
    for name, path in specs:
        emit(render_report(report, name), Path(path), make_folders=True)
    if fmt == "github" or any(name == "github" for name, _ in specs):
        from aotipre.report import github

        github.append_step_summary([report])
    if report.error is not None:
        say_error(report.error)
    return int(report.exit_code)


def _step_summary(
    fmt: str, specs: Sequence[tuple[str, str]]
) -> list[tuple[str, Path | str | None]]:
    """The GitHub step summary as one of a command's outputs (refused where it is an input, as
    `--output` is), when a `github` report appends to it; else none."""
    if fmt != "github" and all(name != "github" for name, _ in specs):
        return []
    from aotipre.report import github

    return [(f"${github.STEP_SUMMARY_ENV}", os.environ.get(github.STEP_SUMMARY_ENV) or None)]


def _shard(text: str | None, write_baseline: Path | None) -> Shard | None:
    """The Shard of `check --shard` (None without it); UsageError (one line) for a bad one,
    or with --write-baseline (a shard's baseline would lack the other shards' findings)."""
    if text is None:
        return None
    from aotipre.fleet.shard import parse_shard

    if write_baseline is not None:
        raise UsageError(
            "--write-baseline cannot be used with --shard: it would hold one shard's findings",
            hint="write the baseline from an unsharded run",
        )
    return parse_shard(text)


def _shows_progress(
    once: config.Settings, flags: Mapping[str, Any], manifest: Any, packages: Sequence[str]
) -> bool:
    """--progress/--no-progress, else the `progress` key; neither: on, unless every package is
    checked static-only (no worker runs: well under a second, nothing to follow). `once`: the
    run's settings (flags included); `flags`: the parsed flags, over a manifest entry's."""
    if once.progress is not None:
        return once.progress
    return _runs_workers(once, flags, manifest, packages)


def _runs_workers(
    once: config.Settings, flags: Mapping[str, Any], manifest: Any, packages: Sequence[str]
) -> bool:
    """Whether a worker may run: some package is not checked static-only (as _shows_progress)."""
    if packages and not once.static_only:
        return True
    entries = manifest.entries if manifest is not None else ()
    static = once.static_only
    return any(not flags.get("static_only", e.values.get("static_only", static)) for e in entries)


def _engine(name: str, address: str | None) -> Any:
    """The engine of `check --engine NAME` (None: batch.run's threads); UsageError (one line)
    for an unknown name, an --address without Ray, or Ray not installed."""
    if name == "local":
        if address is not None:
            raise UsageError("--address is for --engine ray", hint="add --engine ray")
        return None
    if name != "ray":
        raise UsageError(f"--engine {name!r}: use local or ray")
    import functools

    from aotipre.fleet.engines import ray as ray_engine

    if address is not None:
        ray_engine.check_address(address)
    ray_engine.require(local=address is None)
    return functools.partial(ray_engine.run, address=address)


def inspect(
    package: Path,
    fmt: str = "table",
    target: str | None = None,
    config_file: Path | None = None,
    no_config: bool = False,
) -> int:
    """`aotipre inspect`: describe a package and whether each target (default: this machine, or
    the configuration's named targets) can load it; loads no code."""
    from aotipre import api  # imported here: `diff` and `explain` need none of the checks

    info = api.inspect(package)
    named: tuple[tuple[str, str], ...] = ()
    if target is None or ";" in target or "," not in target:
        from aotipre import config

        named = config.load_config(config_file, isolated=no_config).targets
    findings, rows = api.compatibility(info, target, named)
    emit(render_package(info, fmt, findings, rows), None)
    return 0


def bundle(
    package: Path,
    output: Path,
    *,
    exported_program: Path | None = None,
    inputs: Path | None = None,
    expected: Path | None = None,
    model: str | None = None,
) -> int:
    """`aotipre bundle`: one .pt2 with the AOTI code, the ExportedProgram, sample inputs and
    expected outputs, which `aoti_load_package` loads unchanged and `aotipre check` checks
    against its own references."""
    from aotipre.pt2.bundle import write_bundle

    def text(p: Path | None) -> str | None:
        return None if p is None else str(p)

    done = write_bundle(
        str(package),
        str(output),
        exported_program=text(exported_program),
        inputs=text(inputs),
        expected=text(expected),
        model=model,
    )
    added = "; ".join(done.added) or "nothing (the package already had it all)"
    said = (
        f"wrote {output}: model '{done.model}', {done.members} members, "
        f"{done.bytes / 1e6:.1f} MB; added {added}"
    )
    emit(f"{clean(said)}\ncheck it with: aotipre check {clean(str(output))}\n", None)
    return 0


def serving_config(
    package: Path,
    *,
    max_batch_size: int = 0,
    name: str | None = None,
    output: Path | None = None,
    model: str | None = None,
) -> int:
    """`aotipre serving-config`: a Triton config.pbtxt that serves the package; what `aotipre
    check` would warn of in it (no config avoids it) goes to stderr, one line per finding."""
    from aotipre.serving.triton import write_serving_config

    safeio.ReadPaths().add(package).refuse([("--output", output)])
    written = write_serving_config(
        str(package),
        max_batch_size=max_batch_size,
        name=name,
        model=model,
        source=str(output) if output is not None else "the config",
    )
    emit(written.text, output)
    for note in written.notes:
        safeio.write_stderr(f"aotipre: {note.severity.value}: {note.code} {clean(note.message)}\n")
    return 0


def list_codes(fmt: str = "table") -> int:
    """`aotipre codes`: every finding code with its severity, category and summary."""
    keys = ["code", "name", "severity", "category", "summary"]
    rows = [
        [c.code, c.name, c.severity.value, c.category.value, c.summary] for c in codes.ALL_CODES
    ]
    if fmt == "json":
        emit(json_format.dumps([dict(zip(keys, r)) for r in rows]), None)
        return 0
    from aotipre.report.tabular import tabulate

    emit(tabulate(rows, headers=keys, maxcolwidths=[None, None, None, None, 60]) + "\n", None)
    return 0


def explain(code: str, fmt: str = "table") -> int:
    """`aotipre explain CODE`: one code's section of docs/codes.md as plain text (a code in any
    case, or a code's name), or one line per code for a prefix (`AOT6`). UsageError (one line,
    exit 2) for anything else."""
    from aotipre.findings import codes_doc

    found = codes_doc.lookup(code)
    if not found:
        raise UsageError(
            f"{code.strip()!r} is not a finding code, code prefix or code name "
            "(`aotipre codes` lists them)"
        )
    listing = codes_doc.is_prefix(code)
    if fmt == "json":
        fields = [codes_doc.as_dict(c) for c in found]
        emit(json_format.dumps(fields if listing else fields[0]), None)
    elif listing:
        emit(codes_doc.render_listing(list(found)), None)
    else:
        emit(codes_doc.render_code(found[0]), None)
    return 0


def doctor(
    devices: Sequence[str] = (),
    *,
    fmt: str = "table",
    reports_to: Sequence[str] = (),
    timeout: float = 300.0,
    cache_dir: Path | None = None,
    show_progress: bool | None = None,
    python: Sequence[str] = (),
) -> int:
    """`aotipre doctor`: host facts plus a canary model compiled, loaded and run per device.
    `python`: the interpreters whose torch is proved (each validated first: exit 2 when one
    cannot); several: one doctor report each, and the worst exit code."""
    from aotipre.doctor import DoctorOptions, run_doctor
    from aotipre.environment.runtimes import probe
    from aotipre.runner.stages import DynamicOptions

    specs = [_doctor_report_spec(spec) for spec in reports_to]
    from aotipre import config

    timeout = config.check_number("timeout", timeout)  # finite, in range: else one line, exit 2
    reads = safeio.ReadPaths().add(*_interpreters(python)).add(cache_dir, contents=False)
    reads.refuse(("--report", path) for _, path in specs)
    show = True if show_progress is None else show_progress  # stderr: whatever the format
    # all validated before any canary runs; none given: the running interpreter
    runtimes = [probe(p) for p in python] if python else [probe(None)]
    reads.add(*(rt.python for rt in runtimes)).refuse(("--report", path) for _, path in specs)
    from aotipre.foundation.progress import Heartbeat, stamped

    results = []
    said = stamped(progress)
    tempdirs.sweep()  # the folders of an aotipre that was SIGKILLed (aotipre/foundation/tempdirs.py)
    for runtime in runtimes:
        dynamic = DynamicOptions(
            timeout_s=timeout,
            cache_dir=str(cache_dir) if cache_dir is not None else None,
            python=runtime.python,
        )
        with Heartbeat(said) as beat:
            opts = DoctorOptions(
                devices=tuple(devices), dynamic=dynamic, progress=beat if show else None
            )
            results.append((runtime, run_doctor(opts)))
    emit(_render_doctors(results, fmt), None)
    for name, path in specs:
        emit(_render_doctors(results, name), Path(path), make_folders=True)
    for runtime, result in results:
        if result.error is not None:
            where = f"{runtime.shown}: " if len(results) > 1 else ""
            say_error(where + result.error)
    return max(int(result.exit_code) for _, result in results)


def _render_doctors(results: Sequence[tuple[Any, Any]], fmt: str) -> str:
    """One doctor report as before; several (one per --python) as a table per interpreter, or
    one JSON object listing them (`kind: doctor-matrix`)."""
    from aotipre.doctor.render import render as render_doctor

    if len(results) == 1:
        return render_doctor(results[0][1], fmt)
    if fmt == "json":
        import json

        reports = [json.loads(render_doctor(r, "json")) for _, r in results]
        worst = max(int(r.exit_code) for _, r in results)
        return json_format.dumps(
            {
                "kind": "doctor-matrix",
                "exit_code": worst,
                "runtimes": [
                    {
                        "python": encodable(rt.shown),
                        "torch": encodable(rt.torch_version),
                        "report": rep,
                    }
                    for (rt, _), rep in zip(results, reports)
                ],
            }
        )
    return "\n".join(
        f"=== --python {clean(rt.shown)} (torch {clean(rt.torch_version)})\n{render_doctor(r, fmt)}"
        for rt, r in results
    )


def _doctor_report_spec(spec: str) -> tuple[str, str]:
    name, sep, path = spec.partition(":")
    if not sep or not path or name not in INFO_FORMATS:
        raise AotipreError(f"--report {spec!r}: use FORMAT:PATH with FORMAT table or json")
    return name, path


def version() -> int:
    """`aotipre version`."""
    emit(f"aotipre {__version__}\n", None)
    return 0


_PATH_FIELDS = ("exported_program", "expected", "weights", "against")
"""Settings fields that name a file a check reads (`libraries` and `python` are lists)."""
_FOLDERS = ("cache_dir", "artifacts")
"""Settings fields that name a folder a check writes into: never inside an input folder."""


def _read_paths(values: Mapping[str, Any]) -> list[str]:
    """The files `values` (settings fields: a Settings' or a manifest entry's) name as inputs:
    references, weights, the perf baseline package, op libraries, interpreters."""
    out = [v for k in _PATH_FIELDS if isinstance(v := values.get(k), str)]
    out += [v for v in values.get("libraries") or () if isinstance(v, str)]
    out += _interpreters(values.get("python") or ())
    return out


def _target_folders(values: Mapping[str, Any]) -> list[str]:
    """The folders `--target libtorch=` and `image=` read (in `values`' target and named
    targets)."""
    out = []
    for spec in [values.get("target"), *(spec for _, spec in values.get("targets") or ())]:
        if isinstance(spec, str):
            found = re.findall(r"(?:^|[,;])\s*(?:libtorch|image)\s*=\s*([^,;]+)", spec)
            out += [os.path.expanduser(f.strip()) for f in found]
    return out


def _interpreters(names: Sequence[str]) -> list[str]:
    """Interpreter paths as given, and bare names as PATH finds them."""
    return [n if "/" in n else (shutil.which(n) or n) for n in names if isinstance(n, str)]


def emit(text: str, output: Path | None, *, make_folders: bool = False) -> None:
    """Write a rendered report to stdout (a closed, full or broken stdout never changes the exit
    code), or to `output` with safeio.write_text (atomic; a special file written in place;
    UsageError when it cannot be written). A missing folder is an error for `--output`;
    `--report` creates its folder (`make_folders`, as docs/ci.md says)."""
    if output is None:
        safeio.write_stdout(text)
        return
    safeio.write_text(output, text, make_folders=make_folders)


def progress(message: str) -> None:
    safeio.write_stderr(f"aotipre: {clean(message)}\n")


def say_error(message: str) -> None:
    safeio.write_stderr(f"aotipre: error: {clean(message)}\n")
