"""The torch_aoti rules on ModelInfo objects built by hand, config files that are not configs,
and the install line without the serving extra (fast: no package compiled)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from aotipre.cli import main
from aotipre.foundation.errors import UsageError
from aotipre.pt2.spec import (
    AotiPart,
    CallSignature,
    Dim,
    DimBound,
    InputSpec,
    ModelInfo,
    PackageInfo,
    SymbolRange,
    TensorSpec,
    TreeSpec,
)
from aotipre.serving import pbtxt, repository
from aotipre.serving.triton import ServingConfig, check_config, config_for

LEAF = TreeSpec(type=None)


def _model(device: str = "cuda", dtype: str = "float32", batch_max: int = 32) -> ModelInfo:
    def tensor(*shape: Dim) -> TensorSpec:
        bounds = (DimBound(2, batch_max), *([None] * (len(shape) - 1)))
        return TensorSpec(dtype, shape, None, device, bounds)

    b = Dim(expr="s0")
    inputs = (
        InputSpec("x", 0, "args[0]", "tensor", tensor(b, Dim(8)), 0),
        InputSpec("y", 1, "args[1]", "tensor", tensor(b, Dim(8)), 1),
        InputSpec("mask", 2, "kwargs['mask']", "tensor", tensor(b, Dim(8)), 2),
    )
    aoti = AotiPart("d", device, None, None, (), None, {}, None, (), (), False)
    return ModelInfo(
        name="model",
        has_exported_program=True,
        aoti=aoti,
        torch_version=None,
        schema_version=None,
        inputs=inputs,
        outputs=(TensorSpec(dtype, (b, Dim(4)), None, device),),
        symbols=(SymbolRange("s0", 2, batch_max),),
        signature=CallSignature(args=(LEAF, LEAF), kwargs=(("mask", LEAF),)),
        contract_source="exported_program",
        output_tree=LEAF,
    )


def _package(model: ModelInfo) -> PackageInfo:
    return PackageInfo("p.pt2", "both", "p", "pt2", "0", (model,), ())


def _findings(text: str, model: ModelInfo) -> list:  # type: ignore[type-arg]
    config = pbtxt.parse_config(text, "config.pbtxt")
    return check_config(ServingConfig(config, "config.pbtxt"), _package(model), [model])


def test_generated_config_passes_and_names_inputs_by_position() -> None:
    model = _model()
    config = config_for(model, name="m", max_batch_size=16)
    text = pbtxt.format_config(config)
    assert text.count('name: "INPUT__') == 3 and "KIND_GPU" in text and "dims: [8]" in text
    found = _findings(text, model)
    assert {(f.code, f.severity.value) for f in found} == {
        ("AOT082", "warning"),  # the compiled min 2: a lone request is refused
        ("AOT083", "info"),
    }


def test_each_mismatch_names_both_sides() -> None:
    model = _model(device="cuda")
    text = """
        platform: "torch_aoti"
        max_batch_size: 64
        input [ { name: "ARGS[0]" data_type: TYPE_FP16 dims: [ 9 ] },
                { name: "INPUT__0" data_type: TYPE_FP32 dims: [ 8 ] } ]
        output [ { name: "RESULT" data_type: TYPE_INT64 dims: [ 4 ] } ]
        instance_group [ { kind: KIND_CPU } ]
    """
    found: dict[str, str] = {}
    for f in _findings(text, model):
        if f.severity.value == "error":
            found[f.code] = found.get(f.code, "") + f.message + "\n"
    assert "declares 2 inputs, the package takes 3" in found["AOT043"]
    assert "both name the package's input" in found["AOT044"]
    assert (
        "'ARGS[0]' is TYPE_FP16 (float16), the package's input x (args[0]) is float32"
        in (found["AOT045"])
    )
    assert "'RESULT' is TYPE_INT64 (int64), the package's output 0 is float32" in found["AOT045"]
    assert "dim 0 is 9" in found["AOT046"] and "is 8" in found["AOT046"]
    assert "max_batch_size: 64" in found["AOT047"] and "max 32" in found["AOT047"]
    assert "KIND_CPU" in found["AOT048"] and "cuda" in found["AOT048"]


def test_bfloat16_has_no_triton_type() -> None:
    model = _model(device="cpu", dtype="bfloat16")
    with pytest.raises(ValueError, match="no TYPE_ for"):
        config_for(model, name="m")
    text = (
        'platform: "torch_aoti" input [ { name: "INPUT__0" data_type: TYPE_BF16 dims: [-1, 8] } ]'
    )
    found = [f for f in _findings(text, model) if f.code == "AOT045"]
    assert found and "TYPE_BF16" in found[0].message and "Unsupported datatype" in found[0].message


@pytest.mark.parametrize(
    ("content", "expect"),
    [
        (b"\xff\xfe\x00binary", "not UTF-8"),
        (b'platform: "torch_aoti"\nbogus_field: 1\n', "has no field named"),
        (b"input { name: ", "not a Triton model configuration"),
        (b'default_model_name: "x.pt2"', "default_model_filename"),
        (b"input {" * 20000, "not a Triton model configuration"),
        (b"#" * (pbtxt.MAX_CONFIG_BYTES + 1), "more than aotipre reads"),
    ],
)
def test_a_hostile_config_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes, expect: str
) -> None:
    cfg = tmp_path / "config.pbtxt"
    cfg.write_bytes(content)
    assert main(["check", "missing.pt2", "--serving-config", str(cfg), "--static-only"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and expect in err and "Traceback" not in err


def test_a_fifo_or_a_folder_as_config_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fifo = tmp_path / "fifo.pbtxt"
    os.mkfifo(fifo)
    for path, expect in ((fifo, "not a regular file"), (tmp_path, "is a directory")):
        assert main(["check", "x.pt2", "--serving-config", str(path), "--static-only"]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and expect in err


def test_without_the_serving_extra_one_install_line(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(pbtxt, "_module", None)
    monkeypatch.setitem(sys.modules, "tritonclient", None)  # `import tritonclient` fails
    monkeypatch.delitem(sys.modules, "tritonclient.grpc.model_config_pb2", raising=False)
    cfg = tmp_path / "config.pbtxt"
    cfg.write_text('platform: "torch_aoti"')
    assert main(["check", "x.pt2", "--serving-config", str(cfg), "--static-only"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "pip install 'aotipre[serving]'" in err
    with pytest.raises(UsageError, match="tritonclient"):
        pbtxt.model_config_pb2()


def test_a_model_folder_is_told_apart_from_an_extracted_package(tmp_path: Path) -> None:
    extracted = tmp_path / "pkg"
    (extracted / "pkg").mkdir(parents=True)
    (extracted / "pkg" / "archive_format").write_text("pt2")
    model_dir = tmp_path / "repo" / "m"
    (model_dir / "1").mkdir(parents=True)
    (model_dir / "config.pbtxt").write_text('platform: "torch_aoti"')
    assert repository.expand(str(extracted)) is None
    assert not repository.is_model_dir(extracted) and repository.is_model_dir(model_dir)
    assert repository.is_repository(tmp_path / "repo")
    ((package, serving),) = repository.expand(str(tmp_path / "repo")) or []
    assert package.endswith(os.path.join("m", "1", "model.pt2")) and serving.package is None
    assert "does not exist" in serving.layout[0].message
