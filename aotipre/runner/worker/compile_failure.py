"""The facts of a failed aoti_compile_and_package, recorded in the worker while the exception
and its frames still exist: the exception chain's types, the FX node that was being lowered
(its model source line, its inputs' shapes and dtypes), the C++ compiler's first error and the
generated line it names, the data-dependent expression and its symbols, the dtype or op the
compile has no support for. The parent classifies them (aotipre/runner/compile_classes.py);
nothing here guesses a class."""

from __future__ import annotations

import os
import re
import sys
from typing import Any

import torch

MAX_CHAIN = 8
"""Exceptions of a chain recorded at most (InductorError -> inner -> its cause ...)."""
MAX_TEXT = 600
"""Characters kept of any one recorded text (a message line, a command, a stack trace)."""
MAX_SOURCE_BYTES = 8 * 1024 * 1024
"""A generated source larger than this is not read (its line is not quoted)."""

_COMPILER_ERROR = re.compile(r"^(?P<file>\S+?):(?P<line>\d+):(?:(?P<col>\d+):)? (?:fatal )?error: ")
_FUNCTION = re.compile(r"\b(?P<name>(?:cpp|triton)_\w+)\s*\(")
_TARGET = re.compile(r"^\s*target: (?P<target>\S+)", re.MULTILINE)
_GENERATED_PY = re.compile(
    r"Failed to import (?P<file>\S+\.py)\n(?P<error>(?:SyntaxError|IndentationError|NameError)"
    r": [^\n]*?\(\S+, line (?P<line>\d+)\))"
)
"""A generated Python module (Triton kernels, CUDA's autotuning code block) that did not import:
`Failed to import PATH.py` then Python's `SyntaxError: invalid syntax (NAME.py, line N)`
(torch/_inductor/codecache.py's PyCodeCache, measured on torch 2.11.0+cu130 with
`triton.inject_relu_bug_TESTING_ONLY="compile_error"`)."""
_TRITON_DEF = re.compile(r"^def (?P<name>triton_\w+)\s*\(")
_NO_KERNEL_FOR_DTYPE = re.compile(r'"(?P<kernel>\w+)" not implemented for \'(?P<dtype>\w+)\'')
"""ATen's words for a kernel with no case for a dtype (AT_DISPATCH: `"sum_cpu" not implemented
for 'Float8_e4m3fn'`; the dtype is c10's ScalarType name)."""
_NO_META_KERNEL = re.compile(
    r"^(?P<op>\w+::[\w.]+): attempted to run this operator with Meta tensors, but there was no "
    r"fake impl or Meta kernel registered"
)
"""torch's words for an op the compile cannot run on fake tensors (torch/_subclasses/
fake_tensor.py; measured on 2.13-2.15 for a sparse layout's aten::_to_dense)."""


def _clip(text: object, limit: int = MAX_TEXT) -> str:
    out = str(text)
    return out if len(out) <= limit else out[: limit - 3] + "..."


def exception_chain(exc: BaseException) -> list[BaseException]:
    """`exc` and what it wraps: InductorError's `inner_exception`, then each `__cause__` (or
    the implicit `__context__`), without repeats, at most MAX_CHAIN."""
    chain: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in chain and len(chain) < MAX_CHAIN:
        chain.append(current)
        inner = getattr(current, "inner_exception", None)
        if not isinstance(inner, BaseException):
            inner = current.__cause__ or current.__context__
        current = inner
    return chain


def _described(exc: BaseException) -> dict[str, Any]:
    kind = type(exc)
    first = next((line.strip() for line in str(exc).splitlines() if line.strip()), "")
    return {
        "type": kind.__name__,
        "module": kind.__module__,
        "bases": [c.__name__ for c in kind.__mro__[1:] if c not in (object, BaseException)],
        "message": _clip(first),
    }


def _tensor_meta(value: Any) -> dict[str, Any] | None:
    if isinstance(value, torch.Tensor):
        return {"shape": [str(d) for d in value.shape], "dtype": str(value.dtype)}
    return None


