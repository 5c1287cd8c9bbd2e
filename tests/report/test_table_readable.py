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
    assert "  kernel source 45 lines from wrapper.cpp: in --format json and --artifacts DIR" in text
    # every label stands apart from its value, in one column
    assert "  verdict       an index is out of range" in text
    assert d.to_dict()["kernel_source"] == source


def test_counts_read_as_english() -> None:
    from aotipre.checks.inputs import _count

    assert _count(1, "value") == "1 value"
    assert _count(3, "value") == "3 values"


def test_paths_are_not_broken_at_their_hyphens() -> None:
    path = (  # longer than a line, as a real package's kernel path is
        "/work/main/.fixture-cache/torch-2.13.0+cpu/embedding_oob.pt2:embedding_oob/data/"
        "aotinductor/model/cgzveyugwizqxt7um74rsuc63wq73uitxkr7hsszd4jd45ipdqoj.kernel.cpp"
    )
    d = Diagnosis(
        model="m", kernel="k", identified_by="first-error", evidence=(), verdict="v",
        kernel_source="x = 1", kernel_source_from=path,
    )  # fmt: skip
    text = "\n".join(_diagnosis_lines(d))
    assert f"{path}:" in text, text  # whole on its line, not cut after "fixture-"


def test_a_huge_word_is_clipped_in_the_table_and_whole_in_the_json() -> None:
    # a sample whose keyword name is 1M characters (30M took tabulate's wrapping minutes)
    from aotipre.findings import codes
    from aotipre.report.table import findings_table

    name = "k" * 1_000_000
    f = codes.get("AOT103").finding(
        f"unexpected keyword argument '{name}'", model="model", input=name
    )
    table = findings_table([f], width=120)
    assert len(table) < 5000 and f"...(+{1_000_000 - 150}chars)" in "".join(table.split())
    assert name in f.to_dict()["message"]
    # many short words: the cell stops at 4000 characters, saying where the rest is
    long = codes.get("AOT103").finding("word " * 100_000, model="model")
    assert "chars;allofitin-fjson)" in "".join(findings_table([long], width=120).split())
    assert len(findings_table([long], width=120)) < 20_000
