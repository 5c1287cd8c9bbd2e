"""Mutation testing of the modules that decide verdicts: `python scripts/mutate.py [options]`.

A small runner of its own (not mutmut: mutmut 3 rewrites every function of a module into a
trampoline and runs the whole suite to map tests, which on this 2-core machine costs more than
the mutants; it also cannot restrict mutants to the functions that decide a verdict). How it
works:

- `TARGETS` (data: edit the paths when modules move) names each module, the functions in it
  that are mutated (None: the whole module) and the fast tests that hold them.
- Mutants are AST edits, one at a time: comparison swaps (`<`/`<=`, `>`/`>=`, `==`/`!=`,
  `in`/`not in`, `is`/`is not`), `and`/`or`, a dropped `not`, `+`/`-`, integer constants
  +-1, `True`/`False`, `max`/`min`, `any`/`all`. Docstrings, strings and f-strings are left
  alone. `NAMED` adds the hand-written mutants of issue #18 (source text replacements), each
  with the tests that must kill it (slow ones included).
- Every mutant runs in a temporary copy of the tree (never in place): the mutated module is
  written there (`ast.unparse` of the whole module), a forked child runs pytest on the
  module's tests with `-x`, and the file is restored. A mutant is killed when the tests fail,
  time out or crash; it survived when they pass. The unmutated (unparsed) tree must pass first.
- The fork server imports pytest and the test dependencies once; aotipre itself is imported
  in each child only, after the mutant is written.

    python scripts/mutate.py --list                   # the mutants, no run
    python scripts/mutate.py --module aotipre/findings/__init__.py -j 2
    python scripts/mutate.py --named-only             # the issue's mutants
    python scripts/mutate.py --module M --function F  # only function F of module M
    python scripts/mutate.py --report mutants.json    # every mutant with its outcome

Exit status: 0 when the score of every module is at least --min-score (default 0.85), else 1.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import copy
import json
import os
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FAST = ["-m", "not slow and not gpu"]
INVARIANTS = "tests/gate/test_invariants.py"
REPORTS = (
    "tests/report/test_github.py",
    "tests/report/test_junit.py",
    "tests/report/test_markdown.py",
    "tests/report/test_sarif.py",
    "tests/report/test_table_readable.py",
)
"""The renderers' fast tests (test_cli_reports.py reads files a mutation tree does not copy)."""
CLI_REPORTS = "tests/report/test_cli_reports.py"
CONFIG = ("tests/test_config.py", "--deselect",
          "tests/test_config.py::test_documented_examples_are_valid")  # fmt: skip
"""The configuration's fast tests, less the one that reads docs/ (not copied; being rewritten)."""


@dataclass(frozen=True)
class Target:
    path: str
    """The module, relative to the repository."""
    functions: tuple[str, ...] | None
    """Qualified names (`Report.verdict`, `_Session._nan_findings`) whose bodies are mutated;
    None: every function of the module."""
    tests: tuple[str, ...]
    """pytest arguments selecting the tests that hold the module (fast ones)."""


