"""Build a CUDA package pair through the public API, in one fresh process on a CUDA GPU, and
record what plain tools say about its GPU code (facts.json). Usage: python build_cuda_pairs.py
OUT_DIR.

One small model (Linear + relu + a row sum: Triton kernels) is exported once and compiled twice
with torch._inductor.aoti_compile_and_package: `default.pt2` (torch's default: one Triton cubin
per kernel, SASS for the compiling GPU only) and `multi.pt2` with
aot_inductor.emit_multi_arch_kernel=True (a fatbin per kernel, made by fatbinary or nvcc from the
kernel's cubin and PTX). Both are loaded and run with plain torch here; facts.json holds, per
package:

- `outputs_match`: both packages give eager's outputs (max abs gap), so they are a real pair;
- `members`: for every `.cubin`/`.fatbin` member, what `cuobjdump` says: `sass` (the `code for
  sm_XX` lines of `-sass`), `ptx` (`.target` and `.version` of each PTX text `-ptx` prints) and
  `release` (the `Cuda compilation tools, release X.Y` string of each ELF `-xelf all` extracts:
  the ptxas that made the SASS).

`cuobjdump` is taken from PATH, else the one Triton ships (triton/backends/nvidia/bin). Without
CUDA, or without cuobjdump, facts.json says why (`skip`) and nothing is built.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tempfile
import traceback
import zipfile
from pathlib import Path

import torch

OUT = Path(sys.argv[1])
GPU_SUFFIXES = (".cubin", ".fatbin")
MULTI_ARCH = {"aot_inductor.emit_multi_arch_kernel": True}


class LinearReluSum(torch.nn.Module):
    """Linear + relu + a reduction: Inductor writes Triton kernels for the pointwise and sum."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(64, 64)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        y = torch.relu(self.lin(x))
        return y, y.sum(dim=1)


def find_cuobjdump() -> str | None:
    """cuobjdump from PATH, else the copy Triton ships with its ptxas."""
    on_path = shutil.which("cuobjdump")
    if on_path:
        return on_path
    try:
        import triton.backends.nvidia as nvidia_backend
    except ImportError:
        return None
    bundled = Path(nvidia_backend.__file__).parent / "bin" / "cuobjdump"
    return str(bundled) if bundled.is_file() else None


def run_tool(*cmd: str, cwd: str | None = None) -> tuple[int, str]:
    """(exit code, stdout + stderr) of a plain tool."""
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False, cwd=cwd)
    return proc.returncode, proc.stdout + proc.stderr


def describe_gpu_member(cuobjdump: str, path: Path) -> dict[str, object]:
    """What cuobjdump says a cubin or fatbin holds."""
    rc_sass, sass_text = run_tool(cuobjdump, "-sass", str(path))
    _, ptx_text = run_tool(cuobjdump, "-ptx", str(path))  # a bare cubin has no PTX: an error
    ptx = [
        {"target": target, "version": version}
        for version, target in re.findall(
            r"^\s*\.version\s+(\d+\.\d+)\s*$.*?^\s*\.target\s+(\w+)", ptx_text, re.M | re.S
        )
    ]
    releases: set[str] = set()
    with tempfile.TemporaryDirectory(dir=OUT) as extracted:
        elf_copy = Path(extracted) / path.name
        shutil.copyfile(path, elf_copy)
        run_tool(cuobjdump, "-xelf", "all", elf_copy.name, cwd=extracted)
        for elf in Path(extracted).iterdir():
            if elf.name == elf_copy.name and path.suffix == ".fatbin":
                continue  # the container itself: its ELFs may be compressed
            found = re.findall(rb"Cuda compilation tools, release (\d+\.\d+)", elf.read_bytes())
            releases.update(r.decode() for r in found)
    return {
        "sass": sorted(set(re.findall(r"code for (sm_\w+)", sass_text))),
        "ptx": ptx,
        "release": sorted(releases),
        "cuobjdump_rc": rc_sass,
        "cuobjdump_tail": (sass_text[:300] + " ... " + ptx_text[:600]).strip(),
    }


def describe_package(cuobjdump: str, package: Path) -> dict[str, dict[str, object]]:
    """member name -> what cuobjdump says, for each GPU code member of the package."""
    out: dict[str, dict[str, object]] = {}
    with zipfile.ZipFile(package) as archive, tempfile.TemporaryDirectory(dir=OUT) as tmp:
        for name in archive.namelist():
            if name.endswith(GPU_SUFFIXES):
                local = Path(tmp) / Path(name).name
                local.write_bytes(archive.read(name))
                out[name] = describe_gpu_member(cuobjdump, local)
    return out


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    facts: dict[str, object] = {"torch": torch.__version__, "cuda": torch.version.cuda}
    cuobjdump = find_cuobjdump()
    if not torch.cuda.is_available():
        facts["skip"] = "torch.cuda.is_available() is False"
    elif cuobjdump is None:
        facts["skip"] = "no cuobjdump on PATH nor in triton/backends/nvidia/bin"
    if "skip" in facts:
        (OUT / "facts.json").write_text(json.dumps(facts, indent=1))
        return
    assert cuobjdump is not None
    major, minor = torch.cuda.get_device_capability()
    facts["capability"] = f"{major}.{minor}"
    facts["cuobjdump"] = cuobjdump
    torch.manual_seed(0)
    model = LinearReluSum().cuda().eval()
    x = torch.randn(8, 64, device="cuda")
    ep = torch.export.export(model, (x,))
    with torch.no_grad():
        eager = model(x)
    packages: dict[str, dict[str, object]] = {}
    for name, configs in (("default", {}), ("multi", MULTI_ARCH)):
        entry: dict[str, object] = {"inductor_configs": configs}
        packages[name] = entry
        try:
            path = torch._inductor.aoti_compile_and_package(
                ep, package_path=str(OUT / f"{name}.pt2"), inductor_configs=configs
            )
            runner = torch._inductor.aoti_load_package(path)
            with torch.no_grad():
                got = runner(x)
            entry["max_abs_gap"] = max(
                (a - b).abs().max().item() for a, b in zip(got, eager, strict=True)
            )
            entry["members"] = describe_package(cuobjdump, Path(path))
        except Exception as exc:  # what plain torch raised: the test says it, then skips
            entry["error"] = f"{type(exc).__name__}: {exc}"[:2000]
            traceback.print_exc()
    facts["packages"] = packages
    (OUT / "facts.json").write_text(json.dumps(facts, indent=1))


if __name__ == "__main__":
    main()
