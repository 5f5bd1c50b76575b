"""What every subcommand shares: the one-line-error parser, model options, JSON output, the
handling of stdout and Ctrl-C, and progress on a terminal (drawn on stderr only when it is a
terminal: :func:`counter` counts units of work with tqdm; :func:`elapsed` says how long work
without a unit to count has run, redrawn by a helper thread that sleeps between redraws)."""

from __future__ import annotations

import _thread
import argparse
import contextlib
import errno
import json
import os
import signal
import sys
import threading
import time
import tomllib
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from dspsim.config import (
    MAX_BASE_DEPTH,
    MAX_MODEL_FILE_BYTES,
    HardwareModel,
    default_model_path,
    load_model,
    load_models,
    resolve_model_path,
)
from dspsim.entry import INTERRUPTED_EXIT
from dspsim.errors import DspsimInputError
from dspsim.ops import default_op, op_names
from dspsim.paths import check_not_inputs
from dspsim.platform import FIDELITIES
from dspsim.results import json_default


class UsageError(DspsimInputError):
    """A command-line argument is wrong."""


class _Once(argparse._StoreAction):
    """A single-valued option given twice with two values is refused (last-wins drops one)."""

    def __call__(self, parser: Any, namespace: Any, values: Any, option_string: Any = None
                 ) -> None:
        seen = namespace.__dict__.setdefault("_given", {})
        if seen.setdefault(self.dest, values) != values:
            raise argparse.ArgumentError(self, f"given twice ({seen[self.dest]!r} and "
                                               f"{values!r}); give it once")
        super().__call__(parser, namespace, values, option_string)


class _Parser(argparse.ArgumentParser):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.register("action", None, _Once)
        self.register("action", "store", _Once)

    def error(self, message: str) -> None:  # one line, exit 2 (argparse prints usage too)
        where = self.prog.removeprefix("dspsim").strip()
        raise UsageError(f"{where}: {message}" if where else message)

    def _get_values(self, action: argparse.Action, arg_strings: list[str]) -> Any:
        # an empty value (``--output "$UNSET"``) would read as the option left out
        if action.nargs not in (argparse.PARSER, argparse.REMAINDER) and "" in arg_strings:
            left_out = " or leave the option out" if action.option_strings else ""
            raise argparse.ArgumentError(action, f"an empty value; give a value{left_out}")
        return super()._get_values(action, arg_strings)


class StdoutError(DspsimInputError):
    """Standard output cannot be written (full, closed): one line, exit 2."""


class _GuardedStdout:
    """``sys.stdout`` while a command runs: a write or flush that fails (ENOSPC, EBADF, EIO,
    or no stdout at all) raises :class:`StdoutError`; a broken pipe stays a BrokenPipeError."""

    def __init__(self, stream: Any):
        self._stream = stream

    def _call(self, method: str, *args: Any) -> Any:
        try:
            if self._stream is None:
                if method == "flush":
                    return None
                raise OSError(errno.EBADF, "standard output is closed")
            return getattr(self._stream, method)(*args)
        except BrokenPipeError:
            raise
        except OSError as e:
            silence_stdout()
            raise StdoutError(f"cannot write to standard output: {e.strerror or e}") from None

    def write(self, text: str) -> int:
        return self._call("write", text)

    def flush(self) -> None:
        self._call("flush")

    def isatty(self) -> bool:
        return self._stream is not None and self._stream.isatty()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


@contextlib.contextmanager
def guarded_stdout() -> Iterator[None]:
    real = sys.stdout
    sys.stdout = _GuardedStdout(real)
    try:
        yield
    finally:
        sys.stdout = real


def silence_stdout() -> None:
    """Point file descriptor 1 at /dev/null: the interpreter's last flush cannot fail again (a
    traceback or exit code 120 after the one-line error)."""
    with contextlib.suppress(AttributeError, OSError, ValueError):  # no stdout: nothing to do
        fd = sys.__stdout__.fileno()
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, fd)
        os.close(null)


def ignore_file_size_signal() -> None:
    """Ignore SIGXFSZ: past a file-size limit a write then fails with EFBIG (a one-line error)
    instead of the process being killed with the file half written."""
    sig = getattr(signal, "SIGXFSZ", None)
    if sig is not None:
        with contextlib.suppress(ValueError, OSError):  # not the main thread
            signal.signal(sig, signal.SIG_IGN)


