"""tabulate for aotipre's tables, imported without loading importlib.metadata.

tabulate's `__init__` imports `importlib.metadata` (with it `email`, `csv` and the distribution
scan: ~10-25 ms on a 2-core VM) only to read its own version into `tabulate.__version__`, which
aotipre never reads; the static lane (`inspect`, `check --static-only`) pays that on every run
for its table. While tabulate is imported here, `importlib.metadata` is a stand-in whose
`version()` finds no distribution (tabulate's own fallback: `__version__` is "unknown"); the
stand-in is removed from `sys.modules` right after, so a later `import importlib.metadata`
loads the real module. With other threads running, `importlib.metadata` already loaded, or a
module other than tabulate (its optional `wcwidth`) holding the stand-in after the import,
tabulate is imported plainly.
"""

from __future__ import annotations

import sys
import threading
import types
from collections.abc import Callable

_METADATA = "importlib.metadata"


class _NoDistribution(ModuleNotFoundError):
    """The stand-in's `PackageNotFoundError` (a ModuleNotFoundError, as the real one is)."""


def _no_version(name: str) -> str:
    """The stand-in's `version()`: no distribution is looked up."""
    raise _NoDistribution(name)


def _import_tabulate() -> Callable[..., str]:
    """tabulate.tabulate, imported with the stand-in `importlib.metadata` when that is safe."""
    quick = not (
        "tabulate" in sys.modules
        or _METADATA in sys.modules
        or threading.active_count() > 1  # another thread could import the stand-in
    )
    if quick:
        stand_in = types.ModuleType(_METADATA, "stand-in while tabulate is imported (tabular.py)")
        stand_in.version = _no_version  # type: ignore[attr-defined]
        stand_in.PackageNotFoundError = _NoDistribution  # type: ignore[attr-defined]
        before = set(sys.modules)
        sys.modules[_METADATA] = stand_in
        try:
            from tabulate import tabulate as quick_tabulate
        except (ImportError, AttributeError):  # a tabulate that wants more of importlib.metadata
            quick_tabulate = None
        finally:
            if sys.modules.get(_METADATA) is stand_in:
                del sys.modules[_METADATA]
        loaded = [sys.modules[name] for name in set(sys.modules) - before]
        if quick_tabulate is not None and not any(
            _holds_stand_in(module, stand_in) for module in loaded if module.__name__ != "tabulate"
        ):
            return quick_tabulate
        for module in loaded:  # another module (wcwidth?) kept the stand-in: import them again
            sys.modules.pop(module.__name__, None)
    from tabulate import tabulate as plain_tabulate

    return plain_tabulate


def _holds_stand_in(module: types.ModuleType, stand_in: types.ModuleType) -> bool:
    """Whether `module` bound the stand-in or one of its names at import."""
    return any(
        value is stand_in or value is _no_version or value is _NoDistribution
        for value in vars(module).values()
    )


tabulate: Callable[..., str] = _import_tabulate()
"""tabulate.tabulate (same function, same output)."""

__all__ = ["tabulate"]
