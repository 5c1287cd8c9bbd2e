"""The typer app: every command and option; each command hands its parsed values to
aotipre/cli/commands.py and exits with what that returns. Run through aotipre/cli/__init__.py's `main`.

Longer than the ~600 lines of the other modules on purpose: it is the declaration of the CLI
(every option of every command with its type, default, help text and panel), read as one table;
the logic each command runs is in commands.py, and none of it is here."""

from __future__ import annotations

from enum import Enum
from inspect import cleandoc
from pathlib import Path
from typing import Any

import typer

from aotipre.cli import commands
from aotipre.cli.commands import Format, InfoFormat

app = typer.Typer(
    add_completion=True,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="Deployment preflight checks for PyTorch AOTInductor (.pt2) packages.",
)
_DYNAMIC = "Dynamic stages"
_PYTHON_HELP = (
    "Run the torch workers in this interpreter (e.g. the serving venv's bin/python); "
    "repeatable: a version matrix. Default: this Python."
)


def _report_format_option(panel: str | None = None) -> Any:
    """--format/-f of a command that writes a finding report (check, merge, diff)."""
    return typer.Option(
        Format.table,
        "--format",
        "-f",
        help="Output format.",
        rich_help_panel=panel,
        metavar="FORMAT",
    )


def _report_output_option(panel: str | None = None) -> Any:
    """--output/-o of a command that writes a finding report (check, merge, diff)."""
    return typer.Option(
        None,
        "--output",
        "-o",
        help="Write the report to this file instead of stdout.",
        rich_help_panel=panel,
        metavar="FILE",
    )


def _also_report_option(example: str, panel: str | None = None) -> Any:
    """--report FORMAT:PATH of a command that writes a finding report (check, merge, diff);
    `example` is the FORMAT:PATH its help shows."""
    return typer.Option(
        None,
        "--report",
        help=f"Also write a report as FORMAT:PATH (e.g. {example}); repeatable.",
        show_default=False,
        rich_help_panel=panel,
        metavar="FORMAT:PATH",
    )


def _print_version(value: bool) -> None:
    if value:
        raise typer.Exit(commands.version())


@app.callback()
def main(
    version: bool = typer.Option(
        False,
        "--version",
        help="Print aotipre's version and exit.",
        is_eager=True,
        callback=_print_version,
        metavar="",
    ),
) -> None:
    """Deployment preflight checks for PyTorch AOTInductor (.pt2) packages."""


class FailOn(str, Enum):
    error = "error"
    warning = "warning"


class DiffFailOn(str, Enum):
    breaking = "breaking"
    any = "any"


class Engine(str, Enum):
    local = "local"
    ray = "ray"