class Interrupts:
    """A command's SIGINT handling (:func:`interrupts_handled`). Python drops an exception
    raised where it cannot propagate (a finalizer, a weak-reference or at-fork callback), so an
    interrupt landing there is delivered again, and :meth:`check` raises one that never was."""

    def __init__(self, active: bool = True) -> None:
        self.hits = 0
        self.pending = False  # swallowed, not delivered again yet
        self.raised_late = False  # check() raised it: a redelivery still on its way is spent
        self.active = active
        self.lock = threading.Lock()
        self.old_hook = sys.unraisablehook

    def handler(self, signum: int, frame: Any) -> None:
        if self.raised_late:
            self.raised_late = False
            return
        self.hits += 1
        self.pending = False
        if self.hits > 1:
            os._exit(INTERRUPTED_EXIT)
        raise KeyboardInterrupt

    def unraisable(self, info: Any) -> None:
        """``sys.unraisablehook``: an interrupt Python could not raise is delivered again."""
        if not isinstance(info.exc_value, KeyboardInterrupt) or self.hits != 1:
            self.old_hook(info)
            return
        self.hits, self.pending = 0, True
        timer = threading.Timer(0.01, self._redeliver)
        timer.daemon = True
        timer.start()

    def _redeliver(self) -> None:
        with self.lock:
            if self.active and self.pending:
                _thread.interrupt_main()

    def check(self) -> None:
        """Raise ``KeyboardInterrupt`` if one was swallowed and never delivered again."""
        with self.lock:
            if self.pending:
                self.pending, self.hits, self.raised_late = False, 1, True
                raise KeyboardInterrupt


@contextlib.contextmanager
def interrupts_handled() -> Iterator[Interrupts]:
    """Run a command so that Ctrl-C stops it the same way everywhere: the first SIGINT raises
    ``KeyboardInterrupt`` in the main thread (the command's clean-up runs, the caller exits with
    :data:`INTERRUPTED_EXIT`); a second ends the process at once with that code (pool workers
    follow their parent). Outside the main thread nothing is changed."""
    old = signal.getsignal(signal.SIGINT)  # None: a handler not installed from Python
    if threading.current_thread() is not threading.main_thread() or old is None:
        yield Interrupts(active=False)
        return
    state = Interrupts()
    signal.signal(signal.SIGINT, state.handler)
    sys.unraisablehook = state.unraisable
    try:
        yield state
    finally:
        with state.lock:
            state.active = False
        sys.unraisablehook = state.old_hook
        signal.signal(signal.SIGINT, old)


def interrupted_message(prog: str = "dspsim") -> None:
    """The one line an interrupted command prints (stderr)."""
    with contextlib.suppress(OSError, ValueError):
        print(f"{prog}: interrupted", file=sys.stderr)
        sys.stderr.flush()


def positive_int(text: str) -> int:
    """An argparse type: a whole number above 0."""
    try:
        value = int(text.replace("_", ""))
    except ValueError:
        value = 0
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive integer")
    return value


def int_in(lo: int, hi: int | None = None) -> Callable[[str], int]:
    """An argparse type: a whole number from ``lo`` (to ``hi``, if given)."""
    allowed = f"allowed {lo:,} to {hi:,}" if hi is not None else f"allowed {lo:,} or more"
    return _ranged(int, "an integer", lo, hi, allowed)


def float_in(lo: float, hi: float) -> Callable[[str], float]:
    """An argparse type: a finite number from ``lo`` to ``hi``."""
    return _ranged(float, "a number", lo, hi, f"allowed {lo:,g} to {hi:,g}")


def _ranged(convert: Callable[[str], Any], what: str, lo: Any, hi: Any,
            allowed: str) -> Callable[[str], Any]:
    def parse(text: str) -> Any:
        try:
            value = convert(text.replace("_", ""))
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {what}; {allowed}") from None
        if not (lo <= value and (hi is None or value <= hi)):  # NaN fails
            raise argparse.ArgumentTypeError(f"{text!r}: {allowed}")
        return value

    return parse


def add_model_args(
    p: argparse.ArgumentParser,
    set_help: str = "override a model key, e.g. ddr.latency_cycles=300 (repeatable)",
    models: bool = False,
) -> None:
    g = p.add_mutually_exclusive_group() if models else p
    g.add_argument("--model", metavar="PATH", help="model file or packaged model name "
                   "(default: the packaged J6 model)")
    if models:
        g.add_argument("--models", metavar="A,B,...", type=model_list,
                       help="several model files (e.g. the readings of one calibration): the "
                       "same work under each, reported per model")
    p.add_argument(
        "--set", metavar="KEY=VALUE", action="append", default=[], dest="overrides", help=set_help
    )


def model_list(text: str) -> list[str]:
    """``--models``: model files or packaged names separated by commas."""
    items = [t.strip() for t in text.split(",") if t.strip()]
    if not items:
        raise argparse.ArgumentTypeError(f"{text!r}: expected model files separated by commas")
    return items


