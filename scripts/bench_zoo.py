"""Zoo benchmark (issue 25): one zoo of small real packages checked sequentially, with `-j 2`,
as 2 CI shards + `aotipre merge`, and with `--engine ray` on this machine, all in one run.

    python scripts/bench_zoo.py                                  # 20 packages, every mode
    python scripts/bench_zoo.py --packages 20 --repeat 3 --json zoo.json
    python scripts/bench_zoo.py --packages 2 --modes seq,shards  # quick

The zoo (fixtures/zoo.py): N packages of seven architectures built with the public API
(`torch.export.export` + `aoti_compile_and_package`) in one fresh interpreter, each with a
sample-inputs file, listed in `zoo.toml`; about one in five has inputs the package refuses for
a real reason, so the verdicts are mixed. It is built once into `--build` (default
`$TMPDIR/aotipre-bench-zoo`) and reused while its stamp (zoo.json: torch version, N,
fixtures/zoo.py's digest) matches.

Every mode runs the CLI in a fresh process, timed with time.perf_counter around it, with the
same options (`--no-config --format json --no-progress --no-probe --no-perf --no-escalate`):
  seq     `-j 1`
  j2      `-j 2`
  ray     `--engine ray -j 2` with a private local Ray (no --address: it gets 2 CPUs), right
          after j2; then, to measure Ray's own cost directly, a local `-j 2 --static-only` and
          `--engine ray -j 2 --static-only` (the checks are then ~instant: what is left is the
          engine). The ray runs get RAY_AUTH_MODE=token and a token of the run in their
          environment (not with --ray-as-is; see RAY_TOKEN).
  ray-head `--engine ray --address 127.0.0.1:PORT -j 2` against a Ray head this script starts
          for it (`ray start --head --num-cpus=2`, untimed: a cluster that is already running,
          as a team's is) and stops after it; right after a j2 run of its own, without the head.
          Then, with the head still up, a local `-j 2 --static-only` and the same through the
          head: their difference is the engine's fixed cost, with no check to hide it.
  shards  `--shard 1/2` and `--shard 2/2` at the same time (two CI jobs), each `-j 1`; the wall
          is until both are done. Then `aotipre merge` of their two JSON reports, timed alone
          (median of --merge-runs), and the CLI's start alone (`import aotipre.cli.app`).
Every mode must give every package the sequential run's verdict and the same exit code (the
merged report for shards; the static pair against each other), and the sequential run the
zoo's expected verdicts: a mismatch is printed and the script exits 1.

Goals, as issue 25 defines them (both sides from the same run, medians over --repeat):
  j2 ~ ray     max(ray, j2) / min(ray, j2) - 1 <= 10 %  (each of ray and ray-head)
  ray cost     (ray wall - j2 wall) / N <= 0.5 s per package  (each of ray and ray-head)
               (also shown for ray-head, not a goal: (ray static - local static) / j2 wall,
               the share of the 10% that Ray's fixed cost takes alone)
               (also shown, not a goal: (ray static - local static) / N, the direct measure)
  merge        `aotipre merge` of 2 shards x 10 packages < 1 s (N = 20)
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.metadata
import json
import os
import platform
import secrets
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
ZOO_BUILDER = REPO / "fixtures" / "zoo.py"
STAMP = "zoo.json"
MANIFEST = "zoo.toml"
MODES = ("seq", "j2", "shards", "ray", "ray-head")
COMMON = (
    "--no-config",
    "--format",
    "json",
    "--no-progress",
    "--no-probe",
    "--no-perf",
    "--no-escalate",
)
"""Options of every timed check: the same small check of each package in every mode."""
CLEAN_ENV = (
    "AOTIPRE_SHARD",
    "AOTIPRE_SHARD_COUNT",
    "BUILDKITE_PARALLEL_JOB",
    "BUILDKITE_PARALLEL_JOB_COUNT",
    "JOB_COMPLETION_INDEX",
    "SLURM_ARRAY_TASK_ID",
    "SLURM_ARRAY_TASK_MIN",
    "SLURM_ARRAY_TASK_STEP",
    "SLURM_ARRAY_TASK_COUNT",
    "GITHUB_STEP_SUMMARY",
)
GOAL_SPREAD = 0.10
GOAL_RAY_COST_S = 0.5
GOAL_MERGE_S = 1.0
GOAL_MERGE_N = 20
TIMEOUT_S = 3600


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------
# The zoo


def recipe_digest() -> str:
    import hashlib

    return hashlib.sha256(ZOO_BUILDER.read_bytes()).hexdigest()


def _same_torch(built_by: object) -> bool:
    """Whether the zoo's builder (its `torch.__version__`) is the installed torch. The installed
    distribution's version is read without importing torch; the wheels of the registry's default
    index leave the local label out of it (`2.11.0` for torch 2.11.0+cu130), the CPU index's
    keep it (`2.13.0+cpu`)."""
    installed = importlib.metadata.version("torch")
    if not isinstance(built_by, str):
        return False
    return built_by == installed or ("+" not in installed and built_by.split("+")[0] == installed)


def zoo_stamp(folder: Path, n: int) -> dict[str, Any] | None:
    """The stamp of a complete zoo of `n` packages in `folder` built by this torch and this
    recipe; None when there is none (or it is of another torch, N or recipe, or a file is
    missing)."""
    try:
        stamp = json.loads((folder / STAMP).read_text())
    except (OSError, ValueError):
        return None
    if (
        not isinstance(stamp, dict)
        or not _same_torch(stamp.get("torch"))
        or stamp.get("n") != n
        or stamp.get("recipe") != recipe_digest()
        or not (folder / MANIFEST).is_file()
    ):
        return None
    for entry in stamp.get("packages", []):
        for suffix in (".pt2", "_inputs.pt"):
            if not (folder / f"{entry['name']}{suffix}").is_file():
                return None
    return stamp


def ensure_zoo(folder: Path, n: int, rebuild: bool = False) -> tuple[dict[str, Any], bool]:
    """(the zoo's stamp, whether it was built now): built in one fresh interpreter
    (fixtures/zoo.py) unless `folder` already holds it."""
    stamp = None if rebuild else zoo_stamp(folder, n)
    if stamp is not None:
        log(f"zoo: {n} packages in {folder} (cached, torch {stamp['torch']})")
        return stamp, False
    folder.mkdir(parents=True, exist_ok=True)
    for stale in (*folder.glob("p[0-9]*_*.pt2"), *folder.glob("p[0-9]*_*_inputs.pt")):
        stale.unlink()
    log(f"zoo: building {n} packages into {folder} (one interpreter, ~8 s a package)")
    proc = subprocess.run(
        [sys.executable, str(ZOO_BUILDER), str(folder), str(n)],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
    )
    for line in proc.stdout.splitlines():
        log(line)
    stamp = zoo_stamp(folder, n)
    if proc.returncode != 0 or stamp is None:
        raise SystemExit(f"building the zoo failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
    return stamp, True


# ---------------------------------------------------------------------------------------------
# The runs


RAY_TOKEN: dict[str, str] = {}
"""Set by main (unless --ray-as-is) for the `--engine ray` runs: token authentication with a
token of this run, in the CLI's environment from its start. aotipre's engine sets the same for
a private local Ray, but after `import ray`, and Ray 2.60's driver reads RAY_AUTH_MODE at
import: its local Ray then fails to start (InvalidAuthToken, "Failed to start GCS")."""


def environment(ray: bool = False) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in CLEAN_ENV}
    return {**env, **RAY_TOKEN} if ray else env


def ray_token() -> dict[str, str]:
    """What RAY_TOKEN holds: nothing when the user configured Ray's authentication."""
    configured = ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH")
    if any(k in os.environ for k in configured) or Path("~/.ray/auth_token").expanduser().exists():
        return {}
    return {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(32)}


def check_cmd(out: Path, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "aotipre",
        "check",
        "--manifest",
        MANIFEST,
        *COMMON,
        "-o",
        str(out),
        *extra,
    ]


def read_report(path: Path) -> dict[str, Any]:
    """verdicts (package path -> verdict), exit code and totals of one JSON report."""
    data = json.loads(path.read_text())
    reports = data.get("reports", [])
    verdicts = {r["package_path"]: r["verdict"] for r in reports}
    busy = sum(float(s.get("duration_s") or 0.0) for r in reports for s in r.get("stages", []))
    return {
        "report_exit_code": data.get("exit_code"),
        "verdicts": verdicts,
        "counts": dict(Counter(verdicts.values())),
        "stages_s": round(busy, 3),
    }


def finished(name: str, returncode: int, stderr: str | None, out: Path) -> None:
    """A run that gave no verdict (exit 2 or worse, or no report) ends the benchmark."""
    if returncode not in (0, 1) or not out.is_file():
        raise SystemExit(
            f"{name}: exit {returncode}, report {'written' if out.is_file() else 'missing'}"
            f"\n{(stderr or '')[-4000:]}"
        )


def run_check(name: str, zoo: Path, out: Path, *extra: str) -> dict[str, Any]:
    """One timed `aotipre check` of the zoo: wall seconds, exit code, verdicts."""
    cmd = check_cmd(out, *extra)
    started = time.perf_counter()
    proc = subprocess.run(
        cmd,
        cwd=zoo,
        env=environment(ray="ray" in extra),
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
    )
    wall = time.perf_counter() - started
    finished(name, proc.returncode, proc.stderr, out)
    result = {"wall_s": round(wall, 3), "exit_code": proc.returncode, **read_report(out)}
    log(f"  {name}: {wall:.2f} s, exit {proc.returncode}, {result['counts']}")
    return result


def run_shards(zoo: Path, folder: Path, merge_runs: int) -> dict[str, Any]:
    """Two shard jobs at once (`-j 1` each), then `aotipre merge` of their reports (timed
    alone, median of `merge_runs`): the merged report's verdicts and exit code."""
    outs = [folder / f"shard-{i}.json" for i in (1, 2)]
    env = environment()
    started = time.perf_counter()
    procs = [
        subprocess.Popen(
            check_cmd(out, "-j", "1", "--shard", f"{i}/2"),
            cwd=zoo,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i, out in zip((1, 2), outs)
    ]
    each = [0.0, 0.0]
    errs = ["", ""]

    def wait(k: int) -> None:  # each shard's own end, whichever ends first
        errs[k] = procs[k].communicate(timeout=TIMEOUT_S)[1]
        each[k] = time.perf_counter() - started

    waiters = [threading.Thread(target=wait, args=(k,)) for k in (0, 1)]
    for t in waiters:
        t.start()
    for t in waiters:
        t.join()
    wall = time.perf_counter() - started
    for i, (proc, out) in enumerate(zip(procs, outs), 1):
        finished(f"shard {i}/2", proc.returncode, errs[i - 1], out)
    shard_info = [
        {
            "exit_code": p.returncode,
            "wall_s": round(w, 3),
            "packages": len(read_report(o)["verdicts"]),
        }
        for p, w, o in zip(procs, each, outs)
    ]
    merged = folder / "merged.json"
    cmd = [
        sys.executable,
        "-m",
        "aotipre",
        "merge",
        *map(str, outs),
        "--expect-shards",
        "2",
        "--format",
        "json",
        "-o",
        str(merged),
    ]
    merge_walls = []
    rc = None
    for _ in range(max(1, merge_runs)):
        t0 = time.perf_counter()
        done = subprocess.run(
            cmd, cwd=zoo, env=env, capture_output=True, text=True, timeout=600, check=False
        )
        merge_walls.append(time.perf_counter() - t0)
        finished("merge", done.returncode, done.stderr, merged)
        rc = done.returncode
    imports = []
    for _ in range(max(1, merge_runs)):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import aotipre.cli.app"], env=env, check=True)
        imports.append(time.perf_counter() - t0)
    result = {
        "wall_s": round(wall, 3),
        "exit_code": rc,
        "shards": shard_info,
        "cli_import_s": round(statistics.median(imports), 3),
        "merge_s": round(statistics.median(merge_walls), 3),
        "merge_runs_s": [round(w, 3) for w in merge_walls],
        **read_report(merged),
    }
    each_s = ", ".join(f"{s['wall_s']:.2f}" for s in shard_info)
    log(
        f"  shards: {wall:.2f} s ({each_s}), merge {result['merge_s']:.2f} s, exit {rc}, "
        f"{result['counts']}"
    )
    return result


def run_once(zoo: Path, folder: Path, modes: list[str], merge_runs: int) -> dict[str, Any]:
    folder.mkdir(parents=True, exist_ok=True)
    runs: dict[str, Any] = {}
    if "seq" in modes:
        runs["seq"] = run_check("seq", zoo, folder / "seq.json", "-j", "1")
    if "j2" in modes:
        runs["j2"] = run_check("j2", zoo, folder / "j2.json", "-j", "2")
    if "ray" in modes:  # right after -j 2: the two it is compared with run side by side
        runs["ray"] = run_check("ray", zoo, folder / "ray.json", "--engine", "ray", "-j", "2")
        runs["j2_static"] = run_check(
            "j2 static", zoo, folder / "j2_static.json", "-j", "2", "--static-only"
        )
        runs["ray_static"] = run_check(
            "ray static",
            zoo,
            folder / "ray_static.json",
            "--engine",
            "ray",
            "-j",
            "2",
            "--static-only",
        )
    if "ray-head" in modes:  # its own -j 2 right before, without the head (see ray_head)
        runs["j2_head"] = run_check("j2 (head's pair)", zoo, folder / "j2_head.json", "-j", "2")
        with ray_head() as address:
            runs["ray_head"] = run_check(
                "ray head", zoo, folder / "ray_head.json", "--engine", "ray", "--address",
                address, "-j", "2",
            )  # fmt: skip
            # the same pair with the checks ~instant: what is left is the engine's fixed cost
            runs["j2_head_static"] = run_check(
                "j2 static (head's pair)", zoo, folder / "j2_head_static.json", "-j", "2",
                "--static-only",
            )  # fmt: skip
            runs["ray_head_static"] = run_check(
                "ray head static", zoo, folder / "ray_head_static.json", "--engine", "ray",
                "--address", address, "-j", "2", "--static-only",
            )  # fmt: skip
    if "shards" in modes:
        runs["shards"] = run_shards(zoo, folder, merge_runs)
    return runs


@contextlib.contextmanager
def ray_head() -> Iterator[str]:
    """A Ray head on this machine (2 CPUs, no GPU, no dashboard; the runs' token), up before
    the block (untimed) and stopped after it: its process group, then anything it started."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    temp = tempfile.mkdtemp(prefix="aotipre-bh-", dir="/tmp")  # Ray's socket paths are short
    log_file = Path(temp) / "head.log"
    args = [str(Path(sys.executable).with_name("ray")), "start", "--head", "--block",
            f"--port={port}", "--num-cpus=2", "--num-gpus=0", "--include-dashboard=false",
            f"--temp-dir={temp}", "--disable-usage-stats"]  # fmt: skip
    with open(log_file, "wb") as out:
        head = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT,
                                env=environment(ray=True), start_new_session=True)  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while "Ray runtime started" not in log_file.read_text(errors="replace"):
            if head.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"the Ray head did not start:\n{log_file.read_text()[-2000:]}")
            time.sleep(0.2)
        yield f"127.0.0.1:{port}"
    finally:
        started = _descendants({head.pid})
        with contextlib.suppress(ProcessLookupError):
            os.killpg(head.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            head.wait(timeout=5)
        for pid in _descendants(started):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            head.wait(timeout=5)
        shutil.rmtree(temp, ignore_errors=True)


def _descendants(pids: set[int]) -> set[int]:
    """`pids` and every process below them (from /proc)."""
    found = set(pids)
    while True:
        more = set()
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit() and int(entry.name) not in found:
                with contextlib.suppress(OSError, IndexError, ValueError):
                    if int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) in found:
                        more.add(int(entry.name))
        if not more:
            return found
        found |= more


# ---------------------------------------------------------------------------------------------
# Consistency, figures, goals


def compare(
    name: str, reference: dict[str, Any], other: dict[str, Any], ref_name: str
) -> list[str]:
    """Lines for every package whose verdict differs (or that one side lacks), and for a
    different exit code; none when `other` agrees with `reference`."""
    out = []
    mine, theirs = reference["verdicts"], other["verdicts"]
    for pkg in sorted(set(mine) | set(theirs)):
        a, b = mine.get(pkg, "missing"), theirs.get(pkg, "missing")
        if a != b:
            out.append(f"{name}: {pkg} is {b}, {ref_name} says {a}")
    if reference["exit_code"] != other["exit_code"]:
        out.append(f"{name}: exit {other['exit_code']}, {ref_name} exits {reference['exit_code']}")
    return out


def mismatches(runs: dict[str, Any], stamp: dict[str, Any]) -> list[str]:
    """Every mode against the sequential run (the first mode run when there is none), the
    static pair against each other, and the sequential run against the zoo's expectations."""
    out: list[str] = []
    main = [m for m in ("seq", "j2", "shards", "ray") if m in runs]
    if main:
        ref = main[0]
        for mode in main[1:]:
            out += compare(mode, runs[ref], runs[mode], ref)
        expected = {f"{e['name']}.pt2": e["expect"] for e in stamp["packages"]}
        want = {"verdicts": expected, "exit_code": 1 if "fail" in expected.values() else 0}
        out += compare(ref, want, runs[ref], "the zoo")
    if "ray_static" in runs and "j2_static" in runs:
        out += compare("ray_static", runs["j2_static"], runs["ray_static"], "j2_static")
    if "ray_head" in runs and "j2_head" in runs:
        out += compare("ray_head", runs["j2_head"], runs["ray_head"], "j2_head")
    if "ray_head_static" in runs and "j2_head_static" in runs:
        out += compare(
            "ray_head_static", runs["j2_head_static"], runs["ray_head_static"], "j2_head_static"
        )
    return out


def median_runs(repeats: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per mode: the median wall (and merge) over the repeats, and every repeat's figures."""
    out: dict[str, dict[str, Any]] = {}
    for mode in repeats[0]:
        rows = [r[mode] for r in repeats]
        entry = {"wall_s": round(statistics.median(r["wall_s"] for r in rows), 3)}
        for key in ("merge_s", "cli_import_s"):
            if key in rows[0]:
                entry[key] = round(statistics.median(r[key] for r in rows), 3)
        entry.update(
            exit_code=rows[0]["exit_code"],
            counts=rows[0]["counts"],
            stages_s=round(statistics.median(r["stages_s"] for r in rows), 3),
            runs=[{k: v for k, v in r.items() if k != "verdicts"} for r in rows],
            verdicts=rows[0]["verdicts"],
        )
        out[mode] = entry
    return out


def goal(name: str, value: float | None, limit: float, unit: str, note: str = "") -> dict[str, Any]:
    ok = None if value is None else value <= limit
    return {
        "goal": name,
        "value": None if value is None else round(value, 4),
        "limit": limit,
        "unit": unit,
        "result": "n/a" if ok is None else ("PASS" if ok else "MISS"),
        "note": note,
    }


def figures_and_goals(modes: dict[str, Any], n: int) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    wall = {m: v["wall_s"] for m, v in modes.items()}
    fig: dict[str, Any] = {f"{m}_wall_s": w for m, w in wall.items()}
    if "seq" in wall:
        for m in ("j2", "shards", "ray"):
            if m in wall:
                fig[f"speedup_{m}_vs_seq"] = round(wall["seq"] / wall[m], 3)
    spread = cost = direct = merge = None
    if "j2" in wall and "ray" in wall:
        spread = max(wall["ray"], wall["j2"]) / min(wall["ray"], wall["j2"]) - 1
        cost = (wall["ray"] - wall["j2"]) / n
        fig.update(ray_vs_j2_spread=round(spread, 4), ray_cost_per_package_s=round(cost, 4))
    if "ray_static" in wall and "j2_static" in wall:
        direct = (wall["ray_static"] - wall["j2_static"]) / n
        fig["ray_cost_static_per_package_s"] = round(direct, 4)
    head_spread = head_cost = None
    if "ray_head" in wall and "j2_head" in wall:
        head_spread = (
            max(wall["ray_head"], wall["j2_head"]) / min(wall["ray_head"], wall["j2_head"]) - 1
        )
        head_cost = (wall["ray_head"] - wall["j2_head"]) / n
        fig.update(
            ray_head_vs_j2_spread=round(head_spread, 4),
            ray_head_cost_per_package_s=round(head_cost, 4),
        )
    head_fixed = None
    if "ray_head_static" in wall and "j2_head_static" in wall and "j2_head" in wall:
        fixed = wall["ray_head_static"] - wall["j2_head_static"]
        head_fixed = fixed / wall["j2_head"]
        fig.update(ray_head_fixed_s=round(fixed, 3), ray_head_fixed_share=round(head_fixed, 4))
    if "shards" in modes:
        merge = modes["shards"]["merge_s"]
        fig["merge_s"] = merge
        fig["cli_import_s"] = modes["shards"]["cli_import_s"]
    size = "" if n == GOAL_MERGE_N else f"measured at {n} packages, not the goal's {GOAL_MERGE_N}"
    goals = [
        goal("-j 2 and Ray within 10% (max/min - 1)", spread, GOAL_SPREAD, "fraction"),
        goal("Ray's own overhead per package ((ray - j2) / N)", cost, GOAL_RAY_COST_S, "s"),
        goal(
            "Ray's overhead, direct ((ray - local) --static-only / N)",
            direct,
            GOAL_RAY_COST_S,
            "s",
            "supplementary measure, not the issue's definition",
        ),
        goal(
            "-j 2 and Ray within 10%, a running Ray head (max/min - 1)",
            head_spread,
            GOAL_SPREAD,
            "fraction",
        ),
        goal("Ray's own overhead per package, a running head", head_cost, GOAL_RAY_COST_S, "s"),
        goal(
            "Ray's fixed cost alone, a running head ((ray - local) --static-only / j2 wall)",
            head_fixed,
            GOAL_SPREAD,
            "fraction",
            "supplementary: what the 10% spread must also hold, with no check at all",
        ),
        goal("merge of 2 shards", merge, GOAL_MERGE_S, "s", size),
    ]
    return fig, goals


# ---------------------------------------------------------------------------------------------
# Machine, output


def machine() -> dict[str, Any]:
    out: dict[str, Any] = {
        "host": platform.node(),
        "cpu": None,
        "cpus": os.cpu_count(),
        "cpus_usable": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "memory_gib": None,
        "python": platform.python_version(),
        "loadavg_start": os.getloadavg(),
    }
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                out["cpu"] = line.split(":", 1)[1].strip()
                break
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                out["memory_gib"] = round(int(line.split()[1]) / 2**20, 1)
    except OSError:
        pass
    for dist in ("torch", "ray", "aotipre"):
        try:
            out[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            out[dist] = None
    return out


LABELS = {
    "seq": "sequential `-j 1`",
    "j2": "`-j 2`",
    "shards": "2 shards at once (`-j 1` each)",
    "ray": "`--engine ray -j 2` (local Ray)",
    "j2_static": "`-j 2 --static-only`",
    "ray_static": "`--engine ray -j 2 --static-only`",
    "j2_head": "`-j 2` (the running head's pair, without the head)",
    "ray_head": "`--engine ray --address HEAD -j 2` (a running Ray head, 2 CPUs)",
    "j2_head_static": "`-j 2 --static-only` (beside the running head)",
    "ray_head_static": "`--engine ray --address HEAD -j 2 --static-only`",
}


def markdown(result: dict[str, Any]) -> str:
    n = result["n"]
    m = result["machine"]
    lines = [
        f"Zoo of {n} packages ({result['zoo']['failing']} failing), {m['cpu']}, "
        f"{m['cpus']} cores, {m['memory_gib']} GiB, torch {m['torch']}, ray {m['ray']}, "
        f"median of {result['repeat']}",
        "",
        "| mode | wall s | s / package | exit | pass / fail / error | same verdicts |",
        "|---|---:|---:|---:|---|---|",
    ]
    for mode, v in result["modes"].items():
        c = v["counts"]
        wrong = any(line.startswith(f"{mode}:") for line in result["mismatches"])
        same = "no" if wrong else "yes"
        lines.append(
            f"| {LABELS.get(mode, mode)} | {v['wall_s']:.2f} | {v['wall_s'] / n:.3f} | "
            f"{v['exit_code']} | {c.get('pass', 0)} / {c.get('fail', 0)} / {c.get('error', 0)} "
            f"| {same} |"
        )
    if "shards" in result["modes"]:
        lines.append(
            f"| `aotipre merge` of the 2 shard reports | {result['modes']['shards']['merge_s']:.2f}"
            " | | | | |"
        )
        lines.append(
            "| (the CLI's start alone: `python -c 'import aotipre.cli.app'`) | "
            f"{result['modes']['shards']['cli_import_s']:.2f} | | | | |"
        )
    lines += ["", "| goal | value | limit | result |", "|---|---:|---:|---|"]
    for g in result["goals"]:
        value = "-" if g["value"] is None else f"{g['value']:.3f}"
        note = f" ({g['note']})" if g["note"] else ""
        lines.append(f"| {g['goal']}{note} | {value} | {g['limit']} {g['unit']} | {g['result']} |")
    if result["mismatches"]:
        lines += ["", "MISMATCH:", *(f"- {line}" for line in result["mismatches"])]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument(
        "--build",
        type=Path,
        default=Path(tempfile.gettempdir()) / "aotipre-bench-zoo",
        help="the zoo's folder (reused while its stamp matches)",
    )
    ap.add_argument("--packages", type=int, default=20, help="N packages in the zoo")
    ap.add_argument("--modes", default=",".join(MODES), help=f"some of {','.join(MODES)}")
    ap.add_argument("--repeat", type=int, default=1, help="runs of every mode (medians)")
    ap.add_argument("--merge-runs", type=int, default=3, help="timed merges per repeat")
    ap.add_argument("--rebuild", action="store_true", help="build the zoo even if cached")
    ap.add_argument("--no-warmup", action="store_true", help="skip the untimed warm-up check")
    ap.add_argument(
        "--ray-as-is",
        action="store_true",
        help="run --engine ray in this environment as it is (no token of the bench's: see "
        "RAY_TOKEN)",
    )
    ap.add_argument("--json", type=Path, help="also write every figure here")
    opts = ap.parse_args(argv)
    modes = [m.strip() for m in opts.modes.split(",") if m.strip()]
    unknown = set(modes) - set(MODES)
    if unknown or not modes:
        ap.error(f"--modes: {', '.join(sorted(unknown)) or 'none'}; choose from {MODES}")
    if opts.packages < 2:
        ap.error("--packages: at least 2 (2 shards)")

    if {"ray", "ray-head"} & set(modes) and not opts.ray_as_is:
        RAY_TOKEN.update(ray_token())
    info = machine()
    zoo = opts.build.resolve()
    stamp, built = ensure_zoo(zoo, opts.packages, opts.rebuild)
    work = Path(tempfile.mkdtemp(prefix="runs-", dir=zoo))
    if not opts.no_warmup:
        first = stamp["packages"][0]["name"]
        log(
            f"warm-up (untimed): check {first}.pt2"
            + ("; import ray" if "ray" in " ".join(modes) else "")
        )
        subprocess.run(
            [
                sys.executable,
                "-m",
                "aotipre",
                "check",
                f"{first}.pt2",
                "--inputs",
                f"{first}_inputs.pt",
                *COMMON,
                "-o",
                str(work / "warmup.json"),
            ],
            cwd=zoo,
            env=environment(),
            capture_output=True,
            timeout=TIMEOUT_S,
            check=False,
        )
        if "ray" in " ".join(modes):
            subprocess.run([sys.executable, "-c", "import ray"], capture_output=True, check=False)
    repeats = []
    problems: list[str] = []
    for i in range(opts.repeat):
        log(f"repeat {i + 1}/{opts.repeat}")
        runs = run_once(zoo, work / f"r{i + 1}", modes, opts.merge_runs)
        problems += [
            f"{line} (repeat {i + 1})" if opts.repeat > 1 else line
            for line in mismatches(runs, stamp)
        ]
        repeats.append(runs)
    info["loadavg_end"] = os.getloadavg()
    by_mode = median_runs(repeats)
    figures, goals = figures_and_goals(by_mode, opts.packages)
    result = {
        "n": opts.packages,
        "repeat": opts.repeat,
        "modes_run": modes,
        "options": list(COMMON),
        "ray_token_set_by_bench": bool(RAY_TOKEN),
        "machine": info,
        "zoo": {
            "dir": str(zoo),
            "built_now": built,
            "build_s": stamp.get("build_s"),
            "torch": stamp["torch"],
            "failing": sum(e["expect"] == "fail" for e in stamp["packages"]),
            "packages": stamp["packages"],
        },
        "reports_dir": str(work),
        "modes": by_mode,
        "figures": figures,
        "goals": goals,
        "consistent": not problems,
        "mismatches": problems,
    }
    print(markdown(result))
    if opts.json:
        opts.json.write_text(json.dumps(result, indent=1) + "\n")
    if problems:
        log("MISMATCH: the modes do not give the same verdicts:\n  " + "\n  ".join(problems))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
