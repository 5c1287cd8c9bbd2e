"""The documentation cannot drift from the code: every `aotipre` command shown in README.md and
docs/*.md parses with the real command line, the README's Usage block names every command and
option, the README's example outputs are what aotipre prints today (re-run on the fixtures,
volatile parts masked), every relative link points at a file (and a heading, for an anchor),
and the README stays short."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import typer
import typer.main
from typer.core import TyperCommand
from typer.exceptions import TyperException

from aotipre.cli.app import app

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
PAGES = [README, *sorted((REPO / "docs").glob("*.md"))]
GROUP = typer.main.get_command(app)
COMMANDS_OF_APP: dict[str, TyperCommand] = GROUP.commands  # type: ignore[attr-defined]

SHELL_BLOCKS = {"", "sh", "bash", "shell", "console"}
"""Fenced blocks whose lines are commands (or, in a console block, `$ ` lines are)."""
SHELLS = {"bash", "zsh", "fish", "powershell", "pwsh"}
"""What `--show-completion` takes (typer's shells)."""
PLACEHOLDERS = {"COMMAND": "check"}
"""Words that stand for something else in a documented command line."""
README_LINE_LIMIT = 260


# --------------------------------------------------------------------------------------------
# Reading the Markdown


@dataclass(frozen=True)
class Block:
    """One fenced code block: its info string, its lines, and the line its fence opens on."""

    page: Path
    info: str
    lines: tuple[str, ...]
    line: int


def blocks(page: Path) -> Iterator[Block]:
    lines = page.read_text().splitlines()
    i = 0
    while i < len(lines):
        if lines[i].startswith("```"):
            info = lines[i][3:].strip()
            j = i + 1
            while j < len(lines) and not lines[j].startswith("```"):
                j += 1
            yield Block(page, info, tuple(lines[i + 1 : j]), i + 1)
            i = j
        i += 1


def prose(page: Path) -> str:
    """The page without its fenced blocks (blank lines in their place)."""
    out = []
    inside = False
    for line in page.read_text().splitlines():
        if line.startswith("```"):
            inside = not inside
            out.append("")
        else:
            out.append("" if inside else line)
    return "\n".join(out)


def _joined(lines: tuple[str, ...]) -> Iterator[str]:
    """Lines with their `\\` continuations joined."""
    buf = ""
    for line in lines:
        if line.rstrip().endswith("\\"):
            buf += line.rstrip()[:-1] + " "
            continue
        yield buf + line
        buf = ""
    if buf:
        yield buf


def block_commands(block: Block) -> list[str]:
    """The `aotipre ...` command lines of a fenced block. In a console block (one with `$ `
    lines) only the `$ ` lines are commands: the rest is output. In a YAML block, a command
    continues on the following lines that start with an option (`run: >` folding)."""
    if block.info == "yaml":
        out: list[str] = []
        open_command = False
        for line in block.lines:
            text = line.strip()
            if text.startswith("aotipre "):
                out.append(text)
                open_command = True
            elif open_command and text.startswith("-"):
                out[-1] += " " + text
            else:
                open_command = False
        return out
    if block.info not in SHELL_BLOCKS:
        return []
    lines = list(_joined(block.lines))
    if any(line.startswith("$ ") for line in lines):
        return [line[2:].strip() for line in lines if line.startswith("$ aotipre ")]
    return [line.strip() for line in lines if line.strip().startswith("aotipre ")]


def inline_commands(page: Path) -> list[str]:
    """`aotipre ...` in inline code spans of the prose (not in fenced blocks)."""
    return re.findall(r"`(aotipre [^`]+)`", prose(page))


def argv(command: str) -> list[str]:
    """The arguments after `aotipre`, up to a shell operator or comment; `...` dropped."""
    lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    lexer.commenters = "#"
    tokens = list(lexer)
    assert tokens[0] == "aotipre", command
    out = []
    for token in tokens[1:]:
        if token and set(token) <= set("|&;<>()"):
            break
        if token in ("...", "…"):
            continue
        out.append(PLACEHOLDERS.get(token, token))
    return out


# --------------------------------------------------------------------------------------------
# Parsing with the real command line


def root_options() -> set[str]:
    return {o for p in GROUP.params for o in (*p.opts, *p.secondary_opts)}


def parse(args: list[str]) -> None:
    """Parse `aotipre ARGS` as the typer app would, without running anything: every option must
    exist on its command and every value must convert (choices, numbers, ranges). Paths need not
    exist (no option of the app checks existence)."""
    known = root_options()
    i = 0
    while i < len(args) and args[i].startswith("-"):
        assert args[i] in known, f"no root option {args[i]!r} (known: {sorted(known)})"
        if args[i] == "--show-completion" and i + 1 < len(args) and args[i + 1] in SHELLS:
            i += 1
        i += 1
    if i == len(args):
        return  # root options only (--version, completion): nothing else to parse
    name = args[i]
    assert name in COMMANDS_OF_APP, f"no command {name!r} (commands: {sorted(COMMANDS_OF_APP)})"
    command = COMMANDS_OF_APP[name]
    try:
        command.make_context(name, list(args[i + 1 :]), resilient_parsing=False)
    except typer.Exit:
        pass  # --help
    except TyperException as e:  # typer's click: UsageError, BadParameter, NoSuchOption...
        message = e.format_message() if hasattr(e, "format_message") else str(e)
        raise AssertionError(f"aotipre {' '.join(args)}: {message}") from None


def documented_commands() -> list[tuple[str, str]]:
    out = []
    for page in PAGES:
        rel = page.relative_to(REPO)
        for block in blocks(page):
            for command in block_commands(block):
                out.append((f"{rel}:{block.line}", command))
        for command in inline_commands(page):
            out.append((f"{rel} (inline)", command))
    return out


COMMANDS = documented_commands()


def test_the_docs_show_commands() -> None:
    """The extraction finds what the pages hold (a regression guard for the extractor)."""
    assert len(COMMANDS) > 40
    where = {w.split(":")[0].split(" ")[0] for w, _ in COMMANDS}
    assert {"README.md", "docs/ci.md", "docs/checks.md", "docs/cpp.md"} <= where
    assert any("--manifest" in c and "--format github" in c for _, c in COMMANDS)  # the YAML


@pytest.mark.parametrize(("where", "command"), COMMANDS, ids=[f"{w} {c}" for w, c in COMMANDS])
def test_documented_command_parses(where: str, command: str) -> None:
    args = argv(command)
    if len(args) == 1 and not args[0].startswith("-"):
        # prose naming a command (`aotipre bundle`), not a command line
        assert args[0] in COMMANDS_OF_APP, f"{where}: no command {args[0]!r}"
        return
    parse(args)


def test_the_parser_refuses_what_the_cli_refuses() -> None:
    """The check above is not vacuous: an unknown option, a bad choice, a bad number, a
    missing argument and an unknown command all fail."""
    for bad in (
        ["check", "x.pt2", "--no-such-flag"],
        ["check", "x.pt2", "--fail-on", "bogus"],
        ["check", "x.pt2", "--timeout", "abc"],
        ["serving-config", "x.pt2", "--max-batch-size", "-1"],
        ["inspect"],
        ["bundle", "x.pt2"],
        ["frobnicate"],
        ["--no-such-root-option"],
    ):
        with pytest.raises(AssertionError):
            parse(bad)
    parse(["check", "x.pt2", "-i", "in.pt", "-f", "sarif", "--report", "json:o.json", "-j", "2"])


# --------------------------------------------------------------------------------------------
# The README's Usage block


def usage_block() -> str:
    text = README.read_text()
    section = text.split("\n## Usage\n", 1)[1].split("\n## ", 1)[0]
    match = re.search(r"```text\n(.*?)```", section, flags=re.S)
    assert match, "README's Usage section has no ```text block"
    return match.group(1)


def usage_entries() -> dict[str, set[str]]:
    """Command name ('' for the root) -> the options the Usage block shows for it."""
    entries: dict[str, set[str]] = {}
    current = ""
    for line in usage_block().splitlines():
        for piece in re.split(r" \| ", line):
            text = piece.strip()
            if text.startswith("aotipre "):
                words = text.split()
                current = "" if words[1].startswith("-") else words[1]
                entries.setdefault(current, set())
            entries.setdefault(current, set()).update(
                re.findall(r"(?<![\w-])(--?[A-Za-z][\w-]*)", text)
            )
    return entries


def options_of(command: TyperCommand) -> set[str]:
    names = {o for p in command.params for o in (*p.opts, *p.secondary_opts)}
    return {o for o in names if o.startswith("-")} - {"--help"}


def test_readme_usage_names_every_command() -> None:
    entries = usage_entries()
    assert set(COMMANDS_OF_APP) <= set(entries), (
        f"README Usage lacks: {sorted(set(COMMANDS_OF_APP) - set(entries))}"
    )
    assert set(entries) - {""} <= set(COMMANDS_OF_APP), "README Usage names unknown commands"


def test_readme_usage_shows_every_option_and_only_real_ones() -> None:
    entries = usage_entries()
    for name, shown in entries.items():
        real = root_options() - {"--help"} if name == "" else options_of(COMMANDS_OF_APP[name])
        assert shown <= real, f"aotipre {name}: README Usage shows {sorted(shown - real)}"
        assert real <= shown, f"aotipre {name}: README Usage lacks {sorted(real - shown)}"


# --------------------------------------------------------------------------------------------
# The README's example outputs


@dataclass(frozen=True)
class Example:
    """A console block of the README: the command after `$ `, and what it printed."""

    args: tuple[str, ...]
    output: tuple[str, ...]
    line: int

    @property
    def static(self) -> bool:
        return self.args[0] == "inspect" or "--static-only" in self.args


def readme_examples() -> list[Example]:
    out = []
    for block in blocks(README):
        if block.info != "console":
            continue
        heads = [i for i, line in enumerate(block.lines) if line.startswith("$ aotipre ")]
        if len(heads) != 1 or heads[0] != 0 or len(block.lines) < 2:
            continue
        args = tuple(argv(block.lines[0][2:]))
        out.append(Example(args, block.lines[1:], block.line))
    return out


EXAMPLES = readme_examples()
STATIC = [e for e in EXAMPLES if e.static]
DYNAMIC = [e for e in EXAMPLES if not e.static]

VOLATILE_LINE = re.compile(r"^(workers:|torch version|cpu isa|platform|shared objects|load |perf )")
"""Lines whose values depend on the host, the torch build or timing: only their start is
compared (a stage's name, model and status; a fact's name)."""
VOLATILE_CODES = {"AOT051", "AOT052", "AOT053", "AOT640", "AOT641"}
"""Findings about this host's CPU and compiler, or about timing (AOT640: whether torch's ISA probe
ran at this load depends on the host's caches): compared by code and severity where both the
example and the run show them; either may leave them out."""
CODE = re.compile(r"^(AOT\d{3})\s")


def entries(lines: tuple[str, ...] | list[str]) -> list[list[str]]:
    """Table rows with their wrapped continuation lines (which start with a space); `...`
    (where an example was cut) and blank lines separate, and are not entries."""
    out: list[list[str]] = []
    for line in lines:
        if not line.strip() or line.strip() == "...":
            out.append([])
        elif line.startswith(" ") and out and out[-1]:
            out[-1].append(line)
        else:
            out.append([line])
    return [e for e in out if e]


def squash(text: str) -> str:
    """Whitespace removed (so that rewrapping does not matter), numbers masked, table rules
    shortened (their width follows the widest cell)."""
    text = re.sub(r"\s+", "", text)
    text = re.sub(r"\d+(\.\d+)?", "0", text)
    return re.sub(r"-{2,}", "-", text)


def key(entry: list[str]) -> list[str]:
    words = entry[0].split()
    size = 3 if words[0] in ("load", "perf") else 2
    return [re.sub(r"\d+(\.\d+)?", "0", w) for w in words[:size]]


def codes_in(items: list[list[str]]) -> set[str]:
    return {m.group(1) for e in items if (m := CODE.match(e[0]))}


def compare(example: Example, output: str) -> None:
    shown = entries(example.output)
    live = entries(output.splitlines())
    live_squashed = [squash(" ".join(e)) for e in live]
    where = f"README.md:{example.line} (aotipre {' '.join(example.args)})"
    for entry in shown:
        code = CODE.match(entry[0])
        if code and code.group(1) in VOLATILE_CODES:
            same = [e for e in live if e[0].startswith(code.group(1))]
            assert all(key(e) == key(entry) for e in same), f"{where}: {same} for {entry[0]!r}"
            continue
        if VOLATILE_LINE.match(entry[0]):
            assert any(key(e) == key(entry) for e in live), (
                f"{where}: no line like {entry[0]!r} in:\n{output}"
            )
            continue
        text = squash(" ".join(entry))
        assert any(s.startswith(text) for s in live_squashed), (
            f"{where}: the README shows\n{chr(10).join(entry)}\nbut aotipre printed:\n{output}"
        )
    readme_codes, live_codes = codes_in(shown), codes_in(live)
    missing = readme_codes - live_codes - VOLATILE_CODES
    assert not missing, f"{where}: not reported now: {missing}"
    assert live_codes - readme_codes <= VOLATILE_CODES, (
        f"{where}: the README lacks {sorted(live_codes - readme_codes - VOLATILE_CODES)}"
    )


def run_example(example: Example, pkg: Callable[[str], Path], tmp_path: Path) -> str:
    """Run the example's command in a folder holding the fixture files it names (and a `.git`,
    where the configuration search stops), as a user would."""
    (tmp_path / ".git").mkdir()
    for arg in example.args:
        if arg.endswith((".pt2", ".pt")):
            shutil.copy(pkg(arg), tmp_path / arg)
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    done = subprocess.run(
        [sys.executable, "-m", "aotipre", *example.args],
        cwd=tmp_path,
        env=env,  # no terminal width: tables keep their natural widths, as in the README
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    verdict = [line for line in example.output if line.startswith("verdict:")]
    if verdict:
        expected = re.search(r"\(exit (\d+);", verdict[0])
        assert expected and done.returncode == int(expected.group(1)), done.stderr
    else:
        assert done.returncode == 0, done.stderr
    return done.stdout


def test_readme_has_the_examples() -> None:
    commands = {e.args[0] for e in EXAMPLES}
    assert {"check", "inspect"} <= commands
    assert STATIC and DYNAMIC


@pytest.mark.parametrize("example", STATIC, ids=[" ".join(e.args) for e in STATIC])
def test_readme_static_example_is_real(
    example: Example, pkg: Callable[[str], Path], tmp_path: Path
) -> None:
    compare(example, run_example(example, pkg, tmp_path))


@pytest.mark.slow
@pytest.mark.parametrize("example", DYNAMIC, ids=[" ".join(e.args) for e in DYNAMIC])
def test_readme_dynamic_example_is_real(
    example: Example, pkg: Callable[[str], Path], tmp_path: Path
) -> None:
    compare(example, run_example(example, pkg, tmp_path))


def test_the_comparison_catches_drift() -> None:
    """A changed message, a finding the README lacks, and a missing row all fail; rewrapping,
    durations and host facts do not."""
    (example,) = [e for e in STATIC if e.args[0] == "check"]
    live = "\n".join(example.output)
    rewrapped = re.sub(r"(\d+\.\d+)s", r"1\1s", live).replace(
        "both\n                    dim 1", "both dim\n                    1"
    )
    compare(example, rewrapped)
    for broken in (
        live.replace("must be equal", "must agree"),
        live.replace("inputs            passed", "inputs            failed"),
        live + "\nAOT201  error       model   input 'input_ids' has dtype float32",
        "\n".join(line for line in example.output if not line.startswith("AOT305")),
    ):
        with pytest.raises(AssertionError):
            compare(example, broken)


def test_readme_is_short() -> None:
    text = README.read_text()
    lines = text.splitlines()
    if "<!-- codes:start -->" in lines:  # the code table (to move to docs/codes.md) not counted
        start = lines.index("<!-- codes:start -->")
        lines[start : lines.index("<!-- codes:end -->") + 1] = []
    assert len(lines) <= README_LINE_LIMIT, f"README.md has {len(lines)} lines"


def test_configuration_page_lists_every_key() -> None:
    from aotipre import config

    page = (REPO / "docs" / "configuration.md").read_text()
    block = page.split("## Every key", 1)[1].split("```toml", 1)[1].split("```", 1)[0]
    listed = set(re.findall(r"^([a-z-]+) =", block, flags=re.M))
    listed |= set(re.findall(r"^\[tool\.aotipre\.([a-z-]+)\]", block, flags=re.M))
    assert {k.name for k in config.KEYS} <= listed


# --------------------------------------------------------------------------------------------
# Links


def slug(heading: str) -> str:
    """GitHub's anchor for a heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = prose(page)
    out: set[str] = set(re.findall(r'<a id="([^"]+)"', text))
    seen: dict[str, int] = {}
    for heading in re.findall(r"^#{1,6} (.+)$", text, flags=re.M):
        base = slug(heading)
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


def links(page: Path) -> list[str]:
    text = re.sub(r"`[^`\n]*`", "", prose(page))
    return re.findall(r"\[[^\]]*\]\(([^)\s]+)\)", text)


LINKS = [(page, target) for page in PAGES for target in links(page)]


def test_pages_link_back_to_the_readme() -> None:
    for page in PAGES[1:]:
        if page.name == "codes.md":
            continue  # generated from aotipre/findings/codes.py
        assert "../README.md" in links(page), f"{page.name} does not link to the README"
    linked = {t.split("#")[0] for t in links(README)}
    for page in PAGES[1:]:
        assert f"docs/{page.name}" in linked, f"the README does not link docs/{page.name}"


@pytest.mark.parametrize(
    ("page", "target"), LINKS, ids=[f"{p.relative_to(REPO)}->{t}" for p, t in LINKS]
)
def test_relative_link_points_at_a_file(page: Path, target: str) -> None:
    if re.match(r"^[a-z]+:", target):
        return  # https:, mailto:
    path, _, anchor = target.partition("#")
    dest = (page.parent / path).resolve() if path else page
    assert dest.exists(), f"{page.relative_to(REPO)}: {target} points at nothing"
    if anchor and dest.suffix == ".md":
        assert anchor in anchors(dest), f"{page.relative_to(REPO)}: no heading #{anchor} in {path}"
