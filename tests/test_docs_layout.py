"""docs/how-it-works.md's module map is the package as it is: every module and package of
aotipre/ (and of the packages the map details) is named there, and every module the map names
exists. A module added, moved or removed without the map fails here."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "aotipre"
DOC = ROOT / "docs" / "how-it-works.md"

DETAILED = ("runner", "runner/stages", "runner/worker", "triage", "diff")
"""Packages whose every module the map names (the others are described as a whole)."""


def _map() -> str:
    text = DOC.read_text(encoding="utf-8")
    section = text.split("## The modules", 1)[1]
    return section.split("```", 2)[1]


def _modules(folder: Path) -> set[str]:
    return {
        p.name
        for p in folder.iterdir()
        if p.suffix == ".py" and p.name not in ("__init__.py", "__main__.py")
    }


def test_every_top_level_module_and_package_is_in_the_map() -> None:
    block = _map()
    entries = set(re.findall(r"^  (\w+(?:\.py|/))", block, flags=re.M))
    packages = {p.name + "/" for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()}
    assert _modules(PACKAGE) | packages == entries


def test_every_module_of_the_detailed_packages_is_named() -> None:
    named = set(re.findall(r"\b(\w+\.py)\b", _map()))
    missing = sorted(
        f"{pkg}/{name}" for pkg in DETAILED for name in _modules(PACKAGE / pkg) if name not in named
    )
    assert not missing, f"docs/how-it-works.md's module map lacks: {', '.join(missing)}"


NOT_OURS = {"version.py": "the installed torch's", "wrapper.cpp": "a package's generated code"}
"""File names the map mentions that are not aotipre's modules."""


def test_every_module_the_map_names_exists() -> None:
    existing = {p.name for p in PACKAGE.rglob("*") if p.suffix in (".py", ".cpp")}
    named = set(re.findall(r"\b(\w+\.(?:py|cpp))\b", _map())) - set(NOT_OURS)
    assert not sorted(named - existing), sorted(named - existing)
