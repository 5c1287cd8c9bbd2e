"""`aotipre diff` on real package pairs built through the public API (tests/diff/build_pairs.py:
the same model exported twice with one change in between, and two of them compiled with
aoti_compile_and_package), each rule's verdict checked against what plain torch does when OLD's
caller's inputs meet NEW (the builder's facts.json)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from aotipre.cli import main
from aotipre.diff.gate import FAIL_ON, diff_packages
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


def test_losing_the_exported_program_is_breaking_and_names_are_not_noise(pairs: Path) -> None:
    """base.pt2 (ExportedProgram) -> aoti_base.pt2 (AOTI only, whose wrapper knows inputs by
    place only): the program is gone, the inputs are the same."""
    report = diff_packages(pairs / "base.pt2", pairs / "aoti_base.pt2")
    assert _rules(report.findings) == {
        "EXPORTED_PROGRAM_REMOVED": True,
        "WEIGHT_VALUES_NOT_COMPARED": False,  # members on one side, the .so's blob on the other
    }
    assert [f.code for f in report.findings] == ["AOT095", "AOT096"]


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
    from aotipre import api
    from aotipre.diff import gate

    opened: list[str] = []
    real_open = gate.open_package

    def spy(path, **kwargs):  # type: ignore[no-untyped-def]
        opened.append(str(path))
        return real_open(path, **kwargs)

    monkeypatch.setattr(gate, "open_package", spy)
    monkeypatch.setattr(api, "open_package", spy)
    old, narrow, retrained = (str(pairs / f"{n}.pt2") for n in ("base", "narrow", "retrained"))
    flags = ["--static-only", "--compile-at-deploy", "--no-config", "-f", "json"]
    code = main(["check", narrow, "--against", old, *flags], fast_lane=False)
    data = json.loads(capsys.readouterr().out)
    assert sorted(opened) == sorted([narrow, old])  # each once: the diff reads what check opened
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


# -- `aotipre diff OLD NEW --inputs`: the same behaviour comparison from the diff command itself


def test_diff_inputs_runs_old_and_new_on_the_same_inputs(pairs: Path, facts: dict) -> None:
    """aoti_base -> aoti_retrained (other weights, in the .so) on inputs.pt: AOT790 for each
    output plain torch says differs, with its largest error and where; both sides timed in one
    run (report.performance: NEW's record with OLD's beside it); a warning, so `breaking` passes
    and `any` fails."""
    from aotipre.runner.stages import DynamicOptions, PerfOptions

    old = str(pairs / "aoti_base.pt2")
    report = diff_packages(
        old,
        pairs / "aoti_retrained.pt2",
        inputs=pairs / "inputs.pt",
        dynamic=DynamicOptions(perf=PerfOptions(runs=3)),
    )
    assert report.error is None
    torch_said = facts["aoti_same_inputs"]["retrained"]
    found = [f for f in report.findings if f.code == "AOT790"]
    differ = [i for i, out in enumerate(torch_said) if not out["allclose"]]
    assert differ and [int(f.message.split("output ", 1)[1].split()[0]) for f in found] == differ
    for f, i in zip(found, differ):
        said = torch_said[i]
        assert f"largest error {said['max_abs']:.4g} at {said['worst_index']}" in f.message
    # only what compares NEW with OLD: none of the perf stage's advice on NEW alone
    assert {f.stage for f in report.findings} <= {"diff", "perf"}
    assert all(
        f.code in ("AOT096", "AOT790") or f.code.startswith("AOT65") for f in report.findings
    )
    assert [s.name for s in report.stages] == ["diff", "compile", "load", "run", "perf"]
    ((new_rec, old_rec),) = report.performance
    assert old_rec is not None and old_rec.package == os.path.abspath(old)
    assert new_rec.latency is not None and old_rec.latency is not None
    assert report.exit_code == 0
    report.fail_on = FAIL_ON["any"]
    assert report.exit_code == 1


def test_diff_inputs_that_cannot_be_read_are_one_line(
    pairs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "inputs.pt"
    bad.write_text("not a torch.save file\n")
    old, new = str(pairs / "aoti_base.pt2"), str(pairs / "aoti_retrained.pt2")
    assert main(["diff", old, new, "--inputs", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"aotipre: error: --inputs {bad}") and err.count("\n") == 1


# -- `aotipre diff OLD NEW --serving-config`: what the config serving OLD refuses in NEW


@pytest.mark.parametrize("fast_lane", [True, False])
def test_a_serving_config_that_accepts_old_and_refuses_new_is_breaking(
    pairs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], fast_lane: bool
) -> None:
    """The config `aotipre serving-config OLD --max-batch-size 64` writes: `check
    --serving-config` finds no error in aoti_base and AOT047 in aoti_narrow (batches of 33..64
    refused); the diff says so as breaking, and the other way round as compatible."""
    config = tmp_path / "config.pbtxt"
    old, narrow = str(pairs / "aoti_base.pt2"), str(pairs / "aoti_narrow.pt2")
    assert main(["serving-config", old, "--max-batch-size", "64", "-o", str(config)]) == 0
    code = main(
        ["diff", old, narrow, "--serving-config", str(config), "-f", "json"], fast_lane=fast_lane
    )
    data = json.loads(capsys.readouterr().out)
    assert code == data["exit_code"] == 1
    refused = [f for f in data["findings"] if "SERVING_CONFIG" in f["message"]]
    assert [(f["code"], f["severity"], f["input"], f["dim"]) for f in refused] == [
        ("AOT490", "error", "args[0]", 0)
    ]
    assert refused[0]["message"].startswith("SERVING_CONFIG_REFUSES_NEW: ")
    assert "AOT047" in refused[0]["message"] and refused[0]["actual"] == "AOT047"
    # what `check --serving-config` says of each side, the ground of that verdict
    for path, has_error in ((old, False), (narrow, True)):
        main(["check", path, "--serving-config", str(config), "--static-only", "-f", "json"])
        found = json.loads(capsys.readouterr().out)["findings"]
        assert any(f["code"] == "AOT047" and f["severity"] == "error" for f in found) == has_error
    code = main(
        ["diff", narrow, old, "--serving-config", str(config), "-f", "json"], fast_lane=fast_lane
    )
    data = json.loads(capsys.readouterr().out)
    back = [f for f in data["findings"] if "SERVING_CONFIG" in f["message"]]
    assert [(f["severity"], f["message"].split(":", 1)[0]) for f in back] == [
        ("info", "SERVING_CONFIG_ACCEPTS_NEW")
    ]


# -- weights compiled into the .so: their values read in place, digested per weight


def test_weight_values_inside_the_so_are_compared(pairs: Path, facts: dict) -> None:
    """aoti_base -> aoti_retrained: AOTI-only packages whose weights torch compiled into the .so
    (the default), the same model with other weight values; plain torch gives OLD's caller other
    answers. aoti_narrow has OLD's weights: no value change."""
    retrained = diff_packages(pairs / "aoti_base.pt2", pairs / "aoti_retrained.pt2")
    assert _rules(retrained.findings) == {"WEIGHT_VALUES_CHANGED": False}
    (finding,) = retrained.findings
    assert finding.code == "AOT096" and finding.input == "proj.weight"
    assert facts["aoti"]["retrained"] == "runs wrong" and facts["aoti"]["narrow"] == "runs right"
    narrow = diff_packages(pairs / "aoti_base.pt2", pairs / "aoti_narrow.pt2")
    assert not any(r.startswith("WEIGHT_") for r in _rules(narrow.findings))


