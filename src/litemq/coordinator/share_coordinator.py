"""Share groups (KIP-932): the group side (ShareGroupHeartbeat, ShareGroupDescribe, session
timers) and the share-partition leader side (ShareFetch, ShareAcknowledge, share sessions,
record locks, durable share state in ``__share_group_state``).

:class:`ShareCoordinator` is created by the broker next to the
:class:`~litemq.coordinator.coordinator.GroupCoordinator`, whose ``__consumer_offsets``
partitions decide which broker coordinates a share group (FindCoordinator is the same for both
group types; a group id names one group of one type).

Share-partition leader: the leader of a topic partition serves every share group's records of
it. Per (group, topic, partition) it keeps a :class:`~litemq.coordinator.share_partition.SharePartition`,
initialised from the group's stored state (or, for a new share-partition, at the log start or
the high watermark: ``share.auto.offset.reset``, ``latest`` by default), and re-initialised when
the partition's leader epoch changes (a failover in a cluster), so a new leader carries on from
the durable state.

Durability (Kafka's ``Persister``: ReadShareGroupState / WriteShareGroupState): every change of
SPSO or of the done ranges is written as a full snapshot to the ``__share_group_state``
partition of its key (``abs(hash("group:topicId:partition")) % partitions``, Kafka's
``SharePartitionKey``) and acknowledgements are answered only once that write is committed
(fsynced; in a cluster, Raft-committed). The leader of that state partition keeps the latest
snapshot of each key in memory (replayed from the partition when first needed); a
share-partition leader that does not lead it reads and writes through the broker RPC op
``share_state`` (:meth:`ShareCoordinator.serve_state_rpc`). Acquisitions are not written (as
in Kafka): after a crash, records that were acquired but not acknowledged are delivered again.

Sources: KIP-932; Kafka 4.1 ``SharePartition``, ``SharePartitionManager``,
``ShareSessionCache``, ``GroupMetadataManager.shareGroupHeartbeat``.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import time
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from litemq import limits
from litemq.coordinator.consumer_group import MemberState
from litemq.coordinator.consumer_group_manager import _metadata_hash
from litemq.coordinator.group_configs import by_duration_ms
from litemq.coordinator.internal_topic import append_committed, replay_latest
from litemq.coordinator.records import FormatError, partition_for
from litemq.coordinator.share_group import ShareGroup, ShareGroupMember
from litemq.coordinator.share_group_records import (SG_CURRENT_ASSIGNMENT, SG_MEMBER_METADATA, SG_METADATA,
                                                    SG_TARGET_MEMBER, SG_TARGET_METADATA, StoredShareMember,
                                                    decode_share_current_value, decode_share_member_value,
                                                    decode_share_metadata_value, decode_target_member_value,
                                                    decode_target_metadata_value, encode_cg_key,
                                                    encode_share_current_value, encode_share_member_value,
                                                    encode_share_metadata_value, encode_target_member_value,
                                                    encode_target_metadata_value)
from litemq.coordinator.share_partition import BatchInfo, SharePartition
from litemq.coordinator.share_records import (SHARE_STATE_TOPIC, ShareSnapshot, ShareStateKey, decode_key,
                                              decode_value, encode_key, encode_value)
from litemq.protocol.errors import ErrorCode as E
from litemq.protocol.errors import KafkaError
from litemq.protocol.records import build_batch, iter_batches
from litemq.storage.txn_index import AbortedTxnTracker

if TYPE_CHECKING:
    from litemq.coordinator.host import CoordinatorHost

log = logging.getLogger(__name__)

SHARE_STATE_SEGMENT_BYTES = 100 * 1024 * 1024
"""Kafka's ``share.coordinator.state.topic.segment.bytes`` default."""
SESSION_EPOCH_INITIAL, SESSION_EPOCH_FINAL = 0, -1
MAX_SESSION_EPOCH = 2**31 - 1
MEMBER_STATE_STABLE = int(MemberState.STABLE)
"""A share-group member's ``State`` in its CurrentMemberAssignment record (no revocation step)."""


@dataclass(slots=True)
class ShareHeartbeatResult:
    """A ShareGroupHeartbeat answer: an error, or the member's id, epoch and (when it changed or
    the member joined) its assignment, topic name -> partitions."""

    error: int = E.NONE
    error_message: str | None = None
    member_id: str | None = None
    member_epoch: int = -1
    heartbeat_interval_ms: int = 0
    assignment: dict[str, frozenset[int]] | None = None


@dataclass(slots=True)
class ShareSession:
    """A member's share session on this broker (KIP-932): the partitions it fetches and the
    epoch its next request must carry."""

    group_id: str
    member_id: str
    next_epoch: int = 1
    partitions: set[tuple[str, int]] = field(default_factory=set)
    owner: Any = None
    """The client connection that opened it (the session ends when it closes)."""


@dataclass(slots=True)
class PartitionFetch:
    """The answer for one partition of a ShareFetch: records (bytes of whole batches), acquired
    ranges ``(first, last, delivery count)``, a fetch error and an acknowledgement error."""

    error: int = E.NONE
    ack_error: int | None = None
    records: bytes = b""
    acquired: list[tuple[int, int, int]] = field(default_factory=list)
    leader_epoch: int = -1


@dataclass(frozen=True, slots=True)
class ShareGroupSettings:
    """The group configs a share-partition leader applies to one share group (its overrides,
    else the broker's settings): ``share.record.lock.duration.ms``, ``share.auto.offset.reset``,
    ``share.isolation.level``."""

    record_lock_duration_ms: int
    auto_offset_reset: str
    isolation_level: str


GROUP_SETTINGS_CACHE_MS = 5000
"""How long a share-partition leader that does not coordinate a group reuses the group configs
it asked the coordinator for (LiteMQ's; Kafka's brokers all read them from the metadata log)."""


@dataclass(slots=True)
class _Entry:
    """A share-partition served here, with the leader epoch it was loaded in."""

    key: ShareStateKey
    sp: SharePartition
    leader_epoch: int
    snapshot_epoch: int = 0
    created_ms: int = 0


