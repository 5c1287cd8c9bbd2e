"""Run the torch worker by path: `python aotipre/runner/worker/__main__.py JOB.json` (what
launch.worker_argv starts, in any interpreter that has torch; aotipre need not be installed).

The package is loaded from this folder under a private name, with the folder taken off sys.path:
the user's custom-op modules (`--import NAME`, imported by name in this process) and the worker's
own (`compare`, `inputs`...) cannot shadow each other, and nothing imports the aotipre package.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from types import ModuleType

PACKAGE = "_aotipre_worker"


def load_worker() -> ModuleType:
    """The worker package (this folder), imported as `_aotipre_worker`."""
    here = os.path.dirname(os.path.realpath(__file__))
    # Python put the script's folder first on sys.path: its module names are not the user's
    sys.path[:] = [p for p in sys.path if os.path.realpath(p or os.curdir) != here]
    loaded = sys.modules.get(PACKAGE)
    if loaded is not None:
        return loaded
    spec = importlib.util.spec_from_file_location(
        PACKAGE, os.path.join(here, "__init__.py"), submodule_search_locations=[here]
    )
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load the worker package from {here}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[PACKAGE] = module
    spec.loader.exec_module(module)
    return module


def own_bytecode() -> None:
    """Write the bytecode of the worker's own modules (this folder, aotipre's files) where it is
    missing or stale, unless the user turned bytecode off (PYTHONDONTWRITEBYTECODE, -B): the
    command never imports them itself, so without this every worker of a fresh editable install
    compiled them again."""
    if sys.dont_write_bytecode:
        return
    here = os.path.dirname(os.path.realpath(__file__))
    try:
        names = [n for n in os.listdir(here) if n.endswith(".py")]
        if all(_compiled(os.path.join(here, n)) for n in names):
            return  # the usual case: a stat per module, no import
        import compileall

        compileall.compile_dir(here, maxlevels=0, quiet=2)
    except Exception:  # a read-only install: the modules are compiled in memory as before
        pass


def _compiled(source: str) -> bool:
    """`source` has bytecode no older than itself (what the import system would read)."""
    try:
        cached = importlib.util.cache_from_source(source)
        return os.stat(cached).st_mtime >= os.stat(source).st_mtime
    except (OSError, NotImplementedError, ValueError):
        return False


if __name__ == "__main__":
    own_bytecode()
    # No bytecode written beside the modules the worker imports: an --import module and its own
    # imports are the user's files (a __pycache__ in their folder). Existing bytecode is still
    # read; a PYTHONPYCACHEPREFIX would not be, and `import torch` took 24 s instead of 7 s.
    sys.dont_write_bytecode = True
    sys.exit(load_worker().main(sys.argv))
