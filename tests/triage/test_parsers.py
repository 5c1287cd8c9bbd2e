"""Crash-triage parsers on captured (CPU, torch 2.13) and canned (CUDA) printer and error logs."""

from __future__ import annotations

import math
from pathlib import Path

from aotipre.triage import parsers
from tests.triage import cuda_logs as C

DATA = Path(__file__).parent / "data"
CPU_KERNEL = "cpp_fused_embedding_sum_0"
CPU_SOURCE = """\
extern "C"  void  cpp_fused_embedding_sum_0(const int64_t* in_ptr0,
                       const float* in_ptr1,
                       float* out_ptr0,
                       const int64_t ks0)
{
    {
        for(int64_t x0=static_cast<int64_t>(0L); x0<static_cast<int64_t>(ks0); x0+=static_cast<int64_t>(1L))
        {
            auto tmp0 = in_ptr0[static_cast<int64_t>(x0)];
            auto tmp1 = tmp0;
            auto tmp2 = c10::convert<int64_t>(tmp1);
            AOTI_TORCH_CHECK((0 <= tmp2) & (tmp2 < 500L), "index out of bounds: 0 <= tmp2 < 500L");
            auto tmp4 = at::vec::Vectorized<float>::loadu(in_ptr1 + static_cast<int64_t>(8L*tmp0), static_cast<int64_t>(8L));
        }
    }
}

// Compile cmd
"""
CPU_CALL = (
    "    cpp_fused_embedding_sum_0((const int64_t*)(arg1_1.data_ptr()), (const float*)"
    "(embed_weight.data_ptr()), (float*)(buf0.data_ptr()), s23);\n"
)


# -- the level-3 printer


def test_faulting_launch_is_the_last_before_launch_without_its_after_launch() -> None:
    log = (
        "[ before_launch: aoti_torch_cpu_addmm_out ]\n[ after_launch: aoti_torch_cpu_addmm_out ]\n"
        "[ before_launch: cpp_fused_relu_view_0 ]\nUnknown exception occurred.\n"
    )
    fault = parsers.faulting_launch(parsers.launches(log.splitlines()))
    assert fault is not None
    assert fault.kernel == "cpp_fused_relu_view_0"
    assert fault.previous == "aoti_torch_cpu_addmm_out"
    assert fault.tail == ("aoti_torch_cpu_addmm_out", "cpp_fused_relu_view_0")
    assert "[ after_launch: aoti_torch_cpu_addmm_out ]" in fault.evidence


def test_every_launch_finished_means_no_fault() -> None:
    events = parsers.launches(["[ before_launch: k0 ]", "[ after_launch: k0 ]"])
    assert parsers.faulting_launch(events) is None


def test_a_kernel_launched_twice_faults_on_its_second_launch() -> None:
    events = [("before_launch", "k"), ("after_launch", "k"), ("before_launch", "j")]
    events += [("after_launch", "j"), ("before_launch", "k")]
    fault = parsers.faulting_launch(events)
    assert fault is not None and fault.kernel == "k" and fault.previous == "j"


# -- the level-2 printer


def test_cpu_statistics_lines_of_torch_2_13() -> None:
    stats = parsers.parse_tensor_blocks((DATA / "cpu_printer2.log").read_text().splitlines())
    assert [(s.when, s.kernel, s.name) for s in stats] == [
        ("model_input", None, "arg1_1"),
        ("before_launch", CPU_KERNEL, "arg1_1"),
        ("before_launch", CPU_KERNEL, "buf0"),
    ]
    ids = stats[1]
    assert (ids.dtype, ids.shape, ids.stride, ids.device) == ("int64", (2, 5), (5, 1), "cpu")
    assert (ids.min, ids.max, ids.mean, ids.numel) == (124, 600, 341.6, 10)
    assert not ids.has_nonfinite
    assert ids.describe() == "arg1_1: int64[2, 5] on cpu, min 124, max 600, mean 341.6"


