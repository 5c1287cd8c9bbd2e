"""torch 2.15.0 for real: CI's .venv-2.15 (installed from the package registry by .ci/run; see
scripts/bootstrap.sh). Packages built by 2.15 are read, checked and run by aotipre's workers on
this torch (2.13) and through `--python` on 2.15, packages built here run under 2.15, and the
static `--target torch=`/`libtorch=` verdicts hold. Every expectation is what plain torch does
when it loads the package in a fresh process (`_plain_run`), never a hard-coded verdict.

Slow (each case compiles or loads for real); skipped without .venv-2.15 and inside it.
"""

from __future__ import annotations

import functools
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.building import check_json

REPO = Path(__file__).resolve().parents[2]
TORCH215 = REPO / ".venv-2.15" / "bin" / "python"
TORCH214 = REPO / ".venv-2.14" / "bin" / "python"
Pkg = Callable[[str], Path]
FIXTURES = ("aoti", "aoti_inputs", "strides", "strides_inputs", "strides_inputs_transposed")
"""What these tests read; build_fixtures.py --only builds a package without its inputs files."""

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not TORCH215.is_file() or Path(sys.prefix).resolve() == TORCH215.parents[1].resolve(),
        reason="no .venv-2.15 (bash .ci/run builds it), or running in it already",
    ),
]

PLAIN = """
import sys, torch
pkg, inputs = sys.argv[1], sys.argv[2]
model = torch._inductor.aoti_load_package(pkg)
sample = torch.load(inputs)
args, kwargs = (sample.get("args", ()), sample.get("kwargs", {})) if isinstance(sample, dict) else (sample, {})
out = model(*args, **kwargs)
outs = out if isinstance(out, (list, tuple)) else [out]
print("OK", torch.__version__, [tuple(o.shape) for o in outs])
"""


@functools.cache
def _plain_run(python: Path | str, pkg: Path, inputs: Path) -> bool:
    """What a deployment on that torch sees: a fresh `import torch; aoti_load_package; run`.
    Asked once per (torch, package): the module's tests share the answer."""
    proc = subprocess.run(
        [str(python), "-c", PLAIN, str(pkg), str(inputs)],
        capture_output=True, text=True, timeout=600, check=False,
        env={k: v for k, v in os.environ.items() if not k.startswith("TORCHINDUCTOR_")},
    )  # fmt: skip
    return proc.returncode == 0 and proc.stdout.startswith("OK")


def _aotipre(*args: str, tmp: Path) -> tuple[int, dict]:
    return check_json(tmp, *args)


