"""How the parent sizes and runs a worker job (aotipre/runner/launch.py)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from aotipre.runner import launch


def test_a_jobs_budget_honours_each_steps_own_limit() -> None:
    steps = [
        {"id": "compile", "op": "compile"},
        {"id": "load", "op": "load"},
        {"id": "cpp_build", "op": "cpp_build", "timeout_s": 660.0},  # the harness build's limit
    ]
    assert launch.job_budget_s(steps, 300.0, 900.0) == 900.0 + 300.0 + 660.0
    assert launch.job_budget_s([], 300.0, 900.0) == 0.0


def test_run_job_file_writes_the_job_and_reads_the_result(tmp_path: Path) -> None:
    # a stand-in worker: reads its job file, writes the result where the parent asked
    worker = (
        "import json, os, sys\n"
        "job = json.load(open(sys.argv[1]))\n"
        "json.dump({'tag': job['tag'], 'cwd': os.getcwd()}, open(os.environ['AOTIPRE_RESULT_PATH'], 'w'))\n"
    )
    job = {"tag": "t1", "workdir": str(tmp_path), "steps": []}
    argv, outcome = launch.run_job_file(
        job, lambda path: (sys.executable, "-c", worker, path), env={}, budget_s=30.0
    )
    assert argv[-1] == str(tmp_path / "t1.json")
    assert json.loads((tmp_path / "t1.json").read_text()) == job
    assert outcome.ok and outcome.result == {"tag": "t1", "cwd": str(tmp_path)}