TARGETS: tuple[Target, ...] = (
    Target(
        "aotipre/fleet/placement.py",
        None,
        ("tests/scale/test_placement.py",),
    ),
    Target(
        "aotipre/runner/prewarm.py",
        None,
        ("tests/runner/test_prewarm.py",
         "tests/triage/test_escalate_fake.py::test_the_first_steps_run_in_the_workers_started_beside_the_check",
         "tests/triage/test_escalate_fake.py::test_a_check_that_does_not_crash_stops_the_waiting_worker",
         "tests/triage/test_escalate_fake.py::test_a_small_host_starts_fewer_waiting_workers"),
    ),
    Target(
        "aotipre/checks/inputs.py",
        None,
        ("tests/gate/test_boundaries_static.py", "tests/gate/test_static_structure.py",
         "tests/checks/test_contract.py::test_a_sample_inside_its_storage_against_an_alignment_assert"),
    ),
    Target(
        "aotipre/inputs/meta.py",
        ("is_contiguous",),
        ("tests/gate/test_boundaries_static.py", "tests/gate/test_static_structure.py"),
    ),
    Target(
        "aotipre/checks/package.py",
        None,
        ("tests/gate/test_static_package.py",),
    ),
    Target(
        "aotipre/findings/__init__.py",
        ("Severity.rank", "Report.verdict", "Report.exit_code", "Report.counts"),
        (INVARIANTS,),
    ),
    Target(
        "aotipre/findings/baseline.py",
        ("finding_key", "package_id", "Baseline.split", "load_baseline", "_entry_key",
         "write_baseline", "apply_baseline", "replace_findings", "_failed_by"),
        ("tests/gate/test_baseline_edges.py", INVARIANTS, "tests/test_baseline.py"),
    ),
    Target(
        "aotipre/api.py",
        ("_finish", "_selected", "_static_blockers"),
        ("tests/gate/test_select_ignore.py", INVARIANTS),
    ),
    Target(
        "aotipre/runner/classify.py",
        None,
        ("tests/runner/test_classify.py", "tests/gate/test_classify_edges.py"),
    ),
    Target(
        "aotipre/runner/stages/compare.py",
        ("compare_findings", "mismatch_text"),
        ("tests/gate/test_compare_findings.py",),
    ),
    Target(
        "aotipre/runner/stages/probe.py",
        ("_over_max", "_layout_case", "_offset_case", "layout_difference", "_unchecked",
         "unchecked_finding"),
        ("tests/runner/test_stages.py", "tests/gate/test_compare_findings.py"),
    ),
    Target(
        "aotipre/runner/synth.py",
        ("plan_layouts", "plan_offsets", "plan_probes", "_largest_fitting"),
        ("tests/runner/test_stages_plan.py",),
    ),
    Target(
        "aotipre/runner/stages/nonfinite.py",
        ("nonfinite_findings", "_rows"),
        ("tests/gate/test_compare_findings.py",),
    ),
    Target(
        "aotipre/runner/worker/inputs.py",
        ("tensor_summary",),
        ("tests/gate/test_worker_compare.py",),
    ),
    Target(
        "aotipre/runner/worker/compare.py",
        ("compare_outputs", "compare_leaf", "_unravel"),
        ("tests/gate/test_worker_compare.py",),
    ),
    Target(
        "aotipre/runner/perf.py",
        ("budget_judgements", "regression_judgements", "_worse", "leak_judgements",
         "_mostly_rising", "advice_judgements", "ColdStart.package_s",
         # session 11: the record the judgements read, and the hints they give
         "ColdStart.total_s", "Memory.host_peak", "Memory.gpu_peak", "_gpu_used_delta",
         "record_from_worker", "Budgets.any", "_probe_hint", "folder_hint", "_version"),
        ("tests/runner/test_perf.py", "tests/gate/test_mutants_perf.py"),
    ),
    # ---- session 11: every module that decides a verdict, a severity, an exit code or what
    # an option does (RELIABILITY.md, "Mutation testing")
    # the deployment-target checks
    Target(
        "aotipre/checks/target.py",
        ("check_host", "row_for", "_Context.__init__", "_Context.add", "_Context.device",
         "_Context.platform", "_Context.libc", "_Context.shim", "_Context.gpu",
         "_Context._driver", "_Context._gpu_from_metadata", "_Context.cpu",
         "_Context._isa_from_flags", "_norm_machine", "_fmt_cc", "check_runtime_bugs",
         "_model_cost", "_below_compile_gpu", "_size"),
        ("tests/gate/test_mutants_targets.py", "tests/gate/test_static_package.py",
         "tests/binaries/test_targets.py", "tests/binaries/test_torch_bugs_real.py"),
    ),
    Target(
        "aotipre/environment/host.py",
        ("TorchRuntime.release", "isa_words", "parse_targets", "is_target_name",
         "parse_target", "_target_value", "_version_value", "isa_flags", "_norm_cc"),
        ("tests/gate/test_mutants_targets.py", "tests/binaries/test_targets.py"),
    ),
    # the binary readers' ISA and version logic
    Target(
        "aotipre/binaries/x86.py",
        ("cpuinfo_flag", "IsaScan.complete", "IsaScan.use", "scan_elf", "_functions",
         "_function_at"),
        ("tests/gate/test_mutants_binaries.py", "tests/binaries/test_x86.py"),
    ),
    Target(
        "aotipre/binaries/cuda.py",
        ("GpuImage.runs_on", "GpuImage.min_driver", "read_cubin", "_cc_pair"),
        ("tests/gate/test_mutants_binaries.py", "tests/binaries/test_cuda.py"),
    ),
    Target(
        "aotipre/binaries/elf.py",
        ("version_key", "highest"),
        ("tests/gate/test_mutants_binaries.py", "tests/binaries/test_elf.py"),
    ),
    Target(
        "aotipre/binaries/facts.py",
        ("_shared_object", "_is_entry_point", "_compile_flags", "parse_flags", "_gpu_member"),
        ("tests/gate/test_mutants_binaries.py", "tests/binaries/test_elf.py"),
    ),
    Target(
        "aotipre/binaries/versions.py",
        ("Table.exports", "load_table", "release_key", "ProducerRange.text", "producer_range"),
        ("tests/gate/test_mutants_binaries.py", "tests/binaries/test_torch_table_sources.py"),
    ),
    Target(
        "aotipre/binaries/torch_bugs.py",
        None,
        ("tests/binaries/test_torch_bugs_real.py",),
    ),
    Target(
        "aotipre/checks/contract.py",
        ("check_data_ranges",),
        ("tests/checks/test_contract.py",),
    ),
    # every report format's gate decision
    Target(
        "aotipre/report/common.py",
        None,
        ("tests/gate/test_mutants_reports.py", *REPORTS),
    ),
    Target(
        "aotipre/report/__init__.py",
        ("_Renderers.__getitem__", "render_report", "render_reports", "parse_report_spec"),
        ("tests/gate/test_mutants_reports.py", *REPORTS, f"{CLI_REPORTS}::test_report_spec",
         f"{CLI_REPORTS}::test_every_format_is_registered_for_one_and_many_packages"),
    ),
    Target(
        "aotipre/report/junit.py",
        ("render_reports", "_cases", "_suite", "_outcome"),
        ("tests/gate/test_mutants_reports.py", "tests/report/test_junit.py"),
    ),
    Target(
        "aotipre/report/sarif.py",
        ("render_reports", "_result", "_member", "_notification"),
        ("tests/gate/test_mutants_reports.py", "tests/report/test_sarif.py"),
    ),
    Target(
        "aotipre/report/github.py",
        ("render_reports", "append_step_summary"),
        ("tests/gate/test_mutants_reports.py", "tests/report/test_github.py"),
    ),
    Target(
        "aotipre/report/markdown.py",
        ("render_reports",),
        ("tests/gate/test_mutants_reports.py", "tests/report/test_markdown.py"),
    ),
    Target(
        "aotipre/report/table.py",
        ("render_report", "render_reports"),
        ("tests/gate/test_mutants_reports.py", "tests/report/test_table_readable.py"),
    ),
    # configuration and option plumbing
    Target(
        "aotipre/config.py",
        ("Settings.inputs_for", "Settings.check_options", "_bool", "check_number", "_fail_on",
         "_string", "_target", "_targets", "_device", "_codes", "_pythons", "_strings",
         "_modules", "parse_values", "parse_flags", "discover_config", "_untrusted",
         "load_config", "_check_target_names", "_inputs_table"),
        ("tests/gate/test_mutants_options.py", *CONFIG),
    ),
    Target(
        "aotipre/foundation/bounds.py",
        ("number.parse", "integer.parse"),
        ("tests/gate/test_mutants_options.py", *CONFIG),
    ),
    Target(
        "aotipre/runner/stages/options.py",
        ("DynamicOptions.__post_init__", "parse_device"),
        ("tests/gate/test_mutants_options.py", *CONFIG),
    ),
    Target(
        "aotipre/fleet/batch.py",
        ("run_settings", "plan"),
        ("tests/gate/test_mutants_options.py", "tests/test_batch.py"),
    ),
    Target(
        "aotipre/cli/commands.py",
        ("check", "inspect", "doctor", "_render_doctors", "_doctor_report_spec"),
        ("tests/gate/test_mutants_options.py", "tests/test_batch.py"),
    ),
    # the choice of reference program
    Target(
        "aotipre/runner/reference.py",
        None,
        ("tests/gate/test_mutants_reference.py",),
    ),
    # torch's CPU-ISA probe paid once per host (issue #28): what is recorded, trusted, pinned
    Target(
        "aotipre/runner/loadcost.py",
        ("host_key", "_cpu_identity", "_compiler_identity", "read", "parse", "_clean_probe",
         "from_load", "write", "with_recorded_probe", "with_recorded_load", "HandOver.pin",
         "HandOver.learn", "HandOver._host_key"),
        ("tests/runner/test_loadcost.py", "tests/runner/test_direct_load.py"),
    ),
    # many packages: CI shards and their merged verdict (issue #25)
    Target(
        "aotipre/fleet/shard.py",
        ("parse_shard", "_pair", "_checked", "_number", "_from_env", "package_keys", "numbered",
         "assign", "ShardPlan.keys", "plan_shards"),
        ("tests/scale/test_shard.py",),
    ),
    Target(
        "aotipre/fleet/merge.py",
        ("merge", "read_shard_file", "_report", "_shard_block", "_one_count", "_one_plan",
         "_agreed"),
        ("tests/scale/test_merge.py", "--deselect",
         "tests/scale/test_merge.py::test_a_dynamic_run_merged_from_its_json"),
    ),
    # one GPU per package (issue #25): who is pinned, and no archive opened only to place it
    Target(
        "aotipre/fleet/gpus.py",
        ("pinned_check",),
        ("tests/scale/test_gpus.py", "-m", "not slow and not gpu"),
    ),
    # the first fork server, started before its job reads its package (issue #25/#28)
    Target(
        "aotipre/fleet/batch.py",
        ("start_server_early",),
        ("tests/runner/test_forkserver.py", "-k", "early"),
    ),
    # the perf stage (its budgets and judgements: runner/perf.py above)
    Target(
        "aotipre/runner/stages/perf.py",
        ("PerfStage.progress", "PerfStage.plan", "PerfStage.result", "PerfStage._against",
         "measure_baseline", "_compiled_at_load"),
        ("tests/gate/test_mutants_perf.py", "tests/runner/test_stage_perf.py"),
    ),
)  # fmt: skip


