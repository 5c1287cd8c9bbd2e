"""Copy a .pt2 with its compiled binaries (.so, .cubin) replaced by a short stub.

For committing archives written by another torch version as inspection fixtures: every
metadata member (model JSON, wrapper.cpp, wrapper metadata) stays byte-identical, the package
is no longer loadable, and the repository stays small.

    python scripts/slim_package.py SRC.pt2 DST.pt2 [--keep-gpu-code]

--keep-gpu-code keeps the .cubin/.fatbin members as they are (small; what the GPU code checks
read) and stubs the .so only.
"""

from __future__ import annotations

import sys
import zipfile

STUB = b"aotipre: binary removed to keep the fixture small; metadata members are original\n"


def slim(src: str, dst: str, keep_gpu_code: bool = False) -> None:
    binaries = (".so",) if keep_gpu_code else (".so", ".cubin", ".fatbin")
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w", zipfile.ZIP_STORED) as zout:
        for info in zin.infolist():
            data = zin.read(info)
            if info.filename.endswith(binaries):
                data = STUB
            zout.writestr(info, data)


if __name__ == "__main__":
    slim(sys.argv[1], sys.argv[2], keep_gpu_code="--keep-gpu-code" in sys.argv[3:])
