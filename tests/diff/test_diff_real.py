"""`aotipre diff` on real package pairs built through the public API (tests/diff/build_pairs.py:
the same model exported twice with one change in between, and two of them compiled with
aoti_compile_and_package), each rule's verdict checked against what plain torch does when OLD's
caller's inputs meet NEW (the builder's facts.json)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from aotipre.cli import main
from aotipre.diff.gate import diff_packages
from tests.building import build

pytestmark = pytest.mark.slow

BUILDER = Path(__file__).with_name("build_pairs.py")

EXPECTED = {
    "narrow": {"DYNAMIC_RANGE_NARROWED": "AOT390"},
    "wide": {"DYNAMIC_RANGE_WIDENED": "AOT390"},
    "static": {"DIM_BECAME_STATIC": "AOT390", "OUTPUT_SHAPE_CHANGED": "AOT390"},
    "swapped": {"INPUT_REORDERED": "AOT190"},
    "kwarg": {"KWARG_ADDED": "AOT190"},
    "half": {
        "DTYPE_CHANGED": "AOT290",
        "OUTPUT_DTYPE_CHANGED": "AOT290",
        "WEIGHT_RETYPED": "AOT096",
    },
    "reshaped": {"WEIGHT_RESHAPED": "AOT096", "OUTPUT_SHAPE_CHANGED": "AOT390"},
    "retrained": {"WEIGHT_VALUES_CHANGED": "AOT096"},
    "three_out": {"OUTPUT_ADDED": "AOT191"},
    "one_input": {"INPUT_REMOVED": "AOT190"},
}
"""base.pt2 -> NEW: the rules that decide its changes, with the code of each rule's family."""


@pytest.fixture(scope="module")
def pairs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build(BUILDER, tmp_path_factory.mktemp("pairs"), "--aoti", python=sys.executable)


@pytest.fixture(scope="module")
def facts(pairs: Path) -> dict[str, dict[str, str]]:
    return json.loads((pairs / "facts.json").read_text())  # type: ignore[no-any-return]


def _rules(report_findings: list) -> dict[str, bool]:
    """rule id -> breaking, from the findings' messages (`RULE_ID: ...`) and severities."""
    return {f.message.split(":", 1)[0]: f.severity.value == "error" for f in report_findings}


@pytest.mark.parametrize("variant", sorted(EXPECTED))
def test_each_rule_verdict_is_what_plain_torch_does(
    pairs: Path, facts: dict[str, dict[str, str]], variant: str
) -> None:
    report = diff_packages(pairs / "base.pt2", pairs / f"{variant}.pt2")
    assert report.error is None
    rules = _rules(report.findings)
    assert set(rules) == set(EXPECTED[variant])
    assert {f.message.split(":", 1)[0]: f.code for f in report.findings} == EXPECTED[variant]
    breaking = any(rules.values())
    torch_said = facts["ep"][variant]
    if variant == "retrained":  # same interface, other weights: runs, with other answers
        assert not breaking and torch_said == "runs wrong"
    else:
        assert breaking == (torch_said in ("fails", "runs wrong")), (variant, torch_said)
    assert report.exit_code == (1 if breaking else 0)


def test_a_specialized_scalar_with_another_baked_value_is_breaking(
    pairs: Path, facts: dict[str, dict[str, str]]
) -> None:
    """`alpha` exported as 0.5, then as 2.0: OLD's caller passes 0.5, which NEW refuses."""
    report = diff_packages(pairs / "scaled_half.pt2", pairs / "scaled_double.pt2")
    assert _rules(report.findings) == {"SCALAR_VALUE_CHANGED": True}
    (finding,) = report.findings
    assert (finding.expected, finding.actual) == (0.5, 2.0)
    assert facts["scaled"]["scaled_double"] in ("fails", "runs wrong")


def test_a_narrowed_range_of_compiled_code_is_breaking(
    pairs: Path, facts: dict[str, dict[str, str]]
) -> None:
    """AOTI-only pair: the contract read from wrapper.cpp. Plain torch runs OLD's batch of 48
    unchecked (outside NEW's contract) and refuses it once the compiled checks are on."""
    report = diff_packages(pairs / "aoti_base.pt2", pairs / "aoti_narrow.pt2")
    assert _rules(report.findings) == {"DYNAMIC_RANGE_NARROWED": True}
    assert {f.dim for f in report.findings} == {0}
    assert facts["aoti"]["base"] == facts["aoti_checked"]["base"] == "runs right"
    assert facts["aoti_checked"]["narrow"] == "fails"
    assert "weight values not compared for model" in report.stages[0].detail


def test_losing_the_exported_program_is_breaking_and_names_are_not_noise(pairs: Path) -> None:
    """base.pt2 (ExportedProgram) -> aoti_base.pt2 (AOTI only, whose wrapper knows inputs by
    place only): the program is gone, the inputs are the same."""
    report = diff_packages(pairs / "base.pt2", pairs / "aoti_base.pt2")
    assert _rules(report.findings) == {"EXPORTED_PROGRAM_REMOVED": True}
    assert [f.code for f in report.findings] == ["AOT095"]


