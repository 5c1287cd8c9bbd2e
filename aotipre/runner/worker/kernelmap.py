"""The kernel launches of an AOTI wrapper.cpp compiled with the intermediate value printer's save
mode (`aot_inductor.debug_intermediate_value_printer="1"`) and provenance tracking: each launch's
kernel, provenance handle, arguments and which of them it writes, matched to the `Saved tensor
to` lines the run prints. Plain text in, plain data out (no torch), so it is tested on fixed text.

What it reads (torch 2.11-2.15, `_inductor/codegen/debug_utils.py`, measured on 2.13):
- before each launch `// [Provenance debug handles] KERNEL:N`, then one
  `aoti_torch_save_tensor_handle(ARG, "ARG", "before_launch", "KERNEL");` per tensor argument,
  the call, and the same saves with `"after_launch"`;
- a C++ kernel's declaration `extern "C" void KERNEL(const T* in_ptr0, T* out_ptr0, ...)` names
  each pointer's role; the call passes `(T*)(buf3.data_ptr())` in the same positions;
- a Triton kernel is launched through its call helper `static ... void call_KERNEL(const
  in_ptr0_type_& in_ptr0, ..., const out_ptr0_type_& out_ptr0, int64_t xnumel, ...)` (the
  kernel's signature names, then grid, device, stream, kernels and cubin_dir), called as
  `call_KERNEL(buf3, lin_bias, arg2_1, 8L, ...)`; `in_out_ptr` arguments are written too
  (measured on torch 2.11.0+cu130, an H200: data/cuda_printer_wrapper.cpp);
- an extern kernel `aoti_torch_<device>_<op>_out(OUT, ...)` writes its first argument;
- the run prints `aoti_torch_save_tensor_handle: Saved tensor to PATH` once per save, in order.

The same program compiled by Inductor's Python wrapper (the JIT route, `python_launches`) puts
`# [Provenance debug handles] KERNEL:N` before each launch statement of its `call` function; a
C++ kernel is bound as `NAME = async_compile.cpp_pybinding([...], r'''... extern "C" void
kernel(const T* in_ptr0, T* out_ptr0, ...)''')`, an extern kernel writes its `out=` argument, a
fallback op the names it assigns (measured on 2.13: tests/triage/data/jit_wrapper.py.txt).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field

SAVE_CALL = re.compile(
    r'aoti_torch_save_tensor_handle\(\s*(?P<var>\w+)\s*,\s*"(?P<arg>[^"]*)"\s*,\s*'
    r'"(?P<phase>before_launch|after_launch)"\s*,\s*"(?P<kernel>[^"]*)"\s*\)'
)
"""One save of the printer's mode 1 in wrapper.cpp."""
HANDLE_LINE = re.compile(r"//\s*\[Provenance debug handles\]\s*(?P<key>[\w.]+:\d+)")
"""The provenance comment before a launch: `kernel:debug_handle`."""
PY_HANDLE_LINE = re.compile(r"^\s*#\s*\[Provenance debug handles\]\s*(?P<key>[\w.]+:\d+)")
"""The same comment in a Python wrapper."""
CPP_BINDING = re.compile(r"^(?P<name>\w+)\s*=\s*async_compile\.cpp_pybinding\(", re.MULTILINE)
"""A Python wrapper's C++ kernel: its source follows, declared as `kernel(...)`."""
SAVED_LINE = re.compile(r"Saved tensor to (?P<path>\S.*?)\s*$")
"""The run's manifest line of one saved tensor."""
DECLARATION = re.compile(
    r'extern\s+"C"\s+(?:\w+\s+)*void\s+(?P<kernel>\w+)\s*\((?P<params>[^)]*)\)'
)
"""A C++ kernel's declaration (its parameters may span lines)."""
CALL_HELPER = re.compile(
    r"static\s+(?:inline\s+)?(?:__attribute__\(\(\w+\)\)\s+)?void\s+call_(?P<kernel>\w+)"
    r"\s*\((?P<params>[^)]*)\)"
)
"""A Triton kernel's call helper in a CUDA wrapper.cpp (`static inline void call_KERNEL(`;
`static __attribute__((noinline)) void` on newer torch); its parameters are the kernel's."""
IDENTIFIER = re.compile(r"\b((?:buf|arg)\w*)\b")
"""The buffer or graph argument a call argument expression passes (`(float*)(buf3.data_ptr())`)."""


