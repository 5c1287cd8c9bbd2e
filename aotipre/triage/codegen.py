"""What crash triage reads in generated code and in the ExportedProgram's graph: kernel sources,
their parameters and call sites in wrapper.cpp, the kernels' call order, inductor's source-node
comments, where an index check's variable is loaded from, and the FX nodes a kernel fuses."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from typing import Any

# --------------------------------------------------------------------------------------------
# Generated code


def kernel_source(text: str, kernel: str) -> str | None:
    """The kernel's function in generated code: `extern "C" void <kernel>(...) {...}` in a
    kernel.cpp, the `def <kernel>(...)` Triton function embedded in a wrapper.cpp comment (with
    its decorators), or a top-level `def <kernel>` in a Triton .py file."""
    if not text or kernel not in text:
        return None
    cpp = re.search(r'(?m)^extern "C"\s+\w[\w\s\*]*?\b' + re.escape(kernel) + r"\s*\(", text)
    if cpp:
        body = _braced(text, cpp.start())
        if body:
            return body
    start = text.find(f"async_compile.triton('{kernel}'")
    if start >= 0:
        open_q = text.find("'''", start)
        close_q = text.find("'''", open_q + 3) if open_q >= 0 else -1
        if open_q >= 0 and close_q > open_q:
            block = _dedent(text[open_q + 3 : close_q]).strip("\n")
            m = re.search(r"(?m)^@|^def " + re.escape(kernel), block)
            return block[m.start() :] if m else block
    py = re.search(r"(?m)^(?P<indent>[ \t]*)def " + re.escape(kernel) + r"\(", text)
    if py:
        indent = py.group("indent")
        before = text[: py.start()].splitlines(keepends=True)
        j = len(before)
        while j > 0:
            prev = before[j - 1]
            deeper = prev.startswith(indent) and prev[len(indent) : len(indent) + 1] in (" ", "\t")
            if prev.strip().startswith(("@", ")")) or (deeper and prev.strip()):
                j -= 1
                continue
            break
        while j < len(before) and not before[j].strip().startswith("@"):
            j += 1
        begin = py.start() - sum(len(line) for line in before[j:])
        end = len(text)
        newline = text.find("\n", py.end())
        after = len(text) if newline < 0 else newline + 1
        for m in re.finditer(r"(?m)^(?P<i>[ \t]*)\S", text[after:]):
            if len(m.group("i")) <= len(indent):
                end = after + m.start()
                break
        return _dedent(text[begin:end]).strip("\n")
    return None


def _braced(text: str, start: int) -> str | None:
    open_at = text.find("{", start)
    if open_at < 0:
        return None
    depth = 0
    for i in range(open_at, len(text)):
        c = text[i]
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return text[start : i + 1]
    return None


def _dedent(text: str) -> str:
    import textwrap

    return textwrap.dedent(text)


def kernel_params(source: str) -> list[str]:
    """Parameter names of a cpp or Triton kernel function (`in_ptr0`, `out_ptr0`, `ks0`, ...)."""
    m = re.search(r"\b(?:void\s+\w+|def\s+\w+)\s*\((?P<params>[^)]*)\)", source or "", re.S)
    if not m:
        return []
    out = []
    for part in _split_args(m.group("params")):
        words = re.findall(r"\w+", part.split(":")[0])
        if words:
            out.append(words[-1])
    return out


def kernel_call_args(wrapper: str, kernel: str) -> list[str] | None:
    """The arguments run_impl passes to the kernel, simplified to their names:
    `cpp_fused_x((const int64_t*)(arg1_1.data_ptr()), ...)` -> `arg1_1`;
    `call_triton_x(arg3_1, embed_weight, buf0, ...)` -> `arg3_1`, `embed_weight`, `buf0`."""
    for pattern in (
        r"\bcall_" + re.escape(kernel) + r"\(",
        r"(?<![\w.])" + re.escape(kernel) + r"\(",
    ):
        for m in re.finditer(pattern, wrapper or ""):
            line_start = wrapper.rfind("\n", 0, m.start()) + 1
            prefix = wrapper[line_start : m.start()].strip()
            if prefix and not prefix.endswith(("(", ",", "=")):
                continue  # a declaration (`void k(`, `static inline void call_k(`) or a string
            args = _call_args(wrapper, m.end() - 1)
            if args is None:
                continue
            return [_arg_name(a) for a in args]
    return None


def _call_args(text: str, open_at: int) -> list[str] | None:
    depth = 0
    for i in range(open_at, min(len(text), open_at + 20000)):
        c = text[i]
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
            if depth == 0:
                return _split_args(text[open_at + 1 : i])
    return None


def _split_args(text: str) -> list[str]:
    parts: list[str] = []
    depth = 0
    cur: list[str] = []
    for c in text:
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        if c == "," and depth == 0:
            parts.append("".join(cur).strip())
            cur = []
        else:
            cur.append(c)
    if "".join(cur).strip():
        parts.append("".join(cur).strip())
    return parts


def _arg_name(arg: str) -> str:
    m = re.search(r"\(\s*(\w+)\.data_ptr\(\)\s*\)", arg) or re.search(r"(\w+)\.data_ptr\(\)", arg)
    if m:
        return m.group(1)
    m = re.search(
        r"(?:copy_arrayref_tensor_to_tensor|convert_arrayref_tensor_to_tensor)\((\w+)\)", arg
    )
    if m:
        return m.group(1)
    return arg.strip()


def index_pointer(source: str, variable: str) -> str | None:
    """The kernel parameter an index temporary is loaded from: follows `tmpN` definitions
    (`auto tmp2 = c10::convert<int64_t>(tmp1);`, `tmp4 = tl.where(tmp3, tmp2, tmp0)`) back to
    the load (`in_ptr0[...]`, `tl.load(in_ptr0 + ...)`)."""
    defs: dict[str, str] = {}
    for m in re.finditer(
        r"(?m)^\s*(?:auto\s+|const\s+auto\s+)?(tmp\d+)\s*=\s*(.+?);?\s*$", source or ""
    ):
        defs.setdefault(m.group(1), m.group(2))
    seen: set[str] = set()
    queue = [variable]
    while queue:
        var = queue.pop(0)
        if var in seen or var not in defs:
            continue
        seen.add(var)
        rhs = defs[var]
        ptr = re.search(r"\b(in_ptr\d+|in_out_ptr\d+)\b", rhs)
        if ptr:
            return ptr.group(1)
        queue.extend(re.findall(r"\btmp\d+\b", rhs))
    return None


_CALL = re.compile(
    r"^\s*(?:AOTI_TORCH_ERROR_CODE_CHECK\()?(?:call_)?(?P<name>cpp_fused_\w+|cpp_\w+|triton_\w+"
    r"|aoti_torch_(?:cpu|cuda)_\w+)\(",
    re.MULTILINE,
)


def kernel_call_order(wrapper: str) -> list[str]:
    """Generated kernels and extern ops in the order run_impl calls them (a static launch order:
    what the level-3 printer would print)."""
    text = wrapper or ""
    start = text.find("::run_impl(")
    body = text[start:] if start >= 0 else text
    out: list[str] = []
    for m in _CALL.finditer(body):
        name = m.group("name")
        if name.startswith("aoti_torch_") and any(
            w in name for w in ("_empty_strided", "_delete_", "_get_", "_new_", "_clone")
        ):
            continue
        out.append(name)
    return out


_SOURCE_NODES = re.compile(
    r"(?:Topologically Sorted |Unsorted )?Source Nodes: \[(?P<nodes>[^\]]*)\], "
    r"Original ATen: \[(?P<aten>[^\]]*)\]"
)


def source_node_comment(wrapper: str, kernel: str) -> tuple[list[str], list[str]] | None:
    """The `// Topologically Sorted Source Nodes: [...], Original ATen: [...]` comment that
    inductor writes above a kernel's call in run_impl (CUDA wrappers; Triton sources carry it
    too): the FX node names and ATen ops the kernel fuses."""
    text = wrapper or ""
    for pattern in (
        r"\bcall_" + re.escape(kernel) + r"\(",
        r"(?<![\w.'\"])" + re.escape(kernel) + r"\(",
    ):
        for m in re.finditer(pattern, text):
            line_start = text.rfind("\n", 0, m.start()) + 1
            prefix = text[line_start : m.start()].strip()
            if prefix and not prefix.endswith(("(", ",", "=")):
                continue
            window = text[max(0, line_start - 1500) : line_start]
            found = list(_SOURCE_NODES.finditer(window))
            if found:
                last = found[-1]
                if _COMPUTE_CALL.search(window, last.end()):
                    return None  # the comment is another call's (CPU kernels get none)
                return _names(last.group("nodes")), _names(last.group("aten"))
    return None


_COMPUTE_CALL = re.compile(
    r"(?<![\w.'\"])(?:cpp_fused_\w+|call_triton_\w+|triton_\w+|aoti_torch_(?:cpu|cuda)_\w+"
    r"|aoti_torch_proxy_executor_call_function)\s*\("
)
"""A call that computes (a kernel, an ATen fallback, a custom op), not an allocation: a
source-node comment belongs to the first such call after it."""


def _names(text: str) -> list[str]:
    return [t.strip().strip("'\"") for t in text.split(",") if t.strip()]


# --------------------------------------------------------------------------------------------
# The ExportedProgram's graph (models/<name>.json), for the nodes a kernel fuses


@dataclass(frozen=True)
class FxNode:
    """One call_function node of a serialized ExportedProgram graph."""

    name: str
    op: str
    """`aten.embedding.default`."""
    stack_trace: str | None = None

    @property
    def packet(self) -> str:
        """`embedding` for `aten.embedding.default`."""
        parts = self.op.split(".")
        return (
            parts[1]
            if len(parts) >= 2 and parts[0] in ("aten", "prims", "quantized")
            else parts[-1]
        )

    def source_line(self) -> str | None:
        """The innermost frame of the model's own code: `models.py:125  return self.embed(...)`."""
        if not self.stack_trace:
            return None
        frames = re.findall(r'File "([^"]+)", line (\d+), in (\S+)\n\s*(.*)', self.stack_trace)
        if not frames:
            return None
        own = [f for f in frames if "/torch/" not in f[0] and "site-packages" not in f[0]]
        path, line, func, code = (own or frames)[-1]
        return f"{path}:{line} in {func}: {code.strip()}"


