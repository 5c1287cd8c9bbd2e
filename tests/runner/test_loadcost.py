"""torch's CPU-ISA probe paid once per host (runner/loadcost.py): the record's key, its trust and
shape checks, what a load entry proves, and the perf figures rebuilt from it. The real-worker
test at the end checks a fixture three times with a private cache: the first checks measure the
probe beside their first worker (runner/loadmeasure.py) and report that measure, the last is
answered from the record and reports the recorded cost."""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from aotipre import CheckOptions, check
from aotipre.runner import loadcost
from aotipre.runner.stages import DynamicOptions, PerfOptions

GOOD_PROBE = {
    "seconds": 1.25,
    "check_programs": 6,
    "dlopen_children": 6,
    "dlopen_children_s": 0.9,
    "gxx_builds": 0,
    "gxx_s": None,
    "gxx_failed": 0,
    "base_checks": 2,
    "base_checks_s": 1.1,
    "vec_isa_ok": None,
}
NOW = time.time()
STAMP = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(NOW - 60))


def record_json(key: str = "k", **changes: object) -> dict[str, object]:
    data: dict[str, object] = {
        "format": loadcost.FORMAT,
        "key": key,
        "vec_isa": ["VecAVX512", "VecAVX2"],
        "probe": dict(GOOD_PROBE),
        "measured_at": STAMP,
    }
    data.update(changes)
    return data


def test_a_well_formed_record_is_read() -> None:
    rec = loadcost.parse(record_json(), "k", now=NOW)
    assert rec is not None
    assert rec.vec_isa == ("VecAVX512", "VecAVX2")
    assert rec.seconds == 1.25 and rec.probe["check_programs"] == 6
    assert "gxx_s" not in rec.probe  # a null time is left out, not made 0


