"""No import cycle inside aotipre/: modules depend one way (read from the source with ast).

Every `import aotipre...` and `from aotipre... import ...` counts, at module level, under
`if TYPE_CHECKING:` and inside functions alike: a lazy import that closes a circle is still a
circle (it only moves the failure to run time). `from package import name` is an edge to the
submodule `package.name` when there is one, else to the package. Parent packages that Python
imports along the way are not edges (a package's __init__ may re-export its submodules).

One exception: the root `aotipre/__init__.py` is the public facade whose lazy `__getattr__`
hands out `aotipre.check` and friends; its own imports are not edges, so that any module may
read `aotipre.__version__` from it.

The worker package (runner/worker/, run by path where aotipre may not be installed) has a rule
of its own: torch, the standard library and its sibling modules only (relative imports).
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "aotipre"
FACADE = "aotipre"
WORKER = PACKAGE / "runner" / "worker"
WORKER_MAY_IMPORT = frozenset({"torch", "triton", "torchgen"})
"""What the worker imports besides the standard library and its own modules (triton: torch's,
where it is installed, to trace kernel launches; torchgen: shipped in the torch wheel, its C-shim
table `torchgen.aoti.fallback_ops`, which torch/_inductor/ir.py reads too)."""


def module_files() -> dict[str, Path]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def imports_of(path: Path, modules: dict[str, Path]) -> set[str]:
    """The aotipre modules `path` imports, anywhere in the file."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                found.add(sub if sub in modules else node.module)
    return {m for m in found if m in modules}


def import_graph() -> dict[str, set[str]]:
    modules = module_files()
    return {
        name: set() if name == FACADE else imports_of(path, modules) - {name}
        for name, path in modules.items()
    }


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            nxt = next(edges, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_import_cycle_in_aotipre() -> None:
    found = cycles(import_graph())
    assert found == [], "import cycles (each list imports itself around): " + "; ".join(
        " <-> ".join(c) for c in found
    )


@pytest.mark.parametrize(
    ("graph", "expected"),
    [
        ({"a": {"b"}, "b": {"c"}, "c": set()}, []),
        ({"a": {"b"}, "b": {"a"}, "c": {"a"}}, [["a", "b"]]),
        ({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"d"}}, [["a", "b", "c"]]),
    ],
)
def test_cycle_finder(graph: dict[str, set[str]], expected: list[list[str]]) -> None:
    assert cycles(graph) == expected


def test_lazy_and_type_checking_imports_are_edges(tmp_path: Path) -> None:
    src = tmp_path / "m.py"
    src.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from aotipre.findings import Report\n"
        "def f():\n"
        "    from aotipre.runner import launch\n"
        "    import aotipre.findings.codes\n"
    )
    modules = module_files()
    assert imports_of(src, modules) == {
        "aotipre.findings",
        "aotipre.runner.launch",
        "aotipre.findings.codes",
    }


def test_the_triage_modules_depend_one_way() -> None:
    graph = import_graph()
    assert "aotipre.triage.escalate" not in graph["aotipre.triage.conclude"]
    assert "aotipre.triage.escalate" not in graph["aotipre.triage.artifacts"]
    assert "aotipre.triage.schedule" not in graph["aotipre.triage.conclude"]
    assert "aotipre.triage.state" in graph["aotipre.triage.conclude"]


def worker_imports(path: Path) -> tuple[set[str], set[str]]:
    """(the top-level names of its absolute imports, the siblings it imports) of a worker module;
    a relative import that leaves the worker package fails the test."""
    absolute: set[str] = set()
    siblings: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            absolute.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            absolute.add(node.module.split(".")[0])
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 1, f"{path.name}: a relative import out of the worker package"
            if node.module:
                siblings.add(node.module.split(".")[0])
            else:
                siblings.update(a.name for a in node.names)
    return absolute, siblings


def test_the_worker_imports_torch_the_standard_library_and_itself_only() -> None:
    """The worker runs by path in interpreters without aotipre (runner/worker/__main__.py): none
    of its modules imports aotipre or anything else but torch and the standard library, and its
    own modules import each other one way."""
    files = {path.stem: path for path in sorted(WORKER.glob("*.py"))}
    assert {"__init__", "__main__", "protocol"} <= set(files)
    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        absolute, siblings = worker_imports(path)
        foreign = absolute - set(sys.stdlib_module_names) - WORKER_MAY_IMPORT
        assert not foreign, f"runner/worker/{path.name} imports {sorted(foreign)}"
        assert siblings <= set(files), f"runner/worker/{path.name} imports {sorted(siblings)}"
        graph[name] = siblings - {name}
    assert cycles(graph) == []


def test_the_cli_is_the_top_layer() -> None:
    """Nothing outside aotipre/cli/ (but `python -m aotipre`) imports it: the library, the fleet
    and the pytest plugin stand without the command line, which only parses, calls and renders."""
    graph = import_graph()
    users = sorted(
        module
        for module, imported in graph.items()
        if not module.startswith(("aotipre.cli", "aotipre.__main__"))
        and any(i == "aotipre.cli" or i.startswith("aotipre.cli.") for i in imported)
    )
    assert users == [], f"modules outside the CLI that import it: {users}"


FOUNDATION_MAY_IMPORT = {"aotipre.foundation.tempdirs": {"aotipre.runner.cache"}}
"""The one import of the foundation out of itself: tempdirs asks the compile cache (lazily)
whether a cache root is safe to use."""


def test_the_foundation_is_the_bottom_layer() -> None:
    """aotipre/foundation/ imports nothing of aotipre outside itself (but FOUNDATION_MAY_IMPORT),
    so every layer can stand on it without a circle."""
    graph = import_graph()
    for module, imported in sorted(graph.items()):
        if not module.startswith("aotipre.foundation"):
            continue
        outside = {i for i in imported if not i.startswith("aotipre.foundation")}
        outside -= FOUNDATION_MAY_IMPORT.get(module, set())
        assert not outside, f"{module} imports {sorted(outside)}"