def fx_nodes(model_json: str | bytes | dict[str, Any]) -> list[FxNode]:
    """The call_function nodes of a serialized ExportedProgram (models/<name>.json)."""
    data = json.loads(model_json) if isinstance(model_json, (str, bytes)) else model_json
    graph = ((data or {}).get("graph_module") or {}).get("graph") or {}
    out = []
    for node in graph.get("nodes") or []:
        target = str(node.get("target") or "")
        name = None
        for o in node.get("outputs") or []:
            if isinstance(o, dict):
                t = o.get("as_tensor") or {}
                name = t.get("name") if isinstance(t, dict) else None
                if name is None and isinstance(o.get("as_tensors"), list) and o["as_tensors"]:
                    name = o["as_tensors"][0].get("name")
            if name:
                break
        meta = node.get("metadata") or {}
        op = target.removeprefix("torch.ops.")
        out.append(FxNode(name or op, op, meta.get("stack_trace")))
    return out


_KERNEL_PREFIX = re.compile(
    r"^(?:cpp_fused_|cpp_|triton_(?:poi|per|red|tem|for|spl|unk|mm|bmm)_fused_|triton_\w+?_fused_"
    r"|triton_fused_)"
)


def match_nodes(
    kernel: str, nodes: list[FxNode], names: list[str] | None = None, limit: int = 8
) -> tuple[list[FxNode], str]:
    """The graph nodes a kernel computes. With the source-node names inductor wrote (`names`),
    those nodes; else the nodes whose ATen op names appear in the kernel's descriptive name
    (`cpp_fused_embedding_sum_0` -> embedding, sum). Returns (nodes, how they were matched)."""
    if names:
        by_name = {n.name: n for n in nodes}
        picked = [by_name[n] for n in names if n in by_name]
        if picked:
            return picked[:limit], "the source-node comment of the generated code"
    core = _KERNEL_PREFIX.sub("", kernel)
    core = re.sub(r"_\d+$", "", core)
    tokens = core.split("_")
    picked = []
    for n in nodes:
        op_tokens = n.packet.strip("_").split("_")
        if _contains(tokens, op_tokens):
            picked.append(n)
    how = "the op names in the kernel's name"
    if len(picked) > limit:
        how += f" ({len(picked)} nodes match; the first {limit} shown)"
    return picked[:limit], how


