"""Run `aotipre` in a subprocess and measure what a hostile input did to it: exit code, output,
peak RSS (wait4), wall time, and every file it left in its working and temporary directories."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

_MEASURE = """
import os, sys
pid = os.fork()
if pid == 0:
    os.execvp(sys.argv[2], sys.argv[2:])
_, status, usage = os.wait4(pid, 0)
with open(sys.argv[1], "w") as f:
    f.write(f"{os.waitstatus_to_exitcode(status)} {usage.ru_maxrss}")
"""
"""Forks the command from a small interpreter and records its exit code and peak RSS. (The peak
RSS the kernel reports survives exec: measured directly from pytest, a child would inherit
pytest's own peak from before its exec.)"""
RSS_BOUND_MB = 200
"""Peak RSS any adversarial case may reach (`aotipre check --static-only` alone: ~40 MB)."""
WALL_BOUND_S = 30.0
"""Longest any case may take; a case still running then is killed and fails."""


@dataclass
class Run:
    """How one `aotipre` process ended."""

    argv: list[str]
    returncode: int
    stdout: str
    stderr: str
    peak_rss_mb: float
    wall_s: float
    killed: bool
    new_files: list[str] = field(default_factory=list)
    """Paths created in the working or temporary directory (relative), sorted."""

    @property
    def report(self) -> Any:
        return json.loads(self.stdout)

    def codes(self) -> list[str]:
        data = self.report
        reports = data.get("reports", [data])
        return [f["code"] for r in reports for f in r.get("findings", [])]


def _snapshot(root: Path) -> set[str]:
    found = set()
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            found.add(os.path.relpath(os.path.join(dirpath, name), root))
    return found


def run_aotipre(
    args: Sequence[str],
    *,
    workdir: Path,
    env: dict[str, str] | None = None,
    preexec: Callable[[], None] | None = None,
    timeout_s: float = WALL_BOUND_S,
    prefix: Sequence[str] | None = None,
    cwd: Path | None = None,
) -> Run:
    """Run `python -m aotipre ARGS` with TMPDIR `workdir/tmp` and cwd `cwd` (default
    `workdir/cwd`), capture its output in files, have it reaped with wait4 for its peak RSS, and
    list the files it created in both. `prefix` replaces `python -m aotipre` (e.g. setpriv)."""
    cwd = cwd or workdir / "cwd"
    tmp, out = workdir / "tmp", workdir / "out"
    for d in (cwd, tmp, out):
        d.mkdir(parents=True, exist_ok=True)
    before = {"cwd": _snapshot(cwd), "tmp": _snapshot(tmp)}
    child_env = dict(os.environ)
    child_env.update(
        TMPDIR=str(tmp),
        XDG_CACHE_HOME=str(workdir / "xdg-cache"),
        PYTHONDONTWRITEBYTECODE="1",
        COLUMNS="200",
    )
    child_env.update(env or {})
    argv = [*(prefix or (sys.executable, "-m", "aotipre")), *args]
    measured = out / "measured"
    measured.unlink(missing_ok=True)
    started = time.monotonic()
    with open(out / "stdout", "wb") as so, open(out / "stderr", "wb") as se:
        proc = subprocess.Popen(
            [sys.executable, "-c", _MEASURE, str(measured), *argv],
            cwd=cwd,
            env=child_env,
            stdin=subprocess.DEVNULL,
            stdout=so,
            stderr=se,
            preexec_fn=preexec,
            start_new_session=True,
        )
    killed = threading.Event()

    def kill() -> None:
        killed.set()
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    timer = threading.Timer(timeout_s, kill)
    timer.start()
    try:
        proc.wait()
    finally:
        timer.cancel()
    wall = time.monotonic() - started
    code, peak_kb = (int(x) for x in measured.read_text().split()) if measured.exists() else (-9, 0)
    new = [f"cwd/{p}" for p in sorted(_snapshot(cwd) - before["cwd"])]
    new += [f"tmp/{p}" for p in sorted(_snapshot(tmp) - before["tmp"])]
    return Run(
        argv=argv,
        returncode=code,
        stdout=(out / "stdout").read_text(errors="replace"),
        stderr=(out / "stderr").read_text(errors="replace"),
        peak_rss_mb=peak_kb / 1024,
        wall_s=wall,
        killed=killed.is_set(),
        new_files=new,
    )


def setpriv_prefix() -> list[str] | None:
    """`setpriv ...` that runs a command without the capabilities that bypass file modes, or
    None when not root (no need) or setpriv cannot drop them here."""
    if os.geteuid() != 0:
        return []
    probe_dir = tempfile.mkdtemp(prefix="aotipre-setpriv-")
    probe = Path(probe_dir, "f")
    try:
        probe.write_text("x")
        probe.chmod(0)
        cmd = ["setpriv", "--bounding-set", "-dac_override,-dac_read_search", "--"]
        try:
            proc = subprocess.run([*cmd, "cat", str(probe)], capture_output=True, timeout=10)
        except (OSError, subprocess.SubprocessError):
            return None
        return cmd if proc.returncode != 0 else None
    finally:
        probe.chmod(0o600)
        probe.unlink()
        os.rmdir(probe_dir)
