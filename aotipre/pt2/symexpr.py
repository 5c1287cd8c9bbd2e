"""Safe parsing and evaluation of the symbolic size expressions found in .pt2 archives.

Export writes sympy `srepr` strings (`Mul(Integer(2), Symbol('s77', positive=True))`); the AOTI
wrapper writes C++ (`8L*s53`); range constraints use plain infix (`2*s77`). All three are parsed
with Python's `ast` into a tiny tree and evaluated over integers, with no `eval` and no sympy.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

_MAX_EXPR_CHARS = 2000
_CPP_LONG = re.compile(r"(?<![\w.])(\d+)L{1,2}\b")


class ExprError(ValueError):
    """The expression is not one aotipre understands."""


@dataclass(frozen=True)
class Expr:
    """A parsed integer expression over dynamic-shape symbols."""

    op: str
    """const, sym, add, mul, floordiv, mod, pow, max, min."""
    args: tuple[Expr, ...] = ()
    value: int = 0
    name: str = ""

    def symbols(self) -> frozenset[str]:
        if self.op == "sym":
            return frozenset([self.name])
        out: frozenset[str] = frozenset()
        for a in self.args:
            out |= a.symbols()
        return out

    def evaluate(self, env: dict[str, int]) -> int:
        """Evaluate with integer semantics; raises KeyError for an unbound symbol."""
        if self.op == "const":
            return self.value
        if self.op == "sym":
            return env[self.name]
        vals = [a.evaluate(env) for a in self.args]
        if self.op == "add":
            return sum(vals)
        if self.op == "mul":
            out = 1
            for v in vals:
                out *= v
            return out
        if self.op == "floordiv":
            return vals[0] // vals[1] if vals[1] else 0
        if self.op == "ceildiv":
            return -(-vals[0] // vals[1]) if vals[1] else 0
        if self.op == "mod":
            return vals[0] % vals[1] if vals[1] else 0
        if self.op == "pow":
            return vals[0] ** min(vals[1], 64)
        if self.op == "max":
            return max(vals)
        if self.op == "min":
            return min(vals)
        raise ExprError(f"unknown operation {self.op}")

    def __str__(self) -> str:
        if self.op == "const":
            return str(self.value)
        if self.op == "sym":
            return self.name
        parts = [_paren(a, self.op) for a in self.args]
        if self.op == "add":
            return " + ".join(parts).replace("+ -", "- ")
        if self.op == "mul":
            return "*".join(parts)
        if self.op == "floordiv":
            return f"{parts[0]}//{parts[1]}"
        if self.op == "ceildiv":
            return f"ceil({parts[0]}/{parts[1]})"
        if self.op == "mod":
            return f"{parts[0]} % {parts[1]}"
        if self.op == "pow":
            return f"{parts[0]}**{parts[1]}"
        return f"{self.op}({', '.join(str(a) for a in self.args)})"


def _paren(e: Expr, parent: str) -> str:
    s = str(e)
    if e.op == "add" and parent != "add":
        return f"({s})"
    return s


def const(v: int) -> Expr:
    return Expr("const", value=v)


def sym(name: str) -> Expr:
    return Expr("sym", name=name)


_SREPR_OPS = {
    "Add": "add",
    "Mul": "mul",
    "FloorDiv": "floordiv",
    "CleanDiv": "floordiv",
    "IntTrueDiv": "floordiv",
    "CeilDiv": "ceildiv",
    "Mod": "mod",
    "PythonMod": "mod",
    "Pow": "pow",
    "PowByNatural": "pow",
    "Max": "max",
    "Min": "min",
}


def parse(text: str) -> Expr:
    """Parse an srepr, C++ or infix integer expression. Raises ExprError."""
    text = text.strip()
    if not text or len(text) > _MAX_EXPR_CHARS:
        raise ExprError("empty or overlong expression")
    text = _CPP_LONG.sub(r"\1", text)
    try:
        tree = ast.parse(text, mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        raise ExprError(f"cannot parse expression {text[:80]!r}") from exc
    try:
        return _convert(tree.body, depth=0)
    except RecursionError as exc:
        raise ExprError("expression nested too deeply") from exc


def _convert(node: ast.AST, depth: int) -> Expr:
    if depth > 60:
        raise ExprError("expression nested too deeply")
    d = depth + 1
    if (
        isinstance(node, ast.Constant)
        and isinstance(node.value, int)
        and not isinstance(node.value, bool)
    ):
        return const(node.value)
    if isinstance(node, ast.Name):
        return sym(node.id)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = _convert(node.operand, d)
        return const(-inner.value) if inner.op == "const" else Expr("mul", (const(-1), inner))
    if isinstance(node, ast.BinOp):
        left, right = _convert(node.left, d), _convert(node.right, d)
        if isinstance(node.op, ast.Add):
            return Expr("add", (left, right))
        if isinstance(node.op, ast.Sub):
            return Expr("add", (left, Expr("mul", (const(-1), right))))
        if isinstance(node.op, ast.Mult):
            return Expr("mul", (left, right))
        if isinstance(node.op, (ast.FloorDiv, ast.Div)):
            return Expr("floordiv", (left, right))
        if isinstance(node.op, ast.Mod):
            return Expr("mod", (left, right))
        if isinstance(node.op, ast.Pow):
            return Expr("pow", (left, right))
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        fn = node.func.id
        if fn == "Symbol" and node.args and isinstance(node.args[0], ast.Constant):
            return sym(str(node.args[0].value))
        if fn == "Integer" and len(node.args) == 1:
            inner = _convert(node.args[0], d)
            if inner.op == "const":
                return inner
        if fn in _SREPR_OPS:
            return Expr(_SREPR_OPS[fn], tuple(_convert(a, d) for a in node.args))
        if fn == "Rational" and len(node.args) == 2:
            return Expr("floordiv", (_convert(node.args[0], d), _convert(node.args[1], d)))
        if fn in ("max", "min", "std::max", "std::min"):
            return Expr(fn, tuple(_convert(a, d) for a in node.args))
    raise ExprError(f"unsupported expression element {ast.dump(node)[:80]}")


def pretty(text: str) -> str:
    """Human form of any expression aotipre reads; the input unchanged when it cannot parse."""
    try:
        return str(parse(text))
    except ExprError:
        return text
