"""The ladder's scheduler: runs the applicable steps (aotipre/triage/ladder.py) in parallel
where they are independent, starts speculative ones early for the kernel the first error
names, and keeps or discards them once a synchronous step names the faulting kernel."""

from __future__ import annotations

import concurrent.futures as cf
import os
import time
from dataclasses import replace

from aotipre.findings import StageStatus
from aotipre.triage import parsers
from aotipre.triage.conclude import explanation, sample_inputs_of
from aotipre.triage.ladder import BY_ID, KERNELS_PLACEHOLDER, LADDER, Facts, LadderStep, skip_reason
from aotipre.triage.state import StepRun
from aotipre.triage.steps import TriageSteps


class Triage(TriageSteps):
    """One crash's triage: the state, the step runners, and the schedule that runs them."""

    def run_ladder(self) -> dict[str, float]:
        """Run the ladder to its end (self.runs holds every step); returns `kernel_named`, the
        seconds from the start until a step named the faulting kernel, when one did."""
        timings: dict[str, float] = {}
        if self.crash_named is not None:
            timings["kernel_named"] = time.monotonic() - self.started
            kernel, by, how, _ = self.crash_named
            self.say(f"faulting kernel {kernel} (named by {by}: {how})")
        parallel = self.opts.parallel or (3 if (os.cpu_count() or 1) >= 4 else 2)
        pending = [s.id for s in LADDER]
        futures: dict[cf.Future[StepRun], tuple[str, bool]] = {}
        speculated: dict[str, tuple[str, ...]] = {}
        spec_done: dict[str, StepRun] = {}
        discarded: dict[str, float] = {}

        def submit(
            pool: cf.ThreadPoolExecutor, step: LadderStep, kernels: list[str], spec: bool
        ) -> None:
            futures[pool.submit(self._run_step, step, kernels, spec)] = (step.id, spec)

        with cf.ThreadPoolExecutor(max_workers=max(1, parallel)) as pool:
            while True:
                for sid in list(pending):
                    step = BY_ID[sid]
                    spec_running = any(v == (sid, True) for v in futures.values())
                    if all(a in self.runs for a in step.after):
                        facts = self._facts()
                        why = skip_reason(step, facts)
                        if why is not None:
                            self.runs[sid] = StepRun(step, StageStatus.SKIPPED, why)
                            pending.remove(sid)
                            continue
                        spec = spec_done.pop(sid, None)
                        if spec is not None:
                            if (
                                facts.kernel in spec.kernels
                                and spec.status is not StageStatus.ERROR
                            ):
                                self.runs[sid] = spec  # the speculation was right
                                pending.remove(sid)
                                self._stats_known(sid, spec, timings)
                                continue
                            discarded[sid] = discarded.get(sid, 0.0) + spec.duration_s
                            self.notes.append(
                                f"{sid}: the run started early for {', '.join(spec.kernels)} "
                                f"was discarded: the faulting kernel is {facts.kernel}"
                            )
                        elif spec_running and facts.kernel in speculated.get(sid, ()):
                            continue  # the early run is for the right kernel: wait for it
                        elif spec_running:
                            self.notes.append(
                                f"{sid}: the run started early for "
                                f"{', '.join(speculated.get(sid, ()))} was discarded: the faulting "
                                f"kernel is {facts.kernel}"
                            )
                        pending.remove(sid)
                        submit(pool, step, self._filter_for(step), False)
                    elif (
                        step.speculative
                        and not spec_running
                        and sid not in speculated
                        and (guesses := self.guesses())
                        and skip_reason(step, self._facts(kernel=guesses[0])) is None
                        and not self._facts(kernel=guesses[0]).sample_inputs
                    ):
                        kernels = self._filter_for(step, guesses[0])
                        kernels += [k for k in guesses[1:] if k not in kernels]
                        speculated[sid] = tuple(kernels)
                        submit(pool, step, kernels, True)
                if not futures:
                    for sid in pending:  # nothing runnable, nothing running
                        self.runs[sid] = StepRun(BY_ID[sid], StageStatus.SKIPPED, "not reached")
                    break
                done, _ = cf.wait(list(futures), return_when=cf.FIRST_COMPLETED)
                for fut in done:
                    sid, early = futures.pop(fut)
                    try:
                        run = fut.result()
                    except Exception as exc:  # a bug in a step runner must not lose the report
                        run = StepRun(
                            BY_ID[sid], StageStatus.ERROR, f"internal error: {exc!r}"[:400]
                        )
                    run.speculative = early
                    run.finished_at = time.monotonic() - self.started
                    if early:
                        if sid in pending:
                            spec_done[sid] = run
                        else:
                            discarded[sid] = discarded.get(sid, 0.0) + run.duration_s
                        continue
                    run.duration_s += discarded.pop(sid, 0.0)
                    self.runs[sid] = run
                    if run.named and "kernel_named" not in timings:
                        timings["kernel_named"] = run.finished_at
                        self.say(f"faulting kernel {run.named} (named by {sid})")
                    self._stats_known(sid, run, timings)
        for sid, spent in discarded.items():
            if sid in self.runs:
                self.runs[sid].duration_s += spent
        return timings

    def _stats_known(self, sid: str, run: StepRun, timings: dict[str, float]) -> None:
        """Say when the faulting kernel's input statistics are in (`stats`: seconds from the
        start of triage; the benchmark's crash -> kernel + input statistics)."""
        if sid in ("printer-2", "kernel-inputs") and run.stats and "stats" not in timings:
            timings["stats"] = time.monotonic() - self.started
            self.say(f"input statistics of {', '.join(run.kernels)} ({sid})")

    def _facts(self, kernel: str | None = None) -> Facts:
        named = kernel or self.kernel()
        return replace(
            self.facts,
            kernel=named,
            explained=self.explained(),
            sample_inputs=bool(named and sample_inputs_of(self, named)),
        )

    def explained(self) -> bool:
        return explanation(self) is not None

    def _filter_for(self, step: LadderStep, kernel: str | None = None) -> list[str]:
        if KERNELS_PLACEHOLDER not in step.inductor_configs.values():
            return []
        named = kernel or self.kernel()
        out = [named] if named else []
        p3 = self.runs.get("printer-3")
        previous = p3.fault.previous if p3 is not None and p3.fault is not None else None
        if previous is None and named is not None:
            previous = self._static_previous(named)
        if previous and previous not in out:
            out.append(previous)
        return out

    def _static_previous(self, kernel: str) -> str | None:
        """The kernel called before `kernel` in the packaged wrapper.cpp (when it has one)."""
        text = self.original_code().get("wrapper", "")
        calls = parsers.kernel_call_order(text)
        if kernel in calls:
            at = calls.index(kernel)
            return calls[at - 1] if at > 0 else None
        return None