def _contains(tokens: list[str], sub: list[str]) -> bool:
    n = len(sub)
    return any(tokens[i : i + n] == sub for i in range(len(tokens) - n + 1)) if n else False


# -- what an index temporary is, read from its definitions

_SCALAR_DEF = re.compile(
    r"(?m)^[ \t]*(?:auto\s+|const\s+auto\s+)?(tmp\d+)[ \t]*=[ \t]*(\S.*?);?[ \t]*$"
)
# `auto tmp9 =` / `[&]` / `{ ... }` / `()` / `;`: a vectorised kernel's element-wise detour
_LAMBDA_DEF = re.compile(
    r"(?ms)^[ \t]*auto\s+(tmp\d+)\s*=\s*\n\s*\[&\]\s*\{(?P<body>.*?)\n[ \t]*\}\s*\(\)\s*;"
)
_LAMBDA_STORE = re.compile(
    r"^\s*__at_align__ std::array<[\w:]+, \d+> tmpbuf;\s*(?P<src>tmp\d+)\.store\("
    r"tmpbuf\.data\(\)(?:, [^;]*)?\);\s*return tmpbuf;\s*$"
)
_LAMBDA_CAST = re.compile(
    r"^\s*__at_align__ std::array<(?:int64_t|int32_t|long), \d+> tmpbuf;\s*(?:#pragma[^\n]*\n)?"
    r"\s*for \(.*?\)\s*\{\s*tmpbuf\[(?P<i>\w+)\] = "
    r"(?:static_cast<(?:int64_t|int32_t|long)>\((?P<src>tmp\d+)\[(?P=i)\]\)|(?P<raw>tmp\d+)\[(?P=i)\]);"
    r"\s*\}\s*return at::vec::VectorizedN?<(?:int64_t|int32_t|long)(?:,\s*\d+)?>"
    r"::loadu\(tmpbuf\.data\(\)(?:, [^;]*)?\);\s*$"
)
_WRAPPERS = (
    # casts and broadcasts that keep an index's values: (prefix pattern, the argument's group)
    re.compile(r"^(?:c10::convert|static_cast)<[\w:]+>\((?P<x>.*)\)$"),
    re.compile(r"^(?:int64_t|int32_t|long)\((?P<x>.*)\)$"),
    re.compile(r"^at::vec::(?:VectorizedN|Vectorized|VecMask)<[\w:]+(?:,\s*\d+)?>\((?P<x>.*)\)$"),
    re.compile(r"^decltype\(tmp\d+\)\((?P<x>.*)\)$"),
    re.compile(r"^(?P<x>.*)\.template cast<[\w:]+(?:,\s*\d+)?>\(\)$"),
    re.compile(r"^(?P<x>.*)\.to\(tl\.(?:int64|int32)\)$"),
    re.compile(r"^tl\.broadcast_to\((?P<x>tmp\d+), \[[^\]]*\]\)$"),
    re.compile(r"^\((?P<x>.*)\)$"),
)
_LOADS = (
    re.compile(r"^(?P<ptr>in_ptr\d+|in_out_ptr\d+)\[[^;]*\]$"),
    re.compile(
        r"^at::vec::VectorizedN?<(?:int64_t|int32_t|long)(?:,\s*\d+)?>::loadu\("
        r"(?P<ptr>in_ptr\d+|in_out_ptr\d+) \+ [^;]*\)$"
    ),
    re.compile(r"^tl\.load\((?P<ptr>in_ptr\d+|in_out_ptr\d+) \+ [^;]*\)$"),
)
_CONSTANT = re.compile(r"^(?P<n>-?\d+)L?$|^tl\.full\(\[[^\]]*\], (?P<t>-?\d+), tl\.int(?:64|32)\)$")


