"""The finding-code reference, rendered from aotipre/findings/codes.py: docs/codes.md, and one code's section
for the terminal (`aotipre explain`). Installed aotipre needs no docs/ folder for either."""

from __future__ import annotations

import re
import textwrap

from aotipre.findings.codes import ALL_CODES, BY_CODE, BY_NAME, FAMILIES, Code

DOC_PATH = "docs/codes.md"
"""Where scripts/gen_codes_reference.py writes render_reference(), relative to the repository."""
WIDTH = 80
"""Terminal sections are wrapped to this many columns."""

_FAMILY_NAMES = dict(FAMILIES)
_CODE_SPAN = re.compile(r"(`[^`]*`)")
_LOOSE_UNDERSCORE = re.compile(r"(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])")


def lookup(query: str) -> tuple[Code, ...]:
    """The codes `query` names: one for a code (`AOT613`, any case) or a code's name
    (`run-timeout`), every code of a prefix (`AOT6`, `aot61`), none for anything else."""
    text = query.strip()
    if text.upper() in BY_CODE:
        return (BY_CODE[text.upper()],)
    if text.lower() in BY_NAME:
        return (BY_NAME[text.lower()],)
    if re.fullmatch(r"AOT\d{0,2}", text.upper()):
        return tuple(c for c in ALL_CODES if c.code.startswith(text.upper()))
    return ()


def is_prefix(query: str) -> bool:
    """Whether `query` is a code prefix (`AOT6`) rather than a code or a name."""
    return re.fullmatch(r"AOT\d{0,2}", query.strip().upper()) is not None


def as_dict(code: Code) -> dict[str, object]:
    """A code's fields for JSON (`aotipre explain --format json`)."""
    return {
        "code": code.code,
        "name": code.name,
        "severity": code.severity.value,
        "overrides": [{"severity": sev.value, "when": when} for sev, when in code.overrides],
        "category": code.category.value,
        "family": f"AOT{family_of(code)}",
        "summary": code.summary,
        "example": code.example,
        "hint": code.hint,
    }


def family_of(code: Code) -> str:
    """The family digit of a code (`6` for AOT613)."""
    return code.code[3]


def anchor(code: Code) -> str:
    """The code's anchor in docs/codes.md (`aot613`)."""
    return code.code.lower()


def severity_lines(code: Code) -> list[str]:
    """The default severity, then each override with when it applies."""
    if not code.overrides:
        return [code.severity.value]
    return [f"{code.severity.value} (default)"] + [
        f"{sev.value}: {when}" for sev, when in code.overrides
    ]


# --------------------------------------------------------------------------------------------
# docs/codes.md


def render_reference() -> str:
    """The whole of docs/codes.md: the numbering policy, the families, then one section per code,
    family by family, in code order."""
    out = [
        "# Finding codes",
        "",
        "<!-- Generated from aotipre/findings/codes.py by scripts/gen_codes_reference.py: do not edit by "
        "hand. -->",
        "",
        "Every finding aotipre reports carries one of these codes. Each section below gives the "
        "code's name, its severity and category, what it means, an example message as aotipre "
        "prints it, and what to do about it. On a terminal, `aotipre explain AOT613` prints one "
        "section, `aotipre explain AOT6` lists a family, and `aotipre codes` lists every code.",
        "",
        "## Numbering",
        "",
        "- A code is `AOTxyy`: `x` is the family, `yy` the number inside it. A code is never "
        "reused or renumbered; its name (`unchecked-deployment-runs-out-of-range`) is as stable "
        "as the code.",
        "- Select or ignore codes by prefix (`--select`, `--ignore`, and the `select` and "
        "`ignore` configuration keys): `AOT3` is every shape finding, `AOT30` the first ten of "
        "them.",
        "- The severity is the code's default; a code emitted with another severity in some "
        "situations lists them. `--fail-on` (error or warning) decides which severities fail "
        "the gate.",
        "- Each section's anchor is the code in lower case: `docs/codes.md#aot613`.",
        "",
        "## Families",
        "",
        "| family | codes | about |",
        "| --- | --- | --- |",
    ]
    by_family = _by_family()
    for digit, name in FAMILIES:
        members = by_family.get(digit, [])
        if members:
            span = f"{len(members)}: {members[0].code} to {members[-1].code}"
            out.append(f"| [`AOT{digit}`](#aot{digit}) | {span} | {name} |")
        else:
            out.append(f"| `AOT{digit}` | none yet | {name} |")
    for digit, name in FAMILIES:
        members = by_family.get(digit, [])
        if not members:
            continue
        out += ["", f'<a id="aot{digit}"></a>', "", f"## AOT{digit}: {name}"]
        for code in members:
            out += ["", _markdown_section(code)]
    return "\n".join(out) + "\n"


