"""`aotipre merge` (aotipre.fleet.merge) and Report.from_dict: a zoo checked as shards and merged gives
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
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from aotipre import __version__, api
from aotipre.api import CheckOptions
from aotipre.findings import Report, StageResult, StageStatus
from aotipre.fleet import merge as merge_module
from aotipre.fleet.merge import MAX_NESTING, merge, parsed_size
from aotipre.fleet.shard import Shard, plan_shards
from aotipre.foundation.errors import UsageError
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


def test_a_shard_is_trusted_for_its_own_packages_only(
    zoo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A shard report that carries a package of another shard (with that shard's verdict or
    another), or whose plan deals the packages otherwise than --shard does, is refused: it
    would hide the other shard's absence."""
    names = shards(capsys, zoo, 2)
    first = json.loads(Path(names[0]).read_text())
    key, original = first["shard"]["keys"][0], first["reports"][0]
    crashed = Report.from_dict(original)
    crashed.error = "the worker crashed"

    def also(report: dict[str, Any]) -> Any:
        def change(data: dict[str, Any]) -> None:
            data["reports"].append(report)
            data["shard"]["keys"].append(key)

        return change

    said = f"shard 2/2 reports {original['package_path']}, a package of shard 1/2"
    for carried in (original, crashed.to_dict()):
        forged = edit(names[1], also(carried))
        for given in ([names[0], forged], [forged]):
            rc, out, err = cli(capsys, "merge", *given, "--expect-shards", "2")
            assert rc == 2 and out == ""
            assert said in one_error_line(err)

    def everything_to_shard_2(data: dict[str, Any]) -> None:
        data["reports"] = first["reports"] + data["reports"]
        data["shard"]["keys"] = first["shard"]["keys"] + data["shard"]["keys"]
        for entry in data["shard"]["plan"].values():
            entry["shard"] = 2

    rc, out, err = cli(capsys, "merge", edit(names[1], everything_to_shard_2))
    assert rc == 2 and out == ""
    assert f"plan[{key!r}]: shard 2, but --shard deals it to shard 1 of 2" in one_error_line(err)


def test_one_package_two_verdicts(
    project: Path, pkg: Pkg, capsys: pytest.CaptureFixture[str]
) -> None:
    """Plain reports (1/1) that both checked a package: one verdict, the package once; two
    verdicts, an error naming both, with the findings kept."""
    shutil.copy(pkg("aoti"), "aoti.pt2")
    cli(capsys, "check", "aoti.pt2", "--static-only", "-f", "json", "-o", "a.json")
    original = json.loads(Path("a.json").read_text())
    assert original["verdict"] != "error"
    shutil.copy("a.json", "same.json")
    rc_alone, alone, _ = cli(capsys, "merge", "a.json", "-f", "json")
    rc, out, _ = cli(capsys, "merge", "same.json", "a.json", "-f", "json")
    assert (rc, out) == (rc_alone, alone)
    crashed = Report.from_dict(original)
    crashed.error = "the worker crashed"
    Path("crashed.json").write_text(json.dumps(crashed.to_dict(), indent=2))
    rc, out, _ = cli(capsys, "merge", "a.json", "crashed.json", "-f", "json")
    assert rc == 2
    (report,) = json.loads(out)["reports"]
    assert report["error"].startswith("checked twice with different verdicts: shard 1/1 (")
    # 1/1 reports are ordered by content (their digests), not by name: either order
    assert f"shard 1/1 (a.json) says {original['verdict']}" in report["error"]
    assert "shard 1/1 (crashed.json) says error" in report["error"]
    assert report["findings"] == original["findings"]  # (the crashed copy kept them too)


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


# --------------------------------------------------------------------------------------------
# Files that are JSON but no report aotipre wrote: one line, bounded memory, nothing appended


def synthetic_shards(count: int = 2, packages: int = 6) -> list[str]:
    """Each shard's JSON report of a run over `packages` made-up packages, rendered as `check
    --shard I/N` renders it (every package passed one stage of 0.5 s): shard-I.json."""
    names = [f"m{i}.pt2" for i in range(packages)]
    written = []
    for index in range(1, count + 1):
        plan = plan_shards(Shard(index, count, "--shard"), names, ".")
        reports = [
            Report(
                package_path=path,
                tool_version=__version__,
                stages=[StageResult("inspect", StageStatus.PASSED, 0.5, "read")],
            )
            for _, path, shard in plan.packages
            if shard == index
        ]
        Path(f"shard-{index}.json").write_text(
            render_reports(reports, "json", shard=plan.to_dict())
        )
        written.append(f"shard-{index}.json")
    return written