@pytest.mark.parametrize(
    "changes",
    [
        {"format": loadcost.FORMAT + 1},
        {"key": "other"},
        {"vec_isa": []},
        {"vec_isa": "VecAVX2"},
        {"vec_isa": ["VecAVX2", "VecAVX2"]},
        {"vec_isa": ["Vec AVX2"]},
        {"vec_isa": ["../x"]},
        {"vec_isa": [f"Vec{i}" for i in range(loadcost.MAX_ISAS + 1)]},
        {"probe": {**GOOD_PROBE, "seconds": None}},
        {"probe": {**GOOD_PROBE, "seconds": -1.0}},
        {"probe": {**GOOD_PROBE, "seconds": float("inf")}},
        {"probe": {**GOOD_PROBE, "seconds": True}},
        {"probe": {**GOOD_PROBE, "check_programs": 1.5}},
        {"probe": {**GOOD_PROBE, "gxx_builds": -1}},
        {"probe": "fast"},
        {"costed": "no"},
        {"costed": False},  # the list alone carries no cost
        {"costed": False, "probe": {}, "loader_import_s": 1.0},
        {"measured_at": "yesterday"},
        {"measured_at": 12},
        {"measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(NOW + 3600))},
        {
            "measured_at": time.strftime(
                "%Y-%m-%dT%H:%M:%SZ", time.gmtime(NOW - loadcost.MAX_AGE_S - 60)
            )
        },
    ],
)
def test_a_record_not_as_written_is_absent(changes: dict[str, object]) -> None:
    assert loadcost.parse(record_json(**changes), "k", now=NOW) is None


def test_records_round_trip_and_only_this_users_private_files_are_read(tmp_path: Path) -> None:
    rec = loadcost.parse(record_json(key="abc"), "abc")
    assert rec is not None
    loadcost.write(str(tmp_path), "abc", rec)
    path = tmp_path / loadcost.FOLDER / "abc.json"
    assert (path.stat().st_mode & 0o777) == 0o600
    assert loadcost.read(str(tmp_path), "abc") == rec
    assert loadcost.read(str(tmp_path), "other") is None
    os.chmod(path, 0o666)
    assert loadcost.read(str(tmp_path), "abc") is None  # others could have written it
    os.chmod(path, 0o600)
    link = tmp_path / loadcost.FOLDER / "linked.json"
    link.symlink_to(path)
    assert loadcost.read(str(tmp_path), "linked") is None
    path.write_bytes(b"{not json")
    assert loadcost.read(str(tmp_path), "abc") is None
    assert [p.name for p in (tmp_path / loadcost.FOLDER).iterdir() if ".tmp" in p.name] == []


def test_a_record_is_not_written_into_a_folder_others_can_write(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)
    rec = loadcost.parse(record_json(key="abc"), "abc")
    assert rec is not None
    loadcost.write(str(shared), "abc", rec)
    assert not (shared / loadcost.FOLDER).exists()


def load_entry(**changes: object) -> dict[str, object]:
    entry: dict[str, object] = {
        "vec_isa": ["VecAVX2"],
        "vec_isa_pinned": False,
        "perf": {"fresh_process": True, "probe_cached": False, "probe": dict(GOOD_PROBE)},
    }
    entry.update(changes)
    return entry


def test_only_a_timed_fresh_load_whose_probe_ran_makes_a_record() -> None:
    rec = loadcost.from_load(load_entry())
    assert rec is not None and rec.vec_isa == ("VecAVX2",) and rec.seconds == 1.25
    pinned = load_entry(vec_isa_pinned=True)
    cached = load_entry(perf={"fresh_process": True, "probe_cached": True, "probe": GOOD_PROBE})
    warm = load_entry(perf={"fresh_process": False, "probe": GOOD_PROBE})
    untimed = load_entry(perf=None)
    compiled = load_entry(perf={"fresh_process": True, "probe": {**GOOD_PROBE, "gxx_builds": 3}})
    failing = load_entry(
        perf={"fresh_process": True, "probe": {**GOOD_PROBE, "gxx_builds": 2, "gxx_failed": 2}}
    )
    assert loadcost.from_load(failing) is not None  # every process pays a failed build again
    for entry in (pinned, cached, warm, untimed, compiled, load_entry(vec_isa=None)):
        assert loadcost.from_load(entry) is None, entry


def test_the_recorded_probe_replaces_the_pinned_one_in_the_load_figures() -> None:
    rec = loadcost.parse(record_json(), "k")
    assert rec is not None
    timed = {"total_s": 0.11, "probe": {"seconds": 0.01, "check_programs": 0}, "loader_s": 0.1}
    out = loadcost.with_recorded_probe(timed, rec)
    assert out["total_s"] == pytest.approx(0.11 - 0.01 + 1.25)
    assert out["probe"]["check_programs"] == 6 and out["loader_s"] == 0.1
    assert out["probe_measured_at"] == STAMP
    assert timed["total_s"] == 0.11  # the worker's own entry is left as it was


def test_the_key_follows_what_the_probe_depends_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if loadcost._cpu_identity() is None:
        pytest.skip("no /proc/cpuinfo here: nothing is cached")
    env = {"PATH": os.environ.get("PATH", "")}
    base = loadcost.host_key("/py", "2.13.0+cpu", "/site/torch", env)
    assert base == loadcost.host_key("/py", "2.13.0+cpu", "/site/torch", dict(env))
    other = {
        loadcost.host_key("/py2", "2.13.0+cpu", "/site/torch", env),
        loadcost.host_key("/py", "2.14.1", "/site/torch", env),
        loadcost.host_key("/py", "2.13.0+cpu", "/other/torch", env),
        loadcost.host_key("/py", "2.13.0+cpu", "/site/torch", {**env, "CXX": "clang++"}),
        loadcost.host_key(
            "/py", "2.13.0+cpu", "/site/torch", {**env, "TORCHINDUCTOR_VEC_ISA_OK": "1"}
        ),
        loadcost.host_key(
            "/py", "2.13.0+cpu", "/site/torch", {**env, "ATEN_CPU_CAPABILITY": "avx2"}
        ),
    }
    assert base not in other and len(other) == 6
    # the same compiler name on another PATH is another compiler
    fake = tmp_path / "bin"
    fake.mkdir()
    gxx = fake / "g++"
    gxx.write_text("#!/bin/sh\n")
    gxx.chmod(0o755)
    moved = loadcost.host_key("/py", "2.13.0+cpu", "/site/torch", {"PATH": str(fake)})
    assert moved != base
    monkeypatch.setattr(loadcost, "_cpu_identity", lambda: "vendor_id: Other\nflags: sse2")
    assert loadcost.host_key("/py", "2.13.0+cpu", "/site/torch", env) != base


def test_a_hand_over_pins_from_the_record_or_from_the_first_load(tmp_path: Path) -> None:
    def hand_over(**kw: object) -> loadcost.HandOver:
        args: dict[str, object] = {
            "cache_dir": str(tmp_path),
            "use_cache": True,
            "python": None,
            "worker_command": None,
        }
        args.update(kw)
        return loadcost.HandOver(**args)  # type: ignore[arg-type]

    env = dict(os.environ)
    first = hand_over()
    assert first.pin(env) is None  # nothing recorded: the first worker probes
    first.learn(load_entry(vec_isa=["VecAVX512", "VecAVX2"]))
    assert first.pin(env) == ["VecAVX512", "VecAVX2"]
    if loadcost._cpu_identity() is None:
        return
    written = list((tmp_path / loadcost.FOLDER).glob("*.json"))
    assert len(written) == 1
    second = hand_over()
    assert second.pin(env) == ["VecAVX512", "VecAVX2"]
    assert second.recorded is not None and second.recorded.seconds == 1.25
    # the cache off, or a worker command of the user's: nothing read, nothing written
    for off in (hand_over(use_cache=False), hand_over(worker_command=["x"])):
        assert off.pin(env) is None
        off.learn(load_entry(vec_isa=["VecAVX2"]))
        assert off.recorded is None and off.pin(env) == ["VecAVX2"]
    assert list((tmp_path / loadcost.FOLDER).glob("*.json")) == written
    # a pinned load proves nothing for the record, but its list is handed on
    third = hand_over(cache_dir=str(tmp_path / "empty"))
    assert third.pin(env) is None
    third.learn(load_entry(vec_isa_pinned=True))
    assert third.recorded is None and not (tmp_path / "empty" / loadcost.FOLDER).exists()


class StandInMeasurement:
    """A finished (or running) loadmeasure.Measurement: its step record or its error."""

    def __init__(self, entry: dict[str, object] | None, error: str | None = None) -> None:
        self._entry = entry
        self.error = error
        self.done = False
        self.waited = 0
        self.stopped = False

    def entry(self, timeout_s: float | None = None) -> dict[str, object] | None:
        self.waited += 1
        self.done = True
        return self._entry

    def stop(self) -> None:
        self.stopped = True


def test_without_a_record_the_checks_own_measurement_answers_the_pins_and_the_report(
    tmp_path: Path,
) -> None:
    env = dict(os.environ)

    def hand_over(cache: Path) -> loadcost.HandOver:
        return loadcost.HandOver(
            cache_dir=str(cache), use_cache=True, python=None, worker_command=None
        )

    # a steady probe (nothing built): this check's figures, and the host's record
    steady = StandInMeasurement(load_entry(vec_isa=["VecAVX512", "VecAVX2"]))
    hand = hand_over(tmp_path / "a")
    assert hand.pin(env) is None
    started: list[int] = []
    assert hand.measure(lambda: started.append(1) or steady)  # type: ignore[arg-type,func-returns-value]
    assert hand.measure(lambda: started.append(1) or steady)  # type: ignore[arg-type,func-returns-value]
    assert started == [1]  # started once
    assert hand.measuring
    assert hand.pin(env) is None and steady.waited == 0  # a load does not wait for it
    assert hand.pin(env, wait=True) == ["VecAVX512", "VecAVX2"]  # a compile does
    rec = hand.await_measured()
    assert rec is not None and rec.seconds == 1.25 and not hand.measuring
    if loadcost._cpu_identity() is not None:
        assert len(list((tmp_path / "a" / loadcost.FOLDER).glob("*.json"))) == 1
    hand.stop()
    assert steady.stopped

    # the host's first probe into an empty inductor cache builds its check programs: reported
    # as what this check's fresh process paid, never kept for later checks
    built = {**GOOD_PROBE, "gxx_builds": 6, "seconds": 9.5}
    first = StandInMeasurement(load_entry(perf={"fresh_process": True, "probe": built}))
    hand = hand_over(tmp_path / "b")
    hand.pin(env)
    hand.measure(lambda: first)  # type: ignore[arg-type,return-value]
    rec = hand.await_measured()
    assert rec is not None and rec.seconds == 9.5 and rec.probe["gxx_builds"] == 6
    assert not (tmp_path / "b" / loadcost.FOLDER).exists()

    # a measurement that failed: no record, and why
    hand = hand_over(tmp_path / "c")
    hand.pin(env)
    hand.measure(lambda: StandInMeasurement(None, "the measuring process timed out"))  # type: ignore[arg-type,return-value]
    assert hand.await_measured() is None
    assert hand.unmeasured == "the measuring process timed out"
    assert hand.pin(env, wait=True) is None  # the worker probes itself
    # none could start: said too, and not tried again
    hand = hand_over(tmp_path / "d")
    assert not hand.measure(lambda: None) and hand.unmeasured


def test_a_check_without_costs_keeps_the_list_alone_for_checks_without_costs(
    tmp_path: Path,
) -> None:
    """`--no-perf` measures no cost, so it keeps the first load's list alone: it answers later
    checks without the perf stage, and a check with it (which must report the probe's cost)
    reads it as absent and replaces it with its own record."""
    if loadcost._cpu_identity() is None:
        pytest.skip("no /proc/cpuinfo here: nothing is cached")
    env = dict(os.environ)
    folder = tmp_path / loadcost.FOLDER

    def hand_over(costs: bool) -> loadcost.HandOver:
        return loadcost.HandOver(
            cache_dir=str(tmp_path), use_cache=True, python=None, worker_command=None, costs=costs
        )

    def kept() -> dict[str, object]:
        [path] = folder.glob("*.json")
        data: dict[str, object] = json.loads(path.read_text())
        return data

    untimed = load_entry(vec_isa=["VecAVX512", "VecAVX2"], perf=None)  # a --no-perf load
    first = hand_over(costs=False)
    assert first.pin(env) is None
    first.learn(load_entry(vec_isa=["VecAVX2"], vec_isa_pinned=True, perf=None))
    assert not folder.exists()  # a list aotipre pinned proves nothing
    first.learn(untimed)
    assert kept()["costed"] is False and kept()["probe"] == {}
    assert first.recorded is None
    # the next check without costs is answered from it
    quiet = hand_over(costs=False)
    assert quiet.pin(env) == ["VecAVX512", "VecAVX2"] and quiet.recorded is None
    quiet.learn(untimed)
    assert kept()["costed"] is False
    # a check with the perf stage reads it as absent: its first worker probes (or its own
    # measurement answers), and its timed load's record takes the place of the list alone
    timed = hand_over(costs=True)
    assert timed.pin(env) is None and timed.recorded is None
    assert timed.measure(lambda: StandInMeasurement(load_entry()))  # type: ignore[arg-type,return-value]
    record = timed.await_measured()
    assert record is not None and record.seconds == 1.25
    assert kept()["costed"] is True and kept()["vec_isa"] == ["VecAVX2"]
    # a check without costs uses that record, and never writes the list alone over it
    quiet = hand_over(costs=False)
    assert quiet.pin(env) == ["VecAVX2"] and quiet.recorded is not None
    late = hand_over(costs=False)
    shutil.rmtree(folder)
    assert late.pin(env) is None  # looked before another check kept a record
    timed = hand_over(costs=True)
    timed.pin(env)
    timed.learn(load_entry())
    late.learn(untimed)
    assert kept()["costed"] is True


# -- the real worker: a check measures the probe once, the next is answered from the record


def own_caches(inputs: Path, tmp_path: Path, perf: PerfOptions | None) -> CheckOptions:
    """CheckOptions with an aotipre cache (`tmp_path/cache`) and an inductor cache
    (`tmp_path/inductor`, where torch's probe builds its check programs) of the test's own."""
    return CheckOptions(
        inputs=str(inputs),
        dynamic=DynamicOptions(
            cache_dir=str(tmp_path / "cache"),
            probe=False,
            perf=perf,
            extra_env={"TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor")},
        ),
    )


