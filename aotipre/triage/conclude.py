"""From the ladder's evidence to a Diagnosis, its findings (family 8) and one stage per step.

A little over the ~600 lines of the other modules: the conclusion reads every step's evidence
(the fault, the printer's values, the kernel's code and its index bounds, the sample's values,
the minifier and the sanitizer) to name one kernel and one cause; the helpers here serve only
that reading, and the parsers and the ladder live in triage/parsers.py and triage/ladder.py.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Any

from aotipre.checks.contract import at_path
from aotipre.findings import Finding, StageResult, StageStatus, codes
from aotipre.foundation.errors import AotipreError, PackageError
from aotipre.inputs.load import load_sample_inputs, load_sample_inputs_bytes
from aotipre.inputs.meta import TensorMeta
from aotipre.inputs.values import IntExtremes, int_extremes
from aotipre.pt2.spec import InputSpec
from aotipre.pt2.wrapper import parse_wrapper_cpp
from aotipre.triage import parsers
from aotipre.triage.diagnosis import Diagnosis, IndexBound, TensorStats
from aotipre.triage.ladder import LADDER
from aotipre.triage.state import StepRun, TriageState, crash_archive, read_generated_code, stage_for

SYNCHRONOUS = ("printer-3", "sync-rerun", "sanitizer")
"""Steps whose kernel attribution is trustworthy (synchronous launches or a memory checker)."""


@dataclass
class Concluded:
    stages: list[StageResult]
    findings: list[Finding]
    diagnosis: Diagnosis | None


@dataclass
class KernelCode:
    """What the generated code tells about one kernel."""

    kernel: str
    source: str | None = None
    source_from: str | None = None
    wrapper: str = ""
    params: list[str] = field(default_factory=list)
    args: list[str] = field(default_factory=list)
    bounds: list[IndexBound] = field(default_factory=list)
    input_names: dict[str, str] = field(default_factory=dict)
    """Graph input name (`arg1_1`) -> model input name (`ids`)."""
    node_names: list[str] = field(default_factory=list)
    aten: list[str] = field(default_factory=list)

    def role(self, arg: str) -> str | None:
        """The kernel parameter an argument is passed as (`in_ptr0`), when the call shows it."""
        if arg in self.args:
            i = self.args.index(arg)
            if i < len(self.params):
                return self.params[i]
        return None


def kernel_code(triage: TriageState, kernel: str) -> KernelCode:
    """Read the kernel's source and call site: from the crashing package first (what is
    deployed), else from the packages the printer steps compiled."""
    cache: dict[str, KernelCode] = triage.kernel_codes
    if kernel in cache:
        return cache[kernel]
    code = KernelCode(kernel)
    packages: list[tuple[str, str]] = [(triage.crash.aoti_package, triage.crash.aoti_model)]
    for sid in ("printer-3", "printer-2", "nan-asserts"):
        run = triage.runs.get(sid)
        if run is not None and run.package:
            packages.append((run.package, "model"))
    for package, model in packages:
        gen = (
            triage.original_code()
            if package == triage.crash.aoti_package
            else read_generated_code(package, model)
        )
        for part in ("kernel", "wrapper"):
            text = gen.get(part, "")
            src = parsers.kernel_source(text, kernel) if text else None
            if src:
                code.source = src
                code.source_from = f"{package}:{gen.get(part + '_member', part)}"
                code.wrapper = gen.get("wrapper", "")
                break
        if code.source:
            break
    if not code.wrapper:
        code.wrapper = triage.original_code().get("wrapper", "")
    code.params = parsers.kernel_params(code.source or "")
    code.args = parsers.kernel_call_args(code.wrapper, kernel) or []
    code.bounds = [
        replace(b, pointer=p, argument=_arg_for(code, p))
        for b in parsers.index_bounds(code.source or "")
        for p in [parsers.index_pointer(code.source or "", b.variable)]
    ]
    code.input_names = _input_names(triage, code.wrapper)
    comment = parsers.source_node_comment(code.wrapper, kernel) or parsers.source_node_comment(
        code.source or "", kernel
    )
    if comment is not None:
        code.node_names, code.aten = comment
    if code.source is not None:  # a later printer build may still hold it
        cache[kernel] = code
    return code


def _arg_for(code: KernelCode, pointer: str | None) -> str | None:
    if pointer is None or pointer not in code.params:
        return None
    i = code.params.index(pointer)
    return code.args[i] if i < len(code.args) else None


def _input_names(triage: TriageState, wrapper: str) -> dict[str, str]:
    names = parse_wrapper_cpp(wrapper).input_names if wrapper else ()
    out = {}
    for i, graph_name in enumerate(names):
        spec = next((s for s in triage.crash.model.tensor_inputs if s.tensor_index == i), None)
        if spec is not None:
            out[graph_name] = spec.name
    return out


def sample_inputs_of(triage: TriageState, kernel: str) -> list[tuple[str, InputSpec]]:
    """The model inputs the kernel reads as they were handed to the model: (graph name, input)
    for each of its pointer arguments that is a graph input no earlier call of run_impl takes
    (so nothing wrote it before the launch). Their statistics come from the sample itself,
    without a recompile. Empty when the call sites cannot be read, the kernel is launched more
    than once (which launch faulted is then unknown), or an earlier call hands tensors over in
    an array (a custom op through the proxy executor)."""
    cache: dict[str, list[tuple[str, InputSpec]]] = triage.sample_inputs
    if kernel in cache:
        return cache[kernel]
    code = kernel_code(triage, kernel)
    out: list[tuple[str, InputSpec]] = []
    calls = parsers.kernel_call_order(code.wrapper)
    body = code.wrapper[max(0, code.wrapper.find("::run_impl(")) :]
    launch = re.search(r"(?<![\w.])(?:call_)?" + re.escape(kernel) + r"\(", body)
    if code.args and code.params and calls.count(kernel) == 1 and launch is not None:
        earlier: set[str] = set()
        if "aoti_torch_proxy_executor_call_function(" in body[: launch.start()]:
            earlier = set(code.args)  # a custom op's tensors go in an array: unseen here
        for name in calls[: calls.index(kernel)]:
            args = parsers.kernel_call_args(code.wrapper, name)
            if args is None:
                earlier = set(code.args)  # cannot tell what it takes
                break
            earlier.update(args)
        specs = {s.tensor_index: s for s in triage.crash.model.tensor_inputs}
        graph = parse_wrapper_cpp(code.wrapper).input_names
        for arg, role in zip(code.args, code.params):
            if not role.startswith(("in_ptr", "in_out_ptr")) or arg in earlier:
                continue
            if arg in graph and (spec := specs.get(graph.index(arg))) is not None:
                if (arg, spec) not in out:
                    out.append((arg, spec))
    cache[kernel] = out
    return out


def kernel_stats(triage: TriageState) -> list[TensorStats]:
    """The faulting kernel's input statistics: the level-2 printer's when it ran (every tensor,
    intermediates included), else those the kernel-inputs step read from the sample."""
    for sid in ("printer-2", "kernel-inputs"):
        run = triage.runs.get(sid)
        if run is not None and run.stats:
            return run.stats
    return []


def kernel_inputs(triage: TriageState, code: KernelCode) -> list[TensorStats]:
    """The tensors the kernel reads, as printed before its launch (level 2) or read from the
    sample; graph inputs fall back to the model-input blocks, which level 2 always prints."""
    stats = kernel_stats(triage)
    own = [s for s in stats if s.kernel == code.kernel and s.when == "before_launch"]
    if not own:
        wanted = set(code.args) or {b.argument for b in code.bounds if b.argument}
        own = [s for s in stats if s.when == "model_input" and s.name in wanted]
    out = []
    for s in own:
        role = code.role(s.name)
        if role is not None and role.startswith("out_ptr"):
            continue  # an output buffer before launch holds garbage
        out.append(replace(s, input=code.input_names.get(s.name, s.input)))
    return out


def _located(
    triage: TriageState, code: KernelCode, bound: IndexBound, source: str | None
) -> tuple[InputSpec, int, tuple[int, ...]] | None:
    """(model input, offending value, where) when the kernel's index is loaded straight from
    the model input `source` (parsers.index_chain) and its sample values, read without
    torch, hold a value outside the bound (the most negative first, else the largest)."""
    values = sample_values(triage, source) if source else None
    chain = parsers.index_chain(code.source or "", bound.variable) if values else None
    if values is None or chain is None:
        return None
    spec, _, ext = values
    if ext.min < (-bound.upper if chain.wraps == bound.upper else 0):
        return spec, ext.min, ext.min_at
    if ext.max >= bound.upper:
        return spec, ext.max, ext.max_at
    return None


def _located_finding(
    located: tuple[InputSpec, int, tuple[int, ...]],
    kernel: str,
    bound: IndexBound,
    evidence: tuple[str, ...],
) -> tuple[str, str, dict[str, Any]]:
    """AOT803 naming the model input, its position, and the value past the bound and where."""
    spec, value, at = located
    message = (
        f"the model input {spec.name} (position {spec.position}) holds {value} at {list(at)}, "
        f"past the {bound.upper} entries kernel {kernel} indexes with it ({bound.line})"
    )
    fields = {
        "input": spec.name,
        "position": spec.position,
        "expected": f"0 <= index < {bound.upper}",
        "actual": value,
        "evidence": (bound.line, *evidence),
    }
    return "AOT803", message, fields


def _violation(bound: IndexBound, stats: list[TensorStats]) -> TensorStats | None:
    for s in stats:
        if s.name != bound.argument or s.max is None:
            continue
        if s.max >= bound.upper or (s.min is not None and s.min < -bound.upper):
            return s
    return None


def sample_values(
    triage: TriageState, input_name: str
) -> tuple[InputSpec, TensorMeta, IntExtremes] | None:
    """The model input `input_name`, its sample tensor's metadata and the extremes of its
    integer values (the inputs file, or the sample stored in the archive), read without torch;
    None when the run used synthesized inputs, the input is not an integer tensor, or the
    values cannot be read."""
    cache: dict[str, tuple[InputSpec, TensorMeta, IntExtremes] | None] = triage.sample_values
    if input_name not in cache:
        cache[input_name] = _read_sample_values(triage, input_name)
    return cache[input_name]


def _read_sample_values(
    triage: TriageState, input_name: str
) -> tuple[InputSpec, TensorMeta, IntExtremes] | None:
    crash = triage.crash
    spec = next((t for t in crash.model.tensor_inputs if t.name == input_name), None)
    where = crash.inputs
    if spec is None:
        return None
    source: str | bytes
    try:
        if where.get("kind") == "file":
            source = str(where["path"])
            sample = load_sample_inputs(source)
        elif where.get("kind") == "member":
            member = str(where["member"])
            with crash_archive(crash, crash.package.path) as archive:
                source = archive.read(member)
            sample = load_sample_inputs_bytes(source, f"{crash.package.path}:{member}")
        else:
            return None
    except (AotipreError, OSError, KeyError):
        return None
    found, meta = at_path(sample, spec.path)
    if not found or not isinstance(meta, TensorMeta):
        return None
    ext = int_extremes(source, meta)
    return (spec, meta, ext) if ext is not None else None


def explanation(triage: TriageState) -> tuple[str, IndexBound | None, TensorStats | None] | None:
    """(kind, bound, offending tensor) when the evidence explains the fault, else None."""
    kernel = triage.kernel()
    if kernel is None or not kernel_stats(triage):
        return None
    code = kernel_code(triage, kernel)
    stats = kernel_inputs(triage, code)
    bounds = code.bounds + _indirect_bounds(code)
    for bound in bounds:
        bad = _violation(bound, stats)
        if bad is not None:
            return "index_out_of_range", bound, bad
    bad_nan = next((s for s in stats if s.has_nonfinite), None)
    if bad_nan is not None:
        return "nonfinite_input", None, bad_nan
    return None


def _indirect_bounds(code: KernelCode) -> list[IndexBound]:
    """Indirect loads with no bounds check (compiled with assert_indirect_indexing off): the
    indexed tensor is a constant of known shape, so its first dim bounds the index."""
    if code.bounds or not code.source:
        return []
    consts = {c.name: c for c in parse_wrapper_cpp(code.wrapper).constants} if code.wrapper else {}
    out = []
    for m in re.finditer(
        r"\b(in_ptr\d+)\s*(?:\+\s*(?:static_cast<int64_t>)?\(|\[)(?P<expr>[^;\n]*?\btmp\d+\b[^;\n]*)",
        code.source,
    ):
        indexed = _arg_for(code, m.group(1))
        const = consts.get(indexed or "")
        if const is None or not const.shape:
            continue
        for var in re.findall(r"\btmp\d+\b", m.group("expr")):
            pointer = parsers.index_pointer(code.source, var)
            if pointer is None or pointer == m.group(1):
                continue
            line = f"unchecked indirect load from {indexed} {list(const.shape)} indexed by {var}"
            out.append(IndexBound(var, const.shape[0], line, pointer, _arg_for(code, pointer)))
            break
    return out


# --------------------------------------------------------------------------------------------


def conclude(triage: TriageState) -> Concluded:
    crash = triage.crash
    model = crash.model.name
    runs = triage.runs
    stages = [stage_for(triage, runs[s.id]) for s in LADDER if s.id in runs]
    findings: list[Finding] = []

    def add(code: str, message: str, **fields: Any) -> None:
        findings.append(codes.get(code).finding(message, model=model, stage="triage", **fields))

    kernel, by, evidence = _named(triage)
    blamed = parsers.blamed_op(triage.first_text)
    misattributed = None
    synchronous = by in SYNCHRONOUS or by == "device-assert"
    if kernel is not None and synchronous and blamed is not None and blamed.name != kernel:
        misattributed = f"{blamed.name}: {blamed.line}" if blamed.line else blamed.name

    ep_missing = not triage.facts.has_exported_program
    if ep_missing:
        sample = triage.runs.get("kernel-inputs")
        wanted = (
            "the statistics of the buffers and weights the faulting kernel reads (its model "
            "inputs were read from the sample)"
            if sample is not None and sample.stats
            else "the faulting kernel's input statistics"
        )
        add(
            "AOT806",
            f"crash triage could not recompile model '{model}' with the debug printer: "
            f"{triage.ep_note}; pass --exported-program FILE for the kernel launch order and "
            f"{wanted}",
        )
    if kernel is None:
        why = _why_unnamed(triage)
        add("AOT805", f"crash triage could not name the faulting kernel: {why}")
        diag = Diagnosis(
            model=model,
            kernel=None,
            identified_by=None,
            evidence=tuple(parsers.decisive(triage.first_text, limit=4)),
            verdict=f"The crash was not pinned to a kernel: {why}.",
            kind="not_reproduced" if "did not reproduce" in why else "unknown",
            first_error=triage.first_error,
            notes=tuple(triage.notes),
            repro=_repro(triage),
        )
        _minify_and_sanitizer_findings(triage, add)
        return Concluded(stages, findings, diag)

    code = kernel_code(triage, kernel)
    stats = kernel_inputs(triage, code)
    explained = explanation(triage)
    kind, bound, bad = explained if explained is not None else ("", None, None)
    if bound is None and code.bounds:
        bound = _bound_in_error(triage, code.bounds) or code.bounds[0]
    nodes, how = _nodes(triage, code)
    fault = runs["printer-3"].fault if "printer-3" in runs else None
    what = _what(code, nodes)
    ops = f" ({what})" if what else ""
    first = triage.first_error
    later = (
        f"; the first error ({_short(misattributed)}) was a later symptom" if misattributed else ""
    )

    located = (
        _located(triage, code, bound, bad.input)
        if kind == "index_out_of_range" and bound is not None and bad is not None and bad.input
        else None
    )
    if kind == "index_out_of_range" and bound is not None and bad is not None:
        label = f"{bad.input} ({bad.name})" if bad.input else bad.name
        lo = f"min {_num(bad.min)}, " if bad.min is not None else ""
        verdict = (
            f"Kernel {kernel}{ops} reads out of bounds: its index input {label}, "
            f"{bad.dtype}[{', '.join(str(d) for d in bad.shape or ())}], holds {lo}max "
            f"{_num(bad.max)}, but the indexed dimension has {bound.upper} entries (valid "
            f"indices 0..{bound.upper - 1}); validate or clamp {bad.input or bad.name} before "
            f"calling the model{later}."
        )
        if located is not None:
            code_, message, fields = _located_finding(located, kernel, bound, (bad.describe(),))
            add(code_, message, **fields)
        else:
            add(
                "AOT803",
                f"the index input {label} of kernel {kernel} holds {_num(bad.max)}, past the "
                f"{bound.upper} entries it indexes ({bound.line})",
                input=bad.input,
                expected=f"0 <= index < {bound.upper}",
                actual=f"min {_num(bad.min)}, max {_num(bad.max)}",
                evidence=(bound.line, bad.describe()),
            )
    elif kind == "nonfinite_input" and bad is not None:
        label = f"{bad.input} ({bad.name})" if bad.input else bad.name
        verdict = (
            f"Kernel {kernel}{ops} receives NaN/Inf in {label} ({bad.describe()}); find where "
            f"they come from (the kernel launched before it: {code_prev(fault)}){later}."
        )
        add(
            "AOT804",
            f"kernel {kernel} receives NaN/Inf in {label}",
            input=bad.input,
            evidence=(bad.describe(),),
        )
    elif bound is not None:
        source = code.input_names.get(bound.argument or "")
        values = sample_values(triage, source) if source else None
        arg = f" (index from {source or bound.argument})" if bound.argument else ""
        verdict = (
            f"Kernel {kernel}{ops} failed its index bounds check `{bound.line}`{arg}: an index "
            f"is outside 0..{bound.upper - 1}; check the index inputs{later}."
        )
        if values is not None:
            spec, _, ext = values
            found = _located(triage, code, bound, source)
            if found is not None:
                _, value, at = found
                kind = "index_out_of_range"
                verdict = (
                    f"Kernel {kernel}{ops} reads out of bounds: the model input {spec.name} "
                    f"(position {spec.position}) holds {value} at {list(at)}, but the indexed "
                    f"dimension has {bound.upper} entries (valid indices 0..{bound.upper - 1}; the "
                    f"input spans {ext.min}..{ext.max}); validate or clamp {spec.name} before "
                    f"calling the model{later}."
                )
                code_, message, fields = _located_finding(found, kernel, bound, ())
                add(code_, message, **fields)
            else:
                verdict = verdict[: -len(f"; check the index inputs{later}.")] + (
                    f"; the kernel computes the index from {spec.name}, whose sample values span "
                    f"{ext.min}..{ext.max}; check how {spec.name} maps to 0..{bound.upper - 1}"
                    f"{later}."
                )
    else:
        shown = "; ".join(s.describe() for s in stats[:3])
        looks = f" Its inputs: {shown}." if shown else ""
        eager = (
            " The ExportedProgram runs eagerly on the same inputs, so the generated code is at "
            "fault: report it to PyTorch with the minified repro (--minify)."
            if crash.eager == "ok"
            else ""
        )
        error = _short(first) if first else crash.failure.summary
        verdict = f"Kernel {kernel}{ops} faults: {error}{later}.{looks}{eager}"
        kind = (
            "memory_fault" if crash.failure.kind in ("segfault", "device_fault") else "kernel_error"
        )

    add(
        "AOT801",
        f"crash triage ({by}): {verdict}",
        evidence=tuple(evidence[:4]),
        actual=kernel,
    )
    if misattributed:
        add(
            "AOT802",
            f"the first error blamed {_short(misattributed)}, but a synchronous run shows "
            f"{kernel} faulting before it: the first error was misattributed (CUDA reports a "
            "device fault at a later call)",
            expected=kernel,
            actual=blamed.name if blamed else None,
            evidence=(first or "",) + tuple(evidence[:2]),
        )
    _minify_and_sanitizer_findings(triage, add)

    source_lines = tuple(dict.fromkeys(line for n in nodes if (line := n.source_line())))
    diag = Diagnosis(
        model=model,
        kernel=kernel,
        identified_by=by,
        evidence=tuple(evidence),
        verdict=verdict,
        kind=kind or "kernel_error",
        kernel_source=code.source,
        kernel_source_from=code.source_from,
        fused_nodes=tuple(n.name for n in nodes) or tuple(code.node_names),
        aten_ops=tuple(code.aten) or tuple(dict.fromkeys(_aten(n.op) for n in nodes)),
        source_lines=source_lines,
        inputs=tuple(stats),
        bound=bound,
        previous_kernel=fault.previous if fault is not None else None,
        launches=fault.tail if fault is not None else (),
        first_error=first,
        misattributed=misattributed,
        repro=_repro(triage),
        notes=tuple(triage.notes) + ((f"fused nodes matched by {how}",) if nodes else ()),
    )
    return Concluded(stages, findings, diag)


def code_prev(fault: parsers.LaunchFault | None) -> str:
    return fault.previous if fault is not None and fault.previous else "unknown"


def _named(triage: TriageState) -> tuple[str | None, str | None, tuple[str, ...]]:
    if triage.crash_named is not None:
        kernel, by, _, evidence = triage.crash_named
        return kernel, by, evidence
    for sid in SYNCHRONOUS:
        run = triage.runs.get(sid)
        if run is not None and run.named:
            return run.named, sid, run.evidence
    # a kernel that faulted while the printer build was compiled (CUDA autotuning)
    for sid in ("printer-3", "printer-2", "nan-asserts"):
        run = triage.runs.get(sid)
        if run is not None and run.named:
            return run.named, sid, run.evidence
    if triage.candidates:
        kernel = triage.candidates[0]
        lines = [
            line
            for line in triage.first_text.splitlines()
            if kernel in line and ("Exception raised from" in line or "Assertion" in line)
        ]
        ev = tuple(
            dict.fromkeys(
                line.strip().replace(" (most recent call first):", "") for line in lines[:2]
            )
        ) or tuple(parsers.decisive(triage.first_text, limit=3))
        return kernel, "first-error", ev
    guesses = triage.guesses()
    if len(guesses) == 1:  # the only kernel whose code holds the check the assertion quotes
        bound = parsers.index_bounds(triage.first_text)[0]
        line = next(
            (x.strip() for x in triage.first_text.splitlines() if bound.line in x), bound.line
        )
        return guesses[0], "assert-message", (line, f"only {guesses[0]} holds this check")
    return None, None, ()


def _why_unnamed(triage: TriageState) -> str:
    p3 = triage.runs.get("printer-3")
    if p3 is None or p3.status is StageStatus.SKIPPED:
        return p3.detail if p3 is not None else "the printer step did not run"
    if p3.status is StageStatus.ERROR:
        return f"the printer build failed ({p3.detail})"
    if p3.run_status == "ok":
        return "the crash did not reproduce with the printer compiled in"
    return "the printer showed no launch without its after_launch (the fault is outside a kernel)"


def _bound_in_error(triage: TriageState, bounds: list[IndexBound]) -> IndexBound | None:
    texts = [triage.first_text] + [r.error_text for r in triage.runs.values()]
    for b in bounds:
        if any(f"0 <= {b.variable} < {b.upper}" in t for t in texts):
            return b
    return None


def _nodes(triage: TriageState, code: KernelCode) -> tuple[list[parsers.FxNode], str]:
    text = _ep_json(triage)
    nodes = parsers.fx_nodes(text) if text else []
    if not nodes:
        return [], ""
    return parsers.match_nodes(code.kernel, nodes, code.node_names or None)


def _ep_json(triage: TriageState) -> str | None:
    if triage.ep_source is None or triage.ep_model is None:
        return None
    try:
        with crash_archive(triage.crash, triage.ep_source) as archive:
            want = f"/models/{triage.ep_model}.json"
            name = next((n for n in archive.names() if n.endswith(want)), None)
            return archive.read_text(name) if name else None
    except (PackageError, OSError, UnicodeDecodeError):
        return None


def _what(code: KernelCode, nodes: list[parsers.FxNode]) -> str:
    ops = list(code.aten) or list(dict.fromkeys(_aten(n.op) for n in nodes))
    ops = [
        o for o in ops if o not in ("aten.view", "aten.unsqueeze", "aten.t", "aten.reshape")
    ] or ops
    where = next((line for n in nodes if (line := n.source_line())), None)
    parts = []
    if ops:
        parts.append(", ".join(ops[:4]))
    if where:
        parts.append("at " + where.split(" in ", 1)[0])
    return " ".join(parts)


def _aten(op: str) -> str:
    parts = op.split(".")
    return ".".join(parts[:2]) if len(parts) >= 2 else op


def _short(text: str | None, limit: int = 160) -> str:
    t = (text or "").strip()
    return t if len(t) <= limit else t[: limit - 3] + "..."


def _num(value: float | None) -> str:
    if value is None:
        return "?"
    if value == int(value) and abs(value) < 1e15:
        return str(int(value))
    return f"{value:.6g}"


def _repro(triage: TriageState) -> str | None:
    run = triage.runs.get("minify")
    return run.extra.get("repro") if run is not None else None


def _minify_and_sanitizer_findings(triage: TriageState, add: Any) -> None:
    mini: StepRun | None = triage.runs.get("minify")
    if mini is not None and mini.extra.get("repro"):
        nodes = mini.extra.get("nodes") or []
        size = f" with {min(nodes)} graph nodes" if nodes else ""
        add("AOT807", f"the AOTI minifier wrote a minimal repro{size}: {mini.extra['repro']}")
    san: StepRun | None = triage.runs.get("sanitizer")
    if san is not None and san.extra.get("sanitizer"):
        first = san.extra["sanitizer"][0]
        where = f" in {first['kernel']}" if first.get("kernel") else ""
        add(
            "AOT808",
            f"compute-sanitizer memcheck: {first['what']}{where}",
            evidence=tuple(san.evidence),
        )
