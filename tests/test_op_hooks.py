"""The op contract in one place: every hook an op may give is declared on ``Op`` with its
default, and nothing outside ``dspsim/ops/`` looks one up by name."""

from __future__ import annotations

import ast

import numpy as np
import pytest

from dspsim.budgets import PACKAGE
from dspsim.ops import get_op, register_op
from dspsim.ops.base import Op


def _op_members() -> set[str]:
    """The names an op gives (an array's own attributes, ``ndim`` say, are not hooks)."""
    names = {k for k in dir(Op) if not k.startswith("__")} | set(Op.__annotations__)
    return names - set(dir(np.ndarray))


def _lookups_by_name(tree: ast.AST) -> list[tuple[int, str]]:
    """``getattr(x, "name", ...)`` / ``hasattr(x, "name")`` with a literal name."""
    out = []
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                and node.func.id in ("getattr", "hasattr") and len(node.args) >= 2
                and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str)):
            out.append((node.lineno, node.args[1].value))
    return out


def test_no_hook_is_looked_up_by_name_outside_ops():
    members = _op_members()
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if (PACKAGE / "ops") in path.parents:
            continue
        for line, name in _lookups_by_name(ast.parse(path.read_text(encoding="utf-8"))):
            if name in members:
                found.append(f"{path.relative_to(PACKAGE)}:{line}: {name}")
    assert not found, "op hooks looked up by name:\n" + "\n".join(found)


def test_the_scan_sees_a_lookup():
    tree = ast.parse('report = getattr(op, "run_report", None)\nhasattr(op, "size_unit")')
    assert _lookups_by_name(tree) == [(1, "run_report"), (2, "size_unit")]
    assert {"run_report", "size_unit", "check_input", "host_array"} <= _op_members()


class _Plain(Op):
    """An op that gives only what it must: the hooks' defaults apply."""
    name = "plain"
    ndim = 1


def test_the_host_side_defaults_are_a_float32_array():
    op = _Plain()
    assert op.output_bytes((3, 5)) == op.input_bytes((3, 5)) == 60
    x = np.arange(6, dtype=np.float32)
    checked, shape = op.check_input(x)
    assert shape is None and checked.dtype == np.float32 and np.array_equal(checked, x)
    assert op.run_report(None) == {}
    assert op.size_unit == "float32"


def test_ops_that_override_a_hook_keep_their_own():
    assert get_op("copy").run_report is not Op.run_report
    assert type(get_op("fc")).read_input_file is not Op.read_input_file
    assert type(get_op("softmax")).read_input_file is Op.read_input_file


def _tiny_op(name: str, cmd: int | None) -> Op:
    from dspsim.schema import OpSchema

    return type(name.title(), (Op,), {
        "name": name, "doc": "-", "cmd": cmd, "variants": {"only": "-"},
        "default_variant": "only", "params": OpSchema(name, ()), "ndim": 1,
        "default_shape": (8,), "param_block": lambda self, v, s, a: None,
        "handler": lambda self, dsp, i, o, tm: iter(()),
        "reference": lambda self, x, p: x, "default_input": lambda self, s: np.zeros(s)})()


def test_the_registry_allots_a_free_command_and_refuses_a_taken_one():
    from dspsim.ops.registry import CUSTOM_CMD_FIRST, OPS
    from dspsim.schema import OP_SCHEMAS

    taken = {o.cmd for o in OPS.values()}
    first_free = next(c for c in range(CUSTOM_CMD_FIRST, 0x10000) if c not in taken)
    try:
        a = register_op(_tiny_op("allotted_a", None))
        b = register_op(_tiny_op("allotted_b", None))
        assert (a.cmd, b.cmd) == (first_free, next(
            c for c in range(first_free + 1, 0x10000) if c not in taken))
        with pytest.raises(ValueError, match="is taken by 'softmax'"):
            register_op(_tiny_op("collides", get_op("softmax").cmd))
        assert "collides" not in OPS
        assert len({o.cmd for o in OPS.values()}) == len(OPS)  # one op a command
    finally:
        for name in ("allotted_a", "allotted_b", "collides"):
            OPS.pop(name, None)
            OP_SCHEMAS.pop(name, None)


@pytest.mark.parametrize("cmd", [0x10000, -1, "0x8009", True, 32769.0])
def test_the_registry_refuses_a_command_the_firmware_cannot_hold(cmd):
    """A command outside the firmware's 16-bit table (or not an integer) is refused when the
    op registers, in one line; it was taken, and every later run of every op then failed
    building the firmware's table."""
    from dspsim import load_model, simulate
    from dspsim.ops.registry import OPS
    from dspsim.schema import OP_SCHEMAS

    try:
        with pytest.raises(ValueError, match="allowed: an integer 0x0 to 0xffff"):
            register_op(_tiny_op("bad_cmd", cmd))
        assert "bad_cmd" not in OPS
        assert simulate(load_model(), "softmax", "direct", n=64, data=False).cycles > 0
    finally:
        OPS.pop("bad_cmd", None)
        OP_SCHEMAS.pop("bad_cmd", None)
