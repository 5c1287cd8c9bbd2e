"""Pure helpers of the torch worker (comparison, derived probe inputs, input conventions)."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from aotipre.runner import contain, launch, worker  # noqa: E402


def test_normalize_inputs_follows_the_sample_inputs_convention() -> None:
    t = torch.zeros(1)
    assert worker.normalize_inputs(t) == ((t,), {})
    assert worker.normalize_inputs(((t,), {"m": t})) == ((t,), {"m": t})
    assert worker.normalize_inputs([t, t]) == ((t, t), {})
    assert worker.normalize_inputs({"x": t}) == ((), {"x": t})
    assert worker.normalize_inputs(((t,), {})) == ((t,), {})


def test_compare_counts_mismatches_with_dtype_tolerances() -> None:
    eager = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    aoti = eager.clone()
    aoti[2, 1] += 0.5
    aoti[0, 0] += 1e-7  # inside float32 tolerance
    out = worker.compare_outputs(aoti, eager, None, None)
    assert out["structure"] is None
    (rec,) = out["outputs"]
    assert rec["mismatches"] == 1
    assert rec["rtol"] == 1e-4 and rec["atol"] == 1e-5
    assert rec["max_abs"] == pytest.approx(0.5)
    assert rec["worst_index"] == [2, 1]
    assert (rec["worst_aoti"], rec["worst_eager"]) == (pytest.approx(9.5), 9.0)
    loose = worker.compare_outputs(aoti, eager, 0.1, 1e-6)["outputs"][0]
    assert loose["mismatches"] == 0 and loose["rtol"] == 0.1


def test_compare_nan_inf_and_structure() -> None:
    eager = torch.ones(4)
    aoti = torch.tensor([1.0, math.nan, math.inf, 1.0])
    rec = worker.compare_outputs((aoti,), (eager,), None, None)["outputs"][0]
    assert (rec["nan"], rec["inf"], rec["eager_nan"], rec["mismatches"]) == (1, 1, 0, 2)
    both_nan = worker.compare_outputs(
        torch.tensor([math.nan]), torch.tensor([math.nan]), None, None
    )
    assert both_nan["outputs"][0]["mismatches"] == 0
    assert (
        "returns 2 output(s)"
        in worker.compare_outputs((eager, eager), (eager,), None, None)["structure"]
    )
    rec = worker.compare_outputs(torch.ones(2, 2), torch.ones(4), None, None)["outputs"][0]
    assert rec["structure"] is True
    ints = worker.compare_outputs(torch.tensor([1, 2, 3]), torch.tensor([1, 5, 3]), None, None)
    assert ints["outputs"][0]["mismatches"] == 1 and ints["outputs"][0]["max_abs"] == 3.0


def test_compare_half_precision_defaults_are_looser() -> None:
    eager = torch.full((8,), 100.0, dtype=torch.bfloat16)
    aoti = eager + 1  # 1% off: fine for bf16, not for fp32
    assert worker.compare_outputs(aoti, eager, None, None)["outputs"][0]["mismatches"] == 0
    assert (
        worker.compare_outputs(aoti.float(), eager.float(), None, None)["outputs"][0]["mismatches"]
        == 8
    )


def test_derive_tensor_keeps_dtype_values_and_layout() -> None:
    gen = torch.Generator().manual_seed(0)
    mask = torch.ones(3, 10)
    out = worker.derive_tensor(mask, [5, 7], gen)
    assert out.shape == (5, 7) and out.dtype == torch.float32 and bool((out == 1).all())
    ids = torch.randint(10, 20, (3, 10), generator=gen)
    out = worker.derive_tensor(ids, [64, 2], gen)
    assert out.dtype == torch.int64 and int(out.min()) >= 10 and int(out.max()) <= 19
    x = torch.randn(4, 6, generator=gen).t()  # strides (1, 6)
    out = worker.derive_tensor(x, [6, 9], gen)
    assert out.shape == (6, 9) and out.stride() == (1, 6)
    flags = torch.tensor([True, False])
    assert worker.derive_tensor(flags, [5], gen).dtype == torch.bool


def test_synth_nodes() -> None:
    gen = torch.Generator().manual_seed(0)
    node = {"kind": "tensor", "dtype": "int64", "shape": [4, 4], "low": 0, "high": 3}
    t = worker.synth_node(node, gen)
    assert t.shape == (4, 4) and int(t.max()) < 3
    tree = {"kind": "tuple", "items": [{"kind": "value", "value": 2}, node]}
    value, tensor = worker.synth_node(tree, gen)
    assert value == 2 and tensor.dtype == torch.int64
    half = worker.synth_node({"kind": "tensor", "dtype": "bfloat16", "shape": [3]}, gen)
    assert half.dtype == torch.bfloat16


def test_tensor_summary_counts_nan() -> None:
    s = worker.tensor_summary(torch.tensor([1.0, math.nan]))
    assert s == {
        "kind": "tensor",
        "dtype": "float32",
        "shape": [2],
        "stride": [1],
        "device": "cpu",
        "nan": 1,
        "inf": 0,
        "nan_rows": [1],  # the rows along dim 0 that hold a NaN (no inf_rows: none is Inf)
        "nan_row_count": 1,
    }


def test_a_compile_runs_with_the_users_tempdir(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Inductor's precompiled headers follow tempfile.gettempdir(), not its cache setting: the
    compile step runs with the TMPDIR the launcher pinned the cache under, then the worker's
    private one is back (bench: a triage recompile 15 s -> 7 s on the 2-core VM)."""
    import tempfile

    import torch._inductor.codecache as codecache

    users = tmp_path / "users"
    private = tmp_path / "private"
    users.mkdir()
    private.mkdir()
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(users / "torchinductor_someone"))
    monkeypatch.setenv("TMPDIR", str(private))
    monkeypatch.setattr(tempfile, "tempdir", None)
    monkeypatch.setattr(codecache, "_HEADER_DIR", str(private / "x" / "precompiled_headers"))
    with worker.users_tempdir():
        assert tempfile.gettempdir() == str(users)
        assert codecache._HEADER_DIR.startswith(str(users) + "/torchinductor_")
        assert codecache._HEADER_DIR.endswith("precompiled_headers")
    assert tempfile.gettempdir() == str(private)
    # a cache put elsewhere by the user, the launcher not saying the user's TMPDIR: nothing
    # moves
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(users / "my-cache"))
    with worker.users_tempdir():
        assert tempfile.gettempdir() == str(private)
    # the launcher says it (contain.private_tmp): the headers go where the user's own process
    # keeps them, wherever the cache is
    env: dict[str, str] = {"TMPDIR": str(users)}
    folder = contain.private_tmp(env)
    assert folder is not None and env["TMPDIR"] == folder
    monkeypatch.setenv("AOTIPRE_USER_TMPDIR", env["AOTIPRE_USER_TMPDIR"])
    with worker.users_tempdir():
        assert tempfile.gettempdir() == str(users)
        assert codecache._HEADER_DIR.startswith(str(users) + "/torchinductor_")
    assert tempfile.gettempdir() == str(private)
    contain.remove_private_tmp(folder)


