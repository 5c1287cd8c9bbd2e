"""Ops with no C shim (AOT550): before the compile, the ATen ops of the ExportedProgram that
Inductor will run as fallback kernels without a C shim (the worker's `c_shims` step,
runner/worker/shims.py), and after it, the ops the compile itself warned about ("<op> is missing a
c-shim implementation, using proxy executor as fallback"). Such a package calls those ops through
the proxy executor: a C++-only deployment must provide one, and diagnostic rebuilds that change
what falls back (all-fallback, bisection) fail on them."""

from __future__ import annotations

import json
import os
import re
from dataclasses import asdict, dataclass
from typing import Any

from aotipre.runner.stages.base import PlannedStep, StepRecord, ok
from aotipre.runner.stages.session import Session

SHIM_STEP = "c-shims"
"""The worker step listing the ops with no C shim before the compile."""

PROXY_WARNING = re.compile(
    r"(\b[\w.]+) is missing a c-shim implementation, using proxy executor as fallback"
)
"""The compile's own warning per op (torch/_inductor/ir.py, FallbackKernel.codegen, 2.11-2.15)."""

WARNING_TEXT = "{} is missing a c-shim implementation, using proxy executor as fallback"

SHOWN_OPS = 5
"""Ops named in the finding's message (the rest are counted)."""


@dataclass(frozen=True)
class ShimlessOp:
    """One ATen op the package calls through the proxy executor."""

    op: str
    """`aten.name.overload`."""
    line: str = ""
    """The model's source line of its first node (`file:line in function`), if known."""
    listed: bool = False
    """Found before the compile (the c_shims step)."""
    warned: bool = False
    """The compile warned about it."""


def shims_step(configs: dict[str, object]) -> PlannedStep:
    """The `c_shims` step under the compile's inductor configs (they decide what falls back)."""
    return PlannedStep(SHIM_STEP, "c_shims", {"inductor_configs": dict(configs)})


def ops_without_shim(listing: StepRecord | None, compile_log: str) -> list[ShimlessOp]:
    """The ops the listing found and the compile warned about, listing order first."""
    found: dict[str, ShimlessOp] = {}
    if listing is not None and ok(listing):
        for item in listing.entry.get("ops") or []:
            if isinstance(item, dict) and isinstance(item.get("op"), str):
                op = item["op"]
                found[op] = ShimlessOp(op, str(item.get("line") or ""), listed=True)
    for m in PROXY_WARNING.finditer(compile_log or ""):
        op = m.group(1)
        old = found.get(op)
        found[op] = ShimlessOp(op, old.line if old else "", listed=old is not None, warned=True)
    return list(found.values())


CACHE_KEY = "no_c_shim"
"""The compile-cache entry's record (entry.json) of the ops found when it was compiled: a cache
hit reports them without listing or compiling again."""


def cache_record(s: Session) -> list[dict[str, Any]]:
    """What the compile-cache entry keeps of this compile's ops with no C shim."""
    compile_rec = s.records.get("compile")
    found = ops_without_shim(s.records.get(SHIM_STEP), compile_rec.log if compile_rec else "")
    return [asdict(o) for o in found]


def cached_ops(entry_dir: str, entry_file: str) -> list[ShimlessOp]:
    """The ops a cache entry recorded (cache_record), [] when it recorded none or cannot be
    read (the entry was checked before the hit: a bad one is no hit)."""
    try:
        with open(os.path.join(entry_dir, entry_file), "rb") as f:
            meta = json.loads(f.read(1 << 20))
    except (OSError, ValueError):
        return []
    items = meta.get(CACHE_KEY) if isinstance(meta, dict) else None
    out = []
    for item in items if isinstance(items, list) else []:
        if isinstance(item, dict) and isinstance(item.get("op"), str):
            out.append(
                ShimlessOp(
                    item["op"],
                    str(item.get("line") or ""),
                    listed=bool(item.get("listed")),
                    warned=bool(item.get("warned")),
                )
            )
    return out


def report_shimless(s: Session, cached: list[ShimlessOp] | None = None) -> None:
    """AOT550 for the model's ops with no C shim, if any (a warning: the package works where a
    proxy executor runs them, as the Python runner does); `cached`: a cache hit's record."""
    compile_rec = s.records.get("compile")
    ops = ops_without_shim(s.records.get(SHIM_STEP), compile_rec.log if compile_rec else "")
    if cached is not None and not ops:
        ops = cached
    if not ops:
        return
    named = []
    for item in ops[:SHOWN_OPS]:
        where = f" ({item.line})" if item.line else ""
        named.append(item.op + where)
    more = f" and {len(ops) - SHOWN_OPS} more" if len(ops) > SHOWN_OPS else ""
    listed, warned = sum(o.listed for o in ops), sum(o.warned for o in ops)
    if listed == warned == len(ops):
        how = "listed before compiling and confirmed by the compile's warning"
    elif not warned:
        how = "listed before compiling (Inductor falls back on them and torch's C shim has none)"
    elif not listed:
        how = "the compile warned 'missing a c-shim implementation, using proxy executor as "
        how += "fallback'"
    else:
        how = f"{listed} listed before compiling, {warned} named by the compile's warning"
    s.add(
        "AOT550",
        f"model '{s.model.name}' calls {len(ops)} ATen op(s) with no C shim through the proxy "
        f"executor: {', '.join(named)}{more}; {how}",
        stage="compile",
        evidence=tuple(WARNING_TEXT.format(o.op) for o in ops[:SHOWN_OPS] if o.warned),
    )
