"""The --artifacts repro bundle: package, inputs, environment, every step's command and log."""

from __future__ import annotations

import json
import os
import platform
import re
import shlex
import shutil
import sys
from typing import TYPE_CHECKING, Any

from aotipre import __version__
from aotipre.findings import StageStatus
from aotipre.foundation import safeio
from aotipre.foundation.errors import UsageError

if TYPE_CHECKING:
    from aotipre.triage.diagnosis import Diagnosis
    from aotipre.triage.state import TriageState

# Layout of DIR/<model>/:
#   README.md             what happened and how to re-run it
#   diagnosis.json        the Diagnosis (as in the JSON report)
#   package.pt2           the package that crashed (a copy, or a hard link)
#   exported_program.pt2  only with --exported-program (otherwise package.pt2 holds it)
#   inputs.pt             the inputs, as torch.save((args, kwargs))
#   environment.json      versions, platform, host traits, environment variables
#   commands.sh           every ladder step's exact command, pointed at the bundle's files
#   run_package.py        plain torch: load package.pt2, run inputs.pt (no aotipre needed)
#   steps/<step>.json     the worker job of each step; steps/<step>.<part>.log its logs
#   repro.py, repro_exported_program.pt2   the minifier's output (with --minify)

MAX_REPRO_BYTES = 16 * 1024 * 1024
"""Largest minifier repro.py copied into the bundle."""
_ENV_KEPT = re.compile(r"^(CUDA_|PYTORCH_|TORCH|TORCHINDUCTOR_|AOT|LD_PRELOAD$|OMP_NUM_THREADS$)")


def write_bundle(triage: TriageState, diagnosis: Diagnosis | None, directory: str) -> str:
    """Write the bundle into `directory`/<model>; returns that folder. Raises OSError."""
    crash = triage.crash
    out = os.path.join(os.path.abspath(directory), _safe(crash.model.name))
    steps_dir = os.path.join(out, "steps")
    os.makedirs(steps_dir, exist_ok=True)
    os.makedirs(os.path.join(out, "work"), exist_ok=True)

    _place(crash.aoti_package, os.path.join(out, "package.pt2"))
    paths: dict[str, str] = {crash.aoti_package: "package.pt2"}
    source = os.path.abspath(crash.package.path)
    if source != crash.aoti_package:
        if triage.ep_source == source or crash.compiled_with is not None:
            # the crashing package was compiled by aotipre: keep the archive it came from
            _place(source, os.path.join(out, "source.pt2"))
            paths[source] = "source.pt2"
    if triage.ep_source is not None and triage.ep_source not in paths:
        _place(triage.ep_source, os.path.join(out, "exported_program.pt2"))
        paths[triage.ep_source] = "exported_program.pt2"

    inputs_note = _inputs(triage, out, paths)
    _write_json(os.path.join(out, "environment.json"), _environment(triage))
    if diagnosis is not None:
        _write_json(os.path.join(out, "diagnosis.json"), diagnosis.to_dict())

    commands = [
        "#!/bin/sh",
        "# Every crash-triage step of aotipre, as it ran, pointed at this bundle's files.",
        "# Each command is one fresh worker process; its logs went to steps/<step>.<part>.log.",
        'cd "$(dirname "$0")" || exit 1',
        "PYTHON=${PYTHON:-python3}",
        'WORKER=${AOTIPRE_WORKER:-$("$PYTHON" -c '
        "'import aotipre.runner.stages as s; print(s.WORKER_PATH)')}",
        "",
    ]
    for sid, run in triage.runs.items():
        if run.status is StageStatus.SKIPPED or not run.job:
            continue
        job = _retarget(run.job, paths, triage.workdir, run.extra.get("compile_step"))
        job_file = f"steps/{sid}.json"
        _write_json(os.path.join(out, job_file), job)
        for part, log in run.logs.items():
            if os.path.isfile(log):
                shutil.copyfile(log, os.path.join(steps_dir, f"{sid}.{_safe(part)}.log"))
        env = " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(run.env.items()))
        prefix = _prefix(run.argv)
        commands.append(f"# {run.step.stage_name}: {run.step.purpose}")
        commands.append(f"# took {run.duration_s:.1f} s; {run.detail}".replace("\n", " "))
        commands.append(f'env {env} {prefix}"$PYTHON" "$WORKER" {job_file}'.replace("  ", " "))
        commands.append("")
    _write_text(os.path.join(out, "commands.sh"), "\n".join(commands) + "\n", mode=0o755)
    _write_text(os.path.join(out, "run_package.py"), _run_script(triage))

    repro = _repro(triage, out)
    _write_text(os.path.join(out, "README.md"), _readme(triage, diagnosis, inputs_note, repro))
    return out


