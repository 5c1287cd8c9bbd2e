"""Accuracy-triage benchmark (issue 43): outputs differ -> kernel named + cause proven, aotipre
against the manual steps, both sides in the same run, on the same machine and the same case.

The manual steps, each a fresh `python` process as a person runs scripts:
  1. printer: recompile the ExportedProgram with the intermediate value printer's save mode and
     provenance tracking (`aot_inductor.debug_intermediate_value_printer="1"`,
     `trace.provenance_tracking_level=1`), load it and run it once with the cwd in a scratch
     folder (where the printer saves each kernel's tensors);
  2. compare: a script that loads the saved `after_launch` tensors, runs `ep.module()` node by
     node with a `torch.fx.Interpreter`, joins kernels to FX nodes through
     kernel_information.json and names the first kernel, in launch order, an output of which
     differs from its FX node beyond the tolerance;
  3. one rebuild + comparison with eager per knob of the ladder (emulate_precision_casts,
     fallback_random, all-fallback): a person tries each; the cause is the first, in ladder
     order, whose rebuild matches eager.
The aotipre side: `python -m aotipre check PKG --inputs IN --exported-program EP` in a fresh
process, timed end to end, and its triage part from the arrival of its `compare done` stage
line (the moment the outputs are known to differ) to the arrival of its `accuracy: cause
proven:` progress line (the kernel is named before it; the verified repro may follow), or to
the end of accuracy triage when no cause is proven; `ratio_with_repro` counts to the end.

Ratio, as the issue defines it: (aotipre's outputs differ -> named + proven) / (manual steps
1-3; the person cuts no repro). The run is refused (exit 1, no figures) when a side failed or the two sides name another
kernel or cause. Both sides get a fresh, empty inductor cache (TORCHINDUCTOR_CACHE_DIR) per
repeat, aotipre also a fresh aotipre cache that holds only the host's record (torch's CPU-ISA
probe, measured once per host by its first check and made before the repeats; `--first-check`:
none, so the check measures the probe itself and triage's compiles wait for its answer); the
sides alternate which goes first.

    python scripts/bench_accuracy_triage.py                   # the small bf16 model
    python scripts/bench_accuracy_triage.py --model blocks --repeat 3 --json out.json

Models, built by this script in a fresh process with the public API (torch.export.export,
torch.export.save, torch._inductor.aoti_compile_and_package): `bf16`, the accuracy tests' small
bf16 chain (tests/triage/build_accuracy.py: linear -> a pointwise chain whose intermediate
bf16 rounding matters -> softmax); `blocks`, a mid-size bf16 model (`--blocks` transformer-ish
blocks: layer norm, attention, MLP, whose first block holds the same rounding-sensitive chain).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "scripts"))

from _bench import fresh, torch_version  # noqa: E402 - the benchmarks' shared helpers

BUILD = r"""
import sys, torch
sys.path.insert(0, sys.argv[4])
from build_accuracy import Bf16Chain
out, kind, blocks = sys.argv[1], sys.argv[2], int(sys.argv[3])

class Block(torch.nn.Module):
    def __init__(self, d, chain):
        super().__init__()
        self.ln = torch.nn.LayerNorm(d)
        self.qkv = torch.nn.Linear(d, 3 * d)
        self.proj = torch.nn.Linear(d, d)
        self.fc1 = torch.nn.Linear(d, 2 * d)
        self.fc2 = torch.nn.Linear(2 * d, d)
        self.chain = chain

    def forward(self, x):
        q, k, v = self.qkv(self.ln(x)).chunk(3, dim=-1)
        if self.chain:
            q = (q + 100.0) - 100.0  # eager rounds q + 100 to bf16: steps of 0.5
        a = torch.softmax(q @ k.transpose(-1, -2) * 4.0, dim=-1) @ v
        x = x + self.proj(a)
        return x + self.fc2(torch.nn.functional.gelu(self.fc1(self.ln(x))))