@app.command()
def check(
    packages: list[Path] | None = typer.Argument(
        None,
        help="The .pt2 package(s) to check (a file, or a folder a .pt2 was extracted into).",
        metavar="PACKAGE...",
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
        rich_help_panel="Package and inputs",
        metavar="FILE",
    ),
    model: str | None = typer.Option(
        None,
        "--model",
        "-m",
        help="Model name in the package.",
        rich_help_panel="Package and inputs",
        metavar="NAME",
    ),
    serving_config: Path | None = typer.Option(
        None,
        "--serving-config",
        help="The Triton config.pbtxt the package is served with (platform torch_aoti): every "
        "mismatch with the package is a finding. A model folder or repository given as "
        "PACKAGE uses its own. Needs the serving extra.",
        readable=False,  # one aotipre line for a file that is not a config
        rich_help_panel="Package and inputs",
        metavar="FILE",
    ),
    target: str | None = typer.Option(
        None,
        "--target",
        help="Deployment host, e.g. 'cuda,cc=9.0' or 'cpu,isa=avx2'. Default: this machine.",
        rich_help_panel="Package and inputs",
        metavar="SPEC",
    ),
    static_only: bool | None = typer.Option(
        None,
        "--static-only/--no-static-only",
        help="Only read and check; compile, load and run nothing.",
        show_default=False,
        rich_help_panel="Gate",
        metavar="",
    ),
    fmt: Format = _report_format_option("Report"),
    output: Path | None = _report_output_option("Report"),
    reports_to: list[str] | None = _also_report_option("junit:out.xml", "Report"),
    progress: bool | None = typer.Option(
        None,
        "--progress/--no-progress",
        help="A line on stderr when each stage starts and ends, with the elapsed time (never "
        "mixed with the report). (default: progress, unless --static-only)",
        show_default=False,
        rich_help_panel="Report",
        metavar="",
    ),
    fail_on: FailOn | None = typer.Option(
        None,
        "--fail-on",
        help="Lowest severity that fails the gate (exit 1). (default: error)",
        rich_help_panel="Gate",
        metavar="error|warning",
    ),
    select: list[str] | None = typer.Option(
        None,
        "--select",
        help="Report only codes with these prefixes (AOT3,AOT201).",
        show_default=False,
        rich_help_panel="Gate",
        metavar="PREFIXES",
    ),
    ignore: list[str] | None = typer.Option(
        None,
        "--ignore",
        help="Never report codes with these prefixes.",
        show_default=False,
        rich_help_panel="Gate",
        metavar="PREFIXES",
    ),
    baseline: Path | None = typer.Option(
        None,
        "--baseline",
        help="Accept the findings listed in this baseline file.",
        rich_help_panel="Gate",
        metavar="FILE",
    ),
    write_baseline: Path | None = typer.Option(
        None,
        "--write-baseline",
        help="Write every current finding to this baseline file.",
        rich_help_panel="Gate",
        metavar="FILE",
    ),
    jobs: int | None = typer.Option(
        None,
        "--jobs",
        "-j",
        help="Packages checked in parallel. (default: 1)",
        rich_help_panel="Configuration",
        metavar="N",
    ),
    gpus: str | None = typer.Option(
        None,
        "--gpus",
        help="GPUs (nvidia-smi indices, e.g. 0,2,3) the packages are spread over: each CUDA "
        "package's workers get one GPU to themselves (CUDA_VISIBLE_DEVICES). Default: every "
        "visible GPU, pinned when -j runs several CUDA packages at once.",
        rich_help_panel="Configuration",
        metavar="LIST",
    ),
    engine: Engine = typer.Option(
        Engine.local,
        "--engine",
        help="Where the packages are checked: local (this machine) or ray (one task per "
        "package on a Ray cluster; needs the ray extra).",
        rich_help_panel="Configuration",
        metavar="local|ray",
    ),
    address: str | None = typer.Option(
        None,
        "--address",
        help="The Ray cluster of --engine ray: auto or HOST:PORT. Default: a local Ray started "
        "for this run.",
        rich_help_panel="Configuration",
        metavar="ADDR",
    ),
    manifest: Path | None = typer.Option(
        None,
        "--manifest",
        help="TOML file listing packages with their inputs and options.",
        rich_help_panel="Package and inputs",
        metavar="FILE",
    ),
    shard: str | None = typer.Option(
        None,
        "--shard",
        help="Check only this CI job's share of the packages: I/N (2/3: the second of 3), the "
        "same on every machine; or auto, from the CI's variables (docs/ci.md). `aotipre "
        "merge` joins the shards' JSON reports.",
        rich_help_panel="Package and inputs",
        metavar="I/N|auto",
    ),
    config_file: Path | None = typer.Option(
        None,
        "--config",
        help="Configuration file. Default: aotipre.toml or pyproject.toml.",
        rich_help_panel="Configuration",
        metavar="FILE",
    ),
    no_config: bool = typer.Option(
        False,
        "--no-config",
        help="Ignore configuration files.",
        rich_help_panel="Configuration",
        metavar="",
    ),
    device: str | None = typer.Option(
        None,
        "--device",
        help="cpu, cuda or cuda:N for the runs. Default: the package's device.",
        rich_help_panel="Dynamic stages",
        metavar="DEVICE",
    ),
    recompile: bool | None = typer.Option(
        None,
        "--recompile/--no-recompile",
        help="Compile the ExportedProgram even if AOTI code is packaged.",
        show_default=False,
        rich_help_panel="Dynamic stages",
        metavar="",
    ),
    timeout: float | None = typer.Option(
        None,
        "--timeout",
        help="Seconds allowed for each load, run and probe step. (default: 300)",
        rich_help_panel="Dynamic stages",
        metavar="S",
    ),
    compile_timeout: float | None = typer.Option(
        None,
        "--compile-timeout",
        help="Seconds allowed for a compile. (default: 1800)",
        rich_help_panel="Dynamic stages",
        metavar="S",
    ),
    rtol: float | None = typer.Option(
        None,
        "--rtol",
        help="Relative tolerance vs eager.",
        rich_help_panel="Dynamic stages",
        metavar="X",
    ),
    atol: float | None = typer.Option(
        None,
        "--atol",
        help="Absolute tolerance vs eager.",
        rich_help_panel="Dynamic stages",
        metavar="X",
    ),
    probe: bool | None = typer.Option(
        None,
        "--probe/--no-probe",
        help="Run each dynamic dim at its min, max and max+1. (default: probe)",
        show_default=False,
        rich_help_panel="Dynamic stages",
        metavar="",
    ),
    probe_budget: int | None = typer.Option(
        None,
        "--probe-budget",
        help="Most elements an input may have in a probe run.",
        rich_help_panel="Dynamic stages",
        metavar="N",
    ),
    state_calls: int | None = typer.Option(
        None,
        "--state-calls",
        help="Calls of one copy of a model that mutates buffers, compared call by call with "
        "the ExportedProgram's (0: off). (default: 3)",
        rich_help_panel="Dynamic stages",
        metavar="N",
    ),
    seed: int | None = typer.Option(
        None,
        "--seed",
        help="Seed of synthesized and probe inputs.",
        rich_help_panel="Dynamic stages",
        metavar="N",
    ),
    cache: bool | None = typer.Option(
        None,
        "--cache/--no-cache",
        help="Use the compile cache (see --cache-dir). (default: cache)",
        show_default=False,
        rich_help_panel="Dynamic stages",
        metavar="",
    ),
    cache_dir: Path | None = typer.Option(
        None,
        "--cache-dir",
        help="Compile cache. Default: ~/.cache/aotipre/compile.",
        rich_help_panel="Dynamic stages",
        metavar="DIR",
    ),
    python: list[str] | None = typer.Option(
        None,
        "--python",
        help=_PYTHON_HELP,
        show_default=False,
        rich_help_panel=_DYNAMIC,
        metavar="PATH",
    ),
    escalate: bool | None = typer.Option(
        None,
        "--escalate/--no-escalate",
        help="After a crash inside the model, run the triage ladder to name the faulting "
        "kernel; after outputs that differ from eager (AOT701/AOT702), name the first divergent "
        "kernel and prove its cause by rebuild. (default: escalate)",
        show_default=False,
        rich_help_panel="Crash triage",
        metavar="",
    ),
    accuracy_budget: float | None = typer.Option(
        None,
        "--accuracy-budget",
        help="Seconds for accuracy triage of one model: its diagnostic rebuild and the "
        "rebuilds that prove a cause; also for the rebuilds that prove a failed compile's "
        "workaround. (default: 900)",
        rich_help_panel="Crash triage",
        metavar="SECONDS",
    ),
    minify: bool | None = typer.Option(
        None,
        "--minify/--no-minify",
        help="Crash triage and failed compiles: also run the AOTI minifier for a minimal "
        "repro.py (slow).",
        show_default=False,
        rich_help_panel="Crash triage",
        metavar="",
    ),
    sanitizer: bool | None = typer.Option(
        None,
        "--sanitizer/--no-sanitizer",
        help="Crash triage: also run compute-sanitizer memcheck when installed (CUDA, slow).",
        show_default=False,
        rich_help_panel="Crash triage",
        metavar="",
    ),
    artifacts: Path | None = typer.Option(
        None,
        "--artifacts",
        help="Crash triage: write a repro bundle (package, inputs, environment, commands, "
        "logs) into this folder.",
        rich_help_panel="Crash triage",
        metavar="DIR",
    ),
    compile_at_deploy: bool | None = typer.Option(
        None,
        "--compile-at-deploy/--no-compile-at-deploy",
        help="The deployment compiles ExportedProgram-only archives at deploy time: an archive "
        "without AOTI code is then not reported (AOT015).",
        show_default=False,
        metavar="",
    ),
    exported_program: Path | None = typer.Option(
        None,
        "--exported-program",
        help="The ExportedProgram (torch.export.save .pt2) of an AOTI-only package: the "
        "reference that compare and probe run eagerly, and that crash triage recompiles.",
        rich_help_panel="Dynamic stages",
        metavar="FILE",
    ),
    expected: Path | None = typer.Option(
        None,
        "--expected",
        help="Golden outputs for the sample inputs (a torch.save of the model's outputs): "
        "compare checks the compiled outputs against them.",
        rich_help_panel="Dynamic stages",
        metavar="FILE",
    ),
    weights: Path | None = typer.Option(
        None,
        "--weights",
        help="Weights the deployment swaps in without recompiling (a torch.save state_dict or "
        "safetensors): names, shapes and dtypes checked against the package's constants, then "
        "swapped into a fresh copy, run, and compared with the ExportedProgram given them.",
        rich_help_panel="Dynamic stages",
        metavar="FILE",
    ),
    perf: bool | None = typer.Option(
        None,
        "--perf/--no-perf",
        help="Measure the cold start (load breakdown), latency and memory. (default: perf)",
        show_default=False,
        metavar="",
    ),
    perf_runs: int | None = typer.Option(
        None,
        "--perf-runs",
        help="Timed calls of the perf stage, after warm-up. (default: 20)",
        metavar="N",
    ),
    max_load_s: float | None = typer.Option(
        None,
        "--max-load-s",
        help="Budget: seconds to load the package (a cold start).",
        metavar="S",
    ),
    max_latency_ms: float | None = typer.Option(
        None, "--max-latency-ms", help="Budget: milliseconds of the median call.", metavar="MS"
    ),
    max_rss_mb: float | None = typer.Option(
        None,
        "--max-rss-mb",
        help="Budget: peak host memory (RSS) after load and first call.",
        metavar="MB",
    ),
    max_gpu_mb: float | None = typer.Option(
        None,
        "--max-gpu-mb",
        help="Budget: GPU memory the model takes after load and first call.",
        metavar="MB",
    ),
    against: Path | None = typer.Option(
        None,
        "--against",
        help="A baseline package (e.g. the deployed one) measured in the same run with the "
        "same inputs; worse beyond --perf-tolerance fails the gate.",
        metavar="FILE",
    ),
    perf_tolerance: float | None = typer.Option(
        None,
        "--perf-tolerance",
        help="Regression tolerance against --against. (default: 0.2)",
        metavar="X",
    ),
    imports: list[str] | None = typer.Option(
        None,
        "--import",
        help="Import this module in every worker before anything is loaded (it registers custom "
        "operators); repeatable.",
        show_default=False,
        metavar="MODULE",
    ),
    libraries: list[Path] | None = typer.Option(
        None,
        "--library",
        help="Load this custom-op library (torch.ops.load_library) in every worker and in the C++ "
        "harness; repeatable.",
        show_default=False,
        metavar="FILE",
    ),
    cpp: bool | None = typer.Option(
        None,
        "--cpp/--no-cpp",
        help="The package is deployed with the C++ loader (AOTIModelPackageLoader): check it "
        "there too; Python-only custom ops are errors.",
        show_default=False,
        metavar="",
    ),
    deployment_checks_inputs: bool | None = typer.Option(
        None,
        "--deployment-checks-inputs/--no-deployment-checks-inputs",
        help="The serving process sets AOTI_RUNTIME_CHECK_INPUTS=1: inputs the runtime check "
        "refuses are not run again without it, and AOT613 is not reported. (default: no)",
        show_default=False,
        rich_help_panel="Dynamic stages",
        metavar="",
    ),
    allow_pickle: bool | None = typer.Option(
        None,
        "--allow-pickle/--no-allow-pickle",
        help="Trust packages (and --against baselines) holding members torch unpickles without "
        "restriction (AOT081: pickled weights or constants, opaque objects): load them in the "
        "dynamic stages, AOT081 a warning. (default: no: not loaded, AOT081 an error)",
        show_default=False,
        rich_help_panel="Dynamic stages",
        metavar="",
    ),
) -> None:
    """Check packages (and sample inputs) before deployment. Flags override the config file."""
    flags = {
        "fail-on": fail_on.value if fail_on is not None else None,
        "target": target,
        "static-only": static_only,
        "progress": progress,
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
        "state-calls": state_calls,
        "seed": seed,
        "cache": cache,
        "cache-dir": None if cache_dir is None else str(cache_dir),
        "baseline": None if baseline is None else str(baseline),
        "jobs": jobs,
        "gpus": gpus,
        "escalate": escalate,
        "accuracy-budget": accuracy_budget,
        "minify": minify,
        "sanitizer": sanitizer,
        "compile-at-deploy": compile_at_deploy,
        "artifacts": None if artifacts is None else str(artifacts),
        "exported-program": None if exported_program is None else str(exported_program),
        "expected": None if expected is None else str(expected),
        "weights": None if weights is None else str(weights),
        "perf": perf,
        "perf-runs": perf_runs,
        "max-load-s": max_load_s,
        "max-latency-ms": max_latency_ms,
        "max-rss-mb": max_rss_mb,
        "max-gpu-mb": max_gpu_mb,
        "against": None if against is None else str(against),
        "perf-tolerance": perf_tolerance,
        "python": python or None,
        "import": imports or None,
        "library": [str(p) for p in libraries] if libraries else None,
        "cpp": cpp,
        "deployment-checks-inputs": deployment_checks_inputs,
        "allow-pickle": allow_pickle,
    }
    raise typer.Exit(
        commands.check(
            [str(p) for p in packages or []],
            flags=flags,
            fmt=fmt.value,
            output=output,
            reports_to=reports_to or (),
            inputs=str(inputs) if inputs is not None else None,
            model=model,
            config_file=config_file,
            no_config=no_config,
            manifest=manifest,
            write_baseline=write_baseline,
            serving_config=serving_config,
            engine=engine.value,
            address=address,
            shard=shard,
        )
    )


