"""Output paths: checked before any simulation runs, then written atomically.

Every file dspsim writes goes through :func:`atomic_write`: to a temporary file in the
destination's folder, fsynced, renamed over the destination; on any failure (a full disk, a
file-size limit, an exception, Ctrl-C) the temporary file goes and an old file stays as it was.
A symlink is written through (its file replaced, the link kept). Before any work,
:func:`writable_file` refuses an output that exists and is not a regular file or whose name the
file system cannot hold (:func:`check_name_fits`), :func:`check_distinct` two outputs that are
one file, :func:`check_not_inputs` an output that is an input. Temporary files have short names
of their own, ``.dspsim-HHHH-PID-XXXXXXXX.tmp`` (host tag, writing process); one that ``kill -9``
left behind is removed by the next write into its folder (:func:`remove_stale_temps`).
"""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import re
import socket
import stat
import tempfile
import time
import zlib
from collections import namedtuple
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import IO, Any, ParamSpec, TypeVar

from dspsim.errors import DspsimInputError


def suffix_of(p: Path, suffixes: tuple[str, ...]) -> str:
    """The longest of ``suffixes`` that ``p`` ends with, in any case (``.json.gz`` before
    ``.gz``), else its plain suffix (lower case)."""
    name = p.name.lower()
    matches = [s for s in suffixes if name.endswith(s)]
    return max(matches, key=len) if matches else p.suffix.lower()


def unknown_extension(p: Path, what: str, suffix: str, allowed: tuple[str, ...]
                      ) -> DspsimInputError:
    """The one-line refusal of ``p`` (``what``: how messages name it), whose extension
    ``suffix`` is none of ``allowed``: every "unknown extension" message dspsim gives."""
    return DspsimInputError(f"{what} {str(p)!r}: unknown extension {suffix or '(none)'!r}; "
                            f"allowed {', '.join(allowed)}")


def check_suffix(p: Path, what: str, suffixes: tuple[str, ...]) -> str:
    """The one of ``suffixes`` that ``p`` ends with (:func:`suffix_of`, any case), else
    :func:`unknown_extension`."""
    suffix = suffix_of(p, suffixes)
    if suffix not in suffixes:
        raise unknown_extension(p, what, suffix, suffixes)
    return suffix


def check_regular_or_absent(p: Path, what: str) -> None:
    """Refuse ``p`` when it exists (through symlinks) and is not a regular file."""
    try:
        st = os.stat(p)
    except FileNotFoundError:
        return  # absent, or a dangling symlink: writing creates its target
    except OSError as e:
        raise DspsimInputError(f"{what} {str(p)!r}: {e.strerror or e}") from None
    if stat.S_ISDIR(st.st_mode):
        raise DspsimInputError(f"{what} {str(p)!r}: is a directory, expected a file name")
    if not stat.S_ISREG(st.st_mode):
        raise DspsimInputError(f"{what} {str(p)!r}: exists and is not a regular file (a device, "
                               "FIFO, socket or directory); give a file name")


# ---------------------------------------------------------------------- names and temporaries
TEMP_PREFIX = ".dspsim-"
TEMP_SUFFIX = ".tmp"
STALE_TEMP_S = 24 * 3600.0  # a temporary file of another host is stale after a day untouched
_HOST_TAG = format(zlib.crc32(socket.gethostname().encode("utf-8", "replace")) & 0xFFFF, "04x")
_TEMP_NAME = re.compile(re.escape(TEMP_PREFIX) + r"(?P<host>[0-9a-f]{4})-(?P<pid>[0-9]{1,10})-"
                        r"[A-Za-z0-9_]{1,16}(?:\.tmp|\.staging)")
# the longest temporary name: prefix, host tag, a 10-digit pid, mkstemp's 8 letters, suffix
TEMP_NAME_MAX = len(TEMP_PREFIX) + 4 + 1 + 10 + 1 + 8 + len(".staging")
_cleaned: set[str] = set()


