"""CI shards (aotipre.fleet.shard, `check --shard`): parsing I/N and the CI variables of `auto`, and an
assignment of packages to shards that is balanced and stays the same whatever the manifest's
order, the working directory or the checkout folder."""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

import pytest

from aotipre import config
from aotipre.fleet import batch
from aotipre.fleet.shard import MAX_SHARDS, Shard, assign, package_keys, parse_shard
from aotipre.foundation.errors import UsageError
from tests.scale.shards import ZOO, Pkg, cli, enter_project, one_error_line, write_zoo


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return enter_project(tmp_path, monkeypatch)


@pytest.fixture
def zoo(project: Path, pkg: Pkg) -> Path:
    return write_zoo(project / "zoo", pkg)


# --------------------------------------------------------------------------------------------
# Parsing


def test_parse_i_of_n() -> None:
    assert parse_shard("2/3") == Shard(2, 3, "--shard")
    assert parse_shard(" 1 / 1 ") == Shard(1, 1, "--shard")
    assert str(parse_shard(f"{MAX_SHARDS}/{MAX_SHARDS}")) == f"{MAX_SHARDS}/{MAX_SHARDS}"


BAD = ["0/3", "4/3", "1/0", "x/y", "1/10001", "", "3", "1/2/3", "-1/3", "1.5/3", "99999999999/3"]


@pytest.mark.parametrize("text", BAD)
def test_bad_shard_is_a_usage_error(text: str) -> None:
    with pytest.raises(UsageError) as info:
        parse_shard(text, env={})
    assert "\n" not in str(info.value) and "--shard" in str(info.value)


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("1/0", "the shard count must be 1 to 10000, not 0"),
        ("1/10001", "the shard count must be 1 to 10000, not 10001"),
        ("0/3", "shard 0 of 3 does not exist"),
        ("4/3", "shard 4 of 3 does not exist"),
    ],
)
def test_bad_shard_says_which_part_is_wrong(text: str, said: str) -> None:
    with pytest.raises(UsageError, match=said):
        parse_shard(text, env={})


