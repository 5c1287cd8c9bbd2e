"""`aotipre merge` (aotipre.merge) and Report.from_dict: a zoo checked as shards and merged gives
the unsharded run's report in every format and its exit code; a missing or cut-off shard, a
package no shard checked, two verdicts for one package, another schema version: never clean.

Durations differ between two runs of the same check, so outputs of different runs are compared
with durations masked (`normalized`); outputs rendered from the same JSON are compared as bytes.
"""

from __future__ import annotations

import dataclasses
import glob
import json
import math
import re
import shlex
import shutil
from pathlib import Path
from typing import Any

import pytest

from aotipre import api
from aotipre.api import CheckOptions
from aotipre.errors import UsageError
from aotipre.findings import Report
from aotipre.merge import merge
from aotipre.report import render_report, render_reports
from aotipre.runner.perf import ColdStart, Latency, Memory, PerfRecord
from aotipre.triage.diagnosis import Diagnosis, IndexBound, TensorStats
from tests.scale.shards import Pkg, cli, enter_project, one_error_line, write_zoo

FORMATS = ("json", "junit", "sarif", "markdown", "github", "table")


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return enter_project(tmp_path, monkeypatch)


@pytest.fixture
def zoo(project: Path, pkg: Pkg) -> Path:
    return write_zoo(project / "zoo", pkg)


def normalized(text: str) -> str:
    """Durations masked: JSON `duration_s`, JUnit `time`, `0.01s` in tables and Markdown."""
    text = re.sub(r'("duration_s": )[-0-9.e]+', r"\1T", text)
    text = re.sub(r'time="[0-9.]+"', 'time="T"', text)
    return re.sub(r"\b\d+\.\d\ds\b", "T.TTs", text)


def run_all(
    capsys: pytest.CaptureFixture[str], *args: str, name: str
) -> tuple[int, dict[str, str], str]:
    """`aotipre ARGS` writing every format (`name.FORMAT`): (exit code, outputs, stderr)."""
    more = [a for fmt in FORMATS[1:] for a in ("--report", f"{fmt}:{name}.{fmt}")]
    rc, _, err = cli(capsys, *args, "-f", "json", "-o", f"{name}.json", *more)
    return rc, {fmt: Path(f"{name}.{fmt}").read_text() for fmt in FORMATS}, err


def shards(capsys: pytest.CaptureFixture[str], manifest: Path, count: int) -> list[str]:
    """Each shard's JSON report of `manifest` (shard-I.json); every shard checked something."""
    names = []
    for index in range(1, count + 1):
        name = f"shard-{index}.json"
        args = ("check", "--manifest", str(manifest), "--shard", f"{index}/{count}")
        cli(capsys, *args, "-f", "json", "-o", name)
        assert json.loads(Path(name).read_text())["reports"]
        names.append(name)
    return names


# --------------------------------------------------------------------------------------------
# The merged report is the unsharded one


