"""Crash triage on a CUDA GPU (gpu marker; skipped without CUDA): a device-side assert from an
out-of-range embedding (whose asynchronous error can blame a later cuBLAS call), and a real
illegal memory access from an unchecked indirect load, confirmed by compute-sanitizer. Both
run at once (every step is its own
worker process), from the CPU fixtures recompiled for CUDA; the first through the CLI (with a
repro bundle), the second through the library.

Set AOTIPRE_EVIDENCE_DIR to keep each report (JSON and table) and the bundle there
(scripts/gpu_triage.sh does); AOTIPRE_TRIAGE_CACHE to choose the compile cache.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from aotipre import CheckOptions, check
from aotipre.report import render_report
from aotipre.runner.stages import DynamicOptions
from aotipre.triage.escalate import TriageOptions

pytestmark = [pytest.mark.gpu, pytest.mark.slow]
REPO = Path(__file__).resolve().parents[2]


def _inputs(tmp: Path) -> dict[str, Path]:
    import torch

    ids = torch.tensor([[345, 139, 124, 368, 263], [313, 491, 341, 600, 432]])
    paths = {"token": tmp / "token_oob_inputs.pt", "huge": tmp / "huge_ids.pt"}
    torch.save(((ids, torch.ones(2, 5)), {}), paths["token"])
    huge = ids.clone()
    huge[1, 3] = 10**12
    torch.save(((huge,), {}), paths["huge"])
    return paths


@pytest.fixture(scope="module")
def gpu_reports(
    pkg: Callable[[str], Path], tmp_path_factory: pytest.TempPathFactory
) -> dict[str, dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("gpu-triage")
    cache = os.environ.get("AOTIPRE_TRIAGE_CACHE") or str(tmp / "cache")
    evidence = Path(os.environ.get("AOTIPRE_EVIDENCE_DIR") or tmp / "evidence")
    evidence.mkdir(parents=True, exist_ok=True)
    inputs = _inputs(tmp)

    def device_assert() -> dict[str, Any]:
        # TokenModel: embedding (asserts on id 600) -> addmm (cuBLAS) -> sum
        out = evidence / "device_assert.json"
        argv = [sys.executable, "-m", "aotipre", "check", str(pkg("both")), "--inputs"]
        argv += [str(inputs["token"]), "--device", "cuda", "--no-probe", "--cache-dir", cache]
        argv += ["--format", "json", "--output", str(out)]
        argv += ["--report", f"table:{evidence / 'device_assert.txt'}"]
        argv += ["--artifacts", str(evidence / "bundle")]
        proc = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=900)
        (evidence / "device_assert.cli.log").write_text(
            f"$ {' '.join(argv)}\nexit {proc.returncode}\n{proc.stdout[-4000:]}\n{proc.stderr[-20000:]}"
        )
        assert proc.returncode == 1, proc.stderr[-4000:]
        return json.loads(out.read_text())

    def illegal_memory_access() -> dict[str, Any]:
        # EmbeddingOnly compiled with assert_indirect_indexing off: id 1e12 reads far away
        report = check(
            pkg("embedding_oob"),
            CheckOptions(
                inputs=str(inputs["huge"]),
                dynamic=DynamicOptions(
                    device="cuda",
                    cache_dir=cache,
                    probe=False,
                    recompile=True,
                    inductor_configs={"assert_indirect_indexing": False},
                ),
                triage=TriageOptions(
                    parallel=4, sanitizer=True, artifacts=str(evidence / "bundle-ima")
                ),
            ),
        )
        (evidence / "illegal_memory_access.json").write_text(render_report(report, "json"))
        (evidence / "illegal_memory_access.txt").write_text(render_report(report, "table"))
        return report.to_dict()

    with ThreadPoolExecutor(max_workers=2) as pool:
        a = pool.submit(device_assert)
        b = pool.submit(illegal_memory_access)
        return {"device_assert": a.result(), "illegal_memory_access": b.result()}


def _summary(report: dict[str, Any]) -> str:
    return json.dumps(
        {
            "findings": [(f["code"], f["message"][:300]) for f in report["findings"]],
            "stages": [(s["name"], s["status"], s["detail"][:300]) for s in report["stages"]],
        },
        indent=1,
    )


def test_device_assert_names_the_embedding_kernel(gpu_reports: dict[str, Any]) -> None:
    report = gpu_reports["device_assert"]
    codes = [f["code"] for f in report["findings"]]
    # pinned: a device-side assert is a CUDA fault (docs/evidence/h200-triage-device_assert.json)
    assert [f["code"] for f in report["findings"] if f["stage"] == "run"] == ["AOT608"], _summary(
        report
    )
    assert report["diagnosis"], _summary(report)
    d = report["diagnosis"][0]
    kernel = d["kernel"] or ""
    assert kernel.startswith("triton_") and "embedding" in kernel, _summary(report)
    # a device assertion printed by the kernel (or quoting a check only it holds) names it at
    # once; else the synchronous steps do
    assert d["identified_by"] in ("device-assert", "printer-3", "sync-rerun"), _summary(report)
    assert d["kind"] == "index_out_of_range", _summary(report)
    assert any(t["input"] == "input_ids" and t["max"] == 600 for t in d["inputs"]), d["inputs"]
    assert "AOT803" in codes
    assert f"def {kernel}" in (d["kernel_source"] or "")
    if "CUBLAS" in (d["first_error"] or "") or "mm_out" in (d["first_error"] or ""):
        # the H100 case: the first error blamed cuBLAS in aoti_torch_cuda_mm_out
        assert d["misattributed"] and "AOT802" in codes, _summary(report)
    stages = {s["name"]: s for s in report["stages"]}
    for sid in ("sync-rerun", "printer-3"):
        st = stages[f"triage:{sid}"]
        if d["identified_by"] == "device-assert":
            assert st["status"] == "skipped" and "already names" in st["detail"], st
        else:
            assert st["status"] == "passed", st
    if stages["triage:sync-rerun"]["status"] == "passed":
        assert stages["triage:sync-rerun"]["env"].get("CUDA_LAUNCH_BLOCKING") == "1"


def test_illegal_memory_access_names_the_kernel(gpu_reports: dict[str, Any]) -> None:
    report = gpu_reports["illegal_memory_access"]
    codes = [f["code"] for f in report["findings"]]
    # pinned: docs/evidence/h100-triage-illegal_memory_access-sanitizer.json and the H200 run
    assert [f["code"] for f in report["findings"] if f["stage"] == "run"] == ["AOT608"], _summary(
        report
    )
    assert report["diagnosis"], _summary(report)
    d = report["diagnosis"][0]
    kernel = d["kernel"] or ""
    assert kernel.startswith("triton_") and "embedding" in kernel, _summary(report)
    assert d["identified_by"] in ("printer-3", "sync-rerun"), _summary(report)
    # the crash did not name the kernel: the synchronous re-run ran, in the worker the session
    # started beside the model's (it waited with torch imported: runner/prewarm.py)
    rerun = {s["name"]: s for s in report["stages"]}["triage:sync-rerun"]
    assert rerun["status"] == "passed", rerun
    assert [p.endswith(", started before the crash)") for p in rerun["processes"]] == [True], rerun
    assert any(t["input"] == "ids" and t["max"] == 10**12 for t in d["inputs"]), d["inputs"]
    # compute-sanitizer memcheck (asked for here) confirms it from its own report
    sanitizer = {s["name"]: s for s in report["stages"]}["triage:sanitizer"]
    assert sanitizer["status"] == "passed", sanitizer
    assert "Invalid __global__ read" in sanitizer["detail"], sanitizer
    assert kernel in sanitizer["detail"], sanitizer
    assert "AOT808" in codes, _summary(report)
