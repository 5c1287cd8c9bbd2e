"""Run two versions of aotipre over the fixture packages and print how their reports differ.

    python scripts/compare_reports.py [OLD [NEW]] [--static-only] [--cases REGEX] [--list]

OLD and NEW are git revisions (exported with `git archive` into a temporary folder) or
directories holding an aotipre tree (a worktree, uncommitted changes included); the defaults
are `main` and this checkout. Every case runs the version's own `python -m aotipre` (its tree
first on PYTHONPATH, so its own worker) from the same scratch folder, with its own compile
cache, XDG cache and TMPDIR (a fresh one per version, so a cache hit in one is a hit in the
other). For each case the exit code, stdout, stderr and every `--report` file are compared
after masking what legitimately varies: durations, the tree, scratch and temporary paths.
Prints one unified diff per differing output and exits 1 when anything differs, 0 when the
reports are identical. A refactor must print no diff.

Cases (names are `group/...`; `--cases` selects by regular expression, `--list` prints them):
- `inspect/*`: `inspect` (table, json) of every fixture package and the torch 2.11 test data;
- `codes/*`: `codes` (table, json);
- `static/*`: `check --static-only`, with and without inputs, `--target`, `--fail-on`,
  `--select`/`--ignore`, `--model`, several packages, missing files (json + table, junit,
  sarif and markdown reports; and the plain table on stdout);
- `dynamic/*` (skipped with `--static-only`): real compiles and runs in torch workers: load,
  run, compare and probe of the CPU fixtures, a compile, an embedding index out of bounds with
  its crash triage, a weights-on-disk crash, an accuracy mismatch;
- `fake/*` (skipped with `--static-only`): the CLI with tests/fakes/fake_torch_worker.py (this
  checkout's, for both versions) in place of the worker (each version's own
  tests/fakes/cli_with_fake_worker.py): crashes, aborts, hangs, load
  crashes and the libstdc++ retry, probe failures, compile errors, NaN outputs.

Fixtures come from $AOTIPRE_FIXTURE_DIR (else .fixture-cache/torch-<version>/ of this
checkout; build them with scripts/build_fixtures.py). `--keep DIR` keeps the masked outputs.
Dynamic cases compile and run real models: ~4 minutes per version on a 2-CPU machine.
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import difflib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CASE_TIMEOUT_S = 900


@dataclass(frozen=True)
class Case:
    """One aotipre invocation; `{F}` in args is the fixture folder, `{T}` the version's tree."""

    name: str
    args: tuple[str, ...]
    reports: tuple[str, ...] = ()
    """Extra `--report FORMAT:PATH` outputs, compared too."""
    env: dict[str, str] = field(default_factory=dict)
    fake: bool = False
    """Run tests/fakes/cli_with_fake_worker.py with the fake torch worker instead of the CLI."""
    dynamic: bool = False


# --------------------------------------------------------------------------------------------
# The cases

STATIC_INPUTS: dict[str, tuple[str, ...]] = {
    "aoti": (
        "aoti_inputs",
        "aoti_inputs_bad_dtype",
        "aoti_inputs_mismatched_seq",
        "aoti_inputs_missing_arg",
        "aoti_inputs_out_of_range",
        "aoti_inputs_transposed",
        "inputs_garbage",
        "inputs_numpy",
    ),
    "both": ("aoti_inputs", "aoti_inputs_bad_dtype", "aoti_inputs_out_of_range"),
    "mismatch": ("aoti_inputs",),
    "derived": ("derived_inputs", "derived_inputs_bad"),
    "dtypes": ("dtypes_inputs", "dtypes_inputs_float32"),
    "embedding_oob": ("embedding_oob_inputs", "embedding_oob_inputs_good"),
    "kwargs": ("kwargs_inputs", "aoti_inputs"),
    "strides": ("strides_inputs", "strides_inputs_transposed"),
    "ep_only": ("aoti_inputs",),
}
ALL_REPORTS = ("table", "junit", "sarif", "markdown")
MULTI_DECODER = ("{F}/multi.pt2", "--model", "decoder", "--inputs", "{F}/multi_decoder_inputs.pt")
"""multi.pt2's second model with its own inputs (a static and a dynamic case)."""


