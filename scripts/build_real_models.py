#!/usr/bin/env python
"""Build the "real models" test packages (fixtures/real_models.py) with the public API only, and
record what plain torch does with each sample-inputs file in a fresh process.

    python scripts/build_real_models.py [--out DIR] [--force]

Output: `.fixture-cache/real-torch-<version>/` (or --out): `<package>.pt2`,
`<package>_<inputs>.pt`, and `plain_torch.json`, the record written by a separate Python process
(`--record DIR`) that imports nothing of aotipre: for every inputs file, whether the default
deployment call (`aoti_load_package(path)(*args, **kwargs)`, no AOTI_RUNTIME_CHECK_INPUTS)
raised or ran, and whether what it returned equals the eager model's output on those inputs and
the output for the exported example inputs. Everything is rebuilt when the build key (torch
version, fixtures/real_models.py, this script) changes; files are written atomically.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
MODELS = REPO / "fixtures" / "real_models.py"
RECORD = "plain_torch.json"
sys.path.insert(0, str(REPO))

from scripts.build_fixtures import atomic_output, build_key, build_lock, log  # noqa: E402


def _first_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text[:300]}"


def build(out: Path) -> None:
    import torch

    from fixtures.real_models import PACKAGES

    for pkg in PACKAGES:
        dst = out / f"{pkg.name}.pt2"
        start = time.perf_counter()
        if pkg.layout == "multi":
            _package_multi(out, pkg.parts, dst)
        elif pkg.layout == "torchscript":
            with atomic_output(dst) as tmp:
                torch.jit.save(torch.jit.script(pkg.make_model().eval()), str(tmp))
        else:
            torch.manual_seed(0)
            model = pkg.make_model().eval()
            args, kwargs = pkg.example()
            dims = pkg.dynamic_shapes() if pkg.dynamic_shapes else None
            ep = torch.export.export(model, args, kwargs, dynamic_shapes=dims)
            with atomic_output(dst) as tmp:
                if pkg.layout == "exported_program":
                    torch.export.save(ep, tmp)
                else:
                    torch._inductor.aoti_compile_and_package(ep, package_path=str(tmp))
        for key, make in pkg.inputs.items():
            with atomic_output(out / f"{pkg.name}_{key}.pt") as tmp:
                torch.save(make(), tmp)
        log(f"  {pkg.name}: {time.perf_counter() - start:.1f} s")


def _package_multi(out: Path, parts: tuple[str, ...], dst: Path) -> None:
    """package_aoti over the AOTI files of packages built by aoti_compile_and_package."""
    from torch._inductor.package import package_aoti

    with tempfile.TemporaryDirectory(prefix="aotipre-real-") as tmp_dir:
        files: dict[str, list[str]] = {}
        for part in parts:
            with zipfile.ZipFile(out / f"{part}.pt2") as zf:
                members = [n for n in zf.namelist() if "/data/aotinductor/model/" in n]
                folder = Path(tmp_dir) / part
                folder.mkdir()
                files[part] = []
                for name in members:
                    path = folder / name.rsplit("/", 1)[1]
                    path.write_bytes(zf.read(name))
                    files[part].append(str(path))
        with atomic_output(dst) as tmp:
            package_aoti(str(tmp), files)


# ---------------------------------------------------------------------------------------------
# The record: a fresh process, plain torch


def _nonfinite_rows(t: Any, who: str) -> dict[str, Any]:
    """The rows along dim 0 of a float output that hold NaN / Inf (only when some do)."""
    import torch

    out: dict[str, Any] = {}
    if not (isinstance(t, torch.Tensor) and t.is_floating_point() and t.dim() >= 1):
        return out
    for key, mask in (("nan", torch.isnan(t)), ("inf", torch.isinf(t))):
        rows = mask.reshape(t.shape[0], -1).any(dim=1).nonzero().reshape(-1).tolist()
        if rows:
            out[f"{who}_{key}_rows"] = rows
    return out


def record(out: Path) -> dict[str, Any]:
    import torch
    from torch._inductor import aoti_load_package
    from torch._inductor.package import load_package

    from fixtures.real_models import PACKAGES

    os.environ.pop("AOTI_RUNTIME_CHECK_INPUTS", None)  # a default deployment
    result: dict[str, Any] = {"torch": torch.__version__, "packages": {}}
    for pkg in PACKAGES:
        path = str(out / f"{pkg.name}.pt2")
        entry: dict[str, Any] = {"layout": pkg.layout}
        try:
            runner = aoti_load_package(path)
            entry["aoti_load_package"] = "loaded"
        except Exception as exc:  # noqa: BLE001 - recorded, that is the point
            runner = None
            entry["aoti_load_package"] = _first_line(exc)
        if pkg.layout == "multi":
            entry["load_package"] = {}
            for part in pkg.parts:
                try:
                    load_package(path, model_name=part)
                    entry["load_package"][part] = "loaded"
                except Exception as exc:  # noqa: BLE001
                    entry["load_package"][part] = _first_line(exc)
        if pkg.layout == "exported_program":
            runner = torch.export.load(path).module()
            entry["runner"] = "torch.export.load(path).module()"
        if pkg.layout == "torchscript":
            runner = torch.jit.load(path)
            entry["runner"] = "torch.jit.load(path)"
        torch.manual_seed(0)
        eager = pkg.make_model().eval()
        reference = None
        if runner is not None:
            try:
                args, kwargs = pkg.example()
                reference = runner(*args, **kwargs)
            except Exception:  # noqa: BLE001
                reference = None
        calls: dict[str, Any] = {}
        for key in pkg.inputs:
            obj = torch.load(out / f"{pkg.name}_{key}.pt", weights_only=True)
            if not (isinstance(obj, tuple) and len(obj) == 2 and isinstance(obj[1], dict)):
                calls[key] = {"status": "not (args, kwargs)", "type": type(obj).__name__}
                continue
            args, kwargs = obj
            call: dict[str, Any] = {}
            try:
                with torch.no_grad():
                    want = eager(*args, **kwargs)
                call["eager_shape"] = list(want.shape)
            except Exception as exc:  # noqa: BLE001
                want = None
                call["eager"] = _first_line(exc)
            if runner is None:
                call["status"] = "no runner"
            else:
                try:
                    got = runner(*args, **kwargs)
                    call["status"] = "ran"
                    call["shape"] = list(got.shape)
                    call.update(_nonfinite_rows(got, "aoti"))
                    if want is not None:
                        call.update(_nonfinite_rows(want, "eager"))
                    if want is not None and got.shape == want.shape:
                        call["equals_eager"] = bool(torch.allclose(got, want, atol=1e-4))
                    if reference is not None and got.shape == reference.shape:
                        call["equals_example_output"] = bool(torch.equal(got, reference))
                except Exception as exc:  # noqa: BLE001
                    call["status"] = "raised"
                    call["error"] = _first_line(exc)
            calls[key] = call
        entry["calls"] = calls
        result["packages"][pkg.name] = entry
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path)
    parser.add_argument("--force", action="store_true")
    parser.add_argument("--record", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.record is not None:
        print(json.dumps(record(args.record), indent=2, sort_keys=True))
        return 0
    import torch

    out = (args.out or REPO / ".fixture-cache" / f"real-torch-{torch.__version__}").resolve()
    key = build_key(torch.__version__, "cpu", (MODELS, Path(__file__).resolve()))
    with build_lock(out):
        stamp = out / "build_key"
        if args.force or not stamp.is_file() or stamp.read_text() != key:
            start = time.perf_counter()
            build(out)
            proc = subprocess.run(
                [sys.executable, __file__, "--record", str(out)],
                capture_output=True,
                text=True,
                check=False,
            )
            if proc.returncode != 0:
                log(proc.stderr[-4000:])
                return 1
            with atomic_output(out / RECORD) as tmp:
                tmp.write_text(proc.stdout)
            with atomic_output(stamp) as tmp:
                tmp.write_text(key)
            log(f"built and recorded in {time.perf_counter() - start:.1f} s -> {out}")
        else:
            log(f"up to date: {out}")
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
