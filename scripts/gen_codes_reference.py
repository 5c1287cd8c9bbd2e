"""Write docs/codes.md (the finding-code reference) from aotipre/findings/codes.py; `--check` only says
whether it is current (exit 1 when not). tests/test_codes.py fails on a stale docs/codes.md."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from aotipre.findings.codes_doc import DOC_PATH, render_reference  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--check", action="store_true", help="exit 1 if docs/codes.md differs; write nothing"
    )
    args = parser.parse_args(argv)
    path = ROOT / DOC_PATH
    text = render_reference()
    current = path.read_text(encoding="utf-8") if path.is_file() else None
    if args.check:
        if current != text:
            print(f"{DOC_PATH} is stale: run scripts/gen_codes_reference.py", file=sys.stderr)
            return 1
        print(f"{DOC_PATH} is current")
        return 0
    if current == text:
        print(f"{DOC_PATH} is current")
        return 0
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    print(f"wrote {DOC_PATH}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
