"""The operators a model calls that torch itself does not provide (custom ops), read offline.

Two sources: the ExportedProgram's graph (`models/<name>.json` node targets, see
`exported.graph_ops`) and the AOTI code's extern-kernel manifest (`<hash>.wrapper.json` next to
wrapper.cpp: one node per op the compiled code calls through the proxy executor, with
`"metadata": {"torch_library_custom_op": "1"}` when the op was defined with the Python
`torch.library.custom_op`, which the C++ loader cannot run). Measured with torch 2.13: a model
calling a Python custom op `rt16::twice` lists it in both; the C++ loader then fails with
"Could not find schema for rt16::twice. Custom operators created via torch.library.custom_op
cannot be run via AOTI without Python environment".
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from aotipre.pt2 import layout
from aotipre.pt2.archive import Archive, archive_at
from aotipre.pt2.exported import graph_ops
from aotipre.pt2.reader import MAX_JSON_CONTAINERS

TORCH_NAMESPACES = frozenset(
    {
        # every namespace a fresh `import torch` (2.13, CPU build) registers ops in
        # (torch._C._dispatch_get_all_op_names()), plus the Python-only higher-order ops
        "_c10d_functional",
        "_c10d_functional_autograd",
        "_dtensor",
        "_native",
        "_quantized",
        "_test",
        "aten",
        "c10d",
        "debug_mode_ops",
        "debugprims",
        "export",
        "higher_order",
        "inductor",
        "inductor_prims",
        "mkl",
        "mkldnn",
        "mkldnn_prepacked",
        "onednn",
        "prim",
        "prims",
        "profiler",
        "quantization",
        "quantized",
        "rngprims",
        "sparse",
        "static_runtime",
        "symm_mem",
    }
)
WRAPPER_JSON_SUFFIX = ".wrapper.json"


@dataclass(frozen=True)
class CustomOp:
    """One operator the model calls that torch does not register by itself."""

    name: str
    """`namespace::op` (the schema name the dispatcher knows; overload dropped)."""
    overload: str
    """`default` or the overload name."""
    python: bool
    """The AOTI manifest marks it as a torch.library.custom_op (Python-only)."""
    sources: tuple[str, ...]
    """Where it was seen: `exported_program`, `aoti`."""

    @property
    def qualified(self) -> str:
        """`ns::op` or `ns::op.overload`: what torch._C._get_schema takes apart."""
        return self.name if self.overload in ("", "default") else f"{self.name}.{self.overload}"


def split_target(target: str) -> tuple[str, str, str] | None:
    """(namespace, op, overload) of `torch.ops.ns.op.overload` or `ns::op[.overload]`."""
    if target.startswith("torch.ops."):
        parts = target[len("torch.ops.") :].split(".")
        if len(parts) == 3:
            return parts[0], parts[1], parts[2]
        if len(parts) == 2:
            return parts[0], parts[1], "default"
        return None
    ns, sep, rest = target.partition("::")
    if not sep or not ns or not rest:
        return None
    op, _, overload = rest.partition(".")
    return ns, op, overload or "default"


def manifest_ops(data: object) -> list[tuple[str, bool]]:
    """(target, is a Python custom op) of each node of a decoded `<hash>.wrapper.json`."""
    out: list[tuple[str, bool]] = []
    nodes = data.get("nodes") if isinstance(data, dict) else None
    for item in nodes if isinstance(nodes, list) else []:
        node = item.get("node") if isinstance(item, dict) else None
        if not isinstance(node, dict) or not isinstance(node.get("target"), str):
            continue
        meta = node.get("metadata")
        meta = meta if isinstance(meta, dict) else {}
        out.append((node["target"], str(meta.get("torch_library_custom_op")) == "1"))
    return out


def custom_ops(ep_targets: list[str], manifest: list[tuple[str, bool]]) -> tuple[CustomOp, ...]:
    """The custom ops among a model's ExportedProgram targets and AOTI manifest entries."""
    found: dict[tuple[str, str], dict[str, object]] = {}
    entries = [(t, False, "exported_program") for t in ep_targets]
    entries += [(t, py, "aoti") for t, py in manifest]
    for target, python, source in entries:
        parts = split_target(target)
        if parts is None or parts[0] in TORCH_NAMESPACES:
            continue
        ns, op, overload = parts
        rec = found.setdefault((f"{ns}::{op}", overload), {"python": False, "sources": []})
        rec["python"] = bool(rec["python"]) or python
        sources = rec["sources"]
        assert isinstance(sources, list)
        if source not in sources:
            sources.append(source)
    return tuple(
        CustomOp(name, overload, bool(rec["python"]), tuple(rec["sources"]))  # type: ignore[arg-type]
        for (name, overload), rec in found.items()
    )


def read_custom_ops(
    path: str, root: str, model: str, has_ep: bool, archive: Archive | None = None
) -> tuple[CustomOp, ...]:
    """The custom ops `model` of the package at `path` calls, read from `archive` when the
    caller holds the package open, else from `path` (PackageError: unreadable)."""
    with archive_at(path, archive) as opened:
        return archive_custom_ops(opened, root, model, has_ep)


def archive_custom_ops(
    archive: Archive, root: str, model: str, has_ep: bool
) -> tuple[CustomOp, ...]:
    """The custom ops `model` calls, from an archive already open."""
    ep_targets: list[str] = []
    if has_ep:
        member = f"{root}/{layout.MODELS_DIR}/{model}.json"
        if member in archive.members:
            ep_targets = list(graph_ops(_json(archive, member)))
    prefix = f"{root}/{layout.AOTI_DIR}/{model}/"
    manifest: list[tuple[str, bool]] = []
    for name in sorted(archive.members):
        if name.startswith(prefix) and name.endswith(WRAPPER_JSON_SUFFIX):
            manifest.extend(manifest_ops(_json(archive, name)))
    return custom_ops(ep_targets, manifest)


def _json(archive: Archive, member: str) -> object:
    data = archive.read(member)
    if data.count(b"{") + data.count(b"[") > MAX_JSON_CONTAINERS:
        return None
    try:
        return json.loads(data)
    except (ValueError, RecursionError):
        return None
