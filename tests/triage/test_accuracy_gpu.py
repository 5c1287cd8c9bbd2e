"""Accuracy triage on a CUDA GPU (gpu marker; skipped without CUDA), each case grounded in what
plain torch does in a fresh process (build_accuracy_cuda.py's facts): an fp32 linear compiled
with max_autotune's Triton mm template under TF32 ("high" float32 matmul precision) against a
full-fp32 eager run, proven TF32 by a rebuild and a comparison with TF32 off on both sides; and
the bf16 chain whose fused Triton kernel keeps fp32 intermediates, proven precision-cast
elision. Both builds, then both checks, run at once (every step is its own worker process).

Set AOTIPRE_EVIDENCE_DIR to keep each report (JSON and table) and the builders' facts there.
"""

from __future__ import annotations

import json
import os
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from aotipre import CheckOptions, check
from aotipre.report import render_report
from aotipre.runner.stages import DynamicOptions
from tests.building import build

pytestmark = [pytest.mark.gpu, pytest.mark.slow]
BUILDER = Path(__file__).parent / "build_accuracy_cuda.py"
MAX_AUTOTUNE = {"max_autotune": True, "max_autotune_gemm_backends": "TRITON"}
"""The tf32 package's inductor_configs (the builder's), told to the check as what it was
compiled with: the diagnostic rebuild and every knob's rebuild compile with them too."""


@pytest.fixture(scope="module")
def cuda_cases(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    out = tmp_path_factory.mktemp("accuracy-cuda")
    evidence = Path(os.environ.get("AOTIPRE_EVIDENCE_DIR") or out / "evidence")
    evidence.mkdir(parents=True, exist_ok=True)

    def one(kind: str, configs: dict[str, Any]) -> dict[str, Any]:
        build(BUILDER, out, kind)
        facts = json.loads((out / f"{kind}_facts.json").read_text())
        shutil.copy(out / f"{kind}_facts.json", evidence / f"accuracy-{kind}-facts.json")
        report = check(
            str(out / f"{kind}_aoti.pt2"),
            CheckOptions(
                inputs=str(out / f"{kind}_inputs.pt"),
                dynamic=DynamicOptions(
                    device="cuda",
                    probe=False,
                    use_cache=False,
                    exported_program=str(out / f"{kind}.pt2"),
                    inductor_configs=configs,
                ),
            ),
        )
        (evidence / f"accuracy-{kind}.json").write_text(render_report(report, "json"))
        (evidence / f"accuracy-{kind}.txt").write_text(render_report(report, "table"))
        return {"facts": facts, "report": report}

    with ThreadPoolExecutor(max_workers=2) as pool:
        tf32 = pool.submit(one, "tf32", MAX_AUTOTUNE)
        bf16 = pool.submit(one, "bf16", {})
        return {"tf32": tf32.result(), "bf16": bf16.result()}


def _summary(report: Any) -> str:
    data = report.to_dict()
    return json.dumps(
        {
            "findings": [(f["code"], f["message"][:400]) for f in data["findings"]],
            "stages": [(s["name"], s["status"], s["detail"][:400]) for s in data["stages"]],
        },
        indent=1,
    )


def _codes(report: Any) -> list[str]:
    return [f.code for f in report.findings]


def test_tf32_in_a_triton_mm_template_is_localized_and_proven(
    cuda_cases: dict[str, dict[str, Any]],
) -> None:
    facts, report = cuda_cases["tf32"]["facts"], cuda_cases["tf32"]["report"]
    # plain torch: the template was compiled with TF32, eager ran full fp32 (a fresh process's
    # default), and the difference is far beyond fp32's tolerance; the same compile under
    # "highest" matches eager
    assert facts["package_tf32"] and facts["eager_precision"] == "highest"
    assert facts["gap"] > 1e-4
    assert facts["rebuilds"][0]["precision"] == "highest" and facts["rebuilds"][0]["gap"] < 1e-5
    assert "AOT701" in _codes(report) and "AOT709" in _codes(report), _summary(report)
    (d,) = report.accuracy
    assert d.kernel is not None and d.kernel.startswith("triton_tem"), _summary(report)
    assert "linear" in d.nodes, d.nodes
    assert d.cause == "tf32-off", _summary(report)
    proof = next(t for t in d.trials if t.verdict == "cause")
    assert proof.configs["torch.float32_matmul_precision"] == "highest"
    assert proof.max_abs is not None and proof.max_abs < 1e-4
    found = next(f for f in report.findings if f.code == "AOT709")
    assert "set_float32_matmul_precision('highest')" in (found.hint or "")
    # the ladder on CUDA tried no CPU-only or bf16 knob for an fp32 matmul
    assert {t.knob for t in d.trials} <= {"tf32-off"}, _summary(report)


def test_a_bf16_chain_on_cuda_is_localized_to_its_triton_kernel_and_proven(
    cuda_cases: dict[str, dict[str, Any]],
) -> None:
    facts, report = cuda_cases["bf16"]["facts"], cuda_cases["bf16"]["report"]
    assert facts["gap"] > 0.05  # plain torch: the compiled bf16 chain differs from eager
    assert facts["rebuilds"][0]["gap"] < facts["gap"] / 10  # emulate_precision_casts closes it
    assert "AOT701" in _codes(report) and "AOT709" in _codes(report), _summary(report)
    (d,) = report.accuracy
    assert d.kernel is not None and d.kernel.startswith("triton_"), _summary(report)
    assert {"add", "sub"} <= set(d.nodes), d.nodes
    assert any("(y + 100.0) - 100.0" in line for line in d.source), d.source
    # an extern mm before it that computes only part of `linear` (when its bias is added in
    # the Triton kernel) is not compared with the node's eager value: no false divergence
    assert d.series[0].kernel.startswith("aoti_torch_cuda_"), d.series
    assert d.series[0].mismatches == 0, d.series
    assert d.cause == "precision-casts", _summary(report)
    assert d.trials[0].knob == "precision-casts"
