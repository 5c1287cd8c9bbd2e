"""Packages with custom operators and a plain one, built with plain torch in a fresh process
(tests/cpp/build_packages.py) once for every module and pytest worker (tests/building.py's
shared_build), and the run's aotipre cache folder, which holds the C++ harness."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.building import run_cache_dir, shared_build

HERE = Path(__file__).resolve().parent


@pytest.fixture(scope="session")
def built() -> Path:
    return shared_build(HERE / "build_packages.py", timeout=1800)


@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The run's aotipre cache (run_cache_dir): the harness is built once per run; none of these
    tests is about the cache itself."""
    return str(run_cache_dir(tmp_path_factory.getbasetemp()))
