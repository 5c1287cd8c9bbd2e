"""Compiles a package's ExportedProgram as plain torch does, with the public API only, in a
fresh interpreter: `python build_plain_compiled.py OUT PACKAGE` writes OUT/compiled.pt2 (the
ground truth of what a deployment that compiles the program gets; tests/gate/conftest.py
`plain_compiled_refuses`)."""

from __future__ import annotations

import sys
from pathlib import Path

import torch


def main(argv: list[str]) -> int:
    out, package = Path(argv[1]), argv[2]
    program = torch.export.load(package)
    torch._inductor.aoti_compile_and_package(program, package_path=str(out / "compiled.pt2"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
