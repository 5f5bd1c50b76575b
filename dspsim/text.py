"""User-given text (a measurement's or a model's name) as a table or a one-line message prints
it: non-printable characters escaped as Python writes them (``\\x1b``), so a name can neither
drive the terminal nor forge a row, and a name longer than its column cut with an ellipsis."""

from __future__ import annotations

ELLIPSIS = "..."
NAME_CELL_CHARS = 40  # the widest a column of names grows in a text table


def one_line(e: BaseException, empty: str | None = None) -> str:
    """An exception's message on one line (each run of white space, newlines included, one
    space); an empty message reads ``empty``, by default the exception's type name."""
    return " ".join(str(e).split()) or empty or type(e).__name__


def cell(text: str, width: int = NAME_CELL_CHARS) -> str:
    """``text``, every non-printable character escaped (``"\\x1b[2J"`` -> ``\\x1b[2J``), in at
    most ``width`` characters: a longer one keeps its start and ends with an ellipsis. The work
    is bounded by ``width``, not by the text."""
    # escaping only lengthens: the first width + 1 characters are enough to decide
    shown = "".join(c if c.isprintable() else repr(c)[1:-1] for c in str(text)[:width + 1])
    if len(shown) <= width:
        return shown
    return shown[:max(0, width - len(ELLIPSIS))] + ELLIPSIS


def column_width(texts: list[str], title: str, cap: int = NAME_CELL_CHARS) -> int:
    """The width of a column of names: its longest shown cell, at least its title's, at most
    ``cap``."""
    return max([len(title), *(len(cell(t, cap)) for t in texts)])
