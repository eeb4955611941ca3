"""Committed offsets of the groups this broker coordinates (Kafka ``OffsetMetadataManager``):
OffsetCommit, TxnOffsetCommit (pending until the transaction's marker), OffsetFetch,
OffsetDelete and offset expiry (KIP-211).

:class:`OffsetMetadataManager` is one part of :class:`~litemq.coordinator.coordinator.GroupCoordinator`
(the service that owns the groups and their offsets partitions); it uses the service's
``groups``, ``config``, ``host``, ``coordinator_error``, ``partition_for``, ``_append`` and the
group manager's ``_validate_member``. Event-loop thread only.

Durability: an OffsetCommit is answered, and the committed offsets become visible to
OffsetFetch, only once the high watermark of the offsets partition covers the records.

Sources: Kafka ``GroupCoordinator.scala`` (``handleCommitOffsets``, ``handleTxnCommitOffsets``,
``handleFetchOffsets``, ``handleDeleteOffsets``), ``GroupMetadataManager.scala`` (storeOffsets,
``cleanupGroupMetadata``), KIP-98/KIP-447 (transactional offsets, require_stable), KIP-211,
KIP-496 (OffsetDelete).
"""

from __future__ import annotations

import logging

from litemq import limits
from litemq.coordinator.consumer_group import ConsumerGroup
from litemq.coordinator.group import GroupMetadata, GroupState, now_ms
from litemq.coordinator.records import OffsetAndMetadata, encode_offset_key, encode_offset_value
from litemq.protocol.errors import ErrorCode as E

log = logging.getLogger("litemq.coordinator.coordinator")  # the service's logger, as before the split

OFFSETS_TOPIC = "__consumer_offsets"


def _merge_txn_offsets(offsets: dict[tuple[str, int], tuple[OffsetAndMetadata, int]],
                       committed: dict[tuple[str, int], tuple[OffsetAndMetadata, int]]) -> None:
    """Make a committed transaction's offsets the group's, unless a later plain OffsetCommit
    (a record further in the log) already replaced one (Kafka ``GroupMetadata.completePendingTxnOffsetCommit``)."""
    for tp, (om, record_offset) in committed.items():
        current = offsets.get(tp)
        if current is None or current[1] < record_offset:
            offsets[tp] = (om, record_offset)