@dataclass(frozen=True)
class Named:
    """A hand-written mutant (issue #18) and the tests that must kill it."""

    name: str
    path: str
    old: str
    new: str
    tests: tuple[str, ...]


SLOW_RUN = "tests/gate/test_boundaries_run.py"
SLOW_CODES = "tests/gate/test_codes_real.py"
OPTIONS = "tests/gate/test_options.py"

NAMED: tuple[Named, ...] = (
    Named(
        "off-by-one on a dynamic dim's upper bound",
        "aotipre/checks/inputs.py",
        "if eff_hi is not None and got > eff_hi:",
        "if eff_hi is not None and got > eff_hi + 1:",
        ("tests/gate/test_boundaries_static.py",),
    ),
    Named(
        "the AOTI code's narrower minimum ignored",
        "aotipre/checks/inputs.py",
        "max(v for v in (lo, aoti_lo) if v is not None) if (lo, aoti_lo) != (None, None) else None",
        "lo",
        ("tests/gate/test_boundaries_static.py",),
    ),
    Named(
        "symbolic strides never checked",
        "aotipre/checks/inputs.py",
        'expected = want.value if want.is_static else _evaluate(want.expr or "", env)',
        "expected = want.value if want.is_static else None",
        ("tests/gate/test_boundaries_static.py",),
    ),
    Named(
        "strides checked on size-1 dims",
        "aotipre/checks/inputs.py",
        "if meta.shape[dim] <= 1:",
        "if meta.shape[dim] < 1:",
        ("tests/gate/test_boundaries_static.py",),
    ),
    Named(
        "the worker drops NaN/Inf from outputs",
        "aotipre/runner/worker/inputs.py",
        'out["nan"] = int(torch.isnan(d).sum())\n        out["inf"] = int(torch.isinf(d).sum())',
        'out["nan"] = 0\n        out["inf"] = 0',
        ("tests/gate/test_worker_compare.py", f"{SLOW_CODES}::test_aot702_nan_in_outputs_aoti_only"),
    ),
    Named(
        "a stage ERROR no longer makes the verdict an error",
        "aotipre/findings/__init__.py",
        "if any(s.status is StageStatus.ERROR for s in self.stages):",
        "if False:",
        (INVARIANTS,),
    ),
    Named(
        "a baseline matches findings without their input and dim",
        "aotipre/findings/baseline.py",
        '        finding.input or "",\n        "" if finding.dim is None else str(finding.dim),',
        '        "",\n        "",',
        (INVARIANTS,),
    ),
    Named(
        "--rtol/--atol swapped on the way to the worker",
        "aotipre/runner/stages/session.py",
        '"rtol": self.opts.rtol,\n            "atol": self.opts.atol,',
        '"rtol": self.opts.atol,\n            "atol": self.opts.rtol,',
        (f"{OPTIONS}::test_rtol_and_atol_reach_the_comparison",),
    ),
    Named(
        "--rtol/--atol swapped in the comparison",
        "aotipre/runner/worker/compare.py",
        "r = d_rtol if rtol is None else rtol\n    t = d_atol if atol is None else atol",
        "r = d_rtol if atol is None else atol\n    t = d_atol if rtol is None else rtol",
        ("tests/gate/test_worker_compare.py",),
    ),
)  # fmt: skip


