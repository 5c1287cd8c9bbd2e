"""Accuracy triage's aligner on fixed data: the printer-instrumented wrapper.cpp and run log of a
real torch 2.13 CPU build (data/printer1_*), and launch records as the worker writes them."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

from aotipre.findings import StageStatus
from aotipre.findings import codes as code_table
from aotipre.runner.stages import DynamicOptions, OutputMismatch
from aotipre.runner.worker import kernelmap
from aotipre.triage.accuracy import (
    AccuracyDiagnosis,
    AccuracyOptions,
    KernelError,
    KnobTrial,
    ladder_for,
    localize,
    triage_accuracy,
)

DATA = Path(__file__).parent / "data"
FUSED = "cpp_fused__softmax__to_copy_abs_add_all_amax_eq_mul_ne_sub_0"


def test_launches_name_each_kernels_outputs_from_its_declaration_or_out_argument() -> None:
    launches = kernelmap.launches((DATA / "printer1_wrapper.cpp").read_text())
    assert [(x.kernel, x.handle) for x in launches] == [
        ("aoti_torch_cpu_addmm_out", "aoti_torch_cpu_addmm_out:1"),
        (FUSED, f"{FUSED}:2"),
    ]
    addmm, fused = launches
    assert (addmm.outputs, addmm.how) == (["buf0"], "out argument")  # arg2_1 is read, not written
    # in_ptr0 = buf0 is the fused kernel's input: comparing it with eager was the naive mistake
    assert fused.args == ["buf0", "buf1", "buf2", "buf3", "buf5", "buf6"]
    assert (fused.outputs, fused.how) == (["buf1", "buf2", "buf3", "buf5", "buf6"], "declaration")


def test_the_manifest_pairs_each_save_with_its_file_in_order() -> None:
    launches = kernelmap.launches((DATA / "printer1_wrapper.cpp").read_text())
    paths = kernelmap.saved_paths((DATA / "printer1_run.log").read_text())
    assert len(paths) == 16  # the "Path does not exist, creating it" line is not a save
    files = kernelmap.match_manifest(launches, paths)
    assert files is not None
    assert files[0]["buf0"].endswith("after_launch_aoti_torch_cpu_addmm_out_buf0_cpu.pt")
    assert files[0]["before:arg2_1"].endswith(
        "before_launch_aoti_torch_cpu_addmm_out_arg2_1_cpu.pt"
    )
    assert files[1]["buf6"].endswith(f"after_launch_{FUSED}_buf6_cpu.pt")
    assert kernelmap.match_manifest(launches, paths[:-1]) is None  # counts differ: not trusted


def test_a_file_overwritten_by_a_later_launch_is_kept_only_for_the_last() -> None:
    wrapper = "\n".join(
        [
            "    // [Provenance debug handles] aoti_torch_cpu_mm_out:1",
            '    aoti_torch_save_tensor_handle(buf0, "buf0", "before_launch", "aoti_torch_cpu_mm_out");',
            "    AOTI_TORCH_ERROR_CODE_CHECK(aoti_torch_cpu_mm_out(buf0, arg0_1, w));",
            '    aoti_torch_save_tensor_handle(buf0, "buf0", "after_launch", "aoti_torch_cpu_mm_out");',
            "    // [Provenance debug handles] aoti_torch_cpu_mm_out:2",
            '    aoti_torch_save_tensor_handle(buf0, "buf0", "before_launch", "aoti_torch_cpu_mm_out");',
            "    AOTI_TORCH_ERROR_CODE_CHECK(aoti_torch_cpu_mm_out(buf0, arg0_1, w2));",
            '    aoti_torch_save_tensor_handle(buf0, "buf0", "after_launch", "aoti_torch_cpu_mm_out");',
        ]
    )
    launches = kernelmap.launches(wrapper)
    assert [x.handle for x in launches] == ["aoti_torch_cpu_mm_out:1", "aoti_torch_cpu_mm_out:2"]
    before, after = (
        "/t/before_launch_aoti_torch_cpu_mm_out_buf0_cpu.pt",
        "/t/after_launch_aoti_torch_cpu_mm_out_buf0_cpu.pt",
    )
    files = kernelmap.match_manifest(launches, [before, after, before, after])
    assert files is not None
    assert "buf0" not in files[0]  # the second launch overwrote its file: not compared
    assert files[1]["buf0"] == after


def out(arg: str, node: str | None, mism: int = 0, err: float = 0.0, **more: object) -> dict:
    if node is None:
        return {"arg": arg, "node": None, "why": "no FX node", **more}
    return {"arg": arg, "node": node, "mismatches": mism, "max_abs": err, "max_rel": err, **more}


def test_the_first_divergent_kernel_is_the_first_whose_compared_outputs_differ() -> None:
    launches = [
        {
            "kernel": "k0",
            "nodes": ["linear"],
            "inputs": ["arg2_1"],
            "outputs": [out("buf0", "linear")],
        },
        {
            "kernel": "k1",
            "nodes": ["add", "softmax"],
            "inputs": ["buf0"],
            "outputs": [out("buf1", None), out("buf4", "softmax", 18, 0.19)],
        },
        {
            "kernel": "k2",
            "nodes": ["mul"],
            "inputs": ["buf4"],
            "outputs": [out("buf5", "mul", 30, 0.4)],
        },
    ]
    found = localize(launches, nonfinite=False)
    assert found.index == 1 and found.inputs_agree is True
    assert [e.max_abs for e in found.series] == [0.0, 0.19, 0.4]  # how it grows downstream
    assert found.series[1].internal == 1 and found.series[1].compared == 1


def test_an_input_from_an_internal_buffer_leaves_agreement_unknown() -> None:
    launches = [
        {"kernel": "seeds", "inputs": [], "outputs": [out("buf0", None)]},
        {"kernel": "k1", "inputs": ["buf0", "arg0_1"], "outputs": [out("buf1", "add", 4, 0.8)]},
    ]
    found = localize(launches, nonfinite=False)
    assert found.index == 1 and found.inputs_agree is None


def test_nan_mode_names_the_first_kernel_producing_nonfinite_and_whether_it_came_in() -> None:
    launches = [
        {"kernel": "k0", "inputs": ["arg0_1"], "outputs": [out("buf0", "a", 0, 0.0, nonfinite=0)]},
        {
            "kernel": "k1",
            "inputs": ["buf0"],
            "input_nonfinite": 0,
            "outputs": [out("buf1", "log", 0, 0.0, nonfinite=3, eager_nonfinite=1)],
        },
    ]
    found = localize(launches, nonfinite=True)
    assert found.index == 1 and found.inputs_agree is True
    assert found.series[1].nonfinite == 2  # 3 NaN/Inf where eager has 1
    launches[1]["input_nonfinite"] = 5
    assert localize(launches, nonfinite=True).inputs_agree is False
    assert localize(launches[:1], nonfinite=True).index is None


def test_the_cause_ladder_tries_only_knobs_the_kernels_ops_can_explain_in_order() -> None:
    tried, skipped = ladder_for({"low_precision": True, "rng": False, "reduction": True})
    assert [k.id for k in tried] == ["precision-casts", "all-fallback"]
    assert [k.id for k in skipped] == ["fallback-random"]
    assert ladder_for({})[0] == []


def test_the_diagnosis_round_trips_through_json() -> None:
    d = AccuracyDiagnosis(
        model="m",
        trigger=("AOT701",),
        kernel="k1",
        nodes=("add",),
        source=("m.py:3 y = x + 1",),
        inputs_agree=None,
        series=(KernelError("k1", ("add",), 0.5, 0.1, 3, 1, 2, 0),),
        output_max_abs=0.5,
        cause=None,
        trials=(
            KnobTrial("precision-casts", {"emulate_precision_casts": True}, "inconclusive", "x"),
        ),
        rmse_compiled=0.1,
        rmse_eager=None,
        summary="s",
    )
    assert AccuracyDiagnosis.from_dict(d.to_dict()) == d


def mismatch(reference: str | None, device: str = "cpu") -> OutputMismatch:
    found = code_table.get("AOT701").finding("output 0 differs", model="m", stage="compare")
    model: Any = SimpleNamespace(name="m")
    return OutputMismatch(
        package=SimpleNamespace(path="/nowhere/p.pt2"),  # type: ignore[arg-type]
        model=model,
        device=device,
        inputs={"kind": "file", "path": "/nowhere/in.pt"},
        findings=(found,),
        reference=reference,
        reference_model="m" if reference else None,
        reference_label="the archive holds AOTI code only (no ExportedProgram)",
        compiled_with={},
        env={},
        options=DynamicOptions(),
    )


def test_without_a_program_triage_says_what_it_needs_and_runs_nothing() -> None:
    result = triage_accuracy(mismatch(None), AccuracyOptions())
    (found,) = result.findings
    assert found.code == "AOT711" and "--exported-program FILE" in found.message
    assert result.diagnosis is None and result.stages[0].status is StageStatus.SKIPPED


def test_no_escalate_and_a_device_other_than_cpu_or_cuda_skip_with_the_reason() -> None:
    off = triage_accuracy(mismatch("/nowhere/ep.pt2"), AccuracyOptions(escalate=False))
    assert off.findings == [] and "escalation is off" in off.stages[0].detail
    xpu = triage_accuracy(mismatch("/nowhere/ep.pt2", "xpu:0"), AccuracyOptions())
    assert xpu.findings == [] and "CPU and CUDA packages only" in xpu.stages[0].detail


def test_python_wrapper_launches_match_the_printer_builds_by_kernel_and_role() -> None:
    # the same bf16 program compiled by Inductor's Python wrapper (torch 2.13): the fused kernel
    # has the printer build's arguments and outputs; the addmm writes its out= argument
    launches = kernelmap.python_launches((DATA / "jit_wrapper.py.txt").read_text())
    assert [(x.kernel, x.handle) for x in launches] == [
        ("extern_kernels.addmm", "extern_kernels.addmm:1"),
        (FUSED, f"{FUSED}:2"),
    ]
    addmm, fused = launches
    assert (addmm.outputs, addmm.how) == (["buf0"], "out argument")
    assert addmm.args[-1] == "buf0" and "arg2_1" in addmm.args  # the reinterpreted weight too
    printer = kernelmap.launches((DATA / "printer1_wrapper.cpp").read_text())[1]
    assert (fused.args, fused.outputs, fused.how) == (printer.args, printer.outputs, "declaration")
    first, last = fused.lines
    assert (
        first == last
        and FUSED + "(buf0" in (DATA / "jit_wrapper.py.txt").read_text().splitlines()[first - 1]
    )


def test_python_wrapper_statements_between_a_handle_and_its_launch_are_skipped() -> None:
    source = "\n".join(
        [
            "class Runner:",
            "    def call(self, args):",
            "        arg0_1, = args",
            "        # [Provenance debug handles] extern_kernels.mm:1",
            "        torch.save(arg0_1, 'before.pt')",
            "        extern_kernels.mm(arg0_1, arg0_1, out=buf0)",
            "        # [Provenance debug handles] aten.sort.default:2",
            "        buf1, buf2 = torch.ops.aten.sort.default(buf0)",
            "        # a comment with no handle",
            "        del buf0",
            "        return (buf1, )",
        ]
    )
    mm, sort = kernelmap.python_launches(source)
    assert (mm.kernel, mm.lines, mm.outputs) == ("extern_kernels.mm", (6, 6), ["buf0"])
    assert (sort.outputs, sort.how) == (["buf1", "buf2"], "assigned")
    assert sort.args == ["buf0", "buf1", "buf2"]
    assert kernelmap.python_launches("def call(args):\n    return args\n") == []
    assert kernelmap.python_launches("def call(args:\n") == []  # not Python: no launches
