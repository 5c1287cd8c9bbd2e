"""Progress lines for people: each message once, then a reminder of what is still running and
for how long while nothing new happens (a load or compile can take minutes on a GPU host)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from types import TracebackType

HEARTBEAT_S = 10.0
"""Seconds of silence after which the running step is named again, with its elapsed time."""


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