def _source_lines(stack_trace: str, limit: int = 4) -> list[str]:
    """The last frames of a node's `stack_trace` meta: `File "m.py", line 12, in forward`
    and the code line under it, as 'm.py:12 in forward: code'."""
    lines = [line.rstrip() for line in stack_trace.splitlines() if line.strip()]
    frames: list[str] = []
    for i, line in enumerate(lines):
        m = re.match(r'\s*File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<fn>\S+)', line)
        if m is None:
            continue
        code = lines[i + 1].strip() if i + 1 < len(lines) and "File " not in lines[i + 1] else ""
        where = f"{m['file']}:{m['line']} in {m['fn']}"
        frames.append(f"{where}: {code}" if code else where)
    return [_clip(f, 300) for f in frames[-limit:]]


def node_facts(node: Any) -> dict[str, Any]:
    """An FX node: its name, its op, its inputs' shapes and dtypes, the model lines it came
    from (its `stack_trace` meta, kept by export and Inductor)."""
    target = node.target
    op = str(target) if not callable(target) else str(getattr(target, "__name__", target))
    if isinstance(target, torch._ops.OpOverload):
        op = f"{target.namespace}.{target._schema.name.split('::')[-1]}.{target._overloadname}"
    inputs = []
    for arg in node.all_input_nodes[:8]:
        meta = _tensor_meta(arg.meta.get("val"))
        if meta is not None:
            inputs.append({"name": arg.name, **meta})
    stack = str(node.meta.get("stack_trace") or "")
    return {
        "name": node.name,
        "op": op,
        "inputs": inputs,
        "source": _source_lines(stack),
    }


def lowered_node(chain: list[BaseException]) -> Any:
    """The FX node Inductor was lowering when the failure was raised: the `n` of the deepest
    `GraphLowering.run_node` frame in the chain's tracebacks (Inductor resets its
    `current_node` while the exception unwinds; the frames keep it)."""
    found = None
    for exc in chain:
        tb = exc.__traceback__
        while tb is not None:
            frame = tb.tb_frame
            if frame.f_code.co_name == "run_node":
                owner = frame.f_locals.get("self")
                candidate = frame.f_locals.get("n")
                if type(owner).__name__ == "GraphLowering" and isinstance(candidate, torch.fx.Node):
                    found = candidate
            tb = tb.tb_next
    return found


def raise_site(exc: BaseException) -> str:
    """Where `exc` was raised: `torch/_inductor/lowering.py:7301 in _validate_dim` (the path
    from `torch/` on when inside torch), '' without a traceback."""
    tb = exc.__traceback__
    if tb is None:
        return ""
    while tb.tb_next is not None:
        tb = tb.tb_next
    code = tb.tb_frame.f_code
    path = code.co_filename
    marker = f"{os.sep}torch{os.sep}"
    if marker in path:
        path = "torch" + os.sep + path.rsplit(marker, 1)[1]
    return f"{path}:{tb.tb_lineno} in {code.co_name}"


def _read_lines(path: str) -> list[str]:
    try:
        if os.path.getsize(path) > MAX_SOURCE_BYTES:
            return []
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read().splitlines()
    except OSError:
        return []


def compiler_error(output: str) -> dict[str, Any]:
    """The C++ compiler's first `error:` line in `output`, the generated file and line it names,
    that line's text and the generated function it is in (`cpp_fused_mul_relu_1`: the ops
    Inductor fused into it)."""
    found: dict[str, Any] = {}
    for line in output.splitlines():
        m = _COMPILER_ERROR.match(line.strip())
        if m is None:
            if "error:" in line and "error" not in found:
                found["error"] = _clip(line.strip())
            continue
        found = {"error": _clip(line.strip()), "file": m["file"], "line": int(m["line"])}
        break
    if "file" not in found:
        return found
    lines = _read_lines(found["file"])
    number = found["line"]
    if 0 < number <= len(lines):
        found["code"] = _clip(lines[number - 1].strip(), 300)
        for text in reversed(lines[:number]):
            if text.startswith(("extern ", "void ", "static ")) or text.startswith("template"):
                m = _FUNCTION.search(text)
                if m is not None:
                    found["function"] = m["name"]
                    break
    if "function" not in found:
        m = re.search(r"In function [‘'`]\S* ?(?P<name>(?:cpp|triton)_\w+)\(", output)
        if m is not None:
            found["function"] = m["name"]
    return found