def probe_built(inductor: Path) -> bool:
    """torch's probe built its check programs in `inductor`."""
    return any(p.suffix == ".so" for p in inductor.rglob("*"))


@pytest.mark.slow
def test_the_second_check_is_answered_from_the_record(
    pkg: Callable[[str], Path], tmp_path: Path
) -> None:
    import platform

    if platform.machine() not in ("x86_64", "AMD64") or loadcost._cpu_identity() is None:
        pytest.skip("torch runs its CPU-ISA probe on x86 only")
    cache, inductor = tmp_path / "cache", tmp_path / "inductor"
    options = own_caches(pkg("aoti_inputs"), tmp_path, PerfOptions(runs=3))
    # the host's first check: no record, so the loader's imports and the probe are measured in
    # a fresh process of their own beside the first worker (runner/loadmeasure.py), which loads
    # with the C++ loader alone; into an empty inductor cache the probe compiles its check
    # programs, which this check reports as what it cost, and which no record keeps
    built = check(pkg("aoti"), options)
    cold0 = built.performance[0][0].cold
    assert cold0 is not None and cold0.probe_compiles > 0 and cold0.probe_s
    assert cold0.probe_measured_at is not None and cold0.loader_import_s > 0
    assert cold0.total_s >= cold0.loader_import_s + cold0.probe_s
    assert probe_built(inductor)  # here
    assert not list((cache / loadcost.FOLDER).glob("*.json"))

    first = check(pkg("aoti"), options)  # they are built now: this one is recorded
    records = list((cache / loadcost.FOLDER).glob("*.json"))
    assert len(records) == 1, first.stages
    kept = json.loads(records[0].read_text())
    cold1 = first.performance[0][0].cold
    # the figures are the measurement's own numbers, kept as they were reported
    assert cold1 is not None and cold1.probe_measured_at == kept["measured_at"]
    assert cold1.probe_s == pytest.approx(kept["probe"]["seconds"])
    assert cold1.probe_programs > 0 and cold1.probe_compiles == 0
    shutil.rmtree(inductor)

    second = check(pkg("aoti"), options)
    # no probe ran: it would have built its check programs into the emptied cache again
    assert not probe_built(inductor)
    cold2 = second.performance[0][0].cold
    assert cold2 is not None and cold2.probe_measured_at == kept["measured_at"]
    assert cold2.probe_s == pytest.approx(kept["probe"]["seconds"])
    assert cold2.probe_programs == kept["probe"]["check_programs"]
    assert cold2.probe_compiles == cold1.probe_compiles
    assert cold2.fresh_process  # still the figure of a fresh deployment process
    assert cold2.total_s >= cold2.probe_s
    perf = {s.name: s for s in second.stages}["perf"]
    assert f"measured {kept['measured_at']}" in perf.detail
    assert second.verdict == first.verdict == built.verdict
    assert [f.code for f in second.findings] == [f.code for f in first.findings]
    # the record holds the loader's imports too: this AOTI-only package of one model was
    # loaded with the C++ loader alone, and its figures are still a fresh process's
    assert kept["loader_import_s"] > 0
    assert cold1.loader_import_s == pytest.approx(kept["loader_import_s"])
    assert cold2.loader_import_s == pytest.approx(kept["loader_import_s"])
    assert cold2.import_measured_at == kept["measured_at"] == cold1.import_measured_at
    assert cold2.total_s >= cold2.loader_import_s + cold2.probe_s
    loads = [{s.name: s for s in r.stages}["load"] for r in (built, first, second)]
    assert all("the C++ loader" in load.detail for load in loads)