_INDEX_CHECK = re.compile(r"index out of bounds: 0 <= (?P<var>\w+) < (?P<upper>\d+)L?")


def index_checks(text: str) -> list[tuple[str, int, str]]:
    """(variable, exclusive upper bound, the check verbatim) of every `index out of bounds: 0 <=
    tmpN < SIZE` check in generated code or message in a log, once per variable and bound."""
    out: list[tuple[str, int, str]] = []
    seen: set[tuple[str, int]] = set()
    for m in _INDEX_CHECK.finditer(text or ""):
        key = (m.group("var"), int(m.group("upper")))
        if key not in seen:
            seen.add(key)
            out.append((*key, m.group(0)))
    return out


@dataclass(frozen=True)
class IndexChain:
    """How a bounds-checked index temporary comes from one load of a model input."""

    pointer: str
    """The kernel parameter it is loaded from (`in_ptr0`)."""
    wraps: int | None
    """The row count a negative index is wrapped by (Python indexing: `t[ids]`), or None when
    the index is checked as loaded (an embedding: a negative id is out of bounds)."""


@dataclass(frozen=True)
class _Value:
    kind: str  # "const", "index", "plus", "negative", "wrapped"
    load: str = ""  # the temporary of the index's one load (two loads make a new index)
    pointer: str = ""
    n: int = 0


def index_chain(source: str, variable: str) -> IndexChain | None:
    """What `variable` is when every step from one load of a kernel parameter to it is a copy,
    a cast, a broadcast, a vectorised kernel's round trip through a buffer, or the wrap-around
    of negative indices (`ids < 0 ? ids + rows : ids`, in scalar, vectorised and Triton
    spelling); None when anything else computes it (then a bound on it is not a bound on the
    input's own values). A kernel reuses temporaries' names in each loop: every bounds check of
    `variable` is read with the definitions before it, and all of them must agree."""
    text = source or ""
    checks = [
        m.start()
        for m in re.finditer(r"index out of bounds: 0 <= " + re.escape(variable) + r" <", text)
    ]
    chains = {_chain_at(text, variable, at) for at in checks or [len(text)]}
    return chains.pop() if len(chains) == 1 else None