def _check_cases(name: str, args: tuple[str, ...], *, dynamic: bool = False) -> list[Case]:
    """JSON on stdout with table/junit/sarif/markdown reports; plus the plain table when static."""
    base = ("check", *args, "--no-config")
    out = [Case(f"{name}/json", (*base, "--format", "json"), ALL_REPORTS, dynamic=dynamic)]
    if not dynamic:
        out.append(Case(f"{name}/table", (*base, "--format", "table")))
    return out


def build_cases(fixtures: Path) -> list[Case]:
    packages = sorted(p.stem for p in fixtures.glob("*.pt2"))
    data = sorted((REPO / "tests" / "data").rglob("*.pt2"))
    cases: list[Case] = [
        Case("codes/table", ("codes",)),
        Case("codes/json", ("codes", "--format", "json")),
    ]
    extra = [str(p) for p in data]
    for label, path in [(p, f"{{F}}/{p}.pt2") for p in packages] + [
        (str(Path(p).relative_to(REPO / "tests")).replace("/", "_"), p) for p in extra
    ]:
        cases.append(Case(f"inspect/{label}/table", ("inspect", path)))
        cases.append(Case(f"inspect/{label}/json", ("inspect", path, "--format", "json")))
        cases.extend(_check_cases(f"static/{label}/no-inputs", (path, "--static-only")))
    cases.append(Case("inspect/missing", ("inspect", "{F}/no_such.pt2")))
    for pkg, inputs in STATIC_INPUTS.items():
        for inp in inputs:
            cases.extend(
                _check_cases(
                    f"static/{pkg}/{inp}",
                    (f"{{F}}/{pkg}.pt2", "--inputs", f"{{F}}/{inp}.pt", "--static-only"),
                )
            )
    static_more = {
        "multi/encoder": ("{F}/multi.pt2", "--model", "encoder", "--inputs", "{F}/aoti_inputs.pt"),
        "multi/decoder": MULTI_DECODER,
        "multi/inputs-without-model": ("{F}/multi.pt2", "--inputs", "{F}/aoti_inputs.pt"),
        "multi/no-such-model": ("{F}/multi.pt2", "--model", "nosuch"),
        "both/target-cuda": ("{F}/both.pt2", "--target", "cuda,cc=9.0"),
        "both/target-isa": ("{F}/both.pt2", "--target", "cpu,isa=avx2"),
        "both/target-bad": ("{F}/both.pt2", "--target", "tpu"),
        "both/fail-on-warning": ("{F}/both.pt2", "--fail-on", "warning"),
        "both/select-ignore": ("{F}/both.pt2", "--select", "AOT0,AOT2", "--ignore", "AOT013"),
        "aoti/missing-inputs": ("{F}/aoti.pt2", "--inputs", "{F}/no_such.pt"),
        "missing-package": ("{F}/no_such.pt2",),
        "many": ("{F}/aoti.pt2", "{F}/both.pt2", "{F}/broken_crc.pt2", "-j", "2"),
    }
    for label, args in static_more.items():
        cases.extend(_check_cases(f"static/{label}", (*args, "--static-only")))
    cases.extend(dynamic_cases())
    cases.extend(fake_cases())
    return cases


def dynamic_cases() -> list[Case]:
    runs = {
        "both/aoti_inputs": ("{F}/both.pt2", "--inputs", "{F}/aoti_inputs.pt"),
        "aoti/stored-inputs": ("{F}/aoti.pt2",),
        "mismatch/aoti_inputs": ("{F}/mismatch.pt2", "--inputs", "{F}/aoti_inputs.pt"),
        "multi/decoder": MULTI_DECODER,
        "dtypes/dtypes_inputs": ("{F}/dtypes.pt2", "--inputs", "{F}/dtypes_inputs.pt"),
        "kwargs/kwargs_inputs": ("{F}/kwargs.pt2", "--inputs", "{F}/kwargs_inputs.pt"),
        "derived/derived_inputs": ("{F}/derived.pt2", "--inputs", "{F}/derived_inputs.pt"),
        "ep_only/compile": ("{F}/ep_only.pt2", "--no-probe"),
        "embedding_oob/triage": (
            "{F}/embedding_oob.pt2",
            "--inputs",
            "{F}/embedding_oob_inputs.pt",
            "--no-probe",
            "--artifacts",
            "{W}/bundles",
        ),
        "weights_on_disk/crash": ("{F}/weights_on_disk.pt2", "--no-escalate"),
    }
    out: list[Case] = []
    for label, args in runs.items():
        out.extend(
            _check_cases(f"dynamic/{label}", (*args, "--cache-dir", "{W}/cache"), dynamic=True)
        )
    return out


