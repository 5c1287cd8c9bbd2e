"""The worker's result file (protocol.Recorder) under the flushes a compile makes from several
threads: the compile's phase hooks run in Inductor's autotuning and build threads under
max_autotune (seen on an H200: a rewrite raced another and failed the compile with
FileNotFoundError on the result's .tmp file), and a forked child never rewrites it."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

from aotipre.runner.worker.protocol import Recorder


def test_flushes_from_several_threads_never_race(tmp_path: Path) -> None:
    rec = Recorder(str(tmp_path / "job.result.json"))
    failures: list[BaseException] = []
    start = threading.Barrier(8)

    def flush_often(n: int) -> None:
        start.wait()
        try:
            for i in range(300):
                rec.data["steps"][f"t{n}"] = {"i": i}
                rec.flush()
        except BaseException as exc:  # noqa: BLE001 - what a racing rewrite raised
            failures.append(exc)

    threads = [threading.Thread(target=flush_often, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []
    rec.flush()
    assert json.loads((tmp_path / "job.result.json").read_text())["steps"]["t7"] == {"i": 299}


def test_a_forked_child_does_not_rewrite_the_workers_result(tmp_path: Path) -> None:
    path = tmp_path / "job.result.json"
    rec = Recorder(str(path))
    rec.flush()
    pid = os.fork()
    if pid == 0:  # the child: what a compile's forked helper would do
        rec.data["done"] = "child"
        rec.flush()
        os._exit(0)
    os.waitpid(pid, 0)
    assert json.loads(path.read_text())["done"] is False