def test_value_only_blocks_compute_their_statistics() -> None:
    stats = parsers.parse_tensor_blocks(C.PRINTER2_STDOUT.splitlines(), [C.KERNEL])
    by = {(s.when, s.name): s for s in stats}
    ids = by[("before_launch", "arg3_1")]
    assert (ids.dtype, ids.device, ids.shape) == ("int64", "cuda", (2, 5))
    assert (ids.min, ids.max, ids.numel, ids.nan) == (124, 600, 10, 0)
    assert math.isclose(ids.mean or 0, 341.6)
    buf = by[("before_launch", "buf0")]
    assert buf.nan == 1 and buf.has_nonfinite and buf.max == 0.5
    scalar = by[("before_launch", f"{C.KERNEL}_ynumel")]
    assert scalar.scalar == 10


def test_a_filter_keeps_model_inputs_and_the_wanted_kernels() -> None:
    stats = parsers.parse_tensor_blocks(C.PRINTER2_STDOUT.splitlines(), ["other_kernel"])
    assert {s.when for s in stats} == {"model_input"}


def test_scaled_float_prints_are_unscaled() -> None:
    lines = [
        "[  before_launch - k - buf1  ]:",
        " 1.0e+03 *",
        "  1.5000  2.0000",
        "[ CPUFloatType{2} ]",
    ]
    (stats,) = parsers.parse_tensor_blocks(lines)
    assert (stats.min, stats.max) == (1500.0, 2000.0)


# -- errors


def test_first_error_prefers_the_message_over_assertions_and_generic_lines() -> None:
    assert parsers.first_error(C.GENERIC, C.PLAIN_LOG) == (
        "Error: CUDA error: CUBLAS_STATUS_INTERNAL_ERROR when calling `cublasCreate(handle)`"
    )
    assert parsers.first_error(
        "index out of bounds: 0 <= tmp2 < 500L\nException raised from x"
    ) == ("index out of bounds: 0 <= tmp2 < 500L")
    assert parsers.first_error("Fatal Python error: Segmentation fault") == (
        "Fatal Python error: Segmentation fault"
    )
    assert parsers.first_error("all good") is None


def test_blamed_op_of_a_misattributed_cublas_error() -> None:
    blamed = parsers.blamed_op(C.GENERIC + "\n" + C.PLAIN_LOG)
    assert blamed is not None
    assert blamed.name == "aoti_torch_cuda_mm_out"
    assert blamed.later_symptom
    assert "CUBLAS_STATUS_INTERNAL_ERROR" in blamed.line


def test_blamed_op_of_a_cpu_kernel_check() -> None:
    text = (DATA / "cpu_printer2.log").read_text()
    blamed = parsers.blamed_op(text)
    assert blamed is not None and blamed.name == CPU_KERNEL and not blamed.later_symptom


def test_device_assert_kernels_skip_unknown_names() -> None:
    assert parsers.device_assert_kernels(C.ASSERTS) == []
    named = C.ASSERTS.replace("unknown", C.KERNEL)
    assert parsers.device_assert_kernels(named) == [C.KERNEL]


def test_index_bounds_in_messages_and_sources() -> None:
    (b,) = parsers.index_bounds(C.ASSERTS)
    assert (b.variable, b.upper) == ("tmp4", 500)
    (c,) = parsers.index_bounds(CPU_SOURCE)
    assert (c.variable, c.upper, c.line) == ("tmp2", 500, "index out of bounds: 0 <= tmp2 < 500L")


def test_sanitizer_records() -> None:
    text = (
        "========= COMPUTE-SANITIZER\n"
        "========= Invalid __global__ read of size 4 bytes\n"
        f"=========     at {C.KERNEL}+0x1c0 in /tmp/x/cq.py:24\n"
        "=========     by thread (96,0,0) in block (0,0,0)\n"
        "=========     Address 0x7f0000004b00 is out of bounds\n"
        "========= ERROR SUMMARY: 1 error\n"
    )
    (hit,) = parsers.sanitizer_hits(text)
    assert hit.what == "Invalid __global__ read of size 4 bytes"
    assert hit.kernel == C.KERNEL
    assert "Address 0x7f0000004b00 is out of bounds" in " ".join(hit.lines)


