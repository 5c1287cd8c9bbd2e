"""aotipre: a deployment preflight checker for PyTorch AOTInductor (.pt2) packages."""

from __future__ import annotations

__version__ = "0.1.0"
