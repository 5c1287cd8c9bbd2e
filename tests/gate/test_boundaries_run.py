"""Boundaries at run time (slow): each dynamic dim at min-1, min, max, max+1 on real packages
(AOTI-only aoti.pt2, ExportedProgram-only ep_only.pt2 compiled by aotipre, both.pt2 with the
AOTI code's narrower minimum, derived.pt2), symbolic strides (padded and sliced inputs) and a
size-1 dim, checked two ways against plain torch in a fresh process:

- plain torch with AOTI_RUNTIME_CHECK_INPUTS=1 (as aotipre's run stage) accepts or refuses each
  input, and aotipre's run stage agrees (no finding, or the dim's AOT303/AOT304);
- the static check says the same before anything runs (test_boundaries_static.py holds the
  exact findings; here: error or not), except where the ExportedProgram alone cannot know the
  compiled code's bounds (ep_only.pt2: the export allows batch 1, its compiled code does not);
- a sample laid out otherwise than compiled: plain torch without the variable (as a default
  deployment) returns wrong or the same outputs, and AOT307 from the step that runs the sample
  as given is an error or a warning accordingly (the checked runs get the compiled layout).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from aotipre import CheckOptions, check
from aotipre.findings import Severity, StageStatus
from tests.gate.conftest import Dynamic, plain_torch, without_facts

pytestmark = pytest.mark.slow

Gate = Callable[[str], Path]

PLAIN = """
import json, os, sys, tempfile, torch
m = torch._inductor.aoti_load_package(sys.argv[1])
out = {}
for path in sys.argv[2:]:
    args, kwargs = torch.load(path)
    with tempfile.TemporaryFile() as err:  # what the compiled code prints during this call
        saved = os.dup(2)
        os.dup2(err.fileno(), 2)
        try:
            m(*args, **kwargs)
            out[path] = "ok"
        except Exception as exc:
            out[path] = str(exc).splitlines()[0]
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        err.seek(0)
        printed = err.read().decode(errors="replace").splitlines()
    # torch 2.11 raises only `run_func_(...) API call failed at ...`: the check's own message
    # is the `Error: ...` line it printed on stderr
    said = [line[len("Error: "):] for line in printed if line.startswith("Error: ")]
    if "API call failed" in out[path] and said:
        out[path] = said[0]
print(json.dumps(out))
"""


EP_REFUSES = """
import json, sys, torch
args, kwargs = torch.load(sys.argv[2])
try:
    torch.export.load(sys.argv[1]).module()(*args, **kwargs)
    print(json.dumps(False))
except Exception:
    print(json.dumps(True))
