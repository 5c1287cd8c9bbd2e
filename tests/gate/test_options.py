"""Each option of `aotipre check` / `aotipre doctor` changes what it claims to, seen through the
real CLI and the real worker (slow), and an internal error is exit 3 (fault injected)."""

from __future__ import annotations

import json
import platform
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from aotipre.cli import main
from aotipre.fleet import batch
from tests.gate.archives import merge
from tests.gate.conftest import FACTS, plain_torch

Gate = Callable[[str], Path]


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, Any], str]:
    rc = main(["check", *args, "-f", "json", "--no-config"], fast_lane=False)
    out, err = capsys.readouterr()
    return rc, json.loads(out), err


def stage(data: dict[str, Any], name: str) -> dict[str, Any]:
    return next(s for s in data["stages"] if s["name"] == name)


def message(data: dict[str, Any], code: str) -> str:
    (f,) = [f for f in data["findings"] if f["code"] == code]
    return str(f["message"])


def codes(data: dict[str, Any]) -> list[str]:
    return [
        f["code"] for f in data["findings"] if not (f["code"] in FACTS and f["severity"] == "info")
    ]


@pytest.mark.slow
def test_rtol_and_atol_reach_the_comparison(
    capsys: pytest.CaptureFixture[str], gate: Gate, gate_cache: Path
) -> None:
    # mismatch.pt2: the compiled outputs are the eager ones + 1.0 exactly. With atol 1.01 every
    # element is within tolerance; with rtol 1.01 (relative to eager) only where |eager| >= ~1.
    eager = plain_torch(
        "import json, sys, torch\n"
        "ep = torch.export.load(sys.argv[1])\n"
        "args, kwargs = torch.load(sys.argv[2])\n"
        "print(json.dumps(ep.module()(*args, **kwargs).abs().min().item()))\n",
        str(gate("mismatch.pt2")),
        str(gate("aoti_inputs")),
    )
    assert eager < 0.9  # so that a relative tolerance of 1.01 cannot cover a difference of 1.0
    # --no-escalate: the comparison's verdict is the subject, not accuracy triage's rebuilds
    base = [str(gate("mismatch.pt2")), "-i", str(gate("aoti_inputs")), "--no-probe",
            "--no-escalate", "--cache-dir", str(gate_cache), "--ignore", "AOT013"]  # fmt: skip
    rc, data, _ = cli(capsys, *base, "--atol", "1.01", "--rtol", "0")
    assert rc == 0 and codes(data) == []
    assert "rtol=0, atol=1.01" in stage(data, "compare")["detail"]
    rc, data, _ = cli(capsys, *base, "--rtol", "1.01", "--atol", "0")
    assert rc == 1 and codes(data) == ["AOT701"]
    assert "beyond rtol=1.01, atol=0" in message(data, "AOT701")
    rc, data, _ = cli(capsys, *base)  # defaults: float32 rtol 1e-4, atol 1e-5
    assert "beyond rtol=0.0001, atol=1e-05" in message(data, "AOT701")


@pytest.mark.slow
def test_seed_chooses_the_synthesized_inputs(
    capsys: pytest.CaptureFixture[str], gate: Gate, gate_cache: Path, tmp_path: Path
) -> None:
    # mismatch.pt2's ExportedProgram saved again without example inputs (torch.export.save then
    # writes an empty sample-inputs member), with mismatch.pt2's AOTI code: inputs are
    # synthesized from the seed, and the worst element of the (+1.0) mismatch moves with them
    plain_torch(
        "import json, sys, torch\n"
        "ep = torch.export.load(sys.argv[1])\n"
        "ep.example_inputs = None\n"
        "torch.export.save(ep, sys.argv[2])\n"
        "print(json.dumps('ok'))\n",
        str(gate("mismatch.pt2")),
        str(tmp_path / "ep.pt2"),
    )
    pkg = merge(tmp_path / "mismatch.pt2", tmp_path / "ep.pt2", gate("mismatch.pt2"))
    base = [str(pkg), "--no-probe", "--no-escalate", "--cache-dir", str(gate_cache)]
    _, one, _ = cli(capsys, *base, "--seed", "1")
    _, again, _ = cli(capsys, *base, "--seed", "1")
    _, two, _ = cli(capsys, *base, "--seed", "2")
    assert "synthesized inputs (seed 1)" in stage(one, "run")["detail"]
    assert "synthesized inputs (seed 2)" in stage(two, "run")["detail"]
    assert stage(one, "run")["status"] == "passed"
    assert ("AOT022", "info") in [(f["code"], f["severity"]) for f in one["findings"]]

    def mismatch(data: dict[str, Any]) -> str:
        (f,) = [f for f in data["findings"] if f["code"] == "AOT701"]
        return f["message"]

    assert mismatch(one) == mismatch(again)
    assert mismatch(one) != mismatch(two)


@pytest.mark.slow
def test_timeout_limits_each_step(
    capsys: pytest.CaptureFixture[str], gate: Gate, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a load that surely takes more than 1 s: torch's CPU-ISA probe building its check programs
    # into an empty inductor cache (seconds of g++; aotipre's record of this host's probe,
    # runner/loadcost.py, is keyed by that cache too, so nothing answers it in advance), in the
    # load of a package that load_package loads (an ExportedProgram beside its AOTI code; one
    # the C++ loader alone loads is loaded at once, its probe measured beside it)
    if platform.machine() not in ("x86_64", "AMD64"):
        pytest.skip("torch runs its CPU-ISA probe on x86 only")
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))
    rc, data, _ = cli(
        capsys, str(gate("both.pt2")), "-i", str(gate("aoti_inputs")), "--timeout", "1"
    )
    # AOT013: the static check's (both.pt2's AOTI range is narrower than its program's)
    assert rc == 1 and codes(data) == ["AOT013", "AOT516"]
    assert "did not finish within 1 s" in message(data, "AOT516")


