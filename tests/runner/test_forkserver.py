"""runner/forkserver.py with the real worker: several packages checked in one command go to
one fork server (torch imported once) and get the reports fresh workers give them; a forked
worker that crashes or hangs is reported as a fresh one is, and leaves nothing running; a job
the server cannot take runs in a fresh worker."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

from aotipre.runner import forkserver
from aotipre.runner.worker import zygote

FORKED = "forked by the fork server"


def zoo(tmp_path: Path, pkg: Any, n: int = 2) -> Path:
    """A manifest of `n` copies of the AOTI fixture with its inputs."""
    entries = []
    for i in range(n):
        shutil.copy(pkg("aoti.pt2"), tmp_path / f"m{i}.pt2")
        entries.append(f'[[package]]\npath = "m{i}.pt2"\ninputs = "{pkg("aoti_inputs.pt")}"\n')
    manifest = tmp_path / "zoo.toml"
    manifest.write_text("\n".join(entries))
    return manifest


def check(manifest: Path, tmp_path: Path, *extra: str, **env: str) -> tuple[int, dict[str, Any]]:
    """`aotipre check --manifest` in a fresh process, with a TMPDIR of this test's own (the
    fork server's socket lies in it), longer than a socket's path may be (107 bytes); the exit
    code and the JSON report."""
    temp = tmp_path / ("t" * 110)
    temp.mkdir(exist_ok=True)
    out = tmp_path / f"report-{len(list(tmp_path.glob('report-*')))}.json"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "aotipre",
            "check",
            "--manifest",
            str(manifest),
            "--no-config",
            "--no-progress",
            "--format",
            "json",
            "-o",
            str(out),
            *extra,
        ],  # fmt: skip
        env={**os.environ, "TMPDIR": str(temp), **env},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert out.is_file(), done.stderr[-3000:]
    return done.returncode, json.loads(out.read_text())


def processes_under(folder: Path) -> list[str]:
    """Command lines of live processes that name `folder` (the fork server and the workers it
    forked carry its socket path; a client names it too)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if str(folder) in cmdline:
                found.append(f"{entry.name}: {cmdline}")
    return found


def labels(report: dict[str, Any]) -> set[str]:
    return {p for s in report["stages"] for p in s.get("processes") or ()}


def commands(report: dict[str, Any]) -> set[tuple[str, ...]]:
    return {tuple(s["command"]) for s in report["stages"] if s.get("command")}


def summary(report: dict[str, Any]) -> tuple[str, list[str], list[tuple[str, str]]]:
    return (
        report["verdict"],
        sorted(f["code"] for f in report["findings"]),
        [(s["name"], s["status"]) for s in report["stages"]],
    )


def test_packages_checked_through_the_fork_server_get_the_reports_of_fresh_workers(
    pkg: Any, tmp_path: Path
) -> None:
    manifest = zoo(tmp_path, pkg)
    rc, forked = check(manifest, tmp_path)
    rc_fresh, fresh = check(manifest, tmp_path, AOTIPRE_FORK_SERVER="0")
    assert rc == rc_fresh == 0
    assert [summary(r) for r in forked["reports"]] == [summary(r) for r in fresh["reports"]]
    # each package's steps ran in one forked worker of its own, both forked by one server
    servers, workers = set(), set()
    for report in forked["reports"]:
        (label,) = labels(report)
        assert FORKED in label, label
        workers.add(label.split("pid ")[1].split(",")[0])
        servers.add(label.rsplit("pid ", 1)[1])
    assert len(workers) == 2 and len(servers) == 1
    assert not any(FORKED in label for r in fresh["reports"] for label in labels(r))
    # the command shown is the fresh worker's, which a user can run again
    for report in forked["reports"]:
        (command,) = commands(report)
        assert forkserver.CLIENT_PATH not in command
        assert command[1] == forkserver.launch.WORKER_PATH, command
    # the load still says what a fresh deployment process pays before and for the loader
    for report in forked["reports"]:
        (cold,) = [p["cold"] for p in report["performance"]]
        assert cold["fresh_process"] is True
        assert cold["before_load_s"] > 0.05 and cold["loader_import_s"] > 0.05, cold
    assert processes_under(tmp_path) == []