def temp_prefix() -> str:
    """The start of this process's temporary names (``tempfile.mkstemp(prefix=...)``)."""
    return f"{TEMP_PREFIX}{_HOST_TAG}-{os.getpid()}-"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (OverflowError, OSError):  # another user's process (or not ours to judge): alive
        pass
    return True


def remove_stale_temps(folder: str | Path, force: bool = False) -> list[Path]:
    """Remove the temporary files (and staging folders) in ``folder`` of dspsim writers that
    died: of a gone process of this host, or untouched for :data:`STALE_TEMP_S`. Once per folder
    per process (``force``: again); returns what was removed, failures ignored."""
    import shutil

    key = os.path.realpath(folder)
    if key in _cleaned and not force:
        return []
    _cleaned.add(key)
    removed, now = [], time.time()
    try:
        entries = list(os.scandir(key))
    except OSError:
        return []
    for entry in entries:
        m = _TEMP_NAME.fullmatch(entry.name)
        if m is None:
            continue
        pid, ours = int(m["pid"]), m["host"] == _HOST_TAG
        try:
            age = now - entry.stat(follow_symlinks=False).st_mtime
        except OSError:
            continue
        if (ours and pid == os.getpid()) or not ((ours and not _pid_alive(pid))
                                                 or age > STALE_TEMP_S):
            continue
        with contextlib.suppress(OSError):
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path)
            else:
                os.unlink(entry.path)
            removed.append(Path(entry.path))
    return removed


def _limit(folder: Path, name: str, default: int) -> int:
    """The file system's ``pathconf`` limit ``name`` in ``folder``, else ``default``."""
    try:
        return int(os.pathconf(folder, name)) if folder.is_dir() else default
    except (OSError, ValueError, TypeError):
        return default


def check_name_fits(path: str | Path, what: str) -> None:
    """Refuse an output whose name (or full path, with room for its temporary's) the file
    system cannot hold, before any work: one line naming the limit."""
    p = Path(path)
    shown = f"{what} {str(p)!r}" if what else repr(str(p))
    for q in dict.fromkeys([p, Path(os.path.realpath(p))]):
        folder = q.parent if str(q.parent) else Path(".")
        name_bytes = len(os.fsencode(q.name))
        name_max = _limit(folder, "PC_NAME_MAX", 255)
        if name_bytes > name_max:
            raise DspsimInputError(f"{shown}: its name is {name_bytes:,} bytes; this file system "
                                   f"allows at most {name_max:,}: give a shorter name")
        path_max = _limit(folder, "PC_PATH_MAX", 4096)
        full = len(os.fsencode(os.path.abspath(folder))) + 1 + max(name_bytes, TEMP_NAME_MAX)
        if full >= path_max:
            raise DspsimInputError(f"{shown}: its path is too long for this system (at most "
                                   f"{path_max - 1:,} bytes, with room for a temporary name): "
                                   "give a shorter path")


def writable_file(path: str | Path, what: str, suffixes: tuple[str, ...]) -> Path:
    """``path`` if it has one of ``suffixes`` (any case) and can be written, else a one-line
    error. An existing output must be a regular file."""
    p = Path(path)
    check_suffix(p, what, suffixes)
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.is_dir():
        raise DspsimInputError(f"{what} {str(p)!r}: directory {str(parent)!r} does not exist")
    check_name_fits(p, what)
    check_regular_or_absent(p, what)
    target_dir = Path(os.path.realpath(p)).parent
    if not os.access(target_dir, os.W_OK) or (p.exists() and not os.access(p, os.W_OK)):
        raise DspsimInputError(f"{what} {str(p)!r}: not writable")
    return p


Named = Iterable[tuple[str, str | Path | None]]  # (option, path) pairs; None or "": not given
_Given = namedtuple("_Given", "opt path resolved inode")


def _identities(named: Named) -> list[_Given]:
    """Each path given, with its resolved path and (device, inode) (None: it does not exist)."""
    out = []
    for opt, path in named:
        if path is not None and str(path) != "":
            resolved = Path(os.path.realpath(path))
            try:
                st = os.stat(resolved)
                out.append(_Given(opt, path, resolved, (st.st_dev, st.st_ino)))
            except (OSError, ValueError):
                out.append(_Given(opt, path, resolved, None))
    return out


