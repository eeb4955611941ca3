"""One thread per broker that runs the blocking durability work (fsyncs) of every log, in batches.

Every acks=all produce on LiteMQ's durable default waits for an fsync: a partition's flush on a
single broker (:meth:`Partition._schedule_flush`), a Raft group's Ready on a cluster broker
(log fsync and hard state, :meth:`RaftGroup.process`). Handing each one to a
``ThreadPoolExecutor`` costs a Future, a work item, a worker wake-up and a
``call_soon_threadsafe`` per fsync, and the event loop and the workers then trade the GIL once
per fsync; with ``linger.ms=0`` that is once per record and it was the largest cost of the
produce path after the socket writes (docs/benchmarks-cluster.md). Here the loop appends the
job to a list and wakes the thread once per event-loop turn (so the Readies of every group
handled in one turn go together); the thread takes everything queued, runs it in order and
hands all the results back with one ``call_soon_threadsafe``. Under load, fsyncs of many logs
ride on one hand-off each way (a broker-wide group commit). The jobs run one after the other:
on the measured disk (ext4 on virtio) parallel ``fdatasync`` of different files saved little
wall time (114 against 160 us per fsync with 4 files) and each pool hand-off cost another
thread wake-up and GIL transfer per job (docs/benchmarks-cluster.md, fourth round). A caller
has at most one job queued per log (a flush or Ready in flight waits for its result).

The thread starts on the first job and exits after ``limits.SYNC_THREAD_IDLE_EXIT_MS`` without
one (an embedded broker that closed leaves no thread behind); the next job starts a new one.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import weakref
from typing import Any, Callable

from litemq import limits

log = logging.getLogger(__name__)

Done = Callable[[Any, BaseException | None], None]
"""``done(result, exception)``: called on the event loop thread once the job ran."""


class SyncQueue:
    """Blocking jobs of one event loop's logs, run by one thread in batches (module docstring).
    Get the loop's with :meth:`of`; :meth:`submit` from the loop thread only."""

    _by_loop: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, SyncQueue]" = weakref.WeakKeyDictionary()
    _registry_lock = threading.Lock()

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._lock = threading.Lock()
        self._jobs: list[tuple[Callable[[], Any], Done]] = []
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self._kick_scheduled = False

    @classmethod
    def of(cls, loop: asyncio.AbstractEventLoop) -> "SyncQueue":
        """The queue of ``loop`` (created on first use)."""
        with cls._registry_lock:
            q = cls._by_loop.get(loop)
            if q is None:
                q = cls._by_loop[loop] = cls(loop)
            return q

    def submit(self, job: Callable[[], Any], done: Done) -> None:
        """Run ``job()`` off the loop, then ``done(result, None)`` - or ``done(None, exc)`` if it
        raised - on the loop. The thread is woken at the end of this loop turn (one wake-up for
        every job submitted in the turn)."""
        with self._lock:
            self._jobs.append((job, done))
        if not self._kick_scheduled:
            self._kick_scheduled = True
            self._loop.call_soon(self._kick)

    def _kick(self) -> None:
        """Wake the thread (start it if there is none) for the jobs queued this loop turn."""
        self._kick_scheduled = False
        with self._lock:
            if not self._jobs:
                return
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="litemq-sync", daemon=True)
                self._thread.start()
            else:
                self._wake.set()

    def _run(self) -> None:
        idle_s = limits.SYNC_THREAD_IDLE_EXIT_MS / 1000
        while True:
            with self._lock:
                jobs, self._jobs = self._jobs, []
                self._wake.clear()
                if not jobs and self._idle_expired:
                    self._thread = None
                    return
            if not jobs:
                self._idle_expired = not self._wake.wait(idle_s)
                continue
            self._idle_expired = False
            results = [_run_job(job, done) for job, done in jobs]
            try:
                self._loop.call_soon_threadsafe(_deliver, results)
            except RuntimeError:  # the loop is closed: nobody waits for these any more
                log.debug("event loop closed; %d durability results dropped", len(results))

    _idle_expired = False


def _run_job(job: Callable[[], Any], done: Done) -> tuple:
    try:
        return done, job(), None
    except BaseException as exc:  # handed to done(); the thread goes on
        return done, None, exc


def _deliver(results: list) -> None:
    for done, result, exc in results:
        try:
            done(result, exc)
        except Exception:
            log.exception("durability callback failed")
