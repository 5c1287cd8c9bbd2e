"""The minifier rung of a compile that raised (--minify, under --escalate): the AOTI minifier
(torch._dynamo.repro.aoti.run_repro, command `minify`) in a fresh worker whose working folder
is a private one, with `--check-str` set to the compile's inner exception type so that it cannot
drift to another failure, and a budget; then the repro.py it wrote is run once more in a fresh
contained process, which must fail with the same exception type. Nothing of this runs when the
compile succeeds: the normal compile sets no minifier config or environment variable."""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass

from aotipre.runner import proc
from aotipre.runner.stages.base import PlannedStep, StepRecord, ok
from aotipre.runner.stages.session import Session

MINIFY_ID = "compile-minify"
VERIFY_TAIL_BYTES = 256 * 1024
"""What the repro's own run keeps of its output (the exception is at the end)."""
_INNER_TYPE = re.compile(r"^([A-Z]\w*(?:Error|Exception|Failed|Node))\b")
"""The inner exception's type that InductorError's message starts with (`CppCompileError: ...`)."""


@dataclass
class CompileRepro:
    """What the minifier made of a compile that raised."""

    check_str: str
    """The exception type the minifier kept failing on (its --check-str)."""
    record: StepRecord | None
    repro: str | None = None
    """repro.py in the minifier's folder (aotipre's work folder: gone after the check)."""
    nodes: tuple[int, int] | None = None
    """Nodes of the graph before -> after minifying (its checkpoints), when it shrank."""
    verified: bool = False
    """The repro failed again, with the same exception type, in a fresh process."""
    note: str = ""
    """What went wrong, or what the verification saw."""

    def summary(self) -> str:
        """One clause for the compile finding."""
        if self.repro is None:
            return f"the AOTI minifier found no repro ({self.note})"
        shrink = f", {self.nodes[0]} -> {self.nodes[1]} nodes" if self.nodes else ""
        proof = (
            f"it fails again with {self.check_str} in a fresh process"
            if self.verified
            else f"it did not fail the same way when run again ({self.note})"
        )
        return f"the AOTI minifier wrote a minimal repro.py ({proof}{shrink})"


def inner_type(rec: StepRecord) -> str | None:
    """The exception type the minifier must keep failing on: the inner type InductorError's
    message starts with (`CppCompileError: C++ compile error`), which is in the repr the
    minifier matches --check-str against; else the raised type itself."""
    err = rec.error
    m = _INNER_TYPE.match(str(err.get("message") or "").strip())
    if m is not None:
        return m.group(1)
    return str(err["type"]) if err.get("type") else None


def minify_failed_compile(
    s: Session, failed: StepRecord, body: dict[str, object]
) -> CompileRepro | None:
    """Minify the compile `failed` (its step `body`) and verify the repro; None when the rung
    does not apply (not asked for, the compile did not raise, no exception type to hold to)."""
    if not s.opts.compile_minify or failed.status != "error":
        return None
    check = inner_type(failed)
    if not check:
        return None
    out_dir = os.path.join(s.workdir, MINIFY_ID)
    s.say(f"the compile raised {check}: minifying it (slow)")
    step = PlannedStep(
        MINIFY_ID,
        "minify",
        {
            "out_dir": out_dir,
            "check_str": check,
            "inductor_configs": dict(body.get("inductor_configs") or {}),  # type: ignore[call-overload]
            "timeout_s": s.opts.minify_timeout_s,
        },
    )
    records = s.run_followup([step], env={})
    record = next((r for r in records if r.id == MINIFY_ID), None)
    result = CompileRepro(check, record)
    repro = record.entry.get("repro") if record is not None else None
    if record is None or not ok(record) or not isinstance(repro, str) or not os.path.isfile(repro):
        why = record.detail if record is not None else "its worker did not start"
        result.note = f"the minifier did not finish: {why}" if why else "no repro.py written"
        return result
    result.repro = repro
    nodes = checkpoint_nodes(out_dir)
    if len(nodes) >= 2 and max(nodes) > min(nodes):
        result.nodes = (max(nodes), min(nodes))
    result.verified, result.note = verify_repro(s, repro, check)
    return result


def checkpoint_nodes(out_dir: str) -> list[int]:
    """The node counts of the minifier's checkpoints (`<debug>/.../checkpoints/<N>.py`)."""
    nodes = []
    for root, _dirs, files in os.walk(os.path.join(out_dir, "debug")):
        if os.path.basename(root) != "checkpoints":
            continue
        nodes.extend(int(n[:-3]) for n in files if n.endswith(".py") and n[:-3].isdigit())
    return sorted(nodes)


def verify_repro(s: Session, repro: str, check: str) -> tuple[bool, str]:
    """Run `repro` once in a fresh process (its folder as the working folder, a private
    TMPDIR, the minifier's budget, its process group killed on timeout): (it raised `check`,
    what it showed)."""
    python = s.opts.python or sys.executable
    env = {k: v for k, v in os.environ.items() if not k.startswith("AOTIPRE_")}
    outcome = proc.run_process(
        [python, repro],
        env=env,
        cwd=os.path.dirname(repro),
        timeout_s=s.opts.minify_timeout_s,
        max_capture_bytes=VERIFY_TAIL_BYTES,
    )
    if outcome.timed_out:
        return False, f"the repro did not finish within {s.opts.minify_timeout_s:g} s"
    if outcome.returncode == 0:
        return False, "the repro ran without an error"
    if re.search(rf"\b{re.escape(check)}\b", outcome.stderr_tail):
        return True, ""
    last = [ln for ln in outcome.stderr_tail.strip().splitlines() if ln.strip()][-1:]
    return False, f"it failed otherwise: {last[0][:200] if last else outcome.summary}"


def report_repro(s: Session, made: CompileRepro | None) -> str:
    """AOT807 for a repro the minifier wrote (kept in --artifacts DIR when given); the clause
    for the compile stage's detail ('' when the rung did not run)."""
    if made is None:
        return ""
    if made.repro is None:
        return made.summary()
    where = made.repro
    if s.opts.artifacts:
        from aotipre.triage.artifacts import write_compile_repro

        try:
            where = write_compile_repro(s.model.name, made.repro, s.opts.artifacts)
        except OSError as exc:
            made.note = f"{made.note}; not kept in {s.opts.artifacts}: {exc}".lstrip("; ")
    size = f" ({made.nodes[0]} -> {made.nodes[1]} nodes)" if made.nodes else ""
    proof = (
        f"it fails again with {made.check_str} in a fresh process"
        if made.verified
        else f"it did not fail with {made.check_str} when run again: {made.note}"
    )
    s.add(
        "AOT807",
        f"the AOTI minifier wrote a minimal repro of the failed compile{size}: {where}; {proof}",
        stage="compile",
        hint="attach repro.py (and repro_exported_program.pt2 beside it) to a bug report"
        if s.opts.artifacts
        else "keep it with --artifacts DIR (aotipre's work folder is removed after the check)",
    )
    return made.summary()
