"""The expression language of an op file (docs/reference.md, "Op files"): element-wise values,
kernel arguments, the reference. Parsed with :mod:`ast` and checked against a whitelist before
anything runs, never ``eval``-ed: names (the op's arrays, earlier passes' per-row scalars, its
``[params]``, ``cols``), numbers, ``+ - * / **``, unary ``-``/``+``, one comparison (1.0 or
0.0), and calls of :data:`FUNCTIONS` (``shift(x, k)``: ``k`` columns along the row,
``shift_rows(x, k)``: ``k`` rows down, 0 beyond the ends; the row reductions in a reference
only). Anything else is refused in one line naming what is allowed. An expression evaluates
in float32 (a ``loop`` kernel: every operation rounded, as the core's vector instructions
round) or in float64 (the reference).
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from dspsim.errors import DspsimInputError


def _shift(x: np.ndarray, k: Any, axis: int = -1) -> np.ndarray:
    """``x`` moved ``k`` along ``axis`` (-1: columns, -2: rows): ``out[i] = x[i + k]``, 0 beyond
    the ends (a single row has no neighbours)."""
    k = int(k)
    if axis == -2 and x.ndim < 2:
        return x.copy() if k == 0 else np.zeros_like(x)
    out = np.zeros_like(x)
    to, src = np.moveaxis(out, axis, -1), np.moveaxis(x, axis, -1)  # views: the axis last
    n = src.shape[-1]
    if abs(k) < n:
        if k >= 0:
            to[..., :n - k] = src[..., k:]
        else:
            to[..., -k:] = src[..., :n + k]
    return out


def _sigmoid(x: np.ndarray) -> np.ndarray:
    one = np.asarray(1, dtype=np.asarray(x).dtype)
    return one / (one + np.exp(-x))


ELEMENTWISE = {
    "exp": np.exp, "log": np.log, "sqrt": np.sqrt, "abs": np.abs, "tanh": np.tanh,
    "sigmoid": _sigmoid,
}
BINARY = {"maximum": np.maximum, "minimum": np.minimum}
ROW_REDUCTIONS = {"max": np.max, "min": np.min, "sum": np.sum, "mean": np.mean}
SHIFTS = {"shift": _shift, "shift_rows": lambda x, k: _shift(x, k, -2)}
FUNCTIONS = (*ELEMENTWISE, *BINARY, "where", *SHIFTS, *ROW_REDUCTIONS)
_ELEMENT_FUNCTIONS: dict[str, Callable[..., Any]] = {**ELEMENTWISE, **BINARY}
_OPERATORS = {ast.Add: np.add, ast.Sub: np.subtract, ast.Mult: np.multiply,
              ast.Div: np.divide, ast.Pow: np.power}
_COMPARE = {ast.Lt: np.less, ast.LtE: np.less_equal, ast.Gt: np.greater,
            ast.GtE: np.greater_equal, ast.Eq: np.equal, ast.NotEq: np.not_equal}
MAX_SHIFT = 64  # columns or rows a shift may reach
MAX_EXPR_CHARS = 2000  # an expression's length
MAX_DEPTH = 100  # its tree's depth (checked and evaluated recursively)
ALLOWED_TEXT = ("names of the op's arrays, scalars and params, numbers, + - * / **, unary -, "
                "comparisons, and calls of " + ", ".join(FUNCTIONS))


@dataclass(frozen=True)
class Expr:
    """A checked expression: its text, the names it reads, and its tree."""

    text: str
    names: frozenset[str]
    tree: ast.Expression
    shifts: bool  # calls shift (a row filter: whole rows per tile)
    halo: int = 0  # rows its shift_rows reach (nested ones add up): above and below a block

    def evaluate(self, env: Mapping[str, Any], dtype: type = np.float64) -> Any:
        """The value with ``env``'s names, every operation in ``dtype``."""
        with np.errstate(all="ignore"):
            return _eval(self.tree.body, env, np.dtype(dtype))


def parse_expr(text: Any, names: Mapping[str, str], where: str,
               reductions: bool = False) -> Expr:
    """Parse and check ``text``; ``names``: every name it may read -> what it is; ``where``
    starts the one-line error."""
    if not isinstance(text, str) or not text.strip():
        raise DspsimInputError(f"{where}: expected an expression as a string, got "
                               f"{_short(text)}; allowed: {ALLOWED_TEXT}")
    if len(text) > MAX_EXPR_CHARS:
        raise DspsimInputError(f"{where}: an expression of {len(text):,} characters; allowed: "
                               f"at most {MAX_EXPR_CHARS:,}")
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError) as e:
        why = (e.msg if isinstance(e, SyntaxError) else "nested too deeply"
               if isinstance(e, RecursionError | MemoryError) else str(e))
        raise DspsimInputError(f"{where}: {_short(text)} is not an expression ({why}); "
                               f"allowed: {ALLOWED_TEXT}") from None
    if _depth(tree) > MAX_DEPTH:
        raise DspsimInputError(f"{where}: {_short(text)} is nested more than {MAX_DEPTH} "
                               "deep; allowed: a shallower expression")
    found: set[str] = set()
    _check(tree.body, names, where, text, reductions, found)
    shifts = any(isinstance(n, ast.Call) and n.func.id == "shift" for n in ast.walk(tree))
    return Expr(text, frozenset(found), tree, shifts, _reach(tree.body))


