"""Replication throttles (Kafka ``ReplicationQuotaManager``, "Limiting Bandwidth Usage during
Data Migration"; KIP-73).

Configs, with Kafka's names:

- broker (dynamic): ``leader.replication.throttled.rate`` and
  ``follower.replication.throttled.rate``, bytes/s, default ``Long.MAX_VALUE`` (off). The
  broker's own value (resource = its node id) wins over the cluster-wide default (``""``).
- topic: ``leader.replication.throttled.replicas`` and ``follower.replication.throttled.replicas``:
  ``partition:brokerId,...`` or ``*`` (every replica of the topic), "" none.

Leader side (Kafka ``shouldLeaderThrottle``): on a broker listed in a partition's
``leader.replication.throttled.replicas`` (or ``*``), the record bytes of the Raft ``Append``
messages it sends, leading the partition, to a replica that is not in sync (a learner: a new
replica catching up, not yet promoted to voter; Kafka: not in the ISR) count against the leader
rate (a token bucket holding at most one second of the rate, allowed to go into debt by one
message so a message larger than the bucket still passes). When the bucket is empty the Appends
are held back, in order per (partition, replica), and sent as it refills; Raft's flow control (at
most ``max_inflight_appends`` unacknowledged Appends) then pauses that replica's progress.
Follower side (``shouldFollowerThrottle``): the Appends this broker receives while a learner of a
partition whose ``follower.replication.throttled.replicas`` lists this broker (or ``*``) are
processed only within the follower rate, the later ones held in order. Other Raft messages
(heartbeats, votes, answers), voters (in sync) and the metadata group are never delayed.

A held queue is bounded (``limits.REPLICATION_THROTTLE_MAX_HELD_BYTES`` per partition and
replica), so a throttled replica never makes the leader buffer Raft's whole window of Appends:
an Append beyond it is dropped, as are the later ones that continue past that gap (they would
only be rejected, so they take no tokens), until one resends from before the gap or the queue
drained; the first one past the gap then goes on, the follower rejects it and the leader probes
back from the follower's match point: Raft's handling of a lost message.

Pure bookkeeping plus ``loop.call_later``: no I/O. Event-loop thread only.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any

from litemq import limits
from litemq.raft.messages import Append

LONG_MAX = 2**63 - 1
"""Kafka's ``Long.MAX_VALUE``: the default rate, no throttle."""
LEADER_RATE = "leader.replication.throttled.rate"
FOLLOWER_RATE = "follower.replication.throttled.rate"
LEADER_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_REPLICAS = "follower.replication.throttled.replicas"
ALL = None
"""The parsed ``*``: every replica."""


def parse_throttled_replicas(name: str, value: str) -> dict[int, frozenset[int]] | None:
    """``partition:brokerId,...`` -> partition -> broker ids; ``*`` -> None (all); "" -> {}.

    Raises:
        ValueError: Kafka's ``ThrottledReplicaListValidator`` message (``Invalid value x for
            configuration name: name must be the literal '*' or a list of replicas in the
            following format: [partitionId]:[brokerId],[partitionId]:[brokerId],...``).
    """
    text = value.strip()
    if text == "*":
        return ALL
    out: dict[int, set[int]] = {}
    if not text:
        return {}
    for item in text.split(","):
        part, sep, broker = item.strip().partition(":")
        if not (sep and part.strip().isdigit() and broker.strip().isdigit()):
            raise ValueError(f"Invalid value {value} for configuration {name}: {name} must be the literal '*' or "
                             "a list of replicas in the following format: "
                             "[partitionId]:[brokerId],[partitionId]:[brokerId],...")
        out.setdefault(int(part), set()).add(int(broker))
    return {p: frozenset(b) for p, b in out.items()}


def format_throttled_replicas(replicas: Mapping[int, set[int] | frozenset[int]]) -> str:
    """partition -> broker ids as the topic config value (``0:1,0:4``), sorted."""
    return ",".join(f"{p}:{b}" for p in sorted(replicas) for b in sorted(replicas[p]))


def effective_rate(broker_configs: Mapping[str, Mapping[str, str]], node_id: int, name: str) -> int:
    """Rate ``name`` of broker ``node_id`` (bytes/s): its own dynamic value, else the
    cluster-wide default's, else ``LONG_MAX``. ``broker_configs``: resource -> configs."""
    for resource in (str(node_id), ""):
        value = broker_configs.get(resource, {}).get(name)
        if value is not None:
            try:
                return max(int(value), 0)
            except ValueError:
                continue
    return LONG_MAX


