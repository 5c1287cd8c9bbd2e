"""aotipre.report.tabular: tabulate imported without importlib.metadata, and nothing of the
stand-in left behind (each case in a fresh interpreter: the import happens once per process)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

AFTER_IMPORT = """
import sys
from aotipre.report.tabular import tabulate
loaded_metadata = "importlib.metadata" in sys.modules
import importlib.metadata
print(loaded_metadata, type(importlib.metadata.PackageNotFoundError("x")).__module__)
print(tabulate([[1, "a"], [22, "bb"]], headers=["n", "s"]))
"""
"""Prints whether importing tabular loaded importlib.metadata, the module of the
PackageNotFoundError that `import importlib.metadata` gives afterwards, then a table."""


def _run(code: str, path: Path | None = None) -> list[str]:
    env = dict(os.environ)
    if path is not None:  # a stand-in tabulate package of the test, found first
        env["PYTHONPATH"] = os.pathsep.join([str(path), env.get("PYTHONPATH", "")])
    r = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env
    )
    assert r.returncode == 0, r.stderr
    return r.stdout.splitlines()


def test_tabulate_without_metadata_and_the_real_module_after() -> None:
    """The table is tabulate's own (compared with tabulate imported plainly in another fresh
    process), importlib.metadata is not loaded by the import, and a later `import
    importlib.metadata` loads the real module, not the stand-in."""
    first, *table = _run(AFTER_IMPORT)
    plain = _run(
        'from tabulate import tabulate\nprint(tabulate([[1, "a"], [22, "bb"]], headers=["n", "s"]))'
    )
    assert first == "False importlib.metadata"
    assert table == plain


def _fake_tabulate(root: Path, init: str, modules: dict[str, str] | None = None) -> Path:
    """A `tabulate` package whose __init__ is `init` (plus other top-level modules) under root."""
    (root / "tabulate").mkdir()
    (root / "tabulate" / "__init__.py").write_text(textwrap.dedent(init))
    for name, text in (modules or {}).items():
        (root / f"{name}.py").write_text(textwrap.dedent(text))
    return root


TABLE = """
def tabulate(rows, headers=()):
    return "fake table"
"""


def test_a_tabulate_that_wants_more_of_metadata_is_imported_plainly(tmp_path: Path) -> None:
    """A tabulate that imports a name the stand-in lacks is imported again with the real
    importlib.metadata, instead of failing."""
    root = _fake_tabulate(
        tmp_path,
        "from importlib.metadata import version, packages_distributions\n" + TABLE,
    )
    first, table = _run(AFTER_IMPORT, root)
    assert first == "True importlib.metadata"
    assert table == "fake table"


def test_a_module_that_kept_the_stand_in_is_imported_again(tmp_path: Path) -> None:
    """A module tabulate imports (its optional wcwidth) that kept a reference to the stand-in
    is imported again with the real importlib.metadata: nothing keeps the stand-in."""
    root = _fake_tabulate(
        tmp_path,
        "from importlib.metadata import version, PackageNotFoundError\nimport wcwidth\n" + TABLE,
        {"wcwidth": "import importlib.metadata as metadata\n"},
    )
    code = AFTER_IMPORT + (
        "import wcwidth, tabulate\n"
        "print(wcwidth.metadata is importlib.metadata, tabulate.version is importlib.metadata.version)\n"
    )
    first, table, kept = _run(code, root)
    assert first == "True importlib.metadata"
    assert table == "fake table"
    assert kept == "True True"