def _reach(node: ast.AST) -> int:
    """The rows above and below that a (checked) value reads: nested shift_rows add up."""
    if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "shift_rows":
        return abs(_int_const(node.args[1]) or 0) + _reach(node.args[0])
    return max((_reach(c) for c in ast.iter_child_nodes(node)), default=0)


def _depth(tree: ast.AST) -> int:
    """The tree's depth, walked without recursion."""
    deepest, todo = 0, [(tree, 1)]
    while todo:
        node, d = todo.pop()
        deepest = max(deepest, d)
        todo.extend((child, d + 1) for child in ast.iter_child_nodes(node))
    return deepest


def _short(v: Any) -> str:
    text = repr(v)
    return text if len(text) <= 80 else text[:77] + "..."


def _refuse(where: str, text: str, what: str) -> DspsimInputError:
    return DspsimInputError(f"{where}: {_short(text)}: {what} is not allowed; allowed: "
                            f"{ALLOWED_TEXT}")


def _check(node: ast.AST, names: Mapping[str, str], where: str, text: str, reductions: bool,
           found: set[str]) -> None:
    def sub(n: ast.AST) -> None:
        _check(n, names, where, text, reductions, found)

    if isinstance(node, ast.Constant):
        if isinstance(node.value, bool) or not isinstance(node.value, int | float):
            raise _refuse(where, text, f"the constant {node.value!r}")
    elif isinstance(node, ast.Name):
        if node.id not in names:
            known = ", ".join(sorted(names)) or "none"
            raise DspsimInputError(f"{where}: {_short(text)} reads {node.id!r}, which is no array, "
                                   f"scalar or param here; allowed names: {known}")
        found.add(node.id)
    elif isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
        sub(node.left)
        sub(node.right)
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        sub(node.operand)
    elif isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _COMPARE:
        sub(node.left)
        sub(node.comparators[0])
    elif isinstance(node, ast.Call):
        _check_call(node, where, text, reductions)
        for a in node.args:
            sub(a)
    else:
        raise _refuse(where, text, type(node).__name__.lower().replace("binop", "that operator"))


def _check_call(node: ast.Call, where: str, text: str, reductions: bool) -> None:
    fn = node.func.id if isinstance(node.func, ast.Name) else None
    if fn is None or fn not in FUNCTIONS or node.keywords:
        raise _refuse(where, text, f"the call {ast.unparse(node.func)}(...)"
                      + (" with keywords" if node.keywords else ""))
    if fn in ROW_REDUCTIONS and not reductions:
        raise DspsimInputError(f"{where}: {_short(text)}: the row reduction {fn}() is for a "
                               "[reference]; a pass reduces with reduce = { op, into }")
    want = 1 if fn in ELEMENTWISE or fn in ROW_REDUCTIONS else 3 if fn == "where" else 2
    if len(node.args) != want:
        raise DspsimInputError(f"{where}: {_short(text)}: {fn}() takes {want} argument(s), got "
                               f"{len(node.args)}")
    k = _int_const(node.args[1]) if fn in SHIFTS else 0
    if fn in SHIFTS and (k is None or abs(k) > MAX_SHIFT):
        raise DspsimInputError(f"{where}: {_short(text)}: {fn}(array, k) needs a whole number "
                               f"k from -{MAX_SHIFT} to {MAX_SHIFT}")


def _int_const(node: ast.AST) -> int | None:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = _int_const(node.operand)
        return None if inner is None else -inner
    if isinstance(node, ast.Constant) and isinstance(node.value, int) \
            and not isinstance(node.value, bool):
        return node.value
    return None


def _eval(node: ast.AST, env: Mapping[str, Any], dt: np.dtype) -> Any:
    if isinstance(node, ast.Constant):
        return dt.type(node.value)
    if isinstance(node, ast.Name):
        v = env[node.id]
        return np.asarray(v, dtype=dt) if not np.isscalar(v) else dt.type(v)
    if isinstance(node, ast.BinOp):
        return _as(_OPERATORS[type(node.op)](_eval(node.left, env, dt),
                                             _eval(node.right, env, dt)), dt)
    if isinstance(node, ast.UnaryOp):
        v = _eval(node.operand, env, dt)
        return _as(-v, dt) if isinstance(node.op, ast.USub) else v
    if isinstance(node, ast.Compare):
        fn = _COMPARE[type(node.ops[0])]
        return _as(fn(_eval(node.left, env, dt), _eval(node.comparators[0], env, dt)), dt)
    assert isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
    return _call(node.func.id, node.args, env, dt)


def _call(fn: str, args: list[ast.expr], env: Mapping[str, Any], dt: np.dtype) -> Any:
    if fn in SHIFTS:
        return SHIFTS[fn](np.asarray(_eval(args[0], env, dt)), _int_const(args[1]))
    vals = [_eval(a, env, dt) for a in args]
    if fn in ROW_REDUCTIONS:
        return _as(ROW_REDUCTIONS[fn](vals[0], axis=-1, keepdims=True), dt)
    if fn == "where":
        return _as(np.where(np.asarray(vals[0]) != 0, vals[1], vals[2]), dt)
    return _as(_ELEMENT_FUNCTIONS[fn](*vals), dt)


def _as(v: Any, dt: np.dtype) -> Any:
    return v.astype(dt, copy=False) if isinstance(v, np.ndarray) else dt.type(v)