@app.command()
def merge(
    reports: list[Path] = typer.Argument(
        ...,
        help="The JSON reports of `aotipre check --shard I/N --format json` (or of any check).",
        metavar="REPORT.json...",
        show_default=False,
        readable=False,  # aotipre says what is wrong with a file itself (one line)
    ),
    expect_shards: int | None = typer.Option(
        None,
        "--expect-shards",
        help="The run's number of shards: reports of another count are refused; the packages "
        "of a shard with no report are not checked (exit 2).",
        min=1,
        max=10_000,
        metavar="N",
    ),
    fmt: Format = _report_format_option(),
    output: Path | None = _report_output_option(),
    reports_to: list[str] | None = _also_report_option("junit:out.xml"),
) -> None:
    """Merge the JSON reports of a run's CI shards into one report (every format) and one exit
    code; a package that no shard checked is not checked (exit 2), never clean."""
    raise typer.Exit(
        commands.merge(
            reports,
            expect_shards=expect_shards,
            fmt=fmt.value,
            output=output,
            reports_to=reports_to or (),
        )
    )


@app.command()
def diff(
    old: Path = typer.Argument(
        ..., help="The package in production.", readable=False, metavar="OLD"
    ),
    new: Path = typer.Argument(..., help="The candidate package.", readable=False, metavar="NEW"),
    fail_on: DiffFailOn = typer.Option(
        DiffFailOn.breaking,
        "--fail-on",
        help="Exit 1 on a breaking change (breaking), or on any change (any).",
        metavar="breaking|any",
    ),
    fmt: Format = _report_format_option(),
    output: Path | None = _report_output_option(),
    reports_to: list[str] | None = _also_report_option("markdown:diff.md"),
    inputs: Path | None = typer.Option(
        None,
        "--inputs",
        "-i",
        help="OLD's caller's inputs (a torch.save of (args, kwargs)): OLD and NEW also run on "
        "them in torch workers, outputs compared (AOT790) and timed side by side (AOT650-655).",
        readable=False,  # one aotipre line for a file that is not one
        metavar="FILE",
    ),
    serving_config: Path | None = typer.Option(
        None,
        "--serving-config",
        help="The Triton config.pbtxt that serves OLD: what it refuses in NEW and not in OLD "
        "is breaking.",
        readable=False,  # one aotipre line for a file that is not a config
        metavar="FILE",
    ),
    progress: bool | None = typer.Option(
        None,
        "--progress/--no-progress",
        help="With --inputs: a line on stderr when each stage starts and ends. (default: progress)",
        show_default=False,
        metavar="",
    ),
) -> None:
    """What changed from OLD to NEW (interface, deployment requirements, weights, a serving
    config), each change breaking or compatible by its rule (docs/diff.md). Loads no code and
    imports no torch, unless --inputs runs both on the same inputs."""
    raise typer.Exit(
        commands.diff(
            old,
            new,
            fail_on=fail_on.value,
            fmt=fmt.value,
            output=output,
            reports_to=reports_to or (),
            inputs=inputs,
            serving_config=serving_config,
            show_progress=progress,
        )
    )


