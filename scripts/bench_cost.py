"""Cost per package (issue 28): `aotipre check` of healthy packages against the bare deployment
script, both sides in one run.

    python scripts/bench_cost.py                          # CPU: one package x3, 20 packages
    python scripts/bench_cost.py --repeat 5 --json cost.json
    python scripts/bench_cost.py --device cuda --zoo 0    # GPU: one CUDA package built here
    python scripts/bench_cost.py --device cuda --zoo 3 --repeat 1 --also-without-fork-server

The bare script is what a deployment's fresh process does: `import torch`, `torch.load` of the
sample inputs, `torch._inductor.aoti_load_package`, one call (and, on CUDA, a synchronize), run
as `python -c ...` and timed from outside around the whole process, as the check is:
`python -m aotipre check PKG --inputs IN --no-config --no-progress --format json -o FILE`
(every default stage on: load, run, perf with its 20 timed calls, the dynamic-range probes).
Both get the same environment (Python's bytecode cache on: PYTHONDONTWRITEBYTECODE is taken out
of it, unless a figure puts it in) and run alternately, one after the other, `--repeat` times.

Figures, exactly as issue 28 defines them (medians over --repeat):
  check          check wall / bare wall                                 goal <= 0.5
  first check    the host's first check against the bare script on a fresh host: both with
                 an empty inductor cache of their own (TORCHINDUCTOR_CACHE_DIR), the check
                 with an empty aotipre cache too (it measures the loader's imports and torch's
                 CPU-ISA probe beside its first worker and records them), alternating,
                 `--repeat` times                                       goal <= 0.6
  first check, no bytecode   the same pair with PYTHONDONTWRITEBYTECODE=1 on both sides (as in
                 many containers), in the same loop
  probe alone    beside each first-check pair, in the same loop and the same kind of fresh
                 host: the cheapest process that runs torch's CPU-ISA probe (`import torch`,
                 the one module that holds the probe, the `get_device_information("cpu")` call
                 torch's loader makes), over the bare script. Whatever measures the probe in a
                 fresh process pays at least this, so a first check that reports the probe's
                 cost from its own measurement cannot be cheaper than it (no goal: a floor)
  no-perf        with --also-no-perf: `check --no-perf` twice with one empty aotipre cache,
                 the first (no record: its load pays torch's probe and keeps the list alone)
                 and the second (answered from that list); wall and load stage of each
  zoo            one `aotipre check --manifest` of the 20 healthy zoo packages (-j 1) /
                 the sum of 20 bare scripts over the same packages      goal <= 0.4
                 (also shown: the same with -j 2; with --also-without-fork-server, both
                 without the fork server, AOTIPRE_FORK_SERVER=0)

On CUDA the zoo is `--zoo` copies of the CUDA package under distinct names, checked at -j 1
(one GPU), against as many bare scripts.

Packages: `--package PKG --inputs IN` for the one-package figures (e.g. the GPT-like decoder of
fixtures/real_models.py, built by scripts/build_real_models.py); else on CPU the zoo of
fixtures/zoo.py (`--zoo` packages built with the public API into
$TMPDIR/aotipre-bench-cost-zoo, reused while its stamp matches; the healthy ones are used);
`--device cuda` builds one small CUDA package with the public API into $TMPDIR first (not in
fixtures/). Every check's verdict must be pass, and the bare script must succeed: otherwise the
script says so and exits 1.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts"))

import bench_zoo  # noqa: E402 - the zoo builder and its stamp

TIMEOUT_S = 1800
BARE = r"""
import sys, torch
args = torch.load(sys.argv[2], weights_only=True)
kwargs = {}
if isinstance(args, tuple) and len(args) == 2 and isinstance(args[1], dict):
    args, kwargs = args
if not isinstance(args, (tuple, list)):
    args = (args,)
device = sys.argv[3]
if device != "cpu":
    args = tuple(a.to(device) if isinstance(a, torch.Tensor) else a for a in args)
model = torch._inductor.aoti_load_package(sys.argv[1])
out = model(*args, **kwargs)
if device != "cpu":
    torch.cuda.synchronize()