def _same(a: _Given, b: _Given) -> bool:
    return a.resolved == b.resolved or (a.inode is not None and a.inode == b.inode)


def check_distinct(named: Named) -> None:
    """Refuse two outputs of one command that name one file: the same path once resolved
    (symlinks, ``..``), or two hard links to one inode."""
    seen: list[_Given] = []
    for this in _identities(named):
        for other in seen:
            if _same(this, other):
                raise DspsimInputError(f"{other.opt} and {this.opt} name the same file "
                                       f"{str(this.resolved)!r}")
        seen.append(this)


def check_not_inputs(outputs: Named, inputs: Named) -> None:
    """Refuse, before any work, an output that is one of the command's inputs (the same path
    once resolved, or a hard link to it): writing it would replace what the command reads."""
    ins = _identities(inputs)
    for out in _identities(outputs):
        for i in ins:
            if _same(out, i):
                raise DspsimInputError(
                    f"{out.opt} {str(out.path)!r} is {i.opt} {str(i.path)!r}, an input of the "
                    "command: an output never replaces an input; give another file name")


def _umask() -> int:
    with contextlib.suppress(OSError, ValueError, IndexError):  # Linux 4.7+: read, not changed
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _reason(e: OSError) -> str:
    return e.strerror or str(e) or e.__class__.__name__


def atomic_write(path: str | Path, writer: Callable[[IO[bytes]], Any], what: str = "") -> Path:
    """Write ``path`` as ``writer(f)`` writes to the binary file ``f``, atomically (see the
    module docstring); an ``OSError`` (a full disk, ``EFBIG``) becomes one line. Returns it."""
    p = Path(path)
    shown = f"{what} {str(p)!r}" if what else repr(str(p))
    target = Path(os.path.realpath(p))  # through a symlink: replace its file, keep the link
    check_name_fits(p, what or "output")
    check_regular_or_absent(target, what or "output")
    remove_stale_temps(target.parent)
    try:  # a short name of its own: an output whose name fits never fails for its temporary's
        fd, tmp = tempfile.mkstemp(prefix=temp_prefix(), suffix=TEMP_SUFFIX, dir=target.parent)
    except OSError as e:
        raise DspsimInputError(f"cannot write {shown}: {_reason(e)}") from None
    try:
        with os.fdopen(fd, "wb") as f:
            writer(f)
            f.flush()
            os.fsync(f.fileno())
        try:
            mode = stat.S_IMODE(os.stat(target).st_mode)
        except FileNotFoundError:
            mode = 0o666 & ~_umask()
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException as e:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(e, OSError):
            raise DspsimInputError(f"cannot write {shown}: {_reason(e)}") from None
        raise
    with contextlib.suppress(OSError):  # make the rename itself durable
        dirfd = os.open(target.parent, os.O_RDONLY)
        try:
            os.fsync(dirfd)
        finally:
            os.close(dirfd)
    return p


def atomic_write_bytes(path: str | Path, data: bytes, what: str = "") -> Path:
    """:func:`atomic_write` of ``data``."""
    return atomic_write(path, lambda f: f.write(data), what)


def atomic_write_text(path: str | Path, text: str, what: str = "", encoding: str = "utf-8") -> Path:
    """:func:`atomic_write` of ``text`` (UTF-8 by default)."""
    return atomic_write_bytes(path, text.encode(encoding), what)


# What makes one figure's file differ between two runs, per format: the creation time matplotlib
# writes into SVG, PDF and PostScript files (None leaves it out); SVG's element ids are salted
# with a random value unless ``svg.hashsalt`` is set
_TIMESTAMP_KEYS = {"svg": "Date", "pdf": "CreationDate", "ps": "CreationDate",
                   "eps": "CreationDate"}
SVG_HASH_SALT = "dspsim"


