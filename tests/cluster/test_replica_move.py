"""Moving a partition's replica set with cluster/replica_move.py: real RaftGroups over real
PartitionLogs on disk (fsync thread included), four "brokers" in one event loop joined by an
in-memory network, records produced through the leader's produce path the whole time.

The brokers' wiring (metadata records, creating the group on a new replica's broker) is not
built yet, so the test creates the new replica's group itself, with an empty configuration:
it learns its configuration from the leader's log.
"""

from __future__ import annotations

import asyncio

from litemq.cluster.group import RaftGroup
from litemq.cluster.replica_move import ReassignState, reassign, reassign_step
from litemq.protocol.errors import KafkaError
from litemq.protocol.records import Record, build_batch, decode_records
from litemq.raft import ConfState, HeartbeatResponse
from litemq.storage.config import LogConfig
from litemq.storage.log import PartitionLog

GID = "t-0"
TICK_S = 0.01


class Host:
    """One broker as RaftGroup sees its host: node id, loop, send, mark_dirty."""

    def __init__(self, node_id: int, net: "Net") -> None:
        self.node_id = node_id
        self.net = net
        self.loop = net.loop
        self.metrics = None
        self.group: RaftGroup | None = None
        self.plog: PartitionLog | None = None

    def open(self, voters) -> RaftGroup:
        self.plog = PartitionLog.open(self.net.dir / f"n{self.node_id}" / GID, LogConfig())
        self.group = RaftGroup(self, GID, self.plog, voters, election_timeout_ticks=10)
        self.mark_dirty(self.group)
        return self.group

    def close(self) -> None:
        if self.group is not None:
            self.group.close()
            self.plog.close()
        self.group = None

    def send(self, group_id: str, messages) -> None:
        for m in messages:
            self.loop.call_soon(self.net.deliver, group_id, m)

    def mark_dirty(self, group: RaftGroup) -> None:
        self.loop.call_soon(group.process)


class Net:
    def __init__(self, tmp_path, ids) -> None:
        self.dir = tmp_path
        self.loop = asyncio.get_running_loop()
        self.hosts = {i: Host(i, self) for i in ids}
        self.ticker = self.loop.create_task(self._tick())

    def deliver(self, group_id: str, m) -> None:
        g = self.hosts[m.dst].group
        if g is None or g.closed:
            return  # the broker has no such group (or is down): dropped, the leader retries
        g.node.step(m)
        if not isinstance(m, HeartbeatResponse):
            g.wake()
        g.host.mark_dirty(g)

    async def _tick(self) -> None:
        while True:
            await asyncio.sleep(TICK_S)
            for h in self.hosts.values():
                if h.group is not None and not h.group.closed:
                    h.group.node.tick()
                    h.mark_dirty(h.group)

    def leader(self) -> RaftGroup | None:
        best = None
        for h in self.hosts.values():
            g = h.group
            if g is not None and g.node.is_leader and (best is None or g.node.term > best.node.term):
                best = g
        return best

    async def wait_leader(self, timeout_s: float = 10) -> RaftGroup:
        deadline = self.loop.time() + timeout_s
        while self.loop.time() < deadline:
            g = self.leader()
            if g is not None and g.node.commit_index >= g.node.last_offset:
                return g
            await asyncio.sleep(TICK_S)
        raise AssertionError("no leader")

    async def close(self) -> None:
        self.ticker.cancel()
        for h in self.hosts.values():
            h.close()


class Producer:
    """Produces one record at a time on whoever leads; remembers what was committed."""

    def __init__(self, net: Net) -> None:
        self.net = net
        self.sent: list[tuple[RaftGroup, int, int, bytes]] = []  # group, epoch, last offset, value
        self.n = 0

    def produce(self) -> None:
        g = self.net.leader()
        if g is None:
            return
        value = b"r%d" % self.n
        try:
            info = g.leader_append(bytearray(build_batch([Record(0, 1000, None, value)], base_offset=0)))
        except KafkaError:
            return
        self.n += 1
        self.sent.append((g, g.node.term, info.last_offset, value))

    def acknowledged(self) -> list[bytes]:
        """Values acks=all would have acknowledged: committed with their term still there."""
        return [v for g, term, last, v in self.sent
                if g.node.commit_index >= last and g.node.term_at(last) == term]


def _client_values(plog: PartitionLog, start: int | None = None) -> list[bytes]:
    data = plog.read_for_clients(plog.log_start_offset if start is None else start, 1 << 30).to_bytes()
    return [r.value for r in decode_records(data)]


