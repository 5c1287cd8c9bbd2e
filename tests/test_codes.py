"""The code table: unique, well-formed, numbered by the written policy, each with an example, and
documented in docs/codes.md (and the README's table while it has one)."""

from __future__ import annotations

import ast
import functools
import re
import subprocess
import sys
from pathlib import Path

import pytest

from aotipre.findings import codes, codes_doc


def test_codes_and_names_are_unique() -> None:
    assert len({c.code for c in codes.ALL_CODES}) == len(codes.ALL_CODES)
    assert len({c.name for c in codes.ALL_CODES}) == len(codes.ALL_CODES)


def test_codes_follow_the_numbering_policy() -> None:
    for c in codes.ALL_CODES:
        assert re.fullmatch(r"AOT\d{3}", c.code), c.code
        assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", c.name), c.name
        assert c.summary.endswith(".") and c.hint


def test_codes_are_listed_in_order() -> None:
    listed = [c.code for c in codes.ALL_CODES]
    assert listed == sorted(listed), "keep ALL_CODES in code order, family by family"


ROOT = Path(__file__).resolve().parents[1]


def test_readme_points_at_the_codes_reference() -> None:
    """The README keeps no code table (docs/codes.md is the reference): it links it and names
    the commands that print codes."""
    readme = (ROOT / "README.md").read_text()
    assert "<!-- codes:start -->" not in readme
    assert "(docs/codes.md)" in readme and "aotipre explain" in readme and "aotipre codes" in readme


# --------------------------------------------------------------------------------------------
# docs/codes.md: every code with an example and what to do


def test_docs_codes_reference_is_current() -> None:
    path = ROOT / codes_doc.DOC_PATH
    written = path.read_text(encoding="utf-8") if path.is_file() else ""
    assert written == codes_doc.render_reference(), (
        "docs/codes.md is stale: run scripts/gen_codes_reference.py"
    )


def test_the_reference_script_checks_and_says_so() -> None:
    """`--check` exits 0 on the current file (CI could run it instead of this suite)."""
    r = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "gen_codes_reference.py"), "--check"],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr
    assert "docs/codes.md is current" in r.stdout


def test_every_code_has_a_real_example() -> None:
    """An example is one message as aotipre emits it: one line, not the summary again."""
    for c in codes.ALL_CODES:
        assert c.example.strip() == c.example and c.example, c.code
        assert "\n" not in c.example, c.code
        assert c.example != c.summary and c.example.rstrip(".") != c.summary.rstrip("."), c.code
    assert len({c.example for c in codes.ALL_CODES}) == len(codes.ALL_CODES), "examples repeat"


def test_families_are_the_documented_policy() -> None:
    """codes.FAMILIES is the family list of the numbering policy in codes.py's docstring, and
    every code belongs to one of them."""
    doc = " ".join((codes.__doc__ or "").split())
    listed = "0 " + doc.split("- 0 ", 1)[1].split(". - ", 1)[0]  # "0 package and archive; 1 ..."
    from_doc = [tuple(part.strip().split(" ", 1)) for part in listed.split(";")]
    assert from_doc == [(d, n) for d, n in codes.FAMILIES]
    digits = {d for d, _ in codes.FAMILIES}
    assert {codes_doc.family_of(c) for c in codes.ALL_CODES} <= digits


def test_the_reference_lists_every_code_once_in_order() -> None:
    text = codes_doc.render_reference()
    headings = re.findall(r"^### (AOT\d{3}) (\S+)$", text, re.MULTILINE)
    assert headings == [(c.code, c.name) for c in codes.ALL_CODES]
    for c in codes.ALL_CODES:
        assert text.count(f'<a id="{c.code.lower()}"></a>') == 1, c.code
        section = text.split(f"### {c.code} {c.name}\n", 1)[1].split("\n### ", 1)[0]
        flat = " ".join(section.split())
        assert f"Category: {c.category.value}" in flat, c.code
        assert f"**{c.severity.value}**" in flat, c.code
        assert all(f"{sev.value} (" in flat for sev, _ in c.overrides), c.code
        assert " ".join(c.example.split()) in flat, c.code
        assert flat.count("What to do: ") == 1, c.code


def test_markdown_escapes_what_would_render_wrong() -> None:
    assert codes_doc._md("lay it out as <repo>/<model>") == "lay it out as \\<repo\\>/\\<model\\>"
    assert codes_doc._md("objects (opaque_obj_*)") == "objects (opaque_obj\\_\\*)"
    assert codes_doc._md("torch._inductor and `a_*_<b>`") == "torch.\\_inductor and `a_*_<b>`"
    assert codes_doc._md("package_constants_in_so=True") == "package_constants_in_so=True"


# --------------------------------------------------------------------------------------------
# Emitted severities match the table


_CODE_RE = re.compile(r"AOT\d{3}")


def _severities_in(node: ast.AST) -> set[str]:
    """Names of every `Severity.X` (or the table's E/W/I aliases) inside `node`."""
    out: set[str] = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Attribute) and isinstance(sub.value, ast.Name):
            if sub.value.id == "Severity":
                out.add(sub.attr.lower())
    return out


@functools.lru_cache(maxsize=256)
def _assignments_in(func: ast.AST) -> dict[str, list[ast.AST]]:
    """Every name assigned inside `func` (`x = ...`) with its values, in source order: one walk
    per function, not one per call that names a variable."""
    values: dict[str, list[ast.AST]] = {}
    for sub in ast.walk(func):
        if isinstance(sub, ast.Assign):
            for name in {t.id for t in sub.targets if isinstance(t, ast.Name)}:
                values.setdefault(name, []).append(sub.value)
    return values