# Every text a figure draws is drawn as written: a "$" in a name (a model's, a stream's, a
# file's, a trace label, a table's value) is a character, never math text (which typesets
# "a$b$c" and fails on "$x^$"). Tick labels too: a log axis needs a plain formatter.
PLAIN_TEXT = {"text.parse_math": False}
_P = ParamSpec("_P")
_R = TypeVar("_R")


def plain_text(build: Callable[_P, _R]) -> Callable[_P, _R]:
    """Decorates a function that builds a figure: every text it creates (and measures while
    laying it out) is drawn as written (:data:`PLAIN_TEXT`)."""

    @functools.wraps(build)
    def built(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        from matplotlib import rc_context

        with rc_context(PLAIN_TEXT):
            return build(*args, **kwargs)

    return built


def atomic_savefig(fig: Any, path: str | Path, what: str = "figure", **kwargs: Any) -> Path:
    """``fig.savefig`` to ``path`` through :func:`atomic_write`, in the extension's format
    unless ``format=`` is given; deterministic (no creation time, SVG ids from a fixed salt),
    every text drawn as written (:data:`PLAIN_TEXT`)."""
    from matplotlib import rc_context
    from matplotlib.text import Text

    fmt = kwargs.pop("format", None) or Path(path).suffix.lower().lstrip(".") or None
    metadata = dict(kwargs.pop("metadata", None) or {})
    key = _TIMESTAMP_KEYS.get(str(fmt).lower())
    if key is not None:
        metadata.setdefault(key, None)
    if metadata:
        kwargs["metadata"] = metadata

    for text in fig.findobj(Text):
        text.set_parse_math(False)

    def write(f: IO[bytes]) -> None:
        with rc_context({"svg.hashsalt": SVG_HASH_SALT} | PLAIN_TEXT):
            fig.savefig(f, format=fmt, **kwargs)

    return atomic_write(path, write, what)


BOM = "\ufeff"  # a UTF-8 byte-order mark, as a spreadsheet's or an editor's "UTF-8 with BOM"


def path_problem(e: BaseException) -> str:
    """Why a path could not be used, in words: a NUL byte (``ValueError``), a loop of symbolic
    links (``ELOOP``, or pathlib's ``RuntimeError``), a name too long, or the OS's reason."""
    if isinstance(e, ValueError):
        return "the path holds a NUL byte"
    if isinstance(e, RuntimeError) or getattr(e, "errno", None) == errno.ELOOP:
        return "a loop of symbolic links (or too many of them)"
    if getattr(e, "errno", None) == errno.ENAMETOOLONG:
        return "the name is too long"
    if isinstance(e, OSError):
        return _reason(e)
    return e.__class__.__name__


def read_small_text(path: str | Path, what: str, max_bytes: int, hint: str = "",
                    error: type[DspsimInputError] = DspsimInputError) -> str:
    """A small input file's text: a regular file (``/dev/zero`` would be read for ever) of at
    most ``max_bytes`` in UTF-8 (a leading BOM dropped), else a one-line ``error`` naming
    ``what``; ``hint`` ends the not-found and not-regular messages."""
    try:
        p = Path(path)
        st = os.stat(p)
    except FileNotFoundError:
        raise error(f"{what} not found{hint}") from None
    except (OSError, ValueError) as e:
        raise error(f"{what} unreadable: {path_problem(e)}") from None
    if not stat.S_ISREG(st.st_mode):
        kind = "a directory" if stat.S_ISDIR(st.st_mode) else "a device, FIFO or socket"
        raise error(f"{what} is not a regular file ({kind}){hint}")
    try:
        with open(p, "rb") as f:
            data = f.read(max_bytes + 1)
    except OSError as e:
        raise error(f"{what} unreadable: {path_problem(e)}") from None
    if len(data) > max_bytes:
        raise error(f"{what} is larger than {max_bytes:,} bytes")
    try:
        return data.decode("utf-8").removeprefix(BOM)
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise error(f"{what} is not UTF-8 text (line {line})") from None