async def _drive(net: Net, producer: Producer, target, timeout_s: float = 30, until=None) -> list[str]:
    """Step the move on whoever leads, producing meanwhile, until done (or ``until(status)``)."""
    steps: list[str] = []
    deadline = net.loop.time() + timeout_s
    while net.loop.time() < deadline:
        producer.produce()
        g = net.leader()
        if g is not None:
            status = reassign_step(g, target, max_lag_offsets=2)
            if status.state is ReassignState.PROPOSED:
                steps.append(f"{status.step.kind.value} {status.step.node}")
            if status.state is ReassignState.DONE or (until is not None and until(status)):
                return steps
        await asyncio.sleep(TICK_S)
    raise AssertionError(f"the move to {sorted(target)} did not finish: {steps}")


async def _settle(net: Net, members) -> None:
    """Every member's log holds the leader's committed log end."""
    for _ in range(500):
        g = net.leader()
        if g is not None and all(
            net.hosts[m].group.node.commit_index >= g.node.last_offset and
            net.hosts[m].group.view.stable_end == g.view.stable_end for m in members
        ):
            return
        await asyncio.sleep(TICK_S)
    raise AssertionError("members did not catch up")


async def _start(tmp_path) -> tuple[Net, Producer]:
    net = Net(tmp_path, (1, 2, 3, 4))
    for i in (1, 2, 3):
        net.hosts[i].open([1, 2, 3])
    net.hosts[4].open([])  # a new replica: no configuration until the leader's log brings it
    await net.wait_leader()
    producer = Producer(net)
    for _ in range(30):
        producer.produce()
        await asyncio.sleep(0)
    return net, producer


def test_move_the_replica_set_away_from_its_leader_while_producing(tmp_path):
    asyncio.run(_test_move_the_replica_set_away_from_its_leader_while_producing(tmp_path))


async def _test_move_the_replica_set_away_from_its_leader_while_producing(tmp_path):
    net, producer = await _start(tmp_path)
    try:
        old_leader = (await net.wait_leader()).host.node_id
        target = frozenset({1, 2, 3} - {old_leader} | {4})
        steps = await _drive(net, producer, target)
        assert steps[:2] == ["add-learner 4", "promote 4"] and steps[-1] == f"remove-voter {old_leader}"
        g = await net.wait_leader()
        assert g.host.node_id in target and g.node.conf_state == ConfState(target)
        for _ in range(20):
            producer.produce()
        await _settle(net, target)
        acked = producer.acknowledged()
        assert len(acked) > 30
        logs = {m: _client_values(net.hosts[m].plog) for m in target}
        for m, values in logs.items():
            assert values[:len(acked)] == acked or set(acked) <= set(values), m
            assert values == logs[g.host.node_id]  # the same records at the same Kafka offsets
            assert net.hosts[m].group.node.conf_state == ConfState(target)
        # the configuration changes are Raft-internal: no Kafka offset
        plog = net.hosts[4].plog
        assert plog.translator.kafka_offset(plog.log_end_offset) == len(logs[4])
        # a restart (started with the stale assignment) comes back with the target configuration
        for m in target:
            net.hosts[m].close()
        for m in target:
            assert net.hosts[m].open([1, 2, 3]).node.conf_state == ConfState(target)
        g = await net.wait_leader()
        assert g.host.node_id in target
    finally:
        await net.close()


def test_cancel_walks_back_to_the_original_replica_set(tmp_path):
    asyncio.run(_test_cancel_walks_back_to_the_original_replica_set(tmp_path))


async def _test_cancel_walks_back_to_the_original_replica_set(tmp_path):
    net, producer = await _start(tmp_path)
    try:
        target, original = frozenset({2, 3, 4}), frozenset({1, 2, 3})
        await _drive(net, producer, target, until=lambda s: 4 in s.conf.voters and not s.conf.learners)
        steps = await _drive(net, producer, original)  # cancel
        assert steps == ["remove-voter 4"]
        g = await net.wait_leader()
        assert g.node.conf_state == ConfState(original)
        status = reassign_step(g, original)
        assert status.state is ReassignState.DONE
        # an idle partition's next leader (no no-op: nothing to commit) reports the move done too
        await _settle(net, original)
        other = next(m for m in original if m != g.host.node_id)
        g.node.transfer_leadership(other)
        g.host.mark_dirty(g)
        for _ in range(300):
            if net.hosts[other].group.node.is_leader:
                break
            await asyncio.sleep(TICK_S)
        new = net.hosts[other].group
        assert new.node.is_leader and new.node.log_end_offset == g.node.log_end_offset
        assert reassign_step(new, original).state is ReassignState.DONE
    finally:
        await net.close()


