"""Triton's torch_aoti backend against real packages built through the public API (a dynamic
batch Dim(min=1, max=32)) and config files written the way the backend's docs show them
(tests/data/triton/README.md): a matching config passes, each mismatch is found naming both
sides, `serving-config` round-trips, model repositories are laid out as the backend reads them."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from aotipre.api import CheckOptions, check
from aotipre.cli import main
from aotipre.serving.triton import input_slots, load_serving_config, output_slots

pytestmark = pytest.mark.slow

DATA = Path(__file__).resolve().parents[1] / "data" / "triton"
BUILD = Path(__file__).resolve().parent / "build_serving.py"


@pytest.fixture(scope="session")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("serving")
    proc = subprocess.run(
        [sys.executable, str(BUILD), str(out)], capture_output=True, text=True, timeout=900
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    return out


def _serving(built: Path, package: str, config: str) -> list:  # type: ignore[type-arg]
    opts = CheckOptions(static_only=True, serving_config=load_serving_config(str(DATA / config)))
    report = check(str(built / package), opts)
    assert report.error is None, report.error
    return [f for f in report.findings if f.code in _SERVING]


@pytest.mark.parametrize(
    ("package", "config"),
    [
        ("mlp.pt2", "mlp_ordinal.pbtxt"),
        ("mlp.pt2", "mlp_forward_names.pbtxt"),
        ("ranker.pt2", "ranker_ordinal.pbtxt"),
    ],
)
def test_a_matching_config_passes(built: Path, package: str, config: str) -> None:
    assert _serving(built, package, config) == []


def test_names_are_the_backends_own(built: Path) -> None:
    """The backend's names, computed from the call spec the loader reports the way
    model_state.cc LoadModel does, are the names aotipre derives from the package."""
    from aotipre.pt2.reader import read_package

    specs = json.loads((built / "call_specs.json").read_text())

    def names(node: dict) -> list[str]:  # type: ignore[type-arg]
        kind = node.get("type")
        if kind is None:
            return []
        ctx = json.loads(node["context"]) if isinstance(node["context"], str) else node["context"]
        keys = ctx if kind == "builtins.dict" else list(range(len(node["children_spec"])))
        out = []
        for key, child in zip(keys, node["children_spec"]):
            sub = names(child)
            out += [f"[{key}]{s}" for s in sub] if sub else [f"[{key}]"]
        return out

    for name in ("mlp", "ranker"):
        in_spec = json.loads(specs[name][0])[1]
        out_spec = json.loads(specs[name][1])[1]
        args, kwargs = in_spec["children_spec"]
        expected_in = ["ARGS" + n for n in names(args)] + [
            "KWARGS" + k for k in json.loads(kwargs["context"])
        ]
        expected_out = ["RESULT" + n for n in names(out_spec)] or ["RESULT"]
        model = read_package(built / f"{name}.pt2").models[0]
        ins, _ = input_slots(model)
        outs, _ = output_slots(model)
        assert [s.name for s in ins] == expected_in
        assert outs is not None and [s.name for s in outs] == expected_out


def test_aot045_fp16_where_the_package_takes_float32(built: Path) -> None:
    (f,) = _serving(built, "mlp.pt2", "mlp_bad_fp16.pbtxt")
    assert f.code == "AOT045" and f.severity.value == "error"
    assert "TYPE_FP16" in f.message and "float32" in f.message and "args[0]" in f.message


def test_aot047_max_batch_size_above_the_exported_max(built: Path) -> None:
    found = _serving(built, "mlp.pt2", "mlp_bad_batch64.pbtxt")
    errors = [f for f in found if f.severity.value == "error"]
    assert [f.code for f in errors] == ["AOT047"]
    assert "max_batch_size: 64" in errors[0].message and "max 32" in errors[0].message
    # the compiled code refuses a batch of 1 (AOTInductor's min 2): a lone request fails
    lone = [f for f in found if f.severity.value == "warning"]
    assert [f.code for f in lone] == ["AOT082"] and "batch of 1" in lone[0].message
    assert [f.code for f in found if f.severity.value == "info"] == ["AOT083"]


def test_each_batching_problem_is_ignored_on_its_own(
    built: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """One code, one problem: ignoring the lone-request warning and the batching caveat leaves
    the max_batch_size error (exit 1), and ignoring that error leaves the warning."""
    config = str(DATA / "mlp_bad_batch64.pbtxt")
    base = ["check", str(built / "mlp.pt2"), "--serving-config", config, "--static-only"]
    capsys.readouterr()
    assert main([*base, "--ignore", "AOT082,AOT083", "--format", "json"]) == 1
    left = {f["code"] for f in json.loads(capsys.readouterr().out)["findings"]}
    assert "AOT047" in left and not left & {"AOT082", "AOT083"}
    assert main([*base, "--ignore", "AOT047", "--format", "json"]) == 0
    left = {f["code"] for f in json.loads(capsys.readouterr().out)["findings"]}
    assert "AOT047" not in left and {"AOT082", "AOT083"} <= left


def test_aot043_aot044_two_inputs_where_the_package_takes_three(built: Path) -> None:
    found = _serving(built, "ranker.pt2", "ranker_two_inputs.pbtxt")
    count = [f for f in found if f.code == "AOT043" and f.severity.value == "error"]
    assert count and "declares 2 inputs, the package takes 3" in count[0].message
    (name,) = [f for f in found if f.code == "AOT044"]
    assert "KWARGS[mask]" in name.message and "INPUT__2" in name.message
    assert any(f.code == "AOT043" and f.severity.value == "info" for f in found)


def test_aot048_kind_gpu_for_a_cpu_package(built: Path) -> None:
    (f,) = _serving(built, "mlp.pt2", "mlp_bad_gpu.pbtxt")
    assert f.code == "AOT048" and "KIND_GPU" in f.message and "cpu" in f.message


def test_aot040_libtorch_platform(built: Path) -> None:
    (f,) = _serving(built, "mlp.pt2", "mlp_bad_libtorch.pbtxt")
    assert f.code == "AOT040" and "pytorch_libtorch" in f.message and "torch_aoti" in f.message


def test_aot046_static_dims_that_differ(built: Path) -> None:
    found = _serving(built, "mlp.pt2", "mlp_bad_dims.pbtxt")
    assert [f.code for f in found] == ["AOT046", "AOT046"]
    assert "64, outside the range [2, 32]" in found[0].message
    assert "dim 1 is 10" in found[1].message and "is 8" in found[1].message


def test_aot049_sequence_batching(built: Path) -> None:
    (f,) = _serving(built, "mlp.pt2", "mlp_bad_sequence.pbtxt")
    assert f.code == "AOT049" and "sequence_batching" in f.message


def _repo(built: Path, tmp_path: Path, batch: int = 0) -> Path:
    repo = tmp_path / "repo"
    for name in ("mlp", "ranker"):
        (repo / name / "1").mkdir(parents=True)
        shutil.copy(built / f"{name}.pt2", repo / name / "1" / "model.pt2")
        args = ["serving-config", str(repo / name / "1" / "model.pt2")]
        args += ["-o", str(repo / name / "config.pbtxt"), "--max-batch-size", str(batch)]
        assert main(args) == 0
    return repo


def test_serving_config_round_trips_through_the_check(
    built: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = _repo(built, tmp_path)
    text = (repo / "ranker" / "config.pbtxt").read_text()
    assert 'platform: "torch_aoti"' in text and "TYPE_INT64" in text and "dims: [-1, 16]" in text
    capsys.readouterr()
    assert main(["check", str(repo), "--static-only", "--format", "json"]) == 0
    reports = json.loads(capsys.readouterr().out)["reports"]
    assert len(reports) == 2
    assert not [f for r in reports for f in r["findings"] if f["code"] in _SERVING]


def test_serving_config_with_batching_round_trips(
    built: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The writer says, when it writes the config, every finding the check then gives it:
    the package's compiled batch min of 2 (AOTInductor's Dim(min=1)) refuses a lone request
    whatever the config says, so the writer cannot write it away."""
    capsys.readouterr()
    repo = _repo(built, tmp_path, batch=32)
    said = capsys.readouterr().err
    assert "dims: [8]" in (repo / "mlp" / "config.pbtxt").read_text()
    assert main(["check", str(repo / "mlp"), "--static-only", "--format", "json"]) == 0
    found = [f for f in json.loads(capsys.readouterr().out)["findings"]]
    serving = {(f["code"], f["severity"]) for f in found if f["code"] in _SERVING}
    # the lone-request warning and the README's batching caveat, nothing else
    assert serving == {("AOT082", "warning"), ("AOT083", "info")}
    for code, severity in serving:
        assert f"aotipre: {severity}: {code} " in said
    assert said.count("aotipre: warning: AOT082 ") == 2  # once per model written