def test_shards_merge_into_the_unsharded_report(
    zoo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rc_full, full, _ = run_all(capsys, "check", "--manifest", str(zoo), name="full")
    names = shards(capsys, zoo, 2)
    rc, merged, _ = run_all(capsys, "merge", *names, "--expect-shards", "2", name="merged")
    assert rc == rc_full == 1  # broken_crc fails the gate
    assert len(json.loads(merged["json"])["reports"]) == 8
    for fmt in FORMATS:
        assert normalized(merged[fmt]) == normalized(full[fmt]), fmt
    # the order of the files changes nothing
    rc, swapped, _ = run_all(capsys, "merge", *reversed(names), name="swapped")
    assert rc == 1 and swapped == merged
    assert merge(names) == merge(names[::-1])
    # an unsharded JSON report merges (as 1/1) into itself, byte for byte
    rc, out, _ = cli(capsys, "merge", "full.json", "-f", "json")
    assert rc == 1 and out == full["json"]


def test_three_shards_one_missing(zoo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    names = shards(capsys, zoo, 3)
    plan = json.loads(Path(names[0]).read_text())["shard"]["plan"]
    lost = sorted(v["package"] for v in plan.values() if v["shard"] == 2)
    given = [names[0], names[2]]
    rc, out, err = cli(capsys, "merge", *given, "--expect-shards", "3", "-f", "json")
    assert rc == 2
    data = json.loads(out)
    unchecked = [r for r in data["reports"] if r["error"] is not None]
    assert sorted(r["package_path"] for r in unchecked) == lost
    assert all(r["verdict"] == "error" for r in unchecked)
    assert all(
        "not checked: shard 2/3, which was to check it, gave no report" in r["error"]
        for r in unchecked
    )
    assert len(data["reports"]) == 8 and data["verdict"] == "error"
    assert [line.split(": ")[2] for line in err.splitlines()] == lost
    # the count is in the reports: without --expect-shards the gate fails all the same
    rc, out, _ = cli(capsys, "merge", *given, "-f", "json")
    assert rc == 2 and json.loads(out)["reports"] == data["reports"]
    rc, out, err = cli(capsys, "merge", *given, "--expect-shards", "4")
    assert rc == 2 and out == "" and "--expect-shards 4" in one_error_line(err)


def test_a_missing_shard_that_had_no_package(
    project: Path, pkg: Pkg, capsys: pytest.CaptureFixture[str]
) -> None:
    manifest = write_zoo(project / "zoo", pkg, ("aoti", "both"))  # 3 packages
    for index in range(1, 5):
        cli(
            capsys,
            "check",
            "--manifest",
            str(manifest),
            "--shard",
            f"{index}/4",
            "-f",
            "json",
            "-o",
            f"{index}.json",
        )
    empty = [i for i in range(1, 5) if not json.loads(Path(f"{i}.json").read_text())["reports"]]
    assert len(empty) == 1
    rest = [f"{i}.json" for i in range(1, 5) if i not in empty]
    rc, out, _ = cli(capsys, "merge", *rest, "-f", "json")
    data = json.loads(out)
    assert rc == 2 and data["reports"][0]["package_path"] == f"<shard {empty[0]}/4>"
    assert "gave no report (it had no package to check)" in data["reports"][0]["error"]
    rc, _, _ = cli(capsys, "merge", *rest, f"{empty[0]}.json")
    assert rc == 0


def edit(path: str, change: Any) -> str:
    data = json.loads(Path(path).read_text())
    change(data)
    out = f"edited-{Path(path).name}"
    Path(out).write_text(json.dumps(data, indent=2))
    return out


def test_a_package_no_shard_checked(zoo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    names = shards(capsys, zoo, 2)

    def drop_first(data: dict[str, Any]) -> None:
        data["reports"].pop(0)
        data["shard"]["keys"].pop(0)

    first = json.loads(Path(names[0]).read_text())
    package = first["reports"][0]["package_path"]
    rc, out, err = cli(capsys, "merge", edit(names[0], drop_first), names[1], "-f", "json")
    assert rc == 2
    (report,) = [r for r in json.loads(out)["reports"] if r["error"]]
    assert report["package_path"] == package
    assert report["error"] == "not checked: the report of shard 1/2 (edited-shard-1.json) lacks it"


def test_one_package_two_verdicts(zoo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    names = shards(capsys, zoo, 2)
    first = json.loads(Path(names[0]).read_text())
    key, original = first["shard"]["keys"][0], first["reports"][0]
    assert original["verdict"] != "error"

    def also(report: dict[str, Any]) -> Any:
        def change(data: dict[str, Any]) -> None:
            data["reports"].append(report)
            data["shard"]["keys"].append(key)

        return change

    rc, clean_merge, _ = cli(capsys, "merge", *names, "-f", "json")
    same = edit(names[1], also(original))  # the same verdict twice: the lower shard's report
    rc, out, _ = cli(capsys, "merge", names[0], same, "-f", "json")
    assert out == clean_merge
    crashed = Report.from_dict(original)
    crashed.error = "the worker crashed"
    other = edit(names[1], also(crashed.to_dict()))
    rc, out, err = cli(capsys, "merge", other, names[0], "-f", "json")
    assert rc == 2
    (report,) = [r for r in json.loads(out)["reports"] if r["error"]]
    assert report["package_path"] == original["package_path"]
    assert report["error"] == (
        f"checked twice with different verdicts: shard 1/2 ({names[0]}) says "
        f"{original['verdict']}; shard 2/2 (edited-{names[1]}) says error"
    )
    assert report["findings"] == original["findings"]  # what the lower shard found, kept


@pytest.mark.parametrize(
    ("damage", "said"),
    [
        (lambda text: text[: len(text) // 2], "json.loads"),
        (lambda text: "", "json.loads"),
        (
            lambda text: text.replace('"schema_version": 1', '"schema_version": 2', 1),
            "has schema_version 2; this aotipre",
        ),
        (
            lambda text: text.replace('"schema_version": 1', '"schema_version": 2'),
            "has schema_version 2",
        ),
        (lambda text: "[" * 100_000 + "]" * 100_000, "nests too deeply"),
        (lambda text: "[1, 2]", "is not the JSON report of `aotipre check`"),
        (
            lambda text: text.replace('"verdict": "fail"', '"verdict": "pass"'),
            "says verdict 'pass', but its findings",
        ),
        (
            lambda text: text.replace('"severity": "info"', '"severity": 3', 1),
            "severity: expected a string, got an integer",
        ),
        (
            lambda text: text.replace('"models": [', '"models": 7, "x": [', 1),
            "models: expected a list",
        ),
        (lambda text: text.replace('"keys": [', '"keys": ["nowhere.pt2", ', 1), "shard.keys"),
        (lambda text: text.replace('"index": 2', '"index": 3', 1), "shard 3/2 does not exist"),
    ],
)
def test_a_damaged_shard_report(
    damage: Any, said: str, zoo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A cut-off file (a shard that crashed or timed out while it was copied), another schema
    version, JSON that is not a check report or contradicts itself: one line, exit 2. A cut-off
    file's line quotes what json.loads says of the same bytes (3.11 and 3.12 word it apart)."""
    names = shards(capsys, zoo, 2)
    text = Path(names[1]).read_text()
    assert '"verdict": "fail"' in text  # broken_crc is on shard 2 (the damage above needs it)
    Path("damaged.json").write_text(damage(text))
    if said == "json.loads":
        with pytest.raises(ValueError) as refused:
            json.loads(Path("damaged.json").read_bytes())
        said = f"is not complete JSON ({refused.value})"
    rc, out, err = cli(capsys, "merge", names[0], "damaged.json", "--format", "junit")
    assert rc == 2 and out == ""
    line = one_error_line(err)
    assert "damaged.json" in line and said in line


def test_reports_that_are_not_one_run(
    project: Path, zoo: Path, pkg: Pkg, capsys: pytest.CaptureFixture[str]
) -> None:
    names = shards(capsys, zoo, 2)
    cli(capsys, "check", "--manifest", str(zoo), "--shard", "1/3", "-f", "json", "-o", "of3.json")
    other = write_zoo(project / "other", pkg, ("aoti", "both"))
    cli(capsys, "check", "--manifest", str(other), "--shard", "2/2", "-f", "json", "-o", "o2.json")
    shutil.copy(names[0], "again.json")
    cli(capsys, "check", "--manifest", str(zoo), "-f", "json", "-o", "full.json")
    for given, said in (
        (
            [names[0], "of3.json"],
            "is shard 1/2 but of3.json is shard 1/3: not the shards of one run",
        ),
        ([names[0], "again.json"], "shard 1/2 is given twice"),
        ([names[0], "o2.json"], "plan different packages"),
        (["full.json", names[0]], "is shard 1/1 but shard-1.json is shard 1/2"),
        ([names[0], "zoo"], "report zoo is a directory"),
        ([names[0], "nowhere.json"], "report nowhere.json does not exist"),
    ):
        rc, out, err = cli(capsys, "merge", *given)
        assert rc == 2 and out == "", given
        assert said in one_error_line(err), (given, err)


def test_plain_reports_merge_into_their_union(
    project: Path, pkg: Pkg, zoo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Reports without a shard block count as 1/1: several merge into the union of their
    packages; one checked by both with one verdict comes out once."""
    shutil.copy(pkg("ep_only"), "ep_only.pt2")
    cli(
        capsys,
        "check",
        "ep_only.pt2",
        "zoo/both.pt2",
        "--static-only",
        "-f",
        "json",
        "-o",
        "a.json",
    )
    cli(capsys, "check", "zoo/both.pt2", "--static-only", "-f", "json", "-o", "b.json")
    rc, out, _ = cli(capsys, "merge", "b.json", "a.json", "-f", "json")
    data = json.loads(out)
    assert [r["package_path"] for r in data["reports"]] == ["ep_only.pt2", "zoo/both.pt2"]
    assert rc == data["exit_code"]


def test_no_output_onto_an_input(zoo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    names = shards(capsys, zoo, 2)
    before = Path(names[0]).read_text()
    rc, _, err = cli(capsys, "merge", *names, "--report", f"junit:{names[0]}")
    assert rc == 2 and "refusing to overwrite it" in one_error_line(err)
    assert Path(names[0]).read_text() == before


# --------------------------------------------------------------------------------------------
# Report.from_dict: every format from the JSON gives the bytes of the original


def diagnosed() -> Diagnosis:
    return Diagnosis(
        model="model",
        kernel="cpp_fused_embedding_0",
        identified_by="printer-3",
        evidence=("index out of bounds: 0 <= tmp2 < 500",),
        verdict="cpp_fused_embedding_0 indexes past the table",
        kind="index_out_of_range",
        kernel_source="void kernel() {\n  x;\n}",
        kernel_source_from="p.pt2:data/kernel.cpp",
        fused_nodes=("embedding",),
        aten_ops=("aten.embedding",),
        source_lines=("models.py:1  return self.emb(ids)",),
        inputs=(
            TensorStats(
                "arg1_1",
                "k",
                input="ids",
                dtype="int64",
                shape=(2, 5),
                stride=(5, 1),
                min=0,
                max=600.5,
                mean=math.inf,
                nan=0,
                has_nonfinite=True,
            ),
            TensorStats("ks0", scalar=5.0),
        ),
        bound=IndexBound("tmp2", 500, "0 <= tmp2 < 500", "in_ptr0", "arg1_1"),
        previous_kernel="cpp_fused_0",
        launches=("cpp_fused_0", "cpp_fused_embedding_0"),
        first_error="RuntimeError: boom",
        misattributed="cpp_fused_1",
        repro="repro.py",
        notes=("a note",),
    )


def measured(load_s: float) -> PerfRecord:
    cold = ColdStart(
        0.5,
        0.1,
        None,
        load_s,
        0.2,
        6,
        0,
        0,
        0.1,
        None,
        0.01,
        0.002,
        1568149,
        6,
        "/tmp/x",
        0.005,
        0.02,
        True,
        "2.13.0",
    )
    memory = Memory(335482880, 340758528, None, 4096)
    latency = Latency(20, 3, 0.03, 0.05, 0.02, 0.035, math.nan, 0.0, (1, 2, 3), None, ())
    return PerfRecord("model", "cpu", cold, memory, latency, ("a note",), "p.pt2")


def test_every_format_from_the_json_is_the_original(pkg: Pkg) -> None:
    """Real reports (a package that cannot be read, one with inputs of the wrong dtype, one
    with two models judged against another target), plus a diagnosis and perf records:
    rendered from their JSON they give the original's bytes in every format (durations to the
    millisecond, which is what the JSON keeps)."""
    checks = [
        (pkg("broken_truncated"), CheckOptions(static_only=True)),
        (pkg("aoti"), CheckOptions(static_only=True, inputs=str(pkg("aoti_inputs_bad_dtype")))),
        (pkg("multi"), CheckOptions(static_only=True, target="cpu,isa=avx2")),
        (pkg("both"), CheckOptions(static_only=True, compile_at_deploy=True)),
    ]
    reports = [api.check(path, options) for path, options in checks]
    reports[3].diagnosis.append(diagnosed())
    reports[3].performance.append((measured(math.inf), measured(2.5)))
    reports[3].runtimes.append({"python": "/venv/bin/python", "torch": "2.13.0+cpu"})
    reports[3].config = "pyproject.toml"
    originals = [
        dataclasses.replace(
            r, stages=[dataclasses.replace(s, duration_s=round(s.duration_s, 3)) for s in r.stages]
        )
        for r in reports
    ]
    assert any(r.targets for r in originals) and any(r.error for r in originals)
    data = json.loads(render_reports(originals, "json"))
    loaded = [Report.from_dict(d) for d in data["reports"]]
    assert loaded[3].performance[0][0].cold is not None
    assert math.isnan(loaded[3].performance[0][0].cold.load_s)  # written as null
    assert loaded[3].diagnosis == originals[3].diagnosis
    for fmt in FORMATS:
        assert render_reports(loaded, fmt) == render_reports(originals, fmt), fmt
        for original, back in zip(originals, loaded):
            assert render_report(back, fmt) == render_report(original, fmt), fmt


def test_from_dict_refuses_what_it_cannot_read(pkg: Pkg) -> None:
    data = api.check(pkg("aoti"), CheckOptions(static_only=True)).to_dict()
    Report.from_dict(data)
    for key, value, said in (
        ("schema_version", 2, "schema_version 2"),
        ("fail_on", "never", "'never' is not a valid Severity"),
        ("stages", [{"name": "x", "status": "done"}], "'done' is not a valid StageStatus"),
        ("findings", None, "findings: expected a list of objects, got null"),
        ("package_path", ["a"], "package_path: expected a string"),
        ("diagnosis", [{"model": "m"}], "no 'verdict'"),
        (
            "performance",
            [{"model": "m", "device": "cpu", "memory": {"host_peak_after_load": "1"}}],
            "memory: host_peak_after_load: expected a number or null, got a string",
        ),
    ):
        with pytest.raises(ValueError, match=re.escape(said)):
            Report.from_dict({**data, key: value})


# --------------------------------------------------------------------------------------------
# A real dynamic check (perf records, every stage) merged from its JSON


def test_a_dynamic_run_merged_from_its_json(
    project: Path, pkg: Pkg, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in ("aoti", "both", "aoti_inputs"):
        shutil.copy(pkg(name), project / Path(pkg(name)).name)
    Path("zoo.toml").write_text(
        '[defaults]\nprobe = false\n\n[[package]]\npath = "aoti.pt2"\ninputs = "aoti_inputs.pt"\n\n'
        '[[package]]\npath = "both.pt2"\ninputs = "aoti_inputs.pt"\n'
    )
    rc_full, full, _ = run_all(capsys, "check", "--manifest", "zoo.toml", name="full")
    reports = json.loads(full["json"])["reports"]
    assert all(r["performance"] and r["performance"][0]["cold"] for r in reports), reports
    assert {s["name"] for s in reports[1]["stages"]} >= {"load", "run", "compare", "perf"}
    rc, merged, _ = run_all(capsys, "merge", "full.json", name="merged")
    assert rc == rc_full
    assert merged["json"] == full["json"]
    for fmt in FORMATS:
        assert normalized(merged[fmt]) == normalized(full[fmt]), fmt


# --------------------------------------------------------------------------------------------
# The CI recipe of docs/ci.md, as written


def recipe() -> dict[str, Any]:
    yaml = pytest.importorskip("yaml")
    page = (Path(__file__).resolve().parents[2] / "docs" / "ci.md").read_text()
    (block,) = [b for b in re.findall(r"```yaml\n(.*?)```", page, flags=re.S) if "--shard" in b]
    return yaml.safe_load(block)  # type: ignore[no-any-return]


def test_the_documented_workflow_is_sound() -> None:
    """Three shard jobs that upload their report even when the gate failed, and a merge job
    that runs whatever they did and downloads every shard's report."""
    jobs = recipe()["jobs"]
    shard, merge_job = jobs["shard"], jobs["merge"]
    assert shard["strategy"]["matrix"]["shard"] == [1, 2, 3]
    assert shard["strategy"]["fail-fast"] is False
    upload = [s for s in shard["steps"] if s.get("uses", "").startswith("actions/upload-artifact")]
    assert upload[0]["if"] == "always()"
    assert upload[0]["with"]["path"] == "shard-${{ matrix.shard }}.json"
    assert merge_job["needs"] == "shard" and merge_job["if"] == "always()"
    (download,) = [s for s in merge_job["steps"] if "download-artifact" in s.get("uses", "")]
    name = upload[0]["with"]["name"].replace("${{ matrix.shard }}", "2")
    assert re.fullmatch(download["with"]["pattern"].replace("*", ".*"), name)
    assert download["with"]["merge-multiple"] is True


def test_the_documented_commands_work(
    project: Path, pkg: Pkg, capsys: pytest.CaptureFixture[str]
) -> None:
    """The recipe's check (each value of the matrix) and merge commands, run as written on a
    zoo of real packages: the unsharded run's JUnit report and exit code; then with one shard's
    report lost, exit 2."""
    write_zoo(project, pkg)
    jobs = recipe()["jobs"]
    (check,) = [s["run"] for s in jobs["shard"]["steps"] if "aotipre check" in s.get("run", "")]
    (gate,) = [s["run"] for s in jobs["merge"]["steps"] if "aotipre merge" in s.get("run", "")]
    rc_full, full, _ = run_all(capsys, *shlex.split(check)[1:4], name="full")
    assert shlex.split(check)[1:4] == ["check", "--manifest", "zoo.toml"]
    for value in jobs["shard"]["strategy"]["matrix"]["shard"]:
        cli(capsys, *shlex.split(check.replace("${{ matrix.shard }}", str(value)))[1:])

    def merged() -> int:
        words = shlex.split(gate)[1:]
        args = [w for word in words for w in (sorted(glob.glob(word)) if "*" in word else [word])]
        return cli(capsys, *args)[0]

    assert merged() == rc_full == 1
    assert normalized(Path("report.xml").read_text()) == normalized(full["junit"])
    Path("shard-2.json").unlink()
    assert merged() == 2
    assert "not checked: shard 2/3" in Path("report.xml").read_text()


def test_many_entries_of_one_package(
    project: Path, pkg: Pkg, capsys: pytest.CaptureFixture[str]
) -> None:
    """Eleven entries of one path (keys `a.pt2`, `a.pt2#2` ... `a.pt2#11`, each with another
    fail-on or select) come out of the merge in the manifest's order, as from `check`."""
    shutil.copy(pkg("multi"), "a.pt2")
    entries = [
        f'[[package]]\npath = "a.pt2"\nfail-on = "{"warning" if i % 2 else "error"}"\n'
        f'select = ["AOT0{i % 3}"]\n'
        for i in range(11)
    ]
    Path("m.toml").write_text("[defaults]\nstatic-only = true\n" + "\n".join(entries))
    rc_full, full, _ = run_all(capsys, "check", "--manifest", "m.toml", name="full")
    names = shards(capsys, Path("m.toml"), 2)
    rc, merged, _ = run_all(capsys, "merge", *names, name="merged")
    assert rc == rc_full
    for fmt in FORMATS:
        assert normalized(merged[fmt]) == normalized(full[fmt]), fmt


# --------------------------------------------------------------------------------------------
# The edges of a shard block, of --expect-shards and of a plain report


def _edit(text: str, change: Any) -> str:
    data = json.loads(text)
    change(data)
    return json.dumps(data)


def _set_index(value: int) -> Any:
    return lambda d: d["shard"].__setitem__("index", value)


def _first_plan_entry_to(shard: int) -> Any:
    def change(data: dict[str, Any]) -> None:
        key = sorted(data["shard"]["plan"])[0]
        data["shard"]["plan"][key]["shard"] = shard

    return change


def _keys_repeated(data: dict[str, Any]) -> None:
    keys = data["shard"]["keys"]
    keys[-1] = keys[0]


@pytest.mark.parametrize(
    ("change", "said"),
    [
        (_set_index(0), "shard 0/2 does not exist"),
        (lambda d: d["shard"].__setitem__("count", 10_001), "shard 1/10001 does not exist"),
        (_first_plan_entry_to(0), "shard 0 of 2 does not exist"),
        (_first_plan_entry_to(3), "shard 3 of 2 does not exist"),
        (_keys_repeated, "distinct keys needed, one per report"),
    ],
)
def test_a_shard_block_that_is_no_shard(
    change: Any, said: str, zoo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    names = shards(capsys, zoo, 2)
    assert len(json.loads(Path(names[0]).read_text())["shard"]["keys"]) >= 2
    Path("edited.json").write_text(_edit(Path(names[0]).read_text(), change))
    rc, out, err = cli(capsys, "merge", "edited.json", names[1])
    assert rc == 2 and out == ""
    assert said in one_error_line(err)


@pytest.mark.parametrize("text", ["5", "null", '"reports"', "[1, 2]"])
def test_json_that_is_no_report(
    text: str, project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    Path("odd.json").write_text(text)
    rc, out, err = cli(capsys, "merge", "odd.json")
    assert rc == 2 and out == ""
    assert "odd.json is not the JSON report of `aotipre check`" in one_error_line(err)


@pytest.mark.parametrize("count", ["0", "10001"])
def test_expect_shards_out_of_range(
    count: str, zoo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    names = shards(capsys, zoo, 2)
    rc, out, err = cli(capsys, "merge", *names, "--expect-shards", count)
    assert rc == 2 and out == ""
    assert "Invalid value for '--expect-shards'" in one_error_line(err)
    with pytest.raises(UsageError, match=f"--expect-shards {count}: must be 1 to 10000"):
        merge(names, expect_shards=int(count))  # the library call checks it too


def test_the_first_shard_missing(zoo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    names = shards(capsys, zoo, 2)
    plan = json.loads(Path(names[0]).read_text())["shard"]["plan"]
    lost = sorted(v["package"] for v in plan.values() if v["shard"] == 1)
    rc, out, _ = cli(capsys, "merge", names[1], "-f", "json")
    data = json.loads(out)
    assert rc == 2 and len(data["reports"]) == len(plan)
    unchecked = sorted(r["package_path"] for r in data["reports"] if r["error"] is not None)
    assert unchecked == lost


def test_a_plain_report_merged_alone_is_itself(
    zoo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A report without a shard block is the whole run (1/1): merged alone, the same bytes in
    every format, no phantom shard."""
    rc, first, _ = run_all(capsys, "check", "--manifest", str(zoo), "--static-only", name="plain")
    rc_merged, merged, _ = run_all(capsys, "merge", "plain.json", name="merged")
    assert rc_merged == rc
    assert merged["json"] == first["json"]
    for fmt in FORMATS:  # durations: kept to the millisecond in the JSON merge reads
        assert normalized(merged[fmt]) == normalized(first[fmt]), fmt