"""


@functools.cache
def plain_outcomes(package: str, *inputs: str) -> dict[str, str]:
    return plain_torch(PLAIN, package, *inputs, env={"AOTI_RUNTIME_CHECK_INPUTS": "1"})


TOKEN = [
    ("token_b1", "AOT303"),
    ("token_b2", None),
    ("token_b64", None),
    ("token_b65", "AOT304"),
    ("token_s1", "AOT303"),
    ("token_s2", None),
    ("token_s128", None),
    ("token_s129", "AOT304"),
]


@pytest.mark.parametrize("inputs, code", TOKEN)
def test_aoti_only_package_at_its_edges(
    dynamic: Dynamic, gate: Gate, inputs: str, code: str | None
) -> None:
    truth = plain_outcomes(str(gate("aoti.pt2")), *(str(gate(i)) for i, _ in TOKEN))
    refused = truth[str(gate(inputs))]
    assert (refused != "ok") == (code is not None), refused  # the table above is plain torch's
    res, findings = dynamic("aoti", inputs, probe=False)
    assert [f.code for f in findings] == ([code] if code else [])
    if code:
        assert findings[0].stage == "run" and any(e.endswith(refused) for e in findings[0].evidence)
        assert res["run"].status is StageStatus.FAILED
    static = check(gate("aoti.pt2"), CheckOptions(inputs=str(gate(inputs)), static_only=True))
    assert [f.code for f in static.findings if f.severity is Severity.ERROR] == (
        [code] if code else []
    )


def test_narrower_aoti_minimum_at_run_time(dynamic: Dynamic, gate: Gate) -> None:
    # both.pt2: the export allows batch 1, the compiled code refuses it. Static: AOT303 (and
    # AOT013); the run stage, had the static error not stopped it, refuses it the same way.
    static = check(gate("both.pt2"), CheckOptions(inputs=str(gate("token_b1")), static_only=True))
    assert sorted(f.code for f in without_facts(static.findings)) == ["AOT013", "AOT303"]
    _, findings = dynamic("both", "token_b1", probe=False)
    assert [(f.code, f.stage, f.expected, f.actual) for f in findings] == [("AOT303", "run", 2, 1)]


MLP = [
    ("mlp_b1", "AOT303"),  # the export allows it; the code torch 2.13 compiles does not (AOT610)
    ("mlp_b32", None),
    ("mlp_b33", "AOT304"),
    ("mlp_s1", "AOT303"),
    ("mlp_s2", None),
    ("mlp_s64", None),
    ("mlp_s65", "AOT304"),
]


@pytest.fixture(scope="module")
def mlp_refused(gate: Gate, plain_compiled_refuses: Callable[..., list[bool]]) -> dict[str, bool]:
    """Each MLP inputs file: whether the code plain torch compiles from ep_only.pt2 refuses it
    (AOTI_RUNTIME_CHECK_INPUTS=1), all of them asked in one fresh process."""
    names = [inputs for inputs, _ in MLP]
    refused = plain_compiled_refuses(gate("ep_only.pt2"), *(gate(name) for name in names))
    return dict(zip(names, refused, strict=True))


@pytest.mark.parametrize("inputs, code", MLP)
def test_exported_program_package_at_its_edges(
    dynamic: Dynamic, gate: Gate, mlp_refused: dict[str, bool], inputs: str, code: str | None
) -> None:
    # what the code plain torch compiles from it refuses (torch 2.11 keeps the export's min 1)
    refused = mlp_refused[inputs]
    if inputs == "mlp_b1" and not refused:
        code = None
    assert refused == (code is not None)
    res, findings = dynamic("ep_only", inputs, probe=False)
    assert res["compile"].status is StageStatus.PASSED
    assert [f.code for f in findings] == ([code] if code else [])
    # ExportedProgram only: an error (AOT015) unless the deployment compiles it, as aotipre does
    static = check(
        gate("ep_only.pt2"),
        CheckOptions(inputs=str(gate(inputs)), static_only=True, compile_at_deploy=True),
    )
    static_errors = [f.code for f in static.findings if f.severity is Severity.ERROR]
    # the ExportedProgram's contract knows the export range only: batch 1 passes statically
    assert static_errors == ([] if inputs == "mlp_b1" else ([code] if code else []))


DERIVED = [
    ("pair_n1", ["AOT303"]), ("pair_n2", []), ("pair_n32", []), ("pair_n33", ["AOT304"]),
    ("pair_off", ["AOT601"]),
]  # fmt: skip


@pytest.mark.parametrize("inputs, codes", DERIVED)
def test_derived_dims_at_their_edges(
    dynamic: Dynamic, gate: Gate, inputs: str, codes: list[str]
) -> None:
    truth = plain_outcomes(str(gate("derived.pt2")), *(str(gate(i)) for i, _ in DERIVED))
    refused = truth[str(gate(inputs))]
    if inputs == "pair_off" and refused == "ok":
        # torch 2.11's compiled code has no size/stride guard: it runs y of 7 rows as 6, and the
        # compare stage's ExportedProgram refuses the inputs with the export's guard (AOT110)
        assert plain_torch(EP_REFUSES, str(gate("derived.pt2")), str(gate(inputs)))
        codes = ["AOT110"]
    assert (refused != "ok") == (codes not in ([], ["AOT110"])), refused
    _, findings = dynamic("derived", inputs, probe=False)
    assert sorted({f.code for f in findings}) == codes


UNCHECKED = """
import json, sys, torch
m = torch._inductor.aoti_load_package(sys.argv[1])
fresh = torch.contiguous_format  # fresh strides: .contiguous() keeps (8, 1, 1) of [4, 1, 8]
said = {}
for path in sys.argv[2:]:
    args, kwargs = torch.load(path)
    dense = [a.clone(memory_format=fresh) if isinstance(a, torch.Tensor) else a for a in args]
    contiguous = [a.is_contiguous() for a in args if isinstance(a, torch.Tensor)]
    try:
        out = m(*args, **kwargs)
    except Exception:
        said[path] = {"outcome": "refused", "contiguous": contiguous}
    else:
        same = torch.equal(out, m(*dense, **kwargs))
        said[path] = {"outcome": same, "contiguous": contiguous}
print(json.dumps(said))
"""
"""Plain torch as a default deployment runs it (AOTI_RUNTIME_CHECK_INPUTS=0 is off), for each
inputs file: whether the package refuses the inputs as given, else whether its outputs equal
those for the same values laid out contiguously, with every stride fresh (the layout these
packages were compiled for); and whether torch calls each tensor argument contiguous."""


@functools.cache
def unchecked_outcomes(package: str, *inputs: str) -> dict[str, dict[str, Any]]:
    """UNCHECKED's answers by inputs path: one fresh process for all the inputs of a package."""
    return plain_torch(UNCHECKED, package, *inputs, env={"AOTI_RUNTIME_CHECK_INPUTS": "0"})


