"""`aotipre check --engine ray` for real: one Ray head started on this machine for the module
(`ray start --head`), a small zoo checked through it and compared with a local run, the Ray
worker running a package killed mid-check (retried: AOT901; killed again: AOT902), a job that
needs a GPU on a cluster without one, Ray not importable, and Ctrl-C. No mock: the real CLI,
real packages, the real aotipre workers; a package is held mid-check by a module the workers
import (`--import`), which records their pids and their parent's, the Ray worker's."""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import pytest

Pkg = Callable[[str], Path]
RAY = Path(sys.executable).with_name("ray")
needs_ray = pytest.mark.skipif(
    find_spec("ray") is None or not RAY.exists(), reason="ray is not installed (aotipre[ray])"
)

STALL = '''"""Imported by every aotipre worker of the test (--import): records the worker's pid and
the Ray worker's running the task (its parent, or its parent's when a fork server forked it),
then stalls as stall.json says."""
import json, os, time
here = os.path.dirname(os.path.abspath(__file__))
mode = json.load(open(os.path.join(here, "stall.json")))["mode"]
def parent(pid):
    return int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1])
ray = os.getppid()
if b"--fork-server" in open(f"/proc/{ray}/cmdline", "rb").read():
    ray = parent(ray)
open(os.path.join(here, "pids", f"worker-{os.getpid()}"), "w").close()
open(os.path.join(here, "pids", f"ray-{ray}"), "w").close()
marker = os.path.join(here, "stalled-once")
if mode == "always" or (mode == "once" and not os.path.exists(marker)):
    open(marker, "w").close()
    time.sleep(1000)
'''
VOLATILE = {"AOT640", "AOT641"}
"""Findings about timing: a loaded machine may or may not cross their threshold."""


# --------------------------------------------------------------------------------------------
# The cluster: one head for the module, stopped by the test (its process group and what it
# started), never with `ray stop`, which stops every Ray of the machine


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _children(pids: set[int]) -> set[int]:
    """`pids` and all their descendants (from /proc)."""
    found = set(pids)
    while True:
        more = set()
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                with contextlib.suppress(OSError, IndexError, ValueError):
                    ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
                    if ppid in found and int(entry.name) not in found:
                        more.add(int(entry.name))
        if not more:
            return found
        found |= more


def _group(pgid: int) -> set[int]:
    out = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                if int((entry / "stat").read_text().rsplit(")", 1)[1].split()[2]) == pgid:
                    out.add(int(entry.name))
    return out


@dataclass(frozen=True)
class Head:
    address: str
    """HOST:PORT, for --address."""
    env: dict[str, str]
    """The environment of a driver: with the cluster's token (token authentication on)."""


@pytest.fixture(scope="module")
def head() -> Iterator[Head]:
    """A Ray head on this machine with 2 CPUs and no GPU, with a token of its own."""
    if find_spec("ray") is None or not RAY.exists():
        pytest.skip("ray is not installed (aotipre[ray])")
    with cluster(["--num-cpus=2", "--num-gpus=0"]) as started:
        yield started


@contextlib.contextmanager
def cluster(*nodes: list[str], path: Sequence[Path | None] = ()) -> Iterator[Head]:
    """A Ray cluster on this machine: a head with the first node's `ray start` options, then a
    node joining it for each further one; node i's PATH starts with `path[i]` (a folder with a
    fake nvidia-smi) when given. Each node is stopped through its own process group."""
    port = _free_port()
    temp = tempfile.mkdtemp(prefix="aotipre-rt-", dir="/tmp")  # Ray's socket paths are short
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    env.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=secrets.token_hex(32))
    procs: list[subprocess.Popen[bytes]] = []
    try:
        for i, options in enumerate(nodes):
            where = (["--head", f"--port={port}", "--include-dashboard=false",
                      f"--temp-dir={temp}", "--disable-usage-stats"] if i == 0
                     else [f"--address=127.0.0.1:{port}"])  # fmt: skip
            node_env = dict(env)
            folder = path[i] if i < len(path) else None
            if folder is not None:
                node_env["PATH"] = f"{folder}{os.pathsep}{env.get('PATH', '')}"
            log = Path(temp) / f"node{i}.log"
            with open(log, "wb") as out:
                procs.append(subprocess.Popen([str(RAY), "start", "--block", *where, *options],
                                              stdout=out, stderr=subprocess.STDOUT, env=node_env,
                                              start_new_session=True))  # fmt: skip
            deadline = time.monotonic() + 90
            while "Ray runtime started" not in log.read_text(errors="replace"):
                assert procs[-1].poll() is None, log.read_text(errors="replace")
                assert time.monotonic() < deadline, log.read_text(errors="replace")
                time.sleep(0.2)
        yield Head(f"127.0.0.1:{port}", env)
    finally:
        for proc in reversed(procs):
            _stop(proc)
        shutil.rmtree(temp, ignore_errors=True)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    started = _children(_group(proc.pid) | {proc.pid})
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=3)
    for pid in _children(started | _group(proc.pid)):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=5)


