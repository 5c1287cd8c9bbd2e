"""Behaviour on the same inputs: the worker's comparison of NEW's outputs with OLD's (its
`compare` step, NEW as `a`, OLD as `b`: runner/worker/compare.py) said as AOT790 findings, one
per output that differs. Torch-free: it reads the step's record only."""

from __future__ import annotations

from typing import Any

CODE = "AOT790"


def outputs_changed(
    entry: dict[str, Any], model: str, old: str
) -> list[tuple[str, dict[str, Any]]]:
    """(message, finding fields) for each way NEW's outputs differ from OLD's in `entry` (the
    compare step's record; `old` names OLD's package); none when every output is within its
    dtype's tolerance."""
    subject = f"of model '{model}'"
    where = f"OLD's ({old}) on the same inputs"
    counts = entry.get("counts")
    if entry.get("structure"):
        new_n, old_n = counts if isinstance(counts, list) and len(counts) == 2 else ("?", "?")
        return [
            (
                f"NEW {subject} returns {new_n} output(s) where OLD ({old}) returned {old_n} on "
                "the same inputs",
                {"expected": old_n, "actual": new_n},
            )
        ]
    out = []
    for rec in entry.get("outputs") or []:
        if not isinstance(rec, dict):
            continue
        said = _leaf(rec)
        if said is not None:
            text, fields = said
            out.append(
                (f"NEW's output {rec.get('index')} {subject} differs from {where}: {text}", fields)
            )
    return out


def _leaf(rec: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
    """How one output differs (None: it does not)."""
    if rec.get("kind") == "value":
        if rec.get("equal"):
            return None
        return f"{rec.get('aoti')}, was {rec.get('eager')}", {
            "expected": rec.get("eager"),
            "actual": rec.get("aoti"),
        }
    if rec.get("structure"):
        new = f"{rec.get('dtype')} {rec.get('shape')}"
        old = f"{rec.get('eager_dtype')} {rec.get('eager_shape')}"
        return f"{new}, was {old}", {"expected": old, "actual": new}
    mismatches = rec.get("mismatches") or 0
    if not mismatches:
        return None
    text = f"{mismatches} of {rec.get('numel')} elements"
    if rec.get("rtol") is not None:
        text += f" beyond rtol={rec.get('rtol')}, atol={rec.get('atol')}"
    max_abs = rec.get("max_abs")
    fields: dict[str, Any] = {}
    if max_abs is None:
        text += "; no element is finite on both sides (NaN or inf where the other is not)"
    else:
        text += f"; largest error {max_abs:.4g}"
        if rec.get("worst_index") is not None:
            new, old = rec.get("worst_aoti"), rec.get("worst_eager")
            text += f" at {rec['worst_index']} (NEW {_num(new)}, OLD {_num(old)})"
            fields = {"expected": old, "actual": new}
    return text, fields


def _num(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)
