"""The progress heartbeat: what is running, and for how long, while nothing new happens."""

from __future__ import annotations

from aotipre.foundation.progress import Heartbeat


class FakeClock:
    """A clock the test moves by hand (a fake: no real time passes)."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_messages_pass_through_and_silence_repeats_the_last_with_its_age() -> None:
    lines: list[str] = []
    clock = FakeClock()
    beat = Heartbeat(lines.append, interval_s=10.0, clock=clock)
    beat.beat()  # nothing shown yet: nothing to repeat
    beat("model: loading")
    clock.now += 9.0
    beat.beat()
    assert lines == ["model: loading"]
    clock.now += 1.0
    beat.beat()
    clock.now += 5.0
    beat.beat()  # 5 s after the reminder: not yet
    clock.now += 5.0
    beat.beat()
    assert lines == [
        "model: loading",
        "model: loading (still running, 10 s)",
        "model: loading (still running, 20 s)",
    ]
    beat("model: running")
    clock.now += 10.0
    beat.beat()
    assert lines[-2:] == ["model: running", "model: running (still running, 10 s)"]


def test_the_thread_stops_with_the_block() -> None:
    lines: list[str] = []
    with Heartbeat(lines.append, interval_s=3600.0) as beat:
        beat("x")
        thread = beat._thread
        assert thread is not None and thread.is_alive()
    assert not thread.is_alive()
    assert lines == ["x"]