@pytest.mark.slow
def test_without_the_perf_stage_a_cpu_package_skips_the_probe_once_it_is_known(
    pkg: Callable[[str], Path], tmp_path: Path
) -> None:
    """`--no-perf` on a host without a record: the first check's load runs torch's probe (where
    it fails, load_pt2 fails and load_package falls back, as in a deployment: AOT531) and keeps
    its list alone; the next loads an AOTI-only CPU package of one model with the C++ loader
    alone (nothing reports what the probe costs), so no probe runs."""
    import platform

    if platform.machine() not in ("x86_64", "AMD64") or loadcost._cpu_identity() is None:
        pytest.skip("torch runs its CPU-ISA probe on x86 only")
    inductor = tmp_path / "inductor"
    options = own_caches(pkg("aoti_inputs"), tmp_path, None)
    first = check(pkg("aoti"), options)
    assert first.verdict == "pass", first.findings
    assert "(load_package)" in {s.name: s for s in first.stages}["load"].detail
    assert probe_built(inductor)
    [path] = (tmp_path / "cache" / loadcost.FOLDER).glob("*.json")
    assert json.loads(path.read_text())["costed"] is False
    shutil.rmtree(inductor)

    second = check(pkg("aoti"), options)
    assert "the C++ loader" in {s.name: s for s in second.stages}["load"].detail
    assert not probe_built(inductor)
    assert second.verdict == first.verdict and second.findings == first.findings