def _assigned_in(func: ast.AST, name: str) -> list[ast.AST]:
    """The values assigned to `name` inside `func` (`x = ...`)."""
    return _assignments_in(func).get(name, [])


def _codes_of(call: ast.Call, func: ast.AST) -> list[str]:
    """The codes a finding call is for: `codes.get("AOT201").finding(...)`, a helper that takes
    the code first (`self._add("AOT702", ...)`), or a variable assigned literal codes in the
    same function (`code = "AOT401" if ... else "AOT406"`)."""
    candidates: list[ast.AST] = list(call.args[:1])
    if isinstance(call.func, ast.Attribute) and isinstance(call.func.value, ast.Call):
        candidates = list(call.func.value.args[:1]) + candidates
    for arg in candidates:
        if isinstance(arg, (ast.Constant, ast.IfExp)):  # "AOT401" or "AOT401" if c else "AOT406"
            literal = [
                sub.value
                for sub in ast.walk(arg)
                if isinstance(sub, ast.Constant)
                and isinstance(sub.value, str)
                and _CODE_RE.fullmatch(sub.value)
            ]
            if literal:
                return literal
        if isinstance(arg, ast.Name):
            found = [
                sub.value
                for value in _assigned_in(func, arg.id)
                for sub in ast.walk(value)
                if isinstance(sub, ast.Constant)
                and isinstance(sub.value, str)
                and _CODE_RE.fullmatch(sub.value)
            ]
            if found:
                return found
    return []


def emitted_severity_overrides() -> list[tuple[str, str, int, set[str] | None]]:
    """(code, file, line, severities) of every finding built in aotipre/ with a severity other
    than its code's default; severities None where they cannot be read from the source."""
    root = Path(codes.__file__).resolve().parents[1]
    out: list[tuple[str, str, int, set[str] | None]] = []
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        funcs = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.Module))]
        for func in funcs:
            for call in ast.walk(func):
                if not isinstance(call, ast.Call):
                    continue
                found_codes = _codes_of(call, func)
                if not found_codes:
                    continue
                exprs: list[ast.AST] = []
                if (
                    path.name == "target.py"
                    and isinstance(call.func, ast.Attribute)
                    and call.func.attr == "add"
                ):
                    # checks/target.py's _Context.add applies `self.sev` (info for facts of this
                    # machine under --static-only) to every code it builds
                    exprs.append(ast.parse("Severity.INFO", mode="eval").body)
                for kw in call.keywords:
                    if kw.arg == "severity":
                        exprs.append(kw.value)
                    elif kw.arg is None:  # **fields
                        exprs.append(kw.value)
                if not exprs:
                    continue
                found: set[str] = set()
                for expr in exprs:
                    found |= _severities_in(expr)
                    for name in {n.id for n in ast.walk(expr) if isinstance(n, ast.Name)}:
                        for value in _assigned_in(func, name):
                            found |= _severities_in(value)
                rel = str(path.relative_to(root.parent))
                out.extend((code, rel, call.lineno, found) for code in found_codes)
    return out


Override = tuple[str, str, int, set[str] | None]


@pytest.fixture(scope="module")
def overrides() -> list[Override]:
    """The scan of aotipre's sources (emitted_severity_overrides), done once for the module."""
    return emitted_severity_overrides()


def test_every_emitted_severity_is_in_the_table(overrides: list[Override]) -> None:
    """AOT406 was emitted as a warning while the table said error: every severity a finding is
    built with must be its code's default or an override the table documents (with when)."""
    table = {c.code: c for c in codes.ALL_CODES}
    wrong = []
    for code, where, line, severities in overrides:
        entry = table[code]
        allowed = {entry.severity.value} | {sev.value for sev, _ in entry.overrides}
        for sev in severities or set():
            if sev not in allowed:
                wrong.append(f"{where}:{line}: {code} emitted as {sev}, table allows {allowed}")
    assert not wrong, "\n".join(wrong)


def test_the_scan_sees_the_known_overrides(overrides: list[Override]) -> None:
    """The scan above is not vacuous: it finds the overrides known to exist."""
    seen = {(code, sev) for code, _, _, sevs in overrides for sev in sevs or ()}
    assert ("AOT202", "warning") in seen
    assert ("AOT401", "info") in seen
    assert ("AOT705", "warning") in seen


def test_an_undeclared_override_is_caught(tmp_path: Path) -> None:
    """The check itself fails on a severity the table does not allow."""
    table = {c.code: c for c in codes.ALL_CODES}
    entry = table["AOT201"]
    allowed = {entry.severity.value} | {sev.value for sev, _ in entry.overrides}
    src = 'codes.get("AOT201").finding("x", severity=Severity.INFO)\n'
    call = ast.parse(src).body[0].value  # type: ignore[attr-defined]
    assert _codes_of(call, call) == ["AOT201"]
    assert _severities_in(call.keywords[0].value) - allowed == {"info"}


def test_documented_overrides_are_emitted_somewhere(overrides: list[Override]) -> None:
    """An override in the table that nothing emits is stale documentation."""
    seen = {(code, sev) for code, _, _, sevs in overrides for sev in sevs or ()}
    stale = [
        (c.code, sev.value)
        for c in codes.ALL_CODES
        for sev, _ in c.overrides
        if (c.code, sev.value) not in seen
    ]
    assert not stale, f"overrides documented but never emitted: {stale}"