@dataclass
class Launch:
    """One kernel launch of the wrapper, in the order the wrapper runs them."""

    kernel: str
    handle: str | None = None
    """`kernel:N`, the key of kernel_information.json (None: no provenance comment)."""
    args: list[str] = field(default_factory=list)
    """The call's buffer and graph arguments, by position (other arguments omitted)."""
    outputs: list[str] = field(default_factory=list)
    """The arguments this launch writes."""
    saved: list[tuple[str, str]] = field(default_factory=list)
    """(argument, phase) of each save around it, in order."""
    how: str = ""
    """How the outputs were told: `declaration`, `out argument`, `assigned` or `first use`."""
    lines: tuple[int, int] = (0, 0)
    """A Python wrapper's launch statement: its first and last line (1-based)."""


def saved_paths(text: str) -> list[str]:
    """The paths of the run's `Saved tensor to` lines, in order."""
    out = []
    for line in text.splitlines():
        found = SAVED_LINE.search(line)
        if found and "aoti_torch_save_tensor_handle" in line:
            out.append(found.group("path"))
    return out


def declarations(text: str) -> dict[str, list[str]]:
    """{kernel: its parameter names in order} of the C++ kernels declared in `text` and of the
    Triton kernels whose call helpers it defines."""
    out: dict[str, list[str]] = {}
    for pattern in (DECLARATION, CALL_HELPER):
        for found in pattern.finditer(text):
            names = []
            for param in found.group("params").split(","):
                words = re.findall(r"\w+", param.split("=")[0])  # `cubin_dir_ = std::nullopt`
                names.append(words[-1] if words else "")
            out[found.group("kernel")] = names
    return out


def split_args(text: str) -> list[str]:
    """Top-level comma-separated arguments of a call's argument text."""
    parts, depth, current = [], 0, []
    for ch in text:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(current).strip())
            current = []
            continue
        current.append(ch)
    if "".join(current).strip():
        parts.append("".join(current).strip())
    return parts


def call_args(lines: list[str], start: int, kernel: str) -> list[str] | None:
    """The argument texts of the first call of `kernel` at or after line `start` (the call may
    span lines); None when no call follows before the next save."""
    for i in range(start, min(start + 40, len(lines))):
        line = lines[i]
        if SAVE_CALL.search(line):
            return None
        at = line.find(kernel + "(")
        if at < 0:
            continue
        text = "\n".join(lines[i : i + 40])[at + len(kernel) + 1 :]
        depth = 1
        for j, ch in enumerate(text):
            depth += ch == "("
            depth -= ch == ")"
            if depth == 0:
                return split_args(text[:j])
        return None
    return None


def identifier(arg: str) -> str | None:
    """The buffer or graph argument an argument expression passes, if one."""
    found = IDENTIFIER.findall(arg)
    return found[0] if len(found) == 1 else None


def launches(wrapper: str, kernel_sources: str = "") -> list[Launch]:
    """The printer-instrumented launches of `wrapper` (C++ kernel declarations are read from it
    and from `kernel_sources`), each with the arguments it writes."""
    decls = {**declarations(kernel_sources), **declarations(wrapper)}
    lines = wrapper.splitlines()
    out: list[Launch] = []
    handle: str | None = None
    current: Launch | None = None
    seen: set[str] = set()
    for i, line in enumerate(lines):
        found_handle = HANDLE_LINE.search(line)
        if found_handle:
            handle = found_handle.group("key")
            continue
        save = SAVE_CALL.search(line)
        if save is None:
            continue
        kernel, arg, phase = save.group("kernel"), save.group("arg"), save.group("phase")
        if phase == "before_launch" and (current is None or current.saved[-1][1] != phase):
            current = Launch(kernel, handle if handle and handle.split(":")[0] == kernel else None)
            out.append(current)
            handle = None
        if current is None or current.kernel != kernel:
            continue
        current.saved.append((arg, phase))
        if phase == "before_launch" and not (i + 1 < len(lines) and SAVE_CALL.search(lines[i + 1])):
            texts = call_args(lines, i + 1, kernel) or []
            current.args = [a for a in (identifier(t) for t in texts) if a]
            _outputs(current, texts, decls.get(kernel), seen)
            seen.update(current.args)
    return out


def _outputs(launch: Launch, texts: list[str], params: list[str] | None, seen: set[str]) -> None:
    if params is not None and len(params) == len(texts):
        launch.how = "declaration"
        for name, text in zip(params, texts):
            var = identifier(text)
            if var and name.startswith(("out_ptr", "in_out_ptr")):
                launch.outputs.append(var)
        return
    if launch.kernel.endswith("_out") and texts and identifier(texts[0]):
        launch.how = "out argument"
        launch.outputs.append(str(identifier(texts[0])))
        return
    launch.how = "first use"
    launch.outputs = [a for a in launch.args if a.startswith("buf") and a not in seen]


