"""Static check of custom operators: which ops the serving process must register, and Python-only
ops in a package meant for the C++ loader (torch-free: archive JSON only)."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from aotipre.findings import Finding, codes
from aotipre.foundation.errors import PackageError
from aotipre.pt2.archive import Archive
from aotipre.pt2.ops import CustomOp, read_custom_ops
from aotipre.pt2.spec import ModelInfo, PackageInfo

CUSTOM_OPS_ENV = "AOTIPRE_CUSTOM_OPS"
"""How the workers learn what to register (the worker's constant of the same name)."""


@dataclass(frozen=True)
class Registration:
    """What registers custom operators in every worker (`--import`, `--library`)."""

    imports: tuple[str, ...] = ()
    """Python modules imported before anything is loaded (they define the ops)."""
    libraries: tuple[str, ...] = ()
    """Shared libraries loaded with torch.ops.load_library (absolute paths); the C++ harness
    dlopens them too, as a C++ server links its op library."""
    import_path: tuple[str, ...] = ()
    """Folders put first on the workers' sys.path (the working directory of the check, since
    workers run in a temporary folder)."""

    @property
    def given(self) -> bool:
        return bool(self.imports or self.libraries)

    def env(self) -> dict[str, str]:
        """The worker environment that carries it (empty when nothing is registered)."""
        if not self.given:
            return {}
        payload = {
            "import": list(self.imports),
            "library": list(self.libraries),
            "path": list(self.import_path or (os.getcwd(),)),
        }
        return {CUSTOM_OPS_ENV: json.dumps(payload)}

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Registration:
        """The registration an environment carries (the inverse of `env`)."""
        try:
            data = json.loads(env.get(CUSTOM_OPS_ENV) or "{}")
        except ValueError:
            return cls()
        if not isinstance(data, dict):
            return cls()
        return cls(
            tuple(str(m) for m in data.get("import") or ()),
            tuple(str(p) for p in data.get("library") or ()),
            tuple(str(p) for p in data.get("path") or ()),
        )

    def how(self) -> str:
        parts = [f"--import {m}" for m in self.imports]
        parts += [f"--library {_shown(lib)}" for lib in self.libraries]
        return ", ".join(parts) or "nothing"


def check_custom_ops(
    package: PackageInfo,
    models: Sequence[ModelInfo],
    registration: Registration,
    *,
    cpp: bool,
    archive: Archive | None = None,
) -> list[Finding]:
    """AOT120 for each custom op when nothing registers ops; AOT122 for each Python-only op of
    a package meant for the C++ loader (`cpp`). `archive`: the package's, already open."""
    findings: list[Finding] = []
    for model in models:
        has_ep = model.has_exported_program
        try:
            ops = read_custom_ops(package.path, package.root, model.name, has_ep, archive)
        except PackageError:  # the reader reported the archive already
            continue
        for op in ops:
            findings.extend(_op_findings(model, op, registration, cpp))
    return findings


def register_hint(op: CustomOp) -> str:
    """How to register `op` in the serving process and in aotipre."""
    if op.python:
        return (
            f"import the Python module that defines {op.name} (torch.library.custom_op) before "
            "loading the package; for aotipre: --import MODULE"
        )
    return (
        f"load the library that registers {op.name} (torch.ops.load_library('lib.so') in "
        "Python, linked or dlopen'ed in a C++ server) or import the module that defines it; "
        "for aotipre: --library PATH or --import MODULE"
    )


def _op_findings(
    model: ModelInfo, op: CustomOp, registration: Registration, cpp: bool
) -> list[Finding]:
    where = " and ".join(
        {"exported_program": "its ExportedProgram", "aoti": "its AOTI code"}[s] for s in op.sources
    )
    kind = "a Python torch.library.custom_op" if op.python else "a custom operator"
    seen = f"{kind}, seen in {where}"
    out: list[Finding] = []
    if cpp and op.python:
        out.append(
            codes.get("AOT122").finding(
                f"model {model.name!r} calls {op.qualified} ({seen}): the C++ loader cannot run it (torch: 'Custom operators created via torch.library.custom_op "
                "cannot be run via AOTI without Python environment')",
                model=model.name,
                stage="static",
                actual=op.qualified,
            )
        )
    if not registration.given:
        out.append(
            codes.get("AOT120").finding(
                f"model {model.name!r} calls {op.qualified} ({seen}), which torch does not "
                "provide: the process that loads the package must register it first",
                hint=register_hint(op),
                model=model.name,
                stage="static",
                actual=op.qualified,
            )
        )
    return out


def _shown(path: str) -> str:
    """A path relative to the working directory when it lies below it."""
    here = os.getcwd()
    return os.path.relpath(path, here) if path.startswith(here + os.sep) else path
