"""Shared fixtures of tests/gate: the extra packages and inputs (built once, cached), plain-torch
ground truth in a fresh process, and the real dynamic stages with one compile cache."""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import subprocess
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from aotipre.findings import Finding, Severity, StageResult
from aotipre.pt2.reader import read_package
from aotipre.runner.stages import DynamicOptions, run_dynamic_stages
from tests.building import shared_build

FACTS = frozenset({"AOT051", "AOT052", "AOT053", "AOT640", "AOT641"})
"""Infos that describe the package, the host or what a load costs, not a problem: the -march and
GPU code of the compiled binaries (AOT051, AOT053), the torch that produced AOTI-only code
(AOT052), and the loader's CPU-ISA probe and extraction costs (AOT640, AOT641: measured, so they
come and go with the machine's load). Tests about other findings leave them out (without_facts);
each has its own tests (tests/gate/test_codes_real.py, tests/binaries, tests/runner/test_perf*)."""


def without_facts(findings: list[Finding]) -> list[Finding]:
    return [f for f in findings if not (f.code in FACTS and f.severity is Severity.INFO)]


REPO = Path(__file__).resolve().parents[2]
BUILD = Path(__file__).with_name("build_gate.py")
BUILD_PLAIN_COMPILED = Path(__file__).with_name("build_plain_compiled.py")
BUILD_TIMEOUT_S = 1800


def _torch_version() -> str:
    out = subprocess.run(
        [sys.executable, "-c", "import torch; print(torch.__version__)"],
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    )
    return out.stdout.strip()


def _built(part: str, fixture_dir: Path) -> Path:
    """One part of build_gate.py's output (`inputs` or `compiled`), rebuilt when it changes."""
    digest = hashlib.sha256(BUILD.read_bytes() + (REPO / "fixtures/models.py").read_bytes())
    tag = f"{part}-{digest.hexdigest()[:12]}"
    cache = REPO / ".fixture-cache"
    if os.environ.get("AOTIPRE_FIXTURES_PREBUILT"):
        built = sorted(cache.glob(f"gate-*-{tag}/manifest.json"))
        if built:
            return built[-1].parent
    out = cache / f"gate-{_torch_version()}-{tag}"
    cache.mkdir(parents=True, exist_ok=True)
    with open(cache / ".gate-build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (out / "manifest.json").is_file():
            proc = subprocess.run(
                [sys.executable, str(BUILD), str(out), str(fixture_dir), part],
                capture_output=True,
                text=True,
                timeout=BUILD_TIMEOUT_S,
                check=False,
            )
            if proc.returncode != 0:
                pytest.fail(f"build_gate.py failed:\n{proc.stderr[-6000:]}", pytrace=False)
    return out


@pytest.fixture(scope="session")
def gate_inputs_dir(fixture_dir: Path) -> Path:
    """tests/gate's sample inputs and the packages assembled without a compile (seconds)."""
    return _built("inputs", fixture_dir)


@pytest.fixture(scope="session")
def gate_compiled_dir(fixture_dir: Path) -> Path:
    """tests/gate's packages that need compiles of their own (a minute, once)."""
    return _built("compiled", fixture_dir)


@pytest.fixture(scope="session")
def gate(gate_inputs_dir: Path, pkg: Callable[[str], Path]) -> Callable[[str], Path]:
    """`gate("wider_aoti.pt2")`, `gate("token_b65")` (inputs: .pt added); falls back to the
    fixture set (`gate("aoti")`). The compiled packages: `gate_compiled`."""

    def lookup(name: str) -> Path:
        for candidate in (gate_inputs_dir / name, gate_inputs_dir / f"{name}.pt"):
            if candidate.is_file():
                return candidate
        return pkg(name)

    return lookup


@pytest.fixture(scope="session")
def gate_compiled(gate_compiled_dir: Path, gate: Callable[[str], Path]) -> Callable[[str], Path]:
    """Like `gate`, and the compiled packages too (`forever.pt2`, `unit.pt2`, `pos_wider.pt2`)."""

    def lookup(name: str) -> Path:
        for candidate in (gate_compiled_dir / name, gate_compiled_dir / f"{name}.pt"):
            if candidate.is_file():
                return candidate
        return gate(name)

    return lookup


def plain_torch(code: str, *args: str, env: dict[str, str] | None = None) -> Any:
    """Run `code` with plain torch in a fresh interpreter; it prints one JSON value last."""
    proc = subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, **(env or {})},
        check=False,
    )
    lines = proc.stdout.strip().splitlines()
    assert proc.returncode == 0 and lines, proc.stderr[-3000:]
    return json.loads(lines[-1])


