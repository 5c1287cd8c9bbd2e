"""Crash triage on real CPU compiles (slow): an out-of-range embedding index named by the
kernel's own exception with its statistics read from the sample (no recompile), a segfault from an
unchecked indirect load and a kernel that throws with no name in its error (both named by the
level-3 printer; the latter minified, bundled)."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from aotipre import CheckOptions, check
from aotipre.findings import Report, StageStatus
from aotipre.report import render_report
from aotipre.runner.stages import DynamicOptions
from aotipre.triage.escalate import TriageOptions

pytestmark = pytest.mark.slow

KERNEL = "cpp_fused_embedding_sum_0"


@pytest.fixture(scope="session")
def triage_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One compile cache for the session: the printer builds are compiled once."""
    return tmp_path_factory.mktemp("triage-cache")


def stages(report: Report) -> dict[str, object]:
    return {s.name: s for s in report.stages}


@pytest.fixture(scope="session")
def oob_report(pkg: Callable[[str], Path], triage_cache: Path) -> tuple[Report, float]:
    started = time.monotonic()
    report = check(
        pkg("embedding_oob"),
        CheckOptions(
            inputs=str(pkg("embedding_oob_inputs")),
            dynamic=DynamicOptions(cache_dir=str(triage_cache), probe=False),
        ),
    )
    return report, time.monotonic() - started


@pytest.mark.torch_versions  # the kernel's own exception text
def test_out_of_range_embedding_is_named_with_its_index_statistics(
    oob_report: tuple[Report, float], pkg: Callable[[str], Path]
) -> None:
    import torch

    report, _ = oob_report
    codes = [f.code for f in report.findings]
    assert "AOT602" in codes and "AOT801" in codes and "AOT803" in codes
    st = {s.name: s for s in report.stages}
    assert st["triage:sync-rerun"].status is StageStatus.SKIPPED
    assert "synchronously" in st["triage:sync-rerun"].detail
    # the kernel's own exception names it (`Exception raised from cpp_fused_embedding_sum_0`):
    # no level-3 build; the kernel reads the model input `ids` (arg1_1) before any other call,
    # so its statistics come from the sample (integer ids: read as the static checks read them,
    # without a worker), and they explain the fault: no level-2 build either
    assert st["triage:printer-3"].status is StageStatus.SKIPPED
    assert "the crash already names the faulting kernel" in st["triage:printer-3"].detail
    assert st["triage:kernel-inputs"].status is StageStatus.PASSED
    assert st["triage:kernel-inputs"].command == () and st["triage:kernel-inputs"].duration_s > 0
    assert "ids (arg1_1)" in st["triage:kernel-inputs"].detail
    assert "read from the sample without torch" in st["triage:kernel-inputs"].detail
    assert st["triage:printer-2"].status is StageStatus.SKIPPED
    assert "already explain the fault" in st["triage:printer-2"].detail
    (d,) = report.diagnosis
    assert d.kernel == KERNEL and d.identified_by == "first-error"
    assert any(f"Exception raised from {KERNEL}" in line for line in d.evidence)
    assert d.kind == "index_out_of_range"
    ids = next(t for t in d.inputs if t.input == "ids")
    assert (ids.dtype, ids.shape, ids.min, ids.max) == ("int64", (2, 5), 124, 600)
    # what torch computes of the same sample (its mean too)
    sample = torch.load(pkg("embedding_oob_inputs"), weights_only=True)[0][0]
    assert (ids.stride, ids.numel, ids.mean) == (sample.stride(), 10, sample.double().mean().item())
    assert d.bound is not None and d.bound.upper == 500 and d.bound.argument == ids.name
    assert d.kernel_source is not None and d.kernel_source.startswith('extern "C"')
    assert set(d.fused_nodes) == {"embedding", "sum_1"}
    assert any("models.py" in line and "self.embed(ids)" in line for line in d.source_lines)
    assert "600" in d.verdict and "500" in d.verdict and "ids" in d.verdict
    table = render_report(report, "table")
    assert f"diagnosis (model): {KERNEL} (named by first-error)" in table
    assert json.loads(render_report(report, "json"))["diagnosis"][0]["kernel"] == KERNEL


def test_a_second_triage_reuses_the_printer_builds(
    relu_triage: tuple[Report, Path], pkg: Callable[[str], Path], triage_cache: Path
) -> None:
    """The relu case needs both printer builds (level 3 names the kernel; level 2 shows the
    matmul output it reads, which no sample holds): a second triage finds both in the cache."""
    first, _ = relu_triage
    report = check(
        pkg("ep_only"),
        CheckOptions(
            dynamic=DynamicOptions(
                cache_dir=str(triage_cache),
                probe=False,
                inductor_configs={"cpp.inject_relu_bug_TESTING_ONLY": "runtime_error"},
            ),
        ),
    )
    st = stages(report)
    assert st["triage:kernel-inputs"].status is StageStatus.SKIPPED
    assert "reads no model input straight from the sample" in st["triage:kernel-inputs"].detail
    for sid in ("triage:printer-3", "triage:printer-2"):
        assert st[sid].status is StageStatus.PASSED, st[sid].detail
        assert "compile cache hit" in st[sid].detail
    assert report.diagnosis[0].kernel == first.diagnosis[0].kernel


