"""Every adversarial case through the real CLI in a subprocess: the expected exit code and
findings, a complete JSON report, one stderr line at most, no traceback, no file written, no
code run, bounded memory and time."""

from __future__ import annotations

import io
import json
import os
import sys
import zipfile
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from scripts.build_fixtures import crc32_of_zeros
from tests.hardening.corpus import CASES, MARKER, Case, MiB, Sources
from tests.hardening.corpus_issue12 import _bzip2_zeros, _lzma_zeros  # and its cases in CASES
from tests.hardening.craft import RawEntry, raw_zip
from tests.hardening.harness import RSS_BOUND_MB, WALL_BOUND_S, Run, run_aotipre, setpriv_prefix

EVIDENCE_ENV = "AOTIPRE_HARDENING_EVIDENCE"
"""A folder: when set, a summary of every case (exit, peak RSS, time) is written there."""
SKIPPED = "skipped"


@pytest.fixture(scope="module")
def corpus_runs(
    pkg: Callable[[str], Path], tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Run | str]:
    """Build every case, run them all (in parallel, one process each), keyed by case name."""
    sources = Sources(ep_only=pkg("ep_only"), both=pkg("both"), aoti=pkg("aoti"))
    base = tmp_path_factory.mktemp("corpus")
    setpriv = setpriv_prefix()

    def one(case: Case) -> tuple[str, Run | str]:
        if case.unreadable and setpriv is None:
            return case.name, f"{SKIPPED}: running as root and setpriv cannot drop CAP_DAC_*"
        folder = base / case.name
        files = folder / "files"
        files.mkdir(parents=True)
        args = case.build(files, sources)
        prefix = [*(setpriv or []), sys.executable, "-m", "aotipre"] if case.unreadable else None
        run = run_aotipre(
            # --compile-at-deploy: most cases are rewrites of the ExportedProgram-only fixture,
            # which is otherwise an error of its own (AOT015, tests/checks)
            [
                "check",
                "--static-only",
                "--format",
                "json",
                "--no-config",
                "--compile-at-deploy",
                *args,
            ],
            workdir=folder,
            prefix=prefix,
            cwd=files,  # the case's files are named relative to it; it must gain nothing
        )
        return case.name, run

    with ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2)) as pool:
        runs = dict(pool.map(one, CASES))
    evidence = os.environ.get(EVIDENCE_ENV)
    if evidence:
        summary = {
            name: (
                run
                if isinstance(run, str)
                else {
                    "exit": run.returncode,
                    "peak_rss_mb": round(run.peak_rss_mb, 1),
                    "wall_s": round(run.wall_s, 2),
                    "codes": sorted(set(run.codes())) if run.stdout.strip() else None,
                }
            )
            for name, run in runs.items()
        }
        Path(evidence).mkdir(parents=True, exist_ok=True)
        Path(evidence, "corpus.json").write_text(json.dumps(summary, indent=1, sort_keys=True))
    return runs


def test_case_names_are_unique() -> None:
    names = [c.name for c in CASES]
    assert len(names) == len(set(names))
    assert len(CASES) >= 60


@pytest.mark.parametrize(
    ("method", "make", "nbytes"),
    [
        (zipfile.ZIP_BZIP2, _bzip2_zeros, 2 * 5_099_235 + 12_345),  # two full blocks and a rest
        (zipfile.ZIP_LZMA, _lzma_zeros, 3 * MiB),
    ],
)
def test_bombs_made_without_compressing_inflate_to_what_they_declare(
    method: int, make: Callable[[int], bytes], nbytes: int
) -> None:
    """The bomb cases' streams are put together rather than compressed: small ones read back
    whole by zipfile, which checks the declared size and CRC."""
    entry = RawEntry(b"m", make(nbytes), method, nbytes, crc32_of_zeros(nbytes))
    with zipfile.ZipFile(io.BytesIO(raw_zip([entry]))) as zf:
        assert zf.read("m") == bytes(nbytes)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_adversarial_case(case: Case, corpus_runs: dict[str, Run | str]) -> None:
    run = corpus_runs[case.name]
    if isinstance(run, str):
        pytest.skip(run)
    where = f"{case.name} ({case.what}): exit {run.returncode}, stderr: {run.stderr[-1500:]!r}"
    assert not run.killed, f"still running after {WALL_BOUND_S} s: {where}"
    assert "Traceback" not in run.stderr, where
    assert run.returncode == case.exit_code, where
    lines = run.stderr.splitlines()
    if run.returncode == 2:
        assert len(lines) == 1 and lines[0].startswith("aotipre: error: "), where
    else:
        assert lines == [], where
    report = run.report  # complete JSON, even when the package could not be checked
    assert report["exit_code"] == run.returncode
    assert report["verdict"] == {0: "pass", 1: "fail", 2: "error"}[run.returncode]
    found = set(run.codes())
    assert set(case.codes) <= found, f"{where}; codes {sorted(found)}"
    assert not set(case.absent) & found, f"{where}; codes {sorted(found)}"
    assert run.new_files == [], f"{where}; wrote {run.new_files}"
    assert not any(MARKER in f for f in run.new_files)
    assert run.peak_rss_mb <= RSS_BOUND_MB, f"{where}; peak RSS {run.peak_rss_mb:.0f} MB"
