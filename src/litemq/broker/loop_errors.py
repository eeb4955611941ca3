"""The broker's event-loop exception handler: asyncio's own, but for the one message that
floods.

Out of file descriptors (EMFILE/ENFILE) or memory, CPython 3.11's
``BaseSelectorEventLoop._accept_connection`` logs "socket.accept() out of system resource" and
schedules a retry once per attempt of its accept loop, up to the listener's backlog (1024 here)
times per wake-up, so a broker at its ``ulimit -n`` logged it about 5,000 times a second. This
handler logs it at most once per :data:`~litemq.limits.ACCEPT_ERROR_LOG_INTERVAL_MS`, with the
number of times it was left out; every other context goes to the loop's default handler.
"""

from __future__ import annotations

import asyncio
import logging
import time

from litemq import limits

log = logging.getLogger("litemq.broker")

ACCEPT_OUT_OF_RESOURCES = "socket.accept() out of system resource"


class RateLimitedAcceptErrors:
    """``loop.set_exception_handler`` callable (see the module docstring)."""

    def __init__(self) -> None:
        self._last_s = float("-inf")
        self._left_out = 0

    def __call__(self, loop: asyncio.AbstractEventLoop, context: dict) -> None:
        if context.get("message") != ACCEPT_OUT_OF_RESOURCES:
            loop.default_exception_handler(context)
            return
        now = time.monotonic()
        if now - self._last_s < limits.ACCEPT_ERROR_LOG_INTERVAL_MS / 1000:
            self._left_out += 1
            return
        left_out, self._left_out, self._last_s = self._left_out, 0, now
        log.error("cannot accept connections: %s (new connections wait; %d more such errors since the last "
                  "line)", context.get("exception"), left_out)
