"""Finding codes of the perf stage, each emitted by a real code path: packages built here with
the public API (torch.export.export + torch._inductor.aoti_compile_and_package) in a fresh
plain-torch process, real inputs, the real worker, through `aotipre.check` (slow).

Ground truth is what plain torch does with the same packages in a fresh process (measured with
torch 2.13 CPU on the shared 2-core VM, numbers in each test, and checked again in the tests
where the check is not a timing). The differences are made large (the load 4x the floor, the
rest far more) so that a loaded machine cannot turn them around.

Not here, because no real setup reaches them without timing luck:
- AOT641 (every load extracts the model: >= 0.5 s). Extraction writes to the page cache at about
  2 GB/s on this VM (385 MB: 0.16-0.18 s; 1026 MB: 0.42-0.85 s, so the 1 GB package below
  emits it on some runs and not on others); a margin would take packages of several GB, and a
  faster disk or host would still move it under the threshold.
"""

from __future__ import annotations

import platform
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from aotipre import CheckOptions, check
from aotipre.checks.custom_ops import Registration
from aotipre.findings import Finding, Report, Severity, StageStatus, Verdict
from aotipre.runner.perf import LEAK_MIN_RUNS, MB, Budgets
from aotipre.runner.stages import DynamicOptions, PerfOptions
from tests.gate.conftest import plain_torch, without_facts

pytestmark = pytest.mark.slow


def perf_findings(report: Report) -> list[Finding]:
    """The perf stage's findings, the load-cost facts (AOT640, AOT641: they come and go with
    the machine's load) left out."""
    return without_facts([f for f in report.findings if f.stage == "perf"])


def stage_status(report: Report, name: str) -> StageStatus:
    return {s.name: s for s in report.stages}[name].status


# -- AOT650, AOT651, AOT652: a heavy model against a light baseline with the same input

BUILD_PAIR = """\
import json, os, sys, torch

out = sys.argv[1]
layers = int(sys.argv[2]) if len(sys.argv) > 2 else 16
device = sys.argv[3] if len(sys.argv) > 3 else "cpu"


class Light(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(4096))

    def forward(self, x):
        return x * self.w


class Heavy(torch.nn.Module):
    # `layers` x 4096x4096 float32 weights (16: 1 GiB, in the .so), a matmul of [32, 4096] each
    def __init__(self):
        super().__init__()
        self.layers = torch.nn.ModuleList(torch.nn.Linear(4096, 4096) for _ in range(layers))

    def forward(self, x):
        for layer in self.layers:
            x = torch.tanh(layer(x))
        return x


torch.manual_seed(0)
x = torch.randn(32, 4096)
torch.save(((x,), {}), os.path.join(out, "inputs.pt"))
for name, model in (("light", Light()), ("heavy", Heavy())):
    with torch.no_grad():
        ep = torch.export.export(model.to(device).eval(), (x.to(device),))
    torch._inductor.aoti_compile_and_package(ep, package_path=os.path.join(out, name + ".pt2"))
    del ep, model
print(json.dumps({n: os.path.getsize(os.path.join(out, n + ".pt2")) for n in ("light", "heavy")}))
"""

MEASURE = """\
import json, resource, sys, time, torch

started = time.perf_counter()
model = torch._inductor.aoti_load_package(sys.argv[1])
load_s = time.perf_counter() - started
(x,), _ = torch.load(sys.argv[2])
model(x)
times = []
for _ in range(5):
    started = time.perf_counter()
    model(x)
    times.append(time.perf_counter() - started)
peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({"load_s": load_s, "p50_ms": sorted(times)[2] * 1000, "peak_rss_mb": peak_mb}))
"""


@pytest.fixture(scope="module")
def light_and_heavy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """light.pt2 (x * w), heavy.pt2 (1 GiB of weights), inputs.pt, and the inductor cache they
    were compiled with (`inductor/`: it holds the probe's check programs, and the 1 GB .so that
    a compile keeps, which must not stay in the user's cache). Removed afterwards: 2 GB on
    disk. Built in ~45 s."""
    out = tmp_path_factory.mktemp("perf-pair")
    try:
        sizes = plain_torch(
            BUILD_PAIR, str(out), env={"TORCHINDUCTOR_CACHE_DIR": str(out / "inductor")}
        )
        assert sizes["heavy"] > 1000 * MB and sizes["light"] < 10 * MB, sizes
        yield out
    finally:
        shutil.rmtree(out, ignore_errors=True)


