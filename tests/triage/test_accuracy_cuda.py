"""Accuracy triage on CUDA, on fixed data captured on the GPU machine (torch 2.11.0+cu130, an
NVIDIA H200): the printer-instrumented wrapper.cpp of a Triton kernel launched through its call
helper (data/cuda_printer_*), a Triton mm template compiled with TF32
(data/cuda_tf32_template.cpp), and the CUDA rungs of the cause ladder. The GPU tests that build
and triage real CUDA packages are tests/triage/test_accuracy_gpu.py."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

from aotipre.runner.worker import kernelmap
from aotipre.triage.accuracy import KNOBS, ladder_for
from aotipre.triage.accuracy_cuda import (
    inductor_only,
    knob_tf32,
    package_used_tf32,
    rebuild_steps,
    tf32_fact,
    untestable,
)

DATA = Path(__file__).parent / "data"
FUSED = "triton_per_fused__softmax_add_addmm_amax_mul_relu_sub_0"


def test_a_triton_kernels_outputs_are_its_out_and_in_out_pointers_by_its_call_helper() -> None:
    wrapper = (DATA / "cuda_printer_wrapper.cpp").read_text()
    assert kernelmap.declarations(wrapper)[FUSED][:5] == [
        "in_out_ptr0",
        "in_ptr0",
        "in_ptr1",
        "xnumel",
        "r0_numel",
    ]
    mm, fused = kernelmap.launches(wrapper)
    assert (mm.kernel, mm.outputs, mm.how) == ("aoti_torch_cuda_mm_out", ["buf0"], "out argument")
    assert (fused.kernel, fused.handle) == (FUSED, f"{FUSED}:2")
    # call_...(buf3, lin_bias, arg2_1, 8L, 64L, ...): buf3 is in_out_ptr0 (written), the bias
    # constant and the graph input arg2_1 are read
    assert (fused.outputs, fused.how) == (["buf3"], "declaration")
    assert fused.args == ["buf3", "arg2_1"]


def test_the_cuda_manifest_pairs_each_save_with_its_file() -> None:
    launches = kernelmap.launches((DATA / "cuda_printer_wrapper.cpp").read_text())
    paths = kernelmap.saved_paths((DATA / "cuda_printer_run.log").read_text())
    assert len(paths) == 10  # 2 args around the mm, 3 around the Triton kernel, before and after
    files = kernelmap.match_manifest(launches, paths)
    assert files is not None
    assert files[1]["buf3"].endswith(f"after_launch_{FUSED}_buf3_cuda:0.pt")
    assert files[1]["before:lin_bias"].endswith(f"before_launch_{FUSED}_lin_bias_cuda:0.pt")


def test_a_template_kernels_parameter_names_come_from_its_call_helper() -> None:
    text = (DATA / "cuda_tf32_template.cpp").read_text()
    params = kernelmap.declarations(text)["triton_tem_fused_mm_mul_t_0"]
    assert params[:3] == ["arg_A", "arg_B", "out_ptr1"]
    assert params[-1] == "cubin_dir_"  # `cubin_dir_ = std::nullopt`: the name, not the default


def package(tmp_path: Path, text: str) -> str:
    path = tmp_path / "p.pt2"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("p/data/aotinductor/model/abc.wrapper.cpp", text)
        zf.writestr("p/data/aotinductor/model/notes.txt", "ALLOW_TF32 : tl.constexpr = True")
    return str(path)


def test_a_package_compiled_with_tf32_is_told_by_its_triton_sources(tmp_path: Path) -> None:
    template = (DATA / "cuda_tf32_template.cpp").read_text()
    assert package_used_tf32(package(tmp_path, template))
    off = template.replace("ALLOW_TF32 : tl.constexpr = True", "ALLOW_TF32 : tl.constexpr = False")
    assert not package_used_tf32(package(tmp_path, off))  # a .txt member is not a kernel
    (tmp_path / "bad.pt2").write_bytes(b"not a zip")
    assert not package_used_tf32(str(tmp_path / "bad.pt2"))


def test_the_cuda_ladder_adds_its_rungs_in_order_and_the_cpu_ladder_has_none() -> None:
    every = {"low_precision": True, "rng": True, "reduction": True, "tf32": True}
    cuda, _ = ladder_for({**every, "cuda": True})
    assert [k.id for k in cuda] == [
        "precision-casts",
        "strict-pointwise",
        "fallback-random",
        "tf32-off",
        "strict-reduction",
        "all-fallback",
    ]
    cpu, _ = ladder_for(every)
    assert [k.id for k in cpu] == ["precision-casts", "fallback-random", "all-fallback"]
    assert [k.id for k in ladder_for({"tf32": True, "cuda": True})[0]] == ["tf32-off"]


def test_tf32_is_a_candidate_only_for_fp32_matmuls_that_ran_with_it() -> None:
    off = {"matmul": False, "conv": False}
    assert tf32_fact({"fp32_matmul": True}, package_tf32=True, eager=off)
    assert tf32_fact({"fp32_matmul": True}, package_tf32=False, eager={"matmul": True})
    assert not tf32_fact({"fp32_matmul": True}, package_tf32=False, eager=off)
    assert not tf32_fact({"fp32_matmul": False}, package_tf32=True, eager={"matmul": True})
    # eager cuDNN convolutions use TF32 by default (torch.backends.cudnn.allow_tf32)
    assert tf32_fact({"fp32_conv": True}, package_tf32=False, eager={"conv": True})


def test_the_tf32_knob_sets_the_process_for_compile_and_both_sides() -> None:
    knob = next(k for k in KNOBS if k.id == "tf32-off")
    assert inductor_only(knob.configs) == {} and knob_tf32(knob.configs) is False
    compile_step = {"id": "compile", "op": "compile"}
    compare = [{"id": "compare", "op": "accuracy_compare"}]
    steps = rebuild_steps(compile_step, compare, package_tf32=True, knob=False)
    assert [(s["op"], s.get("tf32")) for s in steps] == [
        ("accuracy_precision", False),
        ("compile", None),
        ("accuracy_compare", None),
    ]
    # another knob on a TF32 package: compiled as the package was, compared as the check was
    steps = rebuild_steps(compile_step, compare, package_tf32=True)
    assert [(s["op"], s.get("tf32")) for s in steps] == [
        ("accuracy_precision", True),
        ("compile", None),
        ("accuracy_precision", None),
        ("accuracy_compare", None),
    ]
    assert rebuild_steps(compile_step, compare, package_tf32=False) == [compile_step, *compare]


def test_a_knob_missing_from_this_torch_is_not_testable_never_not_the_cause() -> None:
    strict = next(k for k in KNOBS if k.id == "strict-reduction")
    assert "needs torch 2.14+" in str(untestable(strict.min_torch, "2.11.0+cu130"))
    assert untestable(strict.min_torch, "2.14.1") is None
    assert untestable(strict.min_torch, "2.15.0") is None
    assert untestable("", "2.11.0") is None and untestable("2.15", "") is None


def test_a_node_split_over_an_extern_mm_and_a_triton_kernel_is_complete_after_the_last() -> None:
    from aotipre.runner.worker.accuracy import last_launch_of_nodes

    launches = kernelmap.launches((DATA / "cuda_printer_wrapper.cpp").read_text())
    provenance = json.loads((DATA / "cuda_kernel_information.json").read_text())
    # on CUDA the linear layer is an extern mm (no bias) and its bias is added in the Triton
    # kernel: both name `linear`; the mm's output is a partial result, never compared with it
    assert provenance["aoti_torch_cuda_mm_out:1"]["pre_grad_nodes"] == ["linear"]
    assert "linear" in provenance[f"{FUSED}:2"]["pre_grad_nodes"]
    complete = last_launch_of_nodes(launches, provenance)
    assert complete == {"linear": 1, "softmax": 1, "add": 1, "relu": 1}
