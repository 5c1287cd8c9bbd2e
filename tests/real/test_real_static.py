"""Static verdicts on packages built with the public API, checked against what plain torch does
with the same files in a fresh process (plain_torch.json, written by
scripts/build_real_models.py; a copy of one run is in tests/data/real/plain_torch.json)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from aotipre.api import CheckOptions, check
from aotipre.findings import Report, Severity, Verdict

pytestmark = pytest.mark.slow  # the first use builds the packages (about 2 minutes on 2 cores)


def _check(real_dir: Path, package: str, inputs: str | None = None, **kw: Any) -> Report:
    opts = CheckOptions(
        inputs=str(real_dir / f"{package}_{inputs}.pt") if inputs else None,
        static_only=True,
        **kw,
    )
    return check(real_dir / f"{package}.pt2", opts)


PLAIN_CALL = """
import sys, torch
m = torch._inductor.aoti_load_package(sys.argv[1])
args, kwargs = torch.load(sys.argv[2])
try:
    m(*args, **kwargs)
except Exception as exc:
    print(f"raised: {exc}", file=sys.stderr)
"""


def _plain_stderr(package: Path, inputs: Path) -> str:
    """What plain torch prints on stderr calling the package on the inputs, in a fresh
    process (a default deployment: no AOTI_RUNTIME_CHECK_INPUTS)."""
    env = {k: v for k, v in os.environ.items() if k != "AOTI_RUNTIME_CHECK_INPUTS"}
    proc = subprocess.run(
        [sys.executable, "-c", PLAIN_CALL, str(package), str(inputs)],
        capture_output=True, text=True, timeout=600, env=env, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stderr


def _errors(report: Report) -> list[str]:
    return sorted(f.code for f in report.findings if f.severity is Severity.ERROR)


def _one(report: Report, code: str) -> Any:
    (found,) = [f for f in report.findings if f.code == code]
    return found


@pytest.mark.parametrize(
    "package, inputs",
    [("encoder", "ok"), ("decoder", "ok"), ("scalars", "ok"), ("vision", "ok")],
)
def test_healthy_inputs_pass(
    real_dir: Path, plain_torch: dict[str, Any], package: str, inputs: str
) -> None:
    call = plain_torch[package]["calls"][inputs]
    assert call["status"] == "ran" and call["equals_eager"] is True  # ground truth
    report = _check(real_dir, package, inputs)
    assert _errors(report) == [], report.findings
    assert report.verdict is Verdict.PASS


def test_encoder_mask_of_another_length(real_dir: Path, plain_torch: dict[str, Any]) -> None:
    """A default deployment runs it silently and returns garbage (eager raises): an error, and
    no stride finding with a `.contiguous()` hint for a contiguous mask (a false alarm before)."""
    call = plain_torch["encoder"]["calls"]["mask_seq_differs"]
    assert call["status"] == "ran" and "eager" in call
    report = _check(real_dir, "encoder", "mask_seq_differs")
    assert _errors(report) == ["AOT305"]
    f = _one(report, "AOT305")
    assert f.input == "attention_mask" and (f.expected, f.actual) == (12, 13)
    assert not [g for g in report.findings if g.code == "AOT307"]


@pytest.mark.parametrize(
    "package, name, value, at",
    [("encoder", "args[0]", 120, [1, 4]), ("decoder", "args[0]", 100, [0, 0])],
)
def test_token_id_past_the_vocabulary_is_found_before_running(
    real_dir: Path, plain_torch: dict[str, Any], package: str, name: str, value: int, at: list[int]
) -> None:
    """AOTI-only packages: the bound comes from the kernel's own index check, mapped to the
    wrapper input whose values it loads; plain torch raises `index out of bounds ... < 100L`
    (torch 2.11 raises `run_func_(...) API call failed` and prints the check on stderr).
    (An AOTI-only package does not record positional argument names: `args[0]`.)"""
    call = plain_torch[package]["calls"]["id_past_vocab"]
    assert call["status"] == "raised"
    said = call["error"]
    if "API call failed" in said:
        said = _plain_stderr(real_dir / f"{package}.pt2", real_dir / f"{package}_id_past_vocab.pt")
    assert "index out of bounds" in said, said
    report = _check(real_dir, package, "id_past_vocab")
    f = _one(report, "AOT308")
    assert f.severity is Severity.ERROR
    assert (f.input, f.actual, f.expected) == (name, value, "0..99")
    assert f"holds {value} at position {at}" in f.message


def test_state_dict_as_inputs_is_one_clear_finding(
    real_dir: Path, plain_torch: dict[str, Any]
) -> None:
    assert plain_torch["encoder"]["calls"]["state_dict"]["type"] == "OrderedDict"
    report = _check(real_dir, "encoder", "state_dict")
    # the package's own facts (AOT051/AOT052: what its .so was compiled for and by) are infos
    # about the package, not about the inputs: one finding about the inputs
    about_inputs = [f for f in report.findings if f.code not in ("AOT051", "AOT052")]
    assert [f.code for f in about_inputs] == ["AOT109"]
    assert "a state_dict" in about_inputs[0].message


def test_batch_one_below_the_compiled_min_of_two(real_dir: Path) -> None:
    """Dim(min=1) compiles to a runtime check of >= 2: the hint says how to really accept 1."""
    report = _check(real_dir, "decoder", "batch_one")
    f = _one(report, "AOT303")
    assert f.actual == 1
    assert "smaller Dim min" not in f.message
    assert "backed_size_oblivious=True" in f.hint and "pad" in f.hint
    assert "re-export with a smaller Dim min" not in f.hint


def test_aoti_only_specialized_scalars_are_named_as_ignored(
    real_dir: Path, plain_torch: dict[str, Any]
) -> None:
    """The compiled model ignores alpha and normalize: other values return exactly the output
    of the exported ones (plain torch record). The package cannot tell the exported values."""
    calls = plain_torch["scalars"]["calls"]
    for key in ("other_alpha", "other_normalize"):
        assert calls[key]["status"] == "ran"
        assert calls[key]["equals_example_output"] is True
        assert calls[key]["equals_eager"] is False
    report = _check(real_dir, "scalars", "other_alpha")
    f = _one(report, "AOT108")
    assert f.severity is Severity.WARNING
    assert "any value passed is ignored" in f.message
    assert "args[1]=2.0" in f.message and "normalize (kwargs['normalize'])=True" in f.message
    assert report.verdict is Verdict.PASS  # a warning: the package cannot prove the value differs


def test_extra_positional_scalar_is_silently_ignored(
    real_dir: Path, plain_torch: dict[str, Any]
) -> None:
    call = plain_torch["scalars"]["calls"]["extra_top_k"]
    assert call["status"] == "ran" and call["equals_example_output"] is True
    assert call["shape"] != call["eager_shape"]  # eager honours top_k=5, the package does not
    report = _check(real_dir, "scalars", "extra_top_k")
    f = _one(report, "AOT101")
    assert "silently ignores the extra non-tensor value(s) 5" in f.message


def test_exported_program_archive(real_dir: Path, plain_torch: dict[str, Any]) -> None:
    entry = plain_torch["scalars_ep"]
    assert "Failed to find a generated cpp file or so file" in entry["aoti_load_package"]
    assert "Guard failed: alpha == 0.5" in entry["calls"]["other_alpha"]["error"]
    report = _check(real_dir, "scalars_ep", "ok")
    assert _errors(report) == ["AOT015"]
    info = _one(report, "AOT107")
    assert "alpha (args[1]) = 0.5" in info.message and "= True" in info.message
    deploy = _check(real_dir, "scalars_ep", "ok", compile_at_deploy=True)
    assert deploy.verdict is Verdict.PASS
    bad = _check(real_dir, "scalars_ep", "other_alpha", compile_at_deploy=True)
    f = _one(bad, "AOT105")
    assert f.severity is Severity.ERROR and (f.expected, f.actual) == (0.5, 2.0)
    assert "silently computes with 0.5" in f.message
    assert not [g for g in bad.findings if g.code == "AOT107"]


def test_multi_model_package(real_dir: Path, plain_torch: dict[str, Any]) -> None:
    entry = plain_torch["multi"]
    assert (
        "Failed to find a generated cpp file or so file for model 'model'"
        in (entry["aoti_load_package"])
    )
    assert entry["load_package"] == {"encoder": "loaded", "decoder": "loaded"}
    report = _check(real_dir, "multi")
    f = _one(report, "AOT016")
    assert "load_package(path, model_name='decoder')" in f.message
    assert "load_package(path, model_name='encoder')" in f.message


def test_torchscript_zip_named_pt2(real_dir: Path, plain_torch: dict[str, Any]) -> None:
    assert "Failed to find" in plain_torch["scripted"]["aoti_load_package"]
    report = _check(real_dir, "scripted")
    assert report.verdict is Verdict.ERROR
    assert report.error is not None and "TorchScript archive (torch.jit.save)" in report.error
    assert [f.code for f in report.findings] == ["AOT004"]


def test_dim_names_are_not_recorded(real_dir: Path) -> None:
    """The encoder was exported with Dim("batch") and Dim("seq"), scalars_ep with Dim("batch"):
    torch 2.13 keeps only its own symbols (range_constraints keys, wrapper.cpp bounds), so the
    report names dynamic dims s<N> plus the inputs and dims that carry them."""
    import json
    import re
    import zipfile

    with zipfile.ZipFile(real_dir / "scalars_ep.pt2") as zf:
        (member,) = [n for n in zf.namelist() if n.endswith("models/model.json")]
        data = json.loads(zf.read(member))
    assert data["range_constraints"] and all(
        re.fullmatch(r"s\d+", k) for k in data["range_constraints"]
    )
    report = _check(real_dir, "encoder")
    dims = report.package["models"][0]["dynamic_dims"]  # type: ignore[index]
    assert dims and all(re.fullmatch(r"s\d+", d["symbol"]) and d["name"] is None for d in dims)


@pytest.mark.parametrize(
    "inputs, strides", [("channels_last", "[768, 1, 48, 3]"), ("transposed", "[768, 256, 1, 16]")]
)
def test_images_in_another_memory_layout(
    real_dir: Path, plain_torch: dict[str, Any], inputs: str, strides: str
) -> None:
    """The same images, channels_last or with H and W swapped in memory: a default deployment
    runs them silently and returns other outputs than eager (plain torch). Statically a warning
    naming the strides that says so may happen (only a run tells: tests/runner/
    test_sample_layout_real.py); an error where the deployment's runtime check refuses it."""
    call = plain_torch["vision"]["calls"][inputs]
    assert call["status"] == "ran" and call["equals_eager"] is False
    report = _check(real_dir, "vision", inputs)
    f = _one(report, "AOT307")
    assert _errors(report) == [] and f.severity is Severity.WARNING
    assert f"the input's strides are {strides}" in f.message
    assert "may compute wrong results" in f.message
    refused = _check(real_dir, "vision", inputs, deployment_checks_inputs=True)
    assert _errors(refused) == ["AOT307"]


def test_grayscale_images_for_a_three_channel_stem(
    real_dir: Path, plain_torch: dict[str, Any]
) -> None:
    """1 channel where the compiled conv takes 3: eager raises, a default deployment runs it
    silently (plain torch): an error before anything runs."""
    call = plain_torch["vision"]["calls"]["gray"]
    assert call["status"] == "ran" and "3 channels, but got 1" in call["eager"]
    report = _check(real_dir, "vision", "gray")
    assert _errors(report) == ["AOT302"]
    f = _one(report, "AOT302")
    assert (f.dim, f.expected, f.actual) == (1, 3, 1)
