"""The weight-swap check (--weights) on packages built through the public API: each
expectation is first shown with plain torch in a fresh process (load_constants, keyed by
state_dict names, check_full_update=True: torch's own load_weights_to_pt2_contents; the updates
plain torch survives share one process, each on a model loaded for it), then aotipre's static
findings and its weights stage."""

from __future__ import annotations

import json
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from aotipre.api import CheckOptions, check
from aotipre.findings import StageStatus
from aotipre.pt2.reader import read_package, with_reference_values
from aotipre.runner.stages import DynamicOptions
from aotipre.triage.state import TriageOptions
from tests.building import build

pytestmark = pytest.mark.slow

HERE = Path(__file__).resolve().parent

PLAIN = """
import json, sys, torch
from torch._inductor.package import load_package
results = {}
for name, pkg, weights, inputs, ep in json.loads(sys.argv[1]):
    print(f"@@case {name}", file=sys.stderr, flush=True)  # each case's part of stderr
    x = torch.load(inputs)[0]
    tensors = torch.load(weights)
    m = load_package(pkg)  # a model of its own: one case's update never reaches another
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
    results[name] = out
    print(json.dumps(results), flush=True)  # the last line: every case so far
"""
"""Plain torch on weight updates: for each case (name, package, weights, inputs, its
ExportedProgram or "-"), a freshly loaded model, load_constants(check_full_update=True), and
what it then computes; several cases in one fresh process, each with a model of its own."""

CASE_MARK = "@@case "
PlainFacts = dict[str, tuple[dict, str]]
"""case name -> (PLAIN's result, the case's part of stderr)."""

SURVIVING_CASES = {
    # name: (package, weights, inputs, with the ExportedProgram): the updates plain torch
    # survives (lin_f64.pt corrupts the heap: its own process, in its test)
    "lin_new": ("lin", "lin_new.pt", "inputs.pt", True),
    "lin_missing": ("lin", "lin_missing.pt", "inputs.pt", True),
    "lin_renamed": ("lin", "lin_renamed.pt", "inputs.pt", True),
    "lin_f16": ("lin", "lin_f16.pt", "inputs.pt", True),
    "lin_transposed": ("lin", "lin_transposed.pt", "inputs.pt", False),
    "small_new": ("small", "small_new.pt", "inputs4.pt", False),
    "two_new": ("two", "two_new.pt", "inputs.pt", True),
    "fold_folded": ("fold", "fold_folded.pt", "inputs.pt", False),
}


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("weights")
    build(HERE / "weights_models.py", out)
    return out


