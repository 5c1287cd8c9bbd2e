"""The class of a failed compile (issue #44): which part of aoti_compile_and_package failed,
where in the model, and what to do next. Classified by the exception chain's types first (the
worker's facts, aotipre/runner/worker/compile_failure.py, or the `Inner: ` type names that
InductorError's message starts with), by message patterns second; a failure neither names is
unknown, never a guessed class. Torch-free: the class names are data (torch/_inductor/exc.py,
the same in 2.11-2.15; 2.14 adds XPUCompileError)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from aotipre.pt2.dtypes import ALL_DTYPES, canonical

WRAPPERS = frozenset(
    {"InductorError", "BackendCompilerFailed", "ShortenTraceback", "TorchDynamoException"}
)
"""Exception types that only wrap the real failure (InductorError's MRO)."""

CLASS_BY_TYPE: dict[str, str] = {
    "LoweringException": "lowering",
    "SubgraphLoweringException": "lowering",
    "MissingOperatorWithoutDecomp": "missing_lowering",
    "MissingOperatorWithDecomp": "missing_lowering",
    "CppCompileError": "cpp_compile",
    "CUDACompileError": "cpp_compile",
    "XPUCompileError": "cpp_compile",
    "CppWrapperCodegenError": "wrapper_codegen",
    "NoTritonConfigsError": "triton",
    "NoValidChoicesError": "triton",
    "PTXASError": "triton",
    "OutOfResources": "triton",
    "CompilationError": "triton",
    "GuardOnDataDependentSymNode": "data_dependent",
    "InvalidCxxCompiler": "toolchain",
    "TritonMissing": "toolchain",
    "GPUTooOldForTriton": "toolchain",
}
"""Inner exception type -> class. `CompilationError` counts only from a `triton` module."""

CLASS_BY_MESSAGE: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("missing_lowering", re.compile(r"^missing (?:lowering|decomposition)\n\s+target: ", re.M)),
    ("cpp_compile", re.compile(r"^C\+\+ compile error$", re.M)),
    ("wrapper_codegen", re.compile(r"C\+\+ wrapper codegen error: ")),
    (
        "triton",
        re.compile(
            r"No (?:valid )?triton configs|out of resource: shared memory|PTXAS error|"
            r"ptxas fatal|NoValidChoicesError|"
            r"Failed to import \S+\.py\n(?:SyntaxError|IndentationError|NameError): "
        ),
    ),
    (
        "data_dependent",
        re.compile(
            r"Could not (?:guard on|extract specialized integer from) data-dependent expression"
        ),
    ),
    (
        "toolchain",
        re.compile(
            r"No working C\+\+ compiler found|^Compiler: .+ is not found\.|"
            r"Cannot find a working triton installation|too old to be supported by the triton",
            re.M,
        ),
    ),
    (
        "unsupported",
        re.compile(
            r"^(?:[A-Z]\w*: )*KeyError: torch\.(?:" + "|".join(sorted(ALL_DTYPES)) + r")$|"
            r'"\w+" not implemented for \'\w+\'|'
            r"attempted to run this operator with Meta tensors, but there was no fake impl",
            re.M,
        ),
    ),
    ("lowering", re.compile(r"^\s+target: \S+$", re.M)),
)
"""Message patterns (torch/_inductor/exc.py, runtime/triton_heuristics.py, select_algorithm.py,
Triton's own words) for a failure whose types are not known; the first that matches wins.
`unsupported`: a dtype as the KeyError of a table (`KeyError: torch.quint8`), ATen's kernel without
that dtype, an op without a fake kernel. `lowering` last and only with an operator block
(`  target: aten...`)."""

CODES = {
    "lowering": "AOT540",
    "missing_lowering": "AOT541",
    "cpp_compile": "AOT542",
    "wrapper_codegen": "AOT543",
    "triton": "AOT544",
    "data_dependent": "AOT545",
    "toolchain": "AOT546",
    "unsupported": "AOT547",
}
"""Class -> finding code (aotipre/findings/codes.py); an unknown failure stays AOT501."""

