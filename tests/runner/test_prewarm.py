"""runner/prewarm.py with the real worker (torch imported for real): a worker started before
its job runs the job it is handed, its time counts from the hand-over, a job of another argv or
environment does not fit it, and one never handed a job is stopped without a trace."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from aotipre.runner import launch
from aotipre.runner.prewarm import WAITING_SUFFIX, Prewarmed


def argv_for(path: str) -> tuple[str, ...]:
    return launch.worker_argv(None, None, path)


def env() -> dict[str, str]:
    return {**os.environ, **launch.RUNTIME_CHECK_ENV}


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def wait_until(ready: Callable[[], bool], timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not ready():
        assert time.monotonic() < deadline, "the prewarmed worker never waited"
        time.sleep(0.05)


def load_and_run_job(pkg, tmp_path: Path, tag: str, load: dict) -> dict:
    """A job file's content: load the aoti fixture (with `load`'s options) and run it."""
    return {
        "protocol": 1,
        "tag": tag,
        "workdir": str(tmp_path),
        "device": "cpu",
        "package": str(pkg("aoti.pt2")),
        "source_package": str(pkg("aoti.pt2")),
        "model": "model",
        "inputs": {"kind": "file", "path": str(pkg("aoti_inputs.pt"))},
        "steps": [{"id": "load", "op": "load", **load}, {"id": "run", "op": "run"}],
    }


def test_a_waiting_worker_runs_the_job_it_is_handed(pkg, tmp_path: Path) -> None:
    warm = Prewarmed(argv_for, env(), wait_s=300, budget_s=300)
    try:
        wait_until(lambda: os.path.exists(warm.job_path + WAITING_SUFFIX))
        assert not warm.claim(argv_for, {**env(), "CUDA_LAUNCH_BLOCKING": "1"}, 10)
        assert not warm.claim(lambda p: ("/other/python", *argv_for(p)[1:]), env(), 10)
        assert not warm.claim(argv_for, env(), 301)  # a job longer than its budget
        with pytest.raises(RuntimeError):
            warm.hand({})  # not claimed
        time.sleep(1.0)  # waiting: not the job's time
        assert warm.claim(argv_for, env(), 300)
        assert not warm.claim(argv_for, env(), 10)  # one claim only
        warm.stop()  # a claimed worker is the step's: stop leaves it
        job = load_and_run_job(pkg, tmp_path, "rerun-1", {"direct": True})
        started = time.monotonic()
        argv, outcome = warm.hand(job)
        took = time.monotonic() - started
    finally:
        warm.stop()
    assert outcome.ok, outcome.stderr_tail[-2000:]
    assert argv == argv_for(warm.job_path)
    result = outcome.result or {}
    assert [result["steps"][s]["status"] for s in ("load", "run")] == ["ok", "ok"]
    assert result["prewarm_s"] is not None  # it imported before the job came
    assert (tmp_path / "rerun-1.run.log").is_file()  # its files go to the job's workdir
    assert outcome.duration_s <= took  # from the hand-over, not from its start
    with pytest.raises(RuntimeError):
        warm.hand(job)  # one job only
    assert not os.path.exists(warm.folder)
    assert outcome.pid is not None and not alive(outcome.pid)


def test_a_worker_never_handed_a_job_is_stopped_without_a_trace() -> None:
    warm = Prewarmed(argv_for, env(), wait_s=300, budget_s=300)
    warm._started.wait(60)
    pid = warm._pid
    assert pid is not None and alive(pid)
    started = time.monotonic()
    warm.stop()  # while it still imports torch, most likely: it does not wait for that
    assert time.monotonic() - started < 10
    assert not alive(pid)
    assert not os.path.exists(warm.folder)
    assert not warm.claim(argv_for, env(), 10)
    warm.stop()  # twice is harmless


def test_a_worker_that_cannot_wait_is_never_used(tmp_path: Path) -> None:
    """A stand-in that exits at once (it does not know the prewarm mode) never says it waits."""
    script = tmp_path / "worker.py"
    script.write_text("import sys\nsys.exit(3)\n")

    def other(path: str) -> tuple[str, ...]:
        return (launch.worker_argv(None, None, path)[0], str(script), path)

    warm = Prewarmed(other, env(), wait_s=300, budget_s=300)
    try:
        warm._thread.join(60)
        assert not os.path.exists(warm.job_path + WAITING_SUFFIX)
        assert not warm.claim(other, env(), 10)
    finally:
        warm.stop()


def test_its_backstop_covers_the_wait_and_the_job() -> None:
    """run_process's limit is the wait plus the job's budget plus the start-up slack: a long
    budget after a short wait still starts the worker (a limit of wait - budget would not)."""
    warm = Prewarmed(argv_for, env(), wait_s=1, budget_s=1000)
    try:
        assert warm._started.wait(60)
        assert warm._pid is not None
    finally:
        warm.stop()


# -- the command's first worker (issue 28): started before the job exists, still importing


def test_the_first_worker_is_handed_its_job_once_it_waits(pkg, tmp_path: Path) -> None:
    """take_first claims the command's first worker once it waits for its job (it is most
    likely still importing torch when the job is ready); the job's stderr lines reach the
    session; it is taken once, and the context ends nothing a job took."""
    from aotipre.runner import prewarm

    job = load_and_run_job(pkg, tmp_path, "job0", {"measure": True})
    with prewarm.first_worker(argv_for, env(), enabled=True):
        warm = prewarm.take_first(argv_for, env(), 600)
        assert warm is not None
        assert os.path.exists(warm.job_path + WAITING_SUFFIX)
        assert prewarm.take_first(argv_for, env(), 600) is None  # taken once
        lines: list[str] = []
        argv, outcome = warm.hand(job, on_output=lines.append, budget_s=600)
    assert outcome.ok, outcome.stderr_tail[-2000:]
    result = outcome.result or {}
    assert [result["steps"][s]["status"] for s in ("load", "run")] == ["ok", "ok"]
    assert any(line.startswith("@@aotipre start load") for line in lines)  # progress markers
    perf = result["steps"]["load"]["perf"]
    # a deployment's process age before its load: its start and imports, not its wait
    assert perf["fresh_process"] and perf["process_age_s"] < outcome.duration_s + 60
    assert outcome.pid is not None and not alive(outcome.pid)


def test_a_first_worker_that_does_not_fit_the_first_job_is_stopped() -> None:
    from aotipre.runner import prewarm

    with prewarm.first_worker(argv_for, env(), enabled=True):
        warm = prewarm._first
        assert warm is not None and warm._started.wait(60)
        pid = warm._pid
        assert pid is not None and alive(pid)
        assert prewarm.take_first(argv_for, {**env(), "OMP_NUM_THREADS": "1"}, 600) is None
        assert not alive(pid) and not os.path.exists(warm.folder)
        assert prewarm.take_first(argv_for, env(), 600) is None
    # off: nothing starts
    with prewarm.first_worker(argv_for, env(), enabled=False):
        assert prewarm._first is None


def test_a_first_worker_no_job_took_ends_with_the_command(monkeypatch) -> None:
    from aotipre.runner import prewarm

    with prewarm.first_worker(argv_for, env(), enabled=True):
        warm = prewarm._first
        assert warm is not None and warm._started.wait(60)
        pid = warm._pid
    assert pid is not None and not alive(pid) and prewarm._first is None
    monkeypatch.setenv(prewarm.FIRST_SWITCH_ENV, "0")
    with prewarm.first_worker(argv_for, env(), enabled=True):
        assert prewarm._first is None


def test_a_one_package_check_runs_its_first_job_in_the_worker_the_command_started(
    pkg, tmp_path: Path
) -> None:
    """`aotipre check PKG` starts its first worker before it reads its options; the load runs
    in it (the report says so) with the verdict and findings of a check that starts it later
    (AOTIPRE_PREWARM_FIRST=0)."""
    check_early_and_late(pkg("aoti.pt2"), pkg("aoti_inputs.pt"), tmp_path)


@pytest.mark.gpu
def test_a_cuda_check_runs_its_first_job_in_the_worker_the_command_started(
    cuda_fixture_dir: Path, tmp_path: Path
) -> None:
    """The same on a GPU: the first worker never starts CUDA before its job, so the job's own
    CUDA context is the only one, and the report is a later-started worker's."""
    early = check_early_and_late(
        cuda_fixture_dir / "aoti_cuda.pt2", cuda_fixture_dir / "aoti_inputs.pt", tmp_path
    )
    assert early["performance"][0]["cold"]["cuda_init_s"] is not None


