"""A replicated partition: the broker's :class:`Partition` driven by a Raft group.

- ``append`` (produce, coordinator writes) works only on the leader: the records are appended
  to the log and proposed (:meth:`RaftGroup.leader_append`); elsewhere NOT_LEADER_OR_FOLLOWER.
- the **high watermark** is the Raft commit index + 1: acks=all waiters and long-poll fetches
  wake when a majority (this leader included) has the records fsynced.
- a leader that loses leadership (or is re-elected in a new term) fails every waiter with
  NOT_LEADER_OR_FOLLOWER: its uncommitted records may be replaced by the new leader's, so it
  must not acknowledge them; idempotent producers retry and the new leader's producer state
  deduplicates what did survive (KIP-98).
- ``leader_epoch`` is the Raft term (KIP-320 fencing in Fetch/ListOffsets/OffsetForLeaderEpoch).
- the **log start offset** is the leader's: retention and DeleteRecords run on the leader, every
  Append and Heartbeat carries its log start offset (Kafka's FetchResponse ``LogStartOffset``),
  and a follower moves its own up to it, never past its commit index; so ListOffsets
  ``earliest`` is the same on every replica. A leader whose log start moved wakes its group if
  it was quiet, so the followers hear of it.
- every AppendResponse and HeartbeatResponse carries the follower's log start offset (Kafka's
  FetchRequest ``LogStartOffset``, KIP-107): the leader's **low watermark** is the lowest log
  start of itself and its members on live brokers (Kafka's ``Partition.lowWatermarkIfLeader``),
  and DeleteRecords is answered only once it reached the deleted offset (Kafka's
  ``DelayedDeleteRecords``), so an acknowledged deletion survives the leader's failure.
- a member reporting a log start above the leader's (a deletion a former leader made, which this
  leader missed: its DeleteRecords was never acknowledged, or this replica was down then) moves
  the leader's up to it, bounded by the high watermark and by how far the member's log is known
  to match the leader's: every log start was set by some leader
  below committed records, so the partition's log start is the highest any leader set, and
  every replica converges on it (Kafka never moves a log start backwards either).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Callable

from litemq import limits
from litemq.replica import Partition
from litemq.protocol.errors import ErrorCode, KafkaError
from litemq.raft import Ready
from litemq.storage.log import AppendInfo, AppendOrigin
from litemq.storage.producer_state import VerificationGuard

log = logging.getLogger(__name__)


class ReplicatedPartition(Partition):
    """One hosted replica of a replicated partition (see module docstring).

    Attributes:
        replicas: node ids of the replica assignment (first = preferred leader).
        group: the :class:`~litemq.cluster.group.RaftGroup`.
    """

    __slots__ = ("replicas", "group", "_led_term", "_on_leader", "_leader_start", "_announced", "_caught_up_at",
                 "_lw_waiters")

    def __init__(self, topic: str, index: int, plog, manager, replicas: list[int]) -> None:
        super().__init__(topic, index, plog, manager)
        self.replicas = list(replicas)
        self.group = None
        self._led_term = -1
        self._on_leader: Callable | None = None
        self._leader_start = -1
        self._announced = False
        self._caught_up_at: dict[int, float] = {}
        """Leader: follower -> when (loop time, s) its log last reached the high watermark."""
        self._lw_waiters: list[tuple[int, asyncio.Future]] = []
        """Leader: DeleteRecords waiting for the low watermark: (log offset, future)."""

    def attach(self, group, on_leader: Callable | None = None) -> None:
        self.group = group
        self._on_leader = on_leader
        group.on_follower_answer = self.on_follower_answer
        self.high_watermark = group.node.high_watermark
        self.leader_epoch = group.node.term

    @property
    def is_leader(self) -> bool:
        g = self.group
        return g is not None and g.node.is_leader and not g.failed

    @property
    def leader_ready(self) -> bool:
        """Leader, and everything before this term committed (Raft thesis §3.6.2: a new leader
        learns the commit index only by committing an entry of its own term): its high watermark
        then covers every record an earlier leader acknowledged, so a coordinator may load its
        state from it (the moment ``on_leader(True)`` is announced)."""
        return self.is_leader and self._announced

    @property
    def leadership_current(self) -> bool:
        """Leader, and its leadership is current (the leader lease, Raft thesis §6.4.1): a
        majority of the voters acknowledged its term within one election timeout
        (``RaftGroup.lease_current``; a quiet group counts the voters whose brokers it hears)
        and this broker's tick loop ran within that time (it was not stopped: after a SIGSTOP
        or a blocked loop the followers may have elected another leader that this one has not
        heard of yet). A coordinator acts on its in-memory state (expires members, answers
        requests about membership) only while this holds."""
        g = self.group
        if g is None or not self.is_leader:
            return False
        host = g.host
        return host.ticked_within(host.lease_s) and g.lease_current(host.loop.time(), host.lease_s)

    def renew_leadership(self) -> None:
        """Wake this leader's Raft group (if quiet) so it heartbeats and its followers' answers
        renew the lease (or their higher term deposes it)."""
        g = self.group
        if g is not None and self.is_leader:
            g.wake()
            g.host.mark_dirty(g)

    async def confirm_leadership(self) -> bool:
        """:attr:`leadership_current`, waiting for the followers' answers (:meth:`renew_leadership`)
        when it does not hold yet: True as soon as it holds, False once this replica no longer
        leads or after one election timeout (by then CheckQuorum would have stepped it down)."""
        if self.leadership_current:
            return True
        if not self.is_leader:
            return False
        self.renew_leadership()
        loop = self._manager.loop
        deadline = loop.time() + self.group.host.lease_s
        while loop.time() < deadline:
            await asyncio.sleep(limits.LEADER_LEASE_POLL_MS / 1000)
            if not self.is_leader:
                return False
            if self.leadership_current:
                return True
        return False

    @property
    def is_follower(self) -> bool:
        """A replica of a working Raft group that is not its leader: it serves consumer fetches
        (FetchRequest v11+, KIP-392) up to the high watermark it learned from its leader (the
        commit index of the leader's Append and Heartbeat messages), which may lag the leader's."""
        g = self.group
        return g is not None and not g.failed and not g.closed and not self._offline and not g.node.is_leader

    def in_sync_follower_log_ends(self) -> dict[int, int]:
        """As the leader: node id -> log end offset (Raft match offset + 1, log offsets) of each
        follower in :meth:`in_sync_replicas` that is caught up as Kafka means it for the ISR: its
        log reached the high watermark within the last ``replica.lag.time.max.ms`` (a live but
        lagging follower is left out, so no consumer is sent to read behind the producers);
        empty elsewhere."""
        if not self.is_leader:
            return {}
        self._note_caught_up()
        g = self.group
        matches = g.node.match_offsets()
        oldest = self._manager.loop.time() - g.host.config.replica_lag_time_max_ms / 1000
        return {r: matches[r] + 1 for r in self.in_sync_replicas()
                if r != g.host.node_id and r in matches and self._caught_up_at.get(r, oldest - 1) >= oldest}

    def _note_caught_up(self) -> None:
        """Leader: note now for every follower whose log reaches the high watermark (Kafka's
        condition for a follower to join the ISR, ``Partition.isFollowerInSync``)."""
        hw = self.high_watermark
        now = self._manager.loop.time()
        for r, m in self.group.node.match_offsets().items():
            if m + 1 >= hw:
                self._caught_up_at[r] = now

    @property
    def leader_id(self) -> int | None:
        return self.group.node.leader_id if self.group is not None else None

    def in_sync_count(self) -> int:
        """Size of :meth:`in_sync_replicas` (0 when not the leader)."""
        if not self.is_leader:
            return 0
        return len(self.in_sync_replicas())

    def in_sync_replicas(self) -> list[int]:
        """The ISR as Kafka reports it: replicas heard from within the leader's CheckQuorum
        window whose broker is connected and not silent (a quiet leader does not run
        CheckQuorum, so broker-pair liveness is what notices a dead or paused follower)."""
        if not self.is_leader:
            return list(self.replicas)
        g = self.group
        active = g.node.active_voters()
        return [r for r in self.replicas if r in active and g.host.peer_alive(r)]

    def append(self, records: bytearray, origin: AppendOrigin = AppendOrigin.CLIENT,
               verification_guard: VerificationGuard | None = None) -> AppendInfo:
        """Leader append (:meth:`RaftGroup.leader_append`); ``verification_guard`` is this
        leader's KIP-890 guard (leader-local state, as in Kafka: a follower never checks one)."""
        if self._offline or self.group is None:
            raise KafkaError(f"{self.topic}-{self.index} is offline", ErrorCode.NOT_LEADER_OR_FOLLOWER)
        return self.group.leader_append(records, origin, verification_guard)

    def _follow_leader_log_start(self) -> None:
        """Move this follower's log start up to its leader's (bounded by the commit index and
        the persisted log end: only records the leader has committed are dropped)."""
        node = self.group.node
        target = min(node.leader_log_start_offset, node.commit_index + 1, self.group.view.stable_end)
        if target > self.log.log_start_offset:
            self.log.delete_records_before(target)
            self.truncate_after_delete_records()

    @property
    def low_watermark(self) -> int:
        """Leader: Kafka's ``Partition.lowWatermarkIfLeader`` in log offsets: the lowest of its
        own log start offset and the one each other voter or learner on a live broker
        (``ClusterHost.peer_alive``) last reported in this term (-1 while it has not answered:
        as Kafka's unknown offset, it holds the low watermark down).

        Raises:
            KafkaError: NOT_LEADER_OR_FOLLOWER when this replica does not lead.
        """
        if not self.is_leader:
            raise KafkaError(f"{self.topic}-{self.index}: not the leader", ErrorCode.NOT_LEADER_OR_FOLLOWER)
        g = self.group
        low = self.log.log_start_offset
        alive = g.host.peer_alive
        for member, start in g.node.member_log_start_offsets().items():
            if start < low and alive(member):
                low = start
        return low

    def low_watermark_waiter(self, offset: int) -> asyncio.Future:
        """DeleteRecords on the leader (Kafka's ``DelayedDeleteRecords``): a future completed
        with :attr:`low_watermark` (log offsets) once it is >= ``offset``, checked as each
        follower's answer arrives; failed with KafkaError NOT_LEADER_OR_FOLLOWER when this
        replica does not or no longer leads. The group keeps heartbeating (no quiescence) while
        a future waits, so followers keep answering; the caller bounds the wait and cancels the
        future when it gives up."""
        fut = self._manager.loop.create_future()
        try:
            low = self.low_watermark
        except KafkaError as exc:
            fut.set_exception(exc)
            fut.exception()  # (retrieved: an abandoned future logs nothing)
            return fut
        if low >= offset:
            fut.set_result(low)
            return fut
        self._lw_waiters = [w for w in self._lw_waiters if not w[1].done()]
        self._lw_waiters.append((offset, fut))
        g = self.group
        g.hold_awake = True
        g.wake()
        g.host.mark_dirty(g)
        return fut

    def _check_low_watermark(self) -> None:
        """Complete the DeleteRecords futures whose offset the low watermark reached (fail them
        all when this replica no longer leads); the group may quiesce once none waits."""
        try:
            low = self.low_watermark
        except KafkaError as exc:
            self._fail_low_watermark_waiters(exc)
            return
        keep = []
        for offset, fut in self._lw_waiters:
            if fut.done():
                continue
            if low >= offset:
                fut.set_result(low)
            else:
                keep.append((offset, fut))
        self._lw_waiters = keep
        if not keep:
            self.group.hold_awake = False

    def _fail_low_watermark_waiters(self, exc: BaseException) -> None:
        waiters, self._lw_waiters = self._lw_waiters, []
        for _, fut in waiters:
            if not fut.done():
                fut.set_exception(exc)
                fut.exception()
        if self.group is not None:
            self.group.hold_awake = False

    def _fail_waiters(self, exc: BaseException) -> None:
        super()._fail_waiters(exc)
        self._fail_low_watermark_waiters(exc)

    def on_follower_answer(self, msg) -> None:
        """The leader's group stepped a follower's AppendResponse or HeartbeatResponse (called
        by the cluster manager): take a higher log start offset it reports (see the module
        docstring) and check the DeleteRecords futures."""
        if msg.log_start_offset > self.log.log_start_offset and self.is_leader:
            self._adopt_log_start(msg.log_start_offset, msg.src)
        if self._lw_waiters:
            self._check_low_watermark()

    def _adopt_log_start(self, start: int, member: int) -> None:
        """Leader: move the log start up to ``start``, ``member``'s, bounded by the high
        watermark and the persisted log end (only committed records go) and by the member's
        match offset + 1: its log is known to hold this leader's entries there (Raft's log
        matching), so its log start belongs to this partition's history (not, say, to an earlier
        topic of the same name a lagging broker still hosts)."""
        match = self.group.node.match_offset(member)
        if match is None:
            return
        target = min(start, self.high_watermark, self.group.view.stable_end, match + 1)
        if target <= self.log.log_start_offset:
            return
        log.info("%s-%d: replica %d has log start offset %d above the leader's %d: the leader's follows",
                 self.topic, self.index, member, target, self.log.log_start_offset)
        try:
            self.log.delete_records_before(target)
        except (OSError, KafkaError) as exc:  # (the checkpoint write failed; the next answer retries)
            log.warning("%s-%d: cannot move the log start offset to %d: %s", self.topic, self.index, target, exc)
            return
        self.truncate_after_delete_records()

    def truncate_after_delete_records(self) -> None:
        """After retention or DeleteRecords: keep the high watermark >= the log start and, as
        the leader, wake a quiet group so its heartbeats carry the new log start offset."""
        super().truncate_after_delete_records()
        g = self.group
        if g is not None and self.is_leader and g.quiet:
            g.wake()
            g.host.mark_dirty(g)

    def on_ready(self, rd: Ready) -> None:
        node = self.group.node
        leader_now = node.is_leader
        self.leader_epoch = node.term
        if self._led_term >= 0 and (not leader_now or node.term != self._led_term):
            self._led_term = -1
            self._fail_waiters(KafkaError(f"{self.topic}-{self.index}: leadership lost",
                                          ErrorCode.NOT_LEADER_OR_FOLLOWER))
            if self._announced and self._on_leader is not None:
                self._announced = False
                self._on_leader(self, False)
        if leader_now and self._led_term < 0:
            self._led_term = node.term
            self._caught_up_at = {}  # a new leader knows its followers' logs only from now on
            self._leader_start = node.log_end_offset  # after this term's no-op
            self._announced = False
        self._advance_high_watermark(rd.high_watermark)
        if leader_now:
            self._note_caught_up()
            if self._lw_waiters:
                self._check_low_watermark()
        else:
            self._follow_leader_log_start()
        if (leader_now and not self._announced and self.high_watermark >= self._leader_start
                and self._on_leader is not None):
            self._announced = True  # everything before this term is committed: safe to load
            self._on_leader(self, True)
