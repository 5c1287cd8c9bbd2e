"""The compile classes (AOT540-AOT547) emitted by the real compile stage: real ExportedProgram
packages compiled by the real worker with torch._inductor.aoti_compile_and_package. Each case's
ground truth is what plain torch raises in a fresh process: measured by the builder or by
plain_torch here, or recorded in tests/data/compile_failures/ by
tests/runner/record_compile_failures.py (the same model and config, plain torch)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from aotipre.findings import StageStatus
from tests.building import build
from tests.gate.conftest import Dynamic, plain_torch

# torch_versions: CI runs the classes again under 2.14.1 and 2.15.0 (kernel names and eager
# differ there)
pytestmark = [pytest.mark.slow, pytest.mark.torch_versions]

DATA = Path(__file__).resolve().parents[1] / "data" / "compile_failures"

RECORDER = Path(__file__).resolve().parents[1] / "runner" / "record_compile_failures.py"


@pytest.fixture(scope="module")
def cummin_package(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    """torch issue #188224: an ExportedProgram-only package whose Inductor lowering of
    aten.cummin asserts (eager and export accept it); and what plain torch raised compiling it."""
    out = tmp_path_factory.mktemp("cummin") / "cummin.pt2"
    package = build(RECORDER, out, "lowering_cummin")
    return package, json.loads(Path(f"{out}.raised.json").read_text())


def test_aot540_a_lowering_crash_names_the_op_and_the_model_line(
    dynamic: Dynamic, cummin_package: tuple[Path, list[str]]
) -> None:
    package, raised = cummin_package
    assert raised == ["InductorError", "LoweringException"]
    res, findings = dynamic(str(package), use_cache=False)
    assert [f.code for f in findings] == ["AOT540"]
    message = findings[0].message
    assert "failed: Inductor's lowering of aten.cummin.default failed (AssertionError" in message
    assert " at node cummin (aten.cummin.default; inputs " in message
    assert ": [0] float32) at " in message and "record_compile_failures.py:" in message
    assert "in forward: return torch.cummin(torch.clone(x), -46)[0]" in message
    assert "report it to PyTorch" in findings[0].hint
    assert res["compile"].status is StageStatus.FAILED
    eager = json.loads(Path(f"{package}.eager.json").read_text())
    if not eager["ok"]:
        # plain torch's eager rejects the program on this torch (2.15: "Dimension out of
        # range" for dim -46 of a 1-d input): the rebuild compiles, nothing can be compared
        assert "inconclusive (it compiled, but comparing it with eager failed" in (
            findings[0].hint
        ), findings[0].hint
        return
    # the workaround, proven by a rebuild with the op as an ATen fallback (plain torch: after
    # make_fallback(torch.ops.aten.cummin.default, ...) it compiles, and its empty output
    # equals eager's)
    assert findings[0].hint.startswith(
        "workaround, proven: aten.cummin.default as an ATen fallback kernel: run "
        "torch._inductor.lowering.make_fallback("
        "torch.ops.aten.cummin.default, warn=False, override_decomp=True) before compiling"
    )
    assert "then compile as before; compiled and matched eager on the sample inputs " in (
        findings[0].hint
    )
    assert "; workaround proven: op-fallback compiled and matched eager" in res["compile"].detail


@pytest.fixture(scope="module")
def grid3d_package(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    """An ExportedProgram-only package whose 3-D grid_sample lowers to aten.grid_sampler_3d (no
    lowering, no decomposition), its inputs, and what plain torch raised compiling it with
    implicit_fallbacks=False."""
    out = tmp_path_factory.mktemp("grid3d") / "grid3d.pt2"
    package = build(RECORDER, out, "missing_lowering_grid3d")
    return package, json.loads(Path(f"{out}.raised.json").read_text())


def test_aot541_a_missing_lowering_is_proven_to_compile_with_implicit_fallbacks(
    dynamic: Dynamic, grid3d_package: tuple[Path, list[str]]
) -> None:
    package, raised = grid3d_package
    assert raised == ["InductorError", "MissingOperatorWithoutDecomp"]
    # plain torch (the program saved and loaded again): with implicit_fallbacks=True it
    # compiles and its output equals eager's (measured: max abs error 0.0)
    res, findings = dynamic(
        str(package),
        f"{package}.inputs.pt",
        use_cache=False,
        inductor_configs={"implicit_fallbacks": False},
    )
    assert [f.code for f in findings] == ["AOT541"]
    assert "Inductor has no lowering for aten.grid_sampler_3d.default" in findings[0].message
    assert findings[0].hint.startswith(
        "workaround, proven: the op as its ATen kernel: compile with "
        "inductor_configs={'implicit_fallbacks': True}; compiled and matched eager on the "
        "sample inputs (1 output(s), 16 element(s), max abs error 0)"
    )
    assert res["compile"].status is StageStatus.FAILED


def test_aot542_generated_cpp_error_names_the_generated_line_and_the_model_line(
    dynamic: Dynamic, pkg: Callable[[str], Path]
) -> None:
    # plain torch: InductorError(CppCompileError), recorded for the same injected config
    recorded = json.loads((DATA / "cpp_compile_error.json").read_text())
    assert [e["type"] for e in recorded["compile_failure"]["chain"][:2]] == [
        "InductorError",
        "CppCompileError",
    ]
    configs = {"cpp.inject_relu_bug_TESTING_ONLY": "compile_error"}
    res, findings = dynamic(str(pkg("ep_only.pt2")), use_cache=False, inductor_configs=configs)
    assert [f.code for f in findings] == ["AOT542"]
    message = findings[0].message
    assert "failed: the generated C++ does not compile: " in message
    assert "error: ‘compile’ was not declared in this scope" in message
    # the kernel's name joins the fused ops' (2.13: cpp_fused_relu_view_0, 2.15:
    # cpp_fused__unsafe_view_relu_0)
    assert re.search(r"`auto tmp1 = compile error!;` in cpp_fused_\w*relu\w*\)", message)
    # ep_only is fixtures/models.py's TinyMLP: its relu node and the line that calls it
    assert "from the model's node relu (aten.relu.default; inputs " in message
    assert "models.py:" in message and "return self.fc2(torch.relu(self.fc1(x)))" in message
    assert findings[0].evidence[0].endswith("error: ‘compile’ was not declared in this scope")
    assert res["compile"].status is StageStatus.FAILED
    # rebuilt without the injected config, it compiles and matches eager (TinyMLP compiles
    # with plain torch's defaults: the fixture set's aoti packages are built so)
    assert findings[0].hint.startswith(
        "workaround, proven: without cpp.inject_relu_bug_TESTING_ONLY: compile with "
        "inductor_configs={}; compiled and matched eager "
        "on the sample inputs (1 output(s), "
    )


@pytest.fixture(scope="module")
def conv_prefix_package(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    """An ExportedProgram-only package that convolves the first u0 samples (u0 from .item()),
    and what plain torch raised compiling it."""
    out = tmp_path_factory.mktemp("conv_prefix") / "conv_prefix.pt2"
    package = build(RECORDER, out, "data_dependent_conv")
    return package, json.loads(Path(f"{out}.raised.json").read_text())


def test_aot545_a_data_dependent_guard_while_compiling_names_the_size_and_the_node(
    dynamic: Dynamic, conv_prefix_package: tuple[Path, list[str]]
) -> None:
    package, raised = conv_prefix_package
    # plain torch 2.13-2.15: export accepts the model, the compile raises InductorError
    # (LoweringException(GuardOnDataDependentSymNode)) on the convolution
    assert raised == ["InductorError", "LoweringException"]
    res, findings = dynamic(str(package), use_cache=False)
    assert [f.code for f in findings] == ["AOT545"]
    message = findings[0].message
    assert "failed: Inductor needed to decide `2*Max(1, u0 - 2)` on a data-dependent size (u0)" in (
        message
    )
    assert " at node convolution (aten.convolution.default; inputs slice_1: [1, 3, u0] " in message
    assert "record_compile_failures.py:" in message
    assert message.endswith(
        "in forward: return nn.functional.conv1d(x[:, :, :u], torch.ones(2, 3, 3))"
    )
    assert findings[0].hint.startswith("Inductor needs `2*Max(1, u0 - 2)` as a number")
    assert findings[0].hint.endswith(
        "(no workaround: no compile knob avoids a data-dependent guard: the fix is in the model "
        "(the hint names it))"
    )
    assert res["compile"].status is StageStatus.FAILED


@pytest.fixture(scope="module")
def float8_sum_package(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    """An ExportedProgram-only package that sums float8_e4m3fn values (CPU has no such kernel),
    and what plain torch raised compiling it."""
    out = tmp_path_factory.mktemp("float8") / "float8_sum.pt2"
    package = build(RECORDER, out, "unsupported_float8_sum")
    return package, json.loads(Path(f"{out}.raised.json").read_text())


def test_aot547_a_dtype_the_device_lacks_names_the_op_the_dtype_and_the_model_line(
    dynamic: Dynamic, float8_sum_package: tuple[Path, list[str]]
) -> None:
    package, raised = float8_sum_package
    # plain torch 2.13-2.15: eager says "sum_cpu" not implemented for 'Float8_e4m3fn', and the
    # compile raises InductorError(KeyError: torch.float8_e4m3fn)
    assert raised == ["InductorError", "KeyError"]
    eager = json.loads(Path(f"{package}.eager.json").read_text())
    assert not eager["ok"] and "not implemented for 'Float8_e4m3fn'" in eager["error"]
    res, findings = dynamic(str(package), use_cache=False)
    assert [f.code for f in findings] == ["AOT547"]
    message = findings[0].message
    assert (
        "failed: aten.sum.default on float8_e4m3fn is not supported on this device by the "
        "compile: no table of the compiler has an entry for it" in message
    )
    assert "(KeyError: torch.float8_e4m3fn, raised at torch/_inductor/" in message
    assert " at node sum_1 (aten.sum.default; inputs convert_element_type: [4, 8] " in message
    assert "float8_e4m3fn) at " in message and "record_compile_failures.py:" in message
    assert message.endswith("in forward: return x.to(torch.float8_e4m3fn).sum()")
    assert findings[0].category.value == "compile"
    assert res["compile"].status is StageStatus.FAILED
    # no knob makes the device support the dtype: none is tried, the next step says so
    assert "a dtype the device supports" in findings[0].hint
    assert findings[0].hint.endswith(
        "(no workaround: no compile knob makes the device support a dtype or an op: the fix is "
        "in the model (the hint names it))"
    )
    assert "workaround" not in res["compile"].detail


def test_aot543_cpp_codegen_turned_off_is_proven_to_compile_without_that_config(
    dynamic: Dynamic, pkg: Callable[[str], Path]
) -> None:
    # plain torch: AOTInductor's wrapper is C++, and the config that turns Inductor's C++ backend
    # off stops it with InductorError(CppWrapperCodegenError) (2.13-2.15)
    code = (
        "import json, os, tempfile, torch\n"
        "ep = torch.export.export(torch.nn.Linear(4, 4), (torch.randn(2, 4),))\n"
        "try:\n"
        "    torch._inductor.aoti_compile_and_package(ep, package_path=os.path.join("
        "tempfile.mkdtemp(), 'm.pt2'), inductor_configs={'disable_cpp_codegen': True})\n"
        "    print(json.dumps(None))\n"
        "except Exception as exc:\n"
        "    print(json.dumps(type(exc.inner_exception).__name__))\n"
    )
    assert plain_torch(code) == "CppWrapperCodegenError"
    configs = {"disable_cpp_codegen": True}
    res, findings = dynamic(str(pkg("ep_only.pt2")), use_cache=False, inductor_configs=configs)
    assert [f.code for f in findings] == ["AOT543"]
    assert findings[0].message.endswith(
        "failed: AOTInductor's C++ wrapper generation failed (C++ wrapper codegen error: C++ "
        "codegen is disabled)"
    )
    assert res["compile"].status is StageStatus.FAILED
    # rebuilt without the config, it compiles and matches eager (TinyMLP compiles with plain
    # torch's defaults: the fixture set's aoti packages are built so)
    assert findings[0].hint.startswith(
        "workaround, proven: without disable_cpp_codegen: compile with inductor_configs={}; "
        "compiled and matched eager on the sample inputs (1 output(s), "
    )
    assert findings[0].hint.endswith(
        "Else: AOTInductor's wrapper is C++: compile without the disable_cpp_codegen inductor "
        "config, which turns Inductor's C++ backend off"
    )


def test_aot546_no_working_cxx_is_the_toolchain(
    dynamic: Dynamic, pkg: Callable[[str], Path]
) -> None:
    # the C++ compiler torch picks ($CXX) is /bin/false: plain torch raises InvalidCxxCompiler
    code = (
        "import json, os, tempfile, torch\n"
        "ep = torch.export.export(torch.nn.Linear(4, 4), (torch.randn(2, 4),))\n"
        "try:\n"
        "    torch._inductor.aoti_compile_and_package(ep, package_path=os.path.join("
        "tempfile.mkdtemp(), 'm.pt2'))\n"
        "    print(json.dumps(None))\n"
        "except Exception as exc:\n"
        "    print(json.dumps(type(exc.inner_exception).__name__))\n"
    )
    assert plain_torch(code, env={"CXX": "/bin/false"}) == "InvalidCxxCompiler"
    res, findings = dynamic(
        str(pkg("ep_only.pt2")), use_cache=False, extra_env={"CXX": "/bin/false"}
    )
    assert [f.code for f in findings] == ["AOT546"]
    assert "the compile's toolchain is missing or unusable (No working C++ compiler found" in (
        findings[0].message
    )
    assert findings[0].category.value == "environment"
    assert res["compile"].status is StageStatus.FAILED
    # no knob avoids it: none is tried, the next step says so
    assert findings[0].hint.endswith(
        "(no workaround: no compile knob replaces a missing or unusable toolchain: install it)"
    )
    assert "workaround" not in res["compile"].detail
