"""The two exception roots: a user error (clean one-line message, exit 2) and everything else (a bug)."""

from __future__ import annotations


class AotipreError(Exception):
    """A problem with what the user gave us: a bad package, bad inputs, a bad option.

    The CLI prints `aotipre: error: <message>` on one line and exits 2, without a traceback.
    """

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message if not self.hint else f"{self.message} ({self.hint})"


class PackageError(AotipreError):
    """The .pt2 package cannot be read (missing, not a zip, truncated, unsafe, wrong structure)."""


class InputsError(AotipreError):
    """The sample-inputs file cannot be read safely."""


class UsageError(AotipreError):
    """A bad command-line option or combination."""


class UnsafeInputsError(InputsError):
    """The sample-inputs file references globals that a weights-only load refuses."""
