"""The classic group protocol's state machine (Kafka ``GroupMetadataManager``'s group half and
the classic-group parts of ``GroupCoordinator.scala``): JoinGroup, SyncGroup, Heartbeat and
LeaveGroup, rebalances, session/rebalance timers (``loop.call_later``) and the futures that
answer waiting members; ListGroups and DescribeGroups.

:class:`GroupMetadataManager` is one part of :class:`~litemq.coordinator.coordinator.GroupCoordinator`
(the service that owns the groups and their offsets partitions); it uses the service's
``groups``, ``config``, ``loop``, ``coordinator_error``, ``partition_for``, ``_store_group`` and
``_spawn``. Event-loop thread only.

Sources: Kafka ``GroupCoordinator.scala`` (``doJoinGroup``, ``onCompleteJoin``, ``doSyncGroup``,
``handleHeartbeat``, ``handleLeaveGroup``), KIP-394 (MEMBER_ID_REQUIRED), KIP-345 (static
membership), KIP-814 (skip_assignment).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from dataclasses import dataclass, field

from litemq import limits
from litemq.coordinator.consumer_group import ConsumerGroup
from litemq.coordinator.group import GroupMetadata, GroupState, MemberMetadata
from litemq.protocol.errors import ErrorCode as E

log = logging.getLogger("litemq.coordinator.coordinator")  # the service's logger, as before the split

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



def group_type(group: GroupMetadata | ConsumerGroup) -> str:
    """``consumer`` (KIP-848) or ``classic``: ListGroups' GroupType."""
    return "consumer" if isinstance(group, ConsumerGroup) else "classic"


class GroupMetadataManager:
    """Group membership and rebalances of the groups this broker coordinates (see the module docstring)."""

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
        if self.expiry_deferred(group.group_id):  # a deposed coordinator must not expire it (see there)
            self._schedule_heartbeat(group, member, limits.COORDINATOR_LEASE_RECHECK_MS)
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
        err = await self.current_coordinator_error(group_id)
        if err:
            return JoinResult(err, member_id=member_id)
        cfg = self.config
        if not cfg.group_min_session_timeout_ms <= session_timeout_ms <= cfg.group_max_session_timeout_ms:
            return JoinResult(E.INVALID_SESSION_TIMEOUT, member_id=member_id)
        if rebalance_timeout_ms < 0:
            rebalance_timeout_ms = session_timeout_ms
        group = self.groups.get(group_id)
        if isinstance(group, ConsumerGroup):
            if group.members or group.dead:
                # KIP-848: a group has one type; LiteMQ does not mix classic members into a
                # consumer group (Kafka's online migration).
                return JoinResult(E.INCONSISTENT_GROUP_PROTOCOL, member_id=member_id)
            group = self._classic_from_empty_consumer_group(group)
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

    def _classic_from_empty_consumer_group(self, cg: ConsumerGroup) -> GroupMetadata:
        """An empty consumer group becomes a classic group on its first JoinGroup, keeping its
        committed offsets (Kafka ``maybeDeleteEmptyConsumerGroup``)."""
        group = GroupMetadata(cg.group_id)
        group.offsets, group.pending_commits, group.pending_txn_offsets = (
            cg.offsets, cg.pending_commits, cg.pending_txn_offsets)
        self.groups[cg.group_id] = group
        self._spawn(self._append(cg.group_id, self.consumer_group_tombstones(cg)))
        log.info("group %s: empty consumer group converted to a classic group", cg.group_id)
        return group

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
        """Kafka ``ClassicGroup.validateMember``: an instance id no static member has is
        UNKNOWN_MEMBER_ID, one another member id holds FENCED_INSTANCE_ID; an unknown member id
        UNKNOWN_MEMBER_ID."""
        if instance_id is not None:
            known = group.static_member_id(instance_id)
            if known is None:
                return E.UNKNOWN_MEMBER_ID
            if known != member_id:
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
        err = await self.current_coordinator_error(group_id)
        if err:
            return SyncResult(err)
        group = self.groups.get(group_id)
        if group is None or isinstance(group, ConsumerGroup):
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
    async def heartbeat(self, group_id: str, generation: int, member_id: str, group_instance_id: str | None) -> int:
        """Heartbeat v0-4 (Kafka ``handleHeartbeat``); the error code (NOT_COORDINATOR also when
        this broker's leadership is not current: ``current_coordinator_error``)."""
        err = await self.current_coordinator_error(group_id)
        if err:
            return err
        group = self.groups.get(group_id)
        if group is None or isinstance(group, ConsumerGroup):
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
    async def leave_group(self, group_id: str, leaving: list[tuple[str, str | None]]) -> tuple[int, list[int]]:
        """LeaveGroup v0-5 (KIP-345 batch). ``leaving``: (member id, group instance id) pairs.

        Returns (top-level error, per-member errors)."""
        err = await self.current_coordinator_error(group_id)
        if err:
            return err, [err] * len(leaving)
        group = self.groups.get(group_id)
        if group is None or isinstance(group, ConsumerGroup):
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

    # ================================================================== admin
    def list_groups(self, states: set[str] | None = None, types: set[str] | None = None
                    ) -> list[GroupMetadata | ConsumerGroup]:
        """Groups of this coordinator (ListGroups), optionally only those in ``states`` and of
        ``types`` (lower case: ``classic``, ``consumer``)."""
        return [g for g in self.groups.values() if not g.is_(GroupState.DEAD)
                and (not states or g.state.value.lower() in states)
                and (not types or group_type(g) in types)]

    def describe_group(self, group_id: str) -> tuple[int, GroupMetadata | None]:
        err = self.coordinator_error(group_id, require_id=False)
        if err:
            return err, None
        return E.NONE, self.groups.get(group_id)
