"""Members that loading a package unpickles without restriction (AOT081): weights and constants
stored with `use_pickle: true` (torch.load(weights_only=False)), opaque objects (pickle.loads),
and ExportedProgram artifacts a weights-only load refuses (torch falls back to
weights_only=False). Found by the reader from configs and member names, statically; never
unpickled; the dynamic stages do not load such a package without --allow-pickle.

The hostile members create a marker file when unpickled: the marker proves nothing unpickled
them (and, in one subprocess with plain torch, that torch itself does)."""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest

from aotipre.checks.package import check_package
from aotipre.findings import Finding, Severity, StageStatus
from aotipre.pt2.reader import FALLBACK, PickleMember, pickle_members, read_package
from aotipre.runner.stages import DynamicOptions, run_dynamic_stages
from tests.hardening.craft import Members, Pkl, read_members, torch_save_zip, write_members

DATA = Path(__file__).resolve().parents[1] / "data"
EP_ONLY = DATA / "torch214" / "ep_only.pt2"
"""An ExportedProgram archive written by torch 2.14 (root `ep_only`, model `model`): four
weights stored raw (use_pickle false), sample inputs, no AOTI code."""
FAKE = str(Path(__file__).resolve().parents[1] / "fakes" / "fake_torch_worker.py")


class _Marker:
    """Unpickling this creates a file: proof that somebody unpickled the member."""

    def __init__(self, path: Path) -> None:
        self.path = str(path)

    def __reduce__(self) -> tuple[Any, ...]:
        return (open, (self.path, "w"))


def hostile_save(marker: Path) -> bytes:
    """A torch.save zip whose data.pkl creates `marker` when unpickled."""
    return torch_save_zip(pickle.dumps(_Marker(marker), protocol=2))


def craft(dst: Path, edit: Any, src: Path = EP_ONLY) -> Path:
    return write_members(dst, edit(read_members(src)))


def pickled_weight(marker: Path) -> Any:
    """fc1.weight marked use_pickle, its member a hostile torch.save file."""

    def edit(members: Members) -> Members:
        out = []
        for name, data in members:
            if name.endswith("data/weights/model_weights_config.json"):
                config = json.loads(data)
                config["config"]["fc1.weight"]["use_pickle"] = True
                data = json.dumps(config).encode()
            elif name.endswith("data/weights/weight_0"):
                data = hostile_save(marker)
            out.append((name, data))
        return out

    return edit


def aot081(findings: list[Finding]) -> list[Finding]:
    return [f for f in findings if f.code == "AOT081"]


def test_real_packages_hold_no_pickles() -> None:
    """Packages torch 2.11 and 2.14 wrote (weights raw, plain sample inputs): nothing found."""
    paths = sorted(DATA.glob("torch21*/*.pt2"))
    assert len(paths) >= 10
    for path in paths:
        info = read_package(path)
        assert pickle_members(info) == (), path
        assert aot081(check_package(info, list(info.models))) == [], path