def test_tensor_stats_are_what_the_level_2_printer_shows() -> None:
    ids = torch.tensor([[124, 600], [3, 7]])
    st = worker.tensor_stats(ids)
    assert st == {
        "dtype": "int64",
        "shape": [2, 2],
        "stride": [2, 1],
        "numel": 4,
        "nan": 0,
        "inf": 0,
        "min": 3.0,
        "max": 600.0,
        "mean": 183.5,
    }
    x = torch.tensor([1.0, float("nan"), -2.0, float("inf"), float("nan")])
    st = worker.tensor_stats(x)
    # min/max/mean over the finite values, the non-finite ones counted
    assert (st["nan"], st["inf"], st["min"], st["max"], st["mean"]) == (2, 1, -2.0, 1.0, -0.5)
    st = worker.tensor_stats(torch.full((3,), float("nan")))
    assert st["nan"] == 3 and "min" not in st and "mean" not in st
    assert worker.tensor_stats(torch.zeros(0, 4))["numel"] == 0
    t = torch.arange(6.0).reshape(2, 3).t()
    assert worker.tensor_stats(t)["stride"] == [1, 3]  # the layout the kernel gets
    with pytest.raises(worker.StepError, match="not a tensor"):
        worker.tensor_stats(3)


def test_value_at_follows_the_input_paths() -> None:
    a, b, c = torch.zeros(1), torch.ones(1), torch.full((1,), 2.0)
    tree = {"args": [a, [b, c]], "kwargs": {"mask": c, "pair": (a, b)}}
    assert worker.value_at(tree, "args[0]") is a
    assert worker.value_at(tree, "args[1][1]") is c
    assert worker.value_at(tree, "kwargs['mask']") is c
    assert worker.value_at(tree, "kwargs['pair'][1]") is b
    with pytest.raises(KeyError):
        worker.value_at(tree, "kwargs['nope']")


