"""Several GPUs on one machine (aotipre.fleet.gpus): which GPUs are visible (a FAKE nvidia-smi on PATH
stands for the host: this machine has no GPU), --gpus and the `gpus` key, the pool that lends
one GPU per package, and batch.run pinning each CUDA package's workers to its GPU (the FAKE
torch worker, tests/fakes/env_worker.py, records the CUDA_VISIBLE_DEVICES each worker got)."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from aotipre import config
from aotipre.api import CheckOptions
from aotipre.cli import main
from aotipre.findings import Report
from aotipre.fleet import batch, gpus
from aotipre.fleet.gpus import Gpu, GpuPool
from aotipre.foundation.errors import UsageError
from aotipre.report import markdown, table
from aotipre.runner.stages import DynamicOptions
from aotipre.triage.escalate import TriageOptions

Pkg = Callable[[str], Path]
ENV_WORKER = str(Path(__file__).resolve().parents[1] / "fakes" / "env_worker.py")
H100 = "NVIDIA H100 80GB HBM3"
THREE = [(0, H100, "GPU-aaaa1111"), (1, H100, "GPU-bbbb2222"), (2, H100, "GPU-cccc3333")]
G0, G1, G2 = (Gpu(i, n, u) for i, n, u in THREE)

SMI = """#!{python}
import sys, time
gpus = {gpus!r}
if {hang!r}:
    time.sleep(60)
if {exit_code!r}:
    print("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.")
    sys.exit({exit_code!r})
query = next(a for a in sys.argv if a.startswith("--query-gpu=")).split("=", 1)[1].split(",")
for index, name, uuid in gpus:
    fields = {{"index": str(index), "name": name, "uuid": uuid, "compute_cap": "9.0"}}
    print(", ".join(fields.get(k, "[N/A]") for k in query))