def plain_torch_process(
    built: Path, cases: dict[str, tuple[str, str, str, bool]]
) -> subprocess.CompletedProcess[str]:
    """PLAIN run on `cases` of the `built` folder in one fresh process."""
    argv = [
        [name, str(built / f"{pkg}.pt2"), str(built / weights), str(built / inputs),
         str(built / f"{pkg}_ep.pt2") if ep else "-"]
        for name, (pkg, weights, inputs, ep) in cases.items()
    ]  # fmt: skip
    return subprocess.run(
        [sys.executable, "-c", PLAIN, json.dumps(argv)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.fixture(scope="module")
def plain_torch(built: Path) -> PlainFacts:
    """What plain torch does with each of SURVIVING_CASES: case name -> (PLAIN's result, the
    case's part of stderr)."""
    proc = plain_torch_process(built, SURVIVING_CASES)
    assert proc.returncode == 0, proc.stderr[-4000:]
    results = json.loads(proc.stdout.strip().splitlines()[-1])
    stderr = {}
    for part in proc.stderr.split(CASE_MARK)[1:]:
        name, _, text = part.partition("\n")
        stderr[name] = text
    assert set(results) == set(stderr) == set(SURVIVING_CASES), (results, stderr)
    return {name: (results[name], stderr[name]) for name in SURVIVING_CASES}


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
            inputs=str(built / inputs),
            dynamic=dynamic,
            canary=False,
            weights=str(built / weights),
            # the weights stage's findings are the subject, not triage's (accuracy triage
            # would localize the mismatch a bad swap causes, crash triage a dead worker)
            triage=TriageOptions(escalate=False),
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


def test_a_correct_swap_matches_the_exported_program_with_those_weights(
    built: Path, plain_torch: PlainFacts
) -> None:
    plain, _ = plain_torch["lin_new"]
    assert plain == {"error": None, "changed": True, "matches_eager": True}
    stage, found = run_check(built, "lin", "lin_new.pt")
    assert found == {}
    assert stage.status is StageStatus.PASSED, stage.detail
    assert "match the ExportedProgram" in stage.detail
    to_safetensors(built, "lin_new.pt", "lin_new.safetensors")
    stage, found = run_check(built, "lin", "lin_new.safetensors")
    assert found == {} and stage.status is StageStatus.PASSED, stage.detail


def test_a_missing_tensor_is_refused_by_torch_and_named(
    built: Path, plain_torch: PlainFacts
) -> None:
    plain, stderr = plain_torch["lin_missing"]
    assert "API call failed" in plain["error"]
    assert "Error: Cannot find constants fc_bias in constants_map!" in stderr
    stage, found = run_check(built, "lin", "lin_missing.pt")
    assert "lacks 'fc.bias'" in found["AOT060"]
    assert "Cannot find constants fc_bias" in found["AOT067"]
    assert stage.status is StageStatus.FAILED


def test_a_renamed_tensor_is_refused_and_the_closest_name_suggested(
    built: Path, plain_torch: PlainFacts
) -> None:
    plain, _ = plain_torch["lin_renamed"]
    assert plain["error"] == "RuntimeError: Constant not found: fc.biass"
    stage, found = run_check(built, "lin", "lin_renamed.pt")
    assert "did you mean 'fc.bias'" in found["AOT061"]
    assert "AOT060" in found
    assert "Constant not found: fc.biass" in found["AOT067"]


def test_a_wrong_dtype_runs_silently_in_torch_and_is_caught(
    built: Path, plain_torch: PlainFacts
) -> None:
    plain, _ = plain_torch["lin_f16"]
    assert plain == {"error": None, "changed": True, "matches_eager": False}
    stage, found = run_check(built, "lin", "lin_f16.pt")
    assert "float16" in found["AOT063"] and "float32" in found["AOT063"]
    assert "differs from the ExportedProgram" in found["AOT068"]
    assert stage.status is StageStatus.FAILED


def test_a_wider_dtype_corrupts_the_heap_in_torch_and_is_contained(built: Path) -> None:
    """float64 bytes copied into a float32 constant write past it: plain torch aborts
    (`double free or corruption`, measured), aotipre's worker dies and the stage says so."""
    proc = plain_torch_process(built, {"lin_f64": ("lin", "lin_f64.pt", "inputs.pt", False)})
    assert (
        proc.returncode != 0 or json.loads(proc.stdout.splitlines()[-1])["lin_f64"]["error"] is None
    )
    stage, found = run_check(built, "lin", "lin_f64.pt")
    assert "float64" in found["AOT063"]
    assert {"AOT067", "AOT068"} & set(found), found
    assert stage.status is StageStatus.FAILED


def test_a_transposed_weight_runs_silently_in_torch_and_is_named(
    built: Path, plain_torch: PlainFacts
) -> None:
    plain, _ = plain_torch["lin_transposed"]
    assert plain == {"error": None, "changed": True}
    stage, found = run_check(built, "lin", "lin_transposed.pt")
    assert "[8, 16]" in found["AOT062"] and "[16, 8]" in found["AOT062"]
    assert stage.status is StageStatus.PASSED  # ran; the ExportedProgram refuses the shape
    assert "refuses these weights" in stage.detail


def test_inlined_small_tensors_are_not_swappable(built: Path, plain_torch: PlainFacts) -> None:
    plain, _ = plain_torch["small_new"]
    assert plain["error"] in (
        "RuntimeError: Constant not found: scale",
        "RuntimeError: Constant not found: fc.bias",
    )
    stage, found = run_check(built, "small", "small_new.pt", inputs="inputs4.pt")
    assert "inlined" in found["AOT066"]
    assert "Constant not found" in found["AOT067"]
    assert stage.status is StageStatus.FAILED


DEPLOYED = """
import json, sys, torch
from torch._inductor.package import load_package
pkg, update, full, inputs, ep = sys.argv[1:6]
x = torch.load(inputs)[0]
m = load_package(pkg)
m.load_constants(torch.load(update), check_full_update=True)
mod = torch.export.load(ep).module()
mod.load_state_dict(torch.load(full))
print(json.dumps({"max_abs_diff": (m(x) - mod(x)).abs().max().item(),
                  "constants": sorted(m.get_constant_fqns())}))
"""


def test_an_inlined_parameter_is_named_as_inlined_not_as_a_typo(
    built: Path, plain_torch: PlainFacts
) -> None:
    """Linear(8, 16) then Linear(16, 4): inductor inlined fc2.bias (4 values), so plain torch
    refuses the full state_dict of the same architecture; aotipre names it as inlined (AOT066),
    not as a renamed 'fc1.bias' (AOT061), and inspect lists it."""
    plain, _ = plain_torch["two_new"]
    assert plain["error"] == "RuntimeError: Constant not found: fc2.bias"
    stage, found = run_check(built, "two", "two_new.pt")
    assert "AOT061" not in found, found
    assert "'fc2.bias'" in found["AOT066"] and "inlined" in found["AOT066"]
    assert stage.status is StageStatus.FAILED
    both = read_package(str(built / "two.pt2")).models[0]
    assert both.lifted_without_constant == 1
    ep = read_package(str(built / "two_ep.pt2")).models[0]
    assert [t.fqn for t in with_reference_values(both, ep).baked_state] == ["fc2.bias"]


def test_an_update_that_leaves_the_inlined_parameter_stale_is_not_a_pass(built: Path) -> None:
    """The file without fc2.bias: torch accepts it, and the deployment then computes with the
    compiled bias, not what eager computes with the new weights; the check must not pass."""
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            DEPLOYED,
            *(str(built / n) for n in ("two.pt2", "two_new_no_fc2_bias.pt", "two_new.pt")),
            *(str(built / n) for n in ("inputs.pt", "two_ep.pt2")),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    deployed = json.loads(proc.stdout.strip().splitlines()[-1])
    assert "fc2.bias" not in deployed["constants"]
    assert deployed["max_abs_diff"] > 1e-3  # the stale bias shows in every output row
    stage, found = run_check(built, "two", "two_new_no_fc2_bias.pt")
    assert "'fc2.bias'" in found["AOT066"] and "compiled value" in found["AOT066"]
    assert stage.status is StageStatus.FAILED, stage.detail
    assert "leaves 'fc2.bias' at the compiled value" in stage.detail


def test_a_swapped_folded_constant_is_silently_ignored(
    built: Path, plain_torch: PlainFacts
) -> None:
    plain, _ = plain_torch["fold_folded"]
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


HOSTILE = """
import json, struct, sys, torch, zipfile
d = sys.argv[1]
sd = torch.load(f"{d}/lin_new.pt")
# two tensors over the same bytes: safetensors refuses it; a reader that follows the offsets
# reads the span once per tensor (330 x 4 MB from a 4 MB file)
w = sd["fc.weight"].contiguous().numpy().tobytes()
h = {k: {"dtype": "F32", "shape": list(v.shape), "data_offsets": [0, 4 * v.numel()]}
     for k, v in sd.items() if v.numel() == 16}
h["fc.weight"] = {"dtype": "F32", "shape": [16, 8], "data_offsets": [0, len(w)]}
t = json.dumps(h).encode()
open(f"{d}/overlap.safetensors", "wb").write(struct.pack("<Q", len(t)) + t + w)
# a storage record 64 bytes longer than its tensor's numel x itemsize
with zipfile.ZipFile(f"{d}/lin_new.pt") as zin, zipfile.ZipFile(f"{d}/bigrec.pt", "w") as zout:
    for info in zin.infolist():
        data = zin.read(info)
        zout.writestr(info.filename, data + bytes(64) if info.filename.endswith("data/0") else data)
out = {}
from safetensors.torch import load_file
for name, load in (("overlap.safetensors", load_file), ("bigrec.pt", torch.load)):
    try:
        load(f"{d}/{name}")
        out[name] = None
    except Exception as e:
        out[name] = str(e).splitlines()[0]
print(json.dumps(out))
"""


def test_files_the_loaders_refuse_are_refused_with_one_line(built: Path) -> None:
    """Plain safetensors.torch.load_file and torch.load refuse overlapping offsets and an
    oversized storage record; aotipre says so in one line and checks nothing (exit 2)."""
    pytest.importorskip("safetensors")
    proc = subprocess.run(
        [sys.executable, "-c", HOSTILE, str(built)], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    plain = json.loads(proc.stdout.splitlines()[-1])
    assert "invalid offset" in plain["overlap.safetensors"]
    assert "does not match expected size" in plain["bigrec.pt"]
    for name, expected in (
        ("overlap.safetensors", "it overlaps them"),
        ("bigrec.pt", "torch.load refuses the file"),
    ):
        report = check(
            str(built / "lin.pt2"),
            CheckOptions(
                inputs=str(built / "inputs.pt"),
                dynamic=DynamicOptions(perf=None, probe=False),
                canary=False,
                weights=str(built / name),
            ),
        )
        assert report.error is not None and expected in report.error, (name, report.error)
        assert "\n" not in report.error


def test_the_worker_reads_a_safetensors_file_by_the_loaders_rules(built: Path) -> None:
    """The worker checks the layout again (the file may change after the static check): an
    overlapping file is one StepError, never a read per tensor of the same bytes."""
    pytest.importorskip("safetensors")
    if not (built / "overlap.safetensors").exists():  # written by the test above
        subprocess.run([sys.executable, "-c", HOSTILE, str(built)], check=True, timeout=300)
    script = """
import sys
from aotipre.runner.worker.loading import read_weights_file
from aotipre.runner.worker.protocol import StepError
try:
    read_weights_file(sys.argv[1], "safetensors", "cpu")
    print("read")
except StepError as e:
    print("refused:", e)
"""
    proc = subprocess.run(
        [sys.executable, "-c", script, str(built / "overlap.safetensors")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert "refused:" in proc.stdout and "safetensors refuses the file" in proc.stdout, (
        proc.stdout + proc.stderr[-2000:]
    )
