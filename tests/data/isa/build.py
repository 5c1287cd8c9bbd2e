"""Build tests/data/isa/avx512.pt2: two models (encoder, decoder), their CPU code compiled for a
fixed x86 level whatever the host (TORCHINDUCTOR_CPP_MARCH=skylake-avx512 and
ATEN_CPU_CAPABILITY=avx512: inductor's AVX-512 vector code), so the static target tests judge a
package whose ISA does not depend on the machine that runs them. Never loaded by the tests (it
would die on an AVX2-only host), only read.

    python tests/data/isa/build.py tests/data/isa/avx512.pt2

Built with torch 2.13.0 (CPU) through aot_compile + package_pt2 (the public API for a package of
several models), as the fixture `multi` is. To keep the repository small, each .so then loses its
DWARF sections (objcopy) except .debug_str, cut down to the compiler command lines (what the
static checks read the -march from); code, symbols and every other member are as compiled.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import zipfile

os.environ["TORCHINDUCTOR_CPP_MARCH"] = "skylake-avx512"
os.environ["ATEN_CPU_CAPABILITY"] = "avx512"

import torch  # noqa: E402
from torch import nn  # noqa: E402


class Encoder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(32, 32)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.proj(x)).exp() * 0.5 + x


class Decoder(nn.Module):
    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return torch.tanh(h).sigmoid() + h * h


def compiled(model: nn.Module, example: torch.Tensor) -> list[object]:
    from torch._inductor import aot_compile

    batch = torch.export.Dim("batch", min=1, max=64)
    ep = torch.export.export(model.eval(), (example,), dynamic_shapes=({0: batch},), strict=False)
    files = aot_compile(ep.module(), (example,), options={"aot_inductor.package": True})
    assert isinstance(files, list)
    return files


DWARF = (".debug_info", ".debug_line", ".debug_rnglists", ".debug_aranges", ".debug_abbrev")
DWARF += (".debug_line_str", ".debug_loclists")


def slim_so(data: bytes) -> bytes:
    """The .so without DWARF but its compiler command lines (the producer strings)."""
    with tempfile.TemporaryDirectory() as tmp:
        so, strings = os.path.join(tmp, "w.so"), os.path.join(tmp, "str")
        with open(so, "wb") as fh:
            fh.write(data)
        subprocess.run(["objcopy", f"--dump-section=.debug_str={strings}", so], check=True)
        with open(strings, "rb") as fh:
            kept = [s for s in fh.read().split(b"\0") if s.startswith(b"GNU ")]
        with open(strings, "wb") as fh:
            fh.write(b"".join(s + b"\0" for s in kept))
        removed = [f"--remove-section={name}" for name in DWARF]
        subprocess.run(
            ["objcopy", *removed, f"--update-section=.debug_str={strings}", so], check=True
        )
        with open(so, "rb") as fh:
            return fh.read()


def main(out: str) -> None:
    from torch.export.pt2_archive._package import package_pt2

    torch.manual_seed(0)
    with tempfile.TemporaryDirectory() as tmp:
        full = os.path.join(tmp, "full.pt2")
        package_pt2(
            full,
            aoti_files={
                "encoder": compiled(Encoder(), torch.randn(3, 32)),
                "decoder": compiled(Decoder(), torch.randn(3, 32)),
            },
        )
        with zipfile.ZipFile(full) as src, zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as dst:
            for info in src.infolist():
                data = src.read(info)
                dst.writestr(info, slim_so(data) if info.filename.endswith(".so") else data)


if __name__ == "__main__":
    main(sys.argv[1])
