"""What the command-line tests share: run ``dspsim`` in-process, and what a one-line error is."""

from __future__ import annotations

from dspsim.cli import main


def run_cli(capsys, *argv) -> tuple[int, str, str]:
    """``dspsim ARGV...`` in this process: (exit code, stdout, stderr); arguments may be paths."""
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def one_line(err: str) -> bool:
    """The CLI's error form: one line, ``dspsim: error: ...``, no traceback."""
    return err.count("\n") == 1 and err.startswith("dspsim: error:") and "Traceback" not in err
