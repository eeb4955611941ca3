"""The broker's fsync thread (litemq.replica.sync_queue.SyncQueue) on a real event loop with
real files: the jobs submitted in one loop turn run together (one wake-up of the thread, one
hand-back to the loop), in order, off the loop thread; results and exceptions come back on the
loop thread; the thread exits when idle and a later job starts a new one."""

from __future__ import annotations

import asyncio
import os
import threading

import pytest

from litemq import limits
from litemq.replica.sync_queue import SyncQueue


def _append_and_sync(path, data: bytes, ran: list) -> int:
    """A job as the brokers submit them: write, then fdatasync (on the fsync thread)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.write(fd, data)
        os.fdatasync(fd)
    finally:
        os.close(fd)
    ran.append((path.name, threading.get_ident()))
    return len(data)


class _CountingLoop:
    """The running loop, counting the thread's hand-backs (``call_soon_threadsafe``)."""

    def __init__(self, loop) -> None:
        self.loop = loop
        self.handbacks = 0

    def call_soon(self, *args):
        return self.loop.call_soon(*args)

    def call_soon_threadsafe(self, *args):
        self.handbacks += 1
        return self.loop.call_soon_threadsafe(*args)


def test_jobs_of_one_loop_turn_run_together_in_order(tmp_path):
    async def main():
        loop = asyncio.get_running_loop()
        counting = _CountingLoop(loop)
        q = SyncQueue(counting)
        ran: list = []
        results: list = []
        delivered = loop.create_future()

        def done(name):
            def cb(result, exc):
                assert threading.get_ident() == loop_thread  # handed back on the loop thread
                results.append((name, result, exc))
                if len(results) == 5 and not delivered.done():
                    delivered.set_result(None)
            return cb

        loop_thread = threading.get_ident()
        for i in range(5):  # five logs' Readies handled in one loop turn
            path = tmp_path / f"log-{i}"
            q.submit(lambda p=path, i=i: _append_and_sync(p, b"x" * (10 + i), ran), done(f"log-{i}"))
        await asyncio.wait_for(delivered, 10)
        assert [r[0] for r in results] == [f"log-{i}" for i in range(5)]  # in submission order
        assert [r[1] for r in results] == [10, 11, 12, 13, 14]
        assert all(r[2] is None for r in results)
        assert [name for name, _ in ran] == [f"log-{i}" for i in range(5)]
        threads = {tid for _, tid in ran}
        assert len(threads) == 1 and loop_thread not in threads  # one fsync thread, not the loop
        assert counting.handbacks == 1  # one wake-up and one hand-back for the whole turn
        st = q.stats  # every job timed: waiting for the thread, running, handed back
        assert (st.jobs, st.batches) == (5, 1)
        assert st.wait_s > 0 and st.run_s > 0 and st.hand_back_s > 0
        for i in range(5):
            assert (tmp_path / f"log-{i}").read_bytes() == b"x" * (10 + i)

    asyncio.run(main())


def test_exception_is_handed_to_done_and_the_thread_goes_on(tmp_path):
    async def main():
        loop = asyncio.get_running_loop()
        q = SyncQueue(loop)
        got: list = []
        finished = loop.create_future()

        def failing():
            os.fdatasync(os.open(tmp_path / "missing-dir" / "f", os.O_RDONLY))  # FileNotFoundError

        def record(result, exc):
            got.append((result, exc))
            if len(got) == 2:
                finished.set_result(None)

        q.submit(failing, record)
        await asyncio.sleep(0)  # next loop turn: a second batch
        q.submit(lambda: _append_and_sync(tmp_path / "ok", b"abc", []), record)
        await asyncio.wait_for(finished, 10)
        assert got[0][0] is None and isinstance(got[0][1], FileNotFoundError)
        assert got[1] == (3, None)

    asyncio.run(main())


def test_idle_thread_exits_and_a_new_job_starts_another(tmp_path, monkeypatch):
    monkeypatch.setattr(limits, "SYNC_THREAD_IDLE_EXIT_MS", 50)

    async def main():
        loop = asyncio.get_running_loop()
        q = SyncQueue.of(loop)
        assert SyncQueue.of(loop) is q  # one queue per loop
        for round_no in range(2):
            fut = loop.create_future()
            q.submit(lambda: _append_and_sync(tmp_path / "f", b"y", []),
                     lambda result, exc, fut=fut: fut.set_result((result, exc)))
            assert await asyncio.wait_for(fut, 10) == (1, None)
            thread = q._thread
            assert thread is not None and thread.is_alive()
            for _ in range(200):  # idle: the thread exits (about 50 ms)
                if not thread.is_alive():
                    break
                await asyncio.sleep(0.01)
            assert not thread.is_alive() and q._thread is None
        assert (tmp_path / "f").read_bytes() == b"yy"

    asyncio.run(main())


@pytest.mark.parametrize("jobs_per_turn", [1, 3])
def test_many_turns_every_job_answered_once(tmp_path, jobs_per_turn):
    """Jobs submitted while the thread is busy with an earlier batch are picked up after it."""
    async def main():
        loop = asyncio.get_running_loop()
        q = SyncQueue(loop)
        answered: list = []
        total = 60 * jobs_per_turn
        all_done = loop.create_future()

        def cb(result, exc):
            assert exc is None
            answered.append(result)
            if len(answered) == total:
                all_done.set_result(None)

        n = 0
        for _ in range(60):
            for _ in range(jobs_per_turn):
                q.submit(lambda k=n: _append_and_sync(tmp_path / f"g{k % 4}", b"z", []) and k, cb)
                n += 1
            await asyncio.sleep(0)
        await asyncio.wait_for(all_done, 30)
        assert sorted(answered) == list(range(total))
        assert answered == list(range(total))  # in submission order across batches

    asyncio.run(main())
