"""The worker's performance measurements: load breakdown, latency, memory (no timing asserts)."""

from __future__ import annotations

import json
import mmap
import os
import subprocess
import sys
import types
import zipfile
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from aotipre.runner import launch, worker  # noqa: E402

WORKER = Path(launch.WORKER_PATH)


def test_percentile_is_nearest_rank() -> None:
    values = [float(v) for v in range(1, 101)]
    assert worker.percentile(values, 50) == 50.0
    assert worker.percentile(values, 99) == 99.0
    assert worker.percentile([3.0], 99) == 3.0
    assert worker.percentile([1.0, 2.0], 50) == 1.0


def test_growth_per_run_is_the_slope() -> None:
    assert worker.growth_per_run([]) == 0.0
    assert worker.growth_per_run([5]) == 0.0
    assert worker.growth_per_run([100, 100, 100]) == 0.0
    assert worker.growth_per_run([0, 10, 20, 30]) == pytest.approx(10.0)
    assert worker.growth_per_run([30, 20, 10]) == pytest.approx(-10.0)


class _Base:
    def work(self, x: int) -> int:
        return x * 2


class _Child(_Base):
    pass


class _Native:
    """Stands in for a C++ class: constructed, with a static method."""

    def __init__(self, value: int) -> None:
        self.value = value

    @staticmethod
    def describe() -> str:
        return "native"


def test_call_timer_counts_calls_and_restores_everything() -> None:
    module = types.SimpleNamespace(fn=lambda x: x + 1, Native=_Native)
    failing = types.SimpleNamespace(fn=lambda: 1 / 0)
    original_fn = module.fn
    with worker.CallTimer() as timer:
        timer.patch(module, "fn", "fn")
        timer.patch(_Child, "work", "work")  # inherited: patched on the child only
        timer.patch(failing, "fn", "bad")
        timer.patch(module, "missing", "missing")  # absent: nothing patched
        timer.patch_class(module, "Native", "native")
        assert module.fn(1) == 2 and module.fn(2) == 3
        assert _Child().work(3) == 6 and _Base().work(3) == 6
        with pytest.raises(ZeroDivisionError):
            failing.fn()
        made = module.Native(7)
        assert isinstance(made, _Native) and made.value == 7
        assert module.Native.describe() == "native"
    assert timer.count("fn") == 2 and timer.count("work") == 1 and timer.count("native") == 1
    assert timer.calls["bad"][2] == 1  # one failed call
    assert timer.count("missing") == 0 and timer.seconds("missing") is None
    assert len(timer.starts) == 1
    assert module.fn is original_fn and module.Native is _Native
    assert "work" not in vars(_Child) and _Child().work(1) == 2


def test_memory_snapshot_host_view() -> None:
    snap = worker.memory_snapshot("cpu")
    host = snap["host"]
    assert host["peak_rss"] > 0 and host["vm_rss"] > 0
    assert host["vm_hwm"] >= host["vm_rss"]
    assert "gpu" not in snap


def test_latency_runs_sees_host_memory_growth() -> None:
    kept: list[mmap.mmap] = []

    def leaky() -> None:
        # 4 MiB kept per call, every page touched. A fresh anonymous mapping, not a bytes object:
        # late in a long pytest process malloc may serve bytes from heap pages that are already
        # resident (freed by earlier tests), and RSS would not grow although the leak is real.
        block = mmap.mmap(-1, 4 * 1024 * 1024)
        for offset in range(0, len(block), mmap.PAGESIZE):
            block[offset] = 1
        kept.append(block)

    leak = worker.latency_runs(leaky, "cpu", warmup=1, runs=8, budget_s=60.0)
    assert leak["runs"] == 8 and len(leak["samples_ms"]) == 8
    assert leak["memory"]["host_rss_growth_per_run"] > 2 * 1024 * 1024
    flat = worker.latency_runs(lambda: sum(range(100)), "cpu", warmup=2, runs=8, budget_s=60.0)
    assert flat["memory"]["host_rss_growth_per_run"] < 1024 * 1024
    assert flat["min_ms"] <= flat["p50_ms"] <= flat["p99_ms"] <= flat["max_ms"]


def test_latency_runs_stops_at_its_budget_after_one_warmup_and_two_runs() -> None:
    calls: list[int] = []
    out = worker.latency_runs(lambda: calls.append(1), "cpu", warmup=5, runs=10_000, budget_s=0.0)
    assert (out["warmup"], out["runs"], len(calls)) == (1, 2, 3)