def _append_bytes(msg: Any) -> int:
    """Record bytes an ``Append`` carries (-1 for any other message: it is never throttled)."""
    if not isinstance(msg, Append):
        return -1
    n = 0
    for e in msg.entries:
        p = e.payload
        if isinstance(p, (bytes, bytearray, memoryview)):
            n += len(p)
    return n


def _last_offset(msg: Append) -> int:
    return msg.entries[-1].last_offset if msg.entries else msg.prev_offset


class TokenBucket:
    """``rate`` bytes/s, holding at most one second's worth; may go into debt by one take."""

    def __init__(self, now: float) -> None:
        self.rate = LONG_MAX
        self.tokens = 0.0
        self.stamp = now

    def refill(self, now: float) -> None:
        if self.rate >= LONG_MAX:
            self.tokens, self.stamp = 0.0, now
            return
        self.tokens = min(self.tokens + (now - self.stamp) * self.rate, float(self.rate))
        self.stamp = now

    def off(self) -> bool:
        return self.rate >= LONG_MAX

    def wait_s(self) -> float:
        """Seconds until the bucket is out of debt (0 when it has tokens)."""
        if self.tokens > 0 or self.off():
            return 0.0
        return (-self.tokens + 1) / max(self.rate, 1)


class ReplicationThrottle:
    """The leader and follower throttles of one broker.

    Args:
        node_id: this broker. loop: the event loop (timers).
        send: ``send(dst, group_id, msg)`` puts a message on the wire (the transport).
        deliver: ``deliver(peer_id, group_id, msg)`` processes a received message (the manager's
            Raft step).
    """

    def __init__(self, node_id: int, loop: asyncio.AbstractEventLoop,
                 send: Callable[[int, str, Any], None], deliver: Callable[[int, str, Any], None],
                 in_sync: Callable[[str, int], bool]) -> None:
        self.node_id = node_id
        self._in_sync = in_sync
        self.loop = loop
        self._send = send
        self._deliver = deliver
        now = loop.time()
        self.leader = TokenBucket(now)
        self.follower = TokenBucket(now)
        self._leader_groups: set[str] = set()
        self._follower_groups: set[str] = set()
        """Partition group ids (``topic-N``, ``topic-*`` for all of a topic) whose throttled-replicas
        config lists this broker, leader and follower side."""
        self._held_out: dict[tuple[str, int], deque] = {}
        self._held_in: dict[str, deque] = {}
        self._held_bytes: dict[tuple, int] = {}
        self._gap: dict = {}
        """Key -> last offset held before an Append was dropped (the queue was full)."""
        self._timer: asyncio.TimerHandle | None = None
        self.dropped = 0
        """Appends dropped because their held queue was full (Raft sends them again)."""
        self.bytes_leader = 0
        self.bytes_follower = 0
        """Throttled bytes sent (leader) and processed (follower), totals."""

    # ------------------------------------------------------------ configuration
    def configure(self, broker_configs: Mapping[str, Mapping[str, str]],
                  topics: Mapping[str, Mapping[str, str]]) -> None:
        """Apply the current configs: ``broker_configs`` resource -> dynamic broker configs,
        ``topics`` topic -> topic configs (only topics with a throttled-replicas config matter).
        Held messages no longer throttled are released at once."""
        now = self.loop.time()
        for bucket, name in ((self.leader, LEADER_RATE), (self.follower, FOLLOWER_RATE)):
            bucket.refill(now)
            rate = effective_rate(broker_configs, self.node_id, name)
            if rate != bucket.rate:
                bucket.rate = rate
                bucket.tokens = min(bucket.tokens, float(rate))
        sides: dict[str, set[str]] = {LEADER_REPLICAS: set(), FOLLOWER_REPLICAS: set()}
        for topic, configs in topics.items():
            for name, groups in sides.items():
                raw = configs.get(name)
                if not raw:
                    continue
                try:
                    parsed = parse_throttled_replicas(name, raw)
                except ValueError:
                    continue
                if parsed is ALL:
                    groups.add(f"{topic}-*")
                else:
                    groups.update(f"{topic}-{p}" for p, brokers in parsed.items() if self.node_id in brokers)
        self._leader_groups, self._follower_groups = sides[LEADER_REPLICAS], sides[FOLLOWER_REPLICAS]
        self._pump()

    def active(self) -> bool:
        """Anything configured or held (the hot path skips the throttle otherwise)."""
        return bool(self._held_out or self._held_in or
                    (self._leader_groups and not self.leader.off()) or
                    (self._follower_groups and not self.follower.off()))

    @staticmethod
    def _wildcard(group_id: str) -> str:
        return group_id.rpartition("-")[0] + "-*"

    def _listed(self, groups: set[str], group_id: str) -> bool:
        return group_id in groups or self._wildcard(group_id) in groups

    def _leader_throttled(self, group_id: str, dst: int) -> bool:
        """Kafka ``shouldLeaderThrottle``: this broker listed for the partition and ``dst`` not
        in sync (its log short of the commit index)."""
        return (not self.leader.off() and self._listed(self._leader_groups, group_id)
                and not self._in_sync(group_id, dst))

    def _follower_throttled(self, group_id: str) -> bool:
        """Kafka ``shouldFollowerThrottle``: this broker listed for the partition and not in
        sync (a learner)."""
        return (not self.follower.off() and self._listed(self._follower_groups, group_id)
                and not self._in_sync(group_id, self.node_id))

    # ------------------------------------------------------------ hooks
    def hold_outgoing(self, group_id: str, msg: Any) -> bool:
        """Leader side: True when the throttle took ``msg`` (held or sent it)."""
        if not isinstance(msg, Append):
            return False  # heartbeats, votes, answers: never delayed
        key = (group_id, msg.dst)
        queue = self._held_out.get(key)
        if queue is None and not self._leader_throttled(group_id, msg.dst):
            return False
        return self._admit(self.leader, self._held_out, key, msg, lambda m: self._send(m.dst, group_id, m))

    def hold_incoming(self, peer_id: int, group_id: str, msg: Any) -> bool:
        """Follower side: True when the throttle took ``msg`` (held or delivered it)."""
        queue = self._held_in.get(group_id)
        if queue is None and not (isinstance(msg, Append) and self._follower_throttled(group_id)):
            return False
        return self._admit(self.follower, self._held_in, group_id, msg,
                           lambda m: self._deliver(peer_id, group_id, m))

    def _admit(self, bucket: TokenBucket, held: dict, key, msg, emit: Callable[[Any], None]) -> bool:
        size = _append_bytes(msg)
        if size < 0:
            return False  # not an Append: never delayed
        queue = held.get(key)
        gap = self._gap.get(key)
        if gap is not None:
            if msg.prev_offset <= gap or queue is None:
                # a resend from before the gap, or the queue drained: this one goes on (past a gap
                # the follower rejects it and the leader probes back from its match point)
                del self._gap[key]
            else:
                self.dropped += 1  # would only be rejected after the gap: no tokens for it
                return True
        bucket.refill(self.loop.time())
        if queue is None and (bucket.tokens > 0 or bucket.off()):
            bucket.tokens -= size
            self._count(bucket, size)
            emit(msg)
            return True
        if self._held_bytes.get(key, 0) + size > limits.REPLICATION_THROTTLE_MAX_HELD_BYTES and queue:
            self._gap[key] = _last_offset(queue[-1][1])
            self.dropped += 1
            return True
        if queue is None:
            queue = held[key] = deque()
        queue.append((size, msg, emit))
        self._held_bytes[key] = self._held_bytes.get(key, 0) + size
        self._schedule(bucket.wait_s())
        return True

    def _count(self, bucket: TokenBucket, size: int) -> None:
        if bucket is self.leader:
            self.bytes_leader += size
        else:
            self.bytes_follower += size

    def _schedule(self, delay_s: float) -> None:
        if self._timer is None:
            self._timer = self.loop.call_later(max(delay_s, 0.001), self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        self._pump()

    def _pump(self) -> None:
        """Send or deliver held messages while their bucket has tokens (all of them for a
        bucket turned off or a key no longer throttled)."""
        now = self.loop.time()
        wait = None
        for bucket, held in ((self.leader, self._held_out), (self.follower, self._held_in)):
            bucket.refill(now)
            for key in list(held):
                queue = held[key]
                still = (self._leader_throttled(*key) if held is self._held_out
                         else self._follower_throttled(key))
                while queue and (bucket.tokens > 0 or not still):
                    size, msg, emit = queue.popleft()
                    if still:
                        bucket.tokens -= size
                    self._count(bucket, size)
                    self._held_bytes[key] -= size
                    emit(msg)
                if not queue:
                    del held[key]
                    self._held_bytes.pop(key, None)
            if held:
                w = bucket.wait_s()
                wait = w if wait is None else min(wait, w)
        if wait is not None:
            self._schedule(wait)

    def held_bytes(self) -> int:
        """Bytes of Appends held back now (both sides)."""
        return sum(self._held_bytes.values())