_LEADING_TYPES = re.compile(r"^([A-Z][A-Za-z0-9_]*): ")
"""A type name at the start of a message: `str(InductorError)` is `<Inner>: <inner message>`."""


@dataclass(frozen=True)
class CompileClass:
    """What a failed compile was, in the model's terms."""

    kind: str
    """lowering, missing_lowering, cpp_compile, wrapper_codegen, triton, data_dependent,
    toolchain, unsupported (a dtype or op not supported on the device), or unknown."""
    exc_type: str
    """The inner exception type the class was read from (`CppCompileError`), '' when only the
    message told it."""
    what: str
    """The failure in one clause (`the generated C++ does not compile: ...`)."""
    where: str
    """Where in the model ('' when the failure names no node): the FX node, its op, its inputs'
    shapes and dtypes, the model's source line."""
    hint: str
    """The next step for this failure."""
    evidence: tuple[str, ...] = ()

    @property
    def code(self) -> str:
        return CODES.get(self.kind, "AOT501")


def _chain_types(
    facts: dict[str, Any], exc_type: str | None, message: str
) -> list[tuple[str, str]]:
    """(type, module) of each exception in the chain: the worker's facts, else the recorded
    type and the `Inner: ` names InductorError's message starts with."""
    chain = facts.get("chain")
    if isinstance(chain, list) and chain:
        return [
            (str(e.get("type", "")), str(e.get("module", ""))) for e in chain if isinstance(e, dict)
        ]
    types = [(exc_type or "", "")]
    rest = message
    while True:
        m = _LEADING_TYPES.match(rest)
        if m is None:
            break
        types.append((m.group(1), ""))
        rest = rest[m.end() :]
    return types


def _type_class(name: str, module: str) -> str | None:
    kind = CLASS_BY_TYPE.get(name)
    if name == "CompilationError" and module and "triton" not in module:
        return None  # another library's CompilationError
    return kind


def _unsupported_type(facts: dict[str, Any], message: str) -> str:
    """The exception type that says the compile has no support for a dtype or op: the worker's
    record of one (read from the exception: a KeyError keyed by a torch.dtype, ATen's kernel
    without the dtype, an op without a fake kernel), else the message's own words; ''."""
    unsupported = facts.get("unsupported")
    if isinstance(unsupported, dict) and unsupported:
        return str(unsupported.get("exc_type") or "KeyError")
    pattern = dict(CLASS_BY_MESSAGE)["unsupported"]
    m = pattern.search(message)
    if m is None:
        return ""
    return "KeyError" if "KeyError: torch." in m.group(0) else "NotImplementedError"


def _class_of(types: list[tuple[str, str]], message: str, facts: dict[str, Any]) -> tuple[str, str]:
    real = [(n, m) for n, m in types if n and n not in WRAPPERS]
    if real:
        name, module = real[0]
        kind = _type_class(name, module)
        if kind == "lowering":
            # what the lowering raised, when it is itself a class (autotuning, a data-dependent
            # guard, a missing toolchain, a dtype the device lacks), says more than "lowering
            # failed"
            for inner, inner_module in real[1:]:
                deeper = _type_class(inner, inner_module)
                if deeper not in (None, "lowering"):
                    return deeper, inner
            unsupported = _unsupported_type(facts, message)
            if unsupported:
                return "unsupported", unsupported
        if kind is not None:
            return kind, name
        if name in ("KeyError", "NotImplementedError") and _unsupported_type(facts, message):
            return "unsupported", name
        # the first real exception decides; its message may still tell the class
    for kind, pattern in CLASS_BY_MESSAGE:
        if pattern.search(message):
            return kind, ""
    return "unknown", ""


def node_location(node: dict[str, Any] | None) -> str:
    """`node relu (aten.relu.default; inputs addmm: [4, 8] float32) at m.py:12 in forward: ...`."""
    if not isinstance(node, dict) or not node.get("name"):
        return ""
    inputs = ", ".join(
        f"{i.get('name')}: [{', '.join(map(str, i.get('shape') or []))}] "
        f"{str(i.get('dtype', '')).replace('torch.', '')}"
        for i in node.get("inputs") or []
        if isinstance(i, dict)
    )
    head = f"node {node['name']} ({node.get('op', '?')}" + (
        f"; inputs {inputs})" if inputs else ")"
    )
    source = node.get("source") or []
    return head + (f" at {source[-1]}" if source else ", no model source line recorded")