@pytest.mark.slow
def test_checks_without_the_perf_stage_pay_the_probe_once_per_host(
    pkg: Callable[[str], Path], tmp_path: Path
) -> None:
    """A package that load_package must load (it holds an ExportedProgram): the first check
    without the perf stage pays torch's probe and keeps its list alone; the next is answered
    from it, and a check with the perf stage still measures the probe itself."""
    import platform

    if platform.machine() not in ("x86_64", "AMD64") or loadcost._cpu_identity() is None:
        pytest.skip("torch runs its CPU-ISA probe on x86 only")
    cache, inductor = tmp_path / "cache", tmp_path / "inductor"

    def options(perf: PerfOptions | None) -> CheckOptions:
        return own_caches(pkg("aoti_inputs"), tmp_path, perf)

    def built() -> bool:
        return probe_built(inductor)

    first = check(pkg("both"), options(None))
    assert built()  # the load's probe ran here
    [path] = (cache / loadcost.FOLDER).glob("*.json")
    kept = json.loads(path.read_text())
    assert kept["costed"] is False and kept["vec_isa"]
    shutil.rmtree(inductor)

    second = check(pkg("both"), options(None))
    assert not built()  # answered from the list: no probe ran
    assert second.verdict == first.verdict and second.findings == first.findings

    timed = check(pkg("both"), options(PerfOptions(runs=3)))
    assert built()  # the probe's cost is measured, not taken from the list alone
    cold = timed.performance[0][0].cold
    assert cold is not None and cold.probe_s and cold.probe_measured_at is None


