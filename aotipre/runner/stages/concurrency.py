"""The concurrency stage (with --cpp): what a multi-threaded C++ server does. Several
AOTIModelPackageLoaders constructed at the same moment from several threads, and one loader with
num_runners > 1 run from several threads at once; every output must equal a single run's, with
no crash and no hang within the time limit. A model that mutates buffers (a counter, running
statistics) returns other outputs at every call: its concurrent runs must return the outputs of
the same number of calls made one after another on a fresh loader, in any order (the runners of
one loader share its buffers), and a run whose calls raced on them is a warning (AOT527). torch issue #194128 (open): the loader parses the
package's JSON into one shared static object, so concurrent construction can corrupt the heap;
the worker reads from libtorch_cpu's symbol table whether the installed torch has it (AOT528)."""

from __future__ import annotations

from aotipre.cpp import harness as cpp
from aotipre.findings import Severity, StageResult, StageStatus
from aotipre.runner.stages.base import PlannedStep, ok
from aotipre.runner.stages.cpp_load import build_failed, harness_common, not_asked
from aotipre.runner.stages.session import Session, Stage
from aotipre.runner.stages.state import mutated_buffers

LOADERS = 4
"""Loaders constructed at once."""
RUNNERS, THREADS, ITERATIONS = 2, 4, 3
"""num_runners of the shared loader, threads running it, runs per thread."""


class ConcurrencyStage(Stage):
    name = "concurrency"
    labels = {
        "cpp_loaders": f"constructing {LOADERS} C++ loaders at once",
        cpp.serial_id("cpp_loaders"): f"constructing {LOADERS} C++ loaders one at a time",
        "cpp_runners": f"running one C++ loader (num_runners={RUNNERS}) from {THREADS} threads",
    }

    def plan(self, s: Session) -> list[PlannedStep]:
        if not s.opts.cpp:
            return []
        common = harness_common(s)
        loaders = cpp.run_step("cpp_loaders", mode="loaders", threads=LOADERS, **common)  # type: ignore[arg-type]
        runners = cpp.run_step(
            "cpp_runners",
            mode="runners",
            threads=THREADS,
            runners=RUNNERS,
            iterations=ITERATIONS,
            stateful=bool(mutated_buffers(s)),
            **common,  # type: ignore[arg-type]
        )
        # a single C++ run that fails or hangs (cpp-load) makes these pointless: the stage is
        # skipped then, and a hang would cost each of them the whole step time limit too
        loaders["only_if_passed"] = runners["only_if_passed"] = "cpp_run"
        return [
            PlannedStep("cpp_loaders", "cpp_run", loaders),
            PlannedStep(cpp.serial_id("cpp_loaders"), "cpp_run", cpp.serial_retry(loaders)),
            PlannedStep("cpp_runners", "cpp_run", runners),
        ]

    def result(self, s: Session) -> StageResult:
        if not s.opts.cpp:
            return not_asked(s, self.name)
        failed = build_failed(s, self.name)
        if failed is not None:
            return failed
        single = s.records.get("cpp_run")
        first = (
            cpp.HarnessRun.from_entry(single.entry) if single is not None and ok(single) else None
        )
        if first is not None and not first.ok:
            return s.skipped(
                self.name, "the C++ loader could not load and run the model once (cpp-load)"
            )
        build = s.records["cpp_build"]
        race = build.entry.get("loader_race")
        if race:
            s.add(
                "AOT528",
                "this torch's libtorch_cpu holds the static JSON object of load_json_file (torch "
                "issue #194128, open): constructing several loaders at once in a C++ server can "
                "crash or read another package's metadata, even when this run did not",
                self.name,
            )
        parts, recs, bad = [], [], False
        for sid in ("cpp_loaders", "cpp_runners"):
            r = s.records.get(sid)
            if r is None:
                parts.append(f"{sid}: {s.upstream_reason()}")
                continue
            recs.append(r)
            run = cpp.HarnessRun.from_entry(r.entry, sid.split("_")[1]) if ok(r) else None
            if run is None:
                parts.append(f"{sid}: {r.detail or r.status}")
                bad = True
                continue
            retry = s.records.get(cpp.serial_id(sid))
            found = cpp.harness_findings(
                run,
                model=s.model.name,
                stage=self.name,
                timeout_s=s.opts.timeout_s,
                known_race=race,
                serial=cpp.HarnessRun.from_entry(retry.entry) if retry and ok(retry) else None,
            )
            s.findings.extend(found)
            errors = [f for f in found if f.severity is Severity.ERROR]
            bad = bad or bool(errors)
            if errors:
                outcome = "failed"
            elif found and run.stateful:
                outcome = "calls raced on the shared buffers (AOT527, a warning)"
            elif found:
                outcome = "hit torch #194128 (AOT526, a warning; passed constructed one at a time)"
            elif run.stateful:
                outcome = "the outputs of the sequential calls, each once"
            else:
                outcome = "identical outputs"
            parts.append(f"{cpp.describe_mode(run)}: {outcome}")
        status = StageStatus.FAILED if bad else StageStatus.PASSED
        return s.stage(self.name, status, "; ".join(parts), recs)
