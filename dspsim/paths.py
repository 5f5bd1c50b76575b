"""Output paths: checked before any simulation runs, then written atomically.

Every file dspsim writes goes through :func:`atomic_write` (or :func:`atomic_write_bytes`,
:func:`atomic_write_text`): the content goes to a temporary file in the destination's folder,
is fsynced, then renamed over the destination. On any failure (a full disk, a file-size limit,
an exception in the writer, Ctrl-C) the temporary file is removed and the old file, if any, is
left exactly as it was. A destination that is a symlink is written through: the file it points
to is replaced, the link stays.

:func:`writable_file` refuses, before anything runs, an output that exists and is not a regular
file (a device such as ``/dev/full``, a FIFO, a socket, possibly behind a symlink) or whose name
the file system cannot hold (:func:`check_name_fits`: more than ``NAME_MAX``, usually 255,
bytes), :func:`check_distinct` two outputs of one command that are the same file (same
resolved path, or hard links to one inode), and :func:`check_not_inputs` an output that is one
of the command's inputs.

Temporary files have short names of their own, ``.dspsim-HHHH-PID-XXXXXXXX.tmp`` (``HHHH``: a
tag of the host, ``PID``: the writing process), whatever the output's name, so an output whose
name fits never fails for its temporary file's. One that ``kill -9`` left behind is removed by
the next write into its folder (:func:`remove_stale_temps`): when its process, on this host, is
gone, or when it is older than :data:`STALE_TEMP_S`.
"""

from __future__ import annotations

import errno
import functools
import os
import re
import socket
import stat
import tempfile
import time
import zlib
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


def _not_regular(p: Path, what: str) -> DspsimInputError:
    return DspsimInputError(
        f"{what} {str(p)!r}: exists and is not a regular file (a device, FIFO, socket or "
        "directory); give a file name"
    )


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
        raise _not_regular(p, what)


# ---------------------------------------------------------------------- names and temporaries
TEMP_PREFIX = ".dspsim-"
TEMP_SUFFIX = ".tmp"
STALE_TEMP_S = 24 * 3600.0  # a temporary file of another host is stale after a day untouched
_HOST_TAG = format(zlib.crc32(socket.gethostname().encode("utf-8", "replace")) & 0xFFFF, "04x")
_TEMP_NAME = re.compile(
    re.escape(TEMP_PREFIX) + r"(?P<host>[0-9a-f]{4})-(?P<pid>[0-9]{1,10})-[A-Za-z0-9_]{1,16}"
    r"(?:\.tmp|\.staging)"
)
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
    except (PermissionError, OverflowError, OSError):
        return True  # another user's process (or not ours to judge): keep its file
    return True


def remove_stale_temps(folder: str | Path, force: bool = False) -> list[Path]:
    """Remove the temporary files (and staging folders) of dspsim writers that died in
    ``folder``: those of a process of this host that is gone, or untouched for
    :data:`STALE_TEMP_S`. Never this process's, nor a live one's. Once per folder per process
    (``force``: again). Returns what was removed; failures are ignored."""
    import shutil

    key = os.path.realpath(folder)
    if key in _cleaned and not force:
        return []
    _cleaned.add(key)
    removed = []
    now = time.time()
    try:
        entries = list(os.scandir(key))
    except OSError:
        return []
    for entry in entries:
        m = _TEMP_NAME.fullmatch(entry.name)
        if m is None:
            continue
        pid = int(m["pid"])
        try:
            age = now - entry.stat(follow_symlinks=False).st_mtime
        except OSError:
            continue
        ours = m["host"] == _HOST_TAG
        if ours and pid == os.getpid():
            continue
        if not ((ours and not _pid_alive(pid)) or age > STALE_TEMP_S):
            continue
        try:
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path)
            else:
                os.unlink(entry.path)
            removed.append(Path(entry.path))
        except OSError:
            pass
    return removed


def _limit(folder: Path, name: str, default: int) -> int:
    try:
        return int(os.pathconf(folder, name))
    except (OSError, ValueError, TypeError):
        return default


def check_name_fits(path: str | Path, what: str) -> None:
    """Refuse an output whose name (or whose full path, its temporary file's included) the
    file system cannot hold, before any work: one line naming the limit."""
    p = Path(path)
    shown = f"{what} {str(p)!r}" if what else repr(str(p))
    for q in dict.fromkeys([p, Path(os.path.realpath(p))]):
        folder = q.parent if str(q.parent) else Path(".")
        name_bytes = len(os.fsencode(q.name))
        name_max = _limit(folder, "PC_NAME_MAX", 255) if folder.is_dir() else 255
        if name_bytes > name_max:
            raise DspsimInputError(
                f"{shown}: its name is {name_bytes:,} bytes; this file system allows at most "
                f"{name_max:,}: give a shorter name"
            )
        path_max = _limit(folder, "PC_PATH_MAX", 4096) if folder.is_dir() else 4096
        full = len(os.fsencode(os.path.abspath(folder))) + 1 + max(name_bytes, TEMP_NAME_MAX)
        if full >= path_max:
            raise DspsimInputError(
                f"{shown}: its path is too long for this system (at most {path_max - 1:,} "
                "bytes, with room for a temporary name): give a shorter path"
            )