"""
PROBE_ALONE = r"""
import torch._inductor.codecache as codecache
codecache.get_device_information("cpu")
"""
BUILD_CUDA = r"""
import sys, torch
from torch.export import Dim


class Scorer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(1000, 64)
        self.mlp = torch.nn.Sequential(
            torch.nn.Linear(64, 128), torch.nn.GELU(), torch.nn.Linear(128, 8)
        )

    def forward(self, ids, weights):
        return self.mlp(self.emb(ids) * weights.unsqueeze(-1)).sum(1)


torch.manual_seed(0)
model = Scorer().cuda().eval()
ids = torch.randint(0, 1000, (4, 16), device="cuda")
weights = torch.rand(4, 16, device="cuda")
batch = Dim("batch", min=1, max=64)
ep = torch.export.export(model, (ids, weights), dynamic_shapes=({0: batch}, {0: batch}))
torch._inductor.aoti_compile_and_package(ep, package_path=sys.argv[1])
torch.save((ids.cpu(), weights.cpu()), sys.argv[2])
"""


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def timed(
    cmd: list[str], env: dict[str, str], cwd: Path
) -> tuple[float, subprocess.CompletedProcess[str]]:
    started = time.perf_counter()
    proc = subprocess.run(
        cmd, env=env, cwd=cwd, capture_output=True, text=True, timeout=TIMEOUT_S, check=False
    )
    return time.perf_counter() - started, proc


def bare(package: Path, inputs: Path, device: str, env: dict[str, str]) -> float:
    wall, proc = timed(
        [sys.executable, "-c", BARE, str(package), str(inputs), device], env, package.parent
    )
    if proc.returncode != 0:
        raise SystemExit(f"the bare script failed on {package.name}:\n{proc.stderr[-3000:]}")
    return wall


def probe_alone(env: dict[str, str], cwd: Path) -> float:
    wall, proc = timed([sys.executable, "-c", PROBE_ALONE], env, cwd)
    if proc.returncode != 0:
        raise SystemExit(f"the probe alone failed:\n{proc.stderr[-3000:]}")
    return wall


def check(
    args: list[str], env: dict[str, str], cwd: Path, out: Path
) -> tuple[float, dict[str, Any]]:
    cmd = [
        sys.executable,
        "-m",
        "aotipre",
        "check",
        *args,
        "--no-config",
        "--no-progress",
        "--format",
        "json",
        "-o",
        str(out),
    ]
    wall, proc = timed(cmd, env, cwd)
    try:
        report = json.loads(out.read_text())
    except (OSError, ValueError):
        raise SystemExit(
            f"aotipre check wrote no report ({proc.returncode}):\n{proc.stderr[-3000:]}"
        ) from None
    reports = report.get("reports", [report])
    bad = [(r.get("package_path"), r.get("verdict")) for r in reports if r.get("verdict") != "pass"]
    if proc.returncode != 0 or bad:
        raise SystemExit(
            f"aotipre check did not pass ({proc.returncode}): {bad}\n{proc.stderr[-3000:]}"
        )
    return wall, report


def cold_parts(report: dict[str, Any]) -> dict[str, Any]:
    """The perf stage's load breakdown of a one-package report (what a deployment pays)."""
    perf = (report.get("performance") or [{}])[0]
    cold = perf.get("cold") or {}
    keys = (
        "before_load_s",
        "total_s",
        "probe_s",
        "probe_compiles",
        "probe_compiles_failed",
        "probe_measured_at",
        "loader_s",
        "first_call_s",
    )
    return {k: cold.get(k) for k in keys}


def build_cuda(folder: Path, env: dict[str, str]) -> tuple[Path, Path]:
    folder.mkdir(parents=True, exist_ok=True)
    package, inputs = folder / "scorer_cuda.pt2", folder / "scorer_cuda_inputs.pt"
    if not package.is_file() or not inputs.is_file():
        log(f"building a CUDA package into {folder} (public API)")
        wall, proc = timed(
            [sys.executable, "-c", BUILD_CUDA, str(package), str(inputs)], env, folder
        )
        if proc.returncode != 0:
            raise SystemExit(f"building the CUDA package failed:\n{proc.stderr[-3000:]}")
        log(f"built in {wall:.1f} s")
    return package, inputs


