"""Accuracy triage's speculative rebuild: the program's likeliest knob, rebuilt beside the
localizing compile instead of after it.

Localizing needs one diagnostic compile (the Python wrapper's on CPU, else the printer build) and
proving a cause needs at least one
more (a rebuild with the knob that closes the difference); run one after the other, the second
waits for the first. Which knob the divergent kernel will call for is not known until the first
is done, but the ladder's order depends only on graph facts (bf16/fp16 values, RNG ops,
reductions), and the program's facts are a good guess at the kernel's: the rebuild with the first
knob whose fact holds on the whole program starts at once, in a worker of its own that decides
the knob from the ExportedProgram it loads (worker `configs_by_facts`).

When the kernel is localized, the guess is checked against the kernel's own ladder: it is used
only when its knob is the first the kernel's facts call for (then its verdict is that rung's
verdict, on the whole program), and stopped otherwise. Its worker never outlives the triage
(`stop`). Only knobs made of inductor configs that every supported torch has are guessed: TF32
needs process settings on both sides, and a knob missing from the worker's torch would be
"not testable" rather than an answer."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from aotipre.runner.proc import ChildThread


class Speculation:
    """One speculative whole-program rebuild, run in a thread of its own (its worker dies with
    that thread, proc.run_process's PR_SET_PDEATHSIG, and is stopped by `stop`)."""

    def __init__(self, candidates: tuple[Any, ...], trial: Callable[..., Any]) -> None:
        self.candidates = candidates
        """The knobs it may rebuild with, in ladder order (the worker takes the first whose
        fact holds on the program)."""
        self.trial: Any = None
        """Its KnobTrial once done (None: still running, or stopped before it started)."""
        self._child = ChildThread(
            lambda on_start: self._run(trial, on_start), "aotipre-accuracy-speculation"
        )

    def _run(self, trial: Callable[..., Any], on_start: Callable[[int], None]) -> None:
        self.trial = trial(among=self.candidates, on_start=on_start)

    def predicted(self, program_facts: Mapping[str, bool]) -> Any:
        """The knob the worker rebuilds with, given the program's facts (the localizing trace's
        `graph_facts`, over the same graph), or None when no candidate's fact holds."""
        return next((k for k in self.candidates if program_facts.get(k.fact)), None)

    def result(self) -> Any:
        """Wait for the rebuild and return its KnobTrial."""
        self._child.join()
        return self.trial

    def stop(self) -> None:
        """End its worker now (the guess is not needed) and wait for the thread."""
        self._child.stop()