def test_aot650_aot651_aot652_a_heavy_model_against_a_light_baseline(light_and_heavy: Path) -> None:
    # The load of both runs with TORCHINDUCTOR_VEC_ISA_OK=1 (torch's switch that skips the
    # CPU-ISA probe's base checks, AOT640's advice): the probe, ~1.3-2.2 s of child processes
    # otherwise, is the same for both packages and only noise here. Measured by aotipre (3 runs):
    # load 1.35-1.85 s against 0.34-0.66 s (threshold: +20% and +0.25 s), of it extraction
    # 0.42-0.64 s and dlopen+constants 0.60-0.79 s; median call 201-528 ms against 0.03-7.9 ms
    # (the light model's bimodal median is the shared VM's scheduling); peak RSS 2365 MB
    # against 313 MB. Plain torch, fresh process each: load 3.26 s against 1.74 s, median
    # 520 ms against 0.05 ms, peak RSS 2356 MB against 302 MB.
    env = {
        "TORCHINDUCTOR_CACHE_DIR": str(light_and_heavy / "inductor"),
        "TORCHINDUCTOR_VEC_ISA_OK": "1",
    }
    heavy, light, inputs = (
        str(light_and_heavy / n) for n in ("heavy.pt2", "light.pt2", "inputs.pt")
    )
    plain = {p: plain_torch(MEASURE, p, inputs, env=env) for p in (light, heavy)}
    # plain torch: the heavy package is worse on all three (its memory beyond the tolerance;
    # the timings in direction only: aotipre's thresholds on them are asserted once, below)
    assert plain[heavy]["peak_rss_mb"] > 1.2 * plain[light]["peak_rss_mb"] + 32, plain
    assert plain[heavy]["p50_ms"] > plain[light]["p50_ms"], plain
    assert plain[heavy]["load_s"] > plain[light]["load_s"], plain

    # A few timed calls a round (at least 3 pairs, then until 0.5 s; the default: at least 20
    # pairs, each a heavy call of 0.2-0.5 s): the rounds that the load and memory verdicts need
    # (3 a side) give the median call's verdict 9 or more samples a side, 25x or more apart
    perf = PerfOptions(against=light, runs=3, budget_s=0.5)
    report = check(
        heavy,
        CheckOptions(inputs=inputs, dynamic=DynamicOptions(probe=False, extra_env=env, perf=perf)),
    )
    # the heavy model computes other outputs than the light one: --against says so too
    # (AOT790, held by tests/diff/test_diff_real.py); the cost findings are these three
    found = [f for f in perf_findings(report) if f.code != "AOT790"]
    assert [f.code for f in found] == ["AOT650", "AOT651", "AOT652"], (plain, found)
    assert all(f.severity is Severity.ERROR for f in found)
    got = {f.code: f for f in found}
    rec, base = report.performance[0]
    assert base is not None and rec.cold is not None and base.cold is not None
    # both loads are cold starts whose probe compiled nothing (the inductor cache had the check
    # programs): the load regression is the package's, not a g++ build on one side only
    assert rec.cold.fresh_process and base.cold.fresh_process
    assert rec.cold.probe_compiles == 0 and base.cold.probe_compiles == 0, (rec.cold, base.cold)
    assert rec.cold.extraction_bytes is not None and rec.cold.extraction_bytes > 1000 * MB
    # the findings give each side's median over the comparison's rounds (the first round's
    # records are report.performance[0]): beyond the 20% tolerance
    assert got["AOT650"].actual > 1.2 * got["AOT650"].expected, got["AOT650"]
    assert "which do not overlap" in got["AOT650"].message
    assert got["AOT651"].actual > got["AOT651"].expected
    assert got["AOT652"].actual > got["AOT652"].expected + 32
    assert stage_status(report, "perf") is StageStatus.FAILED
    assert report.verdict is Verdict.FAIL


# -- AOT642: a custom op that keeps host memory on every call

LEAKING_OP = r"""
#include <cstring>
#include <memory>
#include <vector>
#include <ATen/ATen.h>
#include <torch/library.h>
// Keeps 8 MiB, written through, on every call and never frees them.
static std::vector<std::unique_ptr<char[]>> kept;
at::Tensor keep(const at::Tensor& x) {
  constexpr size_t size = 8 << 20;
  kept.emplace_back(new char[size]);
  std::memset(kept.back().get(), 1, size);
  return x * 3;
}
at::Tensor keep_meta(const at::Tensor& x) { return at::empty_like(x); }
TORCH_LIBRARY(aotipre_leak, m) { m.def("keep(Tensor x) -> Tensor"); }
TORCH_LIBRARY_IMPL(aotipre_leak, CPU, m) { m.impl("keep", keep); }
TORCH_LIBRARY_IMPL(aotipre_leak, Meta, m) { m.impl("keep", keep_meta); }
"""

