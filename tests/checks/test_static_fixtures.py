"""Static checks on real fixture packages: each check passes on good inputs and fires on bad ones."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from aotipre.api import CheckOptions, check
from aotipre.findings import Report, Severity, Verdict
from aotipre.pt2.reader import read_package

Pkg = Callable[[str], Path]


def _check(pkg: Pkg, package: str, inputs: str | None = None, **kw: object) -> Report:
    opts = CheckOptions(
        inputs=str(pkg(inputs)) if inputs else None,
        static_only=True,
        **kw,  # type: ignore[arg-type]
    )
    return check(pkg(package), opts)


def _codes(report: Report, severity: Severity = Severity.ERROR) -> list[str]:
    return sorted(f.code for f in report.findings if f.severity is severity)


@pytest.mark.parametrize(
    "package, inputs",
    [
        ("aoti", "aoti_inputs"),
        ("both", "aoti_inputs"),
        ("derived", "derived_inputs"),
        ("dtypes", "dtypes_inputs"),
        ("kwargs", "kwargs_inputs"),
        ("strides", "strides_inputs"),
        ("embedding_oob", "embedding_oob_inputs_good"),
    ],
)
def test_good_inputs_pass(pkg: Pkg, package: str, inputs: str) -> None:
    report = _check(pkg, package, inputs)
    assert _codes(report) == [], report.findings
    assert report.verdict is Verdict.PASS
    assert report.exit_code == 0


def test_index_values_past_the_embedding_are_static_facts(pkg: Pkg) -> None:
    """The sample holds the token ids: one past the 500 rows is found before anything runs."""
    report = _check(pkg, "embedding_oob", "embedding_oob_inputs")
    f = [f for f in report.findings if f.code == "AOT308"][0]
    assert (f.input, f.actual, f.expected) == ("ids", 600, "0..499")
    assert "at position [1, 3]" in f.message


def test_stored_sample_inputs_are_used(pkg: Pkg) -> None:
    report = _check(pkg, "ep_only", compile_at_deploy=True)
    assert report.inputs_source == "archive"
    assert report.verdict is Verdict.PASS


def test_exported_program_only_cannot_be_loaded_by_aoti_load_package(pkg: Pkg) -> None:
    """torch 2.13: aoti_load_package on a torch.export.save file raises "Failed to find a
    generated cpp file or so file for model 'model'" (tests/data/real/README.md)."""
    report = _check(pkg, "ep_only")
    (f,) = [f for f in report.findings if f.code == "AOT015"]
    assert f.severity is Severity.ERROR and f.model == "model"
    assert "aoti_load_package cannot load it" in f.message
    assert report.verdict is Verdict.FAIL
    deploy = _check(pkg, "ep_only", compile_at_deploy=True)
    assert not [f for f in deploy.findings if f.code == "AOT015"]


def test_no_inputs_is_info_not_pass_of_inputs(pkg: Pkg) -> None:
    report = _check(pkg, "aoti")
    # AOT051: the CPU target it was compiled for; AOT052: the producing torch (AOTI-only)
    assert _codes(report, Severity.INFO) == ["AOT022", "AOT051", "AOT052"]


def test_dtype_mismatch(pkg: Pkg) -> None:
    report = _check(pkg, "aoti", "aoti_inputs_bad_dtype")
    (f,) = [f for f in report.findings if f.code == "AOT201"]
    assert (f.position, f.expected, f.actual) == (0, "int64", "float32")
    assert f.model == "model" and f.hint


def test_bf16_expected(pkg: Pkg) -> None:
    report = _check(pkg, "dtypes", "dtypes_inputs_float32")
    (f,) = [f for f in report.findings if f.code == "AOT201"]
    assert (f.input, f.expected, f.actual) == ("x", "bfloat16", "float32")