# -- generated code


def test_cpp_kernel_source_signature_and_index_pointer() -> None:
    src = parsers.kernel_source(CPU_SOURCE, CPU_KERNEL)
    assert src is not None
    assert src.startswith('extern "C"  void  cpp_fused_embedding_sum_0(')
    assert src.endswith("}") and "Compile cmd" not in src
    assert parsers.kernel_params(src) == ["in_ptr0", "in_ptr1", "out_ptr0", "ks0"]
    assert parsers.index_pointer(src, "tmp2") == "in_ptr0"
    assert parsers.kernel_call_args(CPU_CALL, CPU_KERNEL) == [
        "arg1_1",
        "embed_weight",
        "buf0",
        "s23",
    ]


def test_triton_kernel_source_from_a_cuda_wrapper() -> None:
    src = parsers.kernel_source(C.WRAPPER_CPP, C.KERNEL)
    assert src is not None
    assert src.startswith("@triton_heuristics.pointwise(")
    assert f"def {C.KERNEL}(in_ptr0" in src
    assert src.rstrip().endswith("tl.store(out_ptr0 + (x1 + 8*y0), tmp8, xmask & ymask)")
    assert parsers.kernel_params(src)[:4] == ["in_ptr0", "in_ptr1", "in_ptr2", "out_ptr0"]
    assert parsers.index_pointer(src, "tmp4") == "in_ptr0"


def test_triton_kernel_source_from_a_py_file() -> None:
    py = "import triton\n\n@triton.jit\ndef triton_poi_k(in_ptr0, xnumel):\n    x = 1\n    y = 2\n\n\ndef other():\n    pass\n"
    assert parsers.kernel_source(py, "triton_poi_k") == (
        "@triton.jit\ndef triton_poi_k(in_ptr0, xnumel):\n    x = 1\n    y = 2"
    )


def test_call_args_order_and_source_node_comment_of_a_cuda_wrapper() -> None:
    assert parsers.kernel_call_args(C.WRAPPER_CPP, C.KERNEL)[:4] == [
        "arg3_1",
        "embed_weight",
        "arg4_1",
        "buf0",
    ]
    assert parsers.kernel_call_order(C.WRAPPER_CPP) == [C.KERNEL, C.NEXT, "aoti_torch_cuda_mm_out"]
    nodes, aten = parsers.source_node_comment(C.WRAPPER_CPP, C.KERNEL) or ([], [])
    assert nodes == ["embedding", "unsqueeze", "mul"]
    assert aten == ["aten.embedding", "aten.unsqueeze", "aten.mul"]


def test_nodes_by_kernel_name_and_their_source_lines() -> None:
    graph = {
        "graph_module": {
            "graph": {
                "nodes": [
                    {
                        "target": "torch.ops.aten.embedding.default",
                        "outputs": [{"as_tensor": {"name": "embedding"}}],
                        "metadata": {
                            "stack_trace": 'File "/src/models.py", line 125, in forward\n'
                            "    return self.embed(ids).sum(dim=-1)\n"
                            '  File "/venv/site-packages/torch/nn/modules/sparse.py", line 189, '
                            "in forward\n    return F.embedding(",
                        },
                    },
                    {
                        "target": "torch.ops.aten.sum.dim_IntList",
                        "outputs": [{"as_tensor": {"name": "sum_1"}}],
                        "metadata": {},
                    },
                    {
                        "target": "torch.ops.aten.mul.Tensor",
                        "outputs": [{"as_tensor": {"name": "mul"}}],
                        "metadata": {},
                    },
                ]
            }
        }
    }
    nodes = parsers.fx_nodes(graph)
    picked, how = parsers.match_nodes(CPU_KERNEL, nodes)
    assert [n.name for n in picked] == ["embedding", "sum_1"]
    assert "kernel's name" in how
    assert picked[0].source_line() == (
        "/src/models.py:125 in forward: return self.embed(ids).sum(dim=-1)"
    )
    named, how = parsers.match_nodes(CPU_KERNEL, nodes, ["mul"])
    assert [n.name for n in named] == ["mul"] and "comment" in how