def test_the_server_started_early_is_the_one_the_first_job_asks_for(
    pkg: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # batch.run starts the first job's server before that job reads its package: with the
    # interpreter and environment (extra_env included) its session then asks for, so no job
    # starts a second one, and both packages are forked by it
    from aotipre import api
    from aotipre.fleet import batch
    from aotipre.runner.stages import DynamicOptions, PerfOptions

    monkeypatch.setenv("TMPDIR", str(tmp_path))
    started: list[tuple[str, dict[str, str]]] = []
    asked: list[int] = []
    real_server, real_argv_for = forkserver.ForkServer, forkserver.argv_for

    def server(python: str, env: Any) -> Any:
        started.append((python, dict(env)))
        return real_server(python, env)

    def argv_for(python: str, env: Any, ops: Any) -> Any:
        asked.append(len(started))  # servers started before this job asked
        return real_argv_for(python, env, ops)

    monkeypatch.setattr(forkserver, "ForkServer", server)
    monkeypatch.setattr(forkserver, "argv_for", argv_for)
    dynamic = DynamicOptions(
        probe=False, perf=PerfOptions(runs=1, warmup=0), extra_env={"AOTIPRE_TEST_MARK": "7"}
    )
    options = api.CheckOptions(inputs=str(pkg("aoti_inputs.pt")), dynamic=dynamic)
    jobs = [batch.PackageJob(str(pkg("aoti.pt2")), options) for _ in range(2)]
    reports = batch.run(jobs, 1)
    assert [r.verdict for r in reports] == ["pass", "pass"], [r.findings for r in reports]
    assert len(started) == 1, [sorted(set(e) ^ set(started[0][1])) for _, e in started]
    python, env = started[0]
    assert python == sys.executable
    assert env["AOTIPRE_TEST_MARK"] == "7" and env["AOTI_RUNTIME_CHECK_INPUTS"] == "1"
    assert asked and asked[0] == 1  # started before the first job asked for it
    forked = [p for r in reports for s in r.stages for p in s.processes or () if FORKED in p]
    assert len(forked) >= 2, [s.processes for r in reports for s in r.stages]
    assert processes_under(tmp_path) == []


def test_no_server_is_started_early_for_a_job_that_runs_no_forked_worker(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from aotipre import api
    from aotipre.environment.runtimes import Runtime
    from aotipre.fleet import batch
    from aotipre.runner.stages import DynamicOptions

    started: list[str] = []

    class Stub:
        def __init__(self, python: str, env: Any) -> None:
            started.append(python)

        def stop(self) -> None:
            started.append("stopped")

    monkeypatch.setattr(forkserver, "ForkServer", Stub)
    static = api.CheckOptions(static_only=True)
    stand_in = api.CheckOptions(dynamic=DynamicOptions(worker_command=("fake",)))
    usual = api.CheckOptions(dynamic=DynamicOptions(python="/opt/py"))
    batch.start_server_early(batch.PackageJob("m.pt2", usual))
    assert started == []  # no session
    with forkserver.session():
        for options in (static, stand_in):
            batch.start_server_early(batch.PackageJob("m.pt2", options))
        assert started == []
        batch.start_server_early(batch.PackageJob("m.pt2", usual))
        assert started == ["/opt/py"]
        # a matrix of interpreters: its first runtime's workers run first
        first, second = (Runtime(p, "3.11", "2.13.0", "/t", p) for p in ("/a/py", "/b/py"))
        batch.start_server_early(batch.PackageJob("m.pt2", usual, runtimes=(first, second)))
        assert started == ["/opt/py", "/a/py"]
    assert started == ["/opt/py", "/a/py", "stopped", "stopped"]


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("import ctypes\nctypes.string_at(0)\n", "killed by SIGSEGV"),
        ("import time\ntime.sleep(600)\n", "timed out"),
    ],
    ids=["segfault", "hang"],
)
def test_a_forked_worker_that_crashes_or_hangs_is_reported_as_a_fresh_one(
    pkg: Any, tmp_path: Path, body: str, expected: str
) -> None:
    mods = tmp_path / "mods"
    mods.mkdir()
    (mods / "bad_ops.py").write_text(body)
    manifest = zoo(tmp_path, pkg)
    args = ("--import", "bad_ops", "--timeout", "4")
    env = {"PYTHONPATH": str(mods)}
    rc, forked = check(manifest, tmp_path, *args, **env)
    rc_fresh, fresh = check(manifest, tmp_path, *args, AOTIPRE_FORK_SERVER="0", **env)
    assert rc == rc_fresh == 1
    assert [summary(r) for r in forked["reports"]] == [summary(r) for r in fresh["reports"]]
    for report in forked["reports"]:
        messages = [f["message"] for f in report["findings"] if f["code"] == "AOT123"]
        assert messages and expected in messages[0], messages
        assert any(FORKED in label for label in labels(report)), labels(report)
    assert processes_under(tmp_path) == []


