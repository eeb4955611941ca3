"""The group coordinator (Kafka ``GroupCoordinator`` + ``GroupMetadataManager``, classic protocol).

It drives :class:`~litemq.coordinator.group.GroupMetadata` state machines on the broker's event
loop: JoinGroup / SyncGroup futures, session-timeout and rebalance-timeout timers
(``loop.call_later``), and the durable log of group metadata and committed offsets in the
internal compacted topic ``__consumer_offsets`` (formats in :mod:`litemq.coordinator.records`).

Sources: Kafka ``GroupCoordinator.scala`` (``doJoinGroup``, ``onCompleteJoin``, ``doSyncGroup``,
``handleHeartbeat``, ``handleLeaveGroup``, ``handleCommitOffsets``, ``handleFetchOffsets``,
``handleDeleteGroups``, ``handleDeleteOffsets``), ``GroupMetadataManager.scala`` (storeGroup,
storeOffsets, loading, ``cleanupGroupMetadata``), KIP-394 (MEMBER_ID_REQUIRED), KIP-345 (static
membership), KIP-211 (offsets of empty groups expire), KIP-496 (OffsetDelete), KIP-447
(require_stable), KIP-814 (skip_assignment).

Durability rules: an OffsetCommit is answered, and the committed offsets become visible to
OffsetFetch, only once the high watermark of the offsets partition covers the records (fsynced;
with replication, the Raft commit index). A generation's assignment is handed out by SyncGroup
only after the group record holding it is committed, so a restarted broker knows every
assignment it ever gave out.

The coordinator of a group is this broker when it hosts the group's ``__consumer_offsets``
partition (``abs(java hashCode(group id)) % partitions``); otherwise NOT_COORDINATOR.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from litemq import limits
from litemq.coordinator.group import GroupMetadata, GroupState, MemberMetadata, now_ms
from litemq.coordinator.internal_topic import append_committed, replay_committed
from litemq.coordinator.records import (FormatError, OffsetAndMetadata, OffsetKey, decode_group_value,
                                        decode_key, decode_offset_value, encode_group_key, encode_group_value,
                                        encode_offset_key, encode_offset_value, partition_for)
from litemq.protocol.errors import ErrorCode as E
from litemq.protocol.errors import KafkaError
from litemq.protocol.records import CONTROL_COMMIT, build_batch, parse_control_key

if TYPE_CHECKING:
    from litemq.coordinator.host import CoordinatorHost

log = logging.getLogger(__name__)

OFFSETS_TOPIC = "__consumer_offsets"
OFFSETS_TOPIC_SEGMENT_BYTES = 100 * 1024 * 1024
"""Kafka's ``offsets.topic.segment.bytes`` default."""
NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000
"""Kafka ``GroupCoordinator.NewMemberJoinTimeoutMs``: a brand-new member that never completes a
join is dropped after this (its session timeout only starts with its first generation)."""


@dataclass(slots=True)
class JoinResult:
    error: int
    member_id: str = ""
    generation: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    members: list[dict] = field(default_factory=list)
    skip_assignment: bool = False


@dataclass(slots=True)
class SyncResult:
    error: int
    assignment: bytes = b""
    protocol_type: str | None = None
    protocol_name: str | None = None


def _marker_is_commit(records) -> bool:
    """Whether a control batch's decoded ``records`` are a COMMIT transaction marker."""
    if not records:
        return False
    try:
        return parse_control_key(records[0].key)[1] == CONTROL_COMMIT
    except KafkaError:
        return False


def _merge_txn_offsets(offsets: dict[tuple[str, int], tuple[OffsetAndMetadata, int]],
                       committed: dict[tuple[str, int], tuple[OffsetAndMetadata, int]]) -> None:
    """Make a committed transaction's offsets the group's, unless a later plain OffsetCommit
    (a record further in the log) already replaced one (Kafka ``GroupMetadata.completePendingTxnOffsetCommit``)."""
    for tp, (om, record_offset) in committed.items():
        current = offsets.get(tp)
        if current is None or current[1] < record_offset:
            offsets[tp] = (om, record_offset)


