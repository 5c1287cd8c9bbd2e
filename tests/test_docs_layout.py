"""docs/how-it-works.md shows the package layout as it is: its layout block is what
scripts/gen_layout.py makes from the code (every package and module of aotipre/, each with the
first sentence of its docstring), so a module added, moved, removed or redescribed without
regenerating the page fails here. The package root stays a handful of the library's faces, and
a module past ~600 lines says in its docstring why it is one module."""

from __future__ import annotations

import ast
import importlib.util
import re
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "aotipre"
DOC = ROOT / "docs" / "how-it-works.md"

MAX_ROOT_MODULES = 6
"""The root holds the library's faces (api, config, program, pytest_plugin); everything else
sits in a package named for its role. More than this many and the root hides the architecture
again: group the newcomer into a package instead."""

LONG_MODULE_LINES = 600
LONG_REASON = re.compile(r"(Longer than|A little over) the ~600 lines|Long because")
"""How a long module's docstring says why it is one module (the phrasings in use)."""


def _gen_layout() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_layout", ROOT / "scripts" / "gen_layout.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_layout_block_is_the_code() -> None:
    gen = _gen_layout()
    page = DOC.read_text(encoding="utf-8")
    assert page.count(gen.BEGIN) == 1 and page.count(gen.END) == 1, "the layout markers"
    assert gen.with_layout(page) == page, (
        "docs/how-it-works.md's layout differs from the code: run python scripts/gen_layout.py"
    )


def test_the_layout_names_every_module(tmp_path: Path) -> None:
    """The generator walks the real tree: a new module (and its docstring) shows up, nested."""
    gen = _gen_layout()
    package = tmp_path / "aotipre"
    (package / "fleet").mkdir(parents=True)
    (package / "__init__.py").write_text('"""The root."""\n')
    (package / "api.py").write_text('"""The entry points. More text."""\n')
    (package / "fleet" / "__init__.py").write_text('"""Many packages (e.g. a batch). Why."""\n')
    (package / "fleet" / "shard.py").write_text("x = 1\n")
    assert gen.layout(package).splitlines() == [
        "aotipre/".ljust(gen.NAME_COLUMN) + "The root.",
        "  api.py".ljust(gen.NAME_COLUMN) + "The entry points.",
        "  fleet/".ljust(gen.NAME_COLUMN) + "Many packages (e.g. a batch).",
        "    shard.py",
    ]
    page = f"intro\n{gen.BEGIN}\nstale\n{gen.END}\nafter\n"
    assert gen.with_layout(page, package) == f"intro\n{gen.block(package)}\nafter\n"


def test_the_root_holds_a_handful_of_modules() -> None:
    root = sorted(
        p.name for p in PACKAGE.glob("*.py") if p.name not in ("__init__.py", "__main__.py")
    )
    assert len(root) <= MAX_ROOT_MODULES, f"aotipre/ holds {len(root)} modules: {root}"


def test_every_long_module_says_why() -> None:
    unexplained = []
    for path in sorted(PACKAGE.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        if len(text.splitlines()) <= LONG_MODULE_LINES:
            continue
        doc = ast.get_docstring(ast.parse(text, str(path))) or ""
        if not LONG_REASON.search(" ".join(doc.split())):
            unexplained.append(path.relative_to(ROOT).as_posix())
    assert not unexplained, (
        f"modules over {LONG_MODULE_LINES} lines whose docstring does not say why they are one "
        f"module (or split them): {unexplained}"
    )