BUILD_LEAK = """\
import json, os, subprocess, sys, torch
from torch._inductor.cpp_builder import get_cpp_compiler
from torch.utils import cpp_extension

out, source = sys.argv[1], sys.argv[2]
src, lib = os.path.join(out, "leak.cpp"), os.path.join(out, "libaotipre_leak.so")
with open(src, "w") as f:
    f.write(source)
# built as tests/cpp/build_packages.py builds its op library
cmd = [get_cpp_compiler(), "-std=c++20", "-O1", "-w", "-shared", "-fPIC", src, "-o", lib]
cmd += ["-D_GLIBCXX_USE_CXX11_ABI=%d" % int(torch._C._GLIBCXX_USE_CXX11_ABI)]
cmd += ["-I" + d for d in cpp_extension.include_paths()]
for d in cpp_extension.library_paths():
    cmd += ["-L" + d, "-Wl,-rpath," + d]
cmd += ["-ltorch", "-ltorch_cpu", "-lc10"]
subprocess.run(cmd, check=True)
torch.ops.load_library(lib)


class Keeps(torch.nn.Module):
    def forward(self, x):
        return torch.ops.aotipre_leak.keep(x).relu() + 1


x = torch.randn(3, 4)
torch.save(((x,), {}), os.path.join(out, "inputs.pt"))
ep = torch.export.export(Keeps(), (x,))
torch._inductor.aoti_compile_and_package(ep, package_path=os.path.join(out, "leak.pt2"))
print(json.dumps(lib))
"""

RSS_PER_CALL = """\
import json, sys, torch

def rss():
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmRSS:"))

torch.ops.load_library(sys.argv[1])
model = torch._inductor.aoti_load_package(sys.argv[2])
(x,), _ = torch.load(sys.argv[3])
model(x)
series = []
for _ in range(10):
    model(x)
    series.append(rss())
print(json.dumps(series))
"""


def test_aot642_a_custom_op_that_keeps_host_memory_on_every_call(tmp_path: Path) -> None:
    # Plain torch, fresh process (the op library loaded, the package loaded, outputs dropped):
    # VmRSS grows by 8.00 MiB per call (8,394,069 bytes), in 9 of 9 steps. aotipre measured
    # 8,392,704 bytes per call over 10 calls (72 MB in all; its threshold is 1 MiB a call,
    # growing in 60% of the steps).
    lib = plain_torch(BUILD_LEAK, str(tmp_path), LEAKING_OP)
    package, inputs = tmp_path / "leak.pt2", tmp_path / "inputs.pt"
    series = plain_torch(RSS_PER_CALL, lib, str(package), str(inputs))
    plain_growth = (series[-1] - series[0]) / (len(series) - 1)
    assert plain_growth > 4 * MB, series
    assert all(b > a for a, b in zip(series, series[1:])), series

    runs = 2 * LEAK_MIN_RUNS
    report = check(
        package,
        CheckOptions(
            inputs=str(inputs),
            registration=Registration(libraries=(lib,)),
            # a budget no loaded machine runs out of: every one of the runs is made
            dynamic=DynamicOptions(probe=False, perf=PerfOptions(runs=runs, budget_s=120.0)),
        ),
    )
    found = perf_findings(report)
    assert [f.code for f in found] == ["AOT642"], found
    (leak,) = found
    assert leak.severity is Severity.WARNING
    assert f"per call over {runs} calls" in leak.message
    assert abs(leak.actual - plain_growth) < 0.25 * plain_growth, (leak.actual, series)
    assert stage_status(report, "custom-ops") is StageStatus.PASSED
    assert stage_status(report, "perf") is StageStatus.FAILED  # a warning fails the perf stage


# -- AOT640: torch's CPU-ISA probe compiling its check programs into an empty inductor cache

LOAD_IN_EMPTY_CACHE = """\
import json, os, sys, time, torch

started = time.perf_counter()
torch._inductor.aoti_load_package(sys.argv[1])
load_s = time.perf_counter() - started
built = [n for _, _, names in os.walk(os.environ["TORCHINDUCTOR_CACHE_DIR"]) for n in names
         if n.endswith(".so")]
print(json.dumps({"load_s": load_s, "check_programs_built": len(built)}))
"""


