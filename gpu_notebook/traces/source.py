"""Reading a file we were handed (a trace, a report JSON): its bytes, or one clear reason why not.

Every input the CLI reads comes through here, so that every damaged or hostile file gets the
same answer in bounded memory: gzip is inflated as a stream and stopped at a cap (a 3 MB gzip
bomb inflates to gigabytes: ``gzip.decompress`` of it would hold them all), a plain file larger
than the cap is refused from its size, and the ways a file can fail (missing, a folder, no
permission, truncated or corrupt gzip) are one ``InputError`` whose text says why.
``describe`` does the same for what fails after the bytes are read (JSON nested 100,000 deep,
a number past float range): the caller prints ``cannot read FILE: <why>``.
"""

from __future__ import annotations

import errno
import gzip
import os
import stat
import zlib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import BinaryIO

# The cap on what one input may hold once inflated, in MB (1 MB = 2**20 bytes). A default
# profiler window writes ~0.3 MB; a long multi-GPU trace a few hundred; decoding one costs
# about 3x its size in memory, so the default keeps a read under ~4 GB.
MAX_INPUT_ENV = "GPUCHECK_MAX_INPUT_MB"
DEFAULT_MAX_INPUT_MB = 1024
_CHUNK_BYTES = 1 << 20
_GZIP_MAGIC = b"\x1f\x8b"


class InputError(ValueError):
    """The file cannot be read; ``str()`` says why in a few words (no traceback needed)."""


def max_input_bytes(env: Mapping[str, str] | None = None) -> int:
    """The cap from ``GPUCHECK_MAX_INPUT_MB`` (default 1024); InputError when it is not a number."""
    value = (os.environ if env is None else env).get(MAX_INPUT_ENV, "").strip()
    if not value:
        return DEFAULT_MAX_INPUT_MB << 20
    try:
        mb = float(value)
    except ValueError:
        mb = -1.0
    if not 0 < mb < 2**43:  # a positive count of MB (and no float overflow below)
        raise InputError(f"{MAX_INPUT_ENV} must be a positive number of MB (got {value!r})")
    return int(mb * (1 << 20))


def _too_large(what: str, limit_bytes: int) -> InputError:
    mb = limit_bytes / (1 << 20)
    return InputError(
        f"{what} more than {mb:g} MB, the limit on one input (a gzip bomb, or a bigger trace "
        f"than that): set {MAX_INPUT_ENV}={max(2 * mb, 1):g} to read up to {max(2 * mb, 1):g} MB"
    )


def read_input(path: str | Path, limit_bytes: int | None = None) -> bytes:
    """The file's bytes, gzip inflated when it starts with gzip's magic bytes.

    At most ``limit_bytes`` (default ``max_input_bytes()``) are ever held; raises InputError.
    """
    limit = max_input_bytes() if limit_bytes is None else limit_bytes
    try:
        with open(path, "rb") as f:
            info = os.fstat(f.fileno())
            if stat.S_ISDIR(info.st_mode):
                raise InputError("it is a folder")
            head = f.read(2)
            if head == _GZIP_MAGIC:
                f.seek(0)
                return _inflate(f, limit)
            if stat.S_ISREG(info.st_mode):
                if info.st_size > limit:
                    raise _too_large("it holds", limit)
                # One read into one buffer of the file's size (chunks joined, then the head
                # prepended, copied a 185 MB trace twice); a file that grew since is read on.
                f.seek(0)
                data = f.read(info.st_size)
                more = _read_capped(f.read, limit - len(data), "it holds")
                return data + more if more else data
            return head + _read_capped(f.read, limit - len(head), "it holds")
    except InputError:
        raise
    except Exception as exc:  # every failure of a read is said in one line
        raise InputError(describe(exc)) from exc


def read_head(path: str | Path, n_bytes: int) -> bytes:
    """The first ``n_bytes`` of the file's content (inflated if gzip); raises InputError."""
    try:
        with open(path, "rb") as f:
            if stat.S_ISDIR(os.fstat(f.fileno()).st_mode):
                raise InputError("it is a folder")
            if f.read(2) == _GZIP_MAGIC:
                f.seek(0)
                with gzip.GzipFile(fileobj=f) as g:
                    return g.read(n_bytes)
            f.seek(0)
            return f.read(n_bytes)
    except InputError:
        raise
    except Exception as exc:  # every failure of a read is said in one line
        raise InputError(describe(exc)) from exc


def _read_capped(read: Callable[[int], bytes], limit: int, what: str) -> bytes:
    """Chunks until EOF; InputError past ``limit`` (a pipe or device has no size to check)."""
    chunks: list[bytes] = []
    total = 0
    while True:
        chunk = read(min(_CHUNK_BYTES, max(limit - total, 0) + 1))
        if not chunk:
            return b"".join(chunks)
        total += len(chunk)
        if total > limit:
            raise _too_large(what, limit)
        chunks.append(chunk)


def _inflate(f: BinaryIO, limit: int) -> bytes:
    # GzipFile.read(n) inflates at most n bytes at a time, so the bomb never lands in memory:
    # reading stops one chunk past the cap.
    with gzip.GzipFile(fileobj=f) as g:
        return _read_capped(g.read, limit, "it inflates to")


def describe(exc: BaseException) -> str:
    """Why a file could not be read (or decoded, or analysed), in words, from the exception."""
    if isinstance(exc, InputError):
        return str(exc)
    if isinstance(exc, EOFError):
        return "truncated gzip: the file ends before its compressed data does (still being written, or cut short)"
    if isinstance(exc, zlib.error):
        return f"corrupt gzip data ({exc})"
    if isinstance(exc, gzip.BadGzipFile):
        return f"not valid gzip ({exc})"
    if isinstance(exc, RecursionError):
        return "its JSON is nested too deeply to be a trace or a report"
    if isinstance(exc, OverflowError):
        return f"it holds a number out of range ({exc})"
    if isinstance(exc, MemoryError):
        return (
            "not enough memory to read it: the machine has less memory than this file needs "
            f"(lower {MAX_INPUT_ENV} to refuse such files at once)"
        )
    if isinstance(exc, UnicodeError):
        return f"it is not UTF-8 text ({exc})"
    if isinstance(exc, OSError):
        if exc.errno == errno.ENOENT:
            return "no such file"
        if exc.errno == errno.EISDIR:
            return "it is a folder"
        if exc.errno in (errno.EACCES, errno.EPERM):
            return "permission denied"
        return exc.strerror or str(exc) or type(exc).__name__
    text = str(exc).strip()
    if isinstance(exc, ValueError) and text:
        return text
    name = type(exc).__name__
    return f"{name}: {text}" if text else name