def test_a_pickled_weight_is_an_error_and_never_unpickled(tmp_path: Path) -> None:
    """`aotipre check --inputs`: the static finding names the member, what torch does with it
    and what to do; every dynamic stage is skipped for it; the marker is never created."""
    marker = tmp_path / "unpickled"
    package = craft(tmp_path / "ep_only.pt2", pickled_weight(marker))
    inputs = tmp_path / "inputs.pt"
    with zipfile.ZipFile(EP_ONLY) as zf:
        inputs.write_bytes(zf.read("ep_only/data/sample_inputs/model.pt"))
    run = subprocess.run(
        [sys.executable, "-m", "aotipre", "check", "--no-config", str(package)]
        + ["--inputs", str(inputs), "--format", "json"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert run.returncode == 1, run.stderr
    report = json.loads(run.stdout)
    (finding,) = [f for f in report["findings"] if f["code"] == "AOT081"]
    assert finding["severity"] == "error" and finding["stage"] == "static"
    assert finding["actual"] == ["ep_only/data/weights/weight_0"]
    for said in (
        "fc1.weight (ep_only/data/weights/weight_0)",
        "use_pickle: true in ep_only/data/weights/model_weights_config.json",
        "torch.load(weights_only=False)",
        "without --allow-pickle",
    ):
        assert said in finding["message"], finding["message"]
    assert "--allow-pickle" in finding["hint"] and "re-export" in finding["hint"]
    dynamic = [s for s in report["stages"] if s.get("model") == "model"]
    assert dynamic and all(s["status"] == "skipped" and "AOT081" in s["detail"] for s in dynamic)
    assert not marker.exists()


def test_allow_pickle_on_the_command_line_makes_the_static_finding_a_warning(
    tmp_path: Path,
) -> None:
    """`--allow-pickle` reaches the static lane too: the same package, statically, is a warning
    and exit 0 (nothing is unpickled by a static check either way)."""
    marker = tmp_path / "unpickled"
    package = craft(tmp_path / "ep_only.pt2", pickled_weight(marker))
    argv = [sys.executable, "-m", "aotipre", "check", "--no-config", str(package)]
    codes = {}
    for flag in ("--no-allow-pickle", "--allow-pickle"):
        run = subprocess.run(
            [*argv, "--static-only", "--compile-at-deploy", flag, "--format", "json"],
            capture_output=True, text=True, timeout=300, cwd=tmp_path,
        )  # fmt: skip
        (finding,) = [f for f in json.loads(run.stdout)["findings"] if f["code"] == "AOT081"]
        codes[flag] = (run.returncode, finding["severity"])
    assert codes == {"--no-allow-pickle": (1, "error"), "--allow-pickle": (0, "warning")}
    assert not marker.exists()


def test_the_library_option_reaches_the_workers() -> None:
    """`CheckOptions(allow_pickle=True)` alone is the whole opt-in for a library caller: the
    stages' options it folds in say so too (api._dynamic_options)."""
    from aotipre import api

    assert api._dynamic_options(api.CheckOptions(allow_pickle=True)).allow_pickle is True
    assert api._dynamic_options(api.CheckOptions()).allow_pickle is False


def test_torch_itself_runs_the_crafted_pickles(tmp_path: Path) -> None:
    """What the finding prevents: plain torch.export.load runs the pickled weight (use_pickle)
    and the sample inputs a weights-only load refuses (its weights_only=False fallback)."""
    weight_marker, inputs_marker = tmp_path / "weight", tmp_path / "inputs"
    weight = craft(tmp_path / "weight.pt2", pickled_weight(weight_marker))
    inputs = craft(tmp_path / "inputs.pt2", sample_inputs(hostile_save(inputs_marker)))
    for path in (weight, inputs):
        assert aot081(check_package(read_package(path), []))
    code = (
        "import sys, torch\ntry:\n    torch.export.load(sys.argv[1])\nexcept Exception:\n    pass\n"
    )
    for path in (weight, inputs):
        subprocess.run([sys.executable, "-c", code, str(path)], timeout=300, capture_output=True)
    assert weight_marker.exists() and inputs_marker.exists()


def test_allow_pickle_makes_it_a_warning() -> None:
    """The override the code table documents: with the opt-in, a warning that says so."""
    info = read_package(EP_ONLY)
    item = PickleMember(
        "ep_only/data/weights/weight_0",
        "model",
        "weight",
        "fc1.weight",
        "torch.load(weights_only=False)",
        "use_pickle: true in ep_only/data/weights/model_weights_config.json",
    )
    info.extra["pickle_members"] = (item,)
    (strict,) = aot081(check_package(info, []))
    (trusted,) = aot081(check_package(info, [], allow_pickle=True))
    assert (strict.severity, trusted.severity) == (Severity.ERROR, Severity.WARNING)
    assert strict.model is None  # loading any model unpickles every program's members
    assert "--allow-pickle: the dynamic stages load it" in trusted.message


def test_the_flag_reaches_the_dynamic_stages() -> None:
    from aotipre.config import Settings, parse_flags

    settings = Settings().merged(parse_flags({"allow-pickle": True}))
    options = settings.check_options()
    assert options.dynamic is not None and options.dynamic.allow_pickle is True
    assert Settings().check_options().dynamic.allow_pickle is False  # type: ignore[union-attr]


def test_the_stages_load_it_only_with_the_opt_in(tmp_path: Path) -> None:
    """run_dynamic_stages itself refuses the package (a caller that skipped the static lane),
    with a "not run because" note and AOT081; with allow_pickle the stages run (on the fake
    worker, which opens nothing)."""
    marker = tmp_path / "unpickled"
    info = read_package(craft(tmp_path / "ep_only.pt2", pickled_weight(marker)))
    model = info.models[0]

    def run(allow: bool) -> tuple[dict[str, Any], list[Finding]]:
        options = DynamicOptions(
            worker_command=(sys.executable, FAKE),
            cache_dir=str(tmp_path / "cache"),
            timeout_s=30.0,
            probe=False,
            allow_pickle=allow,
        )
        results, findings = run_dynamic_stages(
            info, model, None, model.sample_inputs_member, options
        )
        return {r.name: r for r in results}, findings

    refused, findings = run(False)
    assert all(r.status is StageStatus.SKIPPED for r in refused.values())
    assert refused["load"].detail.startswith("not run because the package holds 1 member(s)")
    assert "--allow-pickle" in refused["load"].detail
    (finding,) = aot081(findings)
    assert finding.severity is Severity.ERROR and finding.model == "model"
    trusted, findings = run(True)
    assert trusted["load"].status is StageStatus.PASSED, trusted["load"].detail
    assert aot081(findings) == []
    assert not marker.exists()


def constants(config: dict[str, Any], files: dict[str, bytes]) -> Any:
    def edit(members: Members) -> Members:
        out = [
            (
                n,
                json.dumps({"config": config}).encode()
                if n.endswith("constants_config.json")
                else d,
            )
            for n, d in members
        ]
        return out + [(f"ep_only/data/constants/{k}", v) for k, v in files.items()]

    return edit


def test_pickled_constants_and_opaque_objects(tmp_path: Path) -> None:
    """A tensor constant with use_pickle (torch.load(weights_only=False)), an opaque object
    (pickle.loads) named by the config and one found by its name only; a torchbind object
    (torch's own pickler) and a raw tensor constant are not pickles."""
    marker = tmp_path / "unpickled"
    meta = {"is_param": False, "tensor_meta": None}
    config = {
        "scale": {"path_name": "tensor_0", "use_pickle": True, **meta},
        "table": {"path_name": "tensor_1", "use_pickle": False, **meta},
        "tok": {"path_name": "opaque_obj_0", "use_pickle": True, **meta},
        "ext": {"path_name": "custom_obj_0", "use_pickle": True, **meta},
    }
    hostile = pickle.dumps(_Marker(marker))
    files = {
        "tensor_0": hostile_save(marker),
        "tensor_1": b"\0" * 8,
        "opaque_obj_0": hostile,
        "opaque_obj_1": hostile,
        "custom_obj_0": b"torchbind",
    }
    info = read_package(craft(tmp_path / "c.pt2", constants(config, files)))
    found = {(i.member.rsplit("/", 1)[-1], i.kind, i.name, i.loader) for i in pickle_members(info)}
    assert found == {
        ("tensor_0", "constant", "scale", "torch.load(weights_only=False)"),
        ("opaque_obj_0", "opaque object", "tok", "pickle.loads"),
        ("opaque_obj_1", "opaque object", None, "pickle.loads"),
    }
    findings = check_package(info, list(info.models))
    messages = [f.message for f in aot081(findings)]
    assert len(messages) == 3 and all(f.severity is Severity.ERROR for f in aot081(findings))
    assert any("1 constant(s) stored as pickles" in m and "scale (" in m for m in messages)
    assert any("pickle.loads" in m and "tok (" in m for m in messages)
    assert any(f.code == "AOT080" for f in findings)  # the opaque objects' own warning stays
    assert not marker.exists()


def sample_inputs(data: bytes, member: str = "data/sample_inputs/model.pt") -> Any:
    def edit(members: Members) -> Members:
        out = [(n, data if n.endswith(member) else d) for n, d in members]
        if not any(n.endswith(member) for n, _ in members):
            out.append((f"ep_only/{member}", data))
        return out

    return edit


@pytest.mark.parametrize(
    ("member", "data", "why"),
    [
        (
            "data/sample_inputs/model.pt",
            torch_save_zip(Pkl.dump(Pkl.call(Pkl.glob("os", "system"), Pkl.string("true")))),
            "it names os.system, which a weights-only load refuses",
        ),
        (
            "data/sample_inputs/model.pt",
            torch_save_zip(b"\x80\x04\x95" + b"\0" * 8 + Pkl.tup() + Pkl.STOP),
            "it uses pickle opcodes a weights-only load refuses (FRAME)",
        ),
        (
            "data/sample_inputs/model.pt",
            pickle.dumps({"x": 1}),
            "it is not a torch.save file aotipre can take apart",
        ),
        (
            "data/weights/model.pt",
            torch_save_zip(Pkl.dump(Pkl.call(Pkl.glob("builtins", "eval"), Pkl.string("1")))),
            "it names builtins.eval",
        ),
    ],
)
def test_program_artifacts_a_weights_only_load_refuses(
    tmp_path: Path, member: str, data: bytes, why: str
) -> None:
    """torch.export.load deserializes a program's sample inputs (and legacy weights/constants
    files) with a weights-only load, then again with weights_only=False when that fails."""
    info = read_package(craft(tmp_path / "p.pt2", sample_inputs(data, member)))
    (item,) = pickle_members(info)
    assert item.member == f"ep_only/{member}" and item.loader == FALLBACK
    assert item.why.startswith(why), item.why
    (finding,) = aot081(check_package(info, []))
    assert "tries a weights-only load, then unpickles it with torch.load(weights_only=False)" in (
        finding.message
    )


def test_plain_sample_inputs_are_not_flagged(tmp_path: Path) -> None:
    """Tensors in (args, kwargs), and an empty member (no sample inputs): weights-only loads."""
    tensor = Pkl.tensor((2, 3), (3, 1), 6)
    for data in (torch_save_zip(Pkl.args_kwargs(tensor)), b""):
        info = read_package(craft(tmp_path / "p.pt2", sample_inputs(data)))
        assert pickle_members(info) == ()


def test_a_config_too_large_to_read_counts(tmp_path: Path) -> None:
    """A weights config past the JSON bounds may mark any member use_pickle: it counts."""
    huge = b"[" * 4_000_001

    def edit(members: Members) -> Members:
        return [(n, huge if n.endswith("model_weights_config.json") else d) for n, d in members]

    info = read_package(craft(tmp_path / "p.pt2", edit))
    (item,) = pickle_members(info)
    assert item.kind == "weights config" and item.member.endswith("model_weights_config.json")
    (finding,) = aot081(check_package(info, []))
    assert "too large for aotipre to read" in finding.message