def _by_family() -> dict[str, list[Code]]:
    out: dict[str, list[Code]] = {}
    for code in ALL_CODES:
        out.setdefault(family_of(code), []).append(code)
    return out


def _markdown_section(code: Code) -> str:
    severity = "; ".join(
        [f"**{code.severity.value}**"]
        + [f"{sev.value} ({_md(when)})" for sev, when in code.overrides]
    )
    lines = [
        f'<a id="{anchor(code)}"></a>',
        "",
        f"### {code.code} {code.name}",
        "",
        f"- Severity: {severity}",
        f"- Category: {code.category.value}",
        "",
        _md(code.summary),
        "",
        "Example:",
        "",
        "```text",
        *_wrap(code.example, 96),
        "```",
        "",
        f"What to do: {_md(_sentence(code.hint))}",
    ]
    return "\n".join(lines)


def _md(text: str) -> str:
    """Prose for Markdown: characters that would start emphasis or HTML are escaped outside
    code spans (`<repo>`, `opaque_obj_*`, `torch._inductor`); intraword underscores stay."""
    parts = _CODE_SPAN.split(text)
    for i in range(0, len(parts), 2):  # the even parts are outside code spans
        part = parts[i].replace("\\", "\\\\").replace("*", "\\*")
        part = part.replace("<", "\\<").replace(">", "\\>")
        parts[i] = _LOOSE_UNDERSCORE.sub(r"\\_", part)
    return "".join(parts)


# --------------------------------------------------------------------------------------------
# the terminal


def render_code(code: Code, width: int = WIDTH) -> str:
    """One code's section as plain text for the terminal (`aotipre explain AOT613`)."""
    out = [f"{code.code} {code.name}", ""]
    for i, line in enumerate(severity_lines(code)):
        out += _field("severity" if i == 0 else "", line, width)
    out += _field("category", code.category.value, width)
    out += _field("family", f"AOT{family_of(code)}: {_FAMILY_NAMES[family_of(code)]}", width)
    out += ["", *_wrap(code.summary, width), "", "Example:"]
    out += _wrap(code.example, width, "  ")
    out += ["", "What to do:"]
    out += _wrap(_sentence(code.hint), width, "  ")
    return "\n".join(out) + "\n"


def render_listing(found: list[Code]) -> str:
    """One line per code (code, name, summary) for a prefix (`aotipre explain AOT6`)."""
    width = max(len(c.name) for c in found)
    return "".join(f"{c.code}  {c.name:<{width}}  {c.summary}\n" for c in found)


def _field(label: str, value: str, width: int) -> list[str]:
    """`label` then `value`, wrapped under a 10-column label column."""
    pad = " " * 10
    lines = _wrap(value, width, pad)
    lines[0] = f"{label:<10}{lines[0][len(pad) :]}"
    return lines


def _wrap(text: str, width: int, indent: str = "") -> list[str]:
    """`text` in lines of at most `width` columns (a longer word stays whole), each indented."""
    return textwrap.wrap(
        text,
        width=width,
        initial_indent=indent,
        subsequent_indent=indent,
        break_long_words=False,
        break_on_hyphens=False,
    ) or [indent]


def _sentence(text: str) -> str:
    """A hint as a sentence (hints are written without the final period)."""
    return text if text.endswith(".") else text + "."