def writable_file(path: str | Path, what: str, suffixes: tuple[str, ...]) -> Path:
    """``path`` if it has one of ``suffixes`` (any case) and can be written, else a one-line
    error. An existing output must be a regular file."""
    p = Path(path)
    if suffix_of(p, suffixes) not in suffixes:
        raise DspsimInputError(
            f"{what} {str(p)!r}: unknown extension {suffix_of(p, suffixes) or '(none)'!r}; "
            f"allowed {', '.join(suffixes)}"
        )
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.is_dir():
        raise DspsimInputError(f"{what} {str(p)!r}: directory {str(parent)!r} does not exist")
    check_name_fits(p, what)
    check_regular_or_absent(p, what)
    target_dir = Path(os.path.realpath(p)).parent
    if not os.access(target_dir, os.W_OK) or (p.exists() and not os.access(p, os.W_OK)):
        raise DspsimInputError(f"{what} {str(p)!r}: not writable")
    return p


def check_distinct(named: Iterable[tuple[str, str | Path | None]]) -> None:
    """Refuse two outputs of one command that name one file: the same path once resolved
    (symlinks, ``..``), or two hard links to one inode. ``named``: (option, path) pairs; paths
    that are None are skipped."""
    seen: list[tuple[str, Path, tuple[int, int] | None]] = []
    for opt, path in named:
        if path is None or str(path) == "":
            continue
        resolved = Path(os.path.realpath(path))
        try:
            st = os.stat(resolved)
            inode: tuple[int, int] | None = (st.st_dev, st.st_ino)
        except OSError:
            inode = None
        for other, other_path, other_inode in seen:
            if resolved == other_path or (inode is not None and inode == other_inode):
                raise DspsimInputError(f"{other} and {opt} name the same file {str(resolved)!r}")
        seen.append((opt, resolved, inode))


def _identity(path: str | Path) -> tuple[Path, tuple[int, int] | None]:
    resolved = Path(os.path.realpath(path))
    try:
        st = os.stat(resolved)
        return resolved, (st.st_dev, st.st_ino)
    except (OSError, ValueError):
        return resolved, None


def check_not_inputs(outputs: Iterable[tuple[str, str | Path | None]],
                     inputs: Iterable[tuple[str, str | Path | None]]) -> None:
    """Refuse an output that is one of the command's inputs (the same path once resolved, or
    a hard link to it), before any work: writing it would replace what the command reads.
    ``outputs``, ``inputs``: (option, path) pairs; None paths are skipped."""
    ins = [(opt, str(p), *_identity(p)) for opt, p in inputs if p is not None and str(p) != ""]
    for opt, path in outputs:
        if path is None or str(path) == "":
            continue
        resolved, inode = _identity(path)
        for in_opt, shown, in_resolved, in_inode in ins:
            if resolved == in_resolved or (inode is not None and inode == in_inode):
                raise DspsimInputError(
                    f"{opt} {str(path)!r} is {in_opt} {shown!r}, an input of the command: an "
                    "output never replaces an input; give another file name"
                )


def _umask() -> int:
    try:  # Linux 4.7+: read it without changing it
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _reason(e: OSError) -> str:
    return e.strerror or str(e) or e.__class__.__name__


def atomic_write(path: str | Path, writer: Callable[[IO[bytes]], Any], what: str = "") -> Path:
    """Write ``path`` as ``writer(f)`` writes to the binary file object ``f``: to a temporary
    file in the same folder, fsynced, then renamed over ``path``. On any failure the temporary
    file is removed and ``path`` is left untouched; an ``OSError`` (a full disk, ``EFBIG`` under
    a file-size limit) becomes a one-line :class:`DspsimInputError`. Returns ``path``."""
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
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(e, OSError):
            raise DspsimInputError(f"cannot write {shown}: {_reason(e)}") from None
        raise
    try:  # make the rename itself durable
        dirfd = os.open(target.parent, os.O_RDONLY)
        try:
            os.fsync(dirfd)
        finally:
            os.close(dirfd)
    except OSError:
        pass
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
    laying the figure out) is drawn as written (:data:`PLAIN_TEXT`). :func:`atomic_savefig`
    makes text added later plain as well."""

    @functools.wraps(build)
    def built(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        from matplotlib import rc_context

        with rc_context(PLAIN_TEXT):
            return build(*args, **kwargs)

    return built


def atomic_savefig(fig: Any, path: str | Path, what: str = "figure", **kwargs: Any) -> Path:
    """``fig.savefig`` (a matplotlib Figure) to ``path`` through :func:`atomic_write`; the format
    is the extension's (any case) unless ``format=`` is given. The file is deterministic: the
    same figure gives the same bytes (no creation time, SVG ids from a fixed salt). Every text
    is drawn as written (:data:`PLAIN_TEXT`)."""
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
    """A small input file's text (a model file, a spec, a measurements table, a workload): a
    regular file of at most ``max_bytes`` in UTF-8 (a leading byte-order mark is dropped), else a
    one-line ``error`` naming ``what`` (``/dev/zero`` or a FIFO would be read forever); ``hint``
    ends the not-found and not-regular messages."""
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