class GroupCoordinator:
    """Every consumer group whose offsets partition this broker leads. Event-loop thread only."""

    def __init__(self, host: "CoordinatorHost") -> None:
        self.host = host
        self.config = host.config
        self.groups: dict[str, GroupMetadata] = {}
        self.num_partitions = self.config.offsets_topic_num_partitions
        self._expiry_task: asyncio.Task | None = None
        self._tasks: set[asyncio.Task] = set()  # background stores, kept referenced until done
        self._stopped = False
        self.loaded_partitions: set[int] = set()
        """Cluster mode: offsets partitions led here whose groups are loaded."""

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        return self.host.loop

    # ================================================================== lifecycle
    def start(self) -> None:
        """Load groups and offsets from ``__consumer_offsets`` (if it exists) and start expiry."""
        info = self.host.topic(OFFSETS_TOPIC)
        if info is not None:
            self.num_partitions = info.num_partitions
            for i in range(info.num_partitions):
                if not self.host.clustered:
                    self._load_partition(i)
                else:
                    p = self.host.partition(OFFSETS_TOPIC, i)
                    if p is not None and getattr(p, "_announced", False):
                        self.on_leadership(i, True)
        self._expiry_task = self.loop.create_task(self._expiry_loop())

    async def stop(self) -> None:
        self._stopped = True
        if self._expiry_task is not None:
            self._expiry_task.cancel()
        for group in self.groups.values():
            self._cancel_join_timer(group)
            for t in group.pending_members.values():
                t.cancel()
            for m in group.members.values():
                if m.heartbeat_timer is not None:
                    m.heartbeat_timer.cancel()
                self._complete_join(m, JoinResult(E.NOT_COORDINATOR, member_id=m.member_id))
                self._complete_sync(m, SyncResult(E.NOT_COORDINATOR))

    # ================================================================== offsets topic
    def ensure_offsets_topic(self) -> None:
        """Create ``__consumer_offsets`` (compacted, internal) on first use."""
        info = self.host.ensure_internal_topic(OFFSETS_TOPIC, self.config.offsets_topic_num_partitions, 3,
                                               OFFSETS_TOPIC_SEGMENT_BYTES)
        self.num_partitions = info.num_partitions

    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.num_partitions)

    def coordinator_error(self, group_id: str | None, require_id: bool = True) -> int:
        """NONE when this broker coordinates ``group_id`` (INVALID_GROUP_ID for an empty id)."""
        if self._stopped:
            return E.COORDINATOR_NOT_AVAILABLE
        if require_id and not group_id:
            return E.INVALID_GROUP_ID
        try:
            self.ensure_offsets_topic()
        except KafkaError as exc:
            log.warning("cannot create %s: %s", OFFSETS_TOPIC, exc)
            return E.COORDINATOR_NOT_AVAILABLE
        index = self.partition_for(group_id or "")
        p = self.host.partition(OFFSETS_TOPIC, index)
        if p is None or not p.is_leader:
            return E.NOT_COORDINATOR
        if self.host.clustered and index not in self.loaded_partitions:
            return E.COORDINATOR_LOAD_IN_PROGRESS
        return E.NONE

    def on_leadership(self, index: int, leader: bool) -> None:
        """This broker became (and committed everything before its term: ``leader``) or stopped
        being the leader of ``__consumer_offsets`` partition ``index`` (Kafka
        ``onElection``/``onResignation``): load or unload the groups it holds."""
        if leader:
            if index not in self.loaded_partitions:
                self._load_partition(index)
                self.loaded_partitions.add(index)
            return
        self.loaded_partitions.discard(index)
        for group_id in [g for g in self.groups if self.partition_for(g) == index]:
            group = self.groups.pop(group_id)
            self._cancel_join_timer(group)
            for t in group.pending_members.values():
                t.cancel()
            for m in group.members.values():
                if m.heartbeat_timer is not None:
                    m.heartbeat_timer.cancel()
                self._complete_join(m, JoinResult(E.NOT_COORDINATOR, member_id=m.member_id))
                self._complete_sync(m, SyncResult(E.NOT_COORDINATOR))
        log.info("unloaded the groups of %s-%d (no longer its leader)", OFFSETS_TOPIC, index)

    async def _append(self, group_id: str, records: list[tuple[bytes, bytes | None]], **batch_args
                      ) -> tuple[int, int]:
        """Append records to the group's offsets partition; wait until they are committed.

        Returns (error code, offset of the first record). ``batch_args`` go to ``build_batch``
        (producer id/epoch/sequence and the transactional flag of TxnOffsetCommit).
        """
        p = self.host.partition(OFFSETS_TOPIC, self.partition_for(group_id))
        return await append_committed(p, build_batch(records, **batch_args),
                                      self.config.offsets_commit_timeout_ms / 1000)

    async def _store_group(self, group: GroupMetadata, assignment: dict[str, bytes] | None = None) -> int:
        stored = group.to_stored()
        if assignment is not None:
            for m in stored.members:
                m.assignment = assignment.get(m.member_id, b"")
        err, _ = await self._append(group.group_id, [(encode_group_key(group.group_id), encode_group_value(stored))])
        if err:
            log.warning("storing group %s generation %d failed: %s", group.group_id, group.generation, E(err).name)
        return err

    def _spawn(self, coro) -> None:
        task = self.loop.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _store_group_soon(self, group: GroupMetadata) -> None:
        self._spawn(self._store_group(group))

    # ================================================================== loading
    def _load_partition(self, index: int) -> None:
        """Replay one offsets partition (Kafka ``GroupMetadataManager.doLoadGroupsAndOffsets``)."""
        p = self.host.partition(OFFSETS_TOPIC, index)
        if p is None:
            return
        stored: dict[str, Any] = {}
        offsets: dict[str, dict[tuple[str, int], tuple[OffsetAndMetadata, int]]] = {}
        # TxnOffsetCommit records of transactions not yet ended: producer id -> group -> tp -> value
        pending_txn: dict[int, dict[str, dict[tuple[str, int], tuple[OffsetAndMetadata, int]]]] = {}
        bad = 0
        for h, records in replay_committed(p):
            if h.is_control:
                if h.producer_id >= 0:
                    ended = pending_txn.pop(h.producer_id, {})
                    if _marker_is_commit(records):
                        for gid, tps in ended.items():
                            _merge_txn_offsets(offsets.setdefault(gid, {}), tps)
                continue
            txn_pid = h.producer_id if h.is_transactional else -1
            for rec in records:
                if rec.key is None:
                    continue
                try:
                    key = decode_key(rec.key)
                    if isinstance(key, OffsetKey):
                        tp = (key.topic, key.partition)
                        if txn_pid >= 0:
                            if rec.value is not None:
                                pending_txn.setdefault(txn_pid, {}).setdefault(key.group, {})[tp] = (
                                    decode_offset_value(rec.value), rec.offset)
                            continue
                        per_group = offsets.setdefault(key.group, {})
                        if rec.value is None:
                            per_group.pop(tp, None)
                        else:
                            per_group[tp] = (decode_offset_value(rec.value), rec.offset)
                    else:
                        stored[key.group] = None if rec.value is None else decode_group_value(rec.value)
                except FormatError as exc:
                    bad += 1
                    if bad <= 3:
                        log.warning("%s-%d offset %d: skipping undecodable record: %s", OFFSETS_TOPIC, index,
                                    rec.offset, exc)
        loaded = 0
        pending_groups = {gid for per_pid in pending_txn.values() for gid in per_pid}
        for group_id in set(stored) | set(offsets) | pending_groups:
            g_stored = stored.get(group_id)
            g_offsets = offsets.get(group_id) or {}
            if g_stored is None and not g_offsets and group_id not in pending_groups:
                continue
            group = GroupMetadata(group_id)
            if g_stored is not None:
                group.load_stored(g_stored)
            group.offsets = g_offsets
            for pid, per_group in pending_txn.items():
                if group_id in per_group:
                    group.pending_txn_offsets[pid] = per_group[group_id]
            self.groups[group_id] = group
            for m in group.members.values():
                self._schedule_heartbeat(group, m, m.session_timeout_ms)
            loaded += 1
        if loaded:
            log.info("loaded %d group(s) from %s-%d (offsets %d..%d)", loaded, OFFSETS_TOPIC, index,
                     p.log_start_offset, p.high_watermark)

    # ================================================================== timers
    def _schedule_heartbeat(self, group: GroupMetadata, member: MemberMetadata, timeout_ms: int) -> None:
        if member.heartbeat_timer is not None:
            member.heartbeat_timer.cancel()
        member.heartbeat_timer = self.loop.call_later(timeout_ms / 1000, self._on_heartbeat_expired, group, member)

    def _on_heartbeat_expired(self, group: GroupMetadata, member: MemberMetadata) -> None:
        member.heartbeat_timer = None
        if group.members.get(member.member_id) is not member:
            return
        if member.awaiting_join and not member.is_new:
            # Kafka shouldKeepAlive: a member waiting in JoinGroup is alive until the rebalance ends.
            self._schedule_heartbeat(group, member, member.session_timeout_ms)
            return
        log.info("group %s: member %s expired (session timeout %d ms)", group.group_id, member.member_id,
                 member.session_timeout_ms)
        self._remove_member_and_update_group(group, member, "session timeout")

    def _on_pending_expired(self, group: GroupMetadata, member_id: str) -> None:
        if group.pending_members.pop(member_id, None) is not None and group.is_(GroupState.PREPARING_REBALANCE):
            self._try_complete_join(group)

    def _cancel_join_timer(self, group: GroupMetadata) -> None:
        if group.join_timer is not None:
            group.join_timer.cancel()
            group.join_timer = None

    # ================================================================== futures
    @staticmethod
    def _complete_join(member: MemberMetadata, result: JoinResult) -> None:
        fut, member.join_future = member.join_future, None
        if fut is not None and not fut.done():
            fut.set_result(result)

    @staticmethod
    def _complete_sync(member: MemberMetadata, result: SyncResult) -> None:
        fut, member.sync_future = member.sync_future, None
        if fut is not None and not fut.done():
            fut.set_result(result)

    def _new_join_future(self, member: MemberMetadata) -> asyncio.Future:
        if member.join_future is not None:
            # A second JoinGroup from the same member replaces the first (which the client gave up on).
            self._complete_join(member, JoinResult(E.REBALANCE_IN_PROGRESS, member_id=member.member_id))
        member.join_future = self.loop.create_future()
        return member.join_future

    # ================================================================== rebalance
    def _can_rebalance(self, group: GroupMetadata) -> bool:
        return group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY)

    def _maybe_prepare_rebalance(self, group: GroupMetadata, reason: str) -> None:
        if self._can_rebalance(group):
            self._prepare_rebalance(group, reason)

    def _prepare_rebalance(self, group: GroupMetadata, reason: str) -> None:
        if group.is_(GroupState.COMPLETING_REBALANCE):
            self._reset_and_propagate_assignment_error(group, E.REBALANCE_IN_PROGRESS)
        initial = group.is_(GroupState.EMPTY) and self.config.group_initial_rebalance_delay_ms > 0
        group.transition_to(GroupState.PREPARING_REBALANCE)
        self._cancel_join_timer(group)
        rebalance_timeout_s = group.max_rebalance_timeout_ms() / 1000
        loop_now = self.loop.time()
        log.info("group %s: preparing to rebalance (generation %d, %d member(s)): %s", group.group_id,
                 group.generation, len(group.members), reason)
        if initial:
            # Kafka InitialDelayedJoin: wait group.initial.rebalance.delay.ms for more members,
            # extended by each new member, never beyond the rebalance timeout.
            delay = min(self.config.group_initial_rebalance_delay_ms / 1000, rebalance_timeout_s)
            group.initial_join_deadline = loop_now + rebalance_timeout_s
            group.join_deadline = loop_now + delay
            group.join_timer = self.loop.call_later(delay, self._on_initial_join_timer, group)
            return
        group.initial_join_deadline = 0.0
        group.join_deadline = loop_now + rebalance_timeout_s
        group.join_timer = self.loop.call_later(rebalance_timeout_s, self._on_join_deadline, group)
        self._try_complete_join(group)

    def _on_initial_join_timer(self, group: GroupMetadata) -> None:
        group.join_timer = None
        if not group.is_(GroupState.PREPARING_REBALANCE):
            return
        remaining = group.initial_join_deadline - self.loop.time()
        if group.new_member_added and remaining > 0:
            group.new_member_added = False
            delay = min(self.config.group_initial_rebalance_delay_ms / 1000, remaining)
            group.join_timer = self.loop.call_later(delay, self._on_initial_join_timer, group)
            return
        group.initial_join_deadline = 0.0
        self._on_complete_join(group)

    def _on_join_deadline(self, group: GroupMetadata) -> None:
        group.join_timer = None
        if group.is_(GroupState.PREPARING_REBALANCE):
            self._on_complete_join(group)

    def _try_complete_join(self, group: GroupMetadata) -> None:
        if (group.is_(GroupState.PREPARING_REBALANCE) and not group.initial_join_deadline
                and group.has_all_members_joined()):
            self._on_complete_join(group)

    def _on_complete_join(self, group: GroupMetadata) -> None:
        """Kafka ``onCompleteJoin``: drop dynamic members that did not rejoin, start the next generation."""
        self._cancel_join_timer(group)
        for m in group.not_yet_rejoined():
            if not m.is_static:
                log.info("group %s: removing member %s, which did not rejoin in time", group.group_id, m.member_id)
                self._drop_member(group, m)
        if group.is_(GroupState.DEAD):
            return
        if not group.maybe_elect_new_joined_leader() and group.members:
            # Only static members that have not rejoined are left: wait another rebalance timeout.
            timeout_s = group.max_rebalance_timeout_ms() / 1000
            group.join_deadline = self.loop.time() + timeout_s
            group.join_timer = self.loop.call_later(timeout_s, self._on_join_deadline, group)
            return
        group.init_next_generation()
        if group.is_(GroupState.EMPTY):
            log.info("group %s: generation %d is empty", group.group_id, group.generation)
            self._store_group_soon(group)
            return
        log.info("group %s: generation %d with %d member(s), protocol %s, leader %s", group.group_id,
                 group.generation, len(group.members), group.protocol_name, group.leader_id)
        leader_members = group.current_member_metadata()
        for m in group.members.values():
            is_leader = group.is_leader(m.member_id)
            self._complete_join(m, JoinResult(
                E.NONE, member_id=m.member_id, generation=group.generation, protocol_type=group.protocol_type,
                protocol_name=group.protocol_name, leader=group.leader_id or "",
                members=leader_members if is_leader else []))
            m.is_new = False
            self._schedule_heartbeat(group, m, m.session_timeout_ms)

    def _reset_and_propagate_assignment_error(self, group: GroupMetadata, error: int) -> None:
        for m in group.members.values():
            m.assignment = b""
            self._complete_sync(m, SyncResult(error))

    def _drop_member(self, group: GroupMetadata, member: MemberMetadata) -> None:
        if member.heartbeat_timer is not None:
            member.heartbeat_timer.cancel()
            member.heartbeat_timer = None
        self._complete_join(member, JoinResult(E.UNKNOWN_MEMBER_ID, member_id=member.member_id))
        self._complete_sync(member, SyncResult(E.UNKNOWN_MEMBER_ID))
        group.remove(member.member_id)

    def _remove_member_and_update_group(self, group: GroupMetadata, member: MemberMetadata, reason: str) -> None:
        self._drop_member(group, member)
        if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._prepare_rebalance(group, f"removing member {member.member_id}: {reason}")
        elif group.is_(GroupState.PREPARING_REBALANCE):
            self._try_complete_join(group)

    # ================================================================== JoinGroup
    async def join_group(self, group_id: str, member_id: str, group_instance_id: str | None, client_id: str,
                         client_host: str, session_timeout_ms: int, rebalance_timeout_ms: int,
                         protocol_type: str, protocols: list[tuple[str, bytes]], require_known_member_id: bool,
                         supports_skip_assignment: bool) -> JoinResult:
        """JoinGroup v0-9 (Kafka ``handleJoinGroup``)."""
        err = self.coordinator_error(group_id)
        if err:
            return JoinResult(err, member_id=member_id)
        cfg = self.config
        if not cfg.group_min_session_timeout_ms <= session_timeout_ms <= cfg.group_max_session_timeout_ms:
            return JoinResult(E.INVALID_SESSION_TIMEOUT, member_id=member_id)
        if rebalance_timeout_ms < 0:
            rebalance_timeout_ms = session_timeout_ms
        group = self.groups.get(group_id)
        if group is None:
            if member_id:
                return JoinResult(E.UNKNOWN_MEMBER_ID, member_id=member_id)
            if len(self.groups) >= limits.MAX_GROUPS:
                return JoinResult(E.COORDINATOR_NOT_AVAILABLE, member_id=member_id)
            group = self.groups[group_id] = GroupMetadata(group_id)
        if group.is_(GroupState.DEAD):
            # The group is being removed (DeleteGroups/expiry): the client looks up the coordinator again.
            return JoinResult(E.COORDINATOR_NOT_AVAILABLE, member_id=member_id)
        if not group.supports_protocols(protocol_type, protocols):
            return JoinResult(E.INCONSISTENT_GROUP_PROTOCOL, member_id=member_id)
        args = (client_id, client_host, session_timeout_ms, rebalance_timeout_ms, protocol_type, protocols)
        if not member_id:
            out = self._join_unknown_member(group, group_instance_id, require_known_member_id,
                                            supports_skip_assignment, *args)
        else:
            out = self._join_known_member(group, member_id, group_instance_id, *args)
        if isinstance(out, JoinResult):
            return out
        return await out

    def _join_unknown_member(self, group: GroupMetadata, instance_id: str | None, require_known_member_id: bool,
                             supports_skip_assignment: bool, client_id: str, client_host: str, session_timeout_ms: int,
                             rebalance_timeout_ms: int, protocol_type: str, protocols: list[tuple[str, bytes]]):
        new_id = f"{client_id or 'member'}-{uuid.uuid4()}"
        if instance_id is not None:
            old_id = group.static_member_id(instance_id)
            if old_id is not None:
                return self._update_static_member_and_rebalance(
                    group, old_id, new_id, instance_id, supports_skip_assignment, client_id, client_host,
                    session_timeout_ms, rebalance_timeout_ms, protocols)
        elif require_known_member_id:
            # KIP-394: hand out the member id first; the member joins with it.
            if len(group.pending_members) >= limits.MAX_GROUP_MEMBERS:
                return JoinResult(E.GROUP_MAX_SIZE_REACHED, member_id=new_id)
            group.pending_members[new_id] = self.loop.call_later(
                session_timeout_ms / 1000, self._on_pending_expired, group, new_id)
            return JoinResult(E.MEMBER_ID_REQUIRED, member_id=new_id)
        return self._add_member_and_rebalance(group, new_id, instance_id, client_id, client_host,
                                              session_timeout_ms, rebalance_timeout_ms, protocol_type, protocols)

    def _join_known_member(self, group: GroupMetadata, member_id: str, instance_id: str | None, client_id: str,
                           client_host: str, session_timeout_ms: int, rebalance_timeout_ms: int,
                           protocol_type: str, protocols: list[tuple[str, bytes]]):
        timer = group.pending_members.pop(member_id, None)
        if timer is not None:
            timer.cancel()
            return self._add_member_and_rebalance(group, member_id, instance_id, client_id, client_host,
                                                  session_timeout_ms, rebalance_timeout_ms, protocol_type, protocols)
        err = self._validate_member(group, member_id, instance_id)
        if err:
            return JoinResult(err, member_id=member_id)
        member = group.members[member_id]
        state = group.state
        if state is GroupState.PREPARING_REBALANCE:
            return self._update_member_and_rebalance(group, member, session_timeout_ms, rebalance_timeout_ms,
                                                     protocols, "member rejoined")
        if state is GroupState.COMPLETING_REBALANCE:
            if member.matches(protocols):
                # The member missed our JoinGroup response: send it again.
                return self._current_join_result(group, member, leader_gets_members=True)
            return self._update_member_and_rebalance(group, member, session_timeout_ms, rebalance_timeout_ms,
                                                     protocols, "member changed its protocols")
        if state is GroupState.STABLE:
            if group.is_leader(member_id) or not member.matches(protocols):
                return self._update_member_and_rebalance(group, member, session_timeout_ms, rebalance_timeout_ms,
                                                         protocols, f"leader or changed member {member_id} rejoined")
            return self._current_join_result(group, member, leader_gets_members=False)
        return JoinResult(E.UNKNOWN_MEMBER_ID, member_id=member_id)

    def _current_join_result(self, group: GroupMetadata, member: MemberMetadata, leader_gets_members: bool,
                             skip_assignment: bool = False) -> JoinResult:
        is_leader = group.is_leader(member.member_id)
        return JoinResult(E.NONE, member_id=member.member_id, generation=group.generation,
                          protocol_type=group.protocol_type, protocol_name=group.protocol_name,
                          leader=group.leader_id or "",
                          members=group.current_member_metadata() if is_leader and leader_gets_members else [],
                          skip_assignment=skip_assignment)

    def _validate_member(self, group: GroupMetadata, member_id: str, instance_id: str | None) -> int:
        """Kafka ``validateCurrentMember`` without the generation: FENCED_INSTANCE_ID / UNKNOWN_MEMBER_ID."""
        if instance_id is not None:
            known = group.static_member_id(instance_id)
            if known is not None and known != member_id:
                return E.FENCED_INSTANCE_ID
        if member_id not in group.members:
            return E.UNKNOWN_MEMBER_ID
        return E.NONE

    def _add_member_and_rebalance(self, group: GroupMetadata, member_id: str, instance_id: str | None,
                                  client_id: str, client_host: str, session_timeout_ms: int,
                                  rebalance_timeout_ms: int, protocol_type: str,
                                  protocols: list[tuple[str, bytes]]):
        if len(group.members) >= limits.MAX_GROUP_MEMBERS:
            return JoinResult(E.GROUP_MAX_SIZE_REACHED, member_id=member_id)
        member = MemberMetadata(member_id, instance_id, client_id, client_host, rebalance_timeout_ms,
                                session_timeout_ms, protocol_type, protocols, is_new=True)
        if group.is_(GroupState.PREPARING_REBALANCE) and group.initial_join_deadline:
            group.new_member_added = True
        group.add(member)
        fut = self._new_join_future(member)
        self._schedule_heartbeat(group, member, NEW_MEMBER_JOIN_TIMEOUT_MS)
        self._maybe_prepare_rebalance(group, f"adding new member {member_id}")
        self._try_complete_join(group)
        return fut

    def _update_member_and_rebalance(self, group: GroupMetadata, member: MemberMetadata, session_timeout_ms: int,
                                     rebalance_timeout_ms: int, protocols: list[tuple[str, bytes]], reason: str):
        member.protocols = protocols
        member.session_timeout_ms = session_timeout_ms
        member.rebalance_timeout_ms = rebalance_timeout_ms
        fut = self._new_join_future(member)
        self._maybe_prepare_rebalance(group, reason)
        self._try_complete_join(group)
        return fut

    def _update_static_member_and_rebalance(self, group: GroupMetadata, old_id: str, new_id: str, instance_id: str,
                                            supports_skip_assignment: bool, client_id: str, client_host: str,
                                            session_timeout_ms: int, rebalance_timeout_ms: int,
                                            protocols: list[tuple[str, bytes]]):
        """KIP-345: a static member came back with a new member id; fence the old one."""
        member = group.members[old_id]
        self._complete_join(member, JoinResult(E.FENCED_INSTANCE_ID, member_id=old_id))
        self._complete_sync(member, SyncResult(E.FENCED_INSTANCE_ID))
        old = (member.protocols, member.session_timeout_ms, member.rebalance_timeout_ms, member.client_id,
               member.client_host, group.leader_id)
        group.replace_static_member(instance_id, old_id, new_id)
        member.client_id, member.client_host = client_id, client_host
        self._schedule_heartbeat(group, member, session_timeout_ms)
        unchanged = member.matches(protocols)
        member.protocols = protocols
        member.session_timeout_ms, member.rebalance_timeout_ms = session_timeout_ms, rebalance_timeout_ms
        fut = self._new_join_future(member)
        state = group.state
        if state is GroupState.STABLE:
            if unchanged and group.select_protocol() == group.protocol_name:
                log.info("group %s: static member %s rejoined as %s without a rebalance", group.group_id,
                         instance_id, new_id)
                self._spawn(self._finish_static_rejoin(group, member, old_id, old, supports_skip_assignment))
            else:
                self._prepare_rebalance(group, f"static member {instance_id} rejoined with other protocols")
        elif state is GroupState.COMPLETING_REBALANCE:
            self._prepare_rebalance(group, f"static member {instance_id} rejoined during CompletingRebalance")
        else:  # PreparingRebalance: it has rejoined; wait for the others
            self._try_complete_join(group)
        return fut

    async def _finish_static_rejoin(self, group: GroupMetadata, member: MemberMetadata, old_id: str, old: tuple,
                                    supports_skip_assignment: bool) -> None:
        generation, new_id = group.generation, member.member_id
        err = await self._store_group(group)
        if member.join_future is None or group.members.get(new_id) is not member:
            return
        if err:
            # Undo the replacement: the old member id stays valid (Kafka does the same).
            if group.generation == generation and member.group_instance_id is not None:
                group.replace_static_member(member.group_instance_id, new_id, old_id)
                (member.protocols, member.session_timeout_ms, member.rebalance_timeout_ms, member.client_id,
                 member.client_host, group.leader_id) = old
            self._complete_join(member, JoinResult(err, member_id=new_id))
            return
        is_leader = group.is_leader(new_id)
        self._complete_join(member, self._current_join_result(
            group, member, leader_gets_members=True, skip_assignment=is_leader and supports_skip_assignment))

    # ================================================================== SyncGroup
    async def sync_group(self, group_id: str, generation: int, member_id: str, group_instance_id: str | None,
                         protocol_type: str | None, protocol_name: str | None,
                         assignments: dict[str, bytes]) -> SyncResult:
        """SyncGroup v0-5 (Kafka ``handleSyncGroup``)."""
        err = self.coordinator_error(group_id)
        if err:
            return SyncResult(err)
        group = self.groups.get(group_id)
        if group is None:
            return SyncResult(E.UNKNOWN_MEMBER_ID)
        if group.is_(GroupState.DEAD):
            return SyncResult(E.COORDINATOR_NOT_AVAILABLE)
        err = self._validate_member(group, member_id, group_instance_id)
        if err:
            return SyncResult(err)
        if generation != group.generation:
            return SyncResult(E.ILLEGAL_GENERATION)
        if (protocol_type is not None and protocol_type != group.protocol_type) or \
                (protocol_name is not None and protocol_name != group.protocol_name):
            return SyncResult(E.INCONSISTENT_GROUP_PROTOCOL)
        member = group.members[member_id]
        if group.is_(GroupState.PREPARING_REBALANCE):
            return SyncResult(E.REBALANCE_IN_PROGRESS)
        if group.is_(GroupState.STABLE):
            self._schedule_heartbeat(group, member, member.session_timeout_ms)
            return SyncResult(E.NONE, member.assignment, group.protocol_type, group.protocol_name)
        if not group.is_(GroupState.COMPLETING_REBALANCE):
            return SyncResult(E.UNKNOWN_MEMBER_ID)
        if member.sync_future is not None:
            self._complete_sync(member, SyncResult(E.REBALANCE_IN_PROGRESS))
        fut = member.sync_future = self.loop.create_future()
        self._schedule_heartbeat(group, member, member.session_timeout_ms)
        if group.is_leader(member_id):
            full = {mid: assignments.get(mid, b"") for mid in group.members}
            err = await self._store_group(group, full)
            if group.is_(GroupState.COMPLETING_REBALANCE) and group.generation == generation:
                if err:
                    self._reset_and_propagate_assignment_error(group, err)
                    self._maybe_prepare_rebalance(group, f"storing generation {generation} failed")
                else:
                    for mid, m in group.members.items():
                        m.assignment = full.get(mid, b"")
                        self._complete_sync(m, SyncResult(E.NONE, m.assignment, group.protocol_type,
                                                          group.protocol_name))
                    group.transition_to(GroupState.STABLE)
                    log.info("group %s: generation %d is stable", group_id, generation)
        return await fut

    # ================================================================== Heartbeat
    def heartbeat(self, group_id: str, generation: int, member_id: str, group_instance_id: str | None) -> int:
        """Heartbeat v0-4 (Kafka ``handleHeartbeat``)."""
        err = self.coordinator_error(group_id)
        if err:
            return err
        group = self.groups.get(group_id)
        if group is None:
            return E.UNKNOWN_MEMBER_ID
        if group.is_(GroupState.DEAD):
            return E.COORDINATOR_NOT_AVAILABLE
        err = self._validate_member(group, member_id, group_instance_id)
        if err:
            return err
        member = group.members[member_id]
        if group.is_(GroupState.PREPARING_REBALANCE):
            self._schedule_heartbeat(group, member, member.session_timeout_ms)
            return E.REBALANCE_IN_PROGRESS
        if group.state in (GroupState.COMPLETING_REBALANCE, GroupState.STABLE):
            if generation != group.generation:
                return E.ILLEGAL_GENERATION
            self._schedule_heartbeat(group, member, member.session_timeout_ms)
            return E.NONE
        return E.UNKNOWN_MEMBER_ID

    # ================================================================== LeaveGroup
    def leave_group(self, group_id: str, leaving: list[tuple[str, str | None]]) -> tuple[int, list[int]]:
        """LeaveGroup v0-5 (KIP-345 batch). ``leaving``: (member id, group instance id) pairs.

        Returns (top-level error, per-member errors)."""
        err = self.coordinator_error(group_id)
        if err:
            return err, [err] * len(leaving)
        group = self.groups.get(group_id)
        if group is None:
            return E.NONE, [E.UNKNOWN_MEMBER_ID] * len(leaving)
        if group.is_(GroupState.DEAD):
            return E.COORDINATOR_NOT_AVAILABLE, [E.COORDINATOR_NOT_AVAILABLE] * len(leaving)
        errors = []
        for member_id, instance_id in leaving:
            if instance_id is not None:
                known = group.static_member_id(instance_id)
                if known is None:
                    errors.append(E.UNKNOWN_MEMBER_ID)
                    continue
                if member_id and member_id != known:
                    errors.append(E.FENCED_INSTANCE_ID)
                    continue
                member_id = known
            timer = group.pending_members.pop(member_id, None)
            if timer is not None:
                timer.cancel()
                errors.append(E.NONE)
                if group.is_(GroupState.PREPARING_REBALANCE):
                    self._try_complete_join(group)
                continue
            member = group.members.get(member_id)
            if member is None:
                errors.append(E.UNKNOWN_MEMBER_ID)
                continue
            log.info("group %s: member %s leaves", group_id, member_id)
            self._remove_member_and_update_group(group, member, "the member left the group")
            errors.append(E.NONE)
        return E.NONE, errors

    # ================================================================== OffsetCommit
    async def commit_offsets(self, group_id: str, generation: int, member_id: str, group_instance_id: str | None,
                             retention_time_ms: int,
                             offsets: dict[tuple[str, int], OffsetAndMetadata]) -> dict[tuple[str, int], int]:
        """OffsetCommit v0-9 (Kafka ``handleCommitOffsets``). Returns an error per partition.

        Members commit with their generation and member id (during Stable and
        PreparingRebalance; REBALANCE_IN_PROGRESS during CompletingRebalance); a consumer
        without membership (``assign()``, admin tools) commits with generation -1 and an empty
        member id, accepted only while the group has no members.
        """
        def all_(code: int) -> dict:
            return {tp: code for tp in offsets}

        err = self.coordinator_error(group_id)
        if err:
            return all_(err)
        simple = generation < 0 and not member_id and group_instance_id is None
        group = self.groups.get(group_id)
        if group is None:
            if not simple:
                return all_(E.ILLEGAL_GENERATION)
            if len(self.groups) >= limits.MAX_GROUPS:
                return all_(E.COORDINATOR_NOT_AVAILABLE)
            group = self.groups[group_id] = GroupMetadata(group_id)
        if group.is_(GroupState.DEAD):
            return all_(E.COORDINATOR_NOT_AVAILABLE)
        if simple:
            if not group.is_(GroupState.EMPTY):
                return all_(E.UNKNOWN_MEMBER_ID)
        else:
            err = self._validate_member(group, member_id, group_instance_id)
            if err:
                return all_(err)
            if generation != group.generation:
                return all_(E.ILLEGAL_GENERATION)
            if group.is_(GroupState.COMPLETING_REBALANCE):
                return all_(E.REBALANCE_IN_PROGRESS)
            member = group.members[member_id]
            self._schedule_heartbeat(group, member, member.session_timeout_ms)
        results, valid = self._validate_offsets(offsets, retention_time_ms)
        if not valid:
            return results
        records = [(encode_offset_key(group_id, t, p), encode_offset_value(om)) for (t, p), om in valid]
        for tp, _ in valid:
            group.pending_commits[tp] = group.pending_commits.get(tp, 0) + 1
        try:
            err, first_offset = await self._append(group_id, records)
        finally:
            for tp, _ in valid:
                n = group.pending_commits.get(tp, 0) - 1
                if n > 0:
                    group.pending_commits[tp] = n
                else:
                    group.pending_commits.pop(tp, None)
        for i, (tp, om) in enumerate(valid):
            results[tp] = err
            if not err and self.groups.get(group_id) is group:
                record_offset = first_offset + i
                current = group.offsets.get(tp)
                if current is None or current[1] < record_offset:
                    group.offsets[tp] = (om, record_offset)
        return results

    def _validate_offsets(self, offsets: dict[tuple[str, int], OffsetAndMetadata], retention_time_ms: int
                          ) -> tuple[dict[tuple[str, int], int], list[tuple[tuple[str, int], OffsetAndMetadata]]]:
        """Per-partition checks of an (Txn)OffsetCommit: ``(errors, valid offsets)``; unknown
        partitions get UNKNOWN_TOPIC_OR_PARTITION, metadata over ``offset.metadata.max.bytes``
        OFFSET_METADATA_TOO_LARGE. Valid ones get their commit (and expire) timestamps in ms."""
        results: dict[tuple[str, int], int] = {}
        valid: list[tuple[tuple[str, int], OffsetAndMetadata]] = []
        now = now_ms()
        for tp, om in offsets.items():
            info = self.host.topic(tp[0])
            if info is None or not 0 <= tp[1] < info.num_partitions:
                results[tp] = E.UNKNOWN_TOPIC_OR_PARTITION
            elif om.metadata is not None and len(om.metadata.encode()) > self.config.offset_metadata_max_bytes:
                results[tp] = E.OFFSET_METADATA_TOO_LARGE
            else:
                if om.commit_timestamp_ms < 0:
                    om.commit_timestamp_ms = now
                if retention_time_ms >= 0:
                    om.expire_timestamp_ms = om.commit_timestamp_ms + retention_time_ms
                om.metadata = om.metadata or ""
                valid.append((tp, om))
        return results, valid

    # ================================================================== TxnOffsetCommit
    async def commit_txn_offsets(self, transactional_id: str, group_id: str, producer_id: int, producer_epoch: int,
                                 generation: int, member_id: str, group_instance_id: str | None,
                                 offsets: dict[tuple[str, int], OffsetAndMetadata]) -> dict[tuple[str, int], int]:
        """TxnOffsetCommit v0-4 (KIP-98, KIP-447; Kafka ``handleTxnCommitOffsets``).

        The offsets are written to the group's ``__consumer_offsets`` partition as a
        transactional batch of ``producer_id``/``producer_epoch`` and stay pending until the
        transaction's COMMIT marker lands there (:meth:`complete_txn`); an ABORT drops them.
        With a generation or member id (v3+) the member is checked as for OffsetCommit.
        Returns an error per partition.
        """
        def all_(code: int) -> dict:
            return {tp: code for tp in offsets}

        err = self.coordinator_error(group_id)
        if err:
            return all_(err)
        err = await self.host.verify_transaction(transactional_id, producer_id, producer_epoch, OFFSETS_TOPIC,
                                                 self.partition_for(group_id))
        if err:
            return all_(err)
        group = self.groups.get(group_id)
        if group is None:
            if len(self.groups) >= limits.MAX_GROUPS:
                return all_(E.COORDINATOR_NOT_AVAILABLE)
            group = self.groups[group_id] = GroupMetadata(group_id)
        if group.is_(GroupState.DEAD):
            return all_(E.COORDINATOR_NOT_AVAILABLE)
        if member_id or generation >= 0 or group_instance_id is not None:
            err = self._validate_member(group, member_id, group_instance_id)
            if err:
                return all_(err)
            if generation != group.generation:
                return all_(E.ILLEGAL_GENERATION)
        results, valid = self._validate_offsets(offsets, -1)
        if not valid:
            return results
        p = self.host.partition(OFFSETS_TOPIC, self.partition_for(group_id))
        if p is None:
            return all_(E.NOT_COORDINATOR)
        # The coordinator is the producer of this batch: continue the producer's sequence.
        entry = p.log.producer_state.entry(producer_id)
        seq = entry.last_seq + 1 if entry is not None and entry.epoch == producer_epoch else 0
        records = [(encode_offset_key(group_id, t, i), encode_offset_value(om)) for (t, i), om in valid]
        err, first_offset = await self._append(group_id, records, producer_id=producer_id,
                                               producer_epoch=producer_epoch, base_sequence=seq,
                                               is_transactional=True)
        if err == E.INVALID_PRODUCER_EPOCH:
            err = E.PRODUCER_FENCED
        for i, (tp, om) in enumerate(valid):
            results[tp] = err
            if not err and self.groups.get(group_id) is group:
                group.pending_txn_offsets.setdefault(producer_id, {})[tp] = (om, first_offset + i)
        return results

    def complete_txn(self, index: int, producer_id: int, commit: bool) -> None:
        """A COMMIT/ABORT marker of ``producer_id`` is committed in offsets partition ``index``:
        its pending TxnOffsetCommits become the groups' offsets, or are dropped (Kafka
        ``scheduleHandleTxnCompletion``)."""
        for group in self.groups.values():
            if self.partition_for(group.group_id) != index:
                continue
            pending = group.pending_txn_offsets.pop(producer_id, None)
            if pending and commit:
                _merge_txn_offsets(group.offsets, pending)

    def _has_pending_txn_offset(self, group: GroupMetadata, tp: tuple[str, int]) -> bool:
        return any(tp in per_pid for per_pid in group.pending_txn_offsets.values())

    # ================================================================== OffsetFetch
    def fetch_offsets(self, group_id: str, partitions: list[tuple[str, int]] | None, require_stable: bool
                      ) -> tuple[int, list[tuple[tuple[str, int], OffsetAndMetadata | None, int]]]:
        """OffsetFetch (Kafka ``handleFetchOffsets``): (group error, [(tp, offset or None, error)]).

        ``partitions`` None means every partition the group has an offset for. With
        ``require_stable`` (KIP-447) a partition with a commit in flight answers
        UNSTABLE_OFFSET_COMMIT so the client retries.
        """
        err = self.coordinator_error(group_id, require_id=False)
        if err:
            return err, []
        group = self.groups.get(group_id)
        if partitions is None:
            partitions = sorted(group.offsets) if group is not None else []
        out = []
        for tp in partitions:
            if group is None:
                out.append((tp, None, E.NONE))
                continue
            if require_stable and (tp in group.pending_commits or self._has_pending_txn_offset(group, tp)):
                out.append((tp, None, E.UNSTABLE_OFFSET_COMMIT))
                continue
            entry = group.offsets.get(tp)
            out.append((tp, entry[0] if entry else None, E.NONE))
        return E.NONE, out

    # ================================================================== admin
    def list_groups(self, states: set[str] | None = None) -> list[GroupMetadata]:
        """Groups of this coordinator (ListGroups), optionally only those in ``states`` (lower case)."""
        return [g for g in self.groups.values() if not g.is_(GroupState.DEAD)
                and (not states or g.state.value.lower() in states)]

    def describe_group(self, group_id: str) -> tuple[int, GroupMetadata | None]:
        err = self.coordinator_error(group_id, require_id=False)
        if err:
            return err, None
        return E.NONE, self.groups.get(group_id)

    async def delete_groups(self, group_ids: list[str]) -> dict[str, int]:
        """DeleteGroups (KIP-229): only groups without members; tombstones for group and offsets."""
        out: dict[str, int] = {}
        tasks = []
        for group_id in group_ids:
            err = self.coordinator_error(group_id)
            group = self.groups.get(group_id)
            if err:
                out[group_id] = err
            elif group is None or group.is_(GroupState.DEAD):
                out[group_id] = E.GROUP_ID_NOT_FOUND
            elif not group.is_(GroupState.EMPTY):
                out[group_id] = E.NON_EMPTY_GROUP
            else:
                tasks.append((group_id, self._remove_group(group)))
        for group_id, coro in tasks:
            out[group_id] = await coro
        return out

    def _remove_group(self, group: GroupMetadata):
        """Mark ``group`` Dead, forget it, and return a coroutine writing its tombstones."""
        group.transition_to(GroupState.DEAD)
        self._cancel_join_timer(group)
        if self.groups.get(group.group_id) is group:
            del self.groups[group.group_id]
        records = [(encode_offset_key(group.group_id, t, p), None) for (t, p) in sorted(group.offsets)]
        records.append((encode_group_key(group.group_id), None))
        log.info("group %s removed (%d offset(s))", group.group_id, len(group.offsets))

        async def write() -> int:
            err, _ = await self._append(group.group_id, records)
            return err

        return write()

    async def delete_offsets(self, group_id: str, partitions: list[tuple[str, int]]
                             ) -> tuple[int, dict[tuple[str, int], int]]:
        """OffsetDelete (KIP-496): (group error, per-partition errors)."""
        err = self.coordinator_error(group_id)
        if err:
            return err, {}
        group = self.groups.get(group_id)
        if group is None or group.is_(GroupState.DEAD):
            return E.GROUP_ID_NOT_FOUND, {}
        results: dict[tuple[str, int], int] = {}
        to_delete = []
        if group.is_(GroupState.EMPTY):
            to_delete = list(partitions)
        elif group.protocol_type == "consumer":
            subscribed = group.subscribed_topics()
            for tp in partitions:
                if subscribed is None or tp[0] in subscribed:
                    results[tp] = E.GROUP_SUBSCRIBED_TO_TOPIC
                else:
                    to_delete.append(tp)
        else:
            return E.NON_EMPTY_GROUP, {}
        present = [tp for tp in to_delete if tp in group.offsets]
        err = E.NONE
        if present:
            err, _ = await self._append(group_id, [(encode_offset_key(group_id, t, p), None) for t, p in present])
            if not err:
                for tp in present:
                    group.offsets.pop(tp, None)
        for tp in to_delete:
            results[tp] = err
        return E.NONE, results

    # ================================================================== expiry
    async def _expiry_loop(self) -> None:
        interval_s = max(0.05, self.config.offsets_retention_check_interval_ms / 1000)
        while True:
            await asyncio.sleep(interval_s)
            try:
                await self.expire_offsets()
            except Exception:  # keep serving; the next round retries
                log.exception("offset expiration failed")

    def expired_offsets(self, group: GroupMetadata, now: int) -> list[tuple[str, int]]:
        """KIP-211: which offsets of ``group`` have expired at ``now`` (Kafka ``removeExpiredOffsets``)."""
        retention_ms = self.config.offsets_retention_minutes * 60_000
        subscribed: set[str] = set()
        if group.protocol_type is not None and group.is_(GroupState.EMPTY):
            base = lambda om: group.state_timestamp_ms  # noqa: E731 - empty since then
        elif group.protocol_type == "consumer" and group.is_(GroupState.STABLE) and \
                group.subscribed_topics() is not None:
            subscribed = group.subscribed_topics()
            base = lambda om: om.commit_timestamp_ms  # noqa: E731
        elif group.protocol_type is None:
            base = lambda om: om.commit_timestamp_ms  # noqa: E731 - simple (assign-mode) group
        else:
            return []
        out = []
        for tp, (om, _) in group.offsets.items():
            if tp[0] in subscribed or tp in group.pending_commits:
                continue
            if om.expire_timestamp_ms is not None:
                if now >= om.expire_timestamp_ms:
                    out.append(tp)
            elif now - base(om) >= retention_ms:
                out.append(tp)
        return out

    async def expire_offsets(self, now: int | None = None) -> int:
        """One expiry round; returns how many offsets were removed. Empty groups without
        offsets left become Dead and are removed (tombstoned)."""
        now = now_ms() if now is None else now
        removed = 0
        for group in list(self.groups.values()):
            if group.is_(GroupState.DEAD):
                continue
            expired = self.expired_offsets(group, now)
            if expired:
                err, _ = await self._append(group.group_id,
                                            [(encode_offset_key(group.group_id, t, p), None) for t, p in expired])
                if err:
                    continue
                for tp in expired:
                    group.offsets.pop(tp, None)
                removed += len(expired)
                log.info("group %s: %d offset(s) expired", group.group_id, len(expired))
            if group.is_(GroupState.EMPTY) and not group.offsets and not group.pending_commits \
                    and not group.pending_txn_offsets \
                    and not group.pending_members and self.groups.get(group.group_id) is group:
                await self._remove_group(group)
        return removed