def test_compiled_weights_that_cannot_be_read_are_said(pairs: Path) -> None:
    """A blob whose size disagrees with wrapper.cpp's constants (here: the sizes it records,
    doubled) is never read as values: the diff says which model and why."""
    from dataclasses import replace

    from aotipre.binaries.constants_blob import compiled_weight_digests
    from aotipre.pt2.reader import open_package

    opened = open_package(pairs / "aoti_base.pt2")
    with opened.archive:
        (model,) = opened.info.models
        digests = compiled_weight_digests(opened.archive, model)
        assert isinstance(digests, dict) and list(digests) == ["proj.weight"]
        assert digests["proj.weight"][0] == 8 * 8 * 4  # float32 8x8, a multiple of 64 bytes
        doubled = replace(
            model,
            constants=tuple(replace(c, data_size=2 * (c.data_size or 0)) for c in model.constants),
        )
        why = compiled_weight_digests(opened.archive, doubled)
    assert why == "the constants blob holds 256 bytes, wrapper.cpp's constants 512"


def test_a_wrapper_that_claims_a_terabyte_of_weights_is_said_not_read(
    pairs: Path, tmp_path: Path
) -> None:
    """aoti_base with its wrapper.cpp's data_size rewritten to 1 TiB (the .so untouched): the
    diff reads no byte past the blob and says, as a finding, which side and why."""
    import re
    import zipfile

    hacked = tmp_path / "hacked.pt2"
    with zipfile.ZipFile(pairs / "aoti_base.pt2") as zin, zipfile.ZipFile(hacked, "w") as zout:
        for info in zin.infolist():
            data = zin.read(info)
            if info.filename.endswith(".wrapper.cpp"):
                data, n = re.subn(rb"data_size = 256;", b"data_size = 1099511627776;", data)
                assert n == 1
            zout.writestr(info, data)
    report = diff_packages(pairs / "aoti_base.pt2", hacked)
    assert report.error is None
    assert [(f.code, f.severity.value, f.message) for f in report.findings] == [
        (
            "AOT096",
            "info",
            "WEIGHT_VALUES_NOT_COMPARED: weight values not compared: in NEW, the constants blob "
            "holds 256 bytes, wrapper.cpp's constants 1099511627776",
        )
    ]
