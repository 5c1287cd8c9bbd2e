"""Progress lines for people: each message once, then a reminder of what is still running and
for how long while nothing new happens (a load or compile can take minutes on a GPU host); the
command's elapsed time before each line, and the wording of the stage lines (docs/ci.md)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from types import TracebackType

HEARTBEAT_S = 10.0
"""Seconds of silence after which the running step is named again, with its elapsed time."""


def stamped(
    emit: Callable[[str], None],
    *,
    started: float | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> Callable[[str], None]:
    """`emit` with the seconds since `started` (default: now; `clock`'s time) before each line:
    `[  14.2s] model: load started`, so that a CI log says when each thing happened."""
    start = clock() if started is None else started

    def say(message: str) -> None:
        emit(f"[{clock() - start:6.1f}s] {message}")

    return say


def stage_started(stage: str) -> str:
    """The line when a stage starts: `load started`."""
    return f"{stage} started"


def stage_ended(stage: str, outcome: str, seconds: float | None = None) -> str:
    """The line when a stage ends: `load passed (12.7 s)`, `run crashed (0.3 s)`; without
    `seconds` for a stage that did no work (`compare skipped`)."""
    return f"{stage} {outcome}" + ("" if seconds is None else f" ({seconds:.1f} s)")


class Heartbeat:
    """Wraps a progress callback: messages pass through at once; while no new message comes for
    `interval_s`, the last one is repeated as `<message> (still running, 40 s)`, the seconds
    counted from when it was first shown. Use as a context manager (the thread stops on exit).
    """

    def __init__(
        self,
        emit: Callable[[str], None],
        interval_s: float = HEARTBEAT_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.emit = emit
        self.interval_s = interval_s
        self.clock = clock
        self._lock = threading.Lock()
        self._last: tuple[str, float] | None = None
        self._shown_at = 0.0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __call__(self, message: str) -> None:
        now = self.clock()
        with self._lock:
            self._last = (message, now)
            self._shown_at = now
            self.emit(message)

    def beat(self) -> None:
        """Repeat the last message when it has been silent for `interval_s` (the thread's tick)."""
        now = self.clock()
        with self._lock:
            if self._last is None or now - self._shown_at < self.interval_s:
                return
            message, since = self._last
            self._shown_at = now
            self.emit(f"{message} (still running, {now - since:.0f} s)")

    def _run(self) -> None:
        tick = min(1.0, self.interval_s / 4)
        while not self._stop.wait(tick):
            self.beat()

    def __enter__(self) -> Heartbeat:
        self._thread = threading.Thread(target=self._run, name="aotipre-progress", daemon=True)
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
