"""Ops with no C shim (AOT550): the worker's listing before the compile, the compile's own
warning, and the finding that joins them (aotipre/runner/stages/shims.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from aotipre.runner.stages.base import StepRecord
from aotipre.runner.stages.shims import SHIM_STEP, ops_without_shim

MODELS = Path(__file__).with_name("shim_models.py")
WARNING = "{} is missing a c-shim implementation, using proxy executor as fallback"


def _line_of(text: str) -> int:
    return next(i for i, ln in enumerate(MODELS.read_text().splitlines(), 1) if text in ln)


@pytest.fixture(scope="module")
def listed() -> dict[str, list[dict[str, str]]]:
    """The listing of shim_models.py's models, in a fresh interpreter (torch stays out)."""
    pytest.importorskip("torch")
    proc = subprocess.run(
        [sys.executable, str(MODELS)], capture_output=True, text=True, timeout=300, check=False
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)


def test_the_listing_names_the_fallback_without_a_shim_and_its_model_line(listed) -> None:  # type: ignore[no-untyped-def]
    # linalg.det decomposes to aten._linalg_det (a fallback, no C shim); histc falls back with
    # a C shim; relu and add are lowered
    assert [o["op"] for o in listed["det"]] == ["aten._linalg_det.default"]
    assert listed["det"][0]["line"] == f"{MODELS}:{_line_of('the op with no C shim')} in forward"


def test_lite_mode_sends_lowered_ops_through_the_proxy_executor(listed) -> None:  # type: ignore[no-untyped-def]
    # the ops the compile warns about under lite mode (shim_models.py's docstring), and none
    # without it
    assert listed["sub"] == []
    assert [o["op"] for o in listed["sub_lite"]] == ["aten.sub.Tensor", "aten.relu.default"]


def test_the_finding_joins_the_listing_and_the_compiles_warning() -> None:
    listing = StepRecord(
        SHIM_STEP,
        "c_shims",
        "ok",
        entry={"ops": [{"op": "aten._linalg_det.default", "node": "det", "line": "m.py:3 in f"}]},
    )
    log = "W1129 ir.py:9214] " + WARNING.format("aten.angle.int") + "\n"
    log += "W1129 ir.py:9214] " + WARNING.format("aten._linalg_det.default") + "\n"
    found = ops_without_shim(listing, log)
    assert [(o.op, o.line, o.listed, o.warned) for o in found] == [
        ("aten._linalg_det.default", "m.py:3 in f", True, True),
        ("aten.angle.int", "", False, True),
    ]
    failed = StepRecord(SHIM_STEP, "c_shims", "error", entry={"ops": [{"op": "aten.x.y"}]})
    assert ops_without_shim(failed, "") == []
    assert ops_without_shim(None, "nothing here") == []


@pytest.mark.slow
def test_aot550_a_module_calling_linalg_det_is_flagged_before_and_by_the_compile(
    tmp_path: Path,
) -> None:
    torch = pytest.importorskip("torch")
    import aotipre
    from aotipre.api import CheckOptions
    from aotipre.runner.stages.options import DynamicOptions

    sys.path.insert(0, str(MODELS.parent))
    try:
        import shim_models
    finally:
        sys.path.remove(str(MODELS.parent))
    from aotipre.triage.escalate import TriageOptions

    # --minify on: a compile that succeeds runs no minifier and sets none of its configs
    opts = CheckOptions(
        dynamic=DynamicOptions(cache_dir=str(tmp_path)),
        triage=TriageOptions(minify=True),
    )
    x = torch.rand(3, 3, 3)
    report = aotipre.check(shim_models.DetAndHistc(), opts, example_inputs=(x,))
    found = [f for f in report.findings if f.code == "AOT550"]
    assert len(found) == 1, [(f.code, f.message) for f in report.findings]
    (f,) = found
    assert f.severity.value == "warning" and f.stage == "compile"
    line = f"{MODELS}:{_line_of('the op with no C shim')} in forward"
    assert (
        f"1 ATen op(s) with no C shim through the proxy executor: aten._linalg_det.default ({line})"
        in f.message
    )
    assert "listed before compiling and confirmed by the compile's warning" in f.message
    assert "histc" not in f.message
    assert f.evidence == (WARNING.format("aten._linalg_det.default"),)
    stages = {s.name: s for s in report.stages}
    assert stages["compile"].status.value == "passed" and stages["load"].status.value == "passed"
    assert not any("MINIFIER" in k for s in report.stages for k in s.env)
    assert "minif" not in stages["compile"].detail
    assert "AOT807" not in [f.code for f in report.findings]
    # a compile-cache hit compiles and lists nothing, and says the same from the entry's record
    again = aotipre.check(shim_models.DetAndHistc(), opts, example_inputs=(x,))
    assert "cache hit" in next(s.detail for s in again.stages if s.name == "compile")
    assert [(g.code, g.message, g.evidence) for g in again.findings if g.code == "AOT550"] == [
        (f.code, f.message, f.evidence)
    ]


class _Session:
    """What report_shimless reads of a Session: its records, model name and findings."""

    def __init__(self, records: dict[str, StepRecord]) -> None:
        from types import SimpleNamespace

        from aotipre.findings import codes

        self.records = records
        self.model = SimpleNamespace(name="model")
        self.findings: list = []
        self._codes = codes

    def add(self, code: str, message: str, stage: str, **fields: object) -> None:
        self.findings.append(self._codes.get(code).finding(message, stage=stage, **fields))


def test_the_message_says_which_source_saw_which_op() -> None:
    from aotipre.runner.stages.shims import ShimlessOp, report_shimless

    listing = StepRecord(SHIM_STEP, "c_shims", "ok", entry={"ops": [{"op": "aten.a.default"}]})
    log = WARNING.format("aten.b.default")
    s = _Session({SHIM_STEP: listing, "compile": StepRecord("compile", "compile", "ok", log=log)})
    report_shimless(s)  # type: ignore[arg-type]
    (mixed,) = s.findings
    assert mixed.message.endswith(
        "aten.a.default, aten.b.default; 1 listed before compiling, 1 named by the compile's warning"
    )
    assert mixed.evidence == (log,)
    failed = _Session({SHIM_STEP: listing, "compile": StepRecord("compile", "compile", "error")})
    report_shimless(failed)  # type: ignore[arg-type]
    assert "listed before compiling (Inductor falls back on them" in failed.findings[0].message
    nothing = _Session({"compile": StepRecord("compile", "compile", "ok")})
    report_shimless(nothing)  # type: ignore[arg-type]
    assert nothing.findings == []
    hit = _Session({"compile": StepRecord("compile", "compile", "ok")})
    report_shimless(hit, [ShimlessOp("aten.a.default", "m.py:1 in f", True, True)])  # type: ignore[arg-type]
    assert "aten.a.default (m.py:1 in f); listed before compiling and confirmed" in (
        hit.findings[0].message
    )