@app.command()
def inspect(
    package: Path = typer.Argument(
        ..., help="The .pt2 package to inspect.", readable=False, metavar="PACKAGE"
    ),
    fmt: InfoFormat = typer.Option(
        InfoFormat.table, "--format", "-f", help="Output format.", metavar="table|json"
    ),
    target: str | None = typer.Option(
        None,
        "--target",
        help="Deployment target(s) to judge the binaries against ('cuda,cc=8.0,9.0,torch=2.12'; "
        "';' between several; a name from the config table tool.aotipre.targets). Default: this machine.",
    ),
    config_file: Path | None = typer.Option(
        None, "--config", help="Configuration file (for its tool.aotipre.targets table)."
    ),
    no_config: bool = typer.Option(False, "--no-config", help="Ignore configuration files."),
) -> None:
    """Describe a package: models, devices, input contracts, dynamic dims, what its binaries
    need and whether each target can load it. Loads no code."""
    raise typer.Exit(commands.inspect(package, fmt.value, target, config_file, no_config))


@app.command()
def bundle(
    package: Path = typer.Argument(
        ..., help="The AOTI package (.pt2) to bundle.", readable=False, metavar="PACKAGE"
    ),
    output: Path = typer.Option(
        ..., "--output", "-o", help="The bundle to write (.pt2).", metavar="OUT"
    ),
    exported_program: Path | None = typer.Option(
        None,
        "--exported-program",
        help="The ExportedProgram of the same model (torch.export.save); not needed when the "
        "package already holds it.",
        metavar="FILE",
    ),
    inputs: Path | None = typer.Option(
        None,
        "--inputs",
        "-i",
        help="Sample inputs (torch.save of (args, kwargs)); default: those the ExportedProgram "
        "file stores.",
        metavar="FILE",
    ),
    expected: Path | None = typer.Option(
        None,
        "--expected",
        help="Expected outputs for the sample inputs (torch.save of the model's outputs).",
        metavar="FILE",
    ),
    model: str | None = typer.Option(
        None, "--model", help="The model to bundle in a multi-model package.", metavar="NAME"
    ),
) -> None:
    """Write one self-checking .pt2: the package's AOTI code plus the ExportedProgram, sample
    inputs and expected outputs. aoti_load_package loads it unchanged; `aotipre check` then
    compares with its references without flags. Loads no code."""
    raise typer.Exit(
        commands.bundle(
            package,
            output,
            exported_program=exported_program,
            inputs=inputs,
            expected=expected,
            model=model,
        )
    )