# -- the limits and branches the first mutation pass left untested (RELIABILITY.md)

CPUINFO = """processor\t: 0
vendor_id\t: AuthenticAMD
cpu family\t: 25
model name\t: AMD EPYC 7B13
cpu MHz\t\t: 2450.000
flags\t\t: fpu sse2 avx2

processor\t: 1
vendor_id\t: GenuineIntel
model name\t: Other CPU
flags\t\t: fpu sse2 avx512f
"""


def test_the_cpu_description_is_the_first_processors_identifying_lines() -> None:
    assert loadcost.cpu_description(CPUINFO) == (
        "vendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 7B13\nflags\t\t: fpu sse2 avx2"
    )
    arm = "processor\t: 0\nFeatures\t: fp asimd\nCPU implementer\t: 0x41\nCPU part\t: 0xd0c\n"
    assert loadcost.cpu_description(arm) == (
        "Features\t: fp asimd\nCPU implementer\t: 0x41\nCPU part\t: 0xd0c"
    )
    assert loadcost.cpu_description("processor\t: 0\ncpu MHz\t: 1000\n") is None
    assert loadcost.cpu_description("") is None


def test_the_key_is_32_hex_digits() -> None:
    if loadcost._cpu_identity() is None:
        pytest.skip("no /proc/cpuinfo here: nothing is cached")
    key = loadcost.host_key("/py", "2.13.0+cpu", "/site/torch", {"PATH": ""})
    assert key is not None and len(key) == 32 and int(key, 16) >= 0