@pytest.mark.parametrize("text", ["0/3", "4/3", "1/0", "x/y", "1/10001", "auto"])
def test_bad_shard_on_the_command_line(
    text: str, zoo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rc, out, err = cli(capsys, "check", "--manifest", str(zoo), "--shard", text, "-f", "json")
    assert rc == 2 and out == ""
    assert "--shard" in one_error_line(err)


def test_no_baseline_is_written_from_one_shard(
    zoo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ("check", "--manifest", str(zoo), "--shard", "1/2", "--write-baseline", "b.json")
    rc, _, err = cli(capsys, *args)
    assert rc == 2 and "--write-baseline" in one_error_line(err)
    assert not Path("b.json").exists()


@pytest.mark.parametrize(
    ("env", "shard"),
    [
        ({"AOTIPRE_SHARD": "2/3"}, Shard(2, 3, "AOTIPRE_SHARD")),
        (
            {"BUILDKITE_PARALLEL_JOB": "0", "BUILDKITE_PARALLEL_JOB_COUNT": "4"},
            Shard(1, 4, "BUILDKITE_PARALLEL_JOB"),
        ),
        (
            {"JOB_COMPLETION_INDEX": "2", "AOTIPRE_SHARD_COUNT": "3"},
            Shard(3, 3, "JOB_COMPLETION_INDEX"),
        ),
        (
            {
                "SLURM_ARRAY_TASK_ID": "5",
                "SLURM_ARRAY_TASK_MIN": "4",
                "SLURM_ARRAY_TASK_COUNT": "3",
            },
            Shard(2, 3, "SLURM_ARRAY_TASK_ID"),
        ),
        (  # --array=10-14:2 runs tasks 10, 12, 14
            {
                "SLURM_ARRAY_TASK_ID": "14",
                "SLURM_ARRAY_TASK_MIN": "10",
                "SLURM_ARRAY_TASK_STEP": "2",
                "SLURM_ARRAY_TASK_COUNT": "3",
            },
            Shard(3, 3, "SLURM_ARRAY_TASK_ID"),
        ),
        (  # the array's first task is the first shard
            {
                "SLURM_ARRAY_TASK_ID": "4",
                "SLURM_ARRAY_TASK_MIN": "4",
                "SLURM_ARRAY_TASK_COUNT": "3",
            },
            Shard(1, 3, "SLURM_ARRAY_TASK_ID"),
        ),
        (  # AOTIPRE_SHARD first: it names what the job says
            {"AOTIPRE_SHARD": "1/2", "BUILDKITE_PARALLEL_JOB": "3"},
            Shard(1, 2, "AOTIPRE_SHARD"),
        ),
    ],
)
def test_auto_reads_the_ci_variables(env: dict[str, str], shard: Shard) -> None:
    assert parse_shard("auto", env) == shard


@pytest.mark.parametrize(
    ("env", "said"),
    [
        ({}, "no CI shard variable is set (AOTIPRE_SHARD, BUILDKITE_PARALLEL_JOB"),
        ({"AOTIPRE_SHARD": "3"}, "AOTIPRE_SHARD='3' is not I/N"),
        ({"BUILDKITE_PARALLEL_JOB": "0"}, "BUILDKITE_PARALLEL_JOB_COUNT is not set"),
        (
            {"BUILDKITE_PARALLEL_JOB": "3", "BUILDKITE_PARALLEL_JOB_COUNT": "3"},
            "shard 4 of 3 does not exist",
        ),
        ({"JOB_COMPLETION_INDEX": "1"}, "AOTIPRE_SHARD_COUNT is not"),
        ({"JOB_COMPLETION_INDEX": "x", "AOTIPRE_SHARD_COUNT": "2"}, "'x' is not a number"),
        ({"SLURM_ARRAY_TASK_ID": "1", "SLURM_ARRAY_TASK_COUNT": "2"}, "SLURM_ARRAY_TASK_MIN"),
        (
            {
                "SLURM_ARRAY_TASK_ID": "3",
                "SLURM_ARRAY_TASK_MIN": "0",
                "SLURM_ARRAY_TASK_STEP": "2",
                "SLURM_ARRAY_TASK_COUNT": "2",
            },
            "step 2",
        ),
        (  # a step of 0 is no range (and no division by zero)
            {
                "SLURM_ARRAY_TASK_ID": "0",
                "SLURM_ARRAY_TASK_MIN": "0",
                "SLURM_ARRAY_TASK_STEP": "0",
                "SLURM_ARRAY_TASK_COUNT": "2",
            },
            "step 0",
        ),
        (  # a task before the array's first
            {
                "SLURM_ARRAY_TASK_ID": "2",
                "SLURM_ARRAY_TASK_MIN": "3",
                "SLURM_ARRAY_TASK_COUNT": "2",
            },
            "task -1 past the first",
        ),
    ],
)
def test_auto_without_usable_variables(env: dict[str, str], said: str) -> None:
    with pytest.raises(UsageError, match=said.replace("(", r"\(")):
        parse_shard("auto", env)


@pytest.mark.parametrize(
    ("env", "index", "source"),
    [
        ({"AOTIPRE_SHARD": "2/2"}, 2, "AOTIPRE_SHARD"),
        (
            {"BUILDKITE_PARALLEL_JOB": "1", "BUILDKITE_PARALLEL_JOB_COUNT": "2"},
            2,
            "BUILDKITE_PARALLEL_JOB",
        ),
        ({"JOB_COMPLETION_INDEX": "0", "AOTIPRE_SHARD_COUNT": "2"}, 1, "JOB_COMPLETION_INDEX"),
        (
            {
                "SLURM_ARRAY_TASK_ID": "7",
                "SLURM_ARRAY_TASK_MIN": "6",
                "SLURM_ARRAY_TASK_COUNT": "2",
            },
            2,
            "SLURM_ARRAY_TASK_ID",
        ),
    ],
)
def test_check_shard_auto(
    env: dict[str, str],
    index: int,
    source: str,
    zoo: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    rc, out, _ = cli(capsys, "check", "--manifest", str(zoo), "--shard", "auto", "-f", "json")
    block = json.loads(out)["shard"]
    assert (block["index"], block["count"], block["source"]) == (index, 2, source)
    assert rc in (0, 1)
    assert block["keys"] == [k for k, v in block["plan"].items() if v["shard"] == index]


# --------------------------------------------------------------------------------------------
# Assignment


def test_assignment_is_balanced_and_independent_of_order() -> None:
    keys = [f"models/m{i:03d}.pt2" for i in range(103)]
    for count in (1, 2, 3, 7, 103, 200):
        shards = assign(keys, count)
        sizes = [list(shards.values()).count(i) for i in range(1, count + 1)]
        assert max(sizes) - min(sizes) <= 1 and sum(sizes) == len(keys)
        shuffled = keys[:]
        random.Random(count).shuffle(shuffled)
        assert assign(shuffled, count) == shards


def test_keys_are_relative_posix_and_numbered(tmp_path: Path) -> None:
    base = tmp_path / "zoo"
    packages = [str(base / "a.pt2"), str(tmp_path / "other" / "b.pt2"), str(base / "a.pt2")]
    assert package_keys(packages, base) == ["a.pt2", "../other/b.pt2", "a.pt2#2"]


def shard_plan(out: str) -> tuple[dict[str, int], list[str]]:
    block = json.loads(out)["shard"]
    return {k: v["shard"] for k, v in block["plan"].items()}, block["keys"]


def test_assignment_is_stable(
    project: Path, pkg: Pkg, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same packages in a shuffled manifest, checked from another working directory, in
    another checkout folder: the same keys on the same shards."""
    manifest = write_zoo(project / "zoo", pkg)
    rc, out, _ = cli(capsys, "check", "--manifest", str(manifest), "--shard", "1/3", "-f", "json")
    plan, keys = shard_plan(out)
    assert sorted(plan) == sorted([f"{n}.pt2" for n in ZOO] + ["aoti.pt2#2"])
    assert set(plan.values()) == {1, 2, 3} and keys
    shuffled = list(ZOO)
    random.Random(7).shuffle(shuffled)
    other = write_zoo(project / "elsewhere" / "checkout" / "zoo", pkg, tuple(shuffled))
    assert other.read_text() != manifest.read_text()
    monkeypatch.chdir(project / "elsewhere" / "checkout")
    rc, out, _ = cli(capsys, "check", "--manifest", "zoo/zoo.toml", "--shard", "1/3", "-f", "json")
    assert shard_plan(out) == (plan, keys)
    monkeypatch.chdir(project / "elsewhere" / "checkout" / "zoo")
    rc, out, _ = cli(capsys, "check", "--manifest", "zoo.toml", "--shard", "1/3", "-f", "json")
    assert shard_plan(out) == (plan, keys)
    reports = json.loads(out)["reports"]
    assert [r["package_path"] for r in reports] == [k.split("#")[0] for k in keys]


def test_packages_on_the_command_line(
    project: Path, pkg: Pkg, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without a manifest, packages are keyed relative to the working directory; one package
    with --shard gets the report of many packages all the same."""
    for name in ("aoti", "both", "multi"):
        shutil.copy(pkg(name), project / f"{name}.pt2")
    args = ("check", "aoti.pt2", "./multi.pt2", str(project / "both.pt2"), "--static-only")
    plans = []
    for index in (1, 2):
        rc, out, _ = cli(capsys, *args, "--shard", f"{index}/2", "-f", "json")
        plans.append(shard_plan(out))
    assert plans[0][0] == plans[1][0]
    assert set(plans[0][0]) == {"aoti.pt2", "both.pt2", "multi.pt2"}
    assert sorted(plans[0][1] + plans[1][1]) == ["aoti.pt2", "both.pt2", "multi.pt2"]
    rc, out, _ = cli(capsys, "check", "aoti.pt2", "--static-only", "--shard", "1/1", "-f", "json")
    data = json.loads(out)
    assert rc == 0 and len(data["reports"]) == 1 and data["shard"]["keys"] == ["aoti.pt2"]
    rc, out, _ = cli(capsys, "check", "aoti.pt2", "--static-only", "--shard", "1/1")
    assert "overall: PASS (exit 0; 1 package(s)" in out


def test_a_shard_without_packages(zoo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """10 shards of 8 packages: two get none, and still write a valid report and pass."""
    empty = []
    for index in range(1, 11):
        rc, out, err = cli(
            capsys, "check", "--manifest", str(zoo), "--shard", f"{index}/10", "-f", "json"
        )
        data = json.loads(out)
        if not data["reports"]:
            empty.append(index)
            assert rc == 0 and err == "" and data["verdict"] == "pass"
            assert data["summary"]["packages"] == 0 and data["shard"]["keys"] == []
    assert len(empty) == 2
    for fmt in ("table", "junit", "sarif", "github", "markdown"):
        rc, out, _ = cli(
            capsys, "check", "--manifest", str(zoo), "--shard", f"{empty[0]}/10", "-f", fmt
        )
        assert rc == 0 and out


def test_keep_shard_keeps_plan_order(project: Path) -> None:
    (project / "m.toml").write_text("".join(f"[[package]]\npath = '{c}.pt2'\n" for c in "dcba"))
    manifest = batch.load_manifest(project / "m.toml")
    jobs = batch.plan([], config.Settings(static_only=True), manifest=manifest)
    kept, whole = batch.keep_shard(jobs, Shard(2, 2, "--shard"), manifest)
    assert [j.package for j in jobs] == ["a.pt2", "b.pt2", "c.pt2", "d.pt2"]
    assert [key for key, _, _ in whole.packages] == ["a.pt2", "b.pt2", "c.pt2", "d.pt2"]
    assert [j.package for j in kept] == list(whole.keys) and len(kept) == 2