def _first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "")


def _strip_types(line: str) -> str:
    """`InductorError: LoweringException: AssertionError: x` -> `AssertionError: x` (the
    wrappers' names say nothing)."""
    while True:
        m = _LEADING_TYPES.match(line)
        if m is None or m.group(1) not in WRAPPERS | set(CLASS_BY_TYPE):
            return line
        line = line[m.end() :]


def _check_example(guard: dict[str, Any]) -> str:
    symbols = [s for s in guard.get("symbols") or [] if re.fullmatch(r"u\d+", str(s))]
    sym = symbols[0] if symbols else "the value"
    return (
        f"torch._check(...) on {sym} right after the model line that produces it (an .item(), "
        f".nonzero() or .tolist() result), stating what the model guarantees about "
        f"`{guard.get('expression', '?')}`, e.g. torch._check({sym} > 1) or torch._check({sym} == 1)"
    )


def classify_compile_class(
    facts: dict[str, Any] | None, exc_type: str | None, message: str | None
) -> CompileClass:
    """The class of a compile that raised (`facts`: the worker's record of it, when it made one;
    `exc_type`/`message`: the step's recorded error)."""
    facts = facts if isinstance(facts, dict) else {}
    text = message or ""
    kind, inner = _class_of(_chain_types(facts, exc_type, text), text, facts)
    where = node_location(facts.get("node"))
    line = _strip_types(_first_line(text)) or (exc_type or "the compile failed")
    evidence: list[str] = []
    if kind == "lowering":
        target = facts.get("target") or _target_in(text) or "an op"
        cause = _strip_types(str(facts.get("cause") or line)).strip().rstrip(":")
        raised = f", raised at {facts['raised_at']}" if facts.get("raised_at") else ""
        what = f"Inductor's lowering of {target} failed ({cause}{raised})"
        hint = (
            "an Inductor bug, not a model error: report it to PyTorch with the op, its input "
            "shapes and dtypes (the finding names them); to ship now, express that model line "
            "with other ops or use a torch version whose lowering works"
        )
    elif kind == "missing_lowering":
        target = facts.get("target") or _target_in(text) or "an op"
        what = f"Inductor has no lowering for {target} and the compile may not fall back to ATen"
        hint = (
            "compile with implicit_fallbacks=True (torch's default), or register a lowering or "
            "a decomposition for the op"
        )
    elif kind == "cpp_compile":
        cpp = facts.get("cpp") if isinstance(facts.get("cpp"), dict) else {}
        error = cpp.get("error") or _compiler_error_in(text) or "the C++ compiler failed"
        error = re.sub(r"^\S*/(?=[^/\s]+:\d+:)", "", error)  # the generated file's name only
        what = f"the generated C++ does not compile: {error}"
        generated = []
        if cpp.get("code"):
            generated.append(f"generated line {cpp.get('line')}: `{cpp['code']}`")
        if cpp.get("function"):
            generated.append(f"in {cpp['function']}")
        if generated:
            what += f" ({' '.join(generated)})"
        nodes = [n for n in cpp.get("nodes") or [] if isinstance(n, dict)]
        if not where and nodes:
            where = "; ".join(node_location(n) for n in nodes[:3])
            where = f"from the model's {where}" if len(nodes) == 1 else f"fused from {where}"
        evidence += [str(cpp[k]) for k in ("error", "command") if cpp.get(k)]
        hint = (
            "Inductor generated code this compiler rejects: check the compiler is one this "
            "torch supports (g++ or clang++ of its build, C++17/20) and that no inductor config "
            "injects a bug (cpp.inject_*_TESTING_ONLY); else report it to PyTorch with the "
            "generated line and the model line"
        )
    elif kind == "wrapper_codegen":
        what = f"AOTInductor's C++ wrapper generation failed ({line})"
        hint = "an AOTInductor limitation or bug: report it to PyTorch with the model line"
        if "C++ codegen is disabled" in text:
            hint = (
                "AOTInductor's wrapper is C++: compile without the disable_cpp_codegen inductor "
                "config, which turns Inductor's C++ backend off"
            )
    elif kind == "triton":
        generated = facts.get("generated_py")
        generated = generated if isinstance(generated, dict) else {}
        what = f"Triton or autotuning could not produce a kernel ({line})"
        hint = (
            "a kernel needs more than this GPU offers or Triton rejected it: compile on the "
            "GPU the package is for with the Triton this torch pins; else report it to PyTorch"
        )
        if generated.get("error"):
            kernel = generated.get("function") or "a generated Triton kernel"
            what = f"the generated Triton kernel {kernel} does not compile: {generated['error']}"
            if generated.get("code"):
                what += f" (generated line {generated.get('line')}: `{generated['code']}`)"
            nodes = [n for n in generated.get("nodes") or [] if isinstance(n, dict)]
            if not where and nodes:
                where = "; ".join(node_location(n) for n in nodes[:3])
                where = f"from the model's {where}" if len(nodes) == 1 else f"fused from {where}"
            hint = (
                "Inductor generated Triton code that does not compile: check that no inductor "
                "config injects a bug (triton.inject_*_TESTING_ONLY); else report it to PyTorch "
                "with the generated line and the model line"
            )
    elif kind == "data_dependent":
        guard = facts.get("guard") if isinstance(facts.get("guard"), dict) else {}
        if not guard:
            m = re.search(r"data-dependent expression (.+?) \(unhinted", text)
            syms = sorted(set(re.findall(r"\bu\d+\b", m.group(1)))) if m else []
            guard = {"expression": m.group(1) if m else "?", "symbols": syms}
        caused = re.search(r"Caused by: \(?(.+?)\)?$", text, re.M)
        what = (
            f"Inductor needed to decide `{guard.get('expression')}` on a data-dependent size "
            f"({', '.join(guard.get('symbols') or []) or 'unbacked'})"
            + (f", in {caused.group(1)}" if caused else "")
        )
        if re.search(r"Could not extract specialized integer from data-dependent", text):
            # Inductor wants the size as a number: no range a torch._check states gives one
            # (measured, torch 2.13: a conv1d over x[:, :, :u] still fails with
            # torch._check(u > 4); over an input whose length is a Dim it compiles)
            hint = (
                f"Inductor needs `{guard.get('expression')}` as a number, which no "
                "torch._check range gives a value read from a tensor: make that length an "
                "input's dynamic dim (torch.export.Dim in dynamic_shapes) instead of an "
                ".item() or .nonzero() result, or pad to a fixed length and mask"
            )
        else:
            hint = _check_example(guard)
    elif kind == "unsupported":
        what, hint, nodes = _unsupported(facts, text, line)
        if not where and nodes:
            where = "; ".join(node_location(n) for n in nodes[:3])
    elif kind == "toolchain":
        what = f"the compile's toolchain is missing or unusable ({line})"
        hint = (
            "install the C++ compiler this torch needs (g++ or clang++ with C++17/20) and point "
            "$CXX or the cpp.cxx config at it; on CUDA, the Triton this torch pins and a GPU of "
            "compute capability 7.0 or newer"
        )
    else:
        what = f"an exception aotipre does not classify ({line})"
        hint = "fix the error quoted in the evidence; the lines name the failing op or C++ line"
    inner = inner or next(
        (t for t, _ in _chain_types(facts, exc_type, text) if t and t not in WRAPPERS), ""
    )
    return CompileClass(kind, inner, what, where, hint, tuple(evidence))