def _chain_at(source: str, variable: str, before: int) -> IndexChain | None:
    found: list[tuple[int, str, str]] = []
    for m in _LAMBDA_DEF.finditer(source, 0, before):
        body = m.group("body")
        step = _LAMBDA_STORE.match(body) or _LAMBDA_CAST.match(body)
        source_tmp = step and (step.groupdict().get("src") or step.groupdict().get("raw"))
        found.append((m.start(), m.group(1), source_tmp or "<opaque>"))
    for m in _SCALAR_DEF.finditer(source, 0, before):
        found.append((m.start(), m.group(1), m.group(2).strip()))
    defs = {name: rhs for _, name, rhs in sorted(found)}  # the latest definition before the check
    memo: dict[str, _Value | None] = {}

    def value_of(expr: str, depth: int) -> _Value | None:
        expr = expr.strip()
        if depth > 64:
            return None
        if re.fullmatch(r"tmp\d+", expr):
            if expr not in memo:
                memo[expr] = None  # a cycle is no chain
                rhs = defs.get(expr)
                got = None if rhs is None else value_of(rhs, depth + 1)
                if got is not None and got.kind == "load":
                    got = replace(got, kind="index", load=expr)
                memo[expr] = got
            return memo[expr]
        for pattern in _LOADS:
            if m := pattern.fullmatch(expr):
                return _Value("load", pointer=m.group("ptr"))
        if m := _CONSTANT.fullmatch(expr):
            return _Value("const", n=int(m.group("n") or m.group("t")))
        for pattern in _WRAPPERS:
            if (m := pattern.fullmatch(expr)) and _balanced(m.group("x")):
                return value_of(m.group("x"), depth + 1)
        parts = _top_level(expr, (" + ", " < "))
        if parts is not None:
            left, op, right = parts
            a, b = value_of(left, depth + 1), value_of(right, depth + 1)
            if op == " + " and a and b:
                idx, rows = (a, b) if a.kind == "index" else (b, a)
                if idx.kind == "index" and rows.kind == "const" and rows.n > 0:
                    return _Value("plus", idx.load, idx.pointer, rows.n)
            if op == " < " and a and b and a.kind == "index" and b == _Value("const", n=0):
                return _Value("negative", a.load, a.pointer)
            return None
        select = _select(expr)
        if select is not None:
            mask, when_true, when_false = (value_of(e, depth + 1) for e in select)
            if (
                mask is not None
                and when_true is not None
                and when_false is not None
                and mask.kind == "negative"
                and when_true.kind == "plus"
                and when_false.kind == "index"
                and mask.load == when_true.load == when_false.load
            ):
                return _Value("wrapped", mask.load, mask.pointer, when_true.n)
        return None

    found = value_of(variable, 0)
    if found is None or found.kind not in ("index", "wrapped"):
        return None
    return IndexChain(found.pointer, found.n if found.kind == "wrapped" else None)


def _balanced(text: str) -> bool:
    depth = 0
    for c in text:
        depth += c in "([{"
        depth -= c in ")]}"
        if depth < 0:
            return False
    return depth == 0


def _top_level(expr: str, ops: tuple[str, ...]) -> tuple[str, str, str] | None:
    """`left op right` split at the one operator of `ops` outside brackets, if exactly one."""
    depth = 0
    found: list[tuple[int, str]] = []
    for i, c in enumerate(expr):
        depth += c in "([{"
        depth -= c in ")]}"
        if depth == 0:
            found.extend((i, op) for op in ops if expr.startswith(op, i))
    if len(found) != 1:
        return None
    i, op = found[0]
    return expr[:i], op, expr[i + len(op) :]


def _select(expr: str) -> tuple[str, str, str] | None:
    """(mask, value where set, value where not) of `m ? a : b`, `tl.where(m, a, b)` or
    `decltype(x)::blendv(b, a, m)`."""
    if m := re.fullmatch(r"(tmp\d+) \? (tmp\d+) : (tmp\d+)", expr):
        return m.group(1), m.group(2), m.group(3)
    if m := re.fullmatch(r"tl\.where\((tmp\d+), (tmp\d+), (tmp\d+)\)", expr):
        return m.group(1), m.group(2), m.group(3)
    if m := re.fullmatch(r"decltype\(tmp\d+\)::blendv\((tmp\d+), (tmp\d+), (.+)\)", expr):
        return m.group(3), m.group(2), m.group(1)
    return None