def test_the_record_limits_are_inclusive() -> None:
    most = [f"Vec{i}" for i in range(loadcost.MAX_ISAS)]
    assert loadcost.parse(record_json(vec_isa=most), "k", now=NOW) is not None
    # measured this very second, and exactly MAX_AGE_S ago: still trusted
    just = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(int(NOW)))
    assert loadcost.parse(record_json(measured_at=just), "k", now=float(int(NOW))) is not None
    oldest = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(int(NOW) - loadcost.MAX_AGE_S))
    assert loadcost.parse(record_json(measured_at=oldest), "k", now=float(int(NOW))) is not None
    # a probe that cost nothing (TORCHINDUCTOR_VEC_ISA_OK=1) is a probe
    free = loadcost.parse(record_json(probe={**GOOD_PROBE, "seconds": 0.0}), "k", now=NOW)
    assert free is not None and free.seconds == 0.0
    # the ISA shortcut's value is kept up to 16 characters
    for value, kept in (("x" * 16, "x" * 16), ("x" * 17, None), ("1", "1"), (1, None)):
        rec = loadcost.parse(record_json(probe={**GOOD_PROBE, "vec_isa_ok": value}), "k", now=NOW)
        assert rec is not None and rec.probe["vec_isa_ok"] == kept, value


def test_a_build_without_a_failure_count_is_a_first_process_cost() -> None:
    built = load_entry(perf={"fresh_process": True, "probe": {**GOOD_PROBE, "gxx_builds": 1}})
    del built["perf"]["probe"]["gxx_failed"]  # type: ignore[index]
    assert loadcost.from_load(built) is None


def test_a_record_in_a_folder_others_can_write_is_not_read(tmp_path: Path) -> None:
    rec = loadcost.parse(record_json(key="abc"), "abc")
    assert rec is not None
    loadcost.write(str(tmp_path), "abc", rec)
    assert loadcost.read(str(tmp_path), "abc") == rec
    os.chmod(tmp_path / loadcost.FOLDER, 0o777)
    assert loadcost.read(str(tmp_path), "abc") is None


def test_a_load_total_that_is_not_a_number_is_left_alone() -> None:
    rec = loadcost.parse(record_json(), "k")
    assert rec is not None
    for total in (True, "1.5", None):
        out = loadcost.with_recorded_probe({"total_s": total, "probe": {"seconds": 0.1}}, rec)
        assert out["total_s"] is total and out["probe"]["seconds"] == 1.25
    # a pinned probe without a time: the recorded one is added whole
    out = loadcost.with_recorded_probe({"total_s": 2, "probe": {}}, rec)
    assert out["total_s"] == pytest.approx(3.25)


def test_the_hand_over_reads_the_record_once_and_learns_only_isa_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if loadcost._cpu_identity() is None:
        pytest.skip("no /proc/cpuinfo here: nothing is cached")
    reads: list[str] = []
    real = loadcost.read

    def counting(cache_dir: str | None, key: str) -> loadcost.ProbeRecord | None:
        reads.append(key)
        return real(cache_dir, key)

    monkeypatch.setattr(loadcost, "read", counting)
    hand = loadcost.HandOver(
        cache_dir=str(tmp_path), use_cache=True, python=None, worker_command=None
    )
    env = dict(os.environ)
    assert hand.pin(env) is None and hand.pin(env) is None
    assert len(reads) == 1  # looked once, not at every worker
    for bad in (["../x"], [], "VecAVX2", [1]):
        hand.learn({"vec_isa": bad, "vec_isa_pinned": True})
        assert hand.probed is None, bad
    hand.learn({"vec_isa": ["VecAVX2"], "vec_isa_pinned": True})
    hand.learn({"vec_isa": ["VecAVX512"], "vec_isa_pinned": True})
    assert hand.pin(env) == ["VecAVX2"]  # the first list found is handed on
