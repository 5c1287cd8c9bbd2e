"""The weight-swap check (--weights) on packages built through the public API: each
expectation is first shown with plain torch in a fresh process (load_constants, keyed by
state_dict names, check_full_update=True: torch's own load_weights_to_pt2_contents), then
aotipre's static findings and its weights stage."""

from __future__ import annotations

import json
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from aotipre.api import CheckOptions, check
from aotipre.findings import StageStatus
from aotipre.runner.stages import DynamicOptions
from tests.building import build

pytestmark = pytest.mark.slow

HERE = Path(__file__).resolve().parent

PLAIN = """
import json, sys, torch
from torch._inductor.package import load_package
pkg, weights, inputs, ep = sys.argv[1:5]
x = torch.load(inputs)[0]
tensors = torch.load(weights)
m = load_package(pkg)
before = m(x)
try:
    m.load_constants(tensors, check_full_update=True)
    error = None
except Exception as e:
    error = f"{type(e).__name__}: {str(e).splitlines()[0]}"
after = m(x)
out = {"error": error, "changed": not torch.equal(before, after)}
if ep != "-":
    mod = torch.export.load(ep).module()
    mod.load_state_dict(tensors, strict=False)
    out["matches_eager"] = torch.allclose(after, mod(x), atol=1e-5)
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("weights")
    build(HERE / "weights_models.py", out)
    edit = """
import sys, torch
d = sys.argv[1]
new = torch.load(f"{d}/lin_new.pt")
torch.save({k: v for k, v in new.items() if k != "fc.bias"}, f"{d}/lin_missing.pt")
torch.save({("fc.biass" if k == "fc.bias" else k): v for k, v in new.items()}, f"{d}/lin_renamed.pt")
torch.save({**new, "fc.weight": new["fc.weight"].double()}, f"{d}/lin_f64.pt")
torch.save({**new, "fc.weight": new["fc.weight"].half()}, f"{d}/lin_f16.pt")
torch.save({**new, "fc.weight": new["fc.weight"].t().contiguous()}, f"{d}/lin_transposed.pt")
same = torch.load(f"{d}/fold_same.pt")
torch.save({**same, "_FOLDED_CONST_add": torch.zeros(8, 16)}, f"{d}/fold_folded.pt")
"""
    proc = subprocess.run(
        [sys.executable, "-c", edit, str(out)], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    return out


def plain_torch(built: Path, pkg: str, weights: str, inputs: str = "inputs.pt", ep: bool = True):  # type: ignore[no-untyped-def]
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            PLAIN,
            str(built / f"{pkg}.pt2"),
            str(built / weights),
            str(built / inputs),
            str(built / f"{pkg}_ep.pt2") if ep else "-",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1]), proc.stderr


def run_check(built: Path, pkg: str, weights: str, *, inputs: str = "inputs.pt", ep: bool = True):  # type: ignore[no-untyped-def]
    dynamic = DynamicOptions(
        exported_program=str(built / f"{pkg}_ep.pt2") if ep else None,
        timeout_s=120.0,
        perf=None,
        probe=False,
    )
    report = check(
        str(built / f"{pkg}.pt2"),
        CheckOptions(
            inputs=str(built / inputs), dynamic=dynamic, canary=False, weights=str(built / weights)
        ),
    )
    assert report.error is None, report.error
    stage = next(s for s in report.stages if s.name == "weights")
    found = {f.code: f.message for f in report.findings if f.code.startswith("AOT06")}
    return stage, found


def to_safetensors(built: Path, source: str, target: str) -> None:
    """The state_dict written in the safetensors layout by a tiny writer (no safetensors
    package): 8-byte little-endian header length, JSON header, the raw bytes."""
    script = """
import json, struct, sys, torch
sd = torch.load(sys.argv[1])
header, blobs, off = {}, [], 0
for k, v in sd.items():
    b = v.contiguous().numpy().tobytes()
    header[k] = {"dtype": {torch.float32: "F32", torch.float64: "F64"}[v.dtype],
                 "shape": list(v.shape), "data_offsets": [off, off + len(b)]}
    blobs.append(b); off += len(b)
