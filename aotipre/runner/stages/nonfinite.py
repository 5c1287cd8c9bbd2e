"""NaN and Inf in the compiled model's outputs on the sample inputs (part of the run stage).

NaN is an error whether or not the reference produces it too: a deployment serves it either way;
when the reference does, the finding says it is the model, not the compile. Inf is not always a
bug (masked logits, log-probabilities of impossible events): Inf that the reference produces in
the same rows is reported (AOT705, info), not failed; Inf or NaN where the reference is finite is
an error (AOT702). Without a reference, Inf is a warning (AOT705). The worker records which rows
along dim 0 hold them; when dim 0 is the inputs' dynamic batch dim the finding names the input
rows that produce them."""

from __future__ import annotations

from typing import Any

from aotipre.findings import Severity
from aotipre.runner.stages.base import describe_output, ok
from aotipre.runner.stages.session import Session

REFERENCE = "the ExportedProgram run eagerly"


def nonfinite_findings(s: Session, entry: dict[str, Any], stage: str) -> None:
    eager = s.records.get("eager")
    eager_outs = (eager.entry.get("outputs") or []) if eager is not None and ok(eager) else []
    batch = _batch_inputs(s, entry)
    for i, o in enumerate(entry.get("outputs") or []):
        have_ref = i < len(eager_outs)
        ref = eager_outs[i] if have_ref else {}
        head = f"output {i} ({describe_output(o)}) of the compiled model"
        nan, inf = int(o.get("nan") or 0), int(o.get("inf") or 0)
        if nan:
            msg = f"{head} holds {nan} NaN{_rows(o, 'nan', batch)}"
            ref_nan = int(ref.get("nan") or 0)
            if not have_ref:
                msg += "; no reference to tell whether the model or the compile produces them"
            elif ref_nan:
                msg += (
                    f"; {REFERENCE} produces NaN too ({ref_nan}{_rows(ref, 'nan', None)}): the "
                    "model, not the compile, produces them on these inputs"
                )
            else:
                msg += f" where {REFERENCE} is finite: the compiled code produces them"
            s.add("AOT702", msg, stage, expected=ref_nan if have_ref else None, actual=nan)
        if not inf:
            continue
        msg = f"{head} holds {inf} Inf{_rows(o, 'inf', batch)}"
        ref_inf = int(ref.get("inf") or 0)
        if not have_ref:
            msg += (
                "; no reference to tell whether they are intended (masked logits, "
                "log-probabilities) or produced by the compile"
            )
            s.add("AOT705", msg, stage, severity=Severity.WARNING, actual=inf)
        elif ref_inf == inf and ref.get("inf_rows") == o.get("inf_rows"):
            msg += f", as {REFERENCE} does (the same count in the same rows): reported, not failed"
            s.add("AOT705", msg, stage, severity=Severity.INFO, expected=ref_inf, actual=inf)
        else:
            msg += f" where {REFERENCE} holds {ref_inf}{_rows(ref, 'inf', None)}"
            s.add("AOT702", msg, stage, expected=ref_inf, actual=inf)


def _batch_inputs(s: Session, entry: dict[str, Any]) -> list[tuple[str, int]]:
    """(name, dim-0 size) of the tensor inputs whose dim 0 is dynamic."""
    sizes = entry.get("inputs") or []
    out = []
    for spec in s.model.tensor_inputs:
        t, idx = spec.tensor, spec.tensor_index
        if t is None or idx is None or not t.shape or t.shape[0].is_static:
            continue
        if idx < len(sizes) and (sizes[idx].get("shape") or []):
            out.append((spec.name, int(sizes[idx]["shape"][0])))
    return out


def _rows(o: dict[str, Any], key: str, batch: list[tuple[str, int]] | None) -> str:
    rows = o.get(f"{key}_rows")
    if not rows:
        return ""
    count = int(o.get(f"{key}_row_count") or len(rows))
    listed = ", ".join(str(r) for r in rows) + (", ..." if count > len(rows) else "")
    text = f" in {count} row(s) along dim 0 ({listed})"
    shape = o.get("shape") or []
    names = [n for n, size in (batch or []) if shape and size == shape[0]]
    if names:
        text += f": the rows of the batch, produced by input row(s) {listed} of " + ", ".join(
            f"'{n}'" for n in names
        )
    return text
