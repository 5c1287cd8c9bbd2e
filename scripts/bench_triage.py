"""Crash-triage benchmark: aotipre's time from a crash to the named kernel (and to the full
diagnosis) against the manual workflow, each manual step a fresh process:

  1. plain run of the package (the crash)        3. printer level 3: recompile + run
  2. synchronous run (CUDA_LAUNCH_BLOCKING=1)    4. printer level 2 (filtered): recompile + run

    python scripts/bench_triage.py                       # CPU: the embedding_oob fixture
    python scripts/bench_triage.py --device cuda         # GPU: the same model compiled for CUDA
    python scripts/bench_triage.py --json out.json --repeat 2

Both sides start warm in the same way (inductor's own caches as they are; aotipre gets a fresh,
empty compile cache per repeat, so its printer builds really compile). The case: `EmbeddingOnly`
(fixtures/models.py) with id 600 in a 500-row table. `--package/--exported-program/--inputs`
benchmark another crashing case.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

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
from torch._inductor.package import load_package
pkg, inputs, device = sys.argv[1:4]
args, kwargs = torch.load(inputs, weights_only=True, map_location="cpu")
args = [a.to(device) for a in args]
m = load_package(pkg, device_index=0 if device.startswith("cuda") else -1)
try:
    m(*args)
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    print("no crash")
except Exception as exc:
    print("ERROR", str(exc).splitlines()[0])
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


def fresh(code: str, *args: str, env: dict[str, str] | None = None) -> tuple[float, str]:
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=1800,
    )
    return time.monotonic() - started, proc.stdout + proc.stderr


def manual(pkg: str, ep: str, inputs: str, device: str, tmp: str) -> dict[str, float | str]:
    sync = {"CUDA_LAUNCH_BLOCKING": "1", "PYTORCH_NO_CUDA_MEMORY_CACHING": "1"}
    plain_s, _ = fresh(RUN, pkg, inputs, device)
    sync_s, _ = fresh(RUN, pkg, inputs, device, env=sync)
    p3_s, log3 = fresh(PRINTER, ep, inputs, device, "3", "", os.path.join(tmp, "p3.pt2"), env=sync)
    launches = re.findall(r"\[ (before|after)_launch: (\S+) \]", log3)
    from aotipre.triage.parsers import faulting_launch

    fault = faulting_launch([(f"{a}_launch", k) for a, k in launches])
    kernel = fault.kernel if fault else ""
    kernels = ",".join(k for k in (kernel, fault.previous if fault else None) if k)
    p2_s, log2 = fresh(
        PRINTER, ep, inputs, device, "2", kernels, os.path.join(tmp, "p2.pt2"), env=sync
    )
    return {
        "plain_run_s": plain_s,
        "sync_run_s": sync_s,
        "printer3_s": p3_s,
        "printer2_s": p2_s,
        "total_s": plain_s + sync_s + p3_s + p2_s,
        "crash_to_named_s": sync_s + p3_s,
        "crash_to_stats_s": sync_s + p3_s + p2_s,
        "kernel": kernel,
        "stats_printed": "before_launch - " in log2,
    }


def aotipre_run(pkg: str, ep: str, inputs: str, device: str, cache: str) -> dict[str, float | str]:
    from aotipre import CheckOptions, check
    from aotipre.runner.stages import DynamicOptions
    from aotipre.triage.escalate import TriageOptions

    events: list[tuple[float, str]] = []
    started = time.monotonic()
    report = check(
        pkg,
        CheckOptions(
            inputs=inputs,
            dynamic=DynamicOptions(device=device, cache_dir=cache, probe=False),
            triage=TriageOptions(exported_program=ep),
            progress=lambda m: events.append((time.monotonic(), m)),
        ),
    )
    total = time.monotonic() - started
    crash = next((t for t, m in events if "triage:" in m), None)
    named = next((t for t, m in events if "triage: faulting kernel" in m), None)
    done = next((t for t, m in events if "triage: done" in m), None)
    diag = report.diagnosis[0] if report.diagnosis else None
    return {
        "check_total_s": total,
        "before_crash_s": (crash - started) if crash else float("nan"),
        "crash_to_named_s": (named - crash) if named and crash else float("nan"),
        "crash_to_diagnosis_s": (done - crash) if done and crash else float("nan"),
        "kernel": diag.kernel if diag and diag.kernel else "",
        "kind": diag.kind if diag else "",
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--package", help="a crashing AOTI package (default: built from the fixture)")
    ap.add_argument("--exported-program", help="its ExportedProgram (.pt2)")
    ap.add_argument("--inputs", help="the crashing inputs")
    ap.add_argument("--json", help="also write the results here")
    opts = ap.parse_args()

    tmp = tempfile.mkdtemp(prefix="aotipre-bench-triage-")
    if opts.package:
        pkg, ep, inputs = opts.package, opts.exported_program, opts.inputs
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
        ep = os.path.join(tmp, "ep.pt2")
        pkg = os.path.join(tmp, f"embedding_oob_{opts.device.split(':')[0]}.pt2")
        prep_s, log = fresh(PREPARE, str(fixtures / "embedding_oob.pt2"), ep, pkg, opts.device)
        if not os.path.isfile(pkg):
            print(log[-3000:], file=sys.stderr)
            return 1
        print(f"prepared {pkg} and {ep} in {prep_s:.1f} s (not timed)")

    rows = []
    for i in range(opts.repeat):
        cache = os.path.join(tmp, f"cache{i}")
        m = manual(pkg, ep, inputs, opts.device, tmp)
        a = aotipre_run(pkg, ep, inputs, opts.device, cache)
        warm = aotipre_run(pkg, ep, inputs, opts.device, cache)
        rows.append({"manual": m, "aotipre": a, "aotipre_warm_cache": warm})
        print(f"repeat {i + 1}: manual {m}\n          aotipre {a}\n          warm    {warm}")

    def med(side: str, key: str) -> float:
        return statistics.median(float(r[side][key]) for r in rows)

    summary = {
        "device": opts.device,
        "cpus": os.cpu_count(),
        "repeat": opts.repeat,
        "manual_total_s": med("manual", "total_s"),
        "manual_crash_to_named_s": med("manual", "crash_to_named_s"),
        "manual_crash_to_stats_s": med("manual", "crash_to_stats_s"),
        "aotipre_crash_to_named_s": med("aotipre", "crash_to_named_s"),
        "aotipre_crash_to_diagnosis_s": med("aotipre", "crash_to_diagnosis_s"),
        "aotipre_check_total_s": med("aotipre", "check_total_s"),
        "aotipre_warm_crash_to_diagnosis_s": med("aotipre_warm_cache", "crash_to_diagnosis_s"),
    }
    summary["ratio_named_vs_manual_total"] = (
        summary["aotipre_crash_to_named_s"] / summary["manual_total_s"]
    )
    summary["ratio_diagnosis_vs_manual_total"] = (
        summary["aotipre_crash_to_diagnosis_s"] / summary["manual_total_s"]
    )
    summary["ratio_diagnosis_vs_manual_crash_to_stats"] = (
        summary["aotipre_crash_to_diagnosis_s"] / summary["manual_crash_to_stats_s"]
    )
    print(json.dumps(summary, indent=1))
    if opts.json:
        Path(opts.json).write_text(json.dumps({"summary": summary, "runs": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
