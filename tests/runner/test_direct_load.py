"""The direct load (issue 28): when the host's record holds what aoti_load_package pays before it
touches a package (the loader's imports and the CPU-ISA probe), a package that load_package
would load with nothing but that probe and the C++ loader is loaded with the C++ loader alone.
Which packages qualify (worker/loading.same_as_load_package, against torch's load_pt2), the
record's new figure, the report's load figures, and the probe's pin that waits for its import."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from aotipre.runner import loadcost

pytest.importorskip("torch")

from aotipre.runner.worker.loading import same_as_load_package  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
STAMP = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - 60))


def rewritten(
    src: Path, out: Path, change: Callable[[str, bytes], list[tuple[str, bytes]]]
) -> Path:
    """A copy of the archive `src` whose members pass through `change(name, data)`."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as zout:
        for info in zin.infolist():
            for name, data in change(info.filename, zin.read(info)):
                zout.writestr(name, data)
    return out


def root_of(path: Path) -> str:
    with zipfile.ZipFile(path) as zf:
        return zf.namelist()[0].split("/", 1)[0]


def test_an_aoti_only_package_of_one_model_is_loaded_as_load_package_would(
    pkg: Callable[[str], Path],
) -> None:
    assert same_as_load_package(str(pkg("aoti")), "model") is None


def test_what_load_pt2_would_read_or_refuse_keeps_the_python_loader(
    pkg: Callable[[str], Path], tmp_path: Path
) -> None:
    src = pkg("aoti")
    root = root_of(src)

    def plus(extra: str, data: bytes = b"{}") -> Callable[[str, bytes], list[tuple[str, bytes]]]:
        def change(name: str, body: bytes) -> list[tuple[str, bytes]]:
            out = [(name, body)]
            if name.endswith("/archive_format"):
                out.append((f"{root}/{extra}", data))
            return out

        return change

    def version(name: str, body: bytes) -> list[tuple[str, bytes]]:
        return [(name, b"1" if name.endswith("/archive_version") else body)]

    def second_model(name: str, body: bytes) -> list[tuple[str, bytes]]:
        out = [(name, body)]
        if "/data/aotinductor/model/" in name:
            out.append((name.replace("/aotinductor/model/", "/aotinductor/other/"), body))
        return out

    cases = {
        "an ExportedProgram": rewritten(src, tmp_path / "ep.pt2", plus("models/model.json")),
        "an extra file": rewritten(src, tmp_path / "extra.pt2", plus("extra/notes.txt", b"x")),
        "another archive version": rewritten(src, tmp_path / "version.pt2", version),
        "two compiled models": rewritten(src, tmp_path / "two.pt2", second_model),
    }
    reasons = {what: same_as_load_package(str(path), "model") for what, path in cases.items()}
    assert all(reasons.values()), reasons
    assert "ExportedPrograms or extra files" in str(reasons["an ExportedProgram"])
    assert "ExportedPrograms or extra files" in str(reasons["an extra file"])
    assert reasons["another archive version"] == "archive version '1'"
    assert "['model', 'other']" in str(reasons["two compiled models"])
    # a model it does not hold, a folder, a file that is not a zip
    assert same_as_load_package(str(src), "absent")
    folder = tmp_path / "folder.pt2"
    folder.mkdir()
    assert same_as_load_package(str(folder), "model") == "not a .pt2 file"
    junk = tmp_path / "junk.pt2"
    junk.write_bytes(b"not a zip")
    assert "could not be read" in str(same_as_load_package(str(junk), "model"))


def test_the_record_keeps_the_loaders_import_cost_only_from_a_clean_import() -> None:
    perf = {"fresh_process": True, "probe_cached": False, "import_s": 1.4}
    perf["probe"] = {"seconds": 1.2, "check_programs": 6, "gxx_builds": 0}
    entry = {"vec_isa": ["VecAVX2"], "vec_isa_pinned": False, "perf": perf}
    rec = loadcost.from_load(entry)
    assert rec is not None and rec.loader_import_s == 1.4
    partly = loadcost.from_load({**entry, "perf": {**perf, "loader_partly_imported": True}})
    assert partly is not None and partly.loader_import_s is None


def recorded(loader_import_s: object) -> dict[str, object]:
    """A record file's data, as loadcost.write keeps it, with this loader import cost."""
    return {
        "format": loadcost.FORMAT,
        "key": "k",
        "vec_isa": ["VecAVX2"],
        "probe": {"seconds": 1.0},
        "measured_at": STAMP,
        "loader_import_s": loader_import_s,
    }


@pytest.mark.parametrize("bad", [-1.0, True, "1.2", float("inf")])
def test_a_record_whose_import_cost_is_not_a_time_is_absent(bad: object) -> None:
    data = recorded(bad)
    assert loadcost.parse(data, "k") is None
    data["loader_import_s"] = 0.9
    rec = loadcost.parse(data, "k")
    assert rec is not None and rec.loader_import_s == 0.9


def test_a_direct_loads_figures_get_the_recorded_imports_and_probe() -> None:
    rec = loadcost.ProbeRecord(("VecAVX2",), {"seconds": 1.25, "check_programs": 6}, STAMP, 1.5)
    timed = {"total_s": 0.01, "loader_s": 0.009, "direct": True}
    out = loadcost.with_recorded_load(timed, rec)
    assert out["import_s"] == 1.5 and out["import_measured_at"] == STAMP
    assert out["total_s"] == pytest.approx(0.01 + 1.25)
    assert out["probe"]["check_programs"] == 6 and out["probe_measured_at"] == STAMP
    assert timed == {"total_s": 0.01, "loader_s": 0.009, "direct": True}


PIN_SCRIPT = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
from worker.loading import pin_vec_isa_on_import
seen = []
pin_vec_isa_on_import(["VecAVX2"], seen.append)
before = "torch._inductor" in sys.modules
import torch._inductor.cpu_vec_isa as isa
print(json.dumps({"before": before, "seen": seen,
                  "list": [type(v).__name__ for v in isa.valid_vec_isa_list()]}))
"""


def test_the_probes_pin_waits_for_its_module_and_then_answers_it() -> None:
    import platform

    if platform.machine() not in ("x86_64", "AMD64"):
        pytest.skip("torch's probe runs on x86 only, and nothing is pinned elsewhere")
    proc = subprocess.run(
        [sys.executable, "-c", PIN_SCRIPT, str(REPO / "aotipre" / "runner")],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": ""},
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    # nothing imported torch's inductor for the pin; importing it pinned the list at once
    assert out == {"before": False, "seen": [True], "list": ["VecAVX2"]}


def test_a_recorded_import_cost_of_zero_is_a_time_and_a_total_that_is_not_one_is_left() -> None:
    rec = loadcost.parse(recorded(0.0), "k")
    assert rec is not None and rec.loader_import_s == 0.0
    for total in (True, "1.0", None):
        out = loadcost.with_recorded_load({"total_s": total, "direct": True}, rec)
        assert out["total_s"] == total and out["import_s"] == 0.0
