"""Shared pytest fixtures: the built fixture packages, and skipping `gpu` tests without CUDA."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
BUILDER = REPO / "scripts" / "build_fixtures.py"
FIXTURE_DIR_ENV = "AOTIPRE_FIXTURE_DIR"
"""Set to build into (and read from) another directory than .fixture-cache/torch-<version>/."""
BUILD_TIMEOUT_S = 1800


RUN_CACHE_HOME_ENV = "AOTIPRE_TEST_CACHE_HOME"
"""The run's XDG_CACHE_HOME (set by the run that made it; xdist workers and nested runs keep it)."""


@pytest.hookimpl(trylast=True)  # after pytest's tmp_path plugin has made its factory
def pytest_configure(config: pytest.Config) -> None:
    """A suite started as a background job of a non-interactive shell (`cmd &`) inherits SIGINT
    ignored, and so would every aotipre it starts: the Ctrl-C tests would test the launcher, not
    aotipre. Give the suite, and through it its children, the interactive default.

    aotipre's default cache (`${XDG_CACHE_HOME:-~/.cache}/aotipre`: compiled packages, the
    host's CPU-ISA probe record) is the run's own, in its base temp folder: a test that passes
    no --cache-dir neither writes the user's cache nor depends on what earlier runs left there,
    and behaves as on a fresh CI machine. CI's cached venvs are still found where they are
    (AOTIPRE_CI_CACHE, tests/diff/test_runtime_pairs_real.py)."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if os.environ.get(RUN_CACHE_HOME_ENV):  # an xdist worker, or a pytest run by a test
        return
    users = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    os.environ.setdefault("AOTIPRE_CI_CACHE", str(users / "aotipre-ci"))
    home = config._tmp_path_factory.getbasetemp() / "cache-home"  # type: ignore[attr-defined]
    home.mkdir(mode=0o700, exist_ok=True)
    os.environ["XDG_CACHE_HOME"] = os.environ[RUN_CACHE_HOME_ENV] = str(home)


def run_builder(*args: str, timeout: float = BUILD_TIMEOUT_S) -> subprocess.CompletedProcess[str]:
    """Run scripts/build_fixtures.py in a fresh interpreter (keeps torch state out of pytest)."""
    return subprocess.run(
        [sys.executable, str(BUILDER), *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def _build(*extra: str) -> Path:
    out = os.environ.get(FIXTURE_DIR_ENV)
    proc = run_builder(*(["--out", out] if out else []), *extra)
    if proc.returncode != 0:
        pytest.fail(
            f"building the fixtures failed (exit {proc.returncode}):\n{proc.stderr[-6000:]}",
            pytrace=False,
        )
    return Path(proc.stdout.strip().splitlines()[-1])


PREBUILT_ENV = "AOTIPRE_FIXTURES_PREBUILT"
"""Set (with AOTIPRE_FIXTURE_DIR) to use that directory as it is, without asking the builder
whether it is current (saves its `import torch`; scripts/mutate.py runs pytest hundreds of times)."""


@pytest.fixture(scope="session")
def fixture_dir() -> Path:
    """The directory holding every CPU fixture, built on first use and reused afterwards."""
    if os.environ.get(PREBUILT_ENV) and os.environ.get(FIXTURE_DIR_ENV):
        return Path(os.environ[FIXTURE_DIR_ENV])
    return _build()


@pytest.fixture(scope="session")
def cuda_fixture_dir(fixture_dir: Path) -> Path:
    """Same directory, with the `<name>_cuda.pt2` variants built too (for `gpu` tests)."""
    return _build("--device", "cuda")


def read_manifest(directory: Path) -> dict[str, dict]:
    return json.loads((directory / "manifest.json").read_text())["fixtures"]


@pytest.fixture(scope="session")
def pkg(request: pytest.FixtureRequest) -> Callable[[str], Path]:
    """`pkg("aoti")` -> path of aoti.pt2; also `pkg("aoti_inputs")`, `pkg("broken_crc.pt2")`.

    A CPU fixture is built when first asked for (with what its export or compile makes anyway,
    `--only NAME --with-shared`) unless the manifest holds it under the build key of this
    session's builder runs: a session that needs a few fixtures (CI's other torch versions)
    builds only those. `<name>_cuda` variants come from `cuda_fixture_dir`."""
    built: dict[str, Path | str] = {}  # the builder's "dir" and "key", once it has run

    def lookup(name: str) -> Path:
        stem = name.removesuffix(".pt2").removesuffix(".pt")
        if os.environ.get(PREBUILT_ENV) or stem.endswith("_cuda"):
            fixture_dir = request.getfixturevalue(
                "cuda_fixture_dir" if stem.endswith("_cuda") else "fixture_dir"
            )
        else:
            fixture_dir = built.get("dir")
            entry = read_manifest(Path(fixture_dir)).get(stem) if fixture_dir else None
            current = entry is not None and entry.get("key") == built["key"]
            if not current or not all(
                Path(fixture_dir, f).is_file() and Path(fixture_dir, f).stat().st_size == size
                for f, size in entry["files"].items()
            ):
                fixture_dir = built["dir"] = _build("--only", stem, "--with-shared")
                built["key"] = read_manifest(fixture_dir)[stem]["key"]
        fixture_dir = Path(fixture_dir)
        fixtures = read_manifest(fixture_dir)  # re-read: cuda variants may be added later
        if stem not in fixtures:
            raise LookupError(f"no fixture {name!r}; known: {', '.join(sorted(fixtures))}")
        (filename,) = fixtures[stem]["files"]
        path = fixture_dir / filename
        if not path.is_file():
            raise FileNotFoundError(f"{path} is listed in manifest.json but missing")
        return path

    return lookup


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    gpu_items = [item for item in items if item.get_closest_marker("gpu")]
    if not gpu_items:
        return  # do not pay for `import torch` when no gpu test was collected
    import torch

    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (torch.cuda.is_available() is False)")
    for item in gpu_items:
        item.add_marker(skip)


@contextlib.contextmanager
def tmpfs(folder: Path, options: str) -> Iterator[Path]:
    """A tmpfs mounted on `folder` (made here) with mount `options` (`size=40m`, `noexec`) for
    the duration: a real small, noexec or separate filesystem. Skips the test where this user
    cannot mount."""
    folder.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(folder)],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs ({options}) here: {done.stderr.strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)
