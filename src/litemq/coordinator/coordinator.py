"""The group coordinator (Kafka ``GroupCoordinatorService`` + ``GroupCoordinator``, classic protocol).

:class:`GroupCoordinator` is the service: request entry points, lifecycle, which offsets
partitions this broker leads (loading and unloading them), the appends to them, group deletion
and the expiry timer. Its two halves live in their own modules, as in Kafka's group
coordinator: :mod:`litemq.coordinator.group_manager` (``GroupMetadataManager``: the group
membership state machine) and :mod:`litemq.coordinator.offset_manager`
(``OffsetMetadataManager``: committed offsets).

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
from typing import TYPE_CHECKING, Any, Protocol

from litemq.coordinator.assignors import configured_assignors
from litemq.coordinator.consumer_group import ConsumerGroup
from litemq.coordinator.consumer_group_manager import ConsumerGroupManager
from litemq.coordinator.consumer_group_records import SHARE_GROUP_KEY_TYPES, ConsumerGroupKey, decode_any_key
from litemq.coordinator.group import GroupMetadata, GroupState
from litemq.coordinator.group_configs import (GROUP_CONFIG_DEFS, decode_group_config_key, decode_group_config_value,
                                              default_value, encode_group_config_key, encode_group_config_value,
                                              is_group_config_key)
from litemq.coordinator.group_manager import (NEW_MEMBER_JOIN_TIMEOUT_MS, GroupMetadataManager, JoinResult,
                                              SyncResult)
from litemq.coordinator.internal_topic import append_committed, replay_committed
from litemq.coordinator.offset_manager import OFFSETS_TOPIC, OffsetMetadataManager, _merge_txn_offsets
from litemq.coordinator.records import (FormatError, OffsetAndMetadata, OffsetKey, decode_group_value,
                                        decode_offset_value, encode_group_key, encode_group_value, encode_offset_key,
                                        partition_for)
from litemq.protocol.errors import ErrorCode as E
from litemq.protocol.errors import KafkaError
from litemq.protocol.records import CONTROL_COMMIT, build_batch, parse_control_key

if TYPE_CHECKING:
    from litemq.coordinator.host import CoordinatorHost

log = logging.getLogger(__name__)

OFFSETS_TOPIC_SEGMENT_BYTES = 100 * 1024 * 1024
"""Kafka's ``offsets.topic.segment.bytes`` default."""

__all__ = ["GroupCoordinator", "JoinResult", "SyncResult", "OFFSETS_TOPIC", "OFFSETS_TOPIC_SEGMENT_BYTES",
           "NEW_MEMBER_JOIN_TIMEOUT_MS"]


def _marker_is_commit(records) -> bool:
    """Whether a control batch's decoded ``records`` are a COMMIT transaction marker."""
    if not records:
        return False
    try:
        return parse_control_key(records[0].key)[1] == CONTROL_COMMIT
    except KafkaError:
        return False



class ShareGroupLoader(Protocol):
    """What the group coordinator needs of the share-group side (KIP-932; implemented by
    :class:`~litemq.coordinator.share_coordinator.ShareCoordinator`, which is created later)."""

    def load_share_groups(self, index: int, records: list[tuple[ConsumerGroupKey, bytes | None]]) -> None:
        """The share-group records (types 9..15) of ``__consumer_offsets`` partition ``index``,
        in log order, now that this broker leads and has replayed it."""

    def unload_share_groups(self, index: int) -> None:
        """This broker no longer leads partition ``index``: forget its share groups."""