FAKE_SCRIPTS: dict[str, dict] = {
    "healthy": {},
    "run-segfault": {
        "run": {"crash": "SIGSEGV", "log": "Fatal Python error: Segmentation fault\n"}
    },
    "run-abort": {
        "run": {
            "crash": "SIGABRT",
            "log": "terminate called after throwing an instance of 'c10::Error'\n"
            "  what():  index out of bounds in cpp_fused_embedding_0\n",
        }
    },
    "run-hang": {"run": {"hang": True}},
    "run-exit": {"run": {"exit": 3, "log": "ImportError: no torch\n"}},
    "run-inputs-failed": {
        "run": {"error": {"type": "InputsFailed", "message": "UnpicklingError: weights only"}}
    },
    "run-error-eager-too": {
        "run": {"error": {"type": "IndexError", "message": "index out of range in self"}},
        "eager": {
            "error": {"type": "IndexError", "message": "index out of range in self"},
            "entry": {"phase": "call"},
        },
    },
    "load-error": {"load": {"error": {"type": "RuntimeError", "message": "model not found"}}},
    "load-crash-once": {"load": {"crash": "SIGSEGV", "once": True}},
    "load-crash": {"load": {"crash": "SIGSEGV"}},
    "probe-crash-once": {"probe:s0:max": {"crash": "SIGSEGV", "once": True}},
    "probe-over-accepted": {
        "probe:s0:over": {"entry": {"outcome": "accepted", "aoti_error": None}}
    },
    "nan": {
        "run": {
            "entry": {
                "outputs": [
                    {"kind": "tensor", "dtype": "float32", "shape": [2, 4], "nan": 3, "inf": 1}
                ]
            }
        }
    },
    "compare-structure": {
        "compare": {"entry": {"structure": "the compiled model returns 2 output(s), the EP 1"}}
    },
    "eager-fails": {
        "eager": {
            "error": {"type": "RuntimeError", "message": "boom"},
            "entry": {"phase": "load_exported_program"},
        }
    },
    "compile-error": {
        "compile": {
            "error": {
                "type": "CppCompileError",
                "message": "C++ compile error\nkernel.cpp:12: error: 'foo' was not declared",
            }
        }
    },
}


def fake_cases() -> list[Case]:
    out: list[Case] = []
    for label, script in FAKE_SCRIPTS.items():
        pkg = "{F}/ep_only.pt2" if label.startswith("compile") else "{F}/both.pt2"
        args = (pkg, "--timeout", "2", "--cache-dir", "{W}/cache")
        if pkg.endswith("both.pt2"):
            args = (*args, "--inputs", "{F}/aoti_inputs.pt")
        for case in _check_cases(f"fake/{label}", args, dynamic=True):
            out.append(
                Case(
                    case.name,
                    case.args,
                    case.reports,
                    env={"AOTIPRE_FAKE_SCRIPT": json.dumps(script)},
                    fake=True,
                    dynamic=True,
                )
            )
    return out


# --------------------------------------------------------------------------------------------
# Running a version


@dataclass
class Version:
    label: str
    tree: Path
    work: Path
    """Scratch of this version: compile cache, XDG cache, TMPDIR, report files."""


_NOT_COPIED = shutil.ignore_patterns(
    ".git", ".venv", ".fixture-cache", "__pycache__", "*.egg-info", ".mypy_cache", ".ruff_cache"
)


def prepare(spec: str, label: str, scratch: Path) -> Version:
    """Put the version's tree at scratch/tree (each version in turn at the same path, so that
    paths in reports, and where tables wrap them, are the same for both)."""
    tree, work = scratch / "tree", scratch / "work"
    path = Path(spec)
    if path.is_dir() and (path / "aotipre" / "__init__.py").is_file():
        shutil.copytree(path, tree, ignore=_NOT_COPIED, symlinks=True)
    else:
        tree.mkdir()
        archive = subprocess.run(
            ["git", "-C", str(REPO), "archive", spec], capture_output=True, check=False
        )
        if archive.returncode != 0:
            sys.exit(f"compare_reports: {spec!r} is neither an aotipre tree nor a git revision")
        subprocess.run(["tar", "-x", "-C", str(tree)], input=archive.stdout, check=True)
    work.mkdir()
    return Version(label, tree, work)