def test_aot640_the_isa_probe_compiling_into_an_empty_inductor_cache(
    pkg: Callable[[str], Path], tmp_path: Path
) -> None:
    # A deployment whose inductor cache is empty (a fresh container without
    # TORCHINDUCTOR_CACHE_DIR in its image): plain torch's aoti_load_package of aoti.pt2 builds
    # the probe's 10 check programs with g++ into the cache and took 10.2-13.5 s, against
    # 2.3-3.8 s with the same cache again. aotipre's worker, given an empty cache: "loading
    # spent 8.81 s of 8.81 s [10.13 s of 10.13 s] in torch's CPU-ISA probe (... 10 check
    # programs ..., 10 of them compiled with g++ now)". The thresholds are 1 s and a fifth of
    # the load: ten g++ builds of ATen's vector headers (~1 s each here) do not fit in one
    # second, and the rest of this load is ~0.1 s.
    if platform.machine() not in ("x86_64", "AMD64"):
        pytest.skip("torch runs its CPU-ISA probe on x86 only")
    plain = plain_torch(
        LOAD_IN_EMPTY_CACHE,
        str(pkg("aoti")),
        env={"TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "plain")},
    )
    assert plain["check_programs_built"] > 0, plain

    empty = tmp_path / "inductor"
    report = check(
        pkg("aoti"),
        CheckOptions(
            inputs=str(pkg("aoti_inputs")),
            dynamic=DynamicOptions(
                probe=False,
                extra_env={"TORCHINDUCTOR_CACHE_DIR": str(empty)},
                perf=PerfOptions(runs=3),
            ),
        ),
    )
    probe = [f for f in report.findings if f.code == "AOT640"]
    assert [(f.stage, f.severity) for f in probe] == [("perf", Severity.INFO)], report.findings
    rec, _ = report.performance[0]
    assert rec.cold is not None and rec.cold.fresh_process
    assert 0 < rec.cold.probe_compiles <= rec.cold.probe_programs, rec.cold
    assert f"{rec.cold.probe_compiles} of them compiled with g++ now" in probe[0].message
    assert probe[0].actual >= 1.0 and probe[0].actual >= 0.2 * rec.cold.load_s
    assert any(p.suffix == ".so" for p in empty.rglob("*")), "the worker's probe built elsewhere"
    assert perf_findings(report) == []  # nothing else: an info does not fail the stage
    assert stage_status(report, "perf") is StageStatus.PASSED


# -- AOT648, AOT653: GPU memory, over a budget and against a lighter baseline (a CUDA host)


@pytest.mark.gpu
def test_aot648_aot653_gpu_memory_over_budget_and_against_a_light_baseline(tmp_path: Path) -> None:
    # 4 x 4096x4096 float32 weights (256 MiB) that the AOTI runtime cudaMallocs at load, against
    # x * w (16 KiB): the driver's view of the memory the model took (nvidia-smi's used, minus
    # what was used before the load) is over a 64 MB budget and over the baseline's by far more
    # than the 20% tolerance and the 32 MB floor. Plain torch in a fresh process sees the same
    # gap in torch.cuda's view of the device (mem_get_info) around aoti_load_package.
    import torch

    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    plain_torch(BUILD_PAIR, str(tmp_path), "4", "cuda")
    heavy, light, inputs = (str(tmp_path / n) for n in ("heavy.pt2", "light.pt2", "inputs.pt"))
    used = (
        "import json, sys, torch\n"
        "x = torch.load(sys.argv[2])[0][0].cuda(); torch.cuda.synchronize()\n"
        "free0, _ = torch.cuda.mem_get_info()\n"
        "m = torch._inductor.aoti_load_package(sys.argv[1]); torch.cuda.synchronize()\n"
        "free1, _ = torch.cuda.mem_get_info()\n"
        "m(x); torch.cuda.synchronize(); free2, _ = torch.cuda.mem_get_info()\n"
        "print(json.dumps([(free0 - free1) / 2**20, (free0 - free2) / 2**20]))\n"
    )
    plain = {p: plain_torch(used, p, inputs) for p in (light, heavy)}
    print("plain torch: MiB taken after the load, after the first call", plain)
    assert max(plain[heavy]) - max(plain[light]) > 200, plain

    report = check(
        heavy,
        CheckOptions(
            inputs=inputs,
            dynamic=DynamicOptions(
                probe=False,
                perf=PerfOptions(runs=3, budgets=Budgets(max_gpu_mb=64), against=light),
            ),
        ),
    )
    got = {f.code: f for f in perf_findings(report)}
    assert {"AOT648", "AOT653"} <= set(got), (plain, report.findings)
    assert got["AOT648"].expected == 64 and got["AOT648"].actual > 200
    assert got["AOT653"].actual > got["AOT653"].expected + 200
    assert stage_status(report, "perf") is StageStatus.FAILED