def generated_python_error(text: str) -> dict[str, Any]:
    """The error of a generated Python module that did not import (`text`: an exception's
    message): the error, the generated line it names and that line's text, and the Triton
    kernel (`def triton_...`) it is in; {} when `text` names none."""
    m = _GENERATED_PY.search(text)
    if m is None:
        return {}
    found: dict[str, Any] = {"error": _clip(m["error"]), "line": int(m["line"])}
    lines = _read_lines(m["file"])
    number = found["line"]
    if 0 < number <= len(lines):
        found["code"] = _clip(lines[number - 1].strip(), 300)
        for line in reversed(lines[:number]):
            d = _TRITON_DEF.match(line)
            if d is not None:
                found["function"] = d["name"]
                break
    return found


def fused_nodes(function: str, graph: Any, limit: int = 6) -> list[dict[str, Any]]:
    """The nodes of the model's graph whose op names the generated function's name joins
    (`cpp_fused_mul_relu_1` -> the graph's `mul` and `relu` nodes): Inductor names a fused
    kernel after the original ATen ops of the nodes it fuses. At most `limit` nodes."""
    m = re.fullmatch(r"(?:cpp|triton)_(?:\w+?_)?fused_(?P<ops>.+?)_\d+", function)
    if m is None or graph is None:
        return []
    names = set(m["ops"].split("_"))
    nodes = []
    for node in graph.nodes:
        target = node.target
        if node.op != "call_function" or not isinstance(target, torch._ops.OpOverload):
            continue
        if target._schema.name.split("::")[-1] in names:
            nodes.append(node_facts(node))
            if len(nodes) >= limit:
                break
    return nodes


def _origin_nodes(chain: list[BaseException]) -> list[Any]:
    """The FX nodes the IR or scheduler node being handled when the failure was raised came
    from (its `origins`), from the deepest frame of the chain's tracebacks that holds one: code
    generation runs after lowering, where no `run_node` frame names the node."""
    ir_node = getattr(sys.modules.get("torch._inductor.ir"), "IRNode", None)
    scheduled = getattr(sys.modules.get("torch._inductor.scheduler"), "BaseSchedulerNode", None)
    kinds = tuple(k for k in (ir_node, scheduled) if isinstance(k, type))
    found: list[Any] = []
    for exc in chain:
        tb = exc.__traceback__
        while tb is not None and kinds:
            for value in list(tb.tb_frame.f_locals.values()):
                if not isinstance(value, kinds):
                    continue
                try:  # a box delegates its attributes to what it holds
                    scheduler_node = isinstance(scheduled, type) and isinstance(value, scheduled)
                    holder = getattr(value, "node", None) if scheduler_node else value
                    origins = list(getattr(holder, "origins", None) or ())
                except Exception:
                    continue
                if origins and all(isinstance(o, torch.fx.Node) for o in origins):
                    found = origins
            tb = tb.tb_next
    return found


def _touches(node: Any, dtype: torch.dtype) -> tuple[bool, bool]:
    """(an input of `node` has `dtype`, its output has it)."""

    def has(value: Any) -> bool:
        leaves = value if isinstance(value, (list, tuple)) else [value]
        return any(isinstance(v, torch.Tensor) and v.dtype == dtype for v in leaves)

    reads = any(has(arg.meta.get("val")) for arg in node.all_input_nodes)
    return reads, has(node.meta.get("val"))


