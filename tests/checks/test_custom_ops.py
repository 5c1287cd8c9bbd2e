"""Static custom-op listing and findings (torch-free): the ExportedProgram graph, the AOTI
extern-kernel manifest, Registration, and the config keys and flags that carry it."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from aotipre import api
from aotipre.checks.custom_ops import CUSTOM_OPS_ENV, Registration, check_custom_ops
from aotipre.config import Settings, parse_flags, parse_values
from aotipre.foundation.errors import UsageError
from aotipre.pt2.exported import graph_ops
from aotipre.pt2.ops import custom_ops, manifest_ops, split_target
from aotipre.pt2.reader import read_package
from tests.hardening.craft import Members, rewrite

# A node of `<hash>.wrapper.json` as torch 2.13 writes it for a Python torch.library.custom_op
# (copied from a package compiled with aoti_compile_and_package; a C++ op has empty metadata).
PY_NODE = {
    "name": "buf2",
    "node": {
        "target": "rt16::twice",
        "inputs": [{"name": "x", "arg": {"as_tensor": {"name": "buf1"}}, "kind": 1}],
        "outputs": [{"as_tensor": {"name": "buf3"}}],
        "metadata": {"torch_library_custom_op": "1"},
        "is_hop_single_tensor_return": None,
        "name": None,
    },
}
C_NODE = {"name": "buf0", "node": {"target": "rt16c::scale.out", "metadata": {}}}
ATEN_NODE = {"name": "buf9", "node": {"target": "aten::nonzero", "metadata": {}}}


def test_split_target_reads_both_spellings() -> None:
    assert split_target("torch.ops.rt16.twice.default") == ("rt16", "twice", "default")
    assert split_target("torch.ops.aten.add.Tensor") == ("aten", "add", "Tensor")
    assert split_target("rt16::twice") == ("rt16", "twice", "default")
    assert split_target("rt16c::scale.out") == ("rt16c", "scale", "out")
    assert split_target("_operator.getitem") is None
    assert split_target("::x") is None


def test_graph_ops_walks_nested_graphs_in_first_use_order() -> None:
    inner = {"nodes": [{"target": "torch.ops.inner.op.default", "inputs": []}]}
    data = {
        "graph_module": {
            "graph": {
                "nodes": [
                    {"target": "torch.ops.aten.linear.default", "inputs": []},
                    {"target": "_operator.getitem", "inputs": []},
                    {
                        "target": "torch.ops.higher_order.cond",
                        "inputs": [{"name": "true_fn", "arg": {"as_graph": {"graph": inner}}}],
                    },
                    {"target": "torch.ops.aten.linear.default", "inputs": []},
                ]
            }
        }
    }
    assert graph_ops(data) == (
        "torch.ops.aten.linear.default",
        "torch.ops.higher_order.cond",
        "torch.ops.inner.op.default",
    )
    assert graph_ops({"graph_module": "nonsense"}) == ()


def test_custom_ops_merge_sources_and_skip_torch_namespaces() -> None:
    manifest = manifest_ops({"nodes": [PY_NODE, C_NODE, ATEN_NODE, {"node": 3}]})
    assert manifest == [
        ("rt16::twice", True),
        ("rt16c::scale.out", False),
        ("aten::nonzero", False),
    ]
    ops = custom_ops(["torch.ops.rt16.twice.default", "torch.ops.aten.add.Tensor"], manifest)
    by_name = {op.qualified: op for op in ops}
    assert set(by_name) == {"rt16::twice", "rt16c::scale.out"}
    assert by_name["rt16::twice"].python and by_name["rt16::twice"].sources == (
        "exported_program",
        "aoti",
    )
    assert not by_name["rt16c::scale.out"].python


def _with_custom_ops(members: Members) -> Members:
    """The fixture's archive plus a Python op in its manifest and a C++ op in its graph."""
    out: Members = []
    for name, data in members:
        if name.endswith("/models/model.json"):
            doc = json.loads(data)
            doc["graph_module"]["graph"]["nodes"].append(
                {"target": "torch.ops.rt16c.scale.default", "inputs": []}
            )
            data = json.dumps(doc).encode()
        out.append((name, data))
        if name.endswith(".wrapper.cpp"):
            manifest = name[: -len(".cpp")] + ".json"
            out.append((manifest, json.dumps({"nodes": [PY_NODE]}).encode()))
    return out


@pytest.fixture
def custom_pkg(pkg: Callable[[str], Path], tmp_path: Path) -> Path:
    return rewrite(pkg("both"), tmp_path / "custom.pt2", _with_custom_ops)


def test_check_custom_ops_findings(custom_pkg: Path, tmp_path: Path) -> None:
    package = read_package(custom_pkg)
    models = list(package.models)
    found = check_custom_ops(package, models, Registration(), cpp=True)
    assert sorted((f.code, f.actual) for f in found) == [
        ("AOT120", "rt16::twice"),
        ("AOT120", "rt16c::scale"),
        ("AOT122", "rt16::twice"),
    ]
    twice = next(f for f in found if f.code == "AOT120" and f.actual == "rt16::twice")
    assert "--import MODULE" in twice.hint and "its AOTI code" in twice.message
    scale = next(f for f in found if f.actual == "rt16c::scale")
    assert "--library PATH" in scale.hint and "its ExportedProgram" in scale.message
    lib = tmp_path / "libops.so"
    lib.write_bytes(b"")
    registered = check_custom_ops(package, models, Registration(libraries=(str(lib),)), cpp=False)
    assert registered == []


def test_static_check_reports_them_and_cpp_makes_python_ops_errors(custom_pkg: Path) -> None:
    report = api.check(custom_pkg, api.CheckOptions(static_only=True))
    assert {f.code for f in report.findings} >= {"AOT120"}
    assert report.verdict.value == "pass"  # warnings only
    strict = api.check(custom_pkg, api.CheckOptions(static_only=True, cpp=True))
    assert "AOT122" in {f.code for f in strict.findings}
    assert strict.verdict.value == "fail"


def test_registration_env_and_how() -> None:
    assert Registration().env() == {}
    reg = Registration(imports=("my.ops",), libraries=("/x/libops.so",), import_path=("/w",))
    payload: dict[str, Any] = json.loads(reg.env()[CUSTOM_OPS_ENV])
    assert payload == {"import": ["my.ops"], "library": ["/x/libops.so"], "path": ["/w"]}
    assert reg.how() == "--import my.ops, --library /x/libops.so"


def test_config_keys_and_flags(tmp_path: Path) -> None:
    lib = tmp_path / "libops.so"
    lib.write_bytes(b"")
    values = parse_values(
        {"import": "my_ops.register", "library": ["libops.so"], "cpp": True},
        "aotipre.toml",
        tmp_path,
    )
    assert values == {"imports": ("my_ops.register",), "libraries": (str(lib),), "cpp": True}
    missing = parse_values({"library": "missing.so"}, "aotipre.toml", tmp_path)
    with pytest.raises(UsageError, match="missing.so: no such file"):
        Settings().merged(missing).check_options()
    with pytest.raises(UsageError, match="not a Python module name"):
        parse_flags({"import": ["my-ops"]})
    options = Settings(source=str(tmp_path / "aotipre.toml")).merged(values).check_options()
    assert options.cpp is True and options.registration is not None
    assert options.registration.libraries == (str(lib),)
    assert str(tmp_path) in options.registration.import_path
    assert options.dynamic is not None and CUSTOM_OPS_ENV in options.dynamic.extra_env