def _place(src: str, dst: str) -> None:
    """Hard-link when possible (packages can be large), else copy. A `dst` that already is
    `src` (a bundle folder checked again) is left alone: removing it would lose the input."""
    if os.path.exists(dst):
        if os.path.samefile(src, dst):
            return
        os.remove(dst)
    try:
        os.link(src, dst)
    except OSError:
        shutil.copyfile(src, dst)


def _inputs(triage: TriageState, out: str, paths: dict[str, str]) -> str:
    spec = triage.inputs
    dst = os.path.join(out, "inputs.pt")
    if spec.get("kind") == "file" and os.path.isfile(str(spec.get("path"))):
        shutil.copyfile(str(spec["path"]), dst)
        paths[str(spec["path"])] = "inputs.pt"
        return "inputs.pt: the sample inputs of the run"
    saved = triage.inputs_file()
    if os.path.isfile(saved):
        shutil.copyfile(saved, dst)
        paths[saved] = "inputs.pt"
        return (
            "inputs.pt: the synthesized inputs of the run (the jobs re-create them from their "
            "seed; run_package.py reads the file)"
        )
    return "no inputs.pt: the inputs were synthesized (the jobs re-create them from their seed)"


def _retarget(
    job: dict[str, Any],
    paths: dict[str, str],
    workdir: str,
    compile_step: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The job with absolute temporary paths replaced by the bundle's relative ones; a step
    that loaded its build from the compile cache compiles it again (into work/)."""
    job = dict(job)
    job.pop("vec_isa", None)  # this host's probed CPU ISAs: the bundle may run on another
    steps = [s for s in job.get("steps", []) if s.get("op") != "save_inputs"]
    if compile_step is not None and not any(s.get("op") == "compile" for s in steps):
        steps.insert(0, dict(compile_step))
    job["steps"] = steps
    text = json.dumps(job)
    for src, dst in sorted(paths.items(), key=lambda kv: -len(kv[0])):
        text = text.replace(json.dumps(src)[1:-1], dst)
    text = text.replace(json.dumps(workdir)[1:-1], "work")
    data = json.loads(text)
    for step in data.get("steps", []):  # a cache entry's path: compile into work/ instead
        for key in ("out", "package"):
            value = step.get(key)
            if isinstance(value, str) and os.path.isabs(value) and value.endswith(".pt2"):
                step[key] = f"work/{data.get('tag', 'job')}.pt2"
    if isinstance(data.get("inputs"), dict) and data["inputs"].get("kind") == "file":
        data["inputs"]["path"] = "inputs.pt"
    data["workdir"] = "work"
    return data


def _prefix(argv: tuple[str, ...]) -> str:
    """What ran before the interpreter (compute-sanitizer and its flags)."""
    if not argv:
        return ""
    for i, arg in enumerate(argv):
        if os.path.basename(arg).startswith("python") or arg.endswith(".py"):
            head = [a for a in argv[:i] if "--log-file" not in a]
            return " ".join(shlex.quote(a) for a in head) + (" " if head else "")
    return ""


def _environment(triage: TriageState) -> dict[str, Any]:
    from aotipre.runner.cache import torch_version

    crash = triage.crash
    env = {k: v for k, v in os.environ.items() if _ENV_KEPT.match(k)}
    env.update(crash.env)
    env.pop("AOTIPRE_FAKE_SCRIPT", None)
    return {
        "aotipre": __version__,
        "python": sys.version.split()[0],
        "torch": torch_version(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "device": crash.device,
        "host": dict(crash.host),
        "model": crash.model.name,
        "package": os.path.abspath(crash.package.path),
        "compiled_with": crash.compiled_with,
        "environment": env,
        "eager": crash.eager,
    }


def _run_script(triage: TriageState) -> str:
    crash = triage.crash
    device = crash.device
    model = crash.aoti_model
    return f'''"""Re-run the crashing package on the saved inputs with plain torch (no aotipre).

For a CUDA fault, run it as `CUDA_LAUNCH_BLOCKING=1 python run_package.py` so the error is
raised at the kernel that faults.
"""

import os

import torch
from torch._inductor.package import load_package

HERE = os.path.dirname(os.path.abspath(__file__))
DEVICE = {device!r}

args, kwargs = torch.load(os.path.join(HERE, "inputs.pt"), weights_only=True, map_location="cpu")
if not isinstance(kwargs, dict):  # a bare tensor or tuple of args
    args, kwargs = (args, kwargs), {{}}
move = lambda t: t.to(DEVICE) if isinstance(t, torch.Tensor) else t  # noqa: E731
args = [move(a) for a in args]
kwargs = {{k: move(v) for k, v in kwargs.items()}}
index = int(DEVICE.split(":")[1]) if ":" in DEVICE else -1
runner = load_package(os.path.join(HERE, "package.pt2"), model_name={model!r}, device_index=index)
out = runner(*args, **kwargs)
if DEVICE.startswith("cuda"):
    torch.cuda.synchronize()
print("ran:", [tuple(o.shape) for o in out] if isinstance(out, (list, tuple)) else out)
'''


def _repro(triage: TriageState, out: str) -> str | None:
    run = triage.runs.get("minify")
    repro = run.extra.get("repro") if run is not None else None
    if not repro or not os.path.isfile(repro):
        return None
    return copy_repro(repro, out)


def write_compile_repro(model: str, repro: str, directory: str) -> str:
    """Keep the minified repro of a failed compile in `directory`/<model>/compile-repro/
    (repro.py and the ExportedProgram it loads); returns that repro.py. Raises OSError."""
    out = os.path.join(os.path.abspath(directory), _safe(model), "compile-repro")
    os.makedirs(out, exist_ok=True)
    copy_repro(repro, out)
    return os.path.join(out, "repro.py")


def copy_repro(repro: str, out: str) -> str:
    """Copy the minifier's `repro` into `out` as repro.py, with the ExportedProgram it loads
    beside it (repro_exported_program.pt2) and the script pointed at that copy."""
    try:  # the minifier's file in aotipre's work folder, read as any file is (bounded, UTF-8)
        text = safeio.read_text(repro, f"the minifier's {repro}", MAX_REPRO_BYTES)
    except UsageError as exc:
        raise OSError(str(exc)) from None  # write_bundle's callers report an OSError
    m = re.search(r"torch\.export\.load\('([^']+)'\)", text)
    if m and os.path.isfile(m.group(1)):
        shutil.copyfile(m.group(1), os.path.join(out, "repro_exported_program.pt2"))
        text = text.replace(
            m.group(0),
            "torch.export.load(__import__('os').path.join(__import__('os').path.dirname("
            "__import__('os').path.abspath(__file__)), 'repro_exported_program.pt2'))",
        )
    _write_text(os.path.join(out, "repro.py"), text)
    return "repro.py"


def _readme(
    triage: TriageState, diagnosis: Diagnosis | None, inputs_note: str, repro: str | None
) -> str:
    crash = triage.crash
    lines = [
        f"# Crash triage bundle: model `{crash.model.name}` of `{os.path.basename(crash.package.path)}`",
        "",
        f"Written by aotipre {__version__}. Device: {crash.device}. First error:",
        "",
        f"    {triage.first_error}",
        "",
    ]
    if diagnosis is not None:
        lines += ["## Diagnosis", "", diagnosis.verdict, ""]
        if diagnosis.kernel:
            lines.append(
                f"Faulting kernel: `{diagnosis.kernel}` (named by {diagnosis.identified_by})."
            )
            lines.append("")
    lines += [
        "## Files",
        "",
        "- `package.pt2`: the package that crashed; `run_package.py` re-runs it with plain torch.",
        f"- {inputs_note}.",
        "- `environment.json`: versions, platform, host traits, environment variables.",
        "- `commands.sh`: each ladder step's exact command (one fresh worker process each);",
        "  `steps/<step>.json` is its job, `steps/<step>.<part>.log` its logs.",
        "- `diagnosis.json`: the diagnosis as in `aotipre check --format json`.",
    ]
    if repro:
        lines.append("- `repro.py`: the minifier's minimal repro (`python repro.py`).")
    lines += ["", "## Steps", ""]
    for run in triage.runs.values():
        lines.append(
            f"- `{run.step.stage_name}` ({run.status.value}, {run.duration_s:.1f} s): {run.detail}"
        )
    return "\n".join(lines) + "\n"


def _write_json(path: str, data: Any) -> None:
    _write_text(path, json.dumps(data, indent=2, default=str) + "\n")


def _write_text(path: str, text: str, mode: int | None = None) -> None:
    """Write as every output is (safeio.write_text: atomic, never replacing a device or a link
    to one); OSError on failure, as write_bundle promises."""
    try:
        safeio.write_text(path, text)
        if mode is not None:
            os.chmod(path, mode)
    except UsageError as exc:
        raise OSError(str(exc)) from None


def _safe(name: str) -> str:
    return re.sub(r"[^\w.-]+", "_", name) or "model"
