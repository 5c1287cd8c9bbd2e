"""`aotipre check --against BASELINE` fails closed: a baseline that is not a package (a text
file, a FIFO, a folder that is no extracted package), that crashes, or that holds members
loading it unpickles without restriction (without --allow-pickle) gives one clear AOT654
error and a failing exit code, never a silent PASS. The real CLI, with the fake torch worker
behind a wrapper that logs which package each worker was given (so a refused baseline is
proven never to reach a worker) and scripts it per package."""

from __future__ import annotations

import json
import os
import pickle
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.hardening.craft import read_members, torch_save_zip, write_members

FAKES = Path(__file__).resolve().parents[1] / "fakes"
CLI = str(FAKES / "cli_with_fake_worker.py")
DATA = Path(__file__).resolve().parents[1] / "data"
WRAPPER = """
import json, os, runpy, sys
job = json.load(open(sys.argv[1]))
name = os.path.basename(job.get("package") or job.get("source_package") or "")
with open(os.environ["AGAINST_LOG"], "a") as log:
    log.write(name + "\\n")
os.environ["AOTIPRE_FAKE_SCRIPT"] = json.dumps(json.loads(os.environ["AGAINST_SCRIPT"]).get(name, {}))
sys.path.insert(0, FAKES)
sys.argv = [os.path.join(FAKES, "fake_torch_worker.py"), sys.argv[1]]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


class _Marker:
    """Unpickling this creates a file."""

    def __init__(self, path: Path) -> None:
        self.path = str(path)

    def __reduce__(self) -> tuple[Any, ...]:
        return (open, (self.path, "w"))


def pickled_baseline(path: Path, marker: Path) -> Path:
    """torch 2.14's both.pt2 (model 'model') with a weight stored as a hostile pickle."""
    out = []
    for name, data in read_members(DATA / "torch214" / "both.pt2"):
        if name.endswith("data/weights/model_weights_config.json"):
            config = json.loads(data)
            config["config"]["embed.weight"]["use_pickle"] = True
            data = json.dumps(config).encode()
        elif name.endswith("data/weights/weight_0"):
            data = torch_save_zip(pickle.dumps(_Marker(marker), protocol=2))
        out.append((name, data))
    return write_members(path, out)


def check_against(
    tmp_path: Path,
    pkg: Callable[[str], Path],
    baseline: Path,
    *extra: str,
    scripts: dict[str, Any] | None = None,
) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    """The CLI on aoti.pt2 with its inputs and `--against baseline`; the run and the package
    file names the workers were given."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    wrapper = tmp_path / "wrapper.py"
    wrapper.write_text(f"FAKES = {str(FAKES)!r}\n" + WRAPPER)
    log = tmp_path / "jobs.log"
    env = dict(
        os.environ,
        AGAINST_LOG=str(log),
        AGAINST_SCRIPT=json.dumps(scripts or {}),
        TMPDIR=str(tmp_path),
    )
    run = subprocess.run(
        [sys.executable, CLI, str(wrapper), "check", "--no-config", "--no-probe"]
        + [str(pkg("aoti")), "--inputs", str(pkg("aoti_inputs")), "--against", str(baseline)]
        + ["--cache-dir", str(tmp_path / "cache"), *extra],
        capture_output=True,
        text=True,
        timeout=120,  # a baseline that blocks (a FIFO) must not hang the check
        env=env,
        cwd=tmp_path,
    )
    jobs = log.read_text().split() if log.exists() else []
    return run, jobs


def one_aot654(run: subprocess.CompletedProcess[str]) -> str:
    """The run failed the gate with exactly one AOT654 line, an error; its text (unwrapped)."""
    assert run.returncode == 1, (run.returncode, run.stdout[-3000:], run.stderr[-3000:])
    lines = run.stdout.splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith("AOT654")]
    assert len(starts) == 1, run.stdout
    assert lines[starts[0]].split()[1] == "error", lines[starts[0]]
    said = [lines[starts[0]]]
    for line in lines[starts[0] + 1 :]:
        if not line.startswith(" ") or line.strip().startswith("hint:"):
            break
        said.append(line)
    return " ".join(" ".join(said).split())


def test_a_text_file(tmp_path: Path, pkg: Callable[[str], Path]) -> None:
    baseline = tmp_path / "notes.txt"
    baseline.write_text("the deployed model is v3\n")
    run, jobs = check_against(tmp_path, pkg, baseline)
    said = one_aot654(run)
    assert "notes.txt could not be measured" in said and "not a zip archive" in said, said
    assert "notes.txt" not in jobs


def test_a_fifo_does_not_hang(tmp_path: Path, pkg: Callable[[str], Path]) -> None:
    baseline = tmp_path / "old.pt2"
    os.mkfifo(baseline)
    run, jobs = check_against(tmp_path, pkg, baseline)
    said = one_aot654(run)
    assert "old.pt2 could not be measured: it is not a regular file" in said, said
    assert "old.pt2" not in jobs


def test_a_folder_that_is_no_package(tmp_path: Path, pkg: Callable[[str], Path]) -> None:
    baseline = tmp_path / "deployed"
    (baseline / "inner").mkdir(parents=True)
    (baseline / "inner" / "model.json").write_text("{}")
    run, jobs = check_against(tmp_path, pkg, baseline)
    said = one_aot654(run)
    assert "not an extracted .pt2 package" in said, said
    assert not jobs or all(j == "aoti.pt2" for j in jobs)


@pytest.mark.parametrize("crash", ["load", "run"])
def test_a_baseline_that_crashes(tmp_path: Path, pkg: Callable[[str], Path], crash: str) -> None:
    baseline = tmp_path / "old.pt2"
    shutil.copy(pkg("aoti"), baseline)
    scripts = {"old.pt2": {crash: {"crash": "SIGSEGV"}}}
    run, jobs = check_against(tmp_path, pkg, baseline, scripts=scripts)
    said = one_aot654(run)
    assert f"old.pt2 could not be measured ({crash}:" in said, said
    assert "old.pt2" in jobs  # it was run, and its crash is the finding


def test_a_baseline_holding_pickles(tmp_path: Path, pkg: Callable[[str], Path]) -> None:
    """Refused before any worker sees it; --allow-pickle measures it."""
    marker = tmp_path / "unpickled"
    baseline = pickled_baseline(tmp_path / "old.pt2", marker)
    run, jobs = check_against(tmp_path, pkg, baseline)
    said = one_aot654(run)
    assert "old.pt2 was not loaded: loading it unpickles 1 member(s) without restriction" in said
    assert "data/weights/weight_0 (weight: torch.load(weights_only=False))" in said, said
    assert "--allow-pickle" in said
    assert "old.pt2" not in jobs and not marker.exists()

    trusted, jobs = check_against(tmp_path / "trusted", pkg, baseline, "--allow-pickle")
    assert "AOT654" not in trusted.stdout, trusted.stdout
    assert "old.pt2" in jobs  # measured (by the fake worker, which opens nothing)
    assert not marker.exists()