class OffsetMetadataManager:
    """Committed offsets of the groups this broker coordinates (see the module docstring)."""

    # ================================================================== OffsetCommit
    async def commit_offsets(self, group_id: str, generation: int, member_id: str, group_instance_id: str | None,
                             retention_time_ms: int,
                             offsets: dict[tuple[str, int], OffsetAndMetadata],
                             api_version: int = 9) -> dict[tuple[str, int], int]:
        """OffsetCommit v0-9 (Kafka ``handleCommitOffsets``). Returns an error per partition.

        Members commit with their generation and member id (during Stable and
        PreparingRebalance; REBALANCE_IN_PROGRESS during CompletingRebalance); a consumer
        without membership (``assign()``, admin tools) commits with generation -1, accepted
        only while the group has no members (UNKNOWN_MEMBER_ID otherwise, or the member checks
        when it names a member id); such a commit creates the group. A commit with a generation
        to a group that does not exist is GROUP_ID_NOT_FOUND (v9+; ILLEGAL_GENERATION before),
        as in Kafka 4's ``OffsetMetadataManager.validateOffsetCommit``. Members of a KIP-848 consumer
        group commit with their member epoch as ``generation`` (OffsetCommit v9+:
        STALE_MEMBER_EPOCH when it is not the member's current epoch).
        """
        def all_(code: int) -> dict:
            return {tp: code for tp in offsets}

        err = await self.current_coordinator_error(group_id)
        if err:
            return all_(err)
        group = self.groups.get(group_id)
        if group is None:
            if generation >= 0:  # Kafka's OffsetMetadataManager.validateOffsetCommit
                return all_(E.GROUP_ID_NOT_FOUND if api_version >= 9 else E.ILLEGAL_GENERATION)
            if len(self.groups) >= limits.MAX_GROUPS:
                return all_(E.COORDINATOR_NOT_AVAILABLE)
            group = self.groups[group_id] = GroupMetadata(group_id)
        if group.is_(GroupState.DEAD):
            return all_(E.COORDINATOR_NOT_AVAILABLE)
        if isinstance(group, ConsumerGroup):
            err = self.validate_consumer_commit(group, member_id, generation, api_version, transactional=False)
            if err:
                return all_(err)
        elif generation < 0 and group.is_(GroupState.EMPTY):
            pass  # Kafka's ClassicGroup.validateOffsetCommit: an empty group takes any commit without a generation
        elif generation < 0 and not member_id and group_instance_id is None:
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
        With a generation, member id or instance id (v3+) the member is checked as for
        OffsetCommit; without any of them the commit is accepted (Kafka
        ``ClassicGroup``/``ConsumerGroup.validateOffsetCommit``).
        Returns an error per partition.

        KIP-890 part 1: the offsets partition's log takes a verification guard for the producer
        before the transaction coordinator is asked, and the append presents it (Kafka
        ``GroupCoordinatorService.commitTransactionalOffsets`` through
        ``ReplicaManager.maybeStartTransactionVerificationForPartition``). An ABORT (or COMMIT)
        marker of the producer that lands in the partition while the coordinator answers clears
        the guard, and the append is refused (INVALID_TXN_STATE) instead of opening, after the
        marker, a transaction nobody ends: OffsetFetch(require_stable) would answer
        UNSTABLE_OFFSET_COMMIT for good, and the producer's next commit would make the aborted
        offsets the group's.
        """
        def all_(code: int) -> dict:
            return {tp: code for tp in offsets}

        err = self.coordinator_error(group_id)
        if err:
            return all_(err)
        p = self.host.partition(OFFSETS_TOPIC, self.partition_for(group_id))
        if p is None:
            return all_(E.NOT_COORDINATOR)
        guard = p.log.maybe_start_transaction_verification(producer_id, producer_epoch)
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
        if isinstance(group, ConsumerGroup):
            err = self.validate_consumer_commit(group, member_id, generation, 9, transactional=True,
                                                group_instance_id=group_instance_id)
            if err:
                return all_(err)
        elif member_id or generation >= 0 or group_instance_id is not None:
            err = self._validate_member(group, member_id, group_instance_id)
            if err:
                return all_(err)
            if generation != group.generation:
                return all_(E.ILLEGAL_GENERATION)
        results, valid = self._validate_offsets(offsets, -1)
        if not valid:
            return results
        if self.host.partition(OFFSETS_TOPIC, self.partition_for(group_id)) is not p:
            return all_(E.NOT_COORDINATOR)  # the replica changed while verifying: its guard is gone
        # The coordinator is the producer of this batch: continue the producer's sequence.
        entry = p.log.producer_state.entry(producer_id)
        seq = entry.last_seq + 1 if entry is not None and entry.epoch == producer_epoch else 0
        records = [(encode_offset_key(group_id, t, i), encode_offset_value(om)) for (t, i), om in valid]
        err, first_offset = await self._append(group_id, records, producer_id=producer_id,
                                               producer_epoch=producer_epoch, base_sequence=seq,
                                               is_transactional=True, verification_guard=guard)
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
    async def fetch_offsets(self, group_id: str, partitions: list[tuple[str, int]] | None, require_stable: bool,
                            member_id: str | None = None, member_epoch: int = -1
                            ) -> tuple[int, list[tuple[tuple[str, int], OffsetAndMetadata | None, int]]]:
        """OffsetFetch (Kafka ``handleFetchOffsets``): (group error, [(tp, offset or None, error)]).

        ``partitions`` None means every partition the group has an offset for. With
        ``require_stable`` (KIP-447) a partition with a commit in flight answers
        UNSTABLE_OFFSET_COMMIT so the client retries. ``member_id``/``member_epoch`` (v9+) are
        checked against a KIP-848 consumer group (UNKNOWN_MEMBER_ID, STALE_MEMBER_EPOCH).
        """
        err = await self.current_coordinator_error(group_id, require_id=False)
        if err:
            return err, []
        group = self.groups.get(group_id)
        if isinstance(group, ConsumerGroup):
            err = self.validate_consumer_fetch(group, member_id, member_epoch)
            if err:
                return err, []
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
