"""The load-crash retry: a load that dies by SIGSEGV is retried once with the C++ compiler's
libstdc++ (else the system one) preloaded; if that loads, the crash was the environment's
libstdc++ (AOT515, reported by the load stage), and the remaining stages run preloaded."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping

from aotipre.runner.stages.base import StepRecord, ok

SYSTEM_LIBSTDCXX = (
    "/usr/lib/x86_64-linux-gnu/libstdc++.so.6",
    "/usr/lib/aarch64-linux-gnu/libstdc++.so.6",
    "/usr/lib64/libstdc++.so.6",
    "/lib/x86_64-linux-gnu/libstdc++.so.6",
    "/lib64/libstdc++.so.6",
)
DIAGNOSED: dict[tuple[str, ...], tuple[str, StepRecord]] = {}
"""Per interpreter: the libstdc++ preload a load crash needed, and that crash (process-wide, so
the other models of one check start preloaded instead of crashing again)."""


def find_system_libstdcxx() -> str | None:
    """The libstdc++ to preload after a load crash: the one of the C++ compiler AOTI builds with
    (what the compiled .so was linked against), else the first system one that exists."""
    from aotipre.doctor.toolchain import compiler_libstdcxx

    lib = compiler_libstdcxx()
    if lib is not None:
        return lib
    for path in SYSTEM_LIBSTDCXX:
        if os.path.isfile(path):
            return path
    return None


class LibstdcxxRetry:
    """One model's part in the retry: starts preloaded when an earlier model needed it, asks
    for a retry after a load crash, and records a diagnosis that the preload confirmed."""

    def __init__(self, worker_key: tuple[str, ...], extra_env: dict[str, str]) -> None:
        self.worker_key = worker_key
        self.extra_env = extra_env
        """The session's own additions to the workers' environment (LD_PRELOAD goes there)."""
        self.libstdcxx: str | None = None
        """Set when a load crash went away with the libstdc++ preloaded."""
        self.crash: StepRecord | None = None
        """The first load crash, when a retry with the libstdc++ followed it."""
        self.earlier = False
        """The crash was diagnosed for an earlier model in this process: start preloaded."""
        known = DIAGNOSED.get(worker_key)
        if known is not None:
            self.extra_env["LD_PRELOAD"] = known[0]
            self.libstdcxx, self.crash = known
            self.earlier = True

    def should_retry(
        self,
        load: StepRecord | None,
        options_env: Mapping[str, str],
        say: Callable[[str], None],
    ) -> bool:
        """After a SIGSEGV while loading, try once more with the libstdc++ preloaded."""
        if load is None or load.status != "crash" or load.signal != "SIGSEGV":
            return False
        if self.crash is not None:
            return False
        lib = find_system_libstdcxx()
        preloaded = " ".join(
            v for v in (os.environ.get("LD_PRELOAD"), options_env.get("LD_PRELOAD")) if v
        )
        if lib is None or lib in preloaded:
            return False
        self.crash = load
        self.extra_env["LD_PRELOAD"] = f"{preloaded} {lib}".strip()
        say(f"loading crashed; retrying with LD_PRELOAD={lib}")
        return True

    def finish(self, load: StepRecord | None) -> None:
        """After the last worker: a load that worked preloaded confirms the diagnosis."""
        if self.crash is not None and ok(load):
            self.libstdcxx = self.extra_env.get("LD_PRELOAD")
            if self.libstdcxx:
                DIAGNOSED[self.worker_key] = (self.libstdcxx, self.crash)

    @property
    def confirmed(self) -> bool:
        return bool(self.libstdcxx) and self.crash is not None