USER_COMPARE = """\
import json, os, sys
with open(os.environ["USER_MODULE_SAW"], "w") as f:
    json.dump({"file": __file__, "modules": sorted(sys.modules)}, f)
"""


def test_the_worker_runs_by_path_where_aotipre_cannot_be_imported(tmp_path: Path) -> None:
    """The worker's script (launch.WORKER_PATH) in an interpreter without aotipre (no site processing, so no editable
    install; only torch's folder on the path; run from /): the worker answers its job without
    importing aotipre, and the user's module named like one of the worker's (`compare`, given to
    --import) is the user's, not the worker's."""
    user = tmp_path / "user"
    user.mkdir()
    (user / "compare.py").write_text(USER_COMPARE)
    site = str(Path(torch.__file__).resolve().parents[1])
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "AOTIPRE_"))}
    env["PYTHONPATH"] = os.pathsep.join([site, str(user)])
    python = [sys.executable, "-S", "-X", "importtime"]
    probe = subprocess.run(
        [*python, "-c", "import aotipre"], env=env, cwd="/", capture_output=True, check=False
    )
    assert probe.returncode != 0, "aotipre must not be importable in this interpreter"

    steps = [{"id": "ops", "op": "custom_ops", "ops": ["aten::add"]}]
    job = {"protocol": 1, "tag": "t", "workdir": str(tmp_path), "device": "cpu", "steps": steps}
    (tmp_path / "job.json").write_text(json.dumps(job))
    result, saw = tmp_path / "result.json", tmp_path / "saw.json"
    env.update(
        AOTIPRE_RESULT_PATH=str(result),
        AOTIPRE_CUSTOM_OPS=json.dumps({"import": ["compare"]}),
        USER_MODULE_SAW=str(saw),
    )
    proc = subprocess.run(
        [*python, launch.WORKER_PATH, str(tmp_path / "job.json")],
        env=env,
        cwd="/",
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(result.read_text())
    assert out["done"] and out["custom_ops"] == {"library": [], "import": ["compare"]}
    assert out["steps"]["ops"]["status"] == "ok"
    assert out["steps"]["ops"]["ops"] == {"aten::add": "registered"}
    seen = json.loads(saw.read_text())
    assert seen["file"] == str(user / "compare.py")
    assert "_aotipre_worker.compare" in seen["modules"]  # the worker's own, under its own name
    imported = [
        line.rsplit("|", 1)[1].strip()
        for line in proc.stderr.splitlines()
        if line.startswith("import time:")
    ]
    assert "_aotipre_worker.protocol" in imported and "torch" in imported
    assert not [m for m in imported + seen["modules"] if m.split(".")[0] == "aotipre"]


def test_probe_views_keep_the_values_and_change_only_the_layout() -> None:
    from aotipre.runner.worker import probe

    t = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    moved = probe.transposed_layout(t)
    assert torch.equal(moved, t) and moved.stride() == (1, 2)
    off = probe.offset_view(t)
    assert torch.equal(off, t) and off.storage_offset() == 1 and off.is_contiguous()
    with pytest.raises(probe.StepError, match="rank 2"):
        probe.transposed_layout(torch.zeros(3))
    with pytest.raises(probe.StepError, match="with values"):
        probe.offset_view(torch.zeros(0))


def test_a_probe_plan_naming_a_missing_tensor_input_is_refused() -> None:
    from aotipre.runner.worker import probe

    probe._check_plan_indices([], [0])
    probe._check_plan_indices({0: (1,), 1: (2,)}, [0, 3])
    with pytest.raises(probe.StepError, match="names tensor input 2, the inputs hold 2"):
        probe._check_plan_indices([0, 2], [0, 3])