_SERVING = {f"AOT04{i}" for i in range(10)} | {"AOT082", "AOT083"}


def test_serving_config_refuses_a_batch_above_the_max_and_its_input(
    built: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pkg = tmp_path / "m.pt2"
    shutil.copy(built / "mlp.pt2", pkg)
    assert main(["serving-config", str(pkg), "--max-batch-size", "64"]) == 2
    assert "exported with max 32" in capsys.readouterr().err
    assert main(["serving-config", str(pkg), "-o", str(pkg)]) == 2
    assert "refusing to overwrite" in capsys.readouterr().err
    assert pkg.read_bytes()[:2] == b"PK"


def test_aot041_repository_layout(
    built: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = _repo(built, tmp_path)
    # a package under another name than the backend opens
    (repo / "mlp" / "1" / "model.pt2").rename(repo / "mlp" / "1" / "mlp.pt2")
    # no version folder at all
    shutil.move(str(repo / "ranker" / "1" / "model.pt2"), str(repo / "ranker" / "model.pt2"))
    (repo / "ranker" / "1").rmdir()
    capsys.readouterr()
    assert main(["check", str(repo), "--static-only", "--format", "json"]) == 2
    reports = {
        r["package"]["path"] if r["package"] else r["error"]: r
        for r in json.loads(capsys.readouterr().out)["reports"]
    }
    mlp = next(r for k, r in reports.items() if "mlp.pt2" in k)
    (f,) = [f for f in mlp["findings"] if f["code"] == "AOT041"]
    assert "model.pt2, which does not exist" in f["message"] and "mlp.pt2" in f["message"]
    ranker = next(r for r in reports.values() if r["error"] and "ranker" in r["error"])
    assert any(
        f["code"] == "AOT041" and "no numeric version folder" in f["message"]
        for f in ranker["findings"]
    )


def test_aot042_a_package_whose_model_is_not_named_model(built: Path) -> None:
    """package_aoti names the model 'mlp': the backend asks the loader for 'model'."""
    (f,) = _serving(built, "renamed.pt2", "mlp_ordinal.pbtxt")
    assert f.code == "AOT042" and "'model'" in f.message and "'mlp'" in f.message
