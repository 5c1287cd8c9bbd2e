"""Which buffers a model writes, read without torch: the ExportedProgram's graph (functional
and not) and the compiled wrapper's calls (CPU kernels, Triton launchers, shim calls)."""

from __future__ import annotations

from typing import Any

from aotipre.pt2.exported import _mutated_buffers
from aotipre.pt2.wrapper import written_names

CPU_RUN_IMPL = """
    cpp_fused_add_0((const float*)(arg2_1.data_ptr()), (const float*)(acc.data_ptr()),
        (float*)(buf0.data_ptr()), (float*)(acc.data_ptr()), (int64_t*)(calls.data_ptr()));
    cpp_fused_mul_1((const float*)(weight.data_ptr()), (float*)(buf1.data_ptr()));
"""


def test_cpu_kernel_pointers_without_const_are_writes() -> None:
    names = ("acc", "calls", "weight")
    assert written_names(CPU_RUN_IMPL, CPU_RUN_IMPL, names) == ("acc", "calls")


def test_triton_launcher_out_pointers_are_writes() -> None:
    text = """
static inline void call_triton_poi_fused_0(
    const RAIIAtenTensorHandle& in_ptr0,
    const RAIIAtenTensorHandle& in_ptr1,
    const RAIIAtenTensorHandle& out_ptr0,
    int64_t xnumel,
    int32_t device_idx_) {
}
"""
    run_impl = "    call_triton_poi_fused_0(arg0_1, mean, mean, 4L, this->device_idx_);\n"
    run_impl += "    call_triton_poi_fused_0(weight, arg0_1, buf0, 4L, this->device_idx_);\n"
    assert written_names(text + run_impl, run_impl, ("mean", "weight")) == ("mean",)


def test_in_place_and_out_shims_write_their_first_argument() -> None:
    run_impl = (
        "    AOTI_TORCH_ERROR_CODE_CHECK(aoti_torch_cpu_index_put_(cache, idx, v, 0));\n"
        "    AOTI_TORCH_ERROR_CODE_CHECK(aoti_torch_cpu_addmm_out(buf1, bias, x, w, 1, 1));\n"
        "    AOTI_TORCH_ERROR_CODE_CHECK(aoti_torch_cpu_addmm_out(stats, bias, x, w, 1, 1));\n"
        "    AOTI_TORCH_ERROR_CODE_CHECK(aoti_torch_cpu_gelu(bias, &buf2));\n"
    )
    assert written_names(run_impl, run_impl, ("cache", "stats", "bias")) == ("cache", "stats")


def _spec(kind: str, **body: Any) -> dict[str, Any]:
    return {kind: body}


def test_functional_graph_buffer_mutation_outputs() -> None:
    inputs = [_spec("buffer", arg={"name": "b_n"}, buffer_name="n")]
    outputs = [
        _spec("buffer_mutation", arg={"name": "add"}, buffer_name="n"),
        _spec("user_output", arg={"as_tensor": {"name": "mul"}}),
    ]
    assert _mutated_buffers({"nodes": []}, inputs, outputs) == ("n",)


def test_in_place_ops_on_buffer_inputs_of_a_non_functional_graph() -> None:
    inputs = [
        _spec("buffer", arg={"name": "b_calls"}, buffer_name="calls"),
        _spec("buffer", arg={"name": "b_table"}, buffer_name="emb.table"),
        _spec("user_input", arg={"as_tensor": {"name": "x"}}),
    ]
    nodes = [
        {
            "target": "torch.ops.aten.add_.Tensor",
            "inputs": [{"name": "self", "arg": {"as_tensor": {"name": "b_calls"}}}],
        },
        {
            "target": "torch.ops.aten.add.Tensor",  # out of place: no write
            "inputs": [{"name": "self", "arg": {"as_tensor": {"name": "b_table"}}}],
        },
        {
            "target": "torch.ops.aten.mul_.Tensor",  # in place, on a user input
            "inputs": [{"name": "self", "arg": {"as_tensor": {"name": "x"}}}],
        },
        {"target": "torch.ops.aten._foreach_add.List", "inputs": []},
    ]
    assert _mutated_buffers({"nodes": nodes}, inputs, []) == ("calls",)
