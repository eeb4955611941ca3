"""Keep freed memory in the broker process for reuse (glibc ``mallopt``), for ``litemq serve``.

A broker allocates and frees batch-sized buffers all the time (a request frame reassembled from
socket reads, a Raft append's entries, a fetch response). With glibc's defaults a block above the
(dynamic) mmap threshold gets a mapping of its own and memory freed at the top of the heap goes
back to the OS, so the next buffer faults fresh pages in: 0.3-0.5 minor faults per 1 KiB record
replicated (RF 3), and on a VM a fresh page can cost several microseconds of kernel time
(docs/benchmarks-cluster.md, tenth round). With :data:`litemq.limits.MALLOC_MMAP_THRESHOLD_BYTES`
and :data:`litemq.limits.MALLOC_TRIM_THRESHOLD_BYTES` freed memory stays with the process (its
resident size stays at its peak, about 10 MB more under load) and the faults fall to ~0.

Only ``litemq serve`` calls :func:`keep_freed_memory`: an embedded broker shares its process with
the application, whose allocator is left alone. Source: glibc ``mallopt(3)``.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging

from litemq import limits

log = logging.getLogger(__name__)

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3


def keep_freed_memory() -> bool:
    """Set glibc's mmap and trim thresholds for this process; returns True when both were set.

    False (nothing changed, logged at debug level) where the C library is not glibc or refuses a
    value; never raises.
    """
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
    except (OSError, AttributeError, TypeError) as exc:  # no libc found, or not glibc (musl, macOS)
        log.debug("malloc thresholds left as they are: %s", exc)
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    done = (mallopt(_M_MMAP_THRESHOLD, limits.MALLOC_MMAP_THRESHOLD_BYTES) == 1
            and mallopt(_M_TRIM_THRESHOLD, limits.MALLOC_TRIM_THRESHOLD_BYTES) == 1)
    if not done:
        log.debug("malloc thresholds not (all) accepted by %s", name)
    return done