class GroupCoordinator(GroupMetadataManager, OffsetMetadataManager, ConsumerGroupManager):
    """Every consumer group whose offsets partition this broker leads: the service whose request
    entry points are its own methods and those of its managers (classic groups, offsets, KIP-848
    consumer groups). ``groups`` holds both group types: :class:`GroupMetadata` (classic) and
    :class:`ConsumerGroup`. Event-loop thread only."""

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
        self.share_loader: ShareGroupLoader | None = None
        self._share_records: dict[int, list[tuple[ConsumerGroupKey, bytes | None]]] = {}
        """Share-group records replayed before :attr:`share_loader` was set, by partition."""
        self.group_configs: dict[str, dict[str, str]] = {}
        """Per-group config overrides of the groups coordinated here (group id -> name -> value;
        :mod:`litemq.coordinator.group_configs`)."""
        configured_assignors(self.config.group_consumer_assignors)  # ValueError: refuse to start

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
            self._unload_group(group)

    def _unload_group(self, group) -> None:
        """Stop the timers of ``group`` and answer its waiting members NOT_COORDINATOR."""
        if isinstance(group, ConsumerGroup):
            self.cancel_consumer_group_timers(group)
            return
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

    def _offsets_partition(self, group_id: str):
        """The hosted replica of ``group_id``'s offsets partition, or None."""
        return self.host.partition(OFFSETS_TOPIC, self.partition_for(group_id))

    async def current_coordinator_error(self, group_id: str | None, require_id: bool = True) -> int:
        """:meth:`coordinator_error`, and NOT_COORDINATOR (retriable: the client looks the
        coordinator up again) when this broker's leadership of the group's offsets partition is
        not current and its followers do not confirm it within an election timeout. For the
        requests answered from membership state (JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
        OffsetCommit, OffsetFetch, ConsumerGroupHeartbeat, ShareGroupHeartbeat): a coordinator
        that was deposed while stopped must not answer from what it remembers (UNKNOWN_MEMBER_ID
        for a member it expired on resuming, stale offsets) before it learns of the new leader.
        Returns at once (no suspension) when the lease holds."""
        err = self.coordinator_error(group_id, require_id)
        if err:
            return err
        p = self._offsets_partition(group_id or "")
        if p is None:
            return E.NOT_COORDINATOR
        if p.leadership_current:
            return E.NONE
        confirmed = await p.confirm_leadership()
        err = self.coordinator_error(group_id, require_id)
        if err or confirmed:
            return err
        log.info("%s-%d: leadership not confirmed by the followers: NOT_COORDINATOR for group %s", OFFSETS_TOPIC,
                 self.partition_for(group_id or ""), group_id)
        return E.NOT_COORDINATOR

    def expiry_deferred(self, group_id: str) -> bool:
        """A member-expiry timer of ``group_id`` fired: True (and the offsets partition's leader
        asked to confirm its leadership) when the expiry must wait because the leadership is
        not current (``Partition.leadership_current``: in a cluster a majority of its replicas
        acknowledged this leader within an election timeout, and this broker was not stalled
        meanwhile; always on a single broker); the caller then re-arms its timer for
        ``limits.COORDINATOR_LEASE_RECHECK_MS``. The member's queued heartbeats (read after
        a stall, after the overdue timers ran) then still reach it in time, and a deposed
        coordinator never expires a member its successor has alive; the partition's unloading
        cancels the re-armed timer. Kafka 4's coordinator runtime gets the same guarantee
        differently: an expiry is a write that fails once the partition is no longer led."""
        p = self._offsets_partition(group_id)
        if p is None:
            return True
        if p.leadership_current:
            return False
        p.renew_leadership()
        return True

    def set_share_loader(self, loader: ShareGroupLoader) -> None:
        """Attach the share-group side and hand it the share-group records already replayed."""
        self.share_loader = loader
        pending, self._share_records = self._share_records, {}
        for index, records in pending.items():
            loader.load_share_groups(index, records)

    async def append_records(self, group_id: str, records: list[tuple[bytes, bytes | None]]) -> int:
        """Append ``records`` to ``group_id``'s offsets partition and wait for the commit (the
        share-group side's records); the error code."""
        err, _ = await self._append(group_id, records)
        return err

    def group_config(self, group_id: str, name: str) -> str:
        """The value of group config ``name`` for ``group_id``: its override, else the broker's
        setting (a group coordinated elsewhere gets the broker's setting)."""
        return self.group_configs.get(group_id, {}).get(name) or default_value(name, self.config)

    def group_config_int(self, group_id: str, name: str) -> int:
        return int(self.group_config(group_id, name))

    async def set_group_configs(self, group_id: str, configs: dict[str, str]) -> int:
        """Replace ``group_id``'s config overrides (validated by the caller) with ``configs``:
        written to its ``__consumer_offsets`` partition (a tombstone when empty), then applied;
        the error code (NOT_COORDINATOR, ... or the append's)."""
        err = self.coordinator_error(group_id)
        if err:
            return err
        unknown = set(configs) - set(GROUP_CONFIG_DEFS)
        if unknown:
            return E.INVALID_CONFIG
        value = encode_group_config_value(configs) if configs else None
        err, _ = await self._append(group_id, [(encode_group_config_key(group_id), value)])
        if err:
            return err
        if configs:
            self.group_configs[group_id] = dict(configs)
        else:
            self.group_configs.pop(group_id, None)
        return E.NONE

    async def group_config_overrides(self, group_id: str) -> tuple[int, dict[str, str]]:
        """(error, ``group_id``'s config overrides), from its coordinator: this broker, or in a
        cluster the leader of its offsets partition over the broker RPC op ``group_configs``.
        Before ``__consumer_offsets`` exists no group has an override, so the answer is (NONE,
        {}) without creating it, as Kafka (which keeps them in its metadata log) answers the
        defaults of a group no one configured."""
        if self.host.topic(OFFSETS_TOPIC) is None:
            return E.NONE, {}
        err = self.coordinator_error(group_id)
        if err == E.NONE:
            return E.NONE, dict(self.group_configs.get(group_id, {}))
        if err != E.NOT_COORDINATOR or not self.host.clustered:
            return err, {}
        res = await self._group_configs_rpc(group_id, {"action": "describe"})
        configs = res.get("configs")
        return int(res.get("error", E.UNKNOWN_SERVER_ERROR)), dict(configs) if isinstance(configs, dict) else {}

    async def put_group_configs(self, group_id: str, configs: dict[str, str]) -> int:
        """:meth:`set_group_configs` on ``group_id``'s coordinator (forwarded in a cluster)."""
        err = self.coordinator_error(group_id)
        if err == E.NOT_COORDINATOR and self.host.clustered:
            res = await self._group_configs_rpc(group_id, {"action": "alter", "configs": configs})
            return int(res.get("error", E.UNKNOWN_SERVER_ERROR))
        return await self.set_group_configs(group_id, configs)

    async def _group_configs_rpc(self, group_id: str, req: dict) -> dict:
        leader = self.host.partition_leader(OFFSETS_TOPIC, self.partition_for(group_id))
        if leader < 0 or leader == self.config.node_id:
            return {"error": E.COORDINATOR_NOT_AVAILABLE}
        try:
            return await self.host.rpc(leader, {"op": "group_configs", "group": group_id, **req},
                                       self.config.request_timeout_ms / 1000)
        except (ConnectionError, asyncio.TimeoutError, OSError):
            return {"error": E.COORDINATOR_NOT_AVAILABLE}

    async def serve_group_configs_rpc(self, req: dict) -> dict:
        """The broker RPC op ``group_configs`` (this broker coordinates the group): ``action``
        ``describe`` -> ``{"error", "configs"}``, ``alter`` (``configs``, validated by the
        sender) -> ``{"error"}``; never forwarded again."""
        try:
            group_id = str(req["group"])
            if self.coordinator_error(group_id):
                return {"error": self.coordinator_error(group_id)}
            if req["action"] == "describe":
                return {"error": E.NONE, "configs": dict(self.group_configs.get(group_id, {}))}
            configs = {str(k): str(v) for k, v in dict(req["configs"]).items()}
            return {"error": await self.set_group_configs(group_id, configs)}
        except (KeyError, TypeError, ValueError) as exc:
            return {"error": E.INVALID_REQUEST, "message": f"bad group_configs request: {exc}"}

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
            self._unload_group(self.groups.pop(group_id))
        self._share_records.pop(index, None)
        for group_id in [g for g in self.group_configs if self.partition_for(g) == index]:
            del self.group_configs[group_id]
        if self.share_loader is not None:
            self.share_loader.unload_share_groups(index)
        log.info("unloaded the groups of %s-%d (no longer its leader)", OFFSETS_TOPIC, index)

    async def _append(self, group_id: str, records: list[tuple[bytes, bytes | None]], verification_guard=None,
                      **batch_args) -> tuple[int, int]:
        """Append records to the group's offsets partition; wait until they are committed.

        Returns (error code, offset of the first record). ``batch_args`` go to ``build_batch``
        (producer id/epoch/sequence and the transactional flag of TxnOffsetCommit);
        ``verification_guard`` (TxnOffsetCommit) is the KIP-890 guard the partition's log took
        before the transaction was verified (INVALID_TXN_STATE when a marker cleared it since).
        """
        return await append_committed(self._offsets_partition(group_id), build_batch(records, **batch_args),
                                      self.config.offsets_commit_timeout_ms / 1000,
                                      verification_guard=verification_guard)

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
        consumer_groups: dict[str, dict] = {}  # KIP-848 records by group, replayed in log order
        share_records: list[tuple[ConsumerGroupKey, bytes | None]] = []  # KIP-932, for the share side
        group_configs: dict[str, dict[str, str] | None] = {}  # per-group config overrides
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
                if is_group_config_key(rec.key):
                    try:
                        gid = decode_group_config_key(rec.key)
                        group_configs[gid] = None if rec.value is None else decode_group_config_value(rec.value)
                    except ValueError as exc:
                        log.warning("%s-%d offset %d: skipping an undecodable group config record: %s", OFFSETS_TOPIC,
                                    index, rec.offset, exc)
                    continue
                try:
                    key = decode_any_key(rec.key)
                    if isinstance(key, ConsumerGroupKey) and key.kind in SHARE_GROUP_KEY_TYPES:
                        share_records.append((key, rec.value))
                    elif isinstance(key, ConsumerGroupKey):
                        self.replay_consumer_group_record(consumer_groups, key, rec.value)
                    elif isinstance(key, OffsetKey):
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
        # Group configs first: the groups built below start their members' session timers with
        # them (consumer.session.timeout.ms, share.session.timeout.ms), as Kafka's coordinator has a
        # group's configs before it loads the group.
        for gid, configs in group_configs.items():
            if configs:
                self.group_configs[gid] = {k: v for k, v in configs.items() if k in GROUP_CONFIG_DEFS}
            else:
                self.group_configs.pop(gid, None)
        loaded = 0
        pending_groups = {gid for per_pid in pending_txn.values() for gid in per_pid}
        for group_id in set(stored) | set(offsets) | pending_groups | set(consumer_groups):
            g_stored = stored.get(group_id)
            g_offsets = offsets.get(group_id) or {}
            cg = self.build_consumer_group(group_id, consumer_groups[group_id]) \
                if group_id in consumer_groups else None
            if cg is None and g_stored is None and not g_offsets and group_id not in pending_groups:
                continue
            group = cg if cg is not None else GroupMetadata(group_id)
            if cg is None and g_stored is not None:
                group.load_stored(g_stored)
            group.offsets = g_offsets
            for pid, per_group in pending_txn.items():
                if group_id in per_group:
                    group.pending_txn_offsets[pid] = per_group[group_id]
            self.groups[group_id] = group
            if cg is None:
                for m in group.members.values():
                    self._schedule_heartbeat(group, m, m.session_timeout_ms)
            loaded += 1
        if loaded:
            log.info("loaded %d group(s) from %s-%d (offsets %d..%d)", loaded, OFFSETS_TOPIC, index,
                     p.log_start_offset, p.high_watermark)
        if self.share_loader is not None:
            self.share_loader.load_share_groups(index, share_records)
        elif share_records:
            self._share_records[index] = share_records

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

    def _remove_group(self, group: GroupMetadata | ConsumerGroup):
        """Mark ``group`` Dead, forget it, and return a coroutine writing its tombstones."""
        records = [(encode_offset_key(group.group_id, t, p), None) for (t, p) in sorted(group.offsets)]
        if isinstance(group, ConsumerGroup):
            records += self.consumer_group_tombstones(group)
            self.cancel_consumer_group_timers(group)
            group.dead = True
        else:
            group.transition_to(GroupState.DEAD)
            self._cancel_join_timer(group)
            records.append((encode_group_key(group.group_id), None))
        if self.groups.get(group.group_id) is group:
            del self.groups[group.group_id]
        log.info("group %s removed (%d offset(s))", group.group_id, len(group.offsets))

        async def write() -> int:
            err, _ = await self._append(group.group_id, records)
            return err

        return write()


    # ================================================================== expiry
    async def _expiry_loop(self) -> None:
        interval_s = max(0.05, self.config.offsets_retention_check_interval_ms / 1000)
        while True:
            await asyncio.sleep(interval_s)
            try:
                await self.expire_offsets()
            except Exception:  # keep serving; the next round retries
                log.exception("offset expiration failed")