# ---------------------------------------------------------------------------------------------
# Generating mutants


@dataclass
class Mutant:
    id: str
    path: str
    where: str
    """`function:line`."""
    what: str
    source: str
    """The whole mutated module."""
    tests: tuple[str, ...]
    outcome: str = ""
    """killed, survived, timeout (killed), error (the run itself failed)."""
    seconds: float = 0.0
    named: bool = False
    extra: dict[str, str] = field(default_factory=dict)


_CMP_SWAPS: dict[type, type] = {
    ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt,
    ast.Eq: ast.NotEq, ast.NotEq: ast.Eq, ast.In: ast.NotIn, ast.NotIn: ast.In,
    ast.Is: ast.IsNot, ast.IsNot: ast.Is,
}  # fmt: skip
_BIN_SWAPS: dict[type, type] = {ast.Add: ast.Sub, ast.Sub: ast.Add}
_CALL_SWAPS = {"max": "min", "min": "max", "any": "all", "all": "any"}
_OP_TEXT = {
    ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!=",
    ast.In: "in", ast.NotIn: "not in", ast.Is: "is", ast.IsNot: "is not", ast.Add: "+",
    ast.Sub: "-", ast.And: "and", ast.Or: "or",
}  # fmt: skip


def _functions(tree: ast.Module) -> Iterator[tuple[str, ast.AST]]:
    def walk(node: ast.AST, prefix: str) -> Iterator[tuple[str, ast.AST]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                name = f"{prefix}{child.name}"
                yield name, child
                yield from walk(child, f"{name}.")
            elif isinstance(child, ast.ClassDef):
                yield from walk(child, f"{prefix}{child.name}.")

    yield from walk(tree, "")


def _skipped_nodes(fn: ast.AST) -> set[int]:
    """Nodes never mutated: docstrings, f-strings, annotations and decorators."""
    skip: set[int] = set()
    for node in ast.walk(fn):
        if isinstance(node, ast.JoinedStr):
            skip.update(id(n) for n in ast.walk(node))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for sub in [node.returns, *node.decorator_list]:
                if sub is not None:
                    skip.update(id(n) for n in ast.walk(sub))
            for a in [*node.args.args, *node.args.kwonlyargs, *node.args.posonlyargs]:
                if a.annotation is not None:
                    skip.update(id(n) for n in ast.walk(a.annotation))
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                skip.add(id(body[0].value))
        if isinstance(node, ast.AnnAssign):
            skip.update(id(n) for n in ast.walk(node.annotation))
    return skip


def _edits(node: ast.AST) -> Iterator[tuple[str, object]]:
    """(description, edit) pairs for one node; an edit is applied to a copy of the node."""
    if isinstance(node, ast.Compare):
        for i, op in enumerate(node.ops):
            swap = _CMP_SWAPS.get(type(op))
            if swap is not None:
                yield f"{_OP_TEXT[type(op)]} -> {_OP_TEXT[swap]}", ("cmp", i, swap)
    elif isinstance(node, ast.BoolOp):
        other = ast.Or if isinstance(node.op, ast.And) else ast.And
        yield f"{_OP_TEXT[type(node.op)]} -> {_OP_TEXT[other]}", ("bool", other)
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        yield "not x -> x", ("not",)
    elif isinstance(node, ast.BinOp) and type(node.op) in _BIN_SWAPS:
        swap = _BIN_SWAPS[type(node.op)]
        yield f"{_OP_TEXT[type(node.op)]} -> {_OP_TEXT[swap]}", ("bin", swap)
    elif isinstance(node, ast.Constant):
        v = node.value
        if isinstance(v, bool):
            yield f"{v} -> {not v}", ("const", not v)
        elif isinstance(v, int):
            yield f"{v} -> {v + 1}", ("const", v + 1)
            if v != 0:
                yield f"{v} -> {v - 1}", ("const", v - 1)
    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        swap = _CALL_SWAPS.get(node.func.id)
        if swap is not None:
            yield f"{node.func.id}() -> {swap}()", ("call", swap)


def _apply(node: ast.AST, edit: tuple) -> ast.AST:
    kind = edit[0]
    if kind == "cmp":
        node.ops[edit[1]] = edit[2]()  # type: ignore[attr-defined]
    elif kind == "bool":
        node.op = edit[1]()  # type: ignore[attr-defined]
    elif kind == "not":
        return node.operand  # type: ignore[attr-defined]
    elif kind == "bin":
        node.op = edit[1]()  # type: ignore[attr-defined]
    elif kind == "const":
        node.value = edit[1]  # type: ignore[attr-defined]
    elif kind == "call":
        node.func.id = edit[1]  # type: ignore[attr-defined]
    return node


class _Replace(ast.NodeTransformer):
    def __init__(self, target_index: int, edit: tuple) -> None:
        self.index = target_index
        self.edit = edit
        self.count = -1

    def generic_visit(self, node: ast.AST) -> ast.AST:
        self.count += 1
        if self.count == self.index:
            return _apply(node, self.edit)
        return super().generic_visit(node)


def generate(target: Target) -> list[Mutant]:
    text = (REPO / target.path).read_text()
    tree = ast.parse(text)
    order = {id(n): i for i, n in enumerate(_preorder(tree))}
    out: list[Mutant] = []
    wanted = set(target.functions) if target.functions is not None else None
    seen_names = set()
    for name, fn in _functions(tree):
        seen_names.add(name)
        if wanted is not None and name not in wanted:
            continue
        skip = _skipped_nodes(fn)
        nested = {
            id(n)
            for sub in ast.walk(fn)
            if sub is not fn and isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef))
            for n in ast.walk(sub)
        }
        for node in ast.walk(fn):
            if id(node) in skip or id(node) in nested:
                continue
            for what, edit in _edits(node):
                mutated = copy.deepcopy(tree)
                _Replace(order[id(node)], edit).visit(mutated)
                ast.fix_missing_locations(mutated)
                source = ast.unparse(mutated) + "\n"
                line = getattr(node, "lineno", 0)
                mid = f"{target.path}:{name}:{line}:{len(out)}"
                out.append(Mutant(mid, target.path, f"{name}:{line}", what, source, target.tests))
    if wanted is not None and wanted - seen_names:
        raise SystemExit(f"{target.path}: no function(s) {sorted(wanted - seen_names)}")
    return out