class Blocks(torch.nn.Module):
    def __init__(self, n, d=32):
        super().__init__()
        self.blocks = torch.nn.Sequential(*[Block(d, i == 0) for i in range(n)])

    def forward(self, x):
        return self.blocks(x)

torch.manual_seed(0)
if kind == "bf16":
    model, x = Bf16Chain().eval(), torch.randn(4, 16, dtype=torch.bfloat16)
else:
    model, x = Blocks(blocks).to(torch.bfloat16).eval(), torch.randn(8, 32, dtype=torch.bfloat16)
ep = torch.export.export(model, (x,))
torch.export.save(ep, f"{out}/ep.pt2")
torch.save(((x,), {}), f"{out}/inputs.pt")
torch._inductor.aoti_compile_and_package(ep, package_path=f"{out}/aoti.pt2")
"""

PRINTER = r"""
import sys, torch
ep_file, inputs, out = sys.argv[1:4]
ep = torch.export.load(ep_file)
configs = {"aot_inductor.debug_intermediate_value_printer": "1", "trace.provenance_tracking_level": 1}
path = torch._inductor.aoti_compile_and_package(ep, package_path=out, inductor_configs=configs)
args, kwargs = torch.load(inputs, weights_only=True)
model = torch._inductor.aoti_load_package(path)
torch.manual_seed(0)
with torch.no_grad():
    model(*args, **kwargs)
"""

COMPARE = r"""
import json, os, re, sys, zipfile, torch
import torch.utils._pytree as pytree
ep_file, inputs, pkg, log, rtol, atol = sys.argv[1:7]
rtol, atol = float(rtol), float(atol)
ep = torch.export.load(ep_file)
args, kwargs = torch.load(inputs, weights_only=True)
with zipfile.ZipFile(pkg) as z:
    info = json.loads(z.read(next(n for n in z.namelist() if n.endswith("kernel_information.json"))))
kernels = {key.rsplit(":", 1)[0]: val for key, val in info.items()}
gm = ep.module()
values = {}

class Recording(torch.fx.Interpreter):
    def run_node(self, n):
        out = super().run_node(n)
        values[n.name] = out
        return out

torch.manual_seed(0)
with torch.no_grad():
    Recording(gm).run(*pytree.tree_flatten((tuple(args), dict(kwargs)))[0])
order = {n.name: i for i, n in enumerate(gm.graph.nodes)}
launches = []  # (kernel, {arg: {phase: path}}) in launch order
last = None
for path in re.findall(r"Saved tensor to (\S+)", open(log).read()):
    phase, rest = os.path.basename(path)[len("aoti_torch"):].split("_launch_", 1)
    kernel = max((k for k in kernels if rest.startswith(k + "_")), key=len)
    arg = rest[len(kernel) + 1:].rsplit("_", 1)[0]
    if (kernel, phase) != last and phase == "before" or not launches:
        launches.append((kernel, {}))
    last = (kernel, phase)
    launches[-1][1].setdefault(arg, {})[phase] = path
answer = {"kernel": None, "launches": len(launches)}
for kernel, saved in launches:
    nodes = sorted((n for n in kernels[kernel]["pre_grad_nodes"] if n in order), key=order.get)
    for arg, phases in saved.items():
        after = torch.load(phases["after"], weights_only=True)
        before = torch.load(phases["before"], weights_only=True) if "before" in phases else None
        if before is not None and torch.equal(before, after):
            continue  # not written by this kernel: one of its inputs
        want = next((values[n] for n in reversed(nodes) if isinstance(values.get(n), torch.Tensor)
                     and values[n].shape == after.shape and values[n].dtype == after.dtype), None)
        if want is None:
            continue  # a kernel-internal buffer with no eager value
        if not torch.isclose(after.double(), want.double(), rtol=rtol, atol=atol).all():
            vals = [values.get(n) for n in nodes]
            answer.update(kernel=kernel, nodes=nodes, arg=arg,
                          max_abs=float((after.double() - want.double()).abs().max()),
                          low_precision=any(isinstance(v, torch.Tensor) and v.dtype in
                                            (torch.bfloat16, torch.float16) for v in vals))
            break
    if answer["kernel"]:
        break