@pytest.mark.slow
def test_no_cache_neither_reads_nor_writes_the_compile_cache(
    capsys: pytest.CaptureFixture[str], gate: Gate, tmp_path: Path
) -> None:
    cache = tmp_path / "cache"
    # an ExportedProgram-only package is an error (AOT015) unless the deployment compiles it
    base = [
        str(gate("ep_only.pt2")),
        "--compile-at-deploy",
        "--no-probe",
        "--cache-dir",
        str(cache),
    ]
    rc, data, _ = cli(capsys, *base, "--no-cache")
    assert rc == 0 and stage(data, "compile")["status"] == "passed"
    assert stage(data, "compile")["detail"].startswith("compiled without the cache")
    assert not any(p.suffix == ".pt2" for p in cache.rglob("*"))  # nothing written
    rc, data, _ = cli(capsys, *base)
    assert "compiled into the cache" in stage(data, "compile")["detail"]
    assert any(p.suffix == ".pt2" for p in cache.rglob("*"))
    rc, data, _ = cli(capsys, *base, "--no-cache")  # an entry exists now, and is not read
    assert stage(data, "compile")["detail"].startswith("compiled without the cache")
    rc, data, _ = cli(capsys, *base)  # while without --no-cache it is
    assert "compile cache hit" in stage(data, "compile")["detail"]


@pytest.mark.slow
def test_no_escalate_skips_crash_triage(
    capsys: pytest.CaptureFixture[str], gate: Gate, gate_cache: Path
) -> None:
    # aoti.pt2 with an id past the embedding table: the kernel raises; the package holds no
    # ExportedProgram, so triage says it needs one (AOT806) -- without recompiling anything
    base = [str(gate("aoti.pt2")), "-i", str(gate("token_oob_nan")), "--no-probe",
            "--cache-dir", str(gate_cache)]  # fmt: skip
    _, on, _ = cli(capsys, *base)
    assert "AOT602" in codes(on) and "AOT806" in codes(on)
    assert any(s["name"].startswith("triage:") for s in on["stages"])
    _, off, _ = cli(capsys, *base, "--no-escalate")
    assert "AOT602" in codes(off)
    assert not any(c.startswith("AOT8") for c in codes(off))
    assert not any(s["name"].startswith("triage:") for s in off["stages"])
    assert off["diagnosis"] == []


@pytest.mark.slow
def test_exported_program_reaches_triage_for_an_aoti_only_package(
    capsys: pytest.CaptureFixture[str], gate: Gate, gate_cache: Path
) -> None:
    base = [str(gate("aoti.pt2")), "-i", str(gate("token_oob_nan")), "--no-probe",
            "--cache-dir", str(gate_cache)]  # fmt: skip
    _, without, _ = cli(capsys, *base)
    _, data, _ = cli(capsys, *base, "--exported-program", str(gate("both.pt2")))
    # without it: the recompiling steps are skipped for want of a program (AOT806)
    assert "AOT806" in codes(without)
    assert "--exported-program FILE" in stage(without, "triage:printer-2")["detail"]
    assert "AOT806" not in codes(data)
    # with it: the CPU kernel's exception names the kernel (level 3 skipped) and the ids it
    # reads, read from the sample (kernel-inputs), explain the fault: level 2 could recompile
    # from the given program and is skipped for that reason, not for want of a program
    assert stage(data, "triage:printer-3")["status"] == "skipped"
    assert stage(data, "triage:kernel-inputs")["status"] == "passed"
    p2 = stage(data, "triage:printer-2")
    assert p2["status"] == "skipped" and "already explain the fault" in p2["detail"]
    # the program's graph and stack traces name what the kernel fuses and the model's line
    d, d0 = data["diagnosis"][0], without["diagnosis"][0]
    assert d["kernel"].startswith("cpp_fused_") and d["kernel"] == d0["kernel"]
    assert d["source_lines"] and not d0["source_lines"], (d["source_lines"], d0["source_lines"])
    assert "AOT801" in codes(data)


@pytest.mark.slow
def test_doctor_timeout_and_progress(capsys: pytest.CaptureFixture[str], gate_cache: Path) -> None:
    base = ["doctor", "--device", "cpu", "--cache-dir", str(gate_cache), "-f", "json"]
    # the limit is each step's, worker start-up not counted; 1 ms is less than torch's answer
    # about itself takes: the host cannot be checked, and the error says which limit it was
    rc = main([*base, "--timeout", "0.001", "--progress"], fast_lane=False)
    out, err = capsys.readouterr()
    data = json.loads(out)
    assert rc == 2 and data["verdict"] == "error"
    assert "no torch worker could run here" in data["error"]
    assert "facts step ran past the step time limit (--timeout" in data["error"]
    assert "asking torch about itself" in err  # --progress: progress lines on stderr
    rc = main([*base, "--no-progress"], fast_lane=False)
    out, err = capsys.readouterr()
    assert rc == 0 and json.loads(out)["verdict"] == "pass"
    assert err == ""


def test_internal_error_is_exit_3_with_a_traceback(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, pkg: Callable[[str], Path]
) -> None:
    # fault injection: a bug inside the library call
    def broken(*args: object, **kwargs: object) -> None:
        raise ZeroDivisionError("injected")

    monkeypatch.setattr(batch, "check_packages", broken)
    rc = main(["check", str(pkg("both")), "--static-only", "--no-config"])
    _, err = capsys.readouterr()
    assert rc == 3
    assert "internal error" in err and "please report" in err
    assert "ZeroDivisionError: injected" in err and "Traceback" in err