def _run_worker(tmp_path: Path, job: dict) -> dict:
    job = {"protocol": 1, "tag": "t", "workdir": str(tmp_path), "device": "cpu", **job}
    (tmp_path / "job.json").write_text(json.dumps(job))
    result = tmp_path / "result.json"
    proc = subprocess.run(
        [sys.executable, str(WORKER), str(tmp_path / "job.json")],
        env={**os.environ, "AOTIPRE_RESULT_PATH": str(result)},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(result.read_text())


def test_measured_load_run_and_latency_of_a_real_package(pkg, tmp_path: Path) -> None:
    package = pkg("aoti")
    out = _run_worker(
        tmp_path,
        {
            "package": str(package),
            "source_package": str(package),
            "model": "model",
            "inputs": {"kind": "file", "path": str(pkg("aoti_inputs"))},
            "steps": [
                {"id": "load", "op": "load", "measure": True},
                {"id": "run", "op": "run", "measure": True},
                {"id": "latency", "op": "latency", "warmup": 2, "runs": 5, "budget_s": 60},
            ],
        },
    )
    steps = out["steps"]
    assert [steps[s]["status"] for s in ("load", "run", "latency")] == ["ok"] * 3
    load = steps["load"]["perf"]
    assert load["fresh_process"] is True and load["process_age_s"] > 0
    assert load["loader_calls"] == 1
    # the parts add up to at most the whole
    parts = load["loader_s"] + (load["probe"]["seconds"] or 0.0) + load["other_s"]
    assert parts <= load["total_s"] * 1.0001 + 1e-6
    # the extraction folder holds the model's members of the archive, byte for byte
    with zipfile.ZipFile(package) as zf:
        members = [i for i in zf.infolist() if "/data/aotinductor/model/" in f"/{i.filename}"]
    extraction = load["extraction"]
    assert extraction["files"] == len(members)
    assert extraction["bytes"] == sum(i.file_size for i in members)
    if tuple(int(p) for p in torch.__version__.split(".")[:2]) >= (2, 13):
        # (torch 2.11's loader extracts into a mkdtemp("XXXXXX") folder: `KjK1dk`, measured)
        assert os.path.basename(extraction["folder"]).startswith("aotinductor_")
    assert 0.0 <= extraction["written_s"] <= load["loader_s"]
    assert load["dlopen_constants_s"] == pytest.approx(load["loader_s"] - extraction["written_s"])
    probe = load["probe"]
    if not load["probe_cached"]:
        assert probe["check_programs"] >= probe["base_checks"] >= 0
        assert probe["dlopen_children"] <= probe["check_programs"]
    assert load["memory_after"]["host"]["peak_rss"] >= load["memory_before"]["host"]["peak_rss"]
    run = steps["run"]["perf"]
    assert run["call_s"] > 0 and run["memory_after"]["host"]["vm_rss"] > 0
    lat = steps["latency"]["perf"]
    assert lat["runs"] == 5 and lat["warmup"] == 2
    assert lat["min_ms"] <= lat["p50_ms"] <= lat["p99_ms"] <= lat["max_ms"]
    assert len(lat["memory"]["host_rss"]) == 5


def _job(package: Path, inputs: Path, steps: list[dict]) -> dict:
    return {
        "package": str(package),
        "source_package": str(package),
        "model": "model",
        "inputs": {"kind": "file", "path": str(inputs)},
        "steps": steps,
    }


def test_direct_load_gives_the_same_outputs_as_load_package(pkg, tmp_path: Path) -> None:
    outputs = {}
    for how in ("direct", "default"):
        work = tmp_path / how
        work.mkdir()
        load = {"id": "load", "op": "load", "direct": how == "direct"}
        out = _run_worker(
            work,
            _job(
                pkg("kwargs"),
                pkg("kwargs_inputs"),
                [load, {"id": "run", "op": "run", "save": "o.pt"}],
            ),
        )
        assert out["steps"]["run"]["status"] == "ok", out["steps"]
        assert out["steps"]["load"]["how"] == ("direct" if how == "direct" else "load_package")
        outputs[how] = torch.load(work / "o.pt", weights_only=True)
    direct, default = outputs["direct"], outputs["default"]
    flat_d, flat_p = (
        torch.utils._pytree.tree_flatten(direct)[0],
        torch.utils._pytree.tree_flatten(default)[0],
    )
    assert len(flat_d) == len(flat_p) > 0
    assert all(torch.equal(a, b) for a, b in zip(flat_d, flat_p))


def test_a_probed_isa_list_handed_to_the_next_worker_skips_its_probe(pkg, tmp_path: Path) -> None:
    """Triage's workers get the CPU ISAs the check's load probed (RunCrash.vec_isa): their load
    runs no check program and picks the same ISA (AOTI_CPU_ISA) with the same outputs."""
    loads, outputs = {}, {}
    for how in ("probed", "pinned"):
        work = tmp_path / how
        work.mkdir()
        steps = [
            {"id": "load", "op": "load", "measure": True},
            {"id": "run", "op": "run", "save": "o.pt"},
        ]
        job = _job(pkg("aoti"), pkg("aoti_inputs"), steps)
        if how == "pinned":
            job["vec_isa"] = loads["probed"]["vec_isa"]
        out = _run_worker(work, job)
        assert out["steps"]["run"]["status"] == "ok", out["steps"]
        assert out.get("vec_isa_pinned") is (True if how == "pinned" else None)
        loads[how] = out["steps"]["load"]
        outputs[how] = torch.load(work / "o.pt", weights_only=True)
    probed, pinned = loads["probed"], loads["pinned"]
    assert isinstance(probed["vec_isa"], list) and pinned["vec_isa"] == probed["vec_isa"]
    if probed["vec_isa"]:  # a CPU with no vector ISA torch knows runs no check either way
        assert probed["perf"]["probe"]["check_programs"] > 0
    assert pinned["perf"]["probe"]["check_programs"] == 0
    assert pinned["perf"]["probe"]["dlopen_children"] == 0
    flat = [torch.utils._pytree.tree_flatten(outputs[h])[0] for h in ("probed", "pinned")]
    assert len(flat[0]) == len(flat[1]) > 0
    assert all(torch.equal(a, b) for a, b in zip(*flat))


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="torch probes ISAs on x86 only")
def test_a_pinned_isa_list_is_what_pick_vec_isa_chooses_from() -> None:
    code = (
        "import json, sys\n"
        "from aotipre.runner import worker\n"
        "import torch._inductor.cpu_vec_isa as isa\n"
        "assert worker.probed_vec_isa() is None\n"
        "names = [type(v).__name__ for v in isa.supported_vec_isa_list if ' ' not in str(v)]\n"
        "names = [n for n in names if n.startswith('VecAVX')][-1:]\n"
        "assert not worker.pin_vec_isa(names + ['VecMadeUp'])\n"
        "isa.VecISA.check_build = lambda *a: sys.exit('the probe ran')\n"
        "assert worker.pin_vec_isa(names)\n"
        "picked = str(isa.pick_vec_isa())\n"
        "print(json.dumps([worker.probed_vec_isa(), picked, names]))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True
    )
    probed, picked, names = json.loads(out.stdout.splitlines()[-1])
    assert probed == names == ["VecAVX2"]  # torch 2.11-2.15 keep AVX2 last of the x86 ISAs
    assert picked in ("", "avx2")  # "": a simdlen or ATEN_CPU_CAPABILITY filter