def healthy_zoo(folder: Path, n: int, want: int) -> list[tuple[Path, Path]]:
    stamp, _ = bench_zoo.ensure_zoo(folder, n)
    healthy = [e for e in stamp["packages"] if e["expect"] == "pass"]
    if len(healthy) < want:
        raise SystemExit(f"the zoo of {n} has {len(healthy)} healthy packages, {want} wanted")
    return [
        (folder / f"{e['name']}.pt2", folder / f"{e['name']}_inputs.pt") for e in healthy[:want]
    ]


def copies(package: Path, inputs: Path, folder: Path, n: int) -> list[tuple[Path, Path]]:
    """`n` copies of one package under distinct names (a zoo of one model, on CUDA)."""
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for i in range(n):
        copy = folder / f"{package.stem}_{i}.pt2"
        shutil.copy(package, copy)
        out.append((copy, inputs))
    return out


def write_manifest(path: Path, packages: list[tuple[Path, Path]]) -> None:
    lines = []
    for package, inputs in packages:
        lines += ["[[package]]", f'path = "{package}"', f'inputs = "{inputs}"', ""]
    path.write_text("\n".join(lines))


def machine(device: str) -> dict[str, Any]:
    import importlib.metadata

    out: dict[str, Any] = {
        "host": platform.node(),
        "cpu": next(
            (
                line.split(":", 1)[1].strip()
                for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")
            ),
            platform.processor(),
        ),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "torch": importlib.metadata.version("torch"),
        "load_average": os.getloadavg(),
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
    }
    if device.startswith("cuda"):
        proc = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            check=False,
        )
        out["gpu"] = proc.stdout.strip()
    return out


def first_check(
    package: Path,
    inputs: Path,
    one: list[str],
    opts: argparse.Namespace,
    env: dict[str, str],
    work: Path,
) -> dict[str, Any]:
    """The host's first check against the bare script on a fresh host, `opts.repeat` times,
    alternating, with bytecode written and then with PYTHONDONTWRITEBYTECODE=1: each run gets
    an empty inductor cache of its own, the check an empty aotipre cache too; with bytecode,
    the probe alone too (PROBE_ALONE, in an empty inductor cache of its own), first or last in
    turn."""
    runs: list[dict[str, Any]] = []
    for i in range(opts.repeat):
        pair: dict[str, Any] = {}
        for kind, extra in (("", {}), ("_no_bytecode", {"PYTHONDONTWRITEBYTECODE": "1"})):
            fresh = work / f"fresh{i}{kind}"
            fresh.mkdir(parents=True)
            bare_env = {**env, **extra, "TORCHINDUCTOR_CACHE_DIR": str(fresh / "bare-inductor")}
            check_env = {**env, **extra, "TORCHINDUCTOR_CACHE_DIR": str(fresh / "inductor")}
            args = [*one[: one.index("--cache-dir")], "--cache-dir", str(fresh / "cache")]
            args += one[one.index("--cache-dir") + 2 :]
            # alternate which side goes first
            sides = ["bare", "check"] if i % 2 == 0 else ["check", "bare"]
            if not kind:
                sides = ["probe", *sides] if i % 2 == 0 else [*sides, "probe"]
            for side in sides:
                if side == "probe":
                    probe_env = {**env, "TORCHINDUCTOR_CACHE_DIR": str(fresh / "probe-inductor")}
                    pair["probe_alone_s"] = probe_alone(probe_env, work)
                elif side == "bare":
                    pair[f"bare{kind}_s"] = bare(package, inputs, opts.device, bare_env)
                else:
                    wall, report = check(args, check_env, work, fresh / "report.json")
                    pair[f"check{kind}_s"] = wall
                    pair[f"cold{kind}"] = cold_parts(report)
            alone = f", probe alone {pair['probe_alone_s']:.2f} s" if not kind else ""
            log(
                f"first check{kind.replace('_', ' ')} {i + 1}: bare {pair[f'bare{kind}_s']:.2f} s, "
                f"check {pair[f'check{kind}_s']:.2f} s{alone}"
            )
        runs.append(pair)
    out: dict[str, Any] = {"first_pairs": runs}
    for kind in ("", "_no_bytecode"):
        b = statistics.median(p[f"bare{kind}_s"] for p in runs)
        c = statistics.median(p[f"check{kind}_s"] for p in runs)
        out[f"first_bare{kind}_s"] = b
        out[f"first_check{kind}_s"] = c
        out[f"ratio_first{kind}"] = c / b
    alone = statistics.median(p["probe_alone_s"] for p in runs)
    out["probe_alone_s"] = alone
    out["ratio_probe_alone"] = alone / out["first_bare_s"]
    return out