def unsupported_dtype_or_op(chain: list[BaseException], graph: Any = None) -> dict[str, Any]:
    """The dtype or op the compile has no support for on its device, when the chain says so by
    its types: a KeyError whose key is a torch.dtype (an Inductor or AOTInductor table without
    that dtype: `DTYPE_TO_COMPUTATION_DTYPE`, the proxy executor's serializer), ATen's
    `"<kernel>" not implemented for '<ScalarType>'`, an op with no fake (Meta) kernel. With the
    ops on that dtype: the nodes the failing IR came from first, else the graph's; {} when the
    chain says none of these."""
    found: dict[str, Any] = {}
    dtype: torch.dtype | None = None
    for e in chain:
        if isinstance(e, KeyError) and e.args and isinstance(e.args[0], torch.dtype):
            dtype = e.args[0]
            found = {"dtype": str(dtype), "exc_type": "KeyError"}
            break
        m = _NO_KERNEL_FOR_DTYPE.search(str(e)) if isinstance(e, NotImplementedError) else None
        if m is not None:
            found = {
                "dtype": _clip(m["dtype"], 60),
                "kernel": _clip(m["kernel"], 120),
                "exc_type": type(e).__name__,
            }
            break
        m = _NO_META_KERNEL.match(str(e)) if isinstance(e, NotImplementedError) else None
        if m is not None:
            found = {"op": _clip(m["op"], 200), "exc_type": type(e).__name__}
            break
    if not found:
        return found
    lowered = lowered_node(chain)
    every = [n for n in (graph.nodes if graph is not None else ()) if n.op == "call_function"]
    for candidates in ([lowered] if lowered is not None else [], _origin_nodes(chain), every):
        nodes = _on(candidates, dtype, found.get("op", ""))
        if nodes:
            found["nodes"] = [node_facts(n) for n in nodes[:3]]
            break
    return found


def _on(candidates: list[Any], dtype: torch.dtype | None, op: str) -> list[Any]:
    """The nodes of `candidates` that compute on `dtype` (read it, else make it: an output or a
    dtype argument), or that call `op` (`aten::_to_dense`)."""
    if dtype is not None:
        reading = [n for n in candidates if _touches(n, dtype)[0]]
        return reading or [
            n
            for n in candidates
            if _touches(n, dtype)[1] or any(a is dtype for a in (*n.args, *n.kwargs.values()))
        ]
    if op:
        name = op.replace("::", ".").split(".")[:2]
        return [
            n
            for n in candidates
            if isinstance(n.target, torch._ops.OpOverload)
            and n.target._schema.name.split("::") == name
        ]
    return []


def failure_facts(exc: BaseException, graph: Any = None) -> dict[str, Any]:
    """What the failed compile's exception says, as JSON-able data (see the module docstring);
    `graph`: the ExportedProgram's graph, to name the nodes a generated kernel fused."""
    chain = exception_chain(exc)
    facts: dict[str, Any] = {"chain": [_described(e) for e in chain]}
    raised = raise_site(chain[-1])
    if raised:
        facts["raised_at"] = raised
    node = lowered_node(chain)
    if node is not None:
        facts["node"] = node_facts(node)
    for e in chain:
        m = _TARGET.search(str(e))
        if m is not None and type(e).__name__ in (
            "LoweringException",
            "MissingOperatorWithoutDecomp",
            "MissingOperatorWithDecomp",
        ):
            facts["target"] = m["target"]
            cause = str(e).split("\n", 1)[0]
            facts["cause"] = _clip(cause)
            break
    for e in chain:
        output = getattr(e, "output", None)
        cmd = getattr(e, "cmd", None)
        if isinstance(output, (str, bytes)) and cmd is not None:
            text = output.decode("utf-8", "replace") if isinstance(output, bytes) else output
            cpp = compiler_error(text)
            cpp["command"] = _clip(" ".join(map(str, cmd)) if isinstance(cmd, list) else cmd)
            if cpp.get("function"):
                cpp["nodes"] = fused_nodes(cpp["function"], graph)
            facts["cpp"] = cpp
            break
    for e in chain:
        generated = generated_python_error(str(e))
        if generated:
            if generated.get("function"):
                generated["nodes"] = fused_nodes(generated["function"], graph)
            facts["generated_py"] = generated
            break
    for e in chain:
        cond = getattr(e, "cond", None)
        if type(e).__name__ == "GuardOnDataDependentSymNode" and cond is not None:
            symbols = sorted(str(s) for s in getattr(cond, "free_symbols", ()))
            facts["guard"] = {"expression": _clip(cond), "symbols": symbols}
            break
    unsupported = unsupported_dtype_or_op(chain, graph)
    if unsupported:
        facts["unsupported"] = unsupported
    return facts
