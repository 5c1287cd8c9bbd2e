"""The progress lines `check` and `doctor` write to stderr (docs/ci.md#progress-in-ci-logs), for
tests that look at stderr: tell them apart from everything else aotipre says there."""

from __future__ import annotations

import re

PROGRESS = re.compile(r"^aotipre: \[ *(\d+\.\d)s\] (.*)$")
"""One progress line: the command's elapsed seconds and the message."""


def progress_lines(stderr: str) -> list[tuple[float, str]]:
    """The progress lines of `stderr`: (elapsed seconds, message)."""
    return [
        (float(m.group(1)), m.group(2))
        for line in stderr.splitlines()
        if (m := PROGRESS.match(line))
    ]


def without_progress(stderr: str) -> str:
    """`stderr` without its progress lines (what a test of an error message looks at)."""
    return "".join(line for line in stderr.splitlines(keepends=True) if not PROGRESS.match(line))
