"""Print the finding-code table as Markdown (paste between the markers in README.md)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from aotipre.codes import ALL_CODES  # noqa: E402


def main() -> None:
    print("| code | name | severity | category | meaning |")
    print("| --- | --- | --- | --- | --- |")
    for c in ALL_CODES:
        severity = "; ".join(
            [c.severity.value] + [f"{sev.value} ({when})" for sev, when in c.overrides]
        )
        print(f"| `{c.code}` | {c.name} | {severity} | {c.category.value} | {c.summary} |")


if __name__ == "__main__":
    main()