def model_from_args(args: argparse.Namespace) -> HardwareModel:
    return load_model(args.model, args.overrides)


def models_from_args(args: argparse.Namespace) -> dict[str, HardwareModel]:
    """``--models`` (each with ``--set``) by label, else ``--model``."""
    if not getattr(args, "models", None):
        model = model_from_args(args)
        return {model.name: model}
    return load_models(args.models, args.overrides)


def model_files(spec: str | Path | None) -> list[Path]:
    """The files a ``--model`` reads: the file and its ``base`` chain, best effort (a file
    that cannot be read ends the chain; loading reports why)."""
    out: list[Path] = []
    try:
        p: Path | None = default_model_path() if spec is None else resolve_model_path(spec)
        while p is not None and len(out) <= MAX_BASE_DEPTH and p.is_file():
            if any(os.path.realpath(p) == os.path.realpath(q) for q in out):
                break
            out.append(p)
            if p.stat().st_size > MAX_MODEL_FILE_BYTES:
                break
            base = tomllib.loads(p.read_text(encoding="utf-8")).get("base")
            p = resolve_model_path(base, p) if isinstance(base, str) and base else None
    except (OSError, ValueError, UnicodeDecodeError, RecursionError):
        pass
    return out


def model_inputs(args: argparse.Namespace) -> list[tuple[str, Path]]:
    """(option, file) for every model file the command reads, bases included."""
    models = getattr(args, "models", None)
    if isinstance(models, str):
        models = [m.strip() for m in models.split(",") if m.strip()]
    specs = [("--models", m) for m in models] if models else [("--model",
                                                                getattr(args, "model", None))]
    return [(opt if i == 0 else f"{opt} (its base)", f)
            for opt, spec in specs for i, f in enumerate(model_files(spec))]


def check_outputs_not_inputs(args: argparse.Namespace,
                             outputs: list[tuple[str, str | Path | None]],
                             inputs: list[tuple[str, str | Path | None]] = ()) -> None:
    """Refuse, before any work, an output that is one of the command's input files (``inputs``,
    its model files, its ``--op-file`` files)."""
    op_files = [("--op-file", f) for f in getattr(args, "op_file", None) or []]
    check_not_inputs(outputs, [*inputs, *model_inputs(args), *op_files])


# a list of more records than this is written one record a line (json's C encoder)
LONG_LIST = 64


def emit_json(obj: Any) -> None:
    """``obj`` as indented JSON on stdout, written at once (``json.dump`` writes each token on
    its own: millions of writes for a million passes)."""
    sys.stdout.write(json_text(obj) + "\n")


def json_text(obj: Any) -> str:
    """``obj`` as JSON indented by 2, but a list of more than :data:`LONG_LIST` dicts one compact
    record a line (json's indenting encoder is pure Python: a million passes took seconds)."""
    record = json.JSONEncoder(separators=(", ", ": "), default=json_default).encode
    long: dict[str, list[str]] = {}
    tag = uuid.uuid4().hex  # no value can hold the placeholders by chance (checked below)

    def mark(x: Any) -> Any:
        if isinstance(x, dict):
            return {k: mark(v) for k, v in x.items()}
        if isinstance(x, (list, tuple)):
            if len(x) > LONG_LIST and all(isinstance(e, dict) for e in x):
                key = f"\0records {len(long)} {tag}\0"
                long[json.dumps(key)] = list(map(record, x))
                return key
            return [mark(v) for v in x]
        return x

    try:
        marked = mark(obj)
    except RecursionError:  # a cycle: json's own encoder names it
        return json.dumps(obj, indent=2, default=json_default)
    text = json.dumps(marked, indent=2, default=json_default)
    if any(text.count(key) != 1 for key in long):
        return json.dumps(obj, indent=2, default=json_default)
    for key, records in long.items():
        at = text.index(key)
        line = text[text.rfind("\n", 0, at) + 1:at]  # '    "passes": '
        indent = line[:len(line) - len(line.lstrip())]
        inner = ",\n".join(indent + "  " + r for r in records)
        text = f"{text[:at]}[\n{inner}\n{indent}]{text[at + len(key):]}"
    return text


def add_data_args(p: argparse.ArgumentParser, arrays: bool) -> None:
    data = p.add_argument_group("data path")
    data.add_argument("--no-data", action="store_true",
                      help="timing only: move no values (faster; no output or host check)")
    if arrays:
        data.add_argument("--input", metavar="X.npy",
                          help="the input: a float32 .npy of the op's shape (1-D or 2-D), an "
                          ".npz for --op fc (default: the op's own, softmax the seed's x[i] = "
                          "1 + i/n)")
        data.add_argument("--output", metavar="Y.npy", help="write the op's output here")