# --------------------------------------------------------------------------------------------
# Helpers


@pytest.fixture
def project(tmp_path: Path, pkg: Pkg) -> Path:
    """A folder with the zoo's packages, a manifest, and the stalling module."""
    (tmp_path / ".git").mkdir()
    for name in ("aoti.pt2", "aoti_inputs.pt", "both.pt2", "broken_crc.pt2", "multi.pt2"):
        shutil.copy(pkg(name), tmp_path / name)
    (tmp_path / "zoo.toml").write_text(
        '[[package]]\npath = "aoti.pt2"\ninputs = "aoti_inputs.pt"\n\n'
        '[[package]]\npath = "both.pt2"\n\n'
        '[[package]]\npath = "broken_crc.pt2"\n\n'
        '[[package]]\npath = "multi.pt2"\nstatic-only = true\n'
    )
    (tmp_path / "aotipre_stall.py").write_text(STALL)
    (tmp_path / "pids").mkdir()
    return tmp_path


def start(project: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """`aotipre check ARGS --no-config` in `project`, SIGINT at its default (a Ctrl-C ends it)."""
    return subprocess.Popen(
        [sys.executable, "-m", "aotipre", "check", *args, "--no-config"],
        cwd=project,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )


def check(project: Path, *args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    proc = start(project, *args, env=env)
    out, err = proc.communicate(timeout=300)
    return proc.returncode, out, err


STALLED = ("aoti.pt2", "-i", "aoti_inputs.pt", "--import", "aotipre_stall", "--no-perf",
           "--no-probe")  # fmt: skip
"""One package whose workers import the stalling module."""


def on(head: Head) -> tuple[str, ...]:
    return ("--engine", "ray", "--address", head.address)


def stall(project: Path, mode: str) -> None:
    (project / "stall.json").write_text(json.dumps({"mode": mode}))


def wait_for_ray_workers(project: Path, proc: subprocess.Popen[str], count: int) -> list[int]:
    """The pids of the Ray workers that ran a stalling aotipre worker, once `count` did."""
    deadline = time.monotonic() + 120
    while len(pids := recorded(project, "ray")) < count:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "no aotipre worker started under Ray"
        time.sleep(0.1)
    time.sleep(0.3)  # into the stall
    return pids


def recorded(project: Path, kind: str) -> list[int]:
    files = sorted((project / "pids").glob(f"{kind}-*"), key=lambda p: p.stat().st_mtime)
    return [int(p.name.split("-")[1]) for p in files]


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def wait_gone(pids: list[int], timeout_s: float = 10.0) -> list[int]:
    deadline = time.monotonic() + timeout_s
    while any(alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    return [p for p in pids if alive(p)]


def summary(out: str) -> tuple[int, list[tuple[str, str, list[str]]]]:
    data = json.loads(out)
    rows = [
        (r["package_path"], r["verdict"], sorted(f["code"] for f in r["findings"]))
        for r in data["reports"]
    ]
    return data["exit_code"], [(p, v, [c for c in cs if c not in VOLATILE]) for p, v, cs in rows]


def progress_by_package(err: str) -> dict[str, list[str]]:
    """Each package's progress lines, in order, without times and durations."""
    out: dict[str, list[str]] = {}
    for line in err.splitlines():
        m = re.match(r"aotipre: \[\s*[\d.]+s\] ([^:]+\.pt2): (.*)$", line)
        if m and "still running" not in m.group(2):
            out.setdefault(m.group(1), []).append(re.sub(r"\d+(\.\d+)?", "0", m.group(2)))
    return out


def foreign(err: str) -> list[str]:
    """The stderr lines that are not aotipre's (Ray's own notices and C++ log lines)."""
    return [line for line in err.splitlines() if line and not line.startswith("aotipre: ")]


def one_report(out: str) -> dict[str, Any]:
    data = json.loads(out)
    return data["reports"][0] if "reports" in data else data


# --------------------------------------------------------------------------------------------
# The tests


@needs_ray
def test_a_zoo_through_ray_reports_as_a_local_run(head: Head, project: Path) -> None:
    args = ["--manifest", "zoo.toml", "--no-perf", "-j", "2", "-f", "json"]
    rc_local, out_local, err_local = check(project, *args)
    rc_ray, out_ray, err_ray = check(project, *args, *on(head), env=head.env)
    assert out_ray and out_local, err_ray + err_local
    assert (rc_ray, summary(out_ray)) == (rc_local, summary(out_local)), err_ray
    assert rc_ray == 1  # broken_crc.pt2: AOT008
    verdicts = {p: v for p, v, _ in summary(out_ray)[1]}
    assert verdicts == {
        "aoti.pt2": "pass", "both.pt2": "pass", "broken_crc.pt2": "fail", "multi.pt2": "pass",
    }  # fmt: skip
    # the progress lines come back from the tasks: the same lines, package by package
    assert progress_by_package(err_ray) == progress_by_package(err_local)
    assert foreign(err_ray) == []


@needs_ray
def test_a_ray_worker_killed_once_is_retried_and_reported_flaky_aot901(
    head: Head, project: Path
) -> None:
    stall(project, "once")
    proc = start(project, *STALLED, "-f", "json", *on(head), env=head.env)
    (first,) = wait_for_ray_workers(project, proc, 1)
    stalled = recorded(project, "worker")
    os.kill(first, signal.SIGKILL)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err  # the retry passed: a warning, not a failure
    report = one_report(out)
    assert report["verdict"] == "pass"
    (flaky,) = [f for f in report["findings"] if f["code"] == "AOT901"]
    assert flaky["severity"] == "warning" and "WorkerCrashedError" in flaky["message"]
    assert "ran again on a fresh worker" in flaky["message"]
    assert {s["name"]: s["status"] for s in report["stages"]}["run"] == "passed"
    assert first not in recorded(project, "ray")[1:], "the retry ran on the dead worker"
    assert foreign(err) == []  # the worker's death is aotipre's AOT901, not Ray's notice
    assert wait_gone(stalled) == [], "the killed task's aotipre worker outlived it"


@needs_ray
def test_a_ray_worker_killed_twice_is_a_crash_never_a_pass_aot902(
    head: Head, project: Path
) -> None:
    stall(project, "always")
    proc = start(project, *STALLED, "-f", "json", *on(head), env=head.env)
    (first,) = wait_for_ray_workers(project, proc, 1)
    os.kill(first, signal.SIGKILL)
    second = wait_for_ray_workers(project, proc, 2)[-1]
    assert second != first
    os.kill(second, signal.SIGKILL)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 1, err
    report = one_report(out)
    assert report["verdict"] == "fail"
    (crash,) = report["findings"]
    assert crash["code"] == "AOT902" and crash["severity"] == "error"
    assert crash["category"] == "crash" and "died twice" in crash["message"]
    assert wait_gone(recorded(project, "worker")) == []


@needs_ray
def test_a_gpu_job_on_a_cluster_without_gpus_is_not_checked(head: Head, project: Path) -> None:
    (project / "gpu.toml").write_text(
        '[[package]]\npath = "aoti.pt2"\ndevice = "cuda"\n\n'
        '[[package]]\npath = "multi.pt2"\nstatic-only = true\n'
    )
    rc, out, err = check(project, "--manifest", "gpu.toml", "-f", "json", *on(head), env=head.env)
    assert rc == 2, err
    reports = {r["package_path"]: r for r in json.loads(out)["reports"]}
    assert reports["multi.pt2"]["verdict"] == "pass"  # the CPU one is checked
    cuda = reports["aoti.pt2"]
    assert cuda["verdict"] == "error" and cuda["error"].startswith("not checked: ")
    assert "--device cuda" in cuda["error"] and "the Ray cluster has none" in cuda["error"]
    assert f"aotipre: error: aoti.pt2: {cuda['error']}" in err


def test_without_ray_one_line_says_how_to_install_it(project: Path, tmp_path: Path) -> None:
    # a `ray` package first on the path whose import fails, as it does where Ray is missing
    hidden = tmp_path / "no-ray"
    (hidden / "ray").mkdir(parents=True)
    (hidden / "ray" / "__init__.py").write_text("raise ImportError('No module named ray')\n")
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(hidden), os.environ.get("PYTHONPATH", "")]),
    }
    rc, out, err = check(project, "aoti.pt2", "--static-only", "--engine", "ray", env=env)
    assert rc == 2 and out == ""
    assert err == "aotipre: error: --engine ray needs Ray (pip install 'aotipre[ray]')\n"
    rc, _, err = check(project, "aoti.pt2", "--static-only", "--address", "auto")
    assert rc == 2 and err == "aotipre: error: --address is for --engine ray (add --engine ray)\n"