_SCALAR_TYPES = {
    "Byte": "uint8",
    "Char": "int8",
    "ComplexHalf": "complex32",
    "ComplexFloat": "complex64",
    "ComplexDouble": "complex128",
}
"""c10 ScalarType names (ATen's `not implemented for 'Char'`) that are not torch's dtype names
lower-cased or one of their aliases (`Float8_e4m3fn`, `UInt16`, `Float`, `Half`, `QUInt8`)."""


def _dtype_name(name: str) -> str:
    """`torch.float8_e4m3fn`, `Float8_e4m3fn`, `Char` -> `float8_e4m3fn`, `int8`."""
    name = name.removeprefix("torch.")
    return _SCALAR_TYPES.get(name) or canonical(name.lower())


def _unsupported(
    facts: dict[str, Any], text: str, line: str
) -> tuple[str, str, list[dict[str, Any]]]:
    """(what, hint, the nodes on it) of a dtype or op the compile does not support on the
    device, from the worker's facts or the message's own words."""
    record = facts.get("unsupported") if isinstance(facts.get("unsupported"), dict) else {}
    if not record:
        key = re.search(r"^(?:[A-Z]\w*: )*KeyError: (torch\.\w+)$", text, re.M)
        kernel = re.search(r'"(\w+)" not implemented for \'(\w+)\'', text)
        meta = re.search(r"(\w+::[\w.]+): attempted to run this operator with Meta", text)
        if key is not None:
            record = {"dtype": key.group(1), "exc_type": "KeyError"}
        elif kernel is not None:
            record = {"kernel": kernel.group(1), "dtype": kernel.group(2)}
        elif meta is not None:
            record = {"op": meta.group(1)}
    nodes = [n for n in record.get("nodes") or [] if isinstance(n, dict)]
    op = str(nodes[0].get("op")) if nodes else ""
    raised = f", raised at {facts['raised_at']}" if facts.get("raised_at") else ""
    if record.get("op"):
        what = (
            f"the op {record['op']} is not supported by the compile: it has no fake (Meta) "
            f"kernel, so Inductor cannot trace it (NotImplementedError{raised})"
        )
        hint = (
            "keep that op out of the compiled model (run it before or after the package) or "
            "express it with ops the compile supports (dense ones, for a sparse layout); for "
            "an op of your own, register a fake kernel (torch.library.register_fake)"
        )
        return what, hint, nodes
    dtype = _dtype_name(str(record.get("dtype") or "")) or "a dtype"
    on = f"{op} on {dtype}" if op else f"dtype {dtype}"
    if record.get("kernel"):
        how = f"ATen's {record['kernel']} kernel has no case for it (NotImplementedError{raised})"
    elif record.get("dtype"):
        how = f"no table of the compiler has an entry for it (KeyError: torch.{dtype}{raised})"
    else:
        how = line
    what = f"{on} is not supported on this device by the compile: {how}"
    if dtype.startswith(("qint", "quint")):
        hint = (
            f"AOTInductor does not compile quantized tensors ({dtype}): quantize with int8 or "
            "uint8 tensors and explicit scales (torch.ao's PT2E flow exports them so), or run "
            "that op outside the package"
        )
    else:
        hint = (
            f"compute that op in a dtype the device supports: cast its input before it (e.g. "
            f".to(torch.float32) or torch.bfloat16) and the result back after, then export "
            f"again; or compile for a device that supports {dtype}"
        )
    return what, hint, nodes


def _target_in(text: str) -> str:
    m = re.search(r"^\s+target: (\S+)", text, re.M)
    return m.group(1) if m else ""


def _compiler_error_in(text: str) -> str:
    m = re.search(r"^(?:\S+:\d+:\d+: )?(?:fatal )?error: .+", text, re.M)
    return m.group(0).strip() if m else ""


def phase_clause(entry: dict[str, Any]) -> str:
    """`while autotuning > C++ build, peak memory 812 MiB`: what the worker recorded when it
    died ('' when it recorded nothing)."""
    phase = str(entry.get("phase") or "")
    parts = []
    if phase.startswith("compile: "):
        parts.append(f"while {phase.removeprefix('compile: ')}")
    peak = entry.get("peak_rss_mb")
    if isinstance(peak, (int, float)) and peak > 0:
        parts.append(f"peak memory {peak:.0f} MiB")
    return ", ".join(parts)