def _build(python: Path) -> Path:
    """FIXTURES built by `python`'s torch through the public API
    (scripts/build_fixtures.py: torch.export + aoti_compile_and_package), into the cache that
    torch's CI leg uses too (.fixture-cache/torch-<version>/)."""
    proc = subprocess.run(
        [str(python), str(REPO / "scripts/build_fixtures.py"), "--only", *FIXTURES],
        capture_output=True, text=True, timeout=1200, check=False, cwd=REPO,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-4000:]
    return Path(proc.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def built215() -> Path:
    return _build(TORCH215)


@pytest.fixture(scope="module")
def packages(built215: Path, pkg: Pkg) -> list[tuple[Path, Path]]:
    """(package, inputs) built by torch 2.15.0, 2.13.0 (this torch) and, where CI built its
    venv, 2.14.1."""
    built = [built215, pkg("aoti").parent]
    if TORCH214.is_file():
        built.append(_build(TORCH214))
    return [(folder / "aoti.pt2", folder / "aoti_inputs.pt") for folder in built]


def test_215_package_read_and_run_on_this_torch(built215: Path, tmp_path: Path) -> None:
    pkg, inputs = built215 / "aoti.pt2", built215 / "aoti_inputs.pt"
    truth = _plain_run(sys.executable, pkg, inputs)
    rc, doc = _aotipre(str(pkg), "--inputs", str(inputs), tmp=tmp_path)
    assert not any(f["code"] == "AOT405" for f in doc["findings"]), "2.15 is supported"
    assert (rc == 0) is truth, (truth, doc["findings"])
    run = {s["name"]: s["status"] for s in doc["stages"]}["run"]
    assert run == ("passed" if truth else "failed"), doc["findings"]


def test_the_version_matrix_both_ways(built215: Path, pkg: Pkg, tmp_path: Path) -> None:
    """A 2.15 package and a 2.13 package, each checked by workers in both torches in one
    command: each runtime's verdict is what that torch does with the package."""
    for package, inputs in (
        (built215 / "aoti.pt2", built215 / "aoti_inputs.pt"),
        (pkg("aoti"), pkg("aoti_inputs")),
    ):
        truth = {
            "2.13": _plain_run(sys.executable, package, inputs),
            "2.15": _plain_run(TORCH215, package, inputs),
        }
        rc, doc = _aotipre(
            str(package), "--inputs", str(inputs),
            "--python", sys.executable, "--python", str(TORCH215), tmp=tmp_path,
        )  # fmt: skip
        assert [r["torch"].split("+")[0][:4] for r in doc["runtimes"]] == ["2.13", "2.15"]
        runs = {s["runtime"]: s["status"] for s in doc["stages"] if s["name"] == "run"}
        for release, ok in truth.items():
            (status,) = [v for k, v in runs.items() if k.startswith(f"torch {release}")]
            assert status == ("passed" if ok else "failed"), (package, release, doc["findings"])
        assert (rc == 0) is all(truth.values()), doc["findings"]


def test_target_torch_verdicts_against_real_loads(
    packages: list[tuple[Path, Path]], tmp_path: Path
) -> None:
    """`--target cpu,torch=X` (static) says a package loads on X exactly when plain torch X
    loads and runs it; X in 2.13, 2.15 and, where CI built it, 2.14."""
    interpreters = {"2.13": Path(sys.executable), "2.15": TORCH215}
    if TORCH214.is_file():
        interpreters["2.14"] = TORCH214
    for package, inputs in packages:
        for release, python in interpreters.items():
            truth = _plain_run(python, package, inputs)
            _, doc = _aotipre(
                str(package), "--static-only", "--target", f"cpu,torch={release}", tmp=tmp_path
            )
            (row,) = doc["targets"]
            assert (row["status"] == "loads") is truth, (package, release, row)


def test_libtorch_folder_of_215(packages: list[tuple[Path, Path]], tmp_path: Path) -> None:
    """`--target libtorch=` naming the installed 2.15.0 torch folder: its version read from the
    folder and its libraries' exports; the verdict is the real 2.15 load's."""
    (folder,) = TORCH215.parents[1].glob("lib/python3*/site-packages/torch")
    for package, inputs in packages:
        truth = _plain_run(TORCH215, package, inputs)
        _, doc = _aotipre(
            str(package), "--static-only", "--target", f"cpu,libtorch={folder}", tmp=tmp_path
        )
        (row,) = doc["targets"]
        assert (row["status"] == "loads") is truth, (package, row)


def test_215_aoti_only_contract(built215: Path, tmp_path: Path) -> None:
    """The stride contract read from a 2.15 wrapper (AOTI only): the right inputs pass
    statically and dynamically, the transposed ones are refused as the 2.15 runtime check does."""
    pkg, good, bad = (built215 / n for n in ("strides.pt2", "strides_inputs.pt",
                                              "strides_inputs_transposed.pt"))  # fmt: skip
    rc, doc = _aotipre(str(pkg), "--inputs", str(good), "--python", str(TORCH215), tmp=tmp_path)
    assert rc == 0, doc["findings"]
    rc, doc = _aotipre(
        str(pkg), "--inputs", str(bad), "--static-only", "--deployment-checks-inputs", tmp=tmp_path
    )
    assert rc != 0 and any(
        f["code"] == "AOT307" and f["severity"] == "error" for f in doc["findings"]
    ), doc["findings"]
