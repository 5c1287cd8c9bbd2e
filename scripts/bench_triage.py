"""Crash-triage and check benchmark (issue 17): aotipre against the manual workflow and a bare
script, both sides in the same run, on the same machine and the same case.

The manual workflow, each step a fresh process that loads with `aoti_load_package` as a user
would:
  1. plain run of the package (the crash; timed only with --manual-plain: no ratio uses it)
  2. synchronous run (CUDA_LAUNCH_BLOCKING=1)
  3. printer level 3: recompile + run (names the faulting kernel)
  4. printer level 2 filtered to that kernel: recompile + run (its input statistics)

Ratios, exactly as the issue defines them:
  named = aotipre crash -> faulting kernel named / manual steps 2-3
  stats = aotipre crash -> kernel + input statistics / manual steps 2-4
  check = `aotipre check PKG --inputs GOOD` / a bare script (import torch, load, run once)
Goals: named and stats <= 0.2 on a GPU, <= 0.3 on CPU; check <= 1.0 (1.25 with the perf stage).

    python scripts/bench_triage.py                       # CPU: the embedding_oob fixture
    python scripts/bench_triage.py --device cuda         # GPU: the same model compiled for CUDA
    python scripts/bench_triage.py --json out.json --repeat 2 --warm

aotipre gets a fresh, empty compile cache per repeat, so its printer builds really compile
(`--warm` adds a second aotipre run on the filled cache); inductor's own caches are as they are
for both sides. The case: `EmbeddingOnly` (fixtures/models.py) with id 600 in a 500-row table
(`embedding_oob_inputs.pt`; `embedding_oob_inputs_good.pt` for the check).
`--package/--exported-program/--inputs/--good-inputs` benchmark another case.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "scripts"))

from _bench import fresh, torch_version  # noqa: E402 - the benchmarks' shared helpers

PREPARE = r"""
import sys, torch
from torch.export.pt2_archive import _package as pk
from torch.export.pt2_archive.constants import MODELS_FILENAME_FORMAT
src, ep_out, pkg_out, device = sys.argv[1:5]
with pk.PT2ArchiveReader(src) as r:
    ep = pk._load_exported_programs(r, [MODELS_FILENAME_FORMAT.format("model")], None)["model"]
if device != "cpu":
    from torch.export.passes import move_to_device_pass
    import torch.utils._pytree as pytree
    ep = move_to_device_pass(ep, device)
    if ep.example_inputs is not None:
        ep.example_inputs = pytree.tree_map(
            lambda t: t.to(device) if isinstance(t, torch.Tensor) else t, ep.example_inputs
        )
torch.export.save(ep, ep_out)
torch._inductor.aoti_compile_and_package(ep, package_path=pkg_out)
"""

RUN = r"""
import sys, torch
pkg, inputs, device = sys.argv[1:4]
args, kwargs = torch.load(inputs, weights_only=True, map_location="cpu")
args = [a.to(device) for a in args]
m = torch._inductor.aoti_load_package(pkg)
try:
    m(*args)
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    print("no crash")
except Exception as exc:
    print("ERROR", str(exc).splitlines()[0])
"""

BARE = r"""
import sys, torch
pkg, inputs, device = sys.argv[1:4]
args, kwargs = torch.load(inputs, weights_only=True, map_location="cpu")
args = [a.to(device) if isinstance(a, torch.Tensor) else a for a in args]
m = torch._inductor.aoti_load_package(pkg)
out = m(*args, **kwargs)
if device.startswith("cuda"):
    torch.cuda.synchronize()
"""

PRINTER = r"""
import sys, ctypes, torch
libc = ctypes.CDLL(None)
libc.setvbuf(ctypes.c_void_p.in_dll(libc, "stdout"), None, 2, 0)
ep_file, inputs, device, level, kernels, out = sys.argv[1:7]
ep = torch.export.load(ep_file)
configs = {"aot_inductor.debug_intermediate_value_printer": level}
if kernels:
    configs["aot_inductor.filtered_kernel_names"] = kernels
path = torch._inductor.aoti_compile_and_package(ep, package_path=out, inductor_configs=configs)
args, kwargs = torch.load(inputs, weights_only=True, map_location="cpu")
args = [a.to(device) for a in args]
m = torch._inductor.aoti_load_package(path)
try:
    m(*args)
    if device.startswith("cuda"):
        torch.cuda.synchronize()