def match_manifest(found: list[Launch], paths: list[str]) -> list[dict[str, str]] | None:
    """[{argument: its after_launch file, `before:`argument: its before_launch file}] per launch, pairing the wrapper's saves with the run's
    `Saved tensor to` lines in order; None when their counts differ (the manifest cannot be
    trusted). A file saved again later (a kernel launched twice with the same argument name
    overwrites it) is kept only for its last save."""
    saves = [(k, arg, phase) for k, launch in enumerate(found) for arg, phase in launch.saved]
    if len(saves) != len(paths):
        return None
    last: dict[str, int] = {}
    for n, path in enumerate(paths):
        last[path] = n
    out: list[dict[str, str]] = [{} for _ in found]
    before: list[dict[str, str]] = [{} for _ in found]
    for n, ((k, arg, phase), path) in enumerate(zip(saves, paths)):
        if last[path] != n:
            continue  # overwritten by a later save
        (out if phase == "after_launch" else before)[k][arg] = path
    for k, saved_before in enumerate(before):
        out[k].update({f"before:{arg}": path for arg, path in saved_before.items()})
    return out


def python_declarations(source: str) -> dict[str, list[str]]:
    """{kernel: its parameter names} of the C++ kernels a Python wrapper binds with
    `async_compile.cpp_pybinding` (each declared as `kernel(...)` in its own source)."""
    out: dict[str, list[str]] = {}
    for bound in CPP_BINDING.finditer(source):
        found = DECLARATION.search(source, bound.end())
        if found is not None:
            out[bound.group("name")] = [
                (re.findall(r"\w+", p.split("=")[0]) or [""])[-1]
                for p in found.group("params").split(",")
            ]
    return out


def python_launches(source: str) -> list[Launch]:
    """The launches of a Python wrapper's `call` function, in order: each statement after a
    provenance comment, with its buffer and graph arguments and the ones it writes. Empty when
    the source has no `call` function or no provenance comments."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    call = next(
        (
            n
            for n in ast.walk(tree)
            if isinstance(n, ast.FunctionDef) and n.name == "call" and "args" in _params(n)
        ),
        None,
    )
    if call is None:
        return []
    decls = python_declarations(source)
    lines = source.splitlines()
    out: list[Launch] = []
    seen: set[str] = set()
    key: str | None = None
    for stmt in _statements(call.body):
        key = _handle_above(lines, stmt.lineno) or key
        value = stmt.value if isinstance(stmt, (ast.Expr, ast.Assign)) else None
        if key is None or not isinstance(value, ast.Call):
            continue
        kernel = key.split(":")[0]
        if not ast.unparse(value.func).endswith(kernel):
            continue  # a statement between the comment and its launch
        texts = [ast.unparse(a) for a in value.args]
        launch = Launch(kernel, key, lines=(stmt.lineno, stmt.end_lineno or stmt.lineno))
        launch.args = [a for a in (identifier(t) for t in texts) if a]
        written = [
            k.value.id for k in value.keywords if k.arg == "out" and isinstance(k.value, ast.Name)
        ]
        assigned = [
            n.id
            for t in (stmt.targets if isinstance(stmt, ast.Assign) else [])
            for n in ast.walk(t)
            if isinstance(n, ast.Name)
        ]
        if written or assigned:
            launch.how = "out argument" if written else "assigned"
            launch.outputs = written + assigned
            launch.args += [a for a in launch.outputs if a not in launch.args]
        else:
            _outputs(launch, texts, decls.get(kernel), seen)
        seen.update(launch.args)
        out.append(launch)
        key = None
    return out


def _params(fn: ast.FunctionDef) -> list[str]:
    return [a.arg for a in fn.args.args]


def _statements(body: list[ast.stmt]) -> list[ast.stmt]:
    """The simple statements of `body` in source order, those inside `with` blocks too (a
    device guard around launches)."""
    out: list[ast.stmt] = []
    for stmt in body:
        if isinstance(stmt, ast.With):
            out.extend(_statements(stmt.body))
        else:
            out.append(stmt)
    return out


def _handle_above(lines: list[str], lineno: int) -> str | None:
    """The provenance key in the comment lines right above line `lineno` (1-based)."""
    i = lineno - 2
    while i >= 0 and lines[i].strip().startswith("#"):
        found = PY_HANDLE_LINE.search(lines[i])
        if found:
            return found.group("key")
        i -= 1
    return None
