"""Which program a compiled model is compared with (runner/reference.py), on the fixture
packages, torch-free: the package's own ExportedProgram, the one `--exported-program FILE` holds
for the same model name (or its only one), none with the reason; golden outputs from
`--expected FILE` or a bundle's member; and the one-line refusals of a bad reference file.

Written for the mutation run (scripts/mutate.py, session 11): each test names what it pins."""

from __future__ import annotations

import dataclasses
import os
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from aotipre.foundation.errors import UsageError
from aotipre.pt2.reader import read_package
from aotipre.pt2.spec import ModelInfo
from aotipre.runner.reference import (
    check_reference_files,
    expected_outputs_for,
    exported_program_for,
)

Pkg = Callable[[str], Path]


def models(path: Path) -> dict[str, ModelInfo]:
    return {m.name: m for m in read_package(path).models}


@pytest.fixture
def mixed(pkg: Pkg, tmp_path: Path) -> Path:
    """multi.pt2 with the decoder's ExportedProgram removed: a package of two models, one with an
    ExportedProgram (encoder) and one with AOTI code only (decoder)."""
    out = tmp_path / "mixed.pt2"
    with zipfile.ZipFile(pkg("multi")) as src, zipfile.ZipFile(out, "w") as dst:
        for info in src.infolist():
            if info.filename != "multi/models/decoder.json":
                dst.writestr(info, src.read(info))
    found = models(out)
    assert (found["decoder"].has_exported_program, found["encoder"].has_exported_program) == (
        False,
        True,
    )
    return out


def test_the_packages_own_exported_program_without_a_file(pkg: Pkg) -> None:
    info = read_package(pkg("both"))
    ref = exported_program_for(None, info, info.models[0])
    assert (ref.path, ref.model) == (os.path.abspath(pkg("both")), "model")
    assert ref.label == "the ExportedProgram in the archive"
    aoti = read_package(pkg("aoti"))
    ref = exported_program_for(None, aoti, aoti.models[0])
    assert (ref.path, ref.model) == (None, None)
    assert "AOTI code only" in ref.label
    # an empty --exported-program is no file given
    assert exported_program_for("", info, info.models[0]).model == "model"


@pytest.mark.parametrize("name", ["encoder", "decoder"])
def test_a_file_with_several_programs_gives_the_one_of_the_same_name(pkg: Pkg, name: str) -> None:
    multi = read_package(pkg("multi"))
    model = models(pkg("multi"))[name]
    ref = exported_program_for(str(pkg("multi")), multi, model)
    assert (ref.path, ref.model) == (os.path.abspath(pkg("multi")), name)
    assert ref.label == f"the ExportedProgram of --exported-program {pkg('multi')}"


def test_a_file_with_one_program_of_another_name_gives_that_one(pkg: Pkg) -> None:
    # the package's model is "encoder"; both.pt2 holds one ExportedProgram, named "model"
    multi = read_package(pkg("multi"))
    ref = exported_program_for(str(pkg("both")), multi, models(pkg("multi"))["encoder"])
    assert (ref.path, ref.model) == (os.path.abspath(pkg("both")), "model")


def test_a_file_with_one_program_among_models_without_one(pkg: Pkg, mixed: Path) -> None:
    # mixed.pt2's only ExportedProgram is the encoder's: the decoder gets it (the file's only one)
    both = read_package(pkg("both"))
    ref = exported_program_for(str(mixed), both, models(mixed)["decoder"])
    assert ref.model == "encoder"
    ref = exported_program_for(str(mixed), both, both.models[0])
    assert ref.model == "encoder"


def test_a_file_with_several_programs_none_of_that_name_gives_none(pkg: Pkg) -> None:
    both = read_package(pkg("both"))
    ref = exported_program_for(str(pkg("multi")), both, both.models[0])
    assert (ref.path, ref.model) == (None, None)
    assert ref.label == (
        f"--exported-program {pkg('multi')} has no ExportedProgram for model 'model' "
        "(it holds: decoder, encoder)"
    )


def test_a_file_without_programs_or_unreadable_gives_none(pkg: Pkg) -> None:
    both = read_package(pkg("both"))
    ref = exported_program_for(str(pkg("aoti")), both, both.models[0])
    assert (ref.path, ref.model) == (None, None)
    assert ref.label.endswith("has no ExportedProgram for model 'model' (it holds: none)")
    ref = exported_program_for(str(pkg("broken_not_zip")), both, both.models[0])
    assert (ref.path, ref.model) == (None, None)
    assert ref.label.startswith(f"--exported-program {pkg('broken_not_zip')} cannot be read (")


def test_expected_outputs_from_a_file_a_member_or_none(pkg: Pkg) -> None:
    model = read_package(pkg("both")).models[0]
    assert model.expected_outputs_member is None
    assert expected_outputs_for(None, model) is None
    assert expected_outputs_for("", model) is None
    ref = expected_outputs_for("out.pt", model)
    assert ref is not None and ref.step == {"b_file": os.path.abspath("out.pt")}
    assert ref.label == "the expected outputs of --expected out.pt"
    stored = dataclasses.replace(model, expected_outputs_member="both/data/expected/model.pt")
    ref = expected_outputs_for(None, stored)
    assert ref is not None and ref.step == {"b_member": "both/data/expected/model.pt"}
    assert "stored in the archive (both/data/expected/model.pt)" in ref.label
    # the file wins over the member
    ref = expected_outputs_for("out.pt", stored)
    assert ref is not None and ref.step == {"b_file": os.path.abspath("out.pt")}


def test_reference_files_that_hold_a_program_or_outputs_pass(pkg: Pkg, mixed: Path) -> None:
    check_reference_files(None, None)
    check_reference_files(str(pkg("both")), None)
    check_reference_files(str(pkg("ep_only")), None)
    # one model of two has an ExportedProgram: the file holds one
    check_reference_files(str(mixed), None)
    check_reference_files(None, str(pkg("aoti_inputs")))


def test_reference_files_without_a_program_or_outputs_are_one_usage_error(
    pkg: Pkg, tmp_path: Path
) -> None:
    with pytest.raises(UsageError, match="holds no ExportedProgram"):
        check_reference_files(str(pkg("aoti")), None)
    with pytest.raises(UsageError, match=r"^--exported-program .*broken_not_zip"):
        check_reference_files(str(pkg("broken_not_zip")), None)
    with pytest.raises(UsageError, match="not outputs saved with torch.save"):
        check_reference_files(None, str(pkg("inputs_garbage")))
    with pytest.raises(UsageError, match="--expected"):
        check_reference_files(None, str(tmp_path / "absent.pt"))
    with pytest.raises(UsageError, match="--exported-program"):
        check_reference_files(str(tmp_path / "absent.pt2"), str(pkg("aoti_inputs")))