def set_aside(version: Version, scratch: Path) -> None:
    """Free scratch/tree and scratch/work for the next version."""
    version.tree.rename(scratch / f"tree-{version.label}")
    version.work.rename(scratch / f"work-{version.label}")


@dataclass
class Outcome:
    outputs: dict[str, str]
    """Masked texts by name: exit, stdout, stderr, and one per report."""


def run_case(case: Case, version: Version, fixtures: Path, cwd: Path) -> Outcome:
    work = version.work / "cases" / case.name.replace("/", "__")
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    tmp = version.work / "tmp"
    tmp.mkdir(exist_ok=True)

    def fill(text: str) -> str:
        return (
            text.replace("{F}", str(fixtures))
            .replace("{T}", str(version.tree))
            .replace("{W}", str(work))
        )

    args = [fill(a) for a in case.args]
    for fmt in case.reports:
        args += ["--report", f"{fmt}:{work}/report.{fmt}"]
    if case.fake:
        # each version's own harness (it knows where that version keeps the worker's path),
        # one fake worker for both (its tracebacks quote its own line numbers)
        argv = [
            sys.executable,
            str(version.tree / "tests" / "fakes" / "cli_with_fake_worker.py"),
            str(cwd.parent / "fakes" / "fake_torch_worker.py"),
            *args,
        ]
    else:
        argv = [sys.executable, "-m", "aotipre", *args]
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("AOTIPRE_", "GITHUB_", "PYTEST_")) and k not in ("CI",)
    }
    env.update(
        PYTHONPATH=str(version.tree),
        XDG_CACHE_HOME=str(version.work / "xdg"),
        TMPDIR=str(tmp),
        COLUMNS="200",
        **{k: fill(v) for k, v in case.env.items()},
    )
    try:
        proc = subprocess.run(
            argv,
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=CASE_TIMEOUT_S,
            check=False,
        )
        exit_text, stdout, stderr = str(proc.returncode), proc.stdout, proc.stderr
    except subprocess.TimeoutExpired:
        exit_text, stdout, stderr = "timeout", "", ""
    masks = [(str(version.tree), "<TREE>"), (str(version.work), "<WORK>"), (str(fixtures), "<F>")]
    outputs = {
        "exit": exit_text,
        "stdout": mask(stdout, masks),
        "stderr": mask(stderr, masks),
    }
    for fmt in case.reports:
        path = work / f"report.{fmt}"
        text = path.read_text(errors="replace") if path.is_file() else "<no file>"
        outputs[f"report.{fmt}"] = mask(text, masks)
    return Outcome(outputs)


_DURATION_KEYS = re.compile(r'("(?:duration_s|wall_s|elapsed_s|seconds|time)": )-?[0-9.e+-]+')
_TEXT_MASKS = (
    (re.compile(r"\b\d+\.\d+s\b"), "<T>s"),  # table/markdown durations (0.01s)
    (re.compile(r'\btime="[0-9.]+"'), 'time="<T>"'),  # junit
    (re.compile(r"\b(aotipre(?:-[a-z]+)*-)[a-z0-9_]{8}\b"), r"\1<RND>"),  # mkdtemp folders
    (re.compile(r"\btmp[A-Za-z0-9_]{8}\b"), "tmp<RND>"),
    (re.compile(r"\bpid \d+\b"), "pid <N>"),
    (re.compile(r"\bafter \d+(?:\.\d+)? s\b"), "after <T> s"),  # "exited with code 3 after 0.2 s"
    # triage steps run on threads: their job numbers follow which finished first
    (re.compile(r"(aotipre-triage-<RND>/[a-z0-9-]+?)-\d+\.json"), r"\1-<N>.json"),
    # inductor names generated sources by a hash that differs from compile to compile
    (re.compile(r"\b[a-z0-9]{52}\.(kernel\.cpp|wrapper\.cpp|cpp|so|py)\b"), r"<HASH>.\1"),
)