def test_a_prewarmed_worker_waits_for_its_job_then_runs_it(pkg, tmp_path: Path) -> None:
    job_path = tmp_path / "job.json"
    result = tmp_path / "result.json"
    env = {
        **os.environ,
        "AOTIPRE_RESULT_PATH": str(result),
        worker.PREWARM_ENV: "loader,compiler",
        "AOTIPRE_PREWARM_WAIT_S": "600",
    }
    proc = subprocess.Popen(
        [sys.executable, str(WORKER), str(job_path)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        with pytest.raises(subprocess.TimeoutExpired):
            proc.wait(timeout=3)  # no job yet: it waits (its limit is 600 s)
        assert not result.exists()
        job = {
            "protocol": 1,
            "tag": "t",
            "workdir": str(tmp_path),
            "device": "cpu",
            **_job(
                pkg("aoti"),
                pkg("aoti_inputs"),
                [
                    {"id": "load", "op": "load", "direct": True},
                    {"id": "run", "op": "run"},
                ],
            ),
        }
        tmp = tmp_path / "job.json.tmp"
        tmp.write_text(json.dumps(job))
        os.replace(tmp, job_path)
        _, err = proc.communicate(timeout=600)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err[-2000:]
    out = json.loads(result.read_text())
    assert out["prewarm_s"] is not None and out["prewarm_s"] >= 0
    assert [out["steps"][s]["status"] for s in ("load", "run")] == ["ok", "ok"]


def test_a_prewarmed_worker_without_a_job_exits_cleanly(tmp_path: Path) -> None:
    env = {**os.environ, worker.PREWARM_ENV: "", "AOTIPRE_PREWARM_WAIT_S": "0"}
    proc = subprocess.run(
        [sys.executable, str(WORKER), str(tmp_path / "never.json")],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 66
    assert "no job at" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.gpu
@pytest.mark.slow
def test_measured_load_on_cuda_counts_the_constants_on_the_gpu(
    cuda_fixture_dir: Path, pkg, tmp_path: Path
) -> None:
    package = pkg("aoti_cuda")
    out = _run_worker(
        tmp_path,
        {
            "device": "cuda",
            **_job(
                package,
                pkg("aoti_inputs"),
                [
                    {"id": "load", "op": "load", "measure": True},
                    {"id": "run", "op": "run", "measure": True},
                    {"id": "latency", "op": "latency", "warmup": 2, "runs": 10, "budget_s": 60},
                    {"id": "load2", "op": "load", "direct": True},
                    {"id": "run2", "op": "run"},
                ],
            ),
        },
    )
    steps = out["steps"]
    assert {s: steps[s]["status"] for s in steps} == dict.fromkeys(steps, "ok"), steps
    load = steps["load"]["perf"]
    assert load["cuda_init_s"] is not None and load["cuda_init_s"] >= 0
    before, after = load["memory_before"]["gpu"], load["memory_after"]["gpu"]
    # the constants are cudaMalloc'd by the AOTI runtime: the driver sees them
    assert after["device_used"] > before["device_used"]
    assert load["extraction"]["bytes"] > 0 and load["loader_calls"] == 1
    run = steps["run"]["perf"]["memory_after"]["gpu"]
    assert run["max_allocated"] >= run["allocated"] >= 0
    lat = steps["latency"]["perf"]
    assert lat["runs"] == 10 and len(lat["memory"]["gpu_allocated"]) == 10
    assert steps["load2"]["how"] == "direct"