PLAIN_REFUSED = """
import json, sys, torch
m = torch._inductor.aoti_load_package(sys.argv[1])
out = []
for path in sys.argv[2:]:
    args, kwargs = torch.load(path)
    try:
        m(*args, **kwargs)
        out.append(False)
    except Exception:
        out.append(True)
print(json.dumps(out))
"""


@pytest.fixture(scope="session")
def plain_compiled_refuses() -> Callable[..., list[bool]]:
    """plain_compiled_refuses(ep_only_package, *inputs): for each inputs file, whether the AOTI
    code plain torch compiles from the package's ExportedProgram (aoti_compile_and_package in a
    fresh process: build_plain_compiled.py, once per package's bytes for every module, pytest
    worker and run, tests/building.py `shared_build`) refuses it under
    AOTI_RUNTIME_CHECK_INPUTS=1. What that code checks depends on the torch: 2.13 compiles a
    Dim(min=1) loaded from a file to a check of >= 2, 2.11 keeps >= 1."""

    def go(package: Path, *inputs: Path) -> list[bool]:
        compiled = shared_build(BUILD_PLAIN_COMPILED, str(package), sources=(package,))
        return plain_torch(
            PLAIN_REFUSED,
            str(compiled / "compiled.pt2"),
            *map(str, inputs),
            env={"AOTI_RUNTIME_CHECK_INPUTS": "1"},
        )

    return go


def rewrite(src: Path, dst: Path, edit: Callable[[str, bytes], bytes | None]) -> Path:
    """Copy an archive member by member through `edit` (None drops the member): a real package
    damaged or changed in one named way."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(src) as z, zipfile.ZipFile(dst, "w") as out:
        for info in z.infolist():
            data = edit(info.filename, z.read(info))
            if data is not None:
                out.writestr(info.filename, data)
    return dst


Dynamic = Callable[..., tuple[dict[str, StageResult], list[Finding]]]


@pytest.fixture(scope="session")
def gate_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One compile cache for the session's real dynamic stages."""
    return tmp_path_factory.mktemp("gate-compile-cache")


@pytest.fixture
def dynamic(request: pytest.FixtureRequest, gate_cache: Path) -> Dynamic:
    """dynamic("aoti", "token_b65", **DynamicOptions fields): the real dynamic stages (real
    worker processes) through their public entry point, every finding but the FACTS kept (AOT515
    too). A package or inputs given by absolute path is used as it is: the gate's packages, and
    the whole fixture set they are built from, are built only when a name asks for them (CI's
    other torch versions run tests that pass their own packages)."""

    def gate(name: str) -> Path:
        if Path(name).is_absolute():
            return Path(name)
        lookup: Callable[[str], Path] = request.getfixturevalue("gate_compiled")
        return lookup(name)

    def go(
        package: str, inputs: str | None = None, model: str | None = None, **opts: Any
    ) -> tuple[dict[str, StageResult], list[Finding]]:
        path = gate(package if package.endswith(".pt2") else f"{package}.pt2")
        info = read_package(path)
        m = info.model(model) if model else info.models[0]
        assert m is not None
        inputs_path = str(gate(inputs)) if inputs else None
        member = None if inputs else m.sample_inputs_member
        options = DynamicOptions(**{"cache_dir": str(gate_cache), "timeout_s": 120.0, **opts})
        results, findings = run_dynamic_stages(info, m, inputs_path, member, options)
        return {r.name: r for r in results}, without_facts(findings)

    return go