def mask(text: str, replacements: list[tuple[str, str]]) -> str:
    """Hide what legitimately differs between runs: paths of the tree, scratch and temporary
    folders, and durations (with the column padding they change in tables)."""
    for old, new in replacements:
        text = text.replace(old, new)
    text = _DURATION_KEYS.sub(r"\1<T>", text)
    for pattern, new in _TEXT_MASKS:
        text = pattern.sub(new, text)
    lines = []
    for line in text.splitlines():
        # a table's padding follows its widest cell, a duration included
        line = re.sub(r" {2,}", "  ", line.rstrip())
        line = re.sub(r"-{3,}", "---", line)
        lines.append(line)
    return "\n".join(lines) + ("\n" if text.endswith("\n") else "")


# --------------------------------------------------------------------------------------------
# Main


def default_fixtures() -> Path:
    env = os.environ.get("AOTIPRE_FIXTURE_DIR")
    if env:
        return Path(env)
    caches = sorted((REPO / ".fixture-cache").glob("torch-*"))
    if not caches:
        sys.exit("compare_reports: no fixtures; set AOTIPRE_FIXTURE_DIR or build them")
    return caches[-1]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("old", nargs="?", default="main", help="git revision or tree (default main)")
    ap.add_argument("new", nargs="?", default=str(REPO), help="git revision or tree (default .)")
    ap.add_argument("--static-only", action="store_true", help="skip the dynamic and fake cases")
    ap.add_argument("--cases", default=None, help="regular expression over case names")
    ap.add_argument("--fixtures", type=Path, default=None, help="fixture folder")
    ap.add_argument("--jobs", "-j", type=int, default=2, help="static cases run in parallel")
    ap.add_argument("--keep", type=Path, default=None, help="write masked outputs here")
    ap.add_argument("--list", action="store_true", help="print the case names and exit")
    args = ap.parse_args(argv)

    fixtures = (args.fixtures or default_fixtures()).resolve()
    cases = build_cases(fixtures)
    if args.static_only:
        cases = [c for c in cases if not c.dynamic]
    if args.cases:
        pattern = re.compile(args.cases)
        cases = [c for c in cases if pattern.search(c.name)]
    if args.list:
        print("\n".join(c.name for c in cases))
        return 0

    scratch = Path(tempfile.mkdtemp(prefix="compare-reports-"))
    try:
        cwd = scratch / "cwd"
        cwd.mkdir()
        shutil.copytree(REPO / "tests" / "fakes", scratch / "fakes", ignore=_NOT_COPIED)
        results: dict[str, list[Outcome]] = {}
        for spec, label in ((args.old, "old"), (args.new, "new")):
            version = prepare(spec, label, scratch)
            print(f"{label}: {spec}: {len(cases)} case(s)", file=sys.stderr)
            static = [c for c in cases if not c.dynamic]
            with cf.ThreadPoolExecutor(max(1, args.jobs)) as pool:
                done = pool.map(lambda c, v=version: (c, run_case(c, v, fixtures, cwd)), static)
                for case, outcome in done:
                    results.setdefault(case.name, []).append(outcome)
            for case in (c for c in cases if c.dynamic):
                print(f"  {case.name}", file=sys.stderr)
                results.setdefault(case.name, []).append(run_case(case, version, fixtures, cwd))
            set_aside(version, scratch)
        return report(cases, results, args.keep)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def report(cases: list[Case], results: dict[str, list[Outcome]], keep: Path | None) -> int:
    differing = 0
    for case in cases:
        old, new = results[case.name]
        if keep is not None:
            for label, outcome in (("old", old), ("new", new)):
                folder = keep / label / case.name
                folder.mkdir(parents=True, exist_ok=True)
                for name, text in outcome.outputs.items():
                    (folder / name).write_text(text)
        for name in sorted(set(old.outputs) | set(new.outputs)):
            a, b = old.outputs.get(name, ""), new.outputs.get(name, "")
            if a == b:
                continue
            differing += 1
            sys.stdout.writelines(
                difflib.unified_diff(
                    a.splitlines(keepends=True),
                    b.splitlines(keepends=True),
                    f"old/{case.name}/{name}",
                    f"new/{case.name}/{name}",
                )
            )
            if not b.endswith("\n") or not a.endswith("\n"):
                print()
    outputs = sum(len(results[c.name][0].outputs) for c in cases)
    print(
        f"compare_reports: {len(cases)} case(s), {outputs} output(s) compared, {differing} differ",
        file=sys.stderr,
    )
    return 1 if differing else 0


if __name__ == "__main__":
    sys.exit(main())