@app.command("serving-config")
def serving_config(
    package: Path = typer.Argument(
        ..., help="The AOTI package (.pt2) to serve.", readable=False, metavar="PACKAGE"
    ),
    max_batch_size: int = typer.Option(
        0,
        "--max-batch-size",
        help="Triton's max_batch_size: > 0 batches on the package's dynamic first dim (left "
        "out of dims); 0 (default): no batching, the whole shape in dims.",
        min=0,
        max=2**31 - 1,
        metavar="N",
    ),
    name: str | None = typer.Option(
        None, "--name", help="The model's name (default: the package's file name).", metavar="NAME"
    ),
    output: Path | None = typer.Option(
        None, "--output", "-o", help="Write the config here (default: stdout).", metavar="FILE"
    ),
    model: str | None = typer.Option(
        None, "--model", help="The model of a multi-model package.", metavar="NAME"
    ),
) -> None:
    """Write a Triton config.pbtxt (platform torch_aoti) for the package: inputs and outputs by
    position, dtypes, -1 for dynamic dims, instance group of its device. Loads no code; needs
    the serving extra."""
    raise typer.Exit(
        commands.serving_config(
            package, max_batch_size=max_batch_size, name=name, output=output, model=model
        )
    )


@app.command("codes")
def list_codes(
    fmt: InfoFormat = typer.Option(
        InfoFormat.table, "--format", "-f", help="Output format.", metavar="table|json"
    ),
) -> None:
    """List every finding code with its severity, category and summary."""
    raise typer.Exit(commands.list_codes(fmt.value))


