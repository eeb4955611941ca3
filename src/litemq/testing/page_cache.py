"""How much of a file the OS page cache holds, for tests of ``log.page.cache.retain.bytes``.

Linux ``mincore(2)`` over a read-only shared mapping of the file (mapping it touches no page);
the same figure as util-linux ``fincore``.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import mmap
import os
from pathlib import Path

_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
_libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
_libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p]
_MAP_FAILED = ctypes.c_void_p(-1).value


def resident_bytes(path: Path | str) -> int:
    """Bytes of ``path`` in the page cache (whole pages, at most the file size).

    Raises:
        OSError: the file cannot be opened, mapped or queried.
    """
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        if size == 0:
            return 0
        addr = _libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        if addr in (None, _MAP_FAILED):
            err = ctypes.get_errno()
            raise OSError(err, f"mmap {path}: {os.strerror(err)}")
        try:
            pages = (size + mmap.PAGESIZE - 1) // mmap.PAGESIZE
            vec = ctypes.create_string_buffer(pages)
            if _libc.mincore(addr, size, vec) != 0:
                err = ctypes.get_errno()
                raise OSError(err, f"mincore {path}: {os.strerror(err)}")
            resident = sum(b & 1 for b in vec.raw)
        finally:
            _libc.munmap(addr, size)
        return min(size, resident * mmap.PAGESIZE)
    finally:
        os.close(fd)
