"""The host's first check measures the loader's imports and torch's CPU-ISA probe in a process of
its own beside its first worker (runner/loadmeasure.py): that process never outlives aotipre,
however the check ends."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.hardening.test_faults import wait_gone


def _group_of(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[2])
    except (OSError, ValueError, IndexError):
        return None


def _measuring_processes(folder_prefix: str) -> list[int]:
    """Every process in the group of the one whose argv names a measure's folder."""
    leaders = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                argv = f.read().decode(errors="replace")
        except OSError:
            continue
        if folder_prefix in argv:
            leaders.append(int(entry))
    groups = {g for g in map(_group_of, leaders) if g is not None}
    return [int(e) for e in os.listdir("/proc") if e.isdigit() and _group_of(int(e)) in groups]


@pytest.mark.slow
def test_ctrl_c_while_the_check_waits_for_its_measure_leaves_no_process_behind(
    pkg: Callable[[str], Path], tmp_path: Path
) -> None:
    gxx = shutil.which("g++")
    if gxx is None:
        pytest.skip("no g++: torch's probe builds nothing here")
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    # a compiler that takes its time: the probe's check-program builds (into an empty inductor
    # cache) keep the measure running long after the first worker is done
    slow = tmp_path / "slow"
    slow.mkdir()
    (slow / "g++").write_text(f'#!/bin/sh\nsleep 2\nexec {gxx} "$@"\n')
    (slow / "g++").chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith("TORCHINDUCTOR_")}
    env.update(
        TMPDIR=str(tmp), TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "inductor"), CXX=str(slow / "g++")
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "aotipre", "check", str(pkg("aoti")),
         "--inputs", str(pkg("aoti_inputs")), "--cache-dir", str(tmp_path / "cache"),
         "--no-probe", "--no-config", "--progress", "--format", "json"],
        env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert proc.stderr is not None
        seen = []
        deadline = time.monotonic() + 240
        for line in proc.stderr:
            seen.append(line)
            if "waiting for the measure" in line:
                break
            assert time.monotonic() < deadline, "".join(seen)
        else:
            raise AssertionError(f"the check never waited for its measure:\n{''.join(seen)}")
        measuring = _measuring_processes(str(tmp / "aotipre-loadcost-"))
        assert measuring, "no measuring process runs"
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130 and err.endswith("aotipre: interrupted\n"), err
    assert wait_gone(measuring) == [], "the measuring process outlived aotipre"
    assert list(tmp.iterdir()) == [], "temporary folders were left behind"
