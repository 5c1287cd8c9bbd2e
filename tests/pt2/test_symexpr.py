"""Symbolic size expressions in the three spellings a .pt2 uses."""

from __future__ import annotations

import pytest

from aotipre.pt2 import symexpr


@pytest.mark.parametrize(
    "text, env, value, shown",
    [
        ("Symbol('s77', positive=True, integer=True)", {"s77": 5}, 5, "s77"),
        ("Mul(Integer(2), Symbol('s77', positive=True, integer=True))", {"s77": 5}, 10, "2*s77"),
        ("Add(Symbol('s1', integer=True), Integer(-1))", {"s1": 4}, 3, "s1 - 1"),
        ("FloorDiv(Symbol('s0'), Integer(2))", {"s0": 9}, 4, "s0//2"),
        ("8L*s53", {"s53": 3}, 24, "8*s53"),
        ("2*s77", {"s77": 6}, 12, "2*s77"),
        ("s0 + 1", {"s0": 1}, 2, "s0 + 1"),
        ("Max(Integer(1), Symbol('s0'))", {"s0": 0}, 1, "max(1, s0)"),
    ],
)
def test_parse_evaluate_and_print(text: str, env: dict[str, int], value: int, shown: str) -> None:
    expr = symexpr.parse(text)
    assert expr.evaluate(env) == value
    assert str(expr) == shown


@pytest.mark.parametrize(
    "text",
    [
        "",
        "__import__('os').system('x')",
        "lambda: 1",
        "s0 if s0 else 1",
        "(" * 500 + "1" + ")" * 500,
    ],
)
def test_refuses_anything_else(text: str) -> None:
    with pytest.raises(symexpr.ExprError):
        symexpr.parse(text)


def test_unbound_symbol_is_a_key_error() -> None:
    with pytest.raises(KeyError):
        symexpr.parse("2*s0").evaluate({})


def test_pretty_falls_back_to_the_input() -> None:
    assert symexpr.pretty("weird(thing") == "weird(thing"