@pytest.mark.parametrize(
    ("number", "said"),
    [
        ("NaN", "holds NaN"),
        ("Infinity", "holds Infinity"),
        ("-Infinity", "holds -Infinity"),
        ("1e400", "holds 1e400 (out of a float's range)"),
        ("9" * 400, "holds an integer of 400 digits"),
    ],
)
def test_a_number_json_has_no_float_for(
    number: str, said: str, project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """NaN and the infinities (Python's json reads them), a float past the largest one, an
    integer no float holds: one line, never `NaN` in the JSON or `time="nan"` in JUnit."""
    names = synthetic_shards()
    assert cli(capsys, "merge", *names)[0] == 0
    text = Path(names[1]).read_text()
    assert '"duration_s": 0.5' in text
    Path(names[1]).write_text(text.replace('"duration_s": 0.5', f'"duration_s": {number}', 1))
    rc, out, err = cli(capsys, "merge", *names, "-f", "junit")
    assert rc == 2 and out == ""
    assert said in one_error_line(err)


def _nested(depth: int) -> Any:
    value: Any = "leaf"
    for i in range(depth - 1):
        value = {"a": value} if i % 2 else [value]
    return {"deep": value}


def test_nesting_past_the_limit_is_one_line(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A report's free-form block (`host`) nested 600 deep (json.loads reads it; the checks
    and renderers after it recursed): one line. Up to the limit it merges in every format."""
    names = synthetic_shards()
    data = json.loads(Path(names[0]).read_text())
    data["reports"][0]["host"] = _nested(MAX_NESTING - 3)  # under reports[0] in the file
    Path(names[0]).write_text(json.dumps(data))
    for fmt in FORMATS:
        assert cli(capsys, "merge", *names, "-f", fmt)[0] == 0, fmt
    data["reports"][0]["host"] = _nested(600)
    Path(names[0]).write_text(json.dumps(data))
    rc, out, err = cli(capsys, "merge", *names)
    assert rc == 2 and out == ""
    assert f"nests too deeply to be an aotipre report (over {MAX_NESTING})" in one_error_line(err)


@pytest.mark.parametrize(
    "shape",
    [
        "[" + ",".join(["{}"] * 20_000) + "]",
        "[" + ",".join(["[]"] * 20_000) + "]",
        "[" + ",".join(["1.5"] * 20_000) + "]",
        "[" + ",".join(['"abcd"'] * 20_000) + "]",
        "[" + ",".join(['{"a":"b"}'] * 20_000) + "]",
        "{" + ",".join(f'"k{i}":{i}' for i in range(20_000)) + "}",
        "[" + ",".join(["123456"] * 20_000) + "]",
    ],
    ids=["objects", "arrays", "floats", "strings", "pairs", "keys", "ints"],
)
def test_the_estimate_is_above_what_parsing_takes(shape: str) -> None:
    """parsed_size, which `merge` weighs before parsing, is at least what json.loads
    allocates for JSON of every kind of value, the densest ones included."""
    tracemalloc.start()
    try:
        parsed = json.loads(shape)
        allocated = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert parsed and parsed_size(shape) >= allocated


def test_a_report_too_dense_to_parse_is_one_line(
    project: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A report packed with empty objects (`[{},{},...]`: parsed, 24 times its size) is refused
    before parsing; aotipre's own reports, pretty or minified, are read. The floor under the
    limit is set to 0 here, so that a small file shows what a large one does."""
    monkeypatch.setattr(merge_module, "PARSED_BYTES_FLOOR", 0)
    names = synthetic_shards(packages=40)
    minified = json.dumps(json.loads(Path(names[0]).read_text()), separators=(",", ":"))
    Path(names[0]).write_text(minified)
    assert cli(capsys, "merge", *names)[0] == 0
    data = json.loads(minified)
    data["reports"][0]["host"] = {"x": [{}] * 100_000}
    Path(names[0]).write_text(json.dumps(data))
    rc, out, err = cli(capsys, "merge", *names)
    assert rc == 2 and out == ""
    assert "packs more JSON values into its" in one_error_line(err)


@pytest.mark.parametrize("how", [("-f", "github"), ("--report", "github:gh.txt")])
def test_the_step_summary_is_never_appended_to_an_input(
    how: tuple[str, str],
    project: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """$GITHUB_STEP_SUMMARY naming one of the reports merged (a `github` report appends the
    Markdown summary to it): refused as `-o` on an input is, the input unchanged."""
    names = synthetic_shards()
    before = Path(names[1]).read_bytes()
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", names[1])
    rc, out, err = cli(capsys, "merge", *names, *how)
    assert rc == 2 and out == ""
    assert f"$GITHUB_STEP_SUMMARY {names[1]} is the input {names[1]}" in one_error_line(err)
    assert Path(names[1]).read_bytes() == before
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", "summary.md")
    assert cli(capsys, "merge", *names, *how)[0] == 0
    assert "aotipre" in Path("summary.md").read_text()


def test_check_never_appends_its_step_summary_to_an_input(
    project: Path, pkg: Pkg, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    shutil.copy(pkg("aoti"), "aoti.pt2")
    before = Path("aoti.pt2").read_bytes()
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", "aoti.pt2")
    rc, out, err = cli(capsys, "check", "aoti.pt2", "--static-only", "-f", "github")
    assert rc == 2 and out == ""
    assert "$GITHUB_STEP_SUMMARY aoti.pt2 is the input aoti.pt2" in one_error_line(err)
    assert Path("aoti.pt2").read_bytes() == before
