"""scripts/bench_zoo.py (issue 25): its verdict-consistency logic on made-up runs, and, for real
(slow: it compiles), the script on a zoo of 2 packages (one passing, one failing) in the
sequential and shards + merge modes: the same verdicts everywhere, the JSON's figures and goals,
and the zoo reused from its stamp."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "bench_zoo.py"


def _bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_zoo", SCRIPT)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


bench = _bench()

STAMP: dict[str, Any] = {
    "packages": [
        {"name": "p00_mlp", "expect": "pass"},
        {"name": "p01_conv", "expect": "fail"},
    ]
}


def _run(verdicts: dict[str, str], exit_code: int) -> dict[str, Any]:
    return {"verdicts": dict(verdicts), "exit_code": exit_code, "wall_s": 1.0}


GOOD = {"p00_mlp.pt2": "pass", "p01_conv.pt2": "fail"}


def test_agreeing_modes_have_no_mismatch() -> None:
    runs = {m: _run(GOOD, 1) for m in ("seq", "j2", "shards", "ray", "j2_static", "ray_static")}
    assert bench.mismatches(runs, STAMP) == []


def test_a_verdict_an_exit_code_or_a_package_that_differs_is_named() -> None:
    runs = {
        "seq": _run(GOOD, 1),
        "j2": _run({**GOOD, "p01_conv.pt2": "pass"}, 1),
        "shards": _run({"p00_mlp.pt2": "pass"}, 0),
        "ray": _run(GOOD, 2),
        "j2_static": _run(GOOD, 1),
        "ray_static": _run({**GOOD, "p00_mlp.pt2": "error"}, 1),
    }
    lines = bench.mismatches(runs, STAMP)
    assert "j2: p01_conv.pt2 is pass, seq says fail" in lines
    assert "shards: p01_conv.pt2 is missing, seq says fail" in lines
    assert "shards: exit 0, seq exits 1" in lines
    assert "ray: exit 2, seq exits 1" in lines
    assert "ray_static: p00_mlp.pt2 is error, j2_static says pass" in lines
    assert len(lines) == 5, lines


def test_the_reference_run_must_give_the_zoos_expected_verdicts() -> None:
    wrong = {"p00_mlp.pt2": "pass", "p01_conv.pt2": "pass"}
    lines = bench.mismatches({"seq": _run(wrong, 0), "shards": _run(wrong, 0)}, STAMP)
    assert lines == [
        "seq: p01_conv.pt2 is pass, the zoo says fail",
        "seq: exit 0, the zoo exits 1",
    ]


def test_goals_as_the_issue_defines_them() -> None:
    modes = {
        "j2": {"wall_s": 10.0},
        "ray": {"wall_s": 10.8},
        "j2_static": {"wall_s": 2.0},
        "ray_static": {"wall_s": 9.0},
        "shards": {"wall_s": 9.0, "merge_s": 0.4, "cli_import_s": 0.3},
        "j2_head": {"wall_s": 10.0},
        "ray_head": {"wall_s": 11.5},
        "j2_head_static": {"wall_s": 0.5},
        "ray_head_static": {"wall_s": 1.3},
    }
    figures, goals = bench.figures_and_goals(modes, 20)
    assert figures["ray_vs_j2_spread"] == pytest.approx(0.08)
    assert figures["ray_cost_per_package_s"] == pytest.approx(0.04)
    assert figures["ray_cost_static_per_package_s"] == pytest.approx(0.35)
    assert figures["ray_head_vs_j2_spread"] == pytest.approx(0.15)  # its own -j 2 pair
    assert figures["ray_head_cost_per_package_s"] == pytest.approx(0.075)
    # Ray's fixed cost with no check: (1.3 - 0.5) s of the head's -j 2 pair's 10 s
    assert figures["ray_head_fixed_s"] == pytest.approx(0.8)
    assert figures["ray_head_fixed_share"] == pytest.approx(0.08)
    assert [g["result"] for g in goals] == ["PASS", "PASS", "PASS", "MISS", "PASS", "PASS", "PASS"]
    modes["ray"]["wall_s"] = 9.0  # Ray faster than -j 2 by more than 10 %: a miss too
    modes["ray_head"]["wall_s"] = 10.9
    modes["ray_head_static"]["wall_s"] = 1.6
    modes["shards"]["merge_s"] = 1.2
    _, goals = bench.figures_and_goals(modes, 20)
    assert [g["result"] for g in goals] == ["MISS", "PASS", "PASS", "PASS", "PASS", "MISS", "MISS"]
    _, goals = bench.figures_and_goals({"seq": {"wall_s": 3.0}}, 2)
    assert [g["result"] for g in goals] == ["n/a"] * 7


@pytest.mark.slow
def test_two_packages_sequential_and_shards_merged(tmp_path: Path) -> None:
    zoo, out = tmp_path / "zoo", tmp_path / "bench.json"
    cmd = [sys.executable, str(SCRIPT), "--build", str(zoo), "--packages", "2",
           "--modes", "seq,shards", "--merge-runs", "1", "--no-warmup", "--json", str(out)]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1800, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-4000:]
    assert "zoo: building 2 packages" in proc.stderr
    data = json.loads(out.read_text())
    assert {"n", "repeat", "machine", "zoo", "modes", "figures", "goals", "consistent"} <= set(data)
    assert data["n"] == 2 and data["consistent"] is True and data["mismatches"] == []
    for key in ("cpu", "cpus", "memory_gib", "torch", "ray", "python"):
        assert key in data["machine"]
    assert data["zoo"]["failing"] == 1
    assert [p["expect"] for p in data["zoo"]["packages"]] == ["pass", "fail"]
    assert set(data["modes"]) == {"seq", "shards"}
    for mode in data["modes"].values():
        assert mode["exit_code"] == 1
        assert mode["verdicts"] == {"p00_mlp.pt2": "pass", "p01_conv.pt2": "fail"}
        assert mode["wall_s"] > 0
    shards = data["modes"]["shards"]
    assert [s["packages"] for s in shards["runs"][0]["shards"]] == [1, 1]
    assert shards["merge_s"] > 0
    figures = data["figures"]
    assert {"seq_wall_s", "shards_wall_s", "speedup_shards_vs_seq", "merge_s"} <= set(figures)
    results = {g["goal"].split(" (")[0]: g["result"] for g in data["goals"]}
    assert results["merge of 2 shards"] in ("PASS", "MISS")
    assert [g["result"] for g in data["goals"][:3]] == ["n/a"] * 3
    assert "| sequential `-j 1` |" in proc.stdout and "| merge of 2 shards" in proc.stdout

    # the zoo is reused from its stamp; another torch's stamp is not
    stamp, built = bench.ensure_zoo(zoo, 2)
    assert built is False and stamp["n"] == 2
    assert bench.zoo_stamp(zoo, 3) is None
    stamp_file = zoo / "zoo.json"
    stamp_file.write_text(json.dumps({**stamp, "torch": "0.0.0"}))
    assert bench.zoo_stamp(zoo, 2) is None


def test_the_running_heads_run_is_held_to_its_own_j2_pair() -> None:
    runs = {"seq": _run(GOOD, 1), "j2_head": _run(GOOD, 1), "ray_head": _run(GOOD, 1)}
    assert bench.mismatches(runs, STAMP) == []
    runs["ray_head"] = _run({**GOOD, "p00_mlp.pt2": "error"}, 2)
    assert bench.mismatches(runs, STAMP) == [
        "ray_head: p00_mlp.pt2 is error, j2_head says pass",
        "ray_head: exit 2, j2_head exits 1",
    ]
    runs = {"j2_head_static": _run(GOOD, 1), "ray_head_static": _run(GOOD, 2)}
    assert bench.mismatches(runs, STAMP) == ["ray_head_static: exit 2, j2_head_static exits 1"]