def test_sanitizer_hits_in_a_real_memcheck_log() -> None:
    # compute-sanitizer memcheck on an H100 (torch 2.11, the EmbeddingOnly model with id 1e12
    # compiled without index asserts); two of its eight records kept, then the API errors and
    # the summary that follow the first bad launch
    hits = parsers.sanitizer_hits((DATA / "h100_memcheck.log").read_text())
    assert [(h.what, h.kernel) for h in hits] == [
        ("Invalid __global__ read of size 4 bytes", "triton_per_fused_embedding_sum_0")
    ] * 2
    assert "out of bounds" in hits[0].lines[3]


# A torch 2.13 CPU wrapper (trimmed): cpp kernels get no source-node comment, extern ATen calls
# do, so the comment above a cpp kernel's call is a neighbour's (the addmm's, the sort's).
CPU_WRAPPER = """
    cpp_fused_add_embedding_0((const int64_t*)(arg3_1.data_ptr()), (float*)(buf1.data_ptr()));
    AOTI_TORCH_ERROR_CODE_CHECK(aoti_torch_empty_strided(2, int_array_4, int_array_5, cached_torch_dtype_float32, cached_torch_device_type_cpu, this->device_idx_, &buf2_handle));
    // Topologically Sorted Source Nodes: [embedding, add, linear], Original ATen: [aten.embedding, aten.add, aten.view, aten.t, aten.addmm]
    static constexpr int64_t int_array_6[] = {12L, 8L};
    AOTI_TORCH_ERROR_CODE_CHECK(aoti_torch_cpu_addmm_out(buf2, buf1, buf0, lin_weight, 1L, 1L));
    auto buf3 = wrap_with_raii_handle_if_needed(reinterpret_tensor_wrapper(buf2, 3, int_array_0, int_array_1, 0L)); buf2.reset();  // reuse
    cpp_fused_relu_view_1((float*)(buf3.data_ptr()));
    // Topologically Sorted Source Nodes: [linear, relu, sort], Original ATen: [aten.view, aten.relu, aten.sort]
    int32_t var_0 = 0;
    AOTI_TORCH_ERROR_CODE_CHECK(aoti_torch_cpu_sort_stable(buf3, &var_0, 2L, 0, &buf5_handle, &buf6_handle));
    auto buf7 = std::move(buf5);  // reuse
    cpp_fused_cumsum_mul_sub_unsqueeze_2((float*)(buf7.data_ptr()));
"""  # fmt: skip


def test_a_source_node_comment_belongs_to_the_call_right_after_it() -> None:
    for kernel in ("cpp_fused_relu_view_1", "cpp_fused_cumsum_mul_sub_unsqueeze_2"):
        assert parsers.source_node_comment(CPU_WRAPPER, kernel) is None
    # an extern call's own comment still counts: the sort's comment with nothing in between
    moved = CPU_WRAPPER.replace("aoti_torch_cpu_sort_stable", "cpp_fused_sort_3")
    assert parsers.source_node_comment(moved, "cpp_fused_sort_3") == (
        ["linear", "relu", "sort"],
        ["aten.view", "aten.relu", "aten.sort"],
    )
    # without the comment, the nodes come from the kernel's own name, not a neighbour's
    nodes = [
        parsers.FxNode("addmm", "aten.addmm.default"),
        parsers.FxNode("relu", "aten.relu.default"),
        parsers.FxNode("cumsum", "aten.cumsum.default"),
    ]
    picked, how = parsers.match_nodes("cpp_fused_relu_view_1", nodes, None)
    assert [n.name for n in picked] == ["relu"] and "kernel's name" in how