"""


def fake_smi(
    folder: Path, listed: list[tuple[int, str, str]], *, exit_code: int = 0, hang: bool = False
) -> Path:
    """An nvidia-smi in `folder` that lists `listed` (index, name, uuid) for any --query-gpu."""
    folder.mkdir(parents=True, exist_ok=True)
    smi = folder / "nvidia-smi"
    smi.write_text(SMI.format(python=sys.executable, gpus=listed, exit_code=exit_code, hang=hang))
    smi.chmod(0o755)
    return folder


@pytest.fixture
def host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[..., None]:
    """host(listed) puts a fake nvidia-smi listing `listed` first on PATH; host(None): none at
    all. CUDA_VISIBLE_DEVICES and CUDA_DEVICE_ORDER are cleared."""
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.delenv("CUDA_DEVICE_ORDER", raising=False)
    path = os.environ.get("PATH", "")

    def use(listed: list[tuple[int, str, str]] | None, **kw: object) -> None:
        folder = tmp_path / f"bin-{len(list(tmp_path.glob('bin-*')))}"
        if listed is None:
            folder.mkdir()
        else:
            fake_smi(folder, listed, **kw)  # type: ignore[arg-type]
        # without nvidia-smi: PATH holds only folders that have none
        rest = [p for p in path.split(os.pathsep) if not (Path(p) / "nvidia-smi").exists()]
        monkeypatch.setenv("PATH", os.pathsep.join([str(folder), *rest]))

    return use


# -- visible_gpus: nvidia-smi, narrowed by an inherited CUDA_VISIBLE_DEVICES


def test_visible_gpus_are_what_nvidia_smi_lists(host: Callable[..., None]) -> None:
    host(THREE)
    assert gpus.visible_gpus() == [G0, G1, G2]
    assert G1.to_dict() == {"index": 1, "name": H100, "uuid": "GPU-bbbb2222"}


@pytest.mark.parametrize(
    "setting, expected",
    [
        ("2,0", [G2, G0]),  # CUDA's order: as listed
        ("1", [G1]),
        ("GPU-bbbb2222", [G1]),
        ("GPU-cccc", [G2]),  # a unique prefix
        ("aaaa1111,2", [G0, G2]),  # without the GPU- prefix
        (" 0 , 1 ", [G0, G1]),
        ("0,7,1", [G0]),  # the list ends at an index that names no GPU
        ("1,GPU-ffff,0", [G1]),  # ... or a UUID that names none
        ("0,0", [G0]),
        ("", []),  # an empty value hides every GPU
        ("-1", []),
        ("MIG-5f1e2d3c-0000", [Gpu(None, "MIG instance", "MIG-5f1e2d3c-0000")]),  # as given
    ],
)
def test_an_inherited_cuda_visible_devices_narrows_them(
    host: Callable[..., None], setting: str, expected: list[Gpu]
) -> None:
    host(THREE)
    assert gpus.visible_gpus({**os.environ, "CUDA_VISIBLE_DEVICES": setting}) == expected


def test_an_index_is_kept_as_given_when_cudas_order_may_differ(host: Callable[..., None]) -> None:
    # unlike GPUs: CUDA numbers them fastest first unless CUDA_DEVICE_ORDER=PCI_BUS_ID
    mixed = [(0, "NVIDIA A10", "GPU-aaaa1111"), (1, H100, "GPU-bbbb2222")]
    host(mixed)
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "1,GPU-aaaa"}
    assert gpus.visible_gpus(env) == [Gpu(None, "?", "1"), Gpu(0, "NVIDIA A10", "GPU-aaaa1111")]
    in_bus_order = gpus.visible_gpus({**env, "CUDA_DEVICE_ORDER": "PCI_BUS_ID"})
    assert in_bus_order == [Gpu(1, H100, "GPU-bbbb2222"), Gpu(0, "NVIDIA A10", "GPU-aaaa1111")]


def test_no_nvidia_smi_or_a_broken_one_means_no_gpu(
    host: Callable[..., None], monkeypatch: pytest.MonkeyPatch
) -> None:
    host(None)
    assert gpus.visible_gpus() == []
    host(THREE, exit_code=9)
    assert gpus.visible_gpus() == []
    monkeypatch.setattr(gpus, "TIMEOUT_S", 0.5)
    host(THREE, hang=True)
    started = time.monotonic()
    assert gpus.visible_gpus() == []
    assert time.monotonic() - started < 30  # killed at the timeout, not waited for


# -- --gpus and the `gpus` key


def test_parse_gpus_picks_by_nvidia_smi_index() -> None:
    assert gpus.parse_gpus("2,0", [G0, G1, G2]) == [G2, G0]
    assert gpus.parse_gpus([1], [G0, G1, G2]) == [G1]
    narrowed = [G2, G0]  # CUDA_VISIBLE_DEVICES=2,0: still named by nvidia-smi's index
    assert gpus.parse_gpus("2", narrowed) == [G2]


@pytest.mark.parametrize(
    "value, visible, message",
    [
        ("0,x", THREE, "--gpus 0,x: expected GPU indices as nvidia-smi numbers them, e.g. 0,2,3"),
        ("", THREE, "--gpus : expected GPU indices"),
        ("0,2,0", THREE, "--gpus 0,2,0: GPU 0 is named twice"),
        ("0,5", THREE, "--gpus 0,5: GPU 5 is not visible here (visible: 0, 1, 2)"),
        ("0", [], "--gpus 0: no GPU is visible here"),
        ([True], THREE, "expected GPU indices as nvidia-smi numbers them, e.g. [0, 2, 3]"),
    ],
)
def test_bad_gpus_are_one_usage_error(value: object, visible: list, message: str) -> None:
    with pytest.raises(UsageError) as caught:
        gpus.parse_gpus(value, [Gpu(*g) for g in visible])
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_the_gpus_key_and_flag(tmp_path: Path) -> None:
    assert config.parse_flags({"gpus": "0,2,3"}) == {"gpus": (0, 2, 3)}
    assert config.parse_values({"gpus": [1, 0]}, "aotipre.toml", tmp_path) == {"gpus": (1, 0)}
    assert config.parse_values({"gpus": "3"}, "aotipre.toml", tmp_path) == {"gpus": (3,)}
    with pytest.raises(UsageError, match=r"aotipre.toml: gpus = \[1, 1\]: GPU 1 is named twice"):
        config.parse_values({"gpus": [1, 1]}, "aotipre.toml", tmp_path)
    with pytest.raises(UsageError, match="expected GPU indices"):
        config.parse_values({"gpus": []}, "aotipre.toml", tmp_path)
    with pytest.raises(UsageError, match="unknown key 'gpus'"):  # once per run, not per package
        batch_manifest = tmp_path / "m.toml"
        batch_manifest.write_text('[[package]]\npath = "a.pt2"\ngpus = [0]\n')
        batch.load_manifest(batch_manifest)


def test_gpus_without_a_gpu_is_one_line_and_exit_2(
    host: Callable[..., None], pkg: Pkg, capsys: pytest.CaptureFixture[str]
) -> None:
    host(None)
    rc = main(["check", str(pkg("aoti")), "--static-only", "--gpus", "0", "--no-config"])
    err = capsys.readouterr().err
    assert rc == 2
    assert err.strip().splitlines() == [
        "aotipre: error: --gpus 0: no GPU is visible here (nvidia-smi lists none, or "
        "CUDA_VISIBLE_DEVICES hides them all)"
    ]


def test_a_device_that_names_a_gpu_and_gpus_are_refused_together(
    host: Callable[..., None], pkg: Pkg
) -> None:
    host(THREE)
    jobs = [cuda_job(pkg, "a", device="cuda:1")]
    with pytest.raises(UsageError, match="--device cuda:1 and --gpus both choose the GPU"):
        batch.run(jobs, 1, gpus="0,1")


# -- GpuPool: one holder per GPU, first come first served


def test_the_pool_serves_waiters_in_the_order_they_asked() -> None:
    pool = GpuPool([G0])
    order: list[str] = []
    release = threading.Event()

    def holder() -> None:
        with pool.lease():
            release.wait(30)

    def waiter(name: str) -> None:
        with pool.lease():
            order.append(name)

    first = threading.Thread(target=holder)
    first.start()
    until(lambda: pool.waiting == 0 and pool.free == 0)
    threads = []
    for i, name in enumerate("abc"):
        threads.append(threading.Thread(target=waiter, args=(name,)))
        threads[-1].start()
        until(lambda i=i: pool.waiting == i + 1)  # type: ignore[misc]
    release.set()
    for t in [first, *threads]:
        t.join(30)
    assert order == ["a", "b", "c"] and pool.free == 1


def test_a_lease_is_given_back_when_the_check_raises() -> None:
    pool = GpuPool([G0])
    with pytest.raises(RuntimeError), pool.lease():
        raise RuntimeError("the check failed")
    with pool.lease() as gpu:
        assert gpu == G0


def test_two_gpus_four_packages_j4_never_share_a_gpu(pkg: Pkg) -> None:
    """-j 4 over 2 GPUs: the timeline of leases (recorded, not timed) never shows one GPU held
    twice, both GPUs are used, and each check ran with its GPU's UUID in its workers' env."""
    events: list[tuple[str, str, str]] = []
    lock = threading.Lock()
    both_held = threading.Barrier(2, timeout=30)  # the two holders of a round meet here

    def check(job: batch.PackageJob) -> Report:
        env = job.options.dynamic.extra_env if job.options.dynamic else {}
        with lock:
            events.append(("take", env["CUDA_VISIBLE_DEVICES"], job.package))
        both_held.wait()
        with lock:
            events.append(("give", env["CUDA_VISIBLE_DEVICES"], job.package))
        return Report(package_path=job.package)

    jobs = [cuda_job(pkg, name) for name in "abcd"]
    run = gpus.pinned_check(jobs, 4, None, check, visible=lambda: [G0, G1])
    reports = threaded(run, jobs, 4)
    held: dict[str, int] = {}
    for what, uuid, _ in events:
        held[uuid] = held.get(uuid, 0) + (1 if what == "take" else -1)
        assert held[uuid] in (0, 1), events
    assert {uuid for _, uuid, _ in events} == {G0.uuid, G1.uuid}
    taken = {package: uuid for what, uuid, package in events if what == "take"}
    assert {r.package_path: r.gpu["uuid"] for r in reports if r.gpu} == taken


def test_cpu_jobs_take_no_lease(pkg: Pkg) -> None:
    seen: dict[str, str | None] = {}

    def check(job: batch.PackageJob) -> Report:
        env = job.options.dynamic.extra_env if job.options.dynamic else {}
        seen[job.package] = env.get("CUDA_VISIBLE_DEVICES")
        return Report(package_path=job.package)

    jobs = [cuda_job(pkg, "a"), cuda_job(pkg, "b"), cuda_job(pkg, "c", device="cpu")]
    reports = threaded(gpus.pinned_check(jobs, 3, None, check, visible=lambda: [G0, G1]), jobs, 3)
    assert seen[jobs[2].package] is None and reports[2].gpu is None
    assert {seen[jobs[0].package], seen[jobs[1].package]} <= {G0.uuid, G1.uuid}


@pytest.mark.parametrize(
    "workers, visible, wanted, device",
    [
        (4, [G0], None, "cuda"),  # one GPU: nothing to spread
        (4, [], None, "cuda"),  # none known
        (1, [G0, G1], None, "cuda"),  # one package at a time: every GPU visible, as before
        (4, [G0, G1], None, "cuda:1"),  # the package chose its GPU itself
        (4, [G0, G1], None, "cpu"),
    ],
)
def test_when_nothing_is_pinned(
    pkg: Pkg, workers: int, visible: list[Gpu], wanted: object, device: str
) -> None:
    def check(job: batch.PackageJob) -> Report:
        return Report(package_path=job.package)

    jobs = [cuda_job(pkg, n, device=device) for n in "ab"]
    assert gpus.pinned_check(jobs, workers, wanted, check, visible=lambda: visible) is check


def test_one_package_needing_a_gpu_or_one_at_a_time_is_never_pinned(pkg: Pkg) -> None:
    def check(job: batch.PackageJob) -> Report:
        return Report(package_path=job.package)

    def no_query() -> list[Gpu]:
        raise AssertionError("nvidia-smi asked for a batch that runs one package at a time")

    cuda, cpu = cuda_job(pkg, "a"), cuda_job(pkg, "b", device="cpu")
    # one package at a time, or one package alone: the GPUs are not even asked for
    assert gpus.pinned_check([cuda, cuda_job(pkg, "c")], 1, None, check, visible=no_query) is check
    assert gpus.pinned_check([cuda], 4, None, check, visible=no_query) is check
    # two GPUs, but only one package needs one: it shares nothing, so it is not pinned
    assert gpus.pinned_check([cuda, cpu], 4, None, check, visible=lambda: [G0, G1]) is check


def test_a_host_without_two_gpus_opens_no_package_to_place_it(
    pkg: Pkg, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a package's device is read from its archive only when there are GPUs to spread packages
    # over: elsewhere its check opens it once, as a single check does
    from aotipre.pt2 import reader

    opened: list[str] = []
    real_read = reader.read_package

    def read(path: object, **kwargs: object) -> object:
        opened.append(str(path))
        return real_read(path, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(reader, "read_package", read)

    def check(job: batch.PackageJob) -> Report:
        return Report(package_path=job.package)

    jobs = [cuda_job(pkg, n) for n in "ab"]
    jobs = [dataclasses.replace(j, options=CheckOptions()) for j in jobs]  # no device given
    for found in ([], [G0]):
        assert gpus.pinned_check(jobs, 2, None, check, visible=lambda f=found: f) is check
    assert opened == []
    gpus.pinned_check(jobs, 2, None, check, visible=lambda: [G0, G1])
    assert sorted(opened) == sorted(j.package for j in jobs)  # both.pt2 copies: CUDA models


# -- batch.run end to end: real fixture packages, the fake torch worker


def cuda_job(pkg: Pkg, label: str, *, device: str = "cuda", **env: str) -> batch.PackageJob:
    """A package of its own (`<label>.pt2`, a copy of both.pt2) checked on `device` by the fake
    worker, which logs `label` with the env it got."""
    folder = Path(os.environ["AOTIPRE_TEST_PACKAGES"])
    package = folder / f"{label}.pt2"
    if not package.exists():
        shutil.copy(pkg("both"), package)
    dynamic = DynamicOptions(
        device=device,
        worker_command=(sys.executable, ENV_WORKER),
        cache_dir=str(folder / "cache"),
        probe=False,
        perf=None,
        extra_env={"AOTIPRE_ENV_LABEL": label, **env},
    )
    options = CheckOptions(
        inputs=str(pkg("aoti_inputs")),
        dynamic=dynamic,
        canary=False,
        triage=TriageOptions(escalate=False),
    )
    return batch.PackageJob(str(package), options)


@pytest.fixture(autouse=True)
def packages(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "packages"
    folder.mkdir()
    monkeypatch.setenv("AOTIPRE_TEST_PACKAGES", str(folder))
    monkeypatch.setenv("AOTIPRE_ENV_LOG", str(tmp_path / "workers.jsonl"))
    return folder


def worker_log(tmp_path: Path) -> list[dict]:
    log = tmp_path / "workers.jsonl"
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def test_batch_pins_each_cuda_packages_workers_to_one_gpu(
    host: Callable[..., None], pkg: Pkg, tmp_path: Path
) -> None:
    host(THREE[:2])
    jobs = [cuda_job(pkg, n) for n in "abcd"] + [cuda_job(pkg, "e", device="cpu")]
    reports = batch.run(jobs, 4)
    log = worker_log(tmp_path)
    by_label: dict[str, set] = {}
    for line in log:
        by_label.setdefault(line["label"], set()).add(line["cuda_visible_devices"])
    uuids = {G0.uuid, G1.uuid}
    for job, report in zip(jobs[:4], reports):
        label = Path(job.package).stem
        assert report.gpu is not None and report.gpu["uuid"] in uuids
        assert by_label[label] == {report.gpu["uuid"]}  # every worker of it, that GPU only
        assert report.to_dict()["gpu"] == report.gpu
        stages = {s.name: s for s in report.stages}
        assert stages["run"].env["CUDA_VISIBLE_DEVICES"] == report.gpu["uuid"]
        # one GPU is visible to its workers: no device_index=1 to load on
        assert stages["device-index"].detail == (
            "needs two GPUs to load on cuda:1; its workers see 1 "
            f"(CUDA_VISIBLE_DEVICES={report.gpu['uuid']})"
        )
    assert {r.gpu["uuid"] for r in reports[:4] if r.gpu} == uuids
    assert by_label["e"] == {None} and reports[4].gpu is None  # the CPU package: no lease
    assert no_overlap_per_gpu(log)


def no_overlap_per_gpu(log: list[dict]) -> bool:
    """No two packages' workers ran on one GPU at the same time: on each GPU the packages'
    spans (first start to last event) are disjoint."""
    spans: dict[tuple[str, str], list[float]] = {}
    for line in log:
        key = (line["cuda_visible_devices"], line["label"])
        span = spans.setdefault(key, [line["at"], line["at"]])
        span[0], span[1] = min(span[0], line["at"]), max(span[1], line["at"])
    for gpu in {g for g, _ in spans}:
        ordered = sorted(s for (g, _), s in spans.items() if g == gpu)
        if any(a[1] > b[0] for a, b in zip(ordered, ordered[1:])):
            return False
    return True


def test_one_gpu_with_j4_pins_nothing_and_the_report_says_none(
    host: Callable[..., None], pkg: Pkg, tmp_path: Path
) -> None:
    host(THREE[:1])
    reports = batch.run([cuda_job(pkg, n) for n in "ab"], 4)
    assert [r.gpu for r in reports] == [None, None]
    assert all(r.to_dict()["gpu"] is None for r in reports)  # the key is always there
    assert {line["cuda_visible_devices"] for line in worker_log(tmp_path)} == {None}
    assert all("gpu:" not in table.render_report(r) for r in reports)


def test_gpus_with_j1_pins_to_the_gpu_named(
    host: Callable[..., None], pkg: Pkg, tmp_path: Path
) -> None:
    host(THREE)
    reports = batch.run([cuda_job(pkg, n) for n in "ab"], 1, gpus="2")
    assert [r.gpu for r in reports] == [G2.to_dict()] * 2
    assert {line["cuda_visible_devices"] for line in worker_log(tmp_path)} == {G2.uuid}


def test_the_lease_outlives_every_process_of_the_package(
    host: Callable[..., None], pkg: Pkg, tmp_path: Path
) -> None:
    """The sticky-error guarantee, with the fake worker: package `a` crashes in its run (on a
    GPU, an illegal memory access), crash triage re-runs it in more worker processes; `b`,
    pinned to the same single GPU (--gpus 0, two threads), starts its first worker only after
    the last process of `a` has been reaped."""
    host(THREE)
    crash = json.dumps({"run": {"crash": "SIGSEGV"}})
    a = cuda_job(pkg, "a", AOTIPRE_FAKE_SCRIPT=crash)
    a = batch.PackageJob(a.package, CheckOptions(**{**vars(a.options), "triage": None}))
    b = cuda_job(pkg, "b")
    reports = batch.run([a, b], 2, gpus="0")
    assert [r.gpu for r in reports] == [G0.to_dict()] * 2
    assert any(s.name.startswith("triage:") for s in reports[0].stages)
    log = worker_log(tmp_path)
    of_a = [line["at"] for line in log if line["label"] == "a"]
    of_b = [line["at"] for line in log if line["label"] == "b"]
    assert len({line["pid"] for line in log if line["label"] == "a"}) >= 3  # triage's too
    assert of_b and (max(of_a) < min(of_b) or max(of_b) < min(of_a))
    assert {line["cuda_visible_devices"] for line in log} == {G0.uuid}


# -- the report


def test_every_format_names_the_gpu() -> None:
    report = Report(package_path="m.pt2", gpu=G1.to_dict())
    assert f"gpu: 1 {H100} (GPU-bbbb2222)" in table.render_report(report).splitlines()
    assert f"gpu: 1 {H100} (GPU-bbbb2222)" in markdown.render_report(report)
    data = json.loads(json.dumps(report.to_dict()))
    assert data["gpu"] == {"index": 1, "name": H100, "uuid": "GPU-bbbb2222"}
    assert Report.from_dict(data).gpu == data["gpu"]  # read back (aotipre merge)
    plain = Report(package_path="m.pt2")
    assert plain.to_dict()["gpu"] is None and Report.from_dict(plain.to_dict()).gpu is None
    assert "gpu:" not in table.render_report(plain) + markdown.render_report(plain)


# -- helpers


def until(condition: Callable[[], bool], timeout_s: float = 30.0) -> None:
    """Wait for `condition` (a state change of another thread), failing after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.005)


def threaded(
    check: Callable[[batch.PackageJob], Report], jobs: list[batch.PackageJob], workers: int
) -> list[Report]:
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(workers) as pool:
        return list(pool.map(check, jobs))