def test_dim_above_max(pkg: Pkg) -> None:
    report = _check(pkg, "both", "aoti_inputs_out_of_range")
    found = [f for f in report.findings if f.code == "AOT304"]
    assert found and all(f.dim == 1 and f.actual == 200 and f.expected == "<= 128" for f in found)
    assert found[0].input == "input_ids"


def test_shared_dim_disagrees(pkg: Pkg) -> None:
    report = _check(pkg, "both", "aoti_inputs_mismatched_seq")
    (f,) = [f for f in report.findings if f.code == "AOT305"]
    assert (f.input, f.dim, f.expected, f.actual) == ("attention_mask", 1, 16, 17)
    assert "input_ids" in f.message


def test_derived_dim(pkg: Pkg) -> None:
    report = _check(pkg, "derived", "derived_inputs_bad")
    (f,) = [f for f in report.findings if f.code == "AOT306"]
    assert (f.input, f.dim, f.expected, f.actual) == ("y", 0, 6, 5)


def test_transposed_input_violates_static_strides(pkg: Pkg) -> None:
    report = _check(pkg, "strides", "strides_inputs_transposed")
    (f,) = [f for f in report.findings if f.code == "AOT307"]
    assert f.expected == 8 and f.actual == 1 and f.dim == 0


def test_transposed_mask_violates_symbolic_strides(pkg: Pkg) -> None:
    # a warning: a default deployment runs it unchecked (the dynamic stages settle it); an error
    # where the deployment's runtime check refuses it
    report = _check(pkg, "both", "aoti_inputs_transposed")
    assert "AOT307" in _codes(report, Severity.WARNING) and "AOT307" not in _codes(report)
    report = _check(pkg, "both", "aoti_inputs_transposed", deployment_checks_inputs=True)
    assert "AOT307" in _codes(report)


def test_missing_argument(pkg: Pkg) -> None:
    report = _check(pkg, "both", "aoti_inputs_missing_arg")
    (f,) = [f for f in report.findings if f.code == "AOT101"]
    assert (f.expected, f.actual) == (2, 1)


def test_aoti_only_contract_matches_by_tensor_order(pkg: Pkg) -> None:
    mask = read_package(pkg("aoti")).models[0].inputs[1].tensor
    assert mask is not None
    if not (mask.shape[1].expr or "").isidentifier():
        # torch 2.11's wrapper.cpp has no assert_size_stride line tying input 1 to the symbols
        pytest.skip("this torch's wrapper.cpp does not link the mask's dims to shared symbols")
    report = _check(pkg, "aoti", "aoti_inputs_mismatched_seq")
    assert "AOT305" in _codes(report)


def test_export_and_aoti_bounds_differ_is_a_warning(pkg: Pkg) -> None:
    report = _check(pkg, "both", "aoti_inputs")
    assert "AOT013" in _codes(report, Severity.WARNING)
    assert report.verdict is Verdict.PASS
    strict = _check(pkg, "both", "aoti_inputs", fail_on=Severity.WARNING)
    assert strict.verdict is Verdict.FAIL and strict.exit_code == 1


def test_an_exported_program_file_gives_aoti_code_its_export_ranges(pkg: Pkg) -> None:
    """AOTI code only (aoti.pt2) plus --exported-program: the same AOT013 as the archive that
    holds both (both.pt2, the same TokenModel), naming the file; the ExportedProgram of another
    model (ep_only.pt2, a float MLP) is not matched to these inputs."""
    assert "AOT013" not in _codes(_check(pkg, "aoti", "aoti_inputs"))
    report = _check(pkg, "aoti", "aoti_inputs", exported_program=str(pkg("both")))
    (f,) = [f for f in report.findings if f.code == "AOT013"]
    both = [g for g in _check(pkg, "both", "aoti_inputs").findings if g.code == "AOT013"]
    assert [(g.input, g.dim, g.expected, g.actual) for g in both] == [
        (f.input, f.dim, f.expected, f.actual)
    ]
    assert f"in the ExportedProgram of --exported-program {pkg('both')}, but" in f.message
    other = _check(pkg, "aoti", "aoti_inputs", exported_program=str(pkg("ep_only")))
    assert "AOT013" not in _codes(other)