print("ANSWER", json.dumps(answer))
"""

KNOB = r"""
import json, sys, torch
import torch.utils._pytree as pytree
ep_file, inputs, out, configs, rtol, atol = sys.argv[1:7]
ep = torch.export.load(ep_file)
args, kwargs = torch.load(inputs, weights_only=True)
try:
    path = torch._inductor.aoti_compile_and_package(
        ep, package_path=out, inductor_configs=json.loads(configs))
    torch.manual_seed(0)
    with torch.no_grad():
        got = torch._inductor.aoti_load_package(path)(*args, **kwargs)
except Exception as exc:
    print("ANSWER", json.dumps({"matches": None, "error": str(exc).splitlines()[0][:200]}))
    sys.exit(0)
torch.manual_seed(0)
with torch.no_grad():
    want = ep.module()(*args, **kwargs)
pairs = list(zip(pytree.tree_flatten(got)[0], pytree.tree_flatten(want)[0]))
close = all(torch.isclose(a.double(), b.double(), rtol=float(rtol), atol=float(atol)).all()
            for a, b in pairs)
worst = max(float((a.double() - b.double()).abs().max()) for a, b in pairs)
print("ANSWER", json.dumps({"matches": bool(close), "max_abs": worst}))
"""

BF16_TOLERANCE = (0.05, 0.01)
"""(rtol, atol): aotipre's default for bf16 outputs (worker/compare.py), given to both sides."""

HOOK = r"""
import json, sys, time
from aotipre.runner import launch
from aotipre.triage import accuracy

record = {"jobs": []}
run_job_file = launch.run_job_file

def timed_job(job, *args, **kwargs):
    argv, outcome = run_job_file(job, *args, **kwargs)
    if str(job.get("tag", "")).startswith("accuracy-"):
        entries = (outcome.result or {}).get("steps") or {}
        steps = {sid: {"s": e.get("duration_s"), "status": e.get("status"),
                       "phase_at": e.get("phase_at")}
                 for sid, e in entries.items() if isinstance(e, dict)}
        record["jobs"].append({"job": job["tag"], "worker_s": outcome.duration_s, "steps": steps,
                               "vec_isa_pinned": (outcome.result or {}).get("vec_isa_pinned")})
    return argv, outcome

launch.run_job_file = timed_job
triage_accuracy = accuracy.triage_accuracy

def timed_triage(*args, **kwargs):
    record["start"] = time.time()
    try:
        return triage_accuracy(*args, **kwargs)
    finally:
        record["end"] = time.time()

accuracy.triage_accuracy = timed_triage
from aotipre.cli import main
try:
    code = main(sys.argv[2:])
finally:
    with open(sys.argv[1], "w") as f:
        json.dump(record, f)
sys.exit(code)
"""


def answer(log: str) -> dict[str, Any]:
    found = re.findall(r"^ANSWER (.*)$", log, re.M)
    return json.loads(found[-1]) if found else {}