@app.command()
def explain(
    code: str = typer.Argument(
        ...,
        help="A finding code (AOT613, any case), a code's name, or a prefix (AOT6: one line "
        "per code).",
        metavar="CODE",
        show_default=False,
    ),
    fmt: InfoFormat = typer.Option(
        InfoFormat.table, "--format", "-f", help="Output format.", metavar="table|json"
    ),
) -> None:
    """Explain a finding code: severity, category, what it means, an example message and what
    to do (its section of docs/codes.md)."""
    raise typer.Exit(commands.explain(code, fmt.value))


@app.command()
def doctor(
    devices: list[str] | None = typer.Option(
        None,
        "--device",
        help="cpu, cuda or cuda:N to prove with the canary; repeatable. "
        "Default: cpu, plus cuda when torch can use it.",
        show_default=False,
        metavar="DEVICE",
    ),
    fmt: InfoFormat = typer.Option(
        InfoFormat.table, "--format", "-f", help="Output format.", metavar="table|json"
    ),
    reports_to: list[str] | None = typer.Option(
        None,
        "--report",
        help="Also write the report as FORMAT:PATH (table or json); repeatable.",
        show_default=False,
        metavar="FORMAT:PATH",
    ),
    timeout: float = typer.Option(
        300.0, "--timeout", help="Seconds for each load and run step.", metavar="S"
    ),
    cache_dir: Path | None = typer.Option(
        None,
        "--cache-dir",
        help="Compile cache (the canary compiles once per host and torch version). "
        "Default: ~/.cache/aotipre/compile.",
        metavar="DIR",
    ),
    python: list[str] | None = typer.Option(
        None,
        "--python",
        help="Prove this interpreter's torch (e.g. the serving venv's bin/python) instead of "
        "this Python's; repeatable: one report per interpreter.",
        show_default=False,
        metavar="PATH",
    ),
    progress: bool | None = typer.Option(
        None,
        "--progress/--no-progress",
        help="Say what is running on stderr, with the elapsed time. (default: progress)",
        show_default=False,
        metavar="",
    ),
) -> None:
    """Check this host can compile, load and run AOTI packages: facts plus a canary model."""
    raise typer.Exit(
        commands.doctor(
            devices or (),
            fmt=fmt.value,
            reports_to=reports_to or (),
            timeout=timeout,
            cache_dir=cache_dir,
            show_progress=progress,
            python=python or (),
        )
    )


@app.command()
def version() -> None:
    """Print aotipre's version."""
    raise typer.Exit(commands.version())


def _reflowed(doc: str) -> str:
    """A docstring as help text: each paragraph one line, so that the help renderer wraps it
    to the terminal (rich keeps a docstring's own line breaks, cutting summaries mid-sentence)."""
    paragraphs = cleandoc(doc).split("\n\n")
    return "\n\n".join(" ".join(p.split()) for p in paragraphs)


# every command's help is its docstring reflowed (the docstrings themselves stay as written)
for _command in app.registered_commands:
    if _command.help is None and _command.callback is not None and _command.callback.__doc__:
        _command.help = _reflowed(_command.callback.__doc__)
