"""The code table: unique, well-formed, numbered by the written policy, documented in the README."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from aotipre import codes


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


def test_readme_codes_table_is_current() -> None:
    root = Path(__file__).resolve().parents[1]
    readme = (root / "README.md").read_text()
    table = readme.split("<!-- codes:start -->")[1].split("<!-- codes:end -->")[0].strip()
    generated = subprocess.run(
        [sys.executable, str(root / "scripts" / "gen_codes_table.py")],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert table == generated, "README's code table is stale: run scripts/gen_codes_table.py"