@pytest.mark.torch_versions  # the level-3 printer's output, read after a crash
def test_unchecked_indirect_load_segfault_is_named(
    pkg: Callable[[str], Path], triage_cache: Path, tmp_path: Path
) -> None:
    """Compiled with inductor's index asserts off, an id of 1e12 reads far outside the table:
    the run dies by SIGSEGV; the printer's last before_launch (written unbuffered before the
    crash) names the kernel, and the table's size comes from the wrapper's constants."""
    import torch

    inputs = tmp_path / "huge_ids.pt"
    torch.save(((torch.tensor([[3, 7, 10**12, 2, 1], [4, 5, 6, 7, 8]]),), {}), inputs)
    report = check(
        pkg("embedding_oob"),
        CheckOptions(
            inputs=str(inputs),
            dynamic=DynamicOptions(
                cache_dir=str(triage_cache),
                probe=False,
                recompile=True,
                inductor_configs={"assert_indirect_indexing": False},
            ),
        ),
    )
    codes = [f.code for f in report.findings]
    assert "AOT604" in codes, codes
    (d,) = report.diagnosis
    assert d.kernel == KERNEL and d.identified_by == "printer-3"
    assert d.kind == "index_out_of_range"
    assert d.bound is not None and d.bound.upper == 500 and "unchecked" in d.bound.line
    assert any(t.input == "ids" and t.max == 10**12 for t in d.inputs)


def test_out_of_range_id_of_an_aoti_only_package_is_named_with_its_input(
    pkg: Callable[[str], Path], triage_cache: Path, tmp_path: Path
) -> None:
    """AOTI code only (no ExportedProgram, so no printer recompile): the kernel's bounds check
    is mapped to the wrapper input it reads, and the sample file's values give the input, the
    position and the value past the embedding's 500 rows. Plain torch, in a fresh process,
    fails the same check on these inputs."""
    import subprocess
    import sys

    import torch

    ids = torch.randint(0, 500, (3, 10), generator=torch.Generator().manual_seed(0))
    ids[2, 7] = 777
    inputs = tmp_path / "bad_ids.pt"
    torch.save(((ids, torch.ones(3, 10)), {}), inputs)
    plain = subprocess.run(
        [sys.executable, "-c", "import sys, torch; m = torch._inductor.aoti_load_package("
         "sys.argv[1]); m(*torch.load(sys.argv[2])[0])", str(pkg("aoti")), str(inputs)],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert plain.returncode != 0 and "index out of bounds: 0 <= tmp" in plain.stderr
    report = check(
        pkg("aoti"),
        CheckOptions(
            inputs=str(inputs),
            dynamic=DynamicOptions(cache_dir=str(triage_cache), probe=False),
        ),
    )
    found = {f.code: f for f in report.findings}
    assert {"AOT308", "AOT602", "AOT803"} <= set(found), sorted(found)
    oob = found["AOT803"]
    assert (oob.input, oob.position, oob.actual) == ("args[0]", 0, 777)
    assert "holds 777 at [2, 7], past the 500 entries" in oob.message
    (d,) = report.diagnosis
    assert d.kind == "index_out_of_range" and "valid indices 0..499" in d.verdict


@pytest.fixture(scope="module")
def relu_triage(
    pkg: Callable[[str], Path], triage_cache: Path, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Report, Path]:
    """TinyMLP compiled with inductor's injected relu bug: the kernel throws `1`, the error
    says only `Unknown exception`; eager runs fine, so the minifier can cut the graph."""
    bundle = tmp_path_factory.mktemp("bundle")
    report = check(
        pkg("ep_only"),
        CheckOptions(
            dynamic=DynamicOptions(
                cache_dir=str(triage_cache),
                probe=False,
                inductor_configs={"cpp.inject_relu_bug_TESTING_ONLY": "runtime_error"},
            ),
            triage=TriageOptions(minify=True, artifacts=str(bundle)),
        ),
    )
    return report, bundle / "model"


def test_a_kernel_the_error_does_not_name_is_named_by_the_printer(
    relu_triage: tuple[Report, Path],
) -> None:
    report, _ = relu_triage
    run = next(f for f in report.findings if f.code == "AOT602")
    assert "Unknown exception" in run.message and "cpp_fused" not in run.message
    (d,) = report.diagnosis
    assert d.kernel is not None and d.kernel.startswith("cpp_fused") and "relu" in d.kernel
    assert d.identified_by == "printer-3"
    assert d.kind == "kernel_error"
    assert "eagerly" in d.verdict
    st = {s.name: s for s in report.stages}
    assert st["triage:nan-asserts"].status is StageStatus.PASSED  # unexplained: it ran


def test_the_minifier_writes_a_small_repro(relu_triage: tuple[Report, Path]) -> None:
    report, bundle = relu_triage
    st = {s.name: s for s in report.stages}
    assert st["triage:minify"].status is StageStatus.PASSED, st["triage:minify"].detail
    assert "nodes" in st["triage:minify"].detail
    assert "AOT807" in [f.code for f in report.findings]
    assert (bundle / "repro.py").is_file() and (bundle / "repro_exported_program.pt2").is_file()


def test_the_bundle_reruns_a_step(relu_triage: tuple[Report, Path]) -> None:
    import subprocess
    import sys

    _, bundle = relu_triage
    for name in ("package.pt2", "source.pt2", "inputs.pt", "commands.sh", "run_package.py"):
        assert (bundle / name).is_file(), name
    from aotipre.runner.stages import WORKER_PATH

    proc = subprocess.run(
        [sys.executable, WORKER_PATH, "steps/printer-3.json"],
        cwd=bundle,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "AOTI_RUNTIME_CHECK_INPUTS": "1"},
    )
    assert "[ before_launch: cpp_fused" in proc.stdout + proc.stderr
