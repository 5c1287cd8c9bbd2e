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

from aotipre.findings import codes

TESTS = Path(__file__).resolve().parents[1]
REPO = TESTS.parent

G = "tests/gate"
FIX = "tests/checks/test_static_fixtures.py"
ARCH = "tests/pt2/test_archive.py"
T211 = "tests/pt2/test_torch211_archives.py"
REAL_STAGES = "tests/runner/test_stages_real.py"
TRIAGE = "tests/triage/test_triage_real.py"
RS = "tests/real/test_real_static.py"
BIN = "tests/binaries/test_real_packages.py"
TGT = "tests/binaries/test_targets.py"
CPP = "tests/cpp/test_stages_real.py"
CPPC = "tests/cpp/test_codes_cpp_real.py"
PERF = "tests/gate/test_codes_perf_real.py"
LAYOUTS = "tests/runner/test_sample_layout_real.py"

REAL: dict[str, tuple[str, ...]] = {
    "AOT790": ("tests/diff/test_diff_real.py::test_check_against_compares_outputs_on_the_same_inputs",),
    "AOT095": ("tests/diff/test_diff_real.py::test_losing_the_exported_program_is_breaking_and_names_are_not_noise",),
    "AOT096": ("tests/diff/test_diff_real.py::test_each_rule_verdict_is_what_plain_torch_does",),
    "AOT190": ("tests/diff/test_diff_real.py::test_each_rule_verdict_is_what_plain_torch_does",),
    "AOT191": ("tests/diff/test_diff_real.py::test_each_rule_verdict_is_what_plain_torch_does",),
    "AOT290": ("tests/diff/test_diff_real.py::test_each_rule_verdict_is_what_plain_torch_does",),
    "AOT390": ("tests/diff/test_diff_real.py::test_each_rule_verdict_is_what_plain_torch_does",),
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
    "AOT018": ("tests/checks/test_contract_conflict_real.py::test_the_deployed_code_decides_the_inputs",),
    "AOT020": (f"{FIX}::test_bad_inputs_files",),
    "AOT021": (f"{FIX}::test_bad_inputs_files",),
    "AOT022": (f"{FIX}::test_no_inputs_is_info_not_pass_of_inputs",),
    "AOT101": (f"{FIX}::test_missing_argument",),
    "AOT102": (f"{G}/test_codes_static_real.py::test_aot102_missing_kwarg",),
    "AOT103": (f"{G}/test_codes_static_real.py::test_aot103_unexpected_kwarg",),
    "AOT104": (f"{G}/test_codes_static_real.py::test_aot104_nested_input_structure",),
    "AOT105": (f"{G}/test_codes_static_real.py::test_aot105_constant_differs_from_export",),
    "AOT106": (f"{G}/test_codes_static_real.py::test_aot106_tensor_where_a_scalar_was_exported",),
    "AOT110": ("tests/checks/test_scalar_real.py::test_a_reference_run_that_breaks_a_guard_is_a_finding_about_the_inputs",
               f"{G}/test_codes_real.py::test_aot110_the_reference_refuses_inputs_that_break_an_export_guard"),
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
               f"{G}/test_boundaries_run.py::test_size_one_dim_with_an_unusual_stride",
               f"{G}/test_boundaries_run.py::test_sliced_input_reads_wrong_values_unless_refused",
               f"{LAYOUTS}::test_a_deployment_that_checks_inputs_refuses_the_layout",
               f"{LAYOUTS}::test_no_probe_still_runs_the_sample_as_given"),
    "AOT401": (f"{T211}::test_cuda_package_on_a_cpu_host",),
    "AOT402": (f"{T211}::test_cuda_target_compute_capability",),
    "AOT403": (f"{G}/test_static_package.py::test_cpu_package_on_hosts",),
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
    "AOT540": (f"{G}/test_compile_classes_real.py::test_aot540_a_lowering_crash_names_the_op_and_the_model_line",),
    "AOT541": (f"{G}/test_compile_classes_real.py::test_aot541_a_missing_lowering_is_proven_to_compile_with_implicit_fallbacks",),
    "AOT542": (f"{G}/test_compile_classes_real.py::test_aot542_generated_cpp_error_names_the_generated_line_and_the_model_line",),
    "AOT543": (f"{G}/test_compile_classes_real.py::test_aot543_cpp_codegen_turned_off_is_proven_to_compile_without_that_config",),
    "AOT545": (f"{G}/test_compile_classes_real.py::test_aot545_a_data_dependent_guard_while_compiling_names_the_size_and_the_node",),
    "AOT546": (f"{G}/test_compile_classes_real.py::test_aot546_no_working_cxx_is_the_toolchain",),
    "AOT547": (f"{G}/test_compile_classes_real.py::test_aot547_a_dtype_the_device_lacks_names_the_op_the_dtype_and_the_model_line",),
    "AOT510": (f"{G}/test_codes_real.py::test_aot510_so_that_is_not_a_shared_library",),
    "AOT512": (f"{G}/test_codes_real.py::test_aot512_a_cuda_package_and_a_cpu_only_torch_on_a_gpu_host",),
    "AOT513": (f"{G}/test_codes_real.py::test_aot513_no_compiled_code_for_the_model",),
    "AOT514": (f"{G}/test_codes_real.py::test_aot514_loading_crashes",),
    "AOT516": (f"{G}/test_codes_real.py::test_aot516_load_timeout",),
    "AOT517": (f"{G}/test_codes_real.py::test_aot517_exported_program_this_torch_cannot_load",),
    "AOT601": (f"{G}/test_codes_real.py::test_aot601_size_stride_guard",
               f"{G}/test_boundaries_run.py::test_derived_dims_at_their_edges"),
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
    "AOT613": (f"{REAL_STAGES}::test_healthy_aoti_package_runs_in_one_worker",),
    "AOT701": (f"{REAL_STAGES}::test_accuracy_mismatch_between_ep_and_aoti",),
    "AOT702": (f"{G}/test_codes_real.py::test_aot702_nan_in_outputs_aoti_only",),
    "AOT703": (f"{G}/test_codes_real.py::test_aot703_output_structure",),
    "AOT704": ("tests/checks/test_contract_conflict_real.py::test_the_float32_program_refuses_the_inputs_the_code_runs",),
    "AOT708": ("tests/triage/test_accuracy_real.py::test_a_bf16_chain_is_localized_and_proven_precision_cast_elision",),
    "AOT709": ("tests/triage/test_accuracy_real.py::test_a_bf16_chain_is_localized_and_proven_precision_cast_elision",
               "tests/triage/test_accuracy_real.py::test_an_rng_op_is_proven_by_fallback_random"),
    "AOT710": ("tests/triage/test_accuracy_real.py::test_an_injected_miscompile_is_a_compiler_bug_candidate_with_no_cause",),
    "AOT711": ("tests/triage/test_accuracy_real.py::test_an_aoti_only_package_says_what_localizing_needs",),
    "AOT801": (f"{TRIAGE}::test_out_of_range_embedding_is_named_with_its_index_statistics",),
    "AOT803": (f"{TRIAGE}::test_out_of_range_embedding_is_named_with_its_index_statistics",
               f"{TRIAGE}::test_out_of_range_id_of_an_aoti_only_package_is_named_with_its_input"),
    "AOT804": (f"{G}/test_codes_real.py::test_aot804_faulting_kernel_reads_nan",),
    "AOT805": (f"{G}/test_codes_real.py::test_aot805_a_crash_triage_cannot_explain",),
    "AOT806": (f"{G}/test_codes_real.py::test_aot806_triage_of_an_aoti_only_package",),
    "AOT807": (f"{TRIAGE}::test_the_minifier_writes_a_small_repro",
               "tests/runner/test_compile_minify.py::test_aot807_a_failed_compile_is_minified_and_its_repro_fails_the_same_way"),
    "AOT015": (f"{RS}::test_exported_program_archive",),
    "AOT016": (f"{RS}::test_multi_model_package",),
    "AOT017": ("tests/checks/test_contract.py::test_multi_model_with_a_default_model",),
    "AOT030": (f"{G}/test_codes_static_real.py::test_aot030_a_member_compressed_with_a_method_torch_cannot_read",),
    "AOT031": ("tests/pt2/test_blob_and_cpp_only.py::test_aot031_binary_blob_weights_and_an_empty_kernel_metadata",),
    "AOT032": ("tests/pt2/test_blob_and_cpp_only.py::test_aot032_cpp_only_package_compiles_at_every_load",),
    "AOT040": ("tests/serving/test_triton_real.py::test_aot040_libtorch_platform",),
    "AOT041": ("tests/serving/test_triton_real.py::test_aot041_repository_layout",),
    "AOT042": ("tests/serving/test_triton_real.py::test_aot042_a_package_whose_model_is_not_named_model",),
    "AOT043": ("tests/serving/test_triton_real.py::test_aot043_aot044_two_inputs_where_the_package_takes_three",),
    "AOT044": ("tests/serving/test_triton_real.py::test_aot043_aot044_two_inputs_where_the_package_takes_three",),
    "AOT045": ("tests/serving/test_triton_real.py::test_aot045_fp16_where_the_package_takes_float32",),
    "AOT046": ("tests/serving/test_triton_real.py::test_aot046_static_dims_that_differ",),
    "AOT047": ("tests/serving/test_triton_real.py::test_aot047_max_batch_size_above_the_exported_max",),
    "AOT048": ("tests/serving/test_triton_real.py::test_aot048_kind_gpu_for_a_cpu_package",),
    "AOT049": ("tests/serving/test_triton_real.py::test_aot049_sequence_batching",),
    "AOT050": (f"{TGT}::test_truncated_so_member_is_one_finding",
               f"{G}/test_codes_static_real.py::test_aot050_aoti_code_without_its_shared_object"),
    "AOT051": (f"{BIN}::test_cpu_packages_built_with_the_public_api",),
    "AOT052": (f"{BIN}::test_cpu_packages_built_with_the_public_api",),
    "AOT060": ("tests/runner/test_weights_real.py::test_a_missing_tensor_is_refused_by_torch_and_named",),
    "AOT061": ("tests/runner/test_weights_real.py::test_a_renamed_tensor_is_refused_and_the_closest_name_suggested",),
    "AOT062": ("tests/runner/test_weights_real.py::test_a_transposed_weight_runs_silently_in_torch_and_is_named",),
    "AOT063": ("tests/runner/test_weights_real.py::test_a_wrong_dtype_runs_silently_in_torch_and_is_caught",),
    "AOT064": ("tests/inputs/test_weights.py::test_a_tensor_on_another_device_is_named",),
    "AOT065": ("tests/runner/test_weights_real.py::test_a_swapped_folded_constant_is_silently_ignored",),
    "AOT066": ("tests/runner/test_weights_real.py::test_inlined_small_tensors_are_not_swappable",),
    "AOT067": ("tests/runner/test_weights_real.py::test_a_missing_tensor_is_refused_by_torch_and_named",),
    "AOT068": ("tests/runner/test_weights_real.py::test_a_wrong_dtype_runs_silently_in_torch_and_is_caught",),
    "AOT069": ("tests/runner/test_weights_real.py::test_a_swapped_folded_constant_is_silently_ignored",),
    "AOT070": ("tests/test_new_user.py::test_the_cli_reports_the_mismatch",),
    "AOT080": ("tests/pt2/test_layouts_2_13_to_2_15.py::test_opaque_objects_are_flagged_and_never_unpickled",),
    "AOT081": ("tests/hardening/test_pickle_members.py::test_a_pickled_weight_is_an_error_and_never_unpickled",),
    "AOT082": ("tests/serving/test_triton_real.py::test_aot047_max_batch_size_above_the_exported_max",),
    "AOT083": ("tests/serving/test_triton_real.py::test_aot047_max_batch_size_above_the_exported_max",),
    "AOT107": (f"{RS}::test_exported_program_archive",),
    "AOT108": (f"{RS}::test_aoti_only_specialized_scalars_are_named_as_ignored",),
    "AOT109": (f"{RS}::test_state_dict_as_inputs_is_one_clear_finding",),
    "AOT120": (f"{CPP}::test_cpp_op_library_missing_then_given",),
    "AOT121": (f"{CPP}::test_cpp_op_library_missing_then_given",),
    "AOT122": (f"{CPP}::test_python_op_exported_program",),
    "AOT123": (f"{CPP}::test_a_failing_import_is_its_own_finding",),
    "AOT308": (f"{RS}::test_token_id_past_the_vocabulary_is_found_before_running",),
    "AOT309": (
        "tests/runner/test_contract_items_real.py::"
        "test_an_unchecked_data_dependent_size_is_flagged_where_torch_runs_it",
    ),
    "AOT420": (f"{G}/test_codes_real.py::test_aot420_a_compile_cache_that_is_a_file",),
    "AOT440": ("tests/binaries/test_torch_bugs_real.py::test_every_model_constructed_is_reported_where_torch_does_it",),
    "AOT441": ("tests/binaries/test_torch_bugs_real.py::test_every_model_constructed_is_reported_where_torch_does_it",),
    "AOT442": ("tests/binaries/test_torch_bugs_real.py::test_every_model_constructed_is_reported_where_torch_does_it",),
    "AOT430": (f"{BIN}::test_cpu_packages_built_with_the_public_api",),
    "AOT431": (f"{TGT}::test_glibc_and_libstdcxx",),
    "AOT432": (f"{TGT}::test_glibc_and_libstdcxx",),
    "AOT433": (f"{TGT}::test_gpu_fleet",),
    "AOT434": (f"{TGT}::test_gpu_fleet",),
    "AOT435": (f"{TGT}::test_gpu_fleet",),
    "AOT436": (f"{BIN}::test_isa_gap_on_a_real_package",),
    "AOT437": (f"{BIN}::test_isa_gap_on_a_real_package",),
    "AOT439": (f"{TGT}::test_213_package_loads_on_older_and_newer_torch",),
    "AOT521": ("tests/cpp/test_harness_real.py::test_python_custom_op_runs_in_python_only",),
    "AOT523": ("tests/test_doctor_real.py::test_a_canary_that_crashes_in_parse_device_str_is_named",),
    "AOT528": (f"{CPP}::test_plain_package_under_the_cpp_loader",),
    "AOT645": (f"{G}/test_codes_real.py::test_aot645_aot646_aot647_aot654_perf_budgets_and_an_unmeasurable_baseline",),
    "AOT646": (f"{G}/test_codes_real.py::test_aot645_aot646_aot647_aot654_perf_budgets_and_an_unmeasurable_baseline",),
    "AOT647": (f"{G}/test_codes_real.py::test_aot645_aot646_aot647_aot654_perf_budgets_and_an_unmeasurable_baseline",),
    "AOT654": (f"{G}/test_codes_real.py::test_aot645_aot646_aot647_aot654_perf_budgets_and_an_unmeasurable_baseline",
               f"{G}/test_codes_real.py::test_aot654_a_baseline_that_cannot_run_these_inputs"),
    "AOT531": ("tests/runner/test_load_proof_real.py::test_a_load_through_torchs_fallback_is_a_warning_not_an_error",
               "tests/runner/test_load_proof_real.py::test_the_worker_reports_the_fallback_it_saw"),
    "AOT644": ("tests/pt2/test_blob_and_cpp_only.py::test_aot644_the_perf_stage_books_the_compile_at_load",),
    "AOT550": ("tests/runner/test_c_shims.py::test_aot550_a_module_calling_linalg_det_is_flagged_before_and_by_the_compile",),
    "AOT555": ("tests/test_api_export_failures.py::test_aot555_a_branch_on_a_value_is_data_dependent",
               "tests/test_api_export_failures.py::test_aot555_a_branch_on_a_data_dependent_size_under_strict_export"),
    "AOT556": ("tests/test_api_export_failures.py::test_aot556_a_graph_break_under_strict_export",),
    "AOT557": ("tests/test_api_export_failures.py::test_aot557_any_other_export_failure_quotes_torch",),
    "AOT615": ("tests/runner/test_data_bound_real.py::test_a_value_past_the_models_bound_is_named_not_triaged",),
    "AOT706": ("tests/runner/test_state_real.py::test_a_dropped_state_update_fails_naming_the_buffer_and_the_call",),
    "AOT707": ("tests/runner/test_state_real.py::test_without_a_reference_the_calls_are_reported_not_judged",),
    "AOT705": ("tests/real/test_real_dynamic.py::test_nan_and_masked_inf_against_the_exported_program",),
    "AOT809": ("tests/runner/test_python_side_failure.py::test_check_says_which_library_and_does_not_triage",),
    "AOT053": ("tests/pt2/test_torch211_archives.py::test_real_gpu_code_of_a_multi_arch_package",),
    "AOT520": (f"{CPPC}::test_aot520_the_harness_cannot_be_built",),
    "AOT522": (f"{CPPC}::test_aot522_op_raises_where_the_python_package_did_not_run",),
    "AOT524": (f"{CPPC}::test_aot524_op_waits_for_an_init_that_never_comes",),
    "AOT525": (f"{CPPC}::test_aot525_op_library_initialized_only_by_its_python_package",),
    "AOT526": (f"{CPPC}::test_aot526_aot527_op_with_a_shared_workspace_run_at_once",),
    "AOT527": (f"{CPPC}::test_aot526_aot527_op_with_a_shared_workspace_run_at_once",),
    "AOT640": (f"{PERF}::test_aot640_the_isa_probe_compiling_into_an_empty_inductor_cache",),
    "AOT642": (f"{PERF}::test_aot642_a_custom_op_that_keeps_host_memory_on_every_call",),
    "AOT650": (f"{PERF}::test_aot650_aot651_aot652_a_heavy_model_against_a_light_baseline",),
    "AOT651": (f"{PERF}::test_aot650_aot651_aot652_a_heavy_model_against_a_light_baseline",),
    "AOT652": (f"{PERF}::test_aot650_aot651_aot652_a_heavy_model_against_a_light_baseline",),
    "AOT901": ("tests/scale/test_ray.py::test_a_ray_worker_killed_once_is_retried_and_reported_flaky_aot901",),
    "AOT902": ("tests/scale/test_ray.py::test_a_ray_worker_killed_twice_is_a_crash_never_a_pass_aot902",),
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
    "AOT490": Rare(
        "a changed deployment requirement (GLIBCXX, CPU ISA, SASS/PTX, libtorch, device) needs "
        "the two packages built on different hosts, compilers, torch versions or GPUs; one host "
        "here builds both; held on reader data for each rule",
        (),
        ("tests/diff/test_rules.py::test_deployment_rules_from_the_binaries_fake",),
    ),
    "AOT544": Rare(
        "Triton compiles and autotunes only on a GPU (CUDA/ROCm/XPU); held on the message texts "
        "of torch's triton_heuristics/select_algorithm and of Triton",
        (),
        ("tests/runner/test_compile_classes.py::test_each_rare_class_gets_its_code_fake",),
    ),
    "AOT443": Rare(
        "a package of 1 GiB or 1,000 members (too large to build in the suite); the bug itself "
        "is read from the real installed torch",
        (),
        (
            "tests/binaries/test_torch_bugs_real.py::"
            "test_the_metadata_read_twice_is_reported_for_large_packages_only_fake",
        ),
    ),
    "AOT655": Rare(
        "a host whose noise moves the two sides' medians apart while their intervals overlap: "
        "no host is that noisy on demand (a spinning process on a core is not enough, "
        "tests/runner/test_stage_perf.py), so the decision is held on fixed timing series",
        (),
        ("tests/runner/test_perf.py::test_a_burst_on_the_host_in_one_sides_calls_is_inconclusive_fake",),
    ),
    "AOT616": Rare(
        "a compiled model that computes wrong on, or crashes on, an input one element into its "
        "storage: none known (CPU code reads it as it is; CUDA code of torch 2.11-2.15 copies "
        "it, and 2.15's alignment_asserts_inputs, which refuses it, needs a 2.15 CUDA build)",
        (),
        ("tests/runner/test_stages.py::test_an_offset_input_that_fails_or_differs_is_aot616_fake",),
    ),
    "AOT532": Rare(
        "a loader that returns a model without mapping the package's .so (none known in torch "
        "2.11-2.15; the check is the proof that the package's code runs)",
        (),
        ("tests/runner/test_stages.py::test_a_load_that_maps_none_of_the_packages_code_is_aot532_fake",),
    ),
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
    "AOT614": Rare(
        "a non-contiguous input the compiled runtime check does not refuse: every package tried "
        "here (torch 2.11-2.14, CPU and CUDA) refuses one",
        (),
        ("tests/runner/test_stages.py::test_layout_not_refused_by_the_check_is_an_error_fake",),
    ),
    "AOT641": Rare(
        "a load whose extraction takes >= 0.5 s: a package of several GB or a slow disk (the "
        "2-core VM writes about 2 GB/s: a 1 GB package crossed it on 1 run of 5, not robustly)",
        (),
        ("tests/runner/test_perf.py::test_advice_on_the_probe_and_the_extraction",),
    ),
    "AOT643": Rare(
        "GPU memory (the CUDA caching allocator) growing call after call: needs a CUDA host",
        (),
        ("tests/runner/test_perf.py::test_leaks_need_steady_growth",),
    ),
    "AOT648": Rare(
        "a GPU memory budget: the driver's view of a CUDA device",
        (f"{PERF}::test_aot648_aot653_gpu_memory_over_budget_and_against_a_light_baseline",),
        ("tests/runner/test_perf.py::test_gpu_budget_and_gpu_regression_on_injected_numbers_fake",),
    ),
    "AOT653": Rare(
        "a GPU memory regression against --against: the driver's view of a CUDA device",
        (f"{PERF}::test_aot648_aot653_gpu_memory_over_budget_and_against_a_light_baseline",),
        ("tests/runner/test_perf.py::test_gpu_budget_and_gpu_regression_on_injected_numbers_fake",),
    ),
    "AOT511": Rare(
        "the loader refusing the device: on a CPU host the device gate (AOT406, AOT401, AOT512) "
        "answers first on every real path; a GPU index the host lacks (--device cuda:N on N "
        "GPUs) reaches the loader, which refuses it (the H200, torch 2.11)",
        (f"{G}/test_codes_real.py::test_aot511_a_device_index_this_host_does_not_have",),
        ("tests/runner/test_stages.py::test_a_gpu_index_the_host_lacks_is_aot511_fake",),
    ),
    "AOT529": Rare(
        "a package that leaves cuda:1 when loaded there: needs two GPUs, and torch 2.11-2.14 load "
        "and run on cuda:1 correctly (the two-GPU test in tests/cpp/test_gpu.py shows it where "
        "such a host is lent)",
        (),
        ("tests/runner/test_stages.py::test_device_index_outputs_on_another_gpu_are_aot529_fake",),
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


PENDING: dict[str, tuple[str, tuple[str, ...]]] = {
    # Codes with no real-path test yet: each names why and the fake/injected test that holds its
    # logic meanwhile. Listed here so that the gap is visible in one place; a code may leave
    # this table only for REAL or RARE.
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
    missing = [
        c.code
        for c in codes.ALL_CODES
        if c.code not in REAL and c.code not in RARE and c.code not in PENDING
    ]
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
    assert set(PENDING) <= table
    assert not set(PENDING) & (set(REAL) | set(RARE)), "a pending code left: drop it from PENDING"


def test_every_pending_code_says_why_and_its_stand_ins_name_it() -> None:
    for code, (why, stand_ins) in PENDING.items():
        assert why, code
        for ref in stand_ins:
            _names_code(ref, code)


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