def _preorder(tree: ast.AST) -> list[ast.AST]:
    nodes: list[ast.AST] = []

    class V(ast.NodeVisitor):
        def generic_visit(self, node: ast.AST) -> None:
            nodes.append(node)
            super().generic_visit(node)

    V().visit(tree)
    return nodes


def named_mutants() -> list[Mutant]:
    out = []
    for n in NAMED:
        text = (REPO / n.path).read_text()
        if text.count(n.old) != 1:
            raise SystemExit(
                f"named mutant {n.name!r}: the text to replace is not in {n.path} once"
            )
        out.append(
            Mutant(f"named:{n.name}", n.path, n.path, n.name, text.replace(n.old, n.new), n.tests,
                   named=True)
        )  # fmt: skip
    return out


# ---------------------------------------------------------------------------------------------
# Running


def copy_tree(dest: Path) -> None:
    for name in ("aotipre", "tests", "scripts", "fixtures", "docs"):
        shutil.copytree(REPO / name, dest / name, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md", ".pre-commit-hooks.yaml"):
        shutil.copy(REPO / name, dest / name)  # the docs and hook tests read them
    cache = REPO / ".fixture-cache"
    if cache.is_dir():
        (dest / ".fixture-cache").symlink_to(cache)
    (dest / ".git").mkdir()  # the configuration search stops here, as in the checkout


RUNNING: set[int] = set()
"""Process groups of the children running now (killed if this runner is interrupted)."""


def _stop(signum: int, frame: object) -> None:
    for pgid in list(RUNNING):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGKILL)
    raise SystemExit(128 + signum)


