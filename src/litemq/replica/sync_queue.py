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

Every job is timed in three parts (:class:`SyncQueueStats`, exposed in ``/metrics`` as
``litemq_sync_*``): the wait from :meth:`SyncQueue.submit` to the job's start on the thread (the
end of the loop turn, the thread's wake-up, the jobs before it in the batch), the job itself
(the fsync), and the hand-back from the job's end to its ``done`` on the loop (the rest of the
batch, the loop's wake-up). On a machine whose cores are busy the two hand-offs, not the fsync,
are most of a durable append's wait (docs/benchmarks-cluster.md, seventh round).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
import weakref
from typing import Any, Callable

from litemq import limits

log = logging.getLogger(__name__)

Done = Callable[[Any, BaseException | None], None]
"""``done(result, exception)``: called on the event loop thread once the job ran."""


class SyncQueueStats:
    """Cumulative timings of the jobs a :class:`SyncQueue` ran (updated on the loop thread when
    a batch's results are handed back).

    Attributes:
        jobs: jobs run (each caller's fsync of one log, or one Raft Ready's durability work).
        batches: hand-backs (one per batch of jobs the thread took at once).
        wait_s: seconds from ``submit`` to the job's start on the thread, summed.
        run_s: seconds the jobs ran (fsync and what goes with it), summed.
        hand_back_s: seconds from a job's end to its ``done`` on the loop, summed.
    """

    __slots__ = ("batches", "hand_back_s", "jobs", "run_s", "wait_s")

    def __init__(self) -> None:
        self.jobs = 0
        self.batches = 0
        self.wait_s = 0.0
        self.run_s = 0.0
        self.hand_back_s = 0.0


class SyncQueue:
    """Blocking jobs of one event loop's logs, run by one thread in batches (module docstring).
    Get the loop's with :meth:`of`; :meth:`submit` from the loop thread only. ``stats``: the
    :class:`SyncQueueStats` of every job run so far."""

    _by_loop: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, SyncQueue]" = weakref.WeakKeyDictionary()
    _registry_lock = threading.Lock()

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._lock = threading.Lock()
        self._jobs: list[tuple[Callable[[], Any], Done, float]] = []
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self._kick_scheduled = False
        self.stats = SyncQueueStats()

    @classmethod
    def of(cls, loop: asyncio.AbstractEventLoop) -> "SyncQueue":
        """The queue of ``loop`` (created on first use)."""
        with cls._registry_lock:
            q = cls._by_loop.get(loop)
            if q is None:
                q = cls._by_loop[loop] = cls(loop)
            return q

    @classmethod
    def existing(cls, loop: asyncio.AbstractEventLoop) -> "SyncQueue | None":
        """The queue of ``loop`` if one was made (nothing was ever submitted: None)."""
        with cls._registry_lock:
            return cls._by_loop.get(loop)

    def submit(self, job: Callable[[], Any], done: Done) -> None:
        """Run ``job()`` off the loop, then ``done(result, None)`` - or ``done(None, exc)`` if it
        raised - on the loop. The thread is woken at the end of this loop turn (one wake-up for
        every job submitted in the turn)."""
        with self._lock:
            self._jobs.append((job, done, time.perf_counter()))
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
            results = [_run_job(*item) for item in jobs]
            try:
                self._loop.call_soon_threadsafe(self._deliver, results)
            except RuntimeError:  # the loop is closed: nobody waits for these any more
                log.debug("event loop closed; %d durability results dropped", len(results))

    _idle_expired = False

    def _deliver(self, results: list) -> None:
        """On the loop: for each job in order, record its timings and call its ``done``."""
        now = time.perf_counter()
        st = self.stats
        st.batches += 1
        st.jobs += len(results)
        for done, result, exc, submitted, started, ended in results:
            st.wait_s += started - submitted
            st.run_s += ended - started
            st.hand_back_s += now - ended
            try:
                done(result, exc)
            except Exception:
                log.exception("durability callback failed")


def _run_job(job: Callable[[], Any], done: Done, submitted: float) -> tuple:
    """Run one job on the thread: ``(done, result, exception, submitted, started, ended)``
    (``time.perf_counter()`` seconds)."""
    started = time.perf_counter()
    try:
        result, exc = job(), None
    except BaseException as e:  # handed to done(); the thread goes on
        result, exc = None, e
    return done, result, exc, submitted, started, time.perf_counter()