def pythonpath(*first: Path) -> str:
    """PYTHONPATH for an `aotipre` subprocess run elsewhere: this checkout, where aotipre may
    not be installed (the GPU test machine), after `first`."""
    repo = Path(__file__).resolve().parents[2]
    return os.pathsep.join(
        [*map(str, first), str(repo), *filter(None, [os.environ.get("PYTHONPATH")])]
    )


def check_early_and_late(package: Path, inputs: Path, tmp_path: Path) -> dict:
    import json
    import subprocess
    import sys

    from aotipre.runner import prewarm

    reports = {}
    for switch in ("1", "0"):
        out = tmp_path / f"report-{switch}.json"
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "aotipre",
                "check",
                str(package),
                "--inputs",
                str(inputs),
                "--no-config",
                "--no-progress",
                "--format",
                "json",
                "-o",
                str(out),
            ],
            env={**os.environ, prewarm.FIRST_SWITCH_ENV: switch, "PYTHONPATH": pythonpath()},
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=900,
            check=False,
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        reports[switch] = json.loads(out.read_text())
    early, late = reports["1"], reports["0"]
    load = {s["name"]: s for s in early["stages"]}["load"]
    assert any("started with the command" in p for p in load["processes"]), load
    later = {s["name"]: s for s in late["stages"]}["load"]
    assert not any("started with the command" in p for p in later["processes"]), later
    assert early["verdict"] == late["verdict"] == "pass"
    assert sorted(f["code"] for f in early["findings"]) == sorted(
        f["code"] for f in late["findings"]
    )
    return early


