"""The torch releases aotipre supports, as data (the static checks, the interpreter probe and the
archive reader quote the same range)."""

from __future__ import annotations

import re

SUPPORTED_TORCH: tuple[tuple[int, int], tuple[int, int]] = ((2, 11), (2, 15))
"""Oldest and newest torch (major, minor) whose packages aotipre reads and whose workers it runs."""
SUPPORTED_TEXT = f"{SUPPORTED_TORCH[0][0]}.{SUPPORTED_TORCH[0][1]}-{SUPPORTED_TORCH[1][0]}.{SUPPORTED_TORCH[1][1]}"


def major_minor(version: str) -> tuple[int, int] | None:
    """`2.14.1+cu130` -> (2, 14); None when the text is not a version."""
    match = re.match(r"\s*(\d+)\.(\d+)", version)
    return (int(match.group(1)), int(match.group(2))) if match else None


def is_supported(version: str) -> bool:
    found = major_minor(version)
    return found is not None and SUPPORTED_TORCH[0] <= found <= SUPPORTED_TORCH[1]