def manual(case: dict[str, str], tmp: str, tol: tuple[float, float]) -> dict[str, Any]:
    """The manual steps in fresh processes; `failed` says which one did not succeed."""
    from aotipre.triage.accuracy import KNOBS

    env = {"TORCHINDUCTOR_CACHE_DIR": tempfile.mkdtemp(prefix="inductor-", dir=tmp)}
    scratch = tempfile.mkdtemp(prefix="scratch-", dir=tmp)
    pkg = os.path.join(tmp, "printer.pt2")
    out: dict[str, Any] = {"failed": ""}
    ep, inputs = case["ep"], case["inputs"]
    out["printer_s"], rc, log = fresh(PRINTER, ep, inputs, pkg, env=env, cwd=scratch)
    log_path = os.path.join(tmp, "printer.log")
    Path(log_path).write_text(log)
    if rc != 0 or "Saved tensor to" not in log:
        out["failed"] = f"printer (exit {rc}): {log[-1500:]}"
        return out
    rtol, atol = str(tol[0]), str(tol[1])
    out["compare_s"], rc, log = fresh(COMPARE, ep, inputs, pkg, log_path, rtol, atol, env=env)
    found = answer(log)
    if rc != 0 or not found.get("kernel"):
        out["failed"] = f"compare (exit {rc}): {log[-1500:]}"
        return out
    out.update(kernel=found["kernel"], nodes=found["nodes"], kernel_max_abs=found["max_abs"])
    out["knobs"] = []
    for knob in [k for k in KNOBS if k.device in ("any", "cpu")]:  # the CPU ladder
        configs = json.dumps(dict(knob.configs))
        path = os.path.join(tmp, f"{knob.id}.pt2")
        took, rc, log = fresh(KNOB, ep, inputs, path, configs, rtol, atol, env=env)
        trial = answer(log)
        if rc != 0 or not trial:
            out["failed"] = f"rebuild {knob.id} (exit {rc}): {log[-1500:]}"
            return out
        out["knobs"].append({"knob": knob.id, "s": took, **trial})
    out["cause"] = next((k["knob"] for k in out["knobs"] if k["matches"]), None)
    out["rebuilds_s"] = sum(k["s"] for k in out["knobs"])
    out["named_proven_s"] = out["printer_s"] + out["compare_s"] + out["rebuilds_s"]
    upto = [k["knob"] for k in out["knobs"]].index(out["cause"]) + 1 if out["cause"] else 3
    out["named_proven_first_cause_s"] = (
        out["printer_s"] + out["compare_s"] + sum(k["s"] for k in out["knobs"][:upto])
    )
    return out


class Host:
    """What aotipre's side starts each repeat with: an empty inductor cache and an aotipre cache
    holding nothing but, unless `first_check`, the host's record (runner/loadcost.py: torch's
    CPU-ISA probe and the loader's imports, measured once per host by its first check; keyed by
    TORCHINDUCTOR_CACHE_DIR among others, so that folder keeps its path and loses its content)."""

    def __init__(self, tmp: str, first_check: bool) -> None:
        self.tmp = tmp
        self.inductor = os.path.join(tmp, "inductor-aotipre")
        self.seed = None if first_check else os.path.join(tmp, "aotipre-seed")

    def record(self, case: dict[str, str]) -> str:
        """Make the host's record with two checks that do not escalate (the first one's probe
        builds its check programs into the empty inductor cache, and such a measure is not
        kept); '' when it exists, else why not."""
        if self.seed is None:
            return ""
        self.fresh_inductor()
        for _ in range(2):
            argv = [sys.executable, "-m", "aotipre", "check", case["pkg"], "--inputs",
                    case["inputs"], "--exported-program", case["ep"], "--no-escalate",
                    "--no-config", "--no-progress", "--cache-dir", self.seed]  # fmt: skip
            env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": self.inductor, "PYTHONPATH": str(REPO)}
            subprocess.run(argv, env=env, capture_output=True, timeout=900)
        folder = os.path.join(self.seed, "loadcost")
        return "" if os.path.isdir(folder) and os.listdir(folder) else "no record was kept"

    def fresh_inductor(self) -> str:
        shutil.rmtree(self.inductor, ignore_errors=True)
        os.makedirs(self.inductor)
        return self.inductor

    def fresh_cache(self) -> str:
        cache = tempfile.mkdtemp(prefix="aotipre-cache-", dir=self.tmp)
        if self.seed is not None:
            shutil.copytree(os.path.join(self.seed, "loadcost"), os.path.join(cache, "loadcost"))
        return cache