class ShareCoordinator:
    """Share groups this broker coordinates and share-partitions it leads (module docstring).
    ``groups`` is the :class:`~litemq.coordinator.coordinator.GroupCoordinator` (which
    broker coordinates a group id; the other group types by id). Event-loop thread only."""

    def __init__(self, host: "CoordinatorHost", groups: Any) -> None:
        """Raises ValueError for a bad ``share.auto.offset.reset`` / ``share.isolation.level``
        (the broker refuses to start)."""
        self.host = host
        self.config = host.config
        reset, ms = self.config.share_auto_offset_reset, by_duration_ms(self.config.share_auto_offset_reset)
        if reset not in ("latest", "earliest") and (ms is None or ms < 0):
            raise ValueError(f"share.auto.offset.reset: {reset!r} is not one of latest, earliest, "
                             "by_duration:<PnDTnHnMn.nS>")
        if self.config.share_isolation_level not in ("read_uncommitted", "read_committed"):
            raise ValueError(f"share.isolation.level: {self.config.share_isolation_level!r} is not one of "
                             "read_uncommitted, read_committed")
        self.groups = groups
        self.share_groups: dict[str, ShareGroup] = {}
        self.sessions: dict[tuple[str, str], ShareSession] = {}
        self.entries: dict[tuple[str, str, int], _Entry] = {}
        self._loading: dict[tuple[str, str, int], asyncio.Future] = {}
        self._state_cache: dict[int, tuple[int, dict[ShareStateKey, ShareSnapshot]]] = {}
        self._changed: asyncio.Future | None = None
        self._tasks: set[asyncio.Task] = set()  # background appends, kept referenced until done
        self._remote_settings: dict[str, tuple[float, dict[str, str]]] = {}
        """Group configs of groups coordinated elsewhere: group -> (asked at, overrides)."""
        groups.set_share_loader(self)
        self.redeliveries = 0
        """Records acquired again after their first delivery (a counter for ``/metrics``)."""

    # ================================================================== group side
    def _fail(self, code: int, message: str | None = None) -> ShareHeartbeatResult:
        return ShareHeartbeatResult(error=code, error_message=message)

    async def heartbeat(self, group_id: str, member_id: str, member_epoch: int, rack_id: str | None,
                        subscribed_topic_names: list[str] | None, client_id: str, client_host: str
                        ) -> ShareHeartbeatResult:
        """ShareGroupHeartbeat v1 (see :mod:`litemq.coordinator.share_group` for the rules).
        Every change (a member, the group epoch, the target assignment, a member's current
        assignment) is written to the group's ``__consumer_offsets`` partition, in Kafka 4.1's
        share-group records, before the answer (:mod:`litemq.coordinator.share_group_records`).

        Errors: INVALID_REQUEST (empty group or member id, epoch below -1, a join without
        topics), NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS / COORDINATOR_NOT_AVAILABLE,
        GROUP_ID_NOT_FOUND (the id is a classic or consumer group), UNKNOWN_MEMBER_ID,
        FENCED_MEMBER_EPOCH, GROUP_MAX_SIZE_REACHED; the append's error when the records could
        not be written."""
        if not group_id:
            return self._fail(E.INVALID_REQUEST, "GroupId can't be empty.")
        if not member_id:
            return self._fail(E.INVALID_REQUEST, "MemberId can't be empty.")
        if member_epoch < -1:
            return self._fail(E.INVALID_REQUEST, f"MemberEpoch is {member_epoch}, but must be greater than or equal to -1.")
        if member_epoch == 0 and not subscribed_topic_names:
            return self._fail(E.INVALID_REQUEST, "SubscribedTopicNames must be set in first request.")
        err = await self.groups.current_coordinator_error(group_id)
        if err:
            return self._fail(err)
        other = self.groups.groups.get(group_id)
        if other is not None and not getattr(other, "dead", False) and group_id not in self.share_groups:
            return self._fail(E.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a share group.")
        group = self.share_groups.get(group_id)
        if member_epoch == -1:
            if group is not None and member_id in group.members:
                err = await self.groups.append_records(group_id, self._remove_member(group, group.members[member_id],
                                                                                     "left"))
                if err:
                    return self._fail(err)
            return ShareHeartbeatResult(member_id=member_id, member_epoch=-1)
        if group is None:
            if member_epoch != 0:
                return self._fail(E.UNKNOWN_MEMBER_ID, f"Group {group_id} not found.")
            group = self.share_groups[group_id] = ShareGroup(group_id)
        member = group.members.get(member_id)
        joined = False
        if member is None:
            if member_epoch != 0:
                return self._fail(E.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {group_id}.")
            if len(group.members) >= self.config.group_share_max_size:
                return self._fail(E.GROUP_MAX_SIZE_REACHED, f"The share group has reached its maximum capacity of "
                                                            f"{self.config.group_share_max_size} members.")
            member = group.members[member_id] = ShareGroupMember(member_id)
            group.group_epoch += 1
            joined = True
        elif member_epoch not in (0, member.member_epoch, member.previous_member_epoch):
            return self._fail(E.FENCED_MEMBER_EPOCH, f"The share group member has a smaller or larger member "
                                                     f"epoch ({member_epoch}) than the one known by the group "
                                                     f"coordinator ({member.member_epoch}).")
        records: list[tuple[bytes, bytes | None]] = []
        epoch_before = group.group_epoch - (1 if joined else 0)
        stored = self._member_record(group, member)
        member.client_id, member.client_host = client_id, client_host
        if rack_id is not None:
            member.rack_id = rack_id
        if subscribed_topic_names is not None:
            names = tuple(sorted(set(subscribed_topic_names)))
            if names != member.subscribed_topic_names:
                member.subscribed_topic_names = names
                if not joined:
                    group.group_epoch += 1
        if joined or self._member_record(group, member) != stored:
            records.append(self._member_record(group, member))
        topics = {}
        for name in group.subscribed_topics():
            info = self.host.topic(name)
            if info is not None and not info.internal:
                topics[name] = info.num_partitions
        group.refresh_topics(topics)
        if group.group_epoch != epoch_before:
            group.metadata_hash = _metadata_hash(group.topics_seen)
            records.append(self._epoch_record(group))
        old_target, old_assignment_epoch = dict(group.target), group.assignment_epoch
        group.compute_target()
        if group.assignment_epoch != old_assignment_epoch:
            records += [self._target_record(group, mid) for mid, a in group.target.items() if old_target.get(mid) != a]
            records.append((encode_cg_key(SG_TARGET_METADATA, group.group_id),
                            encode_target_metadata_value(group.assignment_epoch)))
        old_epoch = member.member_epoch
        changed = group.reconcile(member)
        if joined or changed or member.member_epoch != old_epoch:
            records.append(self._current_record(group, member))
        self._schedule_session_timeout(group, member)
        if records:
            err = await self.groups.append_records(group_id, records)
            if err:
                return self._fail(err)
        return ShareHeartbeatResult(member_id=member_id, member_epoch=member.member_epoch,
                                    heartbeat_interval_ms=self.groups.group_config_int(
                                        group_id, "share.heartbeat.interval.ms"),
                                    assignment=dict(member.assigned) if (changed or joined or member_epoch == 0)
                                    else None)

    # ------------------------------------------------------------------ records (share_group_records)
    def _member_record(self, group: ShareGroup, m: ShareGroupMember) -> tuple[bytes, bytes]:
        return (encode_cg_key(SG_MEMBER_METADATA, group.group_id, m.member_id), encode_share_member_value(
            StoredShareMember(m.rack_id, m.client_id, m.client_host, list(m.subscribed_topic_names))))

    def _epoch_record(self, group: ShareGroup) -> tuple[bytes, bytes]:
        return (encode_cg_key(SG_METADATA, group.group_id),
                encode_share_metadata_value(group.group_epoch, group.metadata_hash))

    def _target_record(self, group: ShareGroup, member_id: str) -> tuple[bytes, bytes]:
        return (encode_cg_key(SG_TARGET_MEMBER, group.group_id, member_id),
                encode_target_member_value(self.groups._topic_ids(group.target.get(member_id, {}))))

    def _current_record(self, group: ShareGroup, m: ShareGroupMember) -> tuple[bytes, bytes]:
        return (encode_cg_key(SG_CURRENT_ASSIGNMENT, group.group_id, m.member_id), encode_share_current_value(
            m.member_epoch, m.previous_member_epoch, MEMBER_STATE_STABLE, self.groups._topic_ids(m.assigned)))

    def _spawn_append(self, group_id: str, records: list[tuple[bytes, bytes | None]]) -> None:
        """Write records outside a request (a session timeout); a failure is logged (the
        member is gone from memory either way and a reloaded group times it out again)."""
        async def write() -> None:
            err = await self.groups.append_records(group_id, records)
            if err:
                log.warning("share group %s: records not written (%s)", group_id, E(err).name)

        task = self.host.loop.create_task(write())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # ------------------------------------------------------------------ loading (ShareGroupLoader)
    def load_share_groups(self, index: int, records: list[tuple[Any, bytes | None]]) -> None:
        """Rebuild the share groups of ``__consumer_offsets`` partition ``index`` from their
        records (Kafka ``GroupMetadataManager.replay`` of types 10..14); every member gets a
        fresh session timeout, so members that do not come back are removed."""
        self.unload_share_groups(index)
        state: dict[str, dict] = {}
        for key, value in records:
            try:
                self._replay(state, key, value)
            except FormatError as exc:
                log.warning("share group %s: skipping an undecodable record (type %d): %s", key.group, key.kind, exc)
        for group_id, g in state.items():
            if g["epoch"] is None:
                continue
            group = ShareGroup(group_id, group_epoch=g["epoch"], assignment_epoch=g["assignment_epoch"])
            group.metadata_hash = g["hash"]
            for mid, sm in g["members"].items():
                m = ShareGroupMember(mid, rack_id=sm.rack_id, client_id=sm.client_id, client_host=sm.client_host,
                                     subscribed_topic_names=tuple(sorted(sm.subscribed_topic_names)))
                cur = g["current"].get(mid)
                if cur is not None:
                    m.member_epoch, m.previous_member_epoch = cur[0], cur[1]
                    m.assigned = self.groups._topic_names(cur[3])
                group.members[mid] = m
            group.target = {mid: self.groups._topic_names(t) for mid, t in g["targets"].items()
                            if mid in group.members}
            topics = {}
            for name in group.subscribed_topics():
                info = self.host.topic(name)
                if info is not None and not info.internal:
                    topics[name] = info.num_partitions
            # topics that changed while no coordinator watched bump the epoch at the next heartbeat
            group.topics_seen = topics if _metadata_hash(topics) == group.metadata_hash else {}
            self.share_groups[group_id] = group
            for m in group.members.values():
                self._schedule_session_timeout(group, m)
        if state:
            log.info("loaded %d share group(s) from __consumer_offsets-%d", sum(
                1 for g in state.values() if g["epoch"] is not None), index)

    def _replay(self, state: dict, key: Any, value: bytes | None) -> None:
        fresh = {"epoch": None, "hash": 0, "assignment_epoch": 0, "members": {}, "targets": {}, "current": {}}
        g = state.setdefault(key.group, dict(fresh))
        if key.kind == SG_METADATA:
            if value is None:
                state[key.group] = dict(fresh, members={}, targets={}, current={})
            else:
                g["epoch"], g["hash"] = decode_share_metadata_value(value)
        elif key.kind == SG_TARGET_METADATA:
            g["assignment_epoch"] = decode_target_metadata_value(value) if value is not None else 0
        elif key.kind in (SG_MEMBER_METADATA, SG_TARGET_MEMBER, SG_CURRENT_ASSIGNMENT):
            slot = {SG_MEMBER_METADATA: "members", SG_TARGET_MEMBER: "targets", SG_CURRENT_ASSIGNMENT: "current"}
            decode = {SG_MEMBER_METADATA: decode_share_member_value, SG_TARGET_MEMBER: decode_target_member_value,
                      SG_CURRENT_ASSIGNMENT: decode_share_current_value}
            if value is None:
                g[slot[key.kind]].pop(key.member, None)
            else:
                g[slot[key.kind]][key.member] = decode[key.kind](value)

    def unload_share_groups(self, index: int) -> None:
        """Forget the share groups of ``__consumer_offsets`` partition ``index`` (another broker
        coordinates them now, or they are about to be reloaded)."""
        for group_id in [g for g in self.share_groups if self.groups.partition_for(g) == index]:
            group = self.share_groups.pop(group_id)
            for m in group.members.values():
                if m.timer is not None:
                    m.timer.cancel()
                    m.timer = None

    def _schedule_session_timeout(self, group: ShareGroup, member: ShareGroupMember) -> None:
        if member.timer is not None:
            member.timer.cancel()
        timeout_ms = self.groups.group_config_int(group.group_id, "share.session.timeout.ms")
        member.timer = self.host.loop.call_later(timeout_ms / 1000, self._on_session_timeout, group, member)

    def _on_session_timeout(self, group: ShareGroup, member: ShareGroupMember) -> None:
        member.timer = None
        if group.members.get(member.member_id) is not member or self.share_groups.get(group.group_id) is not group:
            return
        if self.groups.expiry_deferred(group.group_id):  # a deposed coordinator must not remove it
            member.timer = self.host.loop.call_later(limits.COORDINATOR_LEASE_RECHECK_MS / 1000,
                                                     self._on_session_timeout, group, member)
            return
        self._spawn_append(group.group_id, self._remove_member(group, member, "session timeout"))

    def _remove_member(self, group: ShareGroup, member: ShareGroupMember, why: str) -> list[tuple[bytes, None]]:
        """Remove ``member`` (its records here are released); the records to write: the
        member's tombstones and the new group epoch."""
        if member.timer is not None:
            member.timer.cancel()
            member.timer = None
        del group.members[member.member_id]
        group.target.pop(member.member_id, None)
        group.group_epoch += 1
        log.info("share group %s: member %s removed (%s)", group.group_id, member.member_id, why)
        # Records it holds on partitions led here go back to the others now (elsewhere: when
        # its share session there ends, or at their lock deadline).
        for (gid, _t, _p), entry in self.entries.items():
            if gid == group.group_id and entry.sp.release_member(member.member_id):
                self._notify()
        self.sessions.pop((group.group_id, member.member_id), None)
        gid, mid = group.group_id, member.member_id
        return [(encode_cg_key(SG_CURRENT_ASSIGNMENT, gid, mid), None),
                (encode_cg_key(SG_TARGET_MEMBER, gid, mid), None),
                (encode_cg_key(SG_MEMBER_METADATA, gid, mid), None), self._epoch_record(group)]

    def describe(self, group_id: str) -> tuple[int, str | None, ShareGroup | None]:
        """ShareGroupDescribe of one group: (error, message, group)."""
        err = self.groups.coordinator_error(group_id)
        if err:
            return err, None, None
        group = self.share_groups.get(group_id)
        if group is None or group.dead:
            if group_id in self.groups.groups:
                return E.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a share group.", None
            return E.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.", None
        return E.NONE, None, group

    def list_groups(self, states: set[str] | None = None) -> list[ShareGroup]:
        """The live share groups this broker coordinates (ListGroups, type ``share``)."""
        return [g for g in self.share_groups.values() if not g.dead and self.groups.coordinator_error(g.group_id) == 0
                and (not states or g.state.lower() in states)]

    async def delete_group(self, group_id: str) -> int:
        """DeleteGroups of a share group: NON_EMPTY_GROUP while it has members; else the group
        is forgotten and the stored state of every one of its share-partitions is tombstoned
        (Kafka 4.1 ``GroupCoordinatorService.deleteGroups``: DeleteShareGroupState through the
        ``Persister`` for each share-partition the group initialised). The states are found in
        the state partitions themselves (:meth:`_group_states`), not only those this broker has
        loaded: after a restart nothing is loaded until a share-partition is read. An error
        finding them (COORDINATOR_LOAD_IN_PROGRESS, ...) is answered before anything is deleted."""
        err = self.groups.coordinator_error(group_id)
        if err:
            return err
        group = self.share_groups.get(group_id)
        if group is None or group.dead:
            return E.GROUP_ID_NOT_FOUND
        if group.members:
            return E.NON_EMPTY_GROUP
        err, stored = await self._group_states(group_id)
        if err:
            return err
        err = await self.groups.append_records(group_id, [(encode_cg_key(SG_TARGET_METADATA, group_id), None),
                                                          (encode_cg_key(SG_METADATA, group_id), None)])
        if err:
            return err
        group.dead = True
        self.share_groups.pop(group_id, None)
        keys = set(stored) | {e.key for k, e in self.entries.items() if k[0] == group_id}
        for k in [k for k in self.entries if k[0] == group_id]:
            del self.entries[k]
        for key in keys:
            code = await self._write_state(key, None)
            if code:
                return code
        return E.NONE

    async def known_topics(self, group_id: str) -> tuple[int, set[str]]:
        """(error, topics the share group subscribes to or has stored share-partition state
        for), the state read from the state partitions (:meth:`_group_states`), so the answer
        does not depend on what this broker happened to load since it started."""
        names = set()
        g = self.share_groups.get(group_id)
        if g is not None:
            names |= g.subscribed_topics()
        names |= {t for (gid, t, _), _e in self.entries.items() if gid == group_id}
        err, stored = await self._group_states(group_id)
        by_id = {info.topic_id: name for name, info in self.host.topics().items()}
        names |= {by_id[k.topic_id] for k in stored if k.topic_id in by_id}
        return err, names

    async def describe_offsets(self, group_id: str, topics: dict[str, list[int]] | None
                               ) -> tuple[int, dict[str, dict[int, tuple[int, int, int]]]]:
        """DescribeShareGroupOffsets of one group: (group error, topic -> partition ->
        (SPSO or -1 when the share-partition has no state, leader epoch, error))."""
        err = self.groups.coordinator_error(group_id)
        if err:
            return err, {}
        if group_id in self.groups.groups and group_id not in self.share_groups:
            return E.GROUP_ID_NOT_FOUND, {}
        if topics is None:
            err, names = await self.known_topics(group_id)
            if err:
                return err, {}
            topics = {}
            for name in sorted(names):
                info = self.host.topic(name)
                if info is not None:
                    topics[name] = list(range(info.num_partitions))
        out: dict[str, dict[int, tuple[int, int, int]]] = {}
        for name, parts in topics.items():
            info = self.host.topic(name)
            for i in parts:
                if info is None or not 0 <= i < info.num_partitions:
                    out.setdefault(name, {})[i] = (-1, -1, E.UNKNOWN_TOPIC_OR_PARTITION)
                    continue
                code, snap = await self._read_state(ShareStateKey(group_id, info.topic_id, i))
                out.setdefault(name, {})[i] = (-1, -1, code) if code else \
                    (-1, -1, E.NONE) if snap is None else (snap.start_offset, snap.leader_epoch, E.NONE)
        return E.NONE, out

    async def alter_offsets(self, group_id: str, topics: dict[str, list[tuple[int, int]]]
                            ) -> tuple[int, dict[str, dict[int, int]]]:
        """AlterShareGroupOffsets (kafka-share-groups.sh --reset-offsets): only while the group
        has no members (NON_EMPTY_GROUP); each share-partition restarts at the given offset
        with nothing in flight (a new state epoch). Returns (group error, topic -> partition ->
        error)."""
        err = self.groups.coordinator_error(group_id)
        if err:
            return err, {}
        if group_id in self.groups.groups and group_id not in self.share_groups:
            return E.GROUP_ID_NOT_FOUND, {}
        g = self.share_groups.get(group_id)
        if g is not None and g.members:
            return E.NON_EMPTY_GROUP, {}
        if g is None:  # the group now exists (Empty), durably like any other
            g = self.share_groups[group_id] = ShareGroup(group_id)
            err = await self.groups.append_records(group_id, [self._epoch_record(g)])
            if err:
                del self.share_groups[group_id]
                return err, {}
        out: dict[str, dict[int, int]] = {}
        for name, parts in topics.items():
            info = self.host.topic(name)
            for i, offset in parts:
                if info is None or not 0 <= i < info.num_partitions:
                    out.setdefault(name, {})[i] = E.UNKNOWN_TOPIC_OR_PARTITION
                    continue
                if offset < 0:
                    out.setdefault(name, {})[i] = E.INVALID_REQUEST
                    continue
                key = ShareStateKey(group_id, info.topic_id, i)
                code, old = await self._read_state(key)
                if not code:
                    self.entries.pop((group_id, name, i), None)
                    code = await self._write_state(key, ShareSnapshot(
                        offset, (old.state_epoch + 1) if old else 0, -1, (old.snapshot_epoch + 1) if old else 0,
                        old.create_timestamp_ms if old else int(time.time() * 1000), int(time.time() * 1000), []))
                out.setdefault(name, {})[i] = code
        return E.NONE, out

    async def delete_offsets(self, group_id: str, topics: list[str]) -> tuple[int, dict[str, dict[int, int]]]:
        """DeleteShareGroupOffsets: forget the share-partition state of ``topics`` (tombstones);
        the group must exist (GROUP_ID_NOT_FOUND) and have no members (NON_EMPTY_GROUP). A later
        member starts those partitions afresh (``share.auto.offset.reset``). Returns (group
        error, topic -> partition -> error)."""
        err = self.groups.coordinator_error(group_id)
        if err:
            return err, {}
        g = self.group_of(group_id)
        if g is None:
            return E.GROUP_ID_NOT_FOUND, {}
        if g.members:
            return E.NON_EMPTY_GROUP, {}
        out: dict[str, dict[int, int]] = {}
        for name in topics:
            info = self.host.topic(name)
            if info is None:
                out[name] = {}
                continue
            for i in range(info.num_partitions):
                self.entries.pop((group_id, name, i), None)
                out.setdefault(name, {})[i] = await self._write_state(ShareStateKey(group_id, info.topic_id, i), None)
        return E.NONE, out

    def group_of(self, group_id: str) -> ShareGroup | None:
        g = self.share_groups.get(group_id)
        return None if g is None or g.dead else g

    # ================================================================== durable state
    def _state_partition(self, key: ShareStateKey) -> int:
        info = self.host.ensure_internal_topic(SHARE_STATE_TOPIC, self.config.share_coordinator_state_topic_num_partitions,
                                               self.config.share_coordinator_state_topic_replication_factor,
                                               SHARE_STATE_SEGMENT_BYTES)
        return partition_for(key.coordinator_key(), info.num_partitions)

    def state_partition_for(self, coordinator_key: str) -> int:
        """The ``__share_group_state`` partition of Kafka's share coordinator key
        ``group:topicId:partition`` (the topic id in Kafka's base64 form; FindCoordinator v6 key
        type SHARE).

        Raises:
            KafkaError: INVALID_REQUEST (not of that form: Kafka ``SharePartitionKey.validate``),
                or the state topic's creation error.
        """
        parts = coordinator_key.split(":")
        try:
            if len(parts) != 3 or not parts[0] or len(parts[1]) != 22:
                raise ValueError("not group:topicId:partition")
            topic_id = uuid.UUID(bytes=base64.b64decode(parts[1] + "==", altchars=b"-_", validate=True))
            partition = int(parts[2])
            if partition < 0:
                raise ValueError("negative partition")
        except ValueError:
            raise KafkaError(f"Share coordinator key {coordinator_key!r} is not of the form groupId:topicId:partition",
                             E.INVALID_REQUEST) from None
        return self._state_partition(ShareStateKey(parts[0], topic_id, partition))

    def _local_state(self, index: int) -> dict[ShareStateKey, ShareSnapshot] | None:
        """The latest snapshot of every key of state partition ``index`` when this broker leads
        it (replayed on first use and after a leader epoch change), else None.

        Raises:
            KafkaError(COORDINATOR_LOAD_IN_PROGRESS): this broker leads the partition but its
                high watermark does not yet cover every record of earlier leaders (a new Raft
                leader before its term's first entry commits): a replay then would miss the
                latest acknowledged snapshots, and the share-partition would hand out accepted
                records again."""
        p = self.host.partition(SHARE_STATE_TOPIC, index)
        if p is None or not p.is_leader:
            self._state_cache.pop(index, None)
            return None
        if not p.leader_ready:
            raise KafkaError(f"{SHARE_STATE_TOPIC}-{index}: the new leader is still committing its term",
                             E.COORDINATOR_LOAD_IN_PROGRESS)
        cached = self._state_cache.get(index)
        if cached is not None and cached[0] == p.leader_epoch:
            return cached[1]
        state = {k: v for k, v in replay_latest(p, decode_key, decode_value, FormatError).items() if v is not None}
        self._state_cache[index] = (p.leader_epoch, state)
        log.info("loaded %d share-partition state(s) from %s-%d", len(state), SHARE_STATE_TOPIC, index)
        return state

    async def _read_state(self, key: ShareStateKey) -> tuple[int, ShareSnapshot | None]:
        """ReadShareGroupState of one share-partition: (error, snapshot or None)."""
        try:
            index = self._state_partition(key)
        except KafkaError as exc:
            return exc.code, None
        try:
            state = self._local_state(index)
        except KafkaError as exc:
            return exc.code, None
        if state is not None:
            return E.NONE, state.get(key)
        leader = self.host.partition_leader(SHARE_STATE_TOPIC, index)
        if leader < 0 or leader == self.config.node_id or not self.host.clustered:
            return E.COORDINATOR_NOT_AVAILABLE, None
        try:
            res = await self.host.rpc(leader, {"op": "share_state", "action": "read", "partition": index,
                                               "key": encode_key(key).hex()}, self.config.request_timeout_ms / 1000)
        except (ConnectionError, asyncio.TimeoutError, OSError):
            return E.COORDINATOR_NOT_AVAILABLE, None
        err = int(res.get("error", E.UNKNOWN_SERVER_ERROR))
        value = res.get("value")
        return err, (decode_value(bytes.fromhex(value)) if not err and value else None)

    async def _group_states(self, group_id: str) -> tuple[int, dict[ShareStateKey, ShareSnapshot]]:
        """Every stored share-partition state of ``group_id``: (error, key -> snapshot), read from
        each ``__share_group_state`` partition, here when this broker leads it, else from its
        leader (broker RPC op ``share_state``, action ``group``, one request per leader). A key
        may be on any partition (its topic may have been deleted since), so all are read. The
        first error of a partition that cannot be read (COORDINATOR_LOAD_IN_PROGRESS,
        COORDINATOR_NOT_AVAILABLE) is returned with what was found: the client asks again.

        Kafka finds them in the group's ``ShareGroupStatePartitionMetadata`` record (the
        share-partitions it initialised, type 15), which LiteMQ does not write (its
        share-partition leaders initialise state themselves)."""
        info = self.host.topic(SHARE_STATE_TOPIC)
        if info is None:
            return E.NONE, {}  # never created: no share group has state yet
        out: dict[ShareStateKey, ShareSnapshot] = {}
        remote: dict[int, list[int]] = {}
        err = E.NONE
        for index in range(info.num_partitions):
            code, found = self._local_group_states(group_id, index)
            if code:
                err = err or code
                continue
            if found is not None:
                out.update(found)
                continue
            leader = self.host.partition_leader(SHARE_STATE_TOPIC, index)
            if leader < 0 or leader == self.config.node_id or not self.host.clustered:
                err = err or E.COORDINATOR_NOT_AVAILABLE
                continue
            remote.setdefault(leader, []).append(index)
        for leader, indexes in sorted(remote.items()):
            try:
                res = await self.host.rpc(leader, {"op": "share_state", "action": "group", "partitions": indexes,
                                                   "group": group_id}, self.config.request_timeout_ms / 1000)
            except (ConnectionError, asyncio.TimeoutError, OSError):
                err = err or E.COORDINATOR_NOT_AVAILABLE
                continue
            err = err or int(res.get("error", E.UNKNOWN_SERVER_ERROR))
            for k, v in res.get("states", []):
                out[decode_key(bytes.fromhex(k))] = decode_value(bytes.fromhex(v))
        return err, out

    async def _write_state(self, key: ShareStateKey, snapshot: ShareSnapshot | None) -> int:
        """WriteShareGroupState (a full snapshot; None: a tombstone), answered once committed."""
        try:
            index = self._state_partition(key)
        except KafkaError as exc:
            return exc.code
        try:
            state = self._local_state(index)
        except KafkaError as exc:
            return exc.code
        if state is not None:
            return await self._append_state(index, state, key, snapshot)
        leader = self.host.partition_leader(SHARE_STATE_TOPIC, index)
        if leader < 0 or leader == self.config.node_id or not self.host.clustered:
            return E.COORDINATOR_NOT_AVAILABLE
        try:
            res = await self.host.rpc(leader, {"op": "share_state", "action": "write", "partition": index,
                                               "key": encode_key(key).hex(),
                                               "value": None if snapshot is None else encode_value(snapshot).hex()},
                                      self.config.request_timeout_ms / 1000)
        except (ConnectionError, asyncio.TimeoutError, OSError):
            return E.COORDINATOR_NOT_AVAILABLE
        return int(res.get("error", E.UNKNOWN_SERVER_ERROR))

    async def _append_state(self, index: int, state: dict, key: ShareStateKey, snapshot: ShareSnapshot | None) -> int:
        p = self.host.partition(SHARE_STATE_TOPIC, index)
        value = None if snapshot is None else encode_value(snapshot)
        if snapshot is None:
            state.pop(key, None)
        else:
            state[key] = snapshot
        err, _ = await append_committed(p, build_batch([(encode_key(key), value)]),
                                        self.config.request_timeout_ms / 1000)
        return err

    async def serve_state_rpc(self, req: dict) -> dict:
        """The broker RPC op ``share_state`` (this broker leads the state partition): ``action``
        ``read`` -> ``{"error", "value"}`` (hex or None), ``write`` -> ``{"error"}``, ``group``
        (of ``partitions``) -> ``{"error", "states": [[key, value], ...]}`` (hex; every state
        of ``group`` in those partitions, the first error of one it cannot read)."""
        try:
            if req["action"] == "group":
                return self._serve_group_states(str(req["group"]), [int(i) for i in req["partitions"]])
            index = int(req["partition"])
            key = decode_key(bytes.fromhex(req["key"]))
            state = self._local_state(index)
            if state is None:
                return {"error": E.NOT_COORDINATOR}
            if req["action"] == "read":
                s = state.get(key)
                return {"error": E.NONE, "value": None if s is None else encode_value(s).hex()}
            value = req.get("value")
            snap = None if value is None else decode_value(bytes.fromhex(value))
            return {"error": await self._append_state(index, state, key, snap)}
        except KafkaError as exc:  # COORDINATOR_LOAD_IN_PROGRESS: asked again later
            return {"error": exc.code}
        except (KeyError, TypeError, ValueError, FormatError) as exc:
            return {"error": E.INVALID_REQUEST, "message": f"bad share_state request: {exc}"}

    def _local_group_states(self, group_id: str, index: int) -> tuple[int, dict[ShareStateKey, ShareSnapshot] | None]:
        """(error, the states of ``group_id`` in state partition ``index``) when this broker leads
        it; (NONE, None) when it does not; (COORDINATOR_LOAD_IN_PROGRESS, ...) when it cannot
        be read yet."""
        try:
            state = self._local_state(index)
        except KafkaError as exc:
            return exc.code, None
        if state is None:
            return E.NONE, None
        return E.NONE, {k: v for k, v in state.items() if k.group_id == group_id}

    def _serve_group_states(self, group_id: str, indexes: list[int]) -> dict:
        """The ``group`` action of :meth:`serve_state_rpc`."""
        err, states = E.NONE, []
        for index in indexes:
            code, found = self._local_group_states(group_id, index)
            if code or found is None:
                err = err or code or E.NOT_COORDINATOR
                continue
            states += [[encode_key(k).hex(), encode_value(v).hex()] for k, v in found.items()]
        return {"error": err, "states": states}

    async def _store(self, entry: _Entry) -> int:
        """Write ``entry``'s state if it changed."""
        if not entry.sp.dirty:
            return E.NONE
        start, state_epoch, batches = entry.sp.snapshot()
        entry.snapshot_epoch += 1
        return await self._write_state(entry.key, ShareSnapshot(
            start, state_epoch, entry.leader_epoch, entry.snapshot_epoch, entry.created_ms, int(time.time() * 1000),
            batches))

    # ================================================================== share-partitions
    async def group_settings(self, group_id: str) -> ShareGroupSettings:
        """The group configs of ``group_id`` this share-partition leader applies: read here
        when this broker coordinates the group (or runs alone), else asked of the coordinator
        and reused for :data:`GROUP_SETTINGS_CACHE_MS` (the broker's settings while it cannot
        be asked)."""
        if not self.host.clustered or self.groups.coordinator_error(group_id) == E.NONE:
            overrides = self.groups.group_configs.get(group_id, {})
        else:
            now = self.host.loop.time()
            cached = self._remote_settings.get(group_id)
            if cached is not None and now - cached[0] < GROUP_SETTINGS_CACHE_MS / 1000:
                overrides = cached[1]
            else:
                err, overrides = await self.groups.group_config_overrides(group_id)
                if err:
                    overrides = cached[1] if cached is not None else {}
                else:
                    if len(self._remote_settings) >= self.config.group_share_max_share_sessions:
                        self._remote_settings.clear()  # bounded: one entry per group fetched from here
                    self._remote_settings[group_id] = (now, overrides)
        c = self.config
        return ShareGroupSettings(int(overrides.get("share.record.lock.duration.ms",
                                                    c.group_share_record_lock_duration_ms)),
                                  overrides.get("share.auto.offset.reset", c.share_auto_offset_reset),
                                  overrides.get("share.isolation.level", c.share_isolation_level))

    def _sp_config(self) -> tuple[int, int, int]:
        c = self.config
        return (c.group_share_record_lock_duration_ms, c.group_share_delivery_count_limit,
                c.group_share_partition_max_record_locks)

    async def _entry(self, group_id: str, topic: str, index: int, p) -> _Entry | None:
        """The share-partition (loaded or initialised here), or None while its state cannot be
        read (the state topic is being created, its leader is unknown: the fetch returns nothing)."""
        k = (group_id, topic, index)
        entry = self.entries.get(k)
        if entry is not None and entry.leader_epoch == p.leader_epoch:
            return entry
        pending = self._loading.get(k)
        if pending is not None:
            await asyncio.shield(pending)
            entry = self.entries.get(k)
            return entry if entry is not None and entry.leader_epoch == p.leader_epoch else None
        fut = self.host.loop.create_future()
        self._loading[k] = fut
        try:
            info = self.host.topic(topic)
            if info is None:
                return None
            key = ShareStateKey(group_id, info.topic_id, index)
            err, snap = await self._read_state(key)
            if err:
                log.info("share-partition %s %s-%d: state not readable yet (%s)", group_id, topic, index, E(err).name)
                return None
            sp = SharePartition(*self._sp_config())
            now_ms = int(time.time() * 1000)
            if snap is not None:
                sp.initialize(snap.start_offset, snap.batches, snap.state_epoch + 1)
                sp.dirty = True
                entry = _Entry(key, sp, p.leader_epoch, snap.snapshot_epoch, snap.create_timestamp_ms)
            else:
                start = self._initial_offset(p, (await self.group_settings(group_id)).auto_offset_reset)
                sp.initialize(start)
                sp.dirty = True
                entry = _Entry(key, sp, p.leader_epoch, 0, now_ms)
            sp.move_start(p.kafka_log_start_offset)
            err = await self._store(entry)  # pins the start (latest) and the new state epoch
            if err:
                log.info("share-partition %s %s-%d: state not writable yet (%s)", group_id, topic, index, E(err).name)
                return None
            self.entries[k] = entry
            log.info("share-partition %s %s-%d at SPSO %d SPEO %d (state epoch %d)", group_id, topic, index,
                     sp.start_offset, sp.end_offset, sp.state_epoch)
            return entry
        finally:
            del self._loading[k]
            fut.set_result(None)

    @staticmethod
    def _initial_offset(p, reset: str) -> int:
        """Where a new share-partition starts (Kafka ``ShareGroupAutoOffsetResetStrategy``):
        the log start (``earliest``), the first record at or after now minus the duration
        (``by_duration:<duration>``; the high watermark when there is none), else the high
        watermark (``latest``)."""
        if reset == "earliest":
            return p.kafka_log_start_offset
        ms = by_duration_ms(reset)
        if ms is not None:
            found = p.log.offset_for_timestamp(int(time.time() * 1000) - ms)
            if found is not None and found[0] < p.high_watermark:
                return p.kafka_offset(found[0])
        return p.kafka_high_watermark

    def _notify(self) -> None:
        """Wake long-polling share fetches: records became available (release, expiry)."""
        if self._changed is not None and not self._changed.done():
            self._changed.set_result(None)
        self._changed = None

    def _changed_future(self) -> asyncio.Future:
        if self._changed is None or self._changed.done():
            self._changed = self.host.loop.create_future()
        return self._changed

    def _leader_partition(self, topic: str, index: int):
        """(error, hosted partition) for a share fetch or acknowledgement of ``topic``-``index``."""
        info = self.host.topic(topic)
        if info is None or not 0 <= index < info.num_partitions:
            return E.UNKNOWN_TOPIC_OR_PARTITION, None
        p = self.host.partition(topic, index)
        if p is None or not p.is_leader:
            return E.NOT_LEADER_OR_FOLLOWER, None
        return E.NONE, p

    async def acknowledge(self, group_id: str, member_id: str, topic: str, index: int,
                          batches: list[tuple[int, int, list[int]]]) -> int:
        """Apply acknowledgement batches ``(first, last, types)`` of one partition, all or
        nothing, and store the state; the error of the partition (INVALID_RECORD_STATE,
        NOT_LEADER_OR_FOLLOWER, ...). When the state cannot be stored (the write's error:
        COORDINATOR_NOT_AVAILABLE, ...) the acknowledgement is rolled back, its records
        ACQUIRED again until their lock expires and then delivered again, as Kafka 4.1's
        ``SharePartition.acknowledge`` -> ``rollbackOrProcessStateUpdates``: the client was
        told it failed, so it must not stay done."""
        err, p = self._leader_partition(topic, index)
        if err:
            return err
        entry = await self._entry(group_id, topic, index, p)
        if entry is None:
            return E.INVALID_RECORD_STATE  # nothing was acquired from this leader's state
        code, undo = entry.sp.acknowledge_all(member_id, batches)
        if entry.sp.dirty:
            self._notify()
            store_err = await self._store(entry)
            if store_err and undo:
                entry.sp.rollback(undo)
                entry.sp.move_start(p.kafka_log_start_offset)
                log.info("share-partition %s %s-%d: acknowledgement rolled back, state not stored (%s)", group_id,
                         topic, index, E(store_err).name)
            code = code or store_err
        return code

    def _read(self, entry: _Entry, p, member_id: str, max_records: int, max_bytes: int,
              settings: ShareGroupSettings) -> PartitionFetch:
        """Acquire records of one partition for ``member_id`` and return them (locked for the
        group's ``share.record.lock.duration.ms``, read up to the LSO with ``read_committed``)."""
        sp = entry.sp
        sp.lock_duration_ms = settings.record_lock_duration_ms
        out = PartitionFetch(leader_epoch=p.leader_epoch)
        sp.move_start(p.kafka_log_start_offset)
        if sp.expire_locks(self.host.loop.time() * 1000):
            self._notify()
        read_committed = settings.isolation_level == "read_committed"
        visible_log = p.last_stable_offset if read_committed else p.high_watermark
        hw = p.kafka_offset(visible_log)
        start = sp.first_fetchable()
        if start >= hw or (start >= sp.end_offset and not sp.can_acquire_new()):
            return out
        log_start = p.log_offset(start)
        try:
            data = p.log.read_for_clients(log_start, max(max_bytes, 1), max_offset=visible_log,
                                          min_one_batch=True).to_bytes()
        except KafkaError as exc:
            out.error = exc.code
            return out
        view = memoryview(data)
        headers = [(pos, h) for pos, h in iter_batches(view, allow_trailing_partial=True)]
        aborted_pids = self._aborted(p, log_start, visible_log) if read_committed else None
        tracker = AbortedTxnTracker(aborted_pids) if aborted_pids is not None else None
        infos = [BatchInfo(h.base_offset, h.last_offset, h.is_control,
                           tracker is not None and tracker.is_aborted_data(h)) for _, h in headers]
        acquired, used = sp.acquire(infos, member_id, self.host.loop.time() * 1000, max_records, hw)
        if not acquired:
            return out
        self.redeliveries += sum(last - first + 1 for first, last, count in acquired if count > 1)
        out.acquired = acquired
        out.records = b"".join(bytes(view[headers[i][0]:headers[i][0] + headers[i][1].size]) for i in used)
        return out

    @staticmethod
    def _aborted(p, log_start: int, visible_log: int) -> list[tuple[int, int]]:
        """Aborted transactions over the read, in Kafka offsets (read_committed)."""
        return [(pid, p.kafka_offset(first)) for pid, first in p.log.collect_aborted_transactions(log_start, visible_log)]

    # ================================================================== sessions
    def session_error(self, group_id: str, member_id: str, epoch: int, acks_present: bool) -> int:
        """The share-session check of a request (KIP-932): epoch 0 opens (acknowledgements are
        not allowed then; SHARE_SESSION_LIMIT_REACHED when ``group.share.max.share.sessions``
        are open), -1 closes, otherwise it must be the session's next epoch."""
        if not member_id:
            return E.INVALID_REQUEST
        if epoch == SESSION_EPOCH_INITIAL:
            if acks_present:
                return E.INVALID_REQUEST
            if (group_id, member_id) not in self.sessions and \
                    len(self.sessions) >= self.config.group_share_max_share_sessions:
                return E.SHARE_SESSION_LIMIT_REACHED
            return E.NONE
        session = self.sessions.get((group_id, member_id))
        if session is None:
            return E.SHARE_SESSION_NOT_FOUND
        if epoch != SESSION_EPOCH_FINAL and epoch != session.next_epoch:
            return E.INVALID_SHARE_SESSION_EPOCH
        return E.NONE

    def open_session(self, group_id: str, member_id: str, epoch: int, add: list[tuple[str, int]],
                     forget: list[tuple[str, int]]) -> ShareSession:
        """The session after a request that passed :meth:`session_error` (new on epoch 0)."""
        k = (group_id, member_id)
        if epoch == SESSION_EPOCH_INITIAL:
            old = self.sessions.pop(k, None)
            if old is not None:
                self._release_session(old)
            session = self.sessions[k] = ShareSession(group_id, member_id)
        else:
            session = self.sessions[k]
            session.next_epoch = 1 if session.next_epoch >= MAX_SESSION_EPOCH else session.next_epoch + 1
        if epoch == SESSION_EPOCH_INITIAL:
            session.next_epoch = 1
        session.partitions |= set(add)
        session.partitions -= set(forget)
        return session

    def close_session(self, group_id: str, member_id: str) -> None:
        """Epoch -1: the session ends and the member's acquired records are released."""
        session = self.sessions.pop((group_id, member_id), None)
        if session is not None:
            self._release_session(session)

    def connection_closed(self, owner: Any) -> None:
        """The client connection ``owner`` closed: every share session opened on it ends and its
        member's acquired records here are released at once, delivery counts kept (Kafka 4.1
        ``ShareSessionCache.ClientConnectionDisconnectListener`` -> ``onMemberLeave``). A session
        the member re-opened on another connection is left alone."""
        for (group_id, member_id), session in list(self.sessions.items()):
            if session.owner is owner:
                self.close_session(group_id, member_id)
                log.info("share group %s: member %s's share session ended with its connection", group_id, member_id)

    def _release_session(self, session: ShareSession) -> None:
        """Release what the session's member holds here (stored with the next write: a released
        record is stored as available either way, only one archived at its limit waits)."""
        for (gid, _t, _i), entry in self.entries.items():
            if gid == session.group_id and entry.sp.release_member(session.member_id):
                self._notify()

    async def fetch(self, session: ShareSession, max_wait_ms: int, min_bytes: int, max_bytes: int,
                    max_records: int) -> dict[tuple[str, int], PartitionFetch]:
        """ShareFetch of a session's partitions: acquire records (long-polling up to
        ``max_wait_ms`` for ``min_bytes``), one :class:`PartitionFetch` per partition."""
        loop = self.host.loop
        deadline = loop.time() + max(0, max_wait_ms) / 1000
        settings = await self.group_settings(session.group_id)
        while True:
            out: dict[tuple[str, int], PartitionFetch] = {}
            total = 0
            budget_bytes = max_bytes
            watched = []
            lock_deadlines = []
            for topic, index in sorted(session.partitions):
                err, p = self._leader_partition(topic, index)
                if err:
                    out[(topic, index)] = PartitionFetch(error=err)
                    continue
                entry = await self._entry(session.group_id, topic, index, p)
                if entry is None:
                    out[(topic, index)] = PartitionFetch(leader_epoch=p.leader_epoch)
                    continue
                res = self._read(entry, p, session.member_id, max_records, budget_bytes, settings) if budget_bytes > 0 \
                    else PartitionFetch(leader_epoch=p.leader_epoch)
                max_records -= sum(last - first + 1 for first, last, _ in res.acquired)
                total += len(res.records)
                budget_bytes -= len(res.records)
                out[(topic, index)] = res
                watched.append(p)
                nd = entry.sp.next_deadline_ms()
                if nd is not None:
                    lock_deadlines.append(nd / 1000)
                if max_records <= 0:
                    break
            if total >= max(min_bytes, 1) or max_records <= 0 or not watched or loop.time() >= deadline:
                return out
            wake_at = min([deadline] + [d + 0.001 for d in lock_deadlines])
            futures = [p.waiter(p.high_watermark + 1) for p in watched] + [self._changed_future()]
            try:
                await asyncio.wait(futures, timeout=max(0.0, wake_at - loop.time()),
                                   return_when=asyncio.FIRST_COMPLETED)
            finally:
                for f in futures[:-1]:
                    if not f.done():
                        f.cancel()
            if total:
                return out

    # ================================================================== views
    def partition_states(self) -> list[tuple[str, str, int, SharePartition, Any]]:
        """(group, topic, partition, share-partition, hosted partition) of every share-partition
        led here (metrics, console, describe offsets)."""
        out = []
        for (g, t, i), e in sorted(self.entries.items()):
            p = self.host.partition(t, i)
            if p is not None and p.is_leader and e.leader_epoch == p.leader_epoch:
                out.append((g, t, i, e.sp, p))
        return out

    def partition_counts(self, group_id: str) -> list[tuple[str, int, int, int]]:
        """(topic, partition, in-flight offsets SPSO..SPEO, acquired records) of every
        share-partition of ``group_id`` led here (the console; broker RPC op
        ``share_partition_counts``)."""
        return [(t, i, sp.in_flight, sp.acquired_count()) for g, t, i, sp, _p in self.partition_states()
                if g == group_id]

    def stop(self) -> None:
        for g in self.share_groups.values():
            for m in g.members.values():
                if m.timer is not None:
                    m.timer.cancel()
