"""Op-file texts the op-file tests write: a 2-D op reading x and writing y (rows x cols)."""

from __future__ import annotations


def op_text(name: str, passes: str, *, default_shape: tuple[int, int] | None = None,
            params: dict[str, float] | None = None, tail: str = "") -> str:
    """The op file of a 2-D op ``name``: its ``default_shape`` and ``params`` if given, the
    arrays x (input) and y (output), then ``passes`` (TOML text) and ``tail``."""
    head = f'[op]\nname = "{name}"\nndim = 2\n'
    if default_shape is not None:
        head += f"default_shape = {list(default_shape)}\n"
    if params:
        head += "[params]\n" + "".join(f"{k} = {v!r}\n" for k, v in params.items())
    arrays = "".join(f'[[array]]\nname = "{a}"\nshape = ["rows", "cols"]\nrole = "{role}"\n'
                     for a, role in (("x", "input"), ("y", "output")))
    return head + arrays + passes + tail