def aotipre_side(
    case: dict[str, str], tmp: str, tol: tuple[float, float], host: Host
) -> dict[str, Any]:
    """`aotipre check` in a fresh process, its stage lines stamped as they arrive."""
    record = os.path.join(tmp, "record.json")
    report = os.path.join(tmp, "report.json")
    argv = [
        sys.executable,
        "-c",
        HOOK,
        record,
        "check",
        case["pkg"],
        "--inputs",
        case["inputs"],
        "--exported-program",
        case["ep"],
        "--rtol",
        str(tol[0]),
        "--atol",
        str(tol[1]),
        "--no-config",
        "--progress",
        "--cache-dir",
        host.fresh_cache(),
        "--format",
        "json",
        "--output",
        report,
    ]
    env = {
        **os.environ,
        "TORCHINDUCTOR_CACHE_DIR": host.fresh_inductor(),
        "PYTHONPATH": str(REPO),
    }
    lines: list[tuple[float, str]] = []
    started = time.time()
    proc = subprocess.Popen(
        argv, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, env=env
    )
    assert proc.stderr is not None

    def read() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.append((time.time(), line.rstrip()))

    reader = threading.Thread(target=read)
    reader.start()
    code = proc.wait(timeout=1800)
    reader.join()
    total = time.time() - started
    out: dict[str, Any] = {"exit": code, "check_total_s": total, "failed": ""}
    try:
        rec = json.loads(Path(record).read_text())
        data = json.loads(Path(report).read_text())
    except (OSError, ValueError) as exc:
        out["failed"] = f"no report ({exc}): " + "\n".join(x for _, x in lines[-30:])
        return out
    differ = next(
        (t for t, x in lines if x.endswith(" compare done") or " compare done (" in x), None
    )
    proven = next((t for t, x in lines if ": accuracy: cause proven: " in x), None)
    diag = (data.get("accuracy") or [None])[0]
    if differ is None or "end" not in rec or not diag:
        out["failed"] = "no accuracy diagnosis: " + "\n".join(x for _, x in lines[-30:])
        return out
    out.update(
        # the moment the kernel is named and its cause proven: its progress line (the verified
        # repro may follow), else the end of triage
        named_proven_s=(proven if proven is not None else rec["end"]) - differ,
        differ_to_end_s=rec["end"] - differ,
        triage_s=rec["end"] - rec["start"],
        before_differ_s=differ - started,
        kernel=diag.get("kernel"),
        localized_on=diag.get("localized_on"),
        cause=diag.get("cause"),
        nodes=diag.get("nodes"),
        trials=[(t["knob"], t["verdict"], t.get("seconds")) for t in diag.get("trials") or []],
        jobs=rec["jobs"],
        codes=[f["code"] for f in data.get("findings") or []],
        events=[f"{t - started:7.2f} {x}" for t, x in lines],
    )
    return out