SLICED = [("token_sliced_ids", 0), ("token_padded_mask", 1)]
"""input_ids, attention_mask (aoti.pt2 knows them as args[0], args[1])."""


@pytest.mark.parametrize("inputs, position", SLICED)
def test_sliced_input_reads_wrong_values_unless_refused(
    dynamic: Dynamic, gate: Gate, inputs: str, position: int
) -> None:
    # input_ids[::2] (strides (20, 1)) and attention_mask[:, :10] of [3, 16] (strides (16, 1))
    # where the code reads (s53, 1). Plain torch without AOTI_RUNTIME_CHECK_INPUTS runs them and
    # returns other numbers than for the same values made contiguous; with it, torch 2.13's
    # compiled size/stride guard refuses them, torch 2.11 compiles none. Static: an AOT307
    # warning (both.pt2 and the AOTI-only aoti.pt2), an error for a deployment that checks its
    # inputs. Dynamic: the checked run gets the compiled layout and passes; the sample-layout
    # step runs the sample as given, as a default deployment does, and AOT307 says what it did.
    said = unchecked_outcomes(str(gate("aoti.pt2")), *(str(gate(i)) for i, _ in SLICED))
    unchecked = said[str(gate(inputs))]["outcome"]
    # the ground truth this case is about: wrong outputs (torch 2.13) or a refusal
    assert unchecked in (False, "refused"), unchecked
    for pt2 in ("both.pt2", "aoti.pt2"):
        for checks in (False, True):
            static = check(
                gate(pt2),
                CheckOptions(
                    inputs=str(gate(inputs)), static_only=True, deployment_checks_inputs=checks
                ),
            )
            found = [(f.code, f.position, f.dim) for f in static.findings if f.code == "AOT307"]
            assert found == [("AOT307", position, 0)], pt2
            errors = [f.code for f in static.findings if f.severity is Severity.ERROR]
            assert errors == (["AOT307"] if checks else []), pt2
    res, findings = dynamic("aoti", inputs, probe=False)
    # what a default deployment does with it is wrong: an error, whatever the runtime check does
    assert [(f.code, f.stage, f.severity, f.position, f.dim) for f in findings] == [
        ("AOT307", "probe", Severity.ERROR, position, 0)
    ]
    assert res["run"].status is StageStatus.PASSED and "laid out as compiled" in res["run"].detail
    assert res["probe"].status is StageStatus.FAILED


def test_size_one_dim_with_an_unusual_stride(dynamic: Dynamic, gate_compiled: Gate) -> None:
    # unit.pt2: x [4, 1, 8] static, compiled strides (8, 8, 1); the sample has (8, 1, 1), which
    # torch calls contiguous. Plain torch without AOTI_RUNTIME_CHECK_INPUTS runs it with the
    # same result as the contiguous copy (a size-1 dim's stride is never used): the static check
    # does not flag it, and the sample-layout step (the sample as given, unchecked) finds the
    # same outputs: an AOT307 warning. With the variable set, AOTI's input check compares every
    # static stride and refuses it: with --deployment-checks-inputs the static lane and the
    # same step say error.
    unit, sample = gate_compiled("unit.pt2"), gate_compiled("unit_inputs_size1_stride")
    said = unchecked_outcomes(str(unit), str(sample))[str(sample)]
    contiguous, unchecked = said["contiguous"] == [True], said["outcome"]
    refused = plain_outcomes(str(unit), str(sample))[str(sample)] != "ok"
    assert [contiguous, unchecked, refused] == [True, True, True]  # the ground truth
    static = check(unit, CheckOptions(inputs=str(sample), static_only=True))
    assert without_facts(static.findings) == []
    # a deployment that checks its inputs refuses it: the static lane says so before any run
    static = check(
        unit, CheckOptions(inputs=str(sample), static_only=True, deployment_checks_inputs=True)
    )
    found = [
        (f.code, f.severity, f.dim, f.expected, f.actual) for f in without_facts(static.findings)
    ]
    assert found == [("AOT307", Severity.ERROR, 1, 8, 1)]
    for checks in (False, True):
        res, findings = dynamic(
            "unit", "unit_inputs_size1_stride", probe=False, deployment_checks_inputs=checks
        )
        # the same outputs unchecked: harmless unless the deployment's check refuses it
        severity = Severity.ERROR if checks and refused else Severity.WARNING
        assert [(f.code, f.stage, f.severity, f.dim, f.expected, f.actual) for f in findings] == [
            ("AOT307", "probe", severity, 1, 8, 1)
        ]
        assert res["run"].status is StageStatus.PASSED
    _, findings = dynamic("unit", "unit_inputs", probe=False)
    assert findings == []
