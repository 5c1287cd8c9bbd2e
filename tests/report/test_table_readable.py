"""The terminal table stays readable: a diagnosis names its kernel source's size and where to
find it, never prints the source (issue 11: a 45-line kernel in the table); the JSON keeps it."""

from __future__ import annotations

from aotipre.report.table import _diagnosis_lines
from aotipre.triage.diagnosis import Diagnosis


def test_kernel_source_is_not_printed_in_the_table() -> None:
    source = "\n".join(f"    line_{i} = tmp{i} + 1" for i in range(45))
    d = Diagnosis(
        model="model",
        kernel="cpp_fused_embedding_0",
        identified_by="assert-message",
        evidence=("index out of bounds: 0 <= tmp4 < 500",),
        verdict="an index is out of range",
        kernel_source=source,
        kernel_source_from="wrapper.cpp",
    )
    text = "\n".join(_diagnosis_lines(d))
    assert "line_0" not in text and "line_44" not in text
    assert "45 lines from wrapper.cpp: in --format json and --artifacts DIR" in text
    assert d.to_dict()["kernel_source"] == source


def test_counts_read_as_english() -> None:
    from aotipre.checks.inputs import _count

    assert _count(1, "value") == "1 value"
    assert _count(3, "value") == "3 values"