def run_pytest(tree: Path, args: list[str], timeout: float, fast: bool = True) -> tuple[str, float]:
    """Fork, run pytest in `tree` in the child; 'killed' (tests failed), 'survived', 'timeout'."""
    started = time.monotonic()
    pid = os.fork()
    if pid == 0:  # the child
        try:
            os.setpgid(0, 0)
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, 1)
            os.dup2(devnull, 2)
            os.chdir(tree)
            sys.path.insert(0, str(tree))
            sys.dont_write_bytecode = True
            import pytest

            marks = FAST if fast else []
            code = pytest.main([*args, "-x", "-q", "-p", "no:cacheprovider", *marks])
            os._exit(int(code))
        except BaseException:
            os._exit(99)
    RUNNING.add(pid)
    deadline = started + timeout
    try:
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            if time.monotonic() > deadline:
                os.killpg(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                return "timeout", time.monotonic() - started
            time.sleep(0.05)
    finally:
        RUNNING.discard(pid)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)  # anything the tests left behind in the group
    seconds = time.monotonic() - started
    code = os.waitstatus_to_exitcode(status)
    if code == 0:
        return "survived", seconds
    if code in (1, -signal.SIGSEGV, -signal.SIGABRT):
        return "killed", seconds
    return f"error (pytest exit {code})", seconds