except Exception as exc:
    print("ERROR", str(exc).splitlines()[0])
"""


def manual(
    pkg: str, ep: str, inputs: str, device: str, tmp: str, plain: bool
) -> dict[str, float | str | bool]:
    sync = {"CUDA_LAUNCH_BLOCKING": "1", "PYTORCH_NO_CUDA_MEMORY_CACHING": "1"}
    out: dict[str, float | str | bool] = {}
    if plain:
        out["plain_run_s"] = fresh(RUN, pkg, inputs, device).seconds
    sync_s = fresh(RUN, pkg, inputs, device, env=sync).seconds
    p3_s, _, log3 = fresh(
        PRINTER, ep, inputs, device, "3", "", os.path.join(tmp, "p3.pt2"), env=sync
    )
    launches = re.findall(r"\[ (before|after)_launch: (\S+) \]", log3)
    from aotipre.triage.parsers import faulting_launch

    fault = faulting_launch([(f"{a}_launch", k) for a, k in launches])
    kernel = fault.kernel if fault else ""
    kernels = ",".join(k for k in (kernel, fault.previous if fault else None) if k)
    p2_s, _, log2 = fresh(
        PRINTER, ep, inputs, device, "2", kernels, os.path.join(tmp, "p2.pt2"), env=sync
    )
    out.update(
        sync_run_s=sync_s,
        printer3_s=p3_s,
        printer2_s=p2_s,
        crash_to_named_s=sync_s + p3_s,
        crash_to_stats_s=sync_s + p3_s + p2_s,
        kernel=kernel,
        stats_printed="before_launch - " in log2,
    )
    return out


def aotipre_run(
    pkg: str, ep: str, inputs: str, device: str, cache: str, prewarm: bool = True
) -> dict[str, float | str]:
    from aotipre import CheckOptions, check
    from aotipre.runner.stages import DynamicOptions
    from aotipre.triage import steps as triage_steps
    from aotipre.triage.escalate import TriageOptions

    events: list[tuple[float, str]] = []
    phases: list[dict[str, object]] = []
    run_job = triage_steps.TriageSteps._run_job

    def recorded(self: object, name: str, *args: object, **kwargs: object) -> object:
        # where each triage worker's time went: its steps (compile, load, run, stats) and the
        # rest (interpreter start, import torch, exit)
        job = run_job(self, name, *args, **kwargs)  # type: ignore[arg-type]
        spent = {
            sid: round(float(e.get("duration_s") or 0.0), 3)
            for sid, e in job.entries.items()  # type: ignore[attr-defined]
            if isinstance(e, dict)
        }
        total = job.outcome.duration_s  # type: ignore[attr-defined]
        spent["worker_total"] = round(total, 3)
        spent["outside_steps"] = round(
            total - sum(v for k, v in spent.items() if k != "worker_total"), 3
        )
        phases.append({"step": name, **spent})
        return job

    triage_steps.TriageSteps._run_job = recorded  # type: ignore[method-assign]
    started = time.monotonic()
    report = check(
        pkg,
        CheckOptions(
            inputs=inputs,
            dynamic=DynamicOptions(
                device=device, cache_dir=cache, probe=False, prewarm_rerun=prewarm
            ),
            triage=TriageOptions(exported_program=ep),
            progress=lambda m: events.append((time.monotonic(), m)),
        ),
    )
    total = time.monotonic() - started
    triage_steps.TriageSteps._run_job = run_job  # type: ignore[method-assign]
    crash = next((t for t, m in events if "triage:" in m), None)
    named = next((t for t, m in events if "triage: faulting kernel" in m), None)
    done = next((t for t, m in events if "triage: done" in m), None)
    stats = next((t for t, m in events if "triage: input statistics" in m), None)
    diag = report.diagnosis[0] if report.diagnosis else None
    return {
        "check_total_s": total,
        "before_crash_s": (crash - started) if crash else float("nan"),
        "crash_to_named_s": (named - crash) if named and crash else float("nan"),
        "crash_to_stats_s": ((stats or done) - crash)
        if (stats or done) and crash
        else float("nan"),
        "crash_to_done_s": (done - crash) if done and crash else float("nan"),
        "kernel": diag.kernel if diag and diag.kernel else "",
        "kind": diag.kind if diag else "",
        "stats": bool(diag and diag.inputs),
        "events": [f"{t - started:7.2f} {m}" for t, m in events],
        "triage_phases": phases,
        "triage_stages": [
            {
                "name": st.name,
                "status": st.status.value,
                "s": round(st.duration_s, 3),
                "detail": st.detail,
            }  # fmt: skip
            for st in report.stages
            if st.name.startswith("triage:")
        ],
    }


def check_vs_bare(pkg: str, good: str, device: str) -> dict[str, float | int]:
    """`aotipre check` of the package with good inputs (a fresh CLI process, what CI runs)
    against the bare script; both exit 0 or the figures mean nothing."""
    bare_s, _, log = fresh(BARE, pkg, good, device)
    started = time.monotonic()
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "aotipre",
            "check",
            pkg,
            "--inputs",
            good,
            "--device",
            device,
            "--format",
            "json",
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=1800,
    )
    check_s = time.monotonic() - started
    if proc.returncode != 0:
        print(f"aotipre check exited {proc.returncode}:\n{proc.stderr[-2000:]}", file=sys.stderr)
    stages = {}
    performance = None
    try:
        data = json.loads(proc.stdout)
        for st in data["stages"]:
            stages[st["name"]] = round(st["duration_s"], 3)
        performance = data.get("performance")
    except (ValueError, KeyError):
        pass
    return {
        "bare_s": bare_s,
        "check_s": check_s,
        "check_exit": proc.returncode,
        "stages": stages,
        "performance": performance,
    }


def machine() -> dict[str, str | int | None]:
    out: dict[str, str | int | None] = {
        "host": platform.node(),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
    }
    out["torch"] = torch_version()
    try:
        smi = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=30,
        )
        out["gpu"] = smi.stdout.strip().splitlines()[0] if smi.stdout.strip() else None
    except (OSError, subprocess.SubprocessError):
        out["gpu"] = None
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--package", help="a crashing AOTI package (default: built from the fixture)")
    ap.add_argument("--exported-program", help="its ExportedProgram (.pt2)")
    ap.add_argument("--inputs", help="the crashing inputs")
    ap.add_argument("--good-inputs", help="inputs it runs with (for the check ratio)")
    ap.add_argument("--manual-plain", action="store_true", help="also time manual step 1")
    ap.add_argument("--warm", action="store_true", help="also run aotipre on a warm cache")
    ap.add_argument("--no-check", action="store_true", help="skip the check-vs-bare ratio")
    ap.add_argument(
        "--also-without-prewarm",
        action="store_true",
        help="also run aotipre without the re-run worker started before the crash "
        "(DynamicOptions.prewarm_rerun off; its own empty cache)",
    )
    ap.add_argument("--json", help="also write the results here")
    opts = ap.parse_args()

    tmp = tempfile.mkdtemp(prefix="aotipre-bench-triage-")
    if opts.package:
        pkg, ep, inputs, good = opts.package, opts.exported_program, opts.inputs, opts.good_inputs
        if not (ep and inputs):
            ap.error("--package needs --exported-program and --inputs")
    else:
        out = (
            subprocess.run(
                [sys.executable, str(REPO / "scripts" / "build_fixtures.py")],
                capture_output=True,
                text=True,
                check=True,
            )
            .stdout.strip()
            .splitlines()[-1]
        )
        fixtures = Path(out)
        inputs = str(fixtures / "embedding_oob_inputs.pt")
        good = str(fixtures / "embedding_oob_inputs_good.pt")
        ep = os.path.join(tmp, "ep.pt2")
        pkg = os.path.join(tmp, f"embedding_oob_{opts.device.split(':')[0]}.pt2")
        prep_s, _, log = fresh(PREPARE, str(fixtures / "embedding_oob.pt2"), ep, pkg, opts.device)
        if not os.path.isfile(pkg):
            print(log[-3000:], file=sys.stderr)
            return 1
        print(f"prepared {pkg} and {ep} in {prep_s:.1f} s (not timed)", flush=True)

    rows = []
    for i in range(opts.repeat):
        cache = os.path.join(tmp, f"cache{i}")
        row: dict[str, object] = {}
        row["manual"] = m = manual(pkg, ep, inputs, opts.device, tmp, opts.manual_plain)
        print(f"repeat {i + 1}: manual {m}", flush=True)
        row["aotipre"] = a = aotipre_run(pkg, ep, inputs, opts.device, cache)
        print(f"          aotipre { {k: v for k, v in a.items() if k != 'events'} }", flush=True)
        print("\n".join(f"            {e}" for e in a["events"]), flush=True)
        if opts.also_without_prewarm:
            cold = os.path.join(tmp, f"cache{i}-no-prewarm")
            row["aotipre_no_prewarm"] = n = aotipre_run(
                pkg, ep, inputs, opts.device, cold, prewarm=False
            )
            print(f"          no prewarm { {k: v for k, v in n.items() if k != 'events'} }")
            print("\n".join(f"            {e}" for e in n["events"]), flush=True)
        if opts.warm:
            row["aotipre_warm_cache"] = w = aotipre_run(pkg, ep, inputs, opts.device, cache)
            print(f"          warm    { {k: v for k, v in w.items() if k != 'events'} }")
        if good and not opts.no_check:
            row["check"] = c = check_vs_bare(pkg, good, opts.device)
            shown = {k: v for k, v in c.items() if k != "performance"}
            print(f"          check   {shown}", flush=True)
            if c.get("performance"):
                perf = c["performance"][0]
                cold = perf.get("cold") or {}
                print(
                    "          perf    "
                    + json.dumps(
                        {
                            k: cold.get(k)
                            for k in (
                                "total_s",
                                "loader_import_s",
                                "cuda_init_s",
                                "load_s",
                                "probe_s",
                                "probe_programs",
                                "probe_compiles",
                                "loader_s",
                                "extraction_s",
                                "dlopen_constants_s",
                                "first_call_s",
                            )
                        }
                    )
                    + f" memory {json.dumps(perf.get('memory'))}"
                    + f" p50 {(perf.get('latency') or {}).get('p50_ms')} ms",
                    flush=True,
                )
        rows.append(row)

    def med(side: str, key: str) -> float:
        return statistics.median(float(r[side][key]) for r in rows if side in r)  # type: ignore[index]

    summary: dict[str, object] = {"device": opts.device, "repeat": opts.repeat, **machine()}
    summary.update(
        manual_sync_run_s=med("manual", "sync_run_s"),
        manual_printer3_s=med("manual", "printer3_s"),
        manual_printer2_s=med("manual", "printer2_s"),
        manual_crash_to_named_s=med("manual", "crash_to_named_s"),
        manual_crash_to_stats_s=med("manual", "crash_to_stats_s"),
        aotipre_crash_to_named_s=med("aotipre", "crash_to_named_s"),
        aotipre_crash_to_stats_s=med("aotipre", "crash_to_stats_s"),
        aotipre_check_total_s=med("aotipre", "check_total_s"),
        kernel_manual=rows[-1]["manual"]["kernel"],  # type: ignore[index]
        kernel_aotipre=rows[-1]["aotipre"]["kernel"],  # type: ignore[index]
    )
    summary["ratio_named"] = (
        summary["aotipre_crash_to_named_s"] / summary["manual_crash_to_named_s"]
    )  # type: ignore[operator]
    summary["ratio_stats"] = (
        summary["aotipre_crash_to_stats_s"] / summary["manual_crash_to_stats_s"]
    )  # type: ignore[operator]
    if opts.also_without_prewarm:
        summary["aotipre_no_prewarm_crash_to_named_s"] = med(
            "aotipre_no_prewarm", "crash_to_named_s"
        )
        summary["ratio_named_no_prewarm"] = (
            summary["aotipre_no_prewarm_crash_to_named_s"] / summary["manual_crash_to_named_s"]
        )  # type: ignore[operator]
    if opts.warm:
        summary["aotipre_warm_crash_to_named_s"] = med("aotipre_warm_cache", "crash_to_named_s")
        summary["aotipre_warm_crash_to_stats_s"] = med("aotipre_warm_cache", "crash_to_stats_s")
    if any("check" in r for r in rows):
        summary["bare_load_run_s"] = med("check", "bare_s")
        summary["check_s"] = med("check", "check_s")
        summary["ratio_check"] = summary["check_s"] / summary["bare_load_run_s"]  # type: ignore[operator]
    print(json.dumps(summary, indent=1))
    if opts.json:
        Path(opts.json).write_text(json.dumps({"summary": summary, "runs": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
