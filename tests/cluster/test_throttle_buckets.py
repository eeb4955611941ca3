"""The replication throttle's queues (``litemq.cluster.throttle``) on a real event loop: Appends
to a learner listed for the partition leave at the configured rate and in order, heartbeats and
voters are never held, lifting the rate releases what is held at once, a full queue drops the
Appends past its gap until the queue drained, and the follower side holds a learner's Appends."""

from __future__ import annotations

import asyncio

from litemq.cluster.throttle import LONG_MAX, ReplicationThrottle
from litemq.raft.messages import Append, Heartbeat
from litemq.raft.types import Entry

CHUNK = 100_000


def _append(dst: int, offset: int, size: int = CHUNK) -> Append:
    return Append(1, dst, 1, offset - 1, 1, (Entry(offset, 1, b"x" * size),), 0)


def _configs(rate: int, leader: str = "0:1", follower: str = "0:4"):
    brokers = {"1": {"leader.replication.throttled.rate": str(rate)},
               "4": {"follower.replication.throttled.rate": str(rate)}}
    topics = {"t": {"leader.replication.throttled.replicas": leader,
                    "follower.replication.throttled.replicas": follower}, "u": {}}
    return brokers, topics


def _throttle(node_id: int, sent: list, learners=(4,)) -> ReplicationThrottle:
    loop = asyncio.get_running_loop()
    return ReplicationThrottle(node_id, loop, lambda dst, gid, m: sent.append((gid, m)),
                               lambda peer, gid, m: sent.append((gid, m)),
                               lambda gid, broker: broker not in learners)


def test_leader_side_rate_order_and_release():
    async def run():
        sent: list = []
        th = _throttle(1, sent)
        th.configure(*_configs(1_000_000))  # 1 MB/s: the bucket starts empty
        loop = asyncio.get_running_loop()
        start = loop.time()
        for i in range(20):  # 2 MB to learner 4
            assert th.hold_outgoing("t-0", _append(4, i))
        assert not th.hold_outgoing("t-0", Heartbeat(1, 4, 1, 0))  # never held
        assert not th.hold_outgoing("t-0", _append(2, 0))  # a voter: in sync
        assert not th.hold_outgoing("u-0", _append(4, 0))  # a topic without throttled replicas
        assert not th.hold_outgoing("t-1", _append(4, 0))  # a partition not listed
        while len(sent) < 10:
            await asyncio.sleep(0.02)
        took = loop.time() - start
        assert 0.7 <= took <= 5.0, took  # ~1 MB at 1 MB/s (a loaded machine only makes it later)
        assert len(sent) < 20
        th.configure(*_configs(LONG_MAX))  # lifted: everything held goes at once
        assert [m.entries[0].offset for _, m in sent] == list(range(20))
        assert th.held_bytes() == 0 and not th.active()
        assert th.bytes_leader == 20 * CHUNK

    asyncio.run(run())


def test_full_queue_drops_past_the_gap_until_drained():
    async def run():
        sent: list = []
        th = _throttle(1, sent)
        th.configure(*_configs(10_000_000, leader="*"))
        per = 1_000_000
        n = 30  # 30 MB offered, 8 MiB held at most
        for i in range(n):
            th.hold_outgoing("t-0", _append(4, i, per))
        assert th.dropped > 0 and th.held_bytes() <= 8 * 1024 * 1024
        while th.held_bytes():
            await asyncio.sleep(0.05)
        offsets = [m.entries[0].offset for _, m in sent]
        assert offsets == list(range(len(offsets)))  # contiguous: nothing past the gap was sent
        assert th.hold_outgoing("t-0", _append(4, n))  # drained: the next one goes on (the probe)
        while th.held_bytes():
            await asyncio.sleep(0.05)
        assert sent[-1][1].entries[0].offset == n and len(sent) == len(offsets) + 1

    asyncio.run(run())


def test_follower_side_holds_a_learners_appends():
    async def run():
        sent: list = []
        th = _throttle(4, sent)
        th.configure(*_configs(500_000))
        for i in range(10):  # 1 MB at 0.5 MB/s
            assert th.hold_incoming(1, "t-0", _append(4, i))
        assert not th.hold_incoming(1, "t-0", Heartbeat(1, 4, 1, 0))
        await asyncio.sleep(0.5)
        assert 1 <= len(sent) < 10
        th.configure(*_configs(500_000, follower=""))  # no longer listed: released
        assert [m.entries[0].offset for _, m in sent] == list(range(10))
        assert th.bytes_follower == 10 * CHUNK

    asyncio.run(run())
