"""The bounds of every number aotipre takes (a flag, a configuration key, a library option):
finite, inside its range. Without torch or aotipre imports, so that config.py (flags and files)
and runner/stages/options.py (DynamicOptions from a library caller) check the same way.

A NaN timeout passed every `<` test and ended in exit 3, a NaN tolerance failed every
comparison, a 23-digit seed overflowed torch's generator: each is one line and exit 2 now.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

Parser = Callable[[Any, Path], Any]
"""(raw value, folder that relative paths are relative to) -> value; ValueError says why not."""

MAX_SECONDS = 7 * 24 * 3600.0
"""Longest timeout accepted (a week); more is a typo, and overflows the event loop's waits."""


def number(minimum: float, *, inclusive: bool, maximum: float | None = None) -> Parser:
    def parse(value: Any, base: Path) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError("expected a number")
        try:
            result = float(value)
        except OverflowError:
            raise ValueError("is too large") from None
        if not math.isfinite(result):
            raise ValueError("must be a finite number")
        if result < minimum or (not inclusive and result == minimum):
            raise ValueError(f"must be {'>=' if inclusive else '>'} {minimum:g}")
        if maximum is not None and result > maximum:
            raise ValueError(f"must be <= {maximum:g}")
        return result

    return parse


def integer(minimum: int, maximum: int) -> Parser:
    def parse(value: Any, base: Path) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError("expected an integer")
        if value < minimum:
            raise ValueError(f"must be >= {minimum}")
        if value > maximum:
            raise ValueError(f"must be <= {maximum}")
        return value

    return parse


RUN_NUMBERS: dict[str, tuple[str, Parser]] = {
    "timeout": ("timeout_s", number(0, inclusive=False, maximum=MAX_SECONDS)),
    "compile-timeout": ("compile_timeout_s", number(0, inclusive=False, maximum=MAX_SECONDS)),
    "rtol": ("rtol", number(0, inclusive=True)),
    "atol": ("atol", number(0, inclusive=True)),
    "probe-budget": ("probe_budget", integer(1, 1 << 40)),
    "seed": ("seed", integer(0, 2**63 - 1)),
    "state-calls": ("state_calls", integer(0, 100)),
}
"""The dynamic stages' numbers: configuration key -> (DynamicOptions field, parser)."""
TRIAGE_NUMBERS: dict[str, tuple[str, Parser]] = {
    "accuracy-budget": ("accuracy_budget_s", number(0, inclusive=False, maximum=MAX_SECONDS)),
}
"""Triage's numbers: configuration key -> (TriageOptions field, parser)."""
