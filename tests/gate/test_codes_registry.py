"""Every finding code has a test that emits it through a real code path (a real package, real
inputs, the real worker), or -- where only a GPU or a rare host can produce it -- a gpu-marked
real test (when a GPU can) plus a fake test named as such, with the reason. A new code cannot
arrive without registering its test here; each registered test must exist and name its code.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from aotipre import codes

TESTS = Path(__file__).resolve().parents[1]
REPO = TESTS.parent

G = "tests/gate"
FIX = "tests/checks/test_static_fixtures.py"
ARCH = "tests/pt2/test_archive.py"
T211 = "tests/pt2/test_torch211_archives.py"
REAL_STAGES = "tests/runner/test_stages_real.py"
TRIAGE = "tests/triage/test_triage_real.py"

REAL: dict[str, tuple[str, ...]] = {
    "AOT001": (f"{ARCH}::test_missing_file",),
    "AOT002": (f"{FIX}::test_broken_packages_cannot_be_checked",),
    "AOT003": (f"{FIX}::test_broken_packages_cannot_be_checked",),
    "AOT004": (f"{FIX}::test_broken_packages_cannot_be_checked",),
    "AOT005": (f"{FIX}::test_broken_packages_cannot_be_checked",),
    "AOT006": (f"{FIX}::test_broken_packages_cannot_be_checked",),
    "AOT007": (f"{FIX}::test_broken_packages_cannot_be_checked",),
    "AOT008": (f"{FIX}::test_corrupt_so",),
    "AOT009": (f"{FIX}::test_model_not_found_lists_models",),
    "AOT010": (f"{G}/test_codes_static_real.py::test_aot010_an_archive_without_models",),
    "AOT011": (f"{FIX}::test_weights_on_disk",),
    "AOT012": (f"{G}/test_codes_static_real.py::test_aot012_aoti_package_without_its_wrapper_cpp",),
    "AOT013": (f"{FIX}::test_export_and_aoti_bounds_differ_is_a_warning",),
    "AOT014": (f"{G}/test_codes_static_real.py::test_aot014_unknown_device_type",),
    "AOT020": (f"{FIX}::test_bad_inputs_files",),
    "AOT021": (f"{FIX}::test_bad_inputs_files",),
    "AOT022": (f"{FIX}::test_no_inputs_is_info_not_pass_of_inputs",),
    "AOT101": (f"{FIX}::test_missing_argument",),
    "AOT102": (f"{G}/test_codes_static_real.py::test_aot102_missing_kwarg",),
    "AOT103": (f"{G}/test_codes_static_real.py::test_aot103_unexpected_kwarg",),
    "AOT104": (f"{G}/test_codes_static_real.py::test_aot104_nested_input_structure",),
    "AOT105": (f"{G}/test_codes_static_real.py::test_aot105_constant_differs_from_export",),
    "AOT106": (f"{G}/test_codes_static_real.py::test_aot106_tensor_where_a_scalar_was_exported",),
    "AOT201": (f"{FIX}::test_dtype_mismatch",
               f"{REAL_STAGES}::test_wrong_dtype_is_caught_at_run_time_without_static_checks"),
    "AOT202": (f"{T211}::test_cuda_package_on_a_cpu_host",),
    "AOT301": (f"{G}/test_codes_static_real.py::test_aot301_rank",),
    "AOT302": ("tests/test_api_program.py::test_exported_program_with_other_inputs",),
    "AOT303": (f"{G}/test_boundaries_run.py::test_aoti_only_package_at_its_edges",),
    "AOT304": (f"{FIX}::test_dim_above_max",
               f"{G}/test_boundaries_run.py::test_aoti_only_package_at_its_edges"),
    "AOT305": (f"{FIX}::test_shared_dim_disagrees",),
    "AOT306": (f"{FIX}::test_derived_dim",),
    "AOT307": (f"{FIX}::test_transposed_input_violates_static_strides",
               f"{G}/test_boundaries_run.py::test_size_one_dim_with_an_unusual_stride"),
    "AOT401": (f"{T211}::test_cuda_package_on_a_cpu_host",),
    "AOT402": (f"{T211}::test_cuda_target_compute_capability",),
    "AOT403": (f"{FIX}::test_target_isa_weaker_than_package",),
    "AOT404": (f"{G}/test_codes_static_real.py::test_aot404_platform_or_machine",),
    "AOT405": (f"{G}/test_codes_static_real.py::test_aot405_exported_by_an_unsupported_torch",),
    "AOT406": (f"{FIX}::test_cuda_target_on_a_cpu_package",),
    "AOT407": (f"{G}/test_codes_real.py::test_aot407_aot411_doctor_with_a_broken_compiler",),
    "AOT408": (f"{G}/test_codes_real.py::test_aot408_noexec_extraction_directory",),
    "AOT409": (f"{G}/test_codes_real.py::test_aot409_low_disk_space",),
    "AOT411": (f"{G}/test_codes_real.py::test_aot407_aot411_doctor_with_a_broken_compiler",),
    "AOT501": (f"{G}/test_codes_real.py::test_aot501_compile_failed",),
    "AOT502": (f"{G}/test_codes_real.py::test_aot502_compiler_process_crashed",),
    "AOT503": (f"{G}/test_codes_real.py::test_aot503_compile_timeout",),
    "AOT510": (f"{G}/test_codes_real.py::test_aot510_so_that_is_not_a_shared_library",),
    "AOT511": (f"{G}/test_codes_real.py::test_aot511_device_index_for_a_cpu_package",),
    "AOT512": (f"{G}/test_codes_real.py::test_aot512_cuda_package_on_cpu_only_torch",),
    "AOT513": (f"{G}/test_codes_real.py::test_aot513_no_compiled_code_for_the_model",),
    "AOT514": (f"{G}/test_codes_real.py::test_aot514_loading_crashes",),
    "AOT516": (f"{G}/test_codes_real.py::test_aot516_load_timeout",),
    "AOT517": (f"{G}/test_codes_real.py::test_aot517_exported_program_this_torch_cannot_load",),
    "AOT601": (f"{G}/test_codes_real.py::test_aot601_size_stride_guard",),
    "AOT602": (f"{REAL_STAGES}::test_out_of_range_index_names_the_cpp_kernel",),
    "AOT603": (f"{G}/test_codes_real.py::test_aot603_aot604_aot605_worker_dies_while_running",),
    "AOT604": (f"{G}/test_codes_real.py::test_aot603_aot604_aot605_worker_dies_while_running",
               f"{TRIAGE}::test_unchecked_indirect_load_segfault_is_named"),
    "AOT605": (f"{G}/test_codes_real.py::test_aot603_aot604_aot605_worker_dies_while_running",),
    "AOT606": (f"{G}/test_codes_real.py::test_aot606_run_timeout",),
    "AOT607": (f"{REAL_STAGES}::test_weights_on_disk_segfault_is_contained",),
    "AOT610": (f"{G}/test_codes_real.py::test_aot610_declared_minimum_refused_by_the_compiled_code",),
    "AOT611": (f"{G}/test_codes_real.py::test_aot611_over_max_accepted",),
    "AOT612": (f"{G}/test_codes_real.py::test_aot612_over_max_fails_inside_the_model",),
    "AOT701": (f"{REAL_STAGES}::test_accuracy_mismatch_between_ep_and_aoti",),
    "AOT702": (f"{G}/test_codes_real.py::test_aot702_nan_in_outputs_aoti_only",),
    "AOT703": (f"{G}/test_codes_real.py::test_aot703_output_structure",),
    "AOT704": (f"{G}/test_codes_real.py::test_aot704_exported_program_fails_on_the_inputs",),
    "AOT801": (f"{TRIAGE}::test_out_of_range_embedding_is_named_with_its_index_statistics",),
    "AOT803": (f"{TRIAGE}::test_out_of_range_embedding_is_named_with_its_index_statistics",),
    "AOT804": (f"{G}/test_codes_real.py::test_aot804_faulting_kernel_reads_nan",),
    "AOT805": (f"{G}/test_codes_real.py::test_aot805_a_crash_triage_cannot_explain",),
    "AOT806": (f"{G}/test_codes_real.py::test_aot806_triage_of_an_aoti_only_package",),
    "AOT807": (f"{TRIAGE}::test_the_minifier_writes_a_small_repro",),
}  # fmt: skip


@dataclass(frozen=True)
class Rare:
    """A code only a GPU or a rare host produces for real."""

    why: str
    gpu: tuple[str, ...]
    """gpu-marked tests that produce it for real where a GPU host can."""
    fakes: tuple[str, ...]
    """Tests with fake workers, replayed logs or fault injection (named as fakes)."""


RARE: dict[str, Rare] = {
    "AOT410": Rare(
        "a torch process loading an older libstdc++ than the compiler's: a conda/venv mix",
        (),
        ("tests/test_doctor.py::test_libstdcxx_older_than_the_compilers",),
    ),
    "AOT412": Rare(
        "a host on which every package crashes, even with the system libstdc++ preloaded",
        (),
        ("tests/test_doctor.py::test_model_crash_with_a_crashing_canary_blames_the_host",),
    ),
    "AOT515": Rare(
        "a loader that crashes unless libstdc++ is preloaded (the torch 2.11 H100 machine)",
        (f"{G}/test_codes_real.py::test_aot515_real_libstdcxx_mismatch_when_the_host_has_one",),
        ("tests/runner/test_stages.py::test_load_crash_fixed_by_system_libstdcxx",),
    ),
    "AOT608": Rare(
        "a CUDA kernel fault (device-side assert, illegal memory access)",
        (f"{G}/test_codes_real.py::test_aot608_cuda_device_side_assert",),
        ("tests/runner/test_stages.py::test_cuda_stop_and_teardown_crash_leave_eager_to_a_fresh_worker",),
    ),
    "AOT802": Rare(
        "a CUDA fault first reported by a later cuBLAS call (not seen on the H100/H200 runs)",
        ("tests/triage/test_triage_gpu.py::test_device_assert_names_the_embedding_kernel",),
        ("tests/triage/test_escalate_fake.py::test_misattributed_cublas_error_is_pinned_to_the_embedding_kernel",),
    ),
    "AOT808": Rare(
        "compute-sanitizer memcheck on a CUDA host (--sanitizer)",
        ("tests/triage/test_triage_gpu.py::test_illegal_memory_access_names_the_kernel",),
        ("tests/triage/test_escalate_fake.py::test_sanitizer_runs_when_asked_and_installed",),
    ),
}  # fmt: skip


@cache
def _module(path: str) -> tuple[str, ast.Module]:
    text = (REPO / path).read_text()
    return text, ast.parse(text)


def _function(ref: str) -> tuple[str, str, ast.FunctionDef]:
    path, _, name = ref.partition("::")
    assert (REPO / path).is_file(), f"{ref}: no file {path}"
    text, tree = _module(path)
    fn = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name), None)
    assert fn is not None, f"{ref}: no test function {name} in {path}"
    source = "\n".join(ast.get_source_segment(text, d) or "" for d in fn.decorator_list)
    # a parametrize over a module-level table: the table is part of the test
    used = {n.id for d in fn.decorator_list for n in ast.walk(d) if isinstance(n, ast.Name)}
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id in used for t in node.targets
        ):
            source += "\n" + (ast.get_source_segment(text, node) or "")
    return text, source + "\n" + (ast.get_source_segment(text, fn) or ""), fn


def _names_code(ref: str, code: str) -> None:
    _, source, _ = _function(ref)
    assert code in source, f"{ref} is registered for {code} but never names it"


def _is_gpu(ref: str) -> bool:
    text, source, _ = _function(ref)
    marks = [
        ast.get_source_segment(text, n) or ""
        for n in _module(ref.partition("::")[0])[1].body
        if isinstance(n, ast.Assign)
        and any(getattr(t, "id", "") == "pytestmark" for t in n.targets)
    ]
    return "mark.gpu" in source or any("mark.gpu" in m for m in marks)


def _is_fake(ref: str) -> bool:
    text, source, fn = _function(ref)
    doc = (ast.get_docstring(_module(ref.partition("::")[0])[1]) or "").lower()
    return "fake" in fn.name or "fake" in doc or "fake" in source.lower()


def test_every_code_has_a_real_test_or_says_why_not() -> None:
    missing = [c.code for c in codes.ALL_CODES if c.code not in REAL and c.code not in RARE]
    assert not missing, (
        f"{', '.join(missing)}: no registered test emits it for real. Add a test that does (a "
        "real package, real inputs, the real worker) and list it in REAL in "
        "tests/gate/test_codes_registry.py; for a code only a GPU or a rare host produces, list "
        "a gpu-marked real test and a fake test in RARE, with the reason."
    )


def test_the_registry_holds_only_codes_of_the_table() -> None:
    table = {c.code for c in codes.ALL_CODES}
    assert set(REAL) <= table and set(RARE) <= table
    assert not set(REAL) & set(RARE), "a code is either real-tested or rare, not both"


def test_every_registered_real_test_exists_names_its_code_and_is_not_a_fake() -> None:
    for code, refs in REAL.items():
        assert refs, code
        for ref in refs:
            _names_code(ref, code)
            _, source, _ = _function(ref)
            assert "worker_command" not in source and "FAKE" not in source, (
                f"{ref} is registered as a real test of {code} but runs a fake worker"
            )


def test_every_rare_code_has_its_fake_test_and_gpu_tests_are_marked() -> None:
    for code, rare in RARE.items():
        assert rare.why and rare.fakes, code
        for ref in rare.fakes:
            _names_code(ref, code)
            assert _is_fake(ref), f"{ref} stands in for {code} but is not named as a fake"
        for ref in rare.gpu:
            _names_code(ref, code)
            assert _is_gpu(ref), f"{ref} is the GPU test of {code} but is not marked gpu"