def test_a_new_leader_resumes_the_move(tmp_path):
    asyncio.run(_test_a_new_leader_resumes_the_move(tmp_path))


async def _test_a_new_leader_resumes_the_move(tmp_path):
    """The leader dies right after the learner joined: the new leader continues from the
    configuration in its log."""
    net, producer = await _start(tmp_path)
    try:
        first = (await net.wait_leader()).host.node_id
        target = frozenset({1, 2, 3} - {first} | {4})
        await _drive(net, producer, target, until=lambda s: 4 in s.conf.learners)
        await _settle(net, {1, 2, 3})
        net.hosts[first].close()  # crash-like: its messages stop
        steps = await _drive(net, producer, target)
        g = await net.wait_leader()
        assert g.host.node_id != first and g.node.conf_state == ConfState(target)
        assert "promote 4" in steps and f"remove-voter {first}" in steps
        # reassign() on the leader: already done
        assert (await reassign(g, target, timeout_s=1)).state is ReassignState.DONE
        # and a step on a follower says who leads
        follower = next(net.hosts[m].group for m in target if m != g.host.node_id)
        status = reassign_step(follower, target)
        assert status.state is ReassignState.NOT_LEADER and status.leader_id == g.host.node_id
    finally:
        await net.close()


def test_a_new_replica_behind_the_log_start_installs_a_snapshot(tmp_path):
    asyncio.run(_test_a_new_replica_behind_the_log_start_installs_a_snapshot(tmp_path))


async def _test_a_new_replica_behind_the_log_start_installs_a_snapshot(tmp_path):
    """Retention moved the leader's log start: the learner starts afresh there (InstallSnapshot
    with the configuration and the count of internal offsets below it) and translates offsets
    as its leader does."""
    net, producer = await _start(tmp_path)
    try:
        await _settle(net, {1, 2, 3})
        g = await net.wait_leader()
        leader = g.host.node_id
        start = g.node.commit_index + 1
        g.plog.delete_records_before(start)
        for _ in range(10):
            producer.produce()
        target = frozenset({1, 2, 3} - {leader} | {4})
        await _drive(net, producer, target)
        await _settle(net, target)
        g = await net.wait_leader()
        new = net.hosts[4]
        assert new.plog.log_start_offset == start and new.group.node.conf_state == ConfState(target)
        t4, tl = new.plog.translator, g.plog.translator
        assert [t4.kafka_offset(o) for o in range(start, new.plog.log_end_offset + 1)] == \
            [tl.kafka_offset(o) for o in range(start, g.plog.log_end_offset + 1)]
        # (without ReplicatedPartition here, followers keep their own log start: read from it)
        assert _client_values(new.plog) == _client_values(g.plog, start)
        new.close()
        assert new.open([]).node.conf_state == ConfState(target)  # recorded with the snapshot
    finally:
        await net.close()


def test_a_learner_that_received_nothing_is_never_promoted(tmp_path):
    asyncio.run(_test_a_learner_that_received_nothing_is_never_promoted(tmp_path))


async def _test_a_learner_that_received_nothing_is_never_promoted(tmp_path):
    """The log is far shorter than the lag bound, but the new replica's broker is down (its
    group is closed): it is added as a learner and then waited for, never promoted - promotion
    needs its log to reach the commit index (replica_move.caught_up_match), not only an offset
    distance - and the move completes once it is back."""
    net, producer = await _start(tmp_path)
    try:
        net.hosts[4].close()
        leader = await net.wait_leader()
        target = frozenset({1, 2, 3, 4})
        states = []
        for _ in range(60):
            status = reassign_step(leader, target)
            states.append((status.state, status.step.kind.value if status.step else None))
            await asyncio.sleep(TICK_S)
        assert (ReassignState.PROPOSED, "add-learner") in states
        assert all(kind != "promote" for _, kind in states), states
        assert states[-1] == (ReassignState.WAITING, "wait-catch-up")
        assert leader.node.conf_state == ConfState(frozenset({1, 2, 3}), frozenset({4}))
        net.hosts[4].open([])
        await _drive(net, producer, target)
        g = await net.wait_leader()
        assert g.node.conf_state == ConfState(target)
    finally:
        await net.close()