def machine() -> dict[str, Any]:
    cpu = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    commit = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    )
    dirty = subprocess.run(
        ["git", "-C", str(REPO), "status", "--porcelain", "--untracked-files=no"],
        capture_output=True,
        text=True,
    )
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "load_avg": os.getloadavg(),
        "python": platform.python_version(),
        "torch": torch_version(),
        "commit": commit.stdout.strip() + ("+changes" if dirty.stdout.strip() else ""),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", choices=("bf16", "blocks"), default="bf16")
    ap.add_argument("--blocks", type=int, default=6, help="blocks of the `blocks` model")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", help="also write the results here")
    ap.add_argument(
        "--first-check",
        action="store_true",
        help="aotipre without the host's record: its first check on this host, which measures "
        "torch's CPU-ISA probe before triage's compiles can use its answer",
    )
    opts = ap.parse_args()

    tol = BF16_TOLERANCE
    tmp = tempfile.mkdtemp(prefix="aotipre-bench-accuracy-")
    try:
        took, rc, log = fresh(
            BUILD,
            tmp,
            opts.model,
            str(opts.blocks),
            str(REPO / "tests" / "triage"),
            env={"TORCHINDUCTOR_CACHE_DIR": os.path.join(tmp, "build-cache")},
        )
        if rc != 0:
            print(f"building the model failed:\n{log[-3000:]}", file=sys.stderr)
            return 1
        case = {k: os.path.join(tmp, f"{k if k != 'pkg' else 'aoti'}.pt2") for k in ("ep", "pkg")}
        case["inputs"] = os.path.join(tmp, "inputs.pt")
        print(f"built the {opts.model} model in {took:.1f} s (not timed)", flush=True)
        host = Host(tmp, opts.first_check)
        why = host.record(case)
        if why:
            print(f"refused: the host's record could not be made: {why}", file=sys.stderr)
            return 1
        rows: list[dict[str, Any]] = []
        for i in range(opts.repeat):
            row: dict[str, Any] = {}
            order = ("manual", "aotipre") if i % 2 == 0 else ("aotipre", "manual")
            for side in order:
                work = tempfile.mkdtemp(prefix=f"{side}{i}-", dir=tmp)
                row[side] = (
                    manual(case, work, tol)
                    if side == "manual"
                    else aotipre_side(case, work, tol, host)
                )
                shown = {k: v for k, v in row[side].items() if k not in ("events",)}
                print(f"repeat {i + 1} {side}: {json.dumps(shown)}", flush=True)
                if row[side]["failed"]:
                    print(
                        f"refused: the {side} side failed: {row[side]['failed']}", file=sys.stderr
                    )
                    return 1
            m, a = row["manual"], row["aotipre"]
            if (m["kernel"], m["cause"]) != (a["kernel"], a["cause"]):
                print(
                    f"refused: the sides disagree: manual {m['kernel']} / {m['cause']}, "
                    f"aotipre {a['kernel']} / {a['cause']}",
                    file=sys.stderr,
                )
                return 1
            rows.append(row)

        def med(side: str, key: str) -> float:
            return statistics.median(float(r[side][key]) for r in rows)

        summary: dict[str, Any] = {
            "model": opts.model,
            "repeat": opts.repeat,
            "host_record": not opts.first_check,
            **machine(),
        }
        if opts.model == "blocks":
            summary["blocks"] = opts.blocks
        summary.update(
            kernel=rows[-1]["aotipre"]["kernel"],
            cause=rows[-1]["aotipre"]["cause"],
            localized_on=sorted({str(r["aotipre"].get("localized_on")) for r in rows}),
            manual_printer_s=med("manual", "printer_s"),
            manual_compare_s=med("manual", "compare_s"),
            manual_rebuilds_s=med("manual", "rebuilds_s"),
            manual_named_proven_s=med("manual", "named_proven_s"),
            manual_named_proven_first_cause_s=med("manual", "named_proven_first_cause_s"),
            aotipre_named_proven_s=med("aotipre", "named_proven_s"),
            aotipre_differ_to_end_s=med("aotipre", "differ_to_end_s"),
            aotipre_triage_s=med("aotipre", "triage_s"),
            aotipre_check_total_s=med("aotipre", "check_total_s"),
        )
        summary["ratio"] = summary["aotipre_named_proven_s"] / summary["manual_named_proven_s"]
        summary["ratio_with_repro"] = (
            summary["aotipre_differ_to_end_s"] / summary["manual_named_proven_s"]
        )
        summary["ratio_vs_first_cause"] = (
            summary["aotipre_named_proven_s"] / summary["manual_named_proven_first_cause_s"]
        )
        print(json.dumps(summary, indent=1))
        if opts.json:
            Path(opts.json).write_text(json.dumps({"summary": summary, "runs": rows}, indent=1))
        return 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