@pytest.mark.parametrize("port", ["9" * 25, "0", "65536"])
def test_an_address_that_is_not_host_port_is_one_line(port: str, project: Path) -> None:
    address = f"127.0.0.1:{port}"
    rc, out, err = check(
        project, "aoti.pt2", "--static-only", "--engine", "ray", "--address", address
    )
    assert rc == 2 and out == ""
    assert err == (
        f"aotipre: error: --address {address!r} is not auto or HOST:PORT (a port 1 to 65535) "
        "(give auto, or the address that the head's `ray start --head` printed)\n"
    )


@needs_ray
def test_a_listener_that_is_not_ray_is_one_line(
    project: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    """--address naming a TCP listener that is not a Ray head (it accepts and says nothing):
    one line once the probe's time is up (3 s here), none of Ray's log lines on stderr."""
    from aotipre.cli import main
    from aotipre.fleet.engines import ray as ray_engine

    monkeypatch.chdir(project)
    monkeypatch.setattr(ray_engine, "PROBE_S", 3.0)
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        address = f"127.0.0.1:{listener.getsockname()[1]}"
        argv = ["check", "aoti.pt2", "--static-only", "--no-config", "--engine", "ray"]
        rc = main([*argv, "--address", address])
    out, err = capfd.readouterr()
    assert rc == 2 and out == ""
    assert err == (
        f"aotipre: error: --address {address}: no Ray head answered there within 3 s (is it "
        "the GCS address of a Ray cluster?) (give the address that the head's `ray start "
        "--head` printed)\n"
    )


@needs_ray
def test_a_head_that_refuses_the_driver_is_one_line(head: Head, project: Path) -> None:
    """A head with token authentication and a driver without the token: one line saying so
    (Ray's AuthenticationError); with the token, the check runs as a local one does."""
    no_token = {k: v for k, v in head.env.items() if not k.startswith("RAY_")}
    rc, out, err = check(project, "aoti.pt2", "--static-only", *on(head), env=no_token)
    assert rc == 2 and out == ""
    assert len(err.splitlines()) == 1, err
    assert err.startswith(
        f"aotipre: error: --address {head.address}: cannot join the Ray cluster there: "
        "AuthenticationError: "
    )
    rc_local, out_local, _ = check(project, "aoti.pt2", "--static-only", "-f", "json")
    rc, out, err = check(project, "aoti.pt2", "--static-only", "-f", "json", *on(head),
                         env=head.env)  # fmt: skip
    codes = [sorted(f["code"] for f in one_report(o)["findings"]) for o in (out, out_local)]
    assert rc == rc_local and codes[0] == codes[1]
    assert foreign(err) == []


@needs_ray
def test_ctrl_c_cancels_the_tasks_and_leaves_no_worker(head: Head, project: Path) -> None:
    stall(project, "always")
    proc = start(project, *STALLED, *on(head), env=head.env)
    wait_for_ray_workers(project, proc, 1)
    sent = time.monotonic()
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    took = time.monotonic() - sent
    assert proc.returncode == 130, err  # cli.py: _interrupted
    assert err.endswith("aotipre: interrupted\n")
    # the task stopped its worker itself (a KeyboardInterrupt from ray.cancel), well before
    # Ray would kill its process (CANCEL_GRACE_S)
    assert took < 4, f"took {took:.1f} s to stop"
    assert wait_gone(recorded(project, "worker")) == [], "an aotipre worker outlived the run"


@needs_ray
def test_a_private_local_ray_without_address(project: Path, tmp_path: Path) -> None:
    """No --address: the run starts its own Ray and stops it. Ray's driver reads its
    authentication mode when it is imported, so the run's token must be set before that (a
    token set later left the local Ray unable to start: 'Failed to start GCS'). A HOME of its
    own shows that nothing is written to ~/.ray."""
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    env["HOME"] = str(home)
    args = ["--manifest", "zoo.toml", "--static-only", "-f", "json"]
    rc_local, out_local, _ = check(project, *args, env=env)
    rc_ray, out_ray, err_ray = check(project, *args, "--engine", "ray", "-j", "2", env=env)
    assert out_ray, err_ray
    assert (rc_ray, summary(out_ray)) == (rc_local, summary(out_local)), err_ray
    assert not (home / ".ray").exists()
    assert foreign(err_ray) == []  # a private Ray starts and stops without a line of its own


CUDA_PKG = Path(__file__).parents[1] / "data" / "torch211" / "multi_arch_cuda.pt2"
"""A CUDA package built with the public API on an H200: sm_90a SASS and compute_90 PTX."""


def fake_smi(folder: Path, cc: str) -> Path:
    """A folder with an nvidia-smi that answers the compute capability query with `cc` (the
    static target check of a task asks it: a check run on that node judges the GPU code for
    `cc`, AOT433 when it cannot run there); any other query fails, as on a broken driver."""
    folder.mkdir()
    exe = folder / "nvidia-smi"
    exe.write_text(
        f'#!/bin/sh\ncase "$*" in *--query-gpu=compute_cap*) echo {cc};; *) exit 9;; esac\n'
    )
    exe.chmod(0o755)
    return folder


def gpu_node(kind: str) -> list[str]:
    """A node with one GPU of Ray's kind `kind` (as Ray names a real one: accelerator_type:)."""
    return ["--num-cpus=2", "--num-gpus=1", f'--resources={{"accelerator_type:{kind}": 1}}']


@needs_ray
def test_a_cuda_package_goes_to_a_gpu_kind_its_code_runs_on(project: Path, tmp_path: Path) -> None:
    """A cluster of a T4 node (the head) and an H100 node: both sm_90 packages are checked on
    the H100 node, whose checks find their code runs there. Without the kind, Ray spreads the
    two GPU tasks over both nodes, and the T4's check fails a package that works on H100s."""
    for name in ("a.pt2", "b.pt2"):
        shutil.copy(CUDA_PKG, project / name)
    (project / "cuda.toml").write_text(
        '[[package]]\npath = "a.pt2"\n\n[[package]]\npath = "b.pt2"\n'
    )
    smi = [fake_smi(tmp_path / "t4", "7.5"), fake_smi(tmp_path / "h100", "9.0")]
    with cluster(gpu_node("T4"), gpu_node("H100"), path=smi) as two:
        rc, out, err = check(project, "--manifest", "cuda.toml", "-f", "json", "--engine", "ray",
                             "--address", two.address, env=two.env)  # fmt: skip
    reports = {r["package_path"]: r for r in json.loads(out)["reports"]}
    assert sorted(reports) == ["a.pt2", "b.pt2"], err
    for report in reports.values():
        found = {f["code"] for f in report["findings"]}
        assert report["error"] is None and "AOT053" in found, report  # its GPU code was read
        assert "AOT433" not in found and "AOT401" not in found, report["findings"]
    assert foreign(err) == []


@needs_ray
def test_a_cuda_package_no_gpu_kind_of_the_cluster_runs_is_not_checked(
    project: Path, tmp_path: Path
) -> None:
    shutil.copy(CUDA_PKG, project / "a.pt2")
    (project / "cuda.toml").write_text(
        '[[package]]\npath = "a.pt2"\n\n[[package]]\npath = "multi.pt2"\nstatic-only = true\n'
    )
    with cluster(gpu_node("T4"), path=[fake_smi(tmp_path / "t4", "7.5")]) as t4:
        rc, out, err = check(project, "--manifest", "cuda.toml", "-f", "json", "--engine", "ray",
                             "--address", t4.address, env=t4.env)  # fmt: skip
    assert rc == 2, err
    reports = {r["package_path"]: r for r in json.loads(out)["reports"]}
    assert reports["multi.pt2"]["verdict"] == "pass"  # the CPU one is checked
    refused = reports["a.pt2"]
    assert refused["verdict"] == "error" and refused["findings"] == []
    assert refused["error"] == (
        "not checked: no GPU of the Ray cluster runs its GPU code (compute_90a, sm_90a): it has "
        "1 T4 (compute capability 7.5)"
    )
    assert f"aotipre: error: a.pt2: {refused['error']}" in err