def test_every_format_and_the_fail_on_threshold(
    pairs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    old, narrow, wide = (str(pairs / f"{n}.pt2") for n in ("base", "narrow", "wide"))
    md, junit, sarif = tmp_path / "d.md", tmp_path / "d.xml", tmp_path / "d.sarif"
    code = main(
        [
            "diff", old, narrow, "-f", "json",
            "--report", f"markdown:{md}", "--report", f"junit:{junit}", "--report", f"sarif:{sarif}",
        ],
        fast_lane=False,
    )  # fmt: skip
    out = capsys.readouterr().out
    assert code == 1
    data = json.loads(out)
    assert data["exit_code"] == 1 and {f["code"] for f in data["findings"]} == {"AOT390"}
    assert "DYNAMIC\\_RANGE\\_NARROWED" in md.read_text() and "AOT390" in junit.read_text()
    assert "DYNAMIC_RANGE_NARROWED" in sarif.read_text()
    assert main(["diff", old, wide], fast_lane=False) == 0
    assert main(["diff", old, wide, "--fail-on", "any"], fast_lane=False) == 1
    capsys.readouterr()
    main(["diff", old, str(pairs / "static.pt2"), "-f", "markdown"], fast_lane=False)
    rows = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("| `AOT")]
    assert rows and all("| error |" in r for r in rows)
    main(["diff", narrow, old, "-f", "markdown"], fast_lane=False)  # widened: compatible only
    text = capsys.readouterr().out
    assert "DYNAMIC\\_RANGE\\_WIDENED" in text and "| info |" in text and "| error |" not in text


# -- `check NEW --against OLD`: the release diff in the check's report, and the behaviour of
# OLD and NEW on the same inputs in the worker that already runs OLD for the perf comparison


def test_check_against_adds_the_release_diff_reading_new_once(
    pairs: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from aotipre.diff import gate

    opened: list[str] = []
    real_open = gate.open_package

    def spy(path, **kwargs):  # type: ignore[no-untyped-def]
        opened.append(str(path))
        return real_open(path, **kwargs)

    monkeypatch.setattr(gate, "open_package", spy)
    old, narrow, retrained = (str(pairs / f"{n}.pt2") for n in ("base", "narrow", "retrained"))
    flags = ["--static-only", "--compile-at-deploy", "--no-config", "-f", "json"]
    code = main(["check", narrow, "--against", old, *flags], fast_lane=False)
    data = json.loads(capsys.readouterr().out)
    assert opened == [old]  # NEW is read through the archive check holds open
    assert code == data["exit_code"] == 1  # breaking: errors under check's --fail-on error
    diff = [f for f in data["findings"] if f["stage"] == "diff"]
    assert {(f["code"], f["severity"], f["model"], f["dim"]) for f in diff} == {
        ("AOT390", "error", "model", 0)
    }
    assert all(f["message"].startswith("DYNAMIC_RANGE_NARROWED: ") for f in diff)
    assert [s["status"] for s in data["stages"] if s["name"] == "diff"] == ["failed"]
    # same interface, other weights: compatible (info), below every check --fail-on
    on_warning = [*flags, "--fail-on", "warning"]
    assert main(["check", retrained, "--against", old, *on_warning], fast_lane=False) == 0
    data = json.loads(capsys.readouterr().out)
    assert [(f["code"], f["severity"]) for f in data["findings"] if f["stage"] == "diff"] == [
        ("AOT096", "info")
    ]


def test_check_against_an_unreadable_or_the_same_package(
    pairs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    new = str(pairs / "base.pt2")
    text = tmp_path / "old.pt2"
    text.write_text("not a package\n")
    flags = ["--static-only", "--compile-at-deploy", "--no-config", "-f", "json"]
    assert main(["check", new, "--against", str(text), *flags], fast_lane=False) == 2
    (stage,) = [s for s in json.loads(capsys.readouterr().out)["stages"] if s["name"] == "diff"]
    assert stage["status"] == "error" and stage["detail"].startswith(f"OLD {text}")
    assert "\n" not in stage["detail"]
    assert main(["check", new, "--against", new, *flags], fast_lane=False) == 0
    (stage,) = [s for s in json.loads(capsys.readouterr().out)["stages"] if s["name"] == "diff"]
    assert stage["status"] == "skipped" and "one file" in stage["detail"]


@pytest.mark.parametrize("variant", ["retrained", "narrow"])
def test_check_against_compares_outputs_on_the_same_inputs(
    pairs: Path, facts: dict, variant: str
) -> None:
    """aoti_base -> aoti_retrained (other weights) and aoti_narrow (the same weights), run on
    inputs.pt: AOT790 for each output plain torch says differs (beyond float32's tolerance),
    with plain torch's largest error and where; none for the outputs it says match."""
    from aotipre.api import CheckOptions, check
    from aotipre.runner.stages import DynamicOptions, PerfOptions

    old = str(pairs / "aoti_base.pt2")
    report = check(
        pairs / f"aoti_{variant}.pt2",
        CheckOptions(
            inputs=str(pairs / "inputs.pt"),
            dynamic=DynamicOptions(probe=False, perf=PerfOptions(runs=3, against=old)),
        ),
    )
    torch_said = facts["aoti_same_inputs"][variant]
    found = [f for f in report.findings if f.code == "AOT790"]
    differ = [i for i, out in enumerate(torch_said) if not out["allclose"]]
    assert [int(f.message.split("output ", 1)[1].split()[0]) for f in found] == differ
    assert bool(differ) == (variant == "retrained")
    for f, i in zip(found, differ):
        assert f.severity.value == "warning" and f.model == "model" and old in f.message
        said = torch_said[i]
        assert f"largest error {said['max_abs']:.4g} at {said['worst_index']}" in f.message
        assert f.actual is not None and f.expected is not None
        assert abs(abs(f.actual - f.expected) - said["max_abs"]) < 1e-4
    # the release diff ran beside it: one report, both families
    assert [s.status.value for s in report.stages if s.name == "diff"] == [
        "failed" if variant == "narrow" else "passed"
    ]