def test_a_client_whose_server_cannot_take_the_job_runs_the_fresh_worker(tmp_path: Path) -> None:
    fallback = [sys.executable, "-c", "import sys; sys.exit(7)"]
    done = subprocess.run(
        [
            sys.executable,
            "-I",
            "-S",
            forkserver.CLIENT_PATH,
            str(tmp_path / "no-server"),
            str(tmp_path / "job.json"),
            *fallback,
        ],  # fmt: skip
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 7, done.stderr


def test_the_server_takes_only_jobs_of_its_own_environment() -> None:
    own = {"PATH": "/bin", "OMP_NUM_THREADS": "2", "TMPDIR": "/a", "AOTIPRE_TREE": "1"}
    same = {**own, "TMPDIR": "/b", "TMP": "/b", "AOTIPRE_TREE": "2", "AOTIPRE_RESULT_PATH": "r"}
    assert zygote._why_not(same, own, [3, 4, 5]) is None
    other = {**same, "OMP_NUM_THREADS": "1"}
    assert "OMP_NUM_THREADS" in (zygote._why_not(other, own, [3, 4, 5]) or "")
    fewer = {k: v for k, v in same.items() if k != "PATH"}
    assert "PATH" in (zygote._why_not(fewer, own, [3, 4, 5]) or "")
    assert zygote._why_not(same, own, [3]) is not None


def test_jobs_go_to_a_server_only_inside_a_session_and_only_to_load_and_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    started: list[str] = []
    servers: list[Any] = []

    class Stub:
        def __init__(self, python: str, env: Any) -> None:
            started.append(python)
            self.socket = "/nowhere"
            self.outcome: Any = None
            servers.append(self)

        def ready(self, timeout_s: float) -> bool:
            return True

        def stop(self) -> None:
            started.append("stopped")

    monkeypatch.setattr(forkserver, "ForkServer", Stub)
    env = {"A": "1"}
    assert forkserver.argv_for("py", env, ["load", "run"]) is None  # no session
    with forkserver.session():
        assert forkserver.argv_for("py", env, ["compile", "load"]) is None
        argv = forkserver.argv_for("py", env, ["load", "run", "latency", "probe"])
        assert argv is not None
        assert argv("J") == ("py", "-I", "-S", forkserver.CLIENT_PATH, "/nowhere", "J", "py",
                             forkserver.launch.WORKER_PATH, "J")  # fmt: skip
        assert forkserver.argv_for("py", env, ["load"]) is not None  # the same server
        assert started == ["py"]
        servers[0].outcome = "ended"  # e.g. stopped by a Ctrl-C: the next job starts another
        assert forkserver.argv_for("py", env, ["load"]) is not None
        assert started == ["py", "stopped", "py"]
    assert started == ["py", "stopped", "py", "stopped"]
    monkeypatch.setenv(forkserver.SWITCH_ENV, "0")
    with forkserver.session():
        assert forkserver.argv_for("py", env, ["load"]) is None


def test_the_server_outlives_bad_clients_and_a_killed_client_takes_its_worker_down(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mods = tmp_path / "mods"
    mods.mkdir()
    (mods / "sleepy.py").write_text("import time\ntime.sleep(600)\n")
    env = {
        **os.environ,
        "AOTIPRE_CUSTOM_OPS": json.dumps({"import": ["sleepy"], "path": [str(mods)]}),
        # what the process runner would set for the server, set for the client too: the
        # server forks only for a client of its own environment
        "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor"),
        "AOTIPRE_USER_TMPDIR": tempfile.gettempdir(),
    }
    job = tmp_path / "job.json"
    job.write_text(json.dumps({"protocol": 1, "tag": "job0", "steps": [{"id": "load"}]}))
    server = forkserver.ForkServer(sys.executable, env)
    try:
        assert server.ready(120), server.outcome
        for hostile in (b"", b"not json\n", b"[1]\n"):  # no fds, no object: answered, not fatal
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as raw:
                monkeypatch.chdir(server.folder)
                raw.connect("server")
                raw.sendall(hostile)
                raw.shutdown(socket.SHUT_WR)
                assert b'"pid": null' in raw.recv(4096) or hostile == b""
        argv = forkserver.argv_for_server(sys.executable, server)(str(job))
        client = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
        worker = wait_for_child_of(server.pid)
        assert worker != client.pid
        client.kill()
        client.wait(timeout=30)
        deadline = time.monotonic() + 30
        while Path(f"/proc/{worker}").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not Path(f"/proc/{worker}").exists(), "the forked worker outlived its client"
        assert server.outcome is None  # the server goes on
    finally:
        server.stop()
    assert processes_under(Path(server.folder)) == []
    assert not Path(server.folder).exists()


def wait_for_child_of(parent: int | None, timeout_s: float = 60.0) -> int:
    """The pid of the first child process of `parent` (from /proc)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                except OSError:
                    continue
                if int(stat[1]) == parent:
                    return int(entry.name)
        time.sleep(0.05)
    raise AssertionError(f"process {parent} forked no worker")


@pytest.mark.gpu
def test_cuda_packages_checked_through_the_fork_server_get_the_reports_of_fresh_workers(
    cuda_fixture_dir: Path, tmp_path: Path
) -> None:
    """The server never starts CUDA: each forked worker starts its own context, as a fresh one."""
    entries = []
    for i in range(2):
        shutil.copy(cuda_fixture_dir / "aoti_cuda.pt2", tmp_path / f"c{i}.pt2")
        inputs = cuda_fixture_dir / "aoti_inputs.pt"
        entries.append(f'[[package]]\npath = "c{i}.pt2"\ninputs = "{inputs}"\n')
    manifest = tmp_path / "zoo.toml"
    manifest.write_text("\n".join(entries))
    started = time.monotonic()
    rc, forked = check(manifest, tmp_path)
    forked_s = time.monotonic() - started
    started = time.monotonic()
    rc_fresh, fresh = check(manifest, tmp_path, AOTIPRE_FORK_SERVER="0")
    fresh_s = time.monotonic() - started
    print(f"two CUDA packages: {forked_s:.1f} s forked, {fresh_s:.1f} s in fresh workers")
    assert rc == rc_fresh == 0, (forked, fresh)
    assert [summary(r) for r in forked["reports"]] == [summary(r) for r in fresh["reports"]]
    for report in forked["reports"]:
        assert any(FORKED in label for label in labels(report)), labels(report)
        (cold,) = [p["cold"] for p in report["performance"]]
        assert cold["fresh_process"] is True and cold["cuda_init_s"] is not None, cold
    assert processes_under(tmp_path) == []