def test_wrong_inputs_for_the_wrong_model(pkg: Pkg) -> None:
    report = _check(pkg, "dtypes", "aoti_inputs")
    assert report.verdict is Verdict.FAIL


def test_multi_model_requires_model_with_inputs(pkg: Pkg) -> None:
    report = _check(pkg, "multi", "multi_decoder_inputs")
    assert report.verdict is Verdict.ERROR and "--model" in (report.error or "")
    ok = _check(pkg, "multi", "multi_decoder_inputs", model="decoder")
    assert _codes(ok) == []


def test_model_not_found_lists_models(pkg: Pkg) -> None:
    report = _check(pkg, "multi", None, model="nope")
    assert report.verdict is Verdict.ERROR and report.exit_code == 2
    assert "decoder" in (report.error or "") and "encoder" in (report.error or "")
    assert [f.code for f in report.findings] == ["AOT009"]


def test_weights_on_disk(pkg: Pkg) -> None:
    report = _check(pkg, "weights_on_disk")
    assert "AOT011" in _codes(report)


def test_corrupt_so(pkg: Pkg) -> None:
    report = _check(pkg, "broken_crc")
    (f,) = [f for f in report.findings if f.code == "AOT008"]
    assert f.actual.endswith(".wrapper.so")


def test_cuda_target_on_a_cpu_package(pkg: Pkg) -> None:
    report = _check(pkg, "aoti", "aoti_inputs", target="cuda,cc=9.0")
    (f,) = [f for f in report.findings if f.code == "AOT406"]
    assert f.severity is Severity.ERROR and report.verdict is Verdict.FAIL  # the code table's
    assert report.targets[0]["status"] == "cannot load"


def test_target_isa_weaker_than_package(pkg: Pkg) -> None:
    info = read_package(pkg("aoti"))
    isa = info.models[0].aoti.cpu_isa  # type: ignore[union-attr]
    if not any(w.upper().startswith(("AVX512", "AMX")) for w in isa):
        pytest.skip(f"this machine compiled for {isa}; nothing weaker to target")
    report = _check(pkg, "aoti", "aoti_inputs", target="cpu,isa=avx2")
    (f,) = [f for f in report.findings if f.code == "AOT436"]  # decoded, not compared
    assert f.severity is Severity.ERROR and "avx512f" in f.expected and "SIGILL" in f.message
    assert report.targets[0]["status"] == "cannot run"


@pytest.mark.parametrize(
    "name, code",
    [
        ("broken_empty", "AOT002"),
        ("broken_not_zip", "AOT002"),
        ("broken_truncated", "AOT002"),
        ("broken_escape", "AOT003"),
        ("broken_plain_zip", "AOT004"),
        ("broken_wrong_format", "AOT004"),
        ("broken_version", "AOT005"),
        ("broken_json", "AOT006"),
        ("broken_bomb", "AOT007"),
    ],
)
def test_broken_packages_cannot_be_checked(pkg: Pkg, name: str, code: str) -> None:
    report = _check(pkg, name)
    assert report.verdict is Verdict.ERROR and report.exit_code == 2
    assert [f.code for f in report.findings] == [code]
    assert report.error and "\n" not in report.error


@pytest.mark.parametrize("inputs, code", [("inputs_numpy", "AOT021"), ("inputs_garbage", "AOT020")])
def test_bad_inputs_files(pkg: Pkg, inputs: str, code: str) -> None:
    report = _check(pkg, "aoti", inputs)
    assert report.verdict is Verdict.ERROR and report.exit_code == 2
    assert [f.code for f in report.findings] == [code]
    if code == "AOT021":
        assert "numpy" in (report.error or "") and "torch.from_numpy" in (report.error or "")
