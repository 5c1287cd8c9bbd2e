"""Boundaries at run time (slow): each dynamic dim at min-1, min, max, max+1 on real packages
(AOTI-only aoti.pt2, ExportedProgram-only ep_only.pt2 compiled by aotipre, both.pt2 with the
AOTI code's narrower minimum, derived.pt2), symbolic strides (padded and sliced inputs) and a
size-1 dim, checked two ways against plain torch in a fresh process:

- plain torch with AOTI_RUNTIME_CHECK_INPUTS=1 (as aotipre's run stage) accepts or refuses each
  input, and aotipre's run stage agrees (no finding, or the dim's AOT303/AOT304);
- the static check says the same before anything runs (test_boundaries_static.py holds the
  exact findings; here: error or not), except where the ExportedProgram alone cannot know the
  compiled code's bounds (ep_only.pt2: the export allows batch 1, its compiled code does not).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path

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


@pytest.mark.parametrize("inputs, code", MLP)
def test_exported_program_package_at_its_edges(
    dynamic: Dynamic,
    gate: Gate,
    plain_compiled_refuses: Callable[..., list[bool]],
    inputs: str,
    code: str | None,
) -> None:
    # what the code plain torch compiles from it refuses (torch 2.11 keeps the export's min 1)
    (refused,) = plain_compiled_refuses(gate("ep_only.pt2"), gate(inputs))
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


@pytest.mark.parametrize(
    "inputs, codes",
    [("pair_n1", ["AOT303"]), ("pair_n2", []), ("pair_n32", []), ("pair_n33", ["AOT304"]),
     ("pair_off", ["AOT601"])],
)  # fmt: skip
def test_derived_dims_at_their_edges(
    dynamic: Dynamic, gate: Gate, inputs: str, codes: list[str]
) -> None:
    refused = plain_outcomes(str(gate("derived.pt2")), str(gate(inputs)))[str(gate(inputs))]
    if inputs == "pair_off" and refused == "ok":
        # torch 2.11's compiled code has no size/stride guard: it runs y of 7 rows as 6, and the
        # compare stage's ExportedProgram refuses the inputs with the export's guard (AOT110)
        assert plain_torch(EP_REFUSES, str(gate("derived.pt2")), str(gate(inputs)))
        codes = ["AOT110"]
    assert (refused != "ok") == (codes not in ([], ["AOT110"])), refused
    _, findings = dynamic("derived", inputs, probe=False)
    assert sorted({f.code for f in findings}) == codes


def test_sliced_input_reads_wrong_values_unless_refused(dynamic: Dynamic, gate: Gate) -> None:
    # input_ids[::2]: strides (20, 1) where the code reads (s53, 1). AOTI's input check does not
    # cover symbolic strides; plain torch without AOTI_RUNTIME_CHECK_INPUTS runs and returns
    # other numbers than for the same ids made contiguous. Static: AOT307 (both.pt2 and the
    # AOTI-only aoti.pt2); run stage: torch 2.13's compiled size/stride guard refuses it
    # (AOT601), torch 2.11 compiles none (plain torch runs it); both.pt2's eager comparison
    # would differ.
    wrong = plain_torch(
        "import json, sys, torch\n"
        "m = torch._inductor.aoti_load_package(sys.argv[1])\n"
        "(ids, mask), _ = torch.load(sys.argv[2])\n"
        "print(json.dumps(torch.equal(m(ids, mask), m(ids.contiguous(), mask))))\n",
        str(gate("aoti.pt2")),
        str(gate("token_sliced_ids")),
    )
    assert wrong is False
    static = check(
        gate("both.pt2"), CheckOptions(inputs=str(gate("token_sliced_ids")), static_only=True)
    )
    assert [f.code for f in static.findings if f.severity is Severity.ERROR] == ["AOT307"]
    static = check(
        gate("aoti.pt2"), CheckOptions(inputs=str(gate("token_sliced_ids")), static_only=True)
    )
    assert [f.code for f in static.findings if f.severity is Severity.ERROR] == ["AOT307"]
    sliced = str(gate("token_sliced_ids"))
    refused = plain_outcomes(str(gate("aoti.pt2")), sliced)[sliced] != "ok"
    _, findings = dynamic("aoti", "token_sliced_ids", probe=False)
    assert [f.code for f in findings] == (["AOT601"] if refused else [])


def test_size_one_dim_with_an_unusual_stride(dynamic: Dynamic, gate_compiled: Gate) -> None:
    # unit.pt2: x [4, 1, 8] static, compiled strides (8, 8, 1); the sample has (8, 1, 1), which
    # torch calls contiguous. Plain torch without AOTI_RUNTIME_CHECK_INPUTS runs it with the
    # same result as the contiguous copy (a size-1 dim's stride is never used): the static check
    # does not flag it. With the variable set, AOTI's input check compares every static stride
    # and refuses it, and aotipre's run stage (which sets it) reports what it says.
    same = plain_torch(
        "import json, sys, torch\n"
        "m = torch._inductor.aoti_load_package(sys.argv[1])\n"
        "(x,), _ = torch.load(sys.argv[2])\n"
        "print(json.dumps([x.is_contiguous(), torch.equal(m(x), m(x.contiguous()))]))\n",
        str(gate_compiled("unit.pt2")),
        str(gate_compiled("unit_inputs_size1_stride")),
    )
    assert same == [True, True]
    inputs = str(gate_compiled("unit_inputs_size1_stride"))
    static = check(gate_compiled("unit.pt2"), CheckOptions(inputs=inputs, static_only=True))
    assert without_facts(static.findings) == []
    _, findings = dynamic("unit", "unit_inputs_size1_stride", probe=False)
    assert [(f.code, f.stage, f.dim, f.expected, f.actual) for f in findings] == [
        ("AOT307", "run", 1, 8, 1)
    ]
    _, findings = dynamic("unit", "unit_inputs", probe=False)
    assert findings == []
