"""Accuracy triage's worker jobs, on fakes: what the session hands triage and what each triage
worker is told (no torch, no compile)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from aotipre.findings import codes as code_table
from aotipre.runner import launch
from aotipre.runner.stages import DynamicOptions, OutputMismatch
from aotipre.runner.stages.mismatch import hand_mismatch
from aotipre.triage.accuracy import AccuracyOptions, triage_accuracy

PROBED = ("avx512", "avx2")


def session(probed: tuple[str, ...] | None, handed: list[OutputMismatch]) -> Any:
    """The parts of a Session that hand_mismatch reads, after a load whose probe found
    `probed`."""
    found = code_table.get("AOT701").finding("output 0 differs", model="m", stage="compare")
    return SimpleNamespace(
        on_mismatch=handed.append,
        reference=SimpleNamespace(
            path="/nowhere/ep.pt2", model="model", label="--exported-program"
        ),
        findings=[found],
        package=SimpleNamespace(path="/nowhere/p.pt2"),
        model=SimpleNamespace(name="m"),
        device="cpu",
        inputs=SimpleNamespace(spec={"kind": "file", "path": "/nowhere/in.pt"}),
        opts=DynamicOptions(),
        extra_env={},
        callers_archive=None,
        aoti_package="/nowhere/p.pt2",
        aoti_model="model",
        probe=SimpleNamespace(probed=probed),
        records={},
        weights=None,
    )


@pytest.mark.parametrize("probed", [PROBED, None])
def test_the_session_hands_triage_the_isa_list_its_load_probed(probed: Any) -> None:
    handed: list[OutputMismatch] = []
    hand_mismatch(session(probed, handed))
    (case,) = handed
    assert case.vec_isa == probed


def test_each_triage_worker_is_pinned_to_the_sessions_isa_list(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A triage compile then skips torch's CPU-ISA probe (a few seconds per worker, much more on
    a loaded host), as crash triage's workers do."""
    jobs: list[dict[str, Any]] = []

    def crashed_worker(job: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
        jobs.append(dict(job))
        died = SimpleNamespace(
            result=None, timed_out=False, crashed=True, signal_name="SIGSEGV", ok=False
        )
        return (), died

    monkeypatch.setattr(launch, "run_job_file", crashed_worker)
    for probed, pinned in ((PROBED, list(PROBED)), (None, None)):
        handed: list[OutputMismatch] = []
        hand_mismatch(session(probed, handed))
        jobs.clear()
        result = triage_accuracy(handed[0], AccuracyOptions())
        assert jobs, result.stages  # the diagnostic rebuild's worker ran (and crashed)
        assert all(job.get("vec_isa") == pinned for job in jobs)
        assert "crashed" in result.stages[-1].detail  # inconclusive, said, not raised
