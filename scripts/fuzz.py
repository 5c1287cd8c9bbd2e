"""Fuzz aotipre's archive reader, static check and wrapper.cpp parser for a while (hypothesis).

The same targets as tests/hardening/test_fuzz.py, run in batches with fresh random seeds until
the time is up; every batch that finds a failure is recorded (shrunk example, error) and the run
goes on. Prints, and with --report writes as JSON, the example counts, outcome kinds, the slowest
example and the failures.

    python scripts/fuzz.py --minutes 5                  # every target, an equal share each
    python scripts/fuzz.py --target wrapper --minutes 2 --report fuzz.json
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import time
import traceback
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from hypothesis import HealthCheck, given, seed, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from tests.hardening.fuzzing import (  # noqa: E402
    ARCHIVES,
    INPUT_FILES,
    Stats,
    fuzz_archive_example,
    fuzz_inputs_example,
    fuzz_wrapper_example,
    wrapper_texts,
)

BATCH = 100


def fixture_dir() -> Path:
    out = os.environ.get("AOTIPRE_FIXTURE_DIR")  # as in the test suite: built ones are reused
    proc = subprocess.run(
        [
            sys.executable,
            str(REPO / "scripts" / "build_fixtures.py"),
            *(["--out", out] if out else []),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    )
    return Path(proc.stdout.strip().splitlines()[-1])


def run_target(name: str, seconds: float, rng: random.Random) -> dict[str, object]:
    stats = Stats()
    failures: list[dict[str, object]] = []
    if name == "archive":
        sources = [fixture_dir() / f"{n}.pt2" for n in ARCHIVES]

        def body(data: st.DataObject) -> None:
            fuzz_archive_example(data, sources, stats)

    elif name == "inputs":
        blobs = [(fixture_dir() / f"{n}.pt").read_bytes() for n in INPUT_FILES]

        def body(data: st.DataObject) -> None:
            fuzz_inputs_example(data, blobs, stats)

    else:
        texts = wrapper_texts()

        def body(data: st.DataObject) -> None:
            fuzz_wrapper_example(data, texts, stats)

    started = time.monotonic()
    batches = 0
    while time.monotonic() - started < seconds:
        batch_seed = rng.getrandbits(64)
        prop = seed(batch_seed)(
            settings(
                max_examples=BATCH,
                deadline=None,
                database=None,
                suppress_health_check=list(HealthCheck),
            )(given(st.data())(body))
        )
        batches += 1
        try:
            prop()
        except Exception as exc:  # a falsified property: record it and go on
            failures.append(
                {
                    "seed": batch_seed,
                    "error": f"{type(exc).__name__}: {exc}"[:2000],
                    "traceback": traceback.format_exc()[-4000:],
                }
            )
            print(f"[{name}] FAILURE (seed {batch_seed}): {type(exc).__name__}: {exc}"[:500])
    examples = sum(stats.outcomes.values())
    return {
        "target": name,
        "seconds": round(time.monotonic() - started, 1),
        "batches": batches,
        "examples": examples,
        "outcomes": dict(sorted(stats.outcomes.items())),
        "slowest_s": round(stats.slowest_s, 3),
        "slowest": stats.slowest[:200],
        "failures": failures,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=5.0, help="total time (default 5)")
    parser.add_argument("--target", choices=["archive", "inputs", "wrapper", "all"], default="all")
    parser.add_argument("--seed", type=int, default=None, help="seed of the batch seeds")
    parser.add_argument("--report", type=Path, default=None, help="write the summary as JSON")
    args = parser.parse_args(argv)
    targets = ["archive", "inputs", "wrapper"] if args.target == "all" else [args.target]
    run_seed = args.seed if args.seed is not None else random.SystemRandom().getrandbits(32)
    rng = random.Random(run_seed)
    results = [run_target(t, args.minutes * 60 / len(targets), rng) for t in targets]
    summary = {"seed": run_seed, "python": sys.version.split()[0], "results": results}
    for r in results:
        print(
            f"{r['target']}: {r['examples']} examples in {r['seconds']} s, "
            f"{len(r['failures'])} failure(s); outcomes {r['outcomes']}; "  # type: ignore[arg-type]
            f"slowest {r['slowest_s']} s"
        )
    if args.report is not None:
        args.report.write_text(json.dumps(summary, indent=1) + "\n")
    return 1 if any(r["failures"] for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
