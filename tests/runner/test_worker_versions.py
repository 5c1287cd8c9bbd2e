"""The worker's version gates, on the torch this suite runs with (2.13.0 by default, 2.14.1 and
2.15.0 in CI's other environments): what this torch lacks is a StepError "not available in torch X"."""

from __future__ import annotations

import io
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from aotipre.runner import worker  # noqa: E402

pytestmark = pytest.mark.torch_versions


def test_printer_configs_of_crash_triage_exist_in_this_torch() -> None:
    worker.check_inductor_configs(
        {
            "aot_inductor.debug_intermediate_value_printer": "3",
            "aot_inductor.filtered_kernel_names": "cpp_fused_0",
            "nan_asserts": True,
        }
    )


def test_a_config_this_torch_lacks_is_not_available() -> None:
    # aot_inductor.check_upperbound appears in torch 2.15 (field notes); 2.11-2.14 lack it
    version = tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2])
    if version >= (2, 15):  # CI's .venv-2.15
        worker.check_inductor_configs({"aot_inductor.check_upperbound": False})
        return
    with pytest.raises(worker.StepError) as err:
        worker.check_inductor_configs({"aot_inductor.check_upperbound": False})
    assert str(err.value) == (
        f"the inductor config 'aot_inductor.check_upperbound' is not available in torch "
        f"{torch.__version__}"
    )


def test_the_minifier_entry_point_exists_with_the_arguments_used() -> None:
    run_repro = worker.minifier_entry()
    assert callable(run_repro)


def test_inputs_and_zip_from_an_extracted_folder(
    pkg: Callable[[str], Path], tmp_path: Path
) -> None:
    with zipfile.ZipFile(pkg("both")) as zf:
        zf.extractall(tmp_path / "x")
        stored = zf.read("both/data/sample_inputs/model.pt")
    for folder in (tmp_path / "x", tmp_path / "x" / "both"):
        assert worker.read_member(str(folder), "both/data/sample_inputs/model.pt") == stored
        args, kwargs = worker.load_inputs(
            {"kind": "member", "member": "both/data/sample_inputs/model.pt"}, str(folder)
        )
        assert args and all(isinstance(a, torch.Tensor) for a in args)
        work = tmp_path / f"work-{folder.name}"
        work.mkdir()
        archive = worker.as_archive(str(folder), str(work))
        with zipfile.ZipFile(archive) as zf:
            assert zf.read("both/data/sample_inputs/model.pt") == stored
            assert "both/archive_format" in zf.namelist()
        ep = worker.load_exported_program(archive, "model")
        assert ep.module()(*args) is not None
    assert torch.load(io.BytesIO(stored), weights_only=True) is not None