def no_perf_pair(one: list[str], env: dict[str, str], work: Path) -> dict[str, Any]:
    """`check --no-perf` on a host without a record, then again (runner/loadcost.py: the first
    keeps its load's ISA list alone, which answers the second's probe)."""
    at = one.index("--cache-dir")
    args = [*one[:at], "--cache-dir", str(work / "no-perf-cache"), *one[at + 2 :], "--no-perf"]
    out: dict[str, Any] = {}
    for name in ("first", "second"):
        wall, report = check(args, env, work, work / f"no-perf-{name}.json")
        load = next(s for s in report["stages"] if s["name"] == "load")
        out[f"no_perf_{name}_s"] = wall
        out[f"no_perf_{name}_load_s"] = load["duration_s"]
        log(f"check --no-perf, {name}: {wall:.2f} s, load stage {load['duration_s']:.2f} s")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--device", default="cpu", help="cpu or cuda")
    ap.add_argument("--repeat", type=int, default=3, help="alternating bare/check pairs")
    ap.add_argument("--zoo", type=int, default=20, help="healthy packages in the zoo run (0: none)")
    ap.add_argument(
        "--build", type=Path, default=Path(tempfile.gettempdir()) / "aotipre-bench-cost"
    )
    ap.add_argument(
        "--also-no-escalate",
        action="store_true",
        help="also time each repeat's check with --no-escalate (on CUDA: without the triage "
        "workers started beside the model's, runner/prewarm.py; what a healthy check pays for "
        "them is the difference)",
    )
    ap.add_argument(
        "--also-without-fork-server",
        action="store_true",
        help="also check the zoo with AOTIPRE_FORK_SERVER=0 (a fresh worker per package)",
    )
    ap.add_argument(
        "--also-no-perf",
        action="store_true",
        help="also time `check --no-perf` twice with one empty aotipre cache (the first pays "
        "torch's CPU-ISA probe and keeps its list, the second is answered from it)",
    )
    ap.add_argument("--package", type=Path, help="the one package (default: the zoo's first)")
    ap.add_argument("--inputs", type=Path, help="its sample inputs (with --package)")
    ap.add_argument("--json", type=Path, help="also write every figure here")
    opts = ap.parse_args(argv)

    env = dict(os.environ)
    env.pop("AOTIPRE_CONFIG", None)
    # bytecode written (Python's default) unless a figure says otherwise
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    work = Path(tempfile.mkdtemp(prefix="bench-cost-"))
    cache = work / "cache"
    result: dict[str, Any] = {"machine": machine(opts.device), "device": opts.device}

    if opts.device.startswith("cuda"):
        package, inputs = build_cuda(opts.build / "cuda", env)
        zoo = copies(package, inputs, work / "copies", opts.zoo)
    elif opts.package is not None and not opts.zoo:
        zoo = []
    else:
        zoo = healthy_zoo(
            opts.build / "zoo", opts.zoo + opts.zoo // 4 + 2 if opts.zoo else 5, max(opts.zoo, 1)
        )
        package, inputs = zoo[0]
    if opts.package is not None:
        if opts.inputs is None:
            raise SystemExit("--package needs --inputs")
        package, inputs = opts.package.resolve(), opts.inputs.resolve()
    result["package"] = str(package)
    one = [str(package), "--inputs", str(inputs), "--cache-dir", str(cache)]
    if opts.device != "cpu":
        one += ["--device", opts.device]

    result.update(first_check(package, inputs, one, opts, env, work))
    if opts.also_no_perf:
        result.update(no_perf_pair(one, env, work))
    # the host's record for the pairs below (untimed): a check whose probe built its check
    # programs (an empty inductor cache) keeps none, so a second one makes it
    for i in range(2):
        _, warm = check(one, env, work, work / f"warm{i}.json")
        if not cold_parts(warm).get("probe_compiles"):
            break

    pairs = []
    for i in range(opts.repeat):
        b = bare(package, inputs, opts.device, env)
        pair: dict[str, Any] = {"bare_s": b}
        # with --also-no-escalate, the two checks alternate which goes first
        order = ["check", "no_escalate"] if i % 2 == 0 else ["no_escalate", "check"]
        for kind in order if opts.also_no_escalate else ["check"]:
            extra = ["--no-escalate"] if kind == "no_escalate" else []
            c, report = check(one + extra, env, work, work / f"{kind}{i}.json")
            pair[f"{kind}_s"] = c
            if kind == "check":
                pair["cold"] = cold_parts(report)
        pairs.append(pair)
        shown = f" (--no-escalate {pair['no_escalate_s']:.2f} s)" if "no_escalate_s" in pair else ""
        log(f"repeat {i + 1}: bare {b:.2f} s, check {pair['check_s']:.2f} s{shown}")
    bare_s = statistics.median(p["bare_s"] for p in pairs)
    check_s = statistics.median(p["check_s"] for p in pairs)
    result.update(pairs=pairs, bare_s=bare_s, check_s=check_s, ratio_check=check_s / bare_s)
    if opts.also_no_escalate:
        quiet_s = statistics.median(p["no_escalate_s"] for p in pairs)
        result.update(check_no_escalate_s=quiet_s, escalation_cost_s=check_s - quiet_s)

    if opts.zoo:
        manifest = work / "healthy.toml"
        write_manifest(manifest, zoo)
        bare_total = 0.0
        for pkg, inp in zoo:
            bare_total += bare(pkg, inp, opts.device, env)
        log(f"{len(zoo)} bare scripts: {bare_total:.2f} s")
        runs: dict[str, float] = {}
        widths = ("1",) if opts.device.startswith("cuda") else ("1", "2")  # one GPU: -j 1
        kinds = [(jobs, True) for jobs in widths]
        if opts.also_without_fork_server:
            kinds += [(jobs, False) for jobs in widths]
        for jobs, forked in kinds:
            name = f"{jobs}" if forked else f"{jobs}_fresh"
            wall, _ = check(
                ["--manifest", str(manifest), "-j", jobs, "--cache-dir", str(cache)],
                env if forked else {**env, "AOTIPRE_FORK_SERVER": "0"},
                work,
                work / f"zoo-j{name}.json",
            )
            runs[name] = wall
            log(
                f"one check of {len(zoo)} packages, -j {jobs}"
                f"{'' if forked else ', no fork server'}: {wall:.2f} s "
                f"({wall / bare_total:.2f}x)"
            )
        result.update(
            zoo_packages=len(zoo),
            zoo_bare_total_s=bare_total,
            **{f"zoo_check_j{jobs}_s": runs[jobs] for jobs in widths},
            **{f"ratio_zoo_j{jobs}": runs[jobs] / bare_total for jobs in widths},
        )
        for jobs in widths if opts.also_without_fork_server else ():
            result[f"zoo_check_j{jobs}_no_fork_server_s"] = runs[f"{jobs}_fresh"]
            result[f"ratio_zoo_j{jobs}_no_fork_server"] = runs[f"{jobs}_fresh"] / bare_total

    print(json.dumps(result, indent=1))
    if opts.json:
        opts.json.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
