"""Archives written by torch 2.14.1 (schema 8.20) read and check like 2.13 ones.

The files in tests/data/torch214/ were built by scripts/build_fixtures.py under torch
2.14.1+cu130 (the second environment .ci/run builds, .venv-2.14; CPU packages) and slimmed by
scripts/slim_package.py (binaries replaced by a stub; every metadata member byte-identical), so
they are for inspection only. The same packages are loaded and run for real by the slow tests
that .ci/run runs inside .venv-2.14.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from aotipre.api import CheckOptions, check
from aotipre.findings import Finding, Report, Severity, Verdict
from aotipre.pt2.reader import read_package

DATA = Path(__file__).resolve().parents[1] / "data" / "torch214"
Pkg = Callable[[str], Path]


def metadata_findings(report: Report) -> list[Finding]:
    """The findings less those about the stub binaries: every `.so` here is slim_package.py's
    stub, so it is reported as not an ELF file (AOT050), and what a real one was compiled for
    (AOT051) or produced by (AOT052) cannot be read from it."""
    return [
        f
        for f in report.findings
        if not (f.code == "AOT050" and "not an ELF file" in f.message)
        and f.code not in ("AOT051", "AOT052")
    ]


def metadata_verdict(report: Report) -> Verdict:
    errors = [f for f in metadata_findings(report) if f.severity is Severity.ERROR]
    return Verdict.FAIL if errors else Verdict.PASS


@pytest.mark.parametrize(
    "name, kind",
    [
        ("ep_only", "exported_program"),
        ("both", "both"),
        ("derived", "both"),
        ("kwargs", "both"),
        ("strides", "aoti"),
        ("aoti", "aoti"),
    ],
)
def test_inspect(name: str, kind: str) -> None:
    info = read_package(DATA / f"{name}.pt2")
    assert info.kind == kind and info.archive_version == "0"
    (model,) = info.models
    assert model.device_type == "cpu" and model.inputs
    if model.has_exported_program:
        assert model.torch_version == "2.14.1+cu130" and model.schema_version == "8.20"
        assert model.contract_source == "exported_program"
    else:
        assert model.contract_source == "wrapper_cpp"


def test_multi_model_package() -> None:
    info = read_package(DATA / "multi.pt2")
    assert len(info.models) >= 2 and all(m.inputs for m in info.models)


def test_static_checks_agree_with_the_2_13_package(pkg: Pkg) -> None:
    for inputs, verdict in (("aoti_inputs", Verdict.PASS), ("aoti_inputs_bad_dtype", Verdict.FAIL)):
        opts = CheckOptions(inputs=str(pkg(inputs)), static_only=True)
        new = check(DATA / "both.pt2", opts)
        old = check(pkg("both"), opts)
        assert metadata_verdict(new) is old.verdict is verdict
        assert sorted(f.code for f in metadata_findings(new)) == sorted(
            f.code for f in metadata_findings(old)
        )
        assert not any(f.code == "AOT405" for f in new.findings), "2.14 is supported"


def test_derived_dim_from_214_export(pkg: Pkg) -> None:
    path = DATA / "derived.pt2"
    good = check(path, CheckOptions(inputs=str(pkg("derived_inputs")), static_only=True))
    assert metadata_verdict(good) is Verdict.PASS, good.findings
    bad = check(path, CheckOptions(inputs=str(pkg("derived_inputs_bad")), static_only=True))
    assert [f.code for f in metadata_findings(bad) if f.severity is Severity.ERROR] == ["AOT306"]


def test_aoti_only_contract_from_the_214_wrapper(pkg: Pkg) -> None:
    ok = check(
        DATA / "strides.pt2", CheckOptions(inputs=str(pkg("strides_inputs")), static_only=True)
    )
    assert metadata_verdict(ok) is Verdict.PASS, ok.findings
    bad = check(
        DATA / "strides.pt2",
        CheckOptions(inputs=str(pkg("strides_inputs_transposed")), static_only=True),
    )
    assert any(f.code == "AOT307" for f in bad.findings)