h = json.dumps(header).encode()
open(sys.argv[2], "wb").write(struct.pack("<Q", len(h)) + h + b"".join(blobs))
"""
    subprocess.run(
        [sys.executable, "-c", script, str(built / source), str(built / target)], check=True
    )


def test_a_correct_swap_matches_the_exported_program_with_those_weights(built: Path) -> None:
    plain, _ = plain_torch(built, "lin", "lin_new.pt")
    assert plain == {"error": None, "changed": True, "matches_eager": True}
    stage, found = run_check(built, "lin", "lin_new.pt")
    assert found == {}
    assert stage.status is StageStatus.PASSED, stage.detail
    assert "match the ExportedProgram" in stage.detail
    to_safetensors(built, "lin_new.pt", "lin_new.safetensors")
    stage, found = run_check(built, "lin", "lin_new.safetensors")
    assert found == {} and stage.status is StageStatus.PASSED, stage.detail


def test_a_missing_tensor_is_refused_by_torch_and_named(built: Path) -> None:
    plain, stderr = plain_torch(built, "lin", "lin_missing.pt")
    assert "API call failed" in plain["error"]
    assert "Error: Cannot find constants fc_bias in constants_map!" in stderr
    stage, found = run_check(built, "lin", "lin_missing.pt")
    assert "lacks 'fc.bias'" in found["AOT060"]
    assert "Cannot find constants fc_bias" in found["AOT067"]
    assert stage.status is StageStatus.FAILED


def test_a_renamed_tensor_is_refused_and_the_closest_name_suggested(built: Path) -> None:
    plain, _ = plain_torch(built, "lin", "lin_renamed.pt")
    assert plain["error"] == "RuntimeError: Constant not found: fc.biass"
    stage, found = run_check(built, "lin", "lin_renamed.pt")
    assert "did you mean 'fc.bias'" in found["AOT061"]
    assert "AOT060" in found
    assert "Constant not found: fc.biass" in found["AOT067"]


def test_a_wrong_dtype_runs_silently_in_torch_and_is_caught(built: Path) -> None:
    plain, _ = plain_torch(built, "lin", "lin_f16.pt")
    assert plain == {"error": None, "changed": True, "matches_eager": False}
    stage, found = run_check(built, "lin", "lin_f16.pt")
    assert "float16" in found["AOT063"] and "float32" in found["AOT063"]
    assert "differs from the ExportedProgram" in found["AOT068"]
    assert stage.status is StageStatus.FAILED


def test_a_wider_dtype_corrupts_the_heap_in_torch_and_is_contained(built: Path) -> None:
    """float64 bytes copied into a float32 constant write past it: plain torch aborts
    (`double free or corruption`, measured), aotipre's worker dies and the stage says so."""
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            PLAIN,
            *(str(built / n) for n in ("lin.pt2", "lin_f64.pt", "inputs.pt")),
            "-",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode != 0 or json.loads(proc.stdout.splitlines()[-1])["error"] is None
    stage, found = run_check(built, "lin", "lin_f64.pt")
    assert "float64" in found["AOT063"]
    assert {"AOT067", "AOT068"} & set(found), found
    assert stage.status is StageStatus.FAILED


def test_a_transposed_weight_runs_silently_in_torch_and_is_named(built: Path) -> None:
    plain, _ = plain_torch(built, "lin", "lin_transposed.pt", ep=False)
    assert plain == {"error": None, "changed": True}
    stage, found = run_check(built, "lin", "lin_transposed.pt")
    assert "[8, 16]" in found["AOT062"] and "[16, 8]" in found["AOT062"]
    assert stage.status is StageStatus.PASSED  # ran; the ExportedProgram refuses the shape
    assert "refuses these weights" in stage.detail


def test_inlined_small_tensors_are_not_swappable(built: Path) -> None:
    plain, _ = plain_torch(built, "small", "small_new.pt", inputs="inputs4.pt", ep=False)
    assert plain["error"] in (
        "RuntimeError: Constant not found: scale",
        "RuntimeError: Constant not found: fc.bias",
    )
    stage, found = run_check(built, "small", "small_new.pt", inputs="inputs4.pt")
    assert "inlined" in found["AOT066"]
    assert "Constant not found" in found["AOT067"]
    assert stage.status is StageStatus.FAILED


def test_a_swapped_folded_constant_is_silently_ignored(built: Path) -> None:
    plain, _ = plain_torch(built, "fold", "fold_folded.pt", ep=False)
    assert plain == {"error": None, "changed": False}
    stage, found = run_check(built, "fold", "fold_folded.pt", ep=False)
    assert "folded" in found["AOT065"]
    assert "silently ignored" in found["AOT069"]
    assert stage.status is StageStatus.FAILED


def test_without_weights_the_stage_is_skipped(built: Path) -> None:
    report = check(
        str(built / "lin.pt2"),
        CheckOptions(
            inputs=str(built / "inputs.pt"),
            dynamic=DynamicOptions(perf=None, probe=False),
            canary=False,
        ),
    )
    stage = next(s for s in report.stages if s.name == "weights")
    assert stage.status is StageStatus.SKIPPED and stage.duration_s == 0.0


_ = struct  # the safetensors layout is written in the subprocess above