def run_mutant(tree: Path, m: Mutant, timeout: float, fast: bool) -> None:
    path = tree / m.path
    original = path.read_text()
    path.write_text(m.source)
    try:
        args = list(m.tests)
        outcome, m.seconds = run_pytest(tree, args, timeout * (5 if m.named else 1), fast)
        m.outcome = outcome
    finally:
        path.write_text(original)


def baseline_passes(tree: Path, targets: list[Target], timeout: float) -> None:
    """The unmutated tree, unparsed like the mutants, must pass every module's tests."""
    for t in targets:
        path = tree / t.path
        original = path.read_text()
        path.write_text(ast.unparse(ast.parse(original)) + "\n")
        try:
            outcome, seconds = run_pytest(tree, list(t.tests), timeout * 3)
        finally:
            path.write_text(original)
        if outcome != "survived":
            raise SystemExit(f"the unmutated {t.path} does not pass its tests ({outcome})")
        print(f"baseline {t.path}: tests pass ({seconds:.1f}s)", flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--module", action="append", help="only these TARGETS paths (repeatable)")
    ap.add_argument(
        "--function",
        action="append",
        help="only the mutants of these functions of the chosen modules (repeatable; a "
        "method as Class.method): a quick pass over what a change touched",
    )
    ap.add_argument("--list", action="store_true", help="list the mutants and exit")
    ap.add_argument("--named-only", action="store_true", help="only the issue's named mutants")
    ap.add_argument("--no-named", action="store_true", help="skip the named mutants")
    ap.add_argument("-j", "--jobs", type=int, default=1, help="mutants run in parallel")
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds per mutant")
    ap.add_argument("--report", help="write every mutant and its outcome as JSON")
    ap.add_argument("--min-score", type=float, default=0.85)
    ap.add_argument("--examples", type=int, default=60, help="hypothesis examples per test")
    opts = ap.parse_args(argv)

    targets = [t for t in TARGETS if not opts.module or t.path in opts.module]
    mutants: list[Mutant] = []
    if not opts.named_only:
        for t in targets:
            mutants.extend(generate(t))
    if not opts.no_named:
        mutants.extend(m for m in named_mutants() if not opts.module or m.path in opts.module)
    if opts.function:
        mutants = [m for m in mutants if m.where.rsplit(":", 1)[0] in opts.function]
    if opts.list:
        for m in mutants:
            print(f"{m.where:45} {m.path:28} {m.what}")
        print(f"{len(mutants)} mutants")
        return 0

    os.environ["PYTHONDONTWRITEBYTECODE"] = "1"
    os.environ["AOTIPRE_HYPOTHESIS_EXAMPLES"] = str(opts.examples)
    if "AOTIPRE_FIXTURE_DIR" not in os.environ:
        # this interpreter's torch's fixtures (CI's other torches keep partial sets beside them),
        # named without importing torch into the fork server
        from importlib.metadata import version

        built = REPO / ".fixture-cache" / f"torch-{version('torch')}"
        if not (built / "manifest.json").is_file():
            raise SystemExit("build the fixtures first (python scripts/build_fixtures.py)")
        os.environ["AOTIPRE_FIXTURE_DIR"] = str(built)
    os.environ.setdefault("AOTIPRE_FIXTURES_PREBUILT", "1")
    import hypothesis  # noqa: F401  (imported once here, before the forks)
    import pytest  # noqa: F401

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    trees = []
    for _ in range(max(1, opts.jobs)):
        tree = Path(tempfile.mkdtemp(prefix="aotipre-mutate-"))
        copy_tree(tree)
        trees.append(tree)
    try:
        if not opts.named_only:
            baseline_passes(trees[0], targets, opts.timeout)
        _run_all(trees, mutants, opts.timeout)
    finally:
        for tree in trees:
            shutil.rmtree(tree, ignore_errors=True)
    return _summary(mutants, opts)


def _run_all(trees: list[Path], mutants: list[Mutant], timeout: float) -> None:
    if len(trees) == 1:
        for i, m in enumerate(mutants):
            run_mutant(trees[0], m, timeout, not m.named)
            _progress(i, len(mutants), m)
        return
    import threading

    lock = threading.Lock()
    queue = list(enumerate(mutants))

    def worker(tree: Path) -> None:
        while True:
            with lock:
                if not queue:
                    return
                i, m = queue.pop(0)
            run_mutant(tree, m, timeout, not m.named)
            with lock:
                _progress(i, len(mutants), m)

    threads = [threading.Thread(target=worker, args=(t,)) for t in trees]
    for th in threads:
        th.start()
    for th in threads:
        th.join()


def _progress(i: int, n: int, m: Mutant) -> None:
    mark = "." if m.outcome in ("killed", "timeout") else "S"
    line = f"[{i + 1}/{n}] {mark} {m.outcome:9} {m.seconds:5.1f}s {m.path}:{m.where} {m.what}"
    print(line, flush=True)


def _summary(mutants: list[Mutant], opts: argparse.Namespace) -> int:
    by_module: dict[str, list[Mutant]] = {}
    for m in mutants:
        by_module.setdefault(m.path, []).append(m)
    ok = True
    print("\nmodule                              mutants  killed  survived  score")
    for path, ms in sorted(by_module.items()):
        auto = [m for m in ms if not m.named]
        killed = sum(m.outcome in ("killed", "timeout") for m in auto)
        survived = [m for m in auto if m.outcome == "survived"]
        score = killed / len(auto) if auto else 1.0
        ok = ok and score >= opts.min_score
        print(f"{path:35} {len(auto):7} {killed:7} {len(survived):9}  {score:.1%}")
    total = [m for m in mutants if not m.named]
    if total:
        killed = sum(m.outcome in ("killed", "timeout") for m in total)
        print(
            f"{'all':35} {len(total):7} {killed:7} {len(total) - killed:9}  {killed / len(total):.1%}"
        )
    named = [m for m in mutants if m.named]
    for m in named:
        print(f"named: {m.outcome:9} {m.what}")
        ok = ok and m.outcome in ("killed", "timeout")
    survivors = [m for m in mutants if m.outcome not in ("killed", "timeout")]
    if survivors:
        print("\nsurvivors:")
        for m in survivors:
            print(f"  {m.path}:{m.where}  {m.what}  ({m.outcome})")
    if opts.report:
        data = [
            {"id": m.id, "path": m.path, "where": m.where, "what": m.what, "named": m.named,
             "outcome": m.outcome, "seconds": round(m.seconds, 2), "tests": list(m.tests)}
            for m in mutants
        ]  # fmt: skip
        Path(opts.report).write_text(json.dumps(data, indent=2) + "\n")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
