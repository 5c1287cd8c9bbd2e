"""Accuracy triage's CUDA facts: whether a deployed package's Triton kernels were compiled with
TF32 (Inductor bakes `ALLOW_TF32` into its mm and convolution templates at compile time, from
`torch.backends.cuda.matmul.fp32_precision`, while eager and the extern cuBLAS/cuDNN calls read
the flags when they run), the process settings a rebuild runs under, and the torch version a
knob needs. Plain data and package text: no torch here (the worker applies the settings with
its `accuracy_precision` step)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from aotipre.foundation.errors import PackageError
from aotipre.pt2.archive import Archive, archive_at

TF32_MARK = re.compile(
    rb"ALLOW_TF32\s*:\s*tl\.constexpr\s*=\s*True|allow_tf32\s*=\s*True|input_precision\s*=\s*"
    rb"[\"']tf32[\"']"
)
"""TF32 in a Triton kernel's source as AOTI keeps it in wrapper.cpp (the call helper's comment):
a template's `ALLOW_TF32 : tl.constexpr = True` (measured on torch 2.11.0+cu130, an H200:
tests/triage/data/cuda_tf32_template.cpp) or a `tl.dot(..., input_precision="tf32")`."""
CHUNK = 1 << 20
"""Bytes read at a time while scanning a package's sources (memory stays bounded)."""
MAX_SCANNED = 256 << 20
"""Bytes of sources scanned at most per package."""
PROCESS_KEYS = {
    "torch.float32_matmul_precision": "matmul",
    "torch.backends.cudnn.allow_tf32": "conv",
}
"""A knob's settings that are process flags, not inductor configs: the rebuild compiles and
both sides of its comparison run under them (shown with the knob's configs)."""


def package_used_tf32(path: str, archive: Archive | None = None) -> bool:
    """Whether the AOTI sources in the package at `path` (read from `archive` when the caller
    holds it open) hold a Triton kernel compiled with TF32; False when it has none or cannot
    be read."""
    scanned = 0
    try:
        with archive_at(path, archive) as opened:
            for name in opened.names():
                if "/aotinductor/" not in f"/{name}" or not name.endswith(".cpp"):
                    continue
                tail = b""
                for chunk in opened.chunks(name):
                    if scanned >= MAX_SCANNED:
                        return False
                    scanned += len(chunk)
                    if TF32_MARK.search(tail + chunk):
                        return True
                    tail = chunk[-64:]
    except (PackageError, OSError):
        return False
    return False


def inductor_only(configs: Mapping[str, Any]) -> dict[str, Any]:
    """A knob's inductor configs (its process settings left out)."""
    return {k: v for k, v in configs.items() if k not in PROCESS_KEYS}


def knob_tf32(configs: Mapping[str, Any]) -> bool | None:
    """The TF32 state a knob's settings ask for (None: the knob leaves TF32 alone)."""
    if "torch.float32_matmul_precision" in configs:
        return configs["torch.float32_matmul_precision"] != "highest"
    if "torch.backends.cudnn.allow_tf32" in configs:
        return bool(configs["torch.backends.cudnn.allow_tf32"])
    return None


def precision_step(sid: str, tf32: bool | None) -> dict[str, Any]:
    """The worker step that sets TF32 for the job's later steps (None: the worker's own)."""
    return {"id": sid, "op": "accuracy_precision", "tf32": tf32, "timeout_s": 30.0}


def rebuild_steps(
    compile_step: Mapping[str, Any],
    then: list[dict[str, Any]],
    package_tf32: bool,
    knob: bool | None = None,
) -> list[dict[str, Any]]:
    """`compile_step` and the steps `then`, under the TF32 state each needs: a knob's own (None:
    none) for the compile and for both sides of the comparison; else the compile as the
    deployed package was (TF32 on when its kernels were compiled with it) and the comparison
    under the worker's own flags, as the check's was."""
    if knob is not None:
        return [precision_step("precision", knob), dict(compile_step), *then]
    if not package_tf32:
        return [dict(compile_step), *then]
    return [
        precision_step("precision", True),
        dict(compile_step),
        precision_step("precision-restored", None),
        *then,
    ]


def tf32_fact(facts: Mapping[str, Any], package_tf32: bool, eager: Mapping[str, Any]) -> bool:
    """TF32 can explain a CUDA kernel's difference: it holds an fp32 matmul (convolution) and
    the package's kernels were compiled with TF32 or the check's eager side ran its cuBLAS
    matmuls (cuDNN convolutions) with TF32."""
    matmul = bool(facts.get("fp32_matmul")) and (package_tf32 or bool(eager.get("matmul")))
    conv = bool(facts.get("fp32_conv")) and (package_tf32 or bool(eager.get("conv")))
    return matmul or conv


def version_tuple(version: str) -> tuple[int, ...]:
    """(major, minor) of a torch version string ('2.14.1+cu130' -> (2, 14)); () if unreadable."""
    found = re.match(r"(\d+)\.(\d+)", version or "")
    return (int(found.group(1)), int(found.group(2))) if found else ()


def untestable(min_torch: str, torch_version: str) -> str | None:
    """Why a knob that needs torch `min_torch` cannot be tried on `torch_version` (None: it
    can, or either version is unknown)."""
    need, have = version_tuple(min_torch), version_tuple(torch_version)
    if need and have and have < need:
        return f"needs torch {min_torch}+ (the worker runs torch {torch_version})"
    return None