def positive_shape(text: str) -> tuple[int, ...]:
    """``--shape``: positive integers separated by commas (``1024,256``)."""
    try:
        dims = tuple(int(t.replace("_", "")) for t in text.split(","))
    except ValueError:
        dims = ()
    if not dims or any(d <= 0 for d in dims):
        raise argparse.ArgumentTypeError(
            f"{text!r}: expected positive integers separated by commas, e.g. 1024,256"
        )
    return dims


def add_op_args(p: argparse.ArgumentParser) -> None:
    """--op, --variant (--mode), --n / --shape, --core, --fidelity."""
    g = p.add_argument_group("operator")
    g.add_argument("--op", default=default_op(), metavar="OP",
                   help=f"operator: {', '.join(op_names())} (default {default_op()}; "
                   "`dspsim ops`)")
    g.add_argument("--variant", metavar="V", help="the op's variant (default: the op's first)")
    g.add_argument("--mode", metavar="V", help="older name of --variant")
    size = g.add_mutually_exclusive_group()
    size.add_argument("--n", type=positive_int,
                      help="a 1-D op's size: float32 elements (bytes for copy; default: the "
                      "op's default shape, or the --input array's)")
    size.add_argument("--shape", type=positive_shape, metavar="R,C",
                      help="input shape, e.g. 1024,256 for a 2-D op")
    g.add_argument("--core", type=int, default=0, metavar="K",
                   help="run on core K (0 to core.count - 1; default 0)")
    g.add_argument("--fidelity", choices=FIDELITIES, default="burst",
                   help="burst or tile: one engine, two names (tile kept for old commands and "
                   "sweep files)")


def op_variant(args: argparse.Namespace) -> str | None:
    """--variant, or --mode, its older name."""
    if args.variant and args.mode and args.variant != args.mode:
        raise UsageError(f"--variant {args.variant} and --mode {args.mode} disagree; give one")
    return args.variant or args.mode


def add_op_file_args(p: argparse.ArgumentParser) -> None:
    """``--op-file PATH`` (repeatable) and ``--allow-python`` (the files are loaded before the
    command line is parsed: :func:`dspsim.cli.load_op_files_of`)."""
    g = p.add_argument_group("op files")
    g.add_argument("--op-file", action="append", default=[], metavar="PATH",
                   help="load an op declared in a TOML file (docs/reference.md, Op files); "
                   "its op is the default --op (repeatable)")
    g.add_argument("--allow-python", action="store_true",
                   help="let an op file's [reference] python = \"module:function\" run")


# ------------------------------------------------------------------------------ progress
ELAPSED_DELAY_S = 1.0  # a short command draws nothing
ELAPSED_EVERY_S = 0.5


def on_terminal() -> bool:
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


def status_line(msg: str) -> None:
    """One status line on the terminal, rewritten in place (``""`` clears it)."""
    sys.stderr.write("\r\033[K" + msg)
    sys.stderr.flush()


@contextlib.contextmanager
def counter(desc: str, total: int | None = None, unit: str = "it") -> Iterator[Any]:
    """A tqdm counter of ``unit`` (``total`` of them, when known) on a terminal, else the two
    calls the commands make of one (count, name the stage) doing nothing; removed at the end."""
    if not on_terminal():
        yield SimpleNamespace(update=lambda n=1: None, set_description_str=lambda desc: None)
        return
    from tqdm import tqdm

    bar = tqdm(total=total, desc=desc, unit=unit, file=sys.stderr, dynamic_ncols=True,
               leave=False, smoothing=0.05)
    try:
        yield bar
    finally:
        bar.close()


@contextlib.contextmanager
def elapsed(desc: str) -> Iterator[None]:
    """``desc: N s`` on a terminal while the block runs (after :data:`ELAPSED_DELAY_S`),
    cleared when it ends."""
    if not on_terminal():
        yield
        return
    stop = threading.Event()
    start = time.monotonic()
    drawn = False

    def draw() -> None:
        nonlocal drawn
        if stop.wait(ELAPSED_DELAY_S):
            return
        while not stop.is_set():
            try:
                status_line(f"{desc}: {time.monotonic() - start:,.0f} s")
                drawn = True
            except (OSError, ValueError):
                return
            stop.wait(ELAPSED_EVERY_S)

    thread = threading.Thread(target=draw, daemon=True, name="dspsim-elapsed")
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
        if drawn:
            with contextlib.suppress(OSError, ValueError):
                status_line("")