def test_a_terminated_check_ends_the_job_running_in_its_first_worker(pkg, tmp_path: Path) -> None:
    """SIGTERM while the first job hangs in the worker the command started (a user module that
    never returns from its import): aotipre ends it as it ends any worker, and leaves no
    process and no temporary folder behind."""
    import signal
    import subprocess
    import sys

    mods, tmp = tmp_path / "mods", tmp_path / "tmp"
    mods.mkdir()
    tmp.mkdir()
    marker = tmp_path / "hung.pid"
    (mods / "hang_ops.py").write_text(
        f"import os, time\nopen({str(marker)!r}, 'w').write(str(os.getpid()))\ntime.sleep(600)\n"
    )
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "aotipre",
            "check",
            str(pkg("aoti.pt2")),
            "--inputs",
            str(pkg("aoti_inputs.pt")),
            "--import",
            "hang_ops",
            "--no-config",
        ],
        env={**os.environ, "PYTHONPATH": pythonpath(mods), "TMPDIR": str(tmp)},
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_until(marker.exists, 300)
        hung = int(marker.read_text())
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 128 + signal.SIGTERM, err
    wait_until(lambda: not alive(hung), 10)
    # (inductor's cache folder, torchinductor_<user>, is where torch keeps it: the user's)
    left = [p.name for p in tmp.iterdir() if not p.name.startswith("torchinductor_")]
    assert left == [], "temporary folders were left behind"
