"""Torch-free archive surgery for tests/gate: one package from the ExportedProgram of one
archive and the AOTI code of another (laid out as `package_pt2` writes them)."""

from __future__ import annotations

import os
import zipfile
from pathlib import Path


def merge(out_path: Path, ep_archive: Path, aoti_archive: Path) -> Path:
    """One archive with the ExportedProgram of `ep_archive` and the AOTI code of `aoti_archive`."""
    root = out_path.stem
    members: dict[str, bytes] = {}
    with zipfile.ZipFile(ep_archive) as ep, zipfile.ZipFile(aoti_archive) as ao:
        for z, only_aoti in ((ep, False), (ao, True)):
            for info in z.infolist():
                _, _, rel = info.filename.partition("/")
                if rel and (not only_aoti or rel.startswith("data/aotinductor/")):
                    members[f"{root}/{rel}"] = z.read(info)
    tmp = out_path.with_suffix(".tmp")
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_STORED) as z:
        for name, data in members.items():
            z.writestr(name, data)
    os.replace(tmp, out_path)
    return out_path
