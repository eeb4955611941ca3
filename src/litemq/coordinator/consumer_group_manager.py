"""KIP-848 consumer groups on the coordinator (Kafka ``GroupMetadataManager.consumerGroupHeartbeat``,
``consumerGroupDescribe``, session and rebalance timeouts, record replay).

:class:`ConsumerGroupManager` is one part of :class:`~litemq.coordinator.coordinator.GroupCoordinator`;
it uses the service's ``groups``, ``config``, ``loop``, ``host``, ``coordinator_error``,
``_append`` and ``_spawn``. Event-loop thread only.

One heartbeat (:meth:`consumer_group_heartbeat`):

1. validate the request (INVALID_REQUEST, UNSUPPORTED_ASSIGNOR, INVALID_REGULAR_EXPRESSION);
2. find or create the group (an *empty* classic group becomes a consumer group; a classic group
   with members answers GROUP_ID_NOT_FOUND) and the member (UNKNOWN_MEMBER_ID,
   FENCED_MEMBER_EPOCH, UNRELEASED_INSTANCE_ID, FENCED_INSTANCE_ID, GROUP_MAX_SIZE_REACHED);
3. update the member's subscription; bump the group epoch when membership, a subscription or the
   subscribed topics' partitions changed;
4. when the group epoch is ahead of the assignment epoch, compute the new target assignment
   with the group's server-side assignor (:mod:`litemq.coordinator.assignors`);
5. reconcile the member (:func:`litemq.coordinator.consumer_group.reconcile`);
6. append the changed records (:mod:`litemq.coordinator.consumer_group_records`) to
   ``__consumer_offsets``, and answer once they are committed.

Regular expressions (``SubscribedTopicRegex``) are RE2 patterns (``google-re2``, the library
Kafka's RE2/J ports: same syntax, linear-time matching, so no pattern a client sends can stall
the coordinator) matched against whole topic names, as Kafka does. Internal topics never match.
Regexes are resolved again at every heartbeat of the group, so a new matching topic is assigned
at the next heartbeat.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import re2

from litemq import limits
from litemq.coordinator.assignors import ASSIGNORS, Assignment, MemberSubscription, configured_assignors
from litemq.coordinator.consumer_group import (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH,
                                               ConsumerGroup, ConsumerGroupMember, MemberState, reconcile)
from litemq.coordinator.consumer_group_records import (CG_CURRENT_ASSIGNMENT, CG_MEMBER_METADATA, CG_METADATA,
                                                       CG_TARGET_MEMBER, CG_TARGET_METADATA, ConsumerGroupKey,
                                                       StoredConsumerMember, StoredCurrentAssignment,
                                                       decode_current_assignment_value,
                                                       decode_group_metadata_value, decode_member_value,
                                                       decode_target_member_value, decode_target_metadata_value,
                                                       encode_cg_key, encode_current_assignment_value,
                                                       encode_group_metadata_value, encode_member_value,
                                                       encode_target_member_value, encode_target_metadata_value)
from litemq.coordinator.group import GroupMetadata, GroupState
from litemq.coordinator.records import encode_group_key
from litemq.protocol.errors import ErrorCode as E

log = logging.getLogger("litemq.coordinator.coordinator")

Record = tuple[bytes, bytes | None]


@dataclass(slots=True)
class ConsumerHeartbeat:
    """One ConsumerGroupHeartbeat request, topics by name (the handler maps topic ids).

    ``None`` fields did not change since the member's previous heartbeat (KIP-848);
    ``owned`` is the member's owned partitions (None: not sent)."""

    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None
    rack_id: str | None
    rebalance_timeout_ms: int
    subscribed_topic_names: list[str] | None
    subscribed_topic_regex: str | None
    server_assignor: str | None
    owned: Assignment | None
    client_id: str
    client_host: str
    version: int
    describable: Callable[[Iterable[str]], set[str]] | None = None
    """The topics among the given ones the member's principal may DESCRIBE (the handler's ACL
    check), or None when every topic is (no authorizer): its regex matches are filtered by it."""


@dataclass(slots=True)
class HeartbeatResult:
    """The ConsumerGroupHeartbeat response: ``assignment`` None when not sent."""

    error: int
    error_message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: Assignment | None = None


def _assignment_equal(a: Assignment, b: Assignment) -> bool:
    return {t: ps for t, ps in a.items() if ps} == {t: ps for t, ps in b.items() if ps}


_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False  # a client's bad pattern is its INVALID_REGULAR_EXPRESSION, not our log line


@functools.lru_cache(maxsize=1024)
def compile_topic_regex(pattern: str):
    """The compiled RE2 ``pattern`` (Kafka's RE2/J syntax). Raises ``re2.error`` when invalid."""
    return re2.compile(pattern, _RE2_OPTIONS)


def _re2_message(exc: Exception) -> str:
    """google-re2 raises its errors with a bytes message."""
    arg = exc.args[0] if exc.args else exc
    return arg.decode(errors="replace") if isinstance(arg, bytes) else str(arg)


def _metadata_hash(topics: dict[str, int]) -> int:
    h = hashlib.blake2b(repr(sorted(topics.items())).encode(), digest_size=8).digest()
    return int.from_bytes(h, "big", signed=True)


class ConsumerGroupManager:
    """KIP-848 consumer groups of this coordinator (see the module docstring)."""

    # ================================================================== helpers
    def _assignor_names(self) -> list[str]:
        return configured_assignors(self.config.group_consumer_assignors)

    def _max_group_size(self) -> int:
        return min(self.config.group_consumer_max_size, limits.MAX_GROUP_MEMBERS)

    def _topic_ids(self, a: Assignment) -> dict[uuid.UUID, list[int]]:
        out = {}
        for t, ps in a.items():
            info = self.host.topic(t)
            if info is not None and ps:
                out[info.topic_id] = sorted(ps)
        return out

    def _topic_names(self, parts: dict[uuid.UUID, list[int]]) -> Assignment:
        by_id = {info.topic_id: name for name, info in self.host.topics().items()}
        return {by_id[tid]: frozenset(ps) for tid, ps in parts.items() if tid in by_id}

    def _regex_matches(self, regex: str | None) -> set[str]:
        """The existing non-internal topics ``regex`` matches in full (none for a bad one)."""
        if not regex:
            return set()
        try:
            rx = compile_topic_regex(regex)
        except re2.error:
            return set()
        return {name for name, info in self.host.topics().items() if not info.internal and rx.fullmatch(name)}

    def _resolve(self, names: tuple[str, ...], regex: str | None,
                 authorized: frozenset[str] | None = None) -> frozenset[str]:
        """The existing topics a subscription covers: ``names``, and the ``regex`` matches that
        are in ``authorized`` (all of them when None)."""
        topics = self.host.topics()
        out = {t for t in names if t in topics}
        matches = self._regex_matches(regex)
        out |= matches if authorized is None else matches & authorized
        return frozenset(out)

    def _resolved_subscriptions(self, group: ConsumerGroup) -> dict[str, frozenset[str]]:
        """member id -> the topics its subscription covers now; each distinct subscription is
        resolved once (members of a group usually share one)."""
        cache: dict[tuple, frozenset[str]] = {}
        out = {}
        for mid, m in group.members.items():
            key = (tuple(m.subscribed_topic_names), m.subscribed_topic_regex, m.regex_authorized)
            if key not in cache:
                cache[key] = self._resolve(*key)
            out[mid] = cache[key]
        return out

    def _authorize_regex(self, member: ConsumerGroupMember, hb: ConsumerHeartbeat) -> bool:
        """Refresh which of the member's regex matches its principal may DESCRIBE (Kafka 4.1
        ``filterTopicDescribeAuthorizedTopics``, here per member and at each heartbeat, so a topic
        created or an ACL added since shows up within a heartbeat interval); True when that set
        changed (the group epoch must go up)."""
        if hb.describable is None or not member.subscribed_topic_regex:
            authorized = None
        else:
            authorized = frozenset(hb.describable(sorted(self._regex_matches(member.subscribed_topic_regex))))
        changed = authorized != member.regex_authorized
        member.regex_authorized = authorized
        return changed

    def _subscription_metadata(self, group: ConsumerGroup) -> dict[str, int]:
        """Topic -> partition count of every topic a member subscribes to."""
        out: dict[str, int] = {}
        for t in set().union(*self._resolved_subscriptions(group).values()):
            info = self.host.topic(t)
            if info is not None:
                out[t] = info.num_partitions
        return out

    # ------------------------------------------------------------------ records
    def _member_record(self, group: ConsumerGroup, m: ConsumerGroupMember) -> Record:
        return (encode_cg_key(CG_MEMBER_METADATA, group.group_id, m.member_id), encode_member_value(
            StoredConsumerMember(m.instance_id, m.rack_id, m.client_id, m.client_host, list(m.subscribed_topic_names),
                                 m.subscribed_topic_regex, m.rebalance_timeout_ms, m.server_assignor)))

    def _current_record(self, group: ConsumerGroup, m: ConsumerGroupMember) -> Record:
        return (encode_cg_key(CG_CURRENT_ASSIGNMENT, group.group_id, m.member_id), encode_current_assignment_value(
            StoredCurrentAssignment(m.member_epoch, m.previous_member_epoch, int(m.state),
                                    self._topic_ids(m.assigned), self._topic_ids(m.pending_revocation))))

    def _target_record(self, group: ConsumerGroup, member_id: str) -> Record:
        return (encode_cg_key(CG_TARGET_MEMBER, group.group_id, member_id),
                encode_target_member_value(self._topic_ids(group.target.get(member_id, {}))))

    def _epoch_record(self, group: ConsumerGroup) -> Record:
        return (encode_cg_key(CG_METADATA, group.group_id),
                encode_group_metadata_value(group.group_epoch, group.metadata_hash))

    def _member_tombstones(self, group: ConsumerGroup, member_id: str) -> list[Record]:
        """Kafka writes the current assignment, then the target, then the member tombstone."""
        gid = group.group_id
        return [(encode_cg_key(CG_CURRENT_ASSIGNMENT, gid, member_id), None),
                (encode_cg_key(CG_TARGET_MEMBER, gid, member_id), None),
                (encode_cg_key(CG_MEMBER_METADATA, gid, member_id), None)]

    def consumer_group_tombstones(self, group: ConsumerGroup) -> list[Record]:
        """Records that remove ``group``'s consumer-group state (not its offsets)."""
        out: list[Record] = []
        for mid in list(group.members):
            out += self._member_tombstones(group, mid)
        out += [(encode_cg_key(CG_TARGET_METADATA, group.group_id), None),
                (encode_cg_key(CG_METADATA, group.group_id), None)]
        return out

    # ================================================================== timers
    def _schedule_session(self, group: ConsumerGroup, member: ConsumerGroupMember) -> None:
        if member.session_timer is not None:
            member.session_timer.cancel()
        timeout_ms = self.group_config_int(group.group_id, "consumer.session.timeout.ms")  # its group config
        member.session_timer = self.loop.call_later(timeout_ms / 1000, self._on_session_expired, group, member)

    def _on_session_expired(self, group: ConsumerGroup, member: ConsumerGroupMember) -> None:
        member.session_timer = None
        if group.members.get(member.member_id) is not member or self.groups.get(group.group_id) is not group:
            return
        if self.expiry_deferred(group.group_id):  # a deposed coordinator must not fence it (see there)
            member.session_timer = self.loop.call_later(limits.COORDINATOR_LEASE_RECHECK_MS / 1000,
                                                        self._on_session_expired, group, member)
            return
        log.info("group %s: member %s expired (session timeout %d ms)", group.group_id, member.member_id,
                 self.group_config_int(group.group_id, "consumer.session.timeout.ms"))
        self._fence_now(group, member, "session timeout")

    def _update_rebalance_timer(self, group: ConsumerGroup, member: ConsumerGroupMember) -> None:
        """A member with partitions to revoke must do so within its rebalance timeout, or it is
        removed (Kafka ``scheduleConsumerGroupRebalanceTimeout``)."""
        if member.state is MemberState.UNREVOKED_PARTITIONS:
            if member.rebalance_timer is None:
                timeout_ms = member.rebalance_timeout_ms if member.rebalance_timeout_ms > 0 else 300_000
                member.rebalance_timer = self.loop.call_later(timeout_ms / 1000, self._on_rebalance_expired,
                                                              group, member, member.member_epoch)
        elif member.rebalance_timer is not None:
            member.rebalance_timer.cancel()
            member.rebalance_timer = None

    def _on_rebalance_expired(self, group: ConsumerGroup, member: ConsumerGroupMember, epoch: int) -> None:
        member.rebalance_timer = None
        if (group.members.get(member.member_id) is not member or member.member_epoch != epoch
                or member.state is not MemberState.UNREVOKED_PARTITIONS):
            return
        if self.expiry_deferred(group.group_id):
            member.rebalance_timer = self.loop.call_later(limits.COORDINATOR_LEASE_RECHECK_MS / 1000,
                                                          self._on_rebalance_expired, group, member, epoch)
            return
        log.info("group %s: member %s did not revoke its partitions within %d ms", group.group_id,
                 member.member_id, member.rebalance_timeout_ms)
        self._fence_now(group, member, "rebalance timeout")

    @staticmethod
    def _cancel_member_timers(member: ConsumerGroupMember) -> None:
        for t in (member.session_timer, member.rebalance_timer):
            if t is not None:
                t.cancel()
        member.session_timer = member.rebalance_timer = None

    def cancel_consumer_group_timers(self, group: ConsumerGroup) -> None:
        for m in group.members.values():
            self._cancel_member_timers(m)

    def _fence_now(self, group: ConsumerGroup, member: ConsumerGroupMember, reason: str) -> None:
        """Remove ``member`` now, in the timer callback that checked it is still the group's
        member, and write the records in the background. (Removing it in the spawned task, as
        before, left an event-loop turn between the check and the removal: a heartbeat read in
        that turn renewed the member, which was then removed anyway, or a leave removed it
        first and the task removed it again.)"""
        self._spawn(self._append(group.group_id, self._remove_member(group, member, reason)))

    def _remove_member(self, group: ConsumerGroup, member: ConsumerGroupMember, reason: str) -> list[Record]:
        """Remove ``member`` (leave, fence, session or rebalance timeout), bump the group epoch;
        the records to append. The target assignment is recomputed at the next heartbeat."""
        self._cancel_member_timers(member)
        group.remove_member(member.member_id)
        group.group_epoch += 1
        group.subscription_metadata = self._subscription_metadata(group)
        group.metadata_hash = _metadata_hash(group.subscription_metadata)
        log.info("group %s: member %s removed (%s); group epoch %d", group.group_id, member.member_id, reason,
                 group.group_epoch)
        return self._member_tombstones(group, member.member_id) + [self._epoch_record(group)]

    # ================================================================== heartbeat
    def _validate(self, hb: ConsumerHeartbeat) -> tuple[int, str | None]:
        """Kafka ``throwIfConsumerGroupHeartbeatRequestIsInvalid``."""
        if not hb.group_id:
            return E.INVALID_REQUEST, "GroupId can't be empty."
        if hb.instance_id is not None and not hb.instance_id:
            return E.INVALID_REQUEST, "InstanceId can't be empty."
        if hb.rack_id is not None and not hb.rack_id:
            return E.INVALID_REQUEST, "RackId can't be empty."
        if hb.member_epoch < LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            return E.INVALID_REQUEST, f"MemberEpoch {hb.member_epoch} is invalid."
        if not hb.member_id and (hb.version >= 1 or hb.member_epoch != 0):
            return E.INVALID_REQUEST, "MemberId can't be empty."
        if len(hb.member_id) > limits.MAX_GROUP_ID_BYTES:
            return E.INVALID_REQUEST, "MemberId is too long."
        if hb.member_epoch == 0:
            if hb.rebalance_timeout_ms == -1:
                return E.INVALID_REQUEST, "RebalanceTimeoutMs must be provided in first request."
            if hb.owned is None or any(hb.owned.values()):
                return E.INVALID_REQUEST, "TopicPartitions must be empty when (re-)joining."
            if hb.subscribed_topic_names is None and hb.subscribed_topic_regex is None:
                return E.INVALID_REQUEST, "SubscribedTopicNames or SubscribedTopicRegex must be set in first request."
        if hb.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH and hb.instance_id is None:
            return E.INVALID_REQUEST, "InstanceId can't be null."
        if hb.subscribed_topic_regex is not None:
            try:
                compile_topic_regex(hb.subscribed_topic_regex)
            except re2.error as exc:
                return E.INVALID_REGULAR_EXPRESSION, f"SubscribedTopicRegex `{hb.subscribed_topic_regex}` is not a valid regular expression: {_re2_message(exc)}."
        if hb.server_assignor is not None and hb.server_assignor not in self._assignor_names():
            return E.UNSUPPORTED_ASSIGNOR, f"ServerAssignor {hb.server_assignor} is not supported. Supported assignors: {', '.join(self._assignor_names())}."
        return E.NONE, None

    def _consumer_group(self, group_id: str, create: bool, records: list[Record]
                        ) -> tuple[int, str | None, ConsumerGroup | None]:
        """Kafka ``getOrMaybeCreateConsumerGroup``: an empty classic group (or one with only
        committed offsets) is replaced by a consumer group keeping its offsets."""
        group = self.groups.get(group_id)
        if isinstance(group, ConsumerGroup) and not group.dead:
            return E.NONE, None, group
        if group is not None and not group.is_(GroupState.EMPTY):
            if group.is_(GroupState.DEAD):
                return E.COORDINATOR_NOT_AVAILABLE, None, None
            return E.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.", None
        if not create:
            return E.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.", None
        if group is None and len(self.groups) >= limits.MAX_GROUPS:
            return E.COORDINATOR_NOT_AVAILABLE, None, None
        cg = ConsumerGroup(group_id)
        if group is not None:  # an empty classic group: convert it
            cg.offsets, cg.pending_commits, cg.pending_txn_offsets = (
                group.offsets, group.pending_commits, group.pending_txn_offsets)
            if isinstance(group, GroupMetadata) and group.protocol_type is not None:
                records.append((encode_group_key(group_id), None))
                log.info("group %s: empty classic group converted to a consumer group", group_id)
            self._cancel_join_timer(group)
        self.groups[group_id] = cg
        return E.NONE, None, cg

    def _find_member(self, group: ConsumerGroup, hb: ConsumerHeartbeat, records: list[Record]
                     ) -> tuple[int, str | None, ConsumerGroupMember | None, str]:
        """(error, message, member, how) - Kafka ``getOrMaybeSubscribe{Dynamic,Static}ConsumerGroupMember``;
        ``how`` is ``existing``, ``new`` or ``replaced`` (a static member under a new member id)."""
        member = group.members.get(hb.member_id) if hb.member_id else None
        if hb.member_epoch == 0:
            static = group.static_member(hb.instance_id)
            if static is not None and static is not member:
                if static.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                    return (E.UNRELEASED_INSTANCE_ID, f"Static member {static.member_id} with instance id "
                            f"{hb.instance_id} is not released yet.", None, "")
                # The static member comes back under a new member id: it takes over the old one.
                new_id = hb.member_id or str(uuid.uuid4())
                records += self._member_tombstones(group, static.member_id)
                self._cancel_member_timers(static)
                target = group.target.pop(static.member_id, {})
                group.release(static)
                del group.members[static.member_id]
                static.member_id = new_id
                static.member_epoch = static.previous_member_epoch = 0
                static.state = MemberState.STABLE
                group.add_member(static)
                group.target[new_id] = target
                group.hold(static)
                records.append(self._target_record(group, new_id))
                log.info("group %s: static member %s rejoined as %s", group.group_id, hb.instance_id, new_id)
                return E.NONE, None, static, "replaced"
            if member is not None:
                if member.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                    # A static member that left with -2 rejoins under the same member id.
                    member.member_epoch = member.previous_member_epoch = 0
                    member.state = MemberState.STABLE
                return E.NONE, None, member, "existing"
            if len(group.members) >= self._max_group_size():
                return E.GROUP_MAX_SIZE_REACHED, f"The consumer group has reached its maximum capacity of {self._max_group_size()} members.", None, ""
            member = ConsumerGroupMember(hb.member_id or str(uuid.uuid4()), instance_id=hb.instance_id)
            group.add_member(member)
            return E.NONE, None, member, "new"
        if member is None:
            return E.UNKNOWN_MEMBER_ID, f"Member {hb.member_id} is not a member of group {group.group_id}.", None, ""
        if hb.instance_id is not None and group.static_members.get(hb.instance_id) != member.member_id:
            return E.FENCED_INSTANCE_ID, f"Instance id {hb.instance_id} is used by another member.", None, ""
        if hb.member_epoch > member.member_epoch:
            return E.FENCED_MEMBER_EPOCH, f"The consumer group member has a greater member epoch ({hb.member_epoch}) than the one known by the group coordinator ({member.member_epoch}).", None, ""
        if hb.member_epoch < member.member_epoch:
            subset = hb.owned is not None and all(ps <= member.assigned.get(t, frozenset())
                                                  for t, ps in hb.owned.items())
            if hb.member_epoch != member.previous_member_epoch or not subset:
                return E.FENCED_MEMBER_EPOCH, f"The consumer group member has a smaller member epoch ({hb.member_epoch}) than the one known by the group coordinator ({member.member_epoch}).", None, ""
        return E.NONE, None, member, "existing"

    async def consumer_group_heartbeat(self, hb: ConsumerHeartbeat) -> HeartbeatResult:
        """ConsumerGroupHeartbeat v0-1 (KIP-848; see the module docstring)."""
        err, msg = self._validate(hb)
        if err:
            return HeartbeatResult(err, msg)
        err = await self.current_coordinator_error(hb.group_id)
        if err:
            return HeartbeatResult(err)
        if hb.member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
            return await self._leave(hb)
        records: list[Record] = []
        err, msg, group = self._consumer_group(hb.group_id, hb.member_epoch == 0, records)
        if err:
            return HeartbeatResult(err, msg)
        err, msg, member, how = self._find_member(group, hb, records)
        is_new = how == "new"
        if err:
            if records:  # a conversion of an empty classic group is kept
                await self._append(group.group_id, records)
            return HeartbeatResult(err, msg)
        old_assigned, old_epoch, old_state = dict(member.assigned), member.member_epoch, member.state
        stored = self._member_record(group, member)
        bump = self._update_member(member, hb) or is_new
        bump = self._authorize_regex(member, hb) or bump
        if is_new or how == "replaced" or self._member_record(group, member) != stored:
            records.append(self._member_record(group, member))  # any field changed (rack, client id...)
        subscription = self._subscription_metadata(group)
        if bump or subscription != group.subscription_metadata:
            group.group_epoch += 1
            group.subscription_metadata = subscription
            group.metadata_hash = _metadata_hash(subscription)
            records.append(self._epoch_record(group))
            log.info("group %s: group epoch %d (%d member(s))", group.group_id, group.group_epoch,
                     len(group.members))
        if group.group_epoch > group.assignment_epoch:
            records += self._compute_target_assignment(group)
        if member.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            group.release(member)
            reconcile(member, group.assignment_epoch, group.target.get(member.member_id, {}), hb.owned,
                      group.owner_of)
            group.hold(member)
        if (is_new or member.member_epoch != old_epoch or member.state is not old_state
                or not _assignment_equal(member.assigned, old_assigned) or member.pending_revocation):
            records.append(self._current_record(group, member))
        self._schedule_session(group, member)
        self._update_rebalance_timer(group, member)
        if records:
            err, _ = await self._append(group.group_id, records)
            if err:
                return HeartbeatResult(err)
        full = (hb.rebalance_timeout_ms != -1 and hb.owned is not None
                and (hb.subscribed_topic_names is not None or hb.subscribed_topic_regex is not None))
        send_assignment = hb.member_epoch == 0 or full or not _assignment_equal(member.assigned, old_assigned)
        return HeartbeatResult(E.NONE, None, member.member_id, member.member_epoch,
                               self.group_config_int(group.group_id, "consumer.heartbeat.interval.ms"),
                               dict(member.assigned) if send_assignment else None)

    @staticmethod
    def _update_member(member: ConsumerGroupMember, hb: ConsumerHeartbeat) -> bool:
        """Apply the heartbeat's non-null fields; True when the subscription or assignor changed
        (the group epoch must go up)."""
        changed = False
        if hb.instance_id is not None:
            member.instance_id = hb.instance_id
        if hb.rack_id is not None:
            member.rack_id = hb.rack_id
        if hb.rebalance_timeout_ms != -1:
            member.rebalance_timeout_ms = hb.rebalance_timeout_ms
        member.client_id, member.client_host = hb.client_id, hb.client_host
        if hb.subscribed_topic_names is not None and sorted(hb.subscribed_topic_names) != sorted(member.subscribed_topic_names):
            member.subscribed_topic_names = sorted(set(hb.subscribed_topic_names))
            changed = True
        if hb.subscribed_topic_regex is not None and hb.subscribed_topic_regex != (member.subscribed_topic_regex or ""):
            member.subscribed_topic_regex = hb.subscribed_topic_regex or None
            changed = True
        if hb.server_assignor is not None and hb.server_assignor != member.server_assignor:
            member.server_assignor = hb.server_assignor
            changed = True
        return changed

    def _compute_target_assignment(self, group: ConsumerGroup) -> list[Record]:
        """Run the group's assignor for the group epoch; the records of what changed."""
        names = self._assignor_names()
        assignor = ASSIGNORS[group.preferred_assignor(names[0], names)]
        resolved = self._resolved_subscriptions(group)
        subs = {mid: MemberSubscription(resolved[mid], m.rack_id) for mid, m in group.members.items()}
        new = assignor.assign(subs, dict(group.subscription_metadata), group.target)
        records = []
        for mid in group.members:
            if mid not in group.target or not _assignment_equal(new.get(mid, {}), group.target[mid]):
                group.target[mid] = new.get(mid, {})
                records.append(self._target_record(group, mid))
        group.assignment_epoch = group.group_epoch
        records.append((encode_cg_key(CG_TARGET_METADATA, group.group_id),
                        encode_target_metadata_value(group.assignment_epoch)))
        log.info("group %s: target assignment of epoch %d computed by %s", group.group_id, group.assignment_epoch,
                 assignor.name)
        return records

    async def _leave(self, hb: ConsumerHeartbeat) -> HeartbeatResult:
        """MemberEpoch -1 (leave) or -2 (a static member leaves for now)."""
        group = self.groups.get(hb.group_id)
        if not isinstance(group, ConsumerGroup) or group.dead:
            return HeartbeatResult(E.GROUP_ID_NOT_FOUND, f"Group {hb.group_id} not found.")
        if hb.instance_id is not None:
            member = group.static_member(hb.instance_id)
            if member is None:
                return HeartbeatResult(E.UNKNOWN_MEMBER_ID, f"Instance id {hb.instance_id} is unknown.")
            if member.member_id != hb.member_id:
                return HeartbeatResult(E.FENCED_INSTANCE_ID, f"Instance id {hb.instance_id} is used by another member.")
        else:
            member = group.members.get(hb.member_id)
            if member is None:
                return HeartbeatResult(E.UNKNOWN_MEMBER_ID, f"Member {hb.member_id} is not a member of group {hb.group_id}.")
        if hb.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            member.previous_member_epoch = member.member_epoch
            member.member_epoch = LEAVE_GROUP_STATIC_MEMBER_EPOCH
            if member.rebalance_timer is not None:
                member.rebalance_timer.cancel()
                member.rebalance_timer = None
            self._schedule_session(group, member)
            log.info("group %s: static member %s (%s) left temporarily", group.group_id, member.member_id,
                     member.instance_id)
            records = [self._current_record(group, member)]
        else:
            records = self._remove_member(group, member, "the member left the group")
        err, _ = await self._append(group.group_id, records)
        if err:
            return HeartbeatResult(err)
        return HeartbeatResult(E.NONE, None, hb.member_id, hb.member_epoch, 0, None)

    # ================================================================== offsets checks
    def validate_consumer_commit(self, group: ConsumerGroup, member_id: str, member_epoch: int,
                                 api_version: int, transactional: bool, group_instance_id: str | None = None) -> int:
        """OffsetCommit/TxnOffsetCommit by a consumer-group member (Kafka
        ``ConsumerGroup.validateOffsetCommit``): NONE, UNKNOWN_MEMBER_ID, UNSUPPORTED_VERSION
        (OffsetCommit below v9), STALE_MEMBER_EPOCH (ILLEGAL_GENERATION for TxnOffsetCommit).

        A commit without a member epoch is accepted while the group has no members. A
        TxnOffsetCommit with generation -1, no member id and no instance id is accepted whatever
        the members (Kafka: "The TxnOffsetCommit API does not require the member id, the
        generation id and the group instance id fields. Hence, they are only validated if any of
        them is provided"): kafka-python's ``send_offsets_to_transaction(offsets, group_id)`` and
        Java's ``sendOffsetsToTransaction(offsets, String)`` send it so.
        """
        if member_epoch < 0 and not group.members:
            return E.NONE
        if transactional and member_epoch == -1 and member_id == "" and group_instance_id is None:
            return E.NONE
        member = group.members.get(member_id)
        if member is None:
            return E.UNKNOWN_MEMBER_ID
        if not transactional and api_version < 9:
            return E.UNSUPPORTED_VERSION
        if member_epoch != member.member_epoch:
            return E.ILLEGAL_GENERATION if transactional else E.STALE_MEMBER_EPOCH
        return E.NONE

    def validate_consumer_fetch(self, group: ConsumerGroup, member_id: str | None, member_epoch: int) -> int:
        """OffsetFetch v9+ with a member id and epoch (Kafka ``ConsumerGroup.validateOffsetFetch``)."""
        if member_epoch < 0 and not member_id:
            return E.NONE
        member = group.members.get(member_id or "")
        if member is None:
            return E.UNKNOWN_MEMBER_ID
        if member_epoch != member.member_epoch:
            return E.STALE_MEMBER_EPOCH
        return E.NONE

    # ================================================================== describe
    def consumer_group_assignor(self, group: ConsumerGroup) -> str:
        """The server assignor ``group`` uses now (most members' choice, else the default)."""
        names = self._assignor_names()
        return group.preferred_assignor(names[0], names)

    def consumer_group_describe(self, group_id: str) -> tuple[int, str | None, ConsumerGroup | None]:
        """ConsumerGroupDescribe of one group: (error, message, group); GROUP_ID_NOT_FOUND for
        an unknown group or one of another type."""
        err = self.coordinator_error(group_id)
        if err:
            return err, None, None
        group = self.groups.get(group_id)
        if group is None or group.is_(GroupState.DEAD):
            return E.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.", None
        if not isinstance(group, ConsumerGroup):
            return E.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.", None
        return E.NONE, None, group

    # ================================================================== loading
    def replay_consumer_group_record(self, state: dict, key: ConsumerGroupKey, value: bytes | None) -> None:
        """Collect one consumer-group record during load into ``state`` (group id -> dict)."""
        g = state.setdefault(key.group, {"epoch": None, "hash": 0, "assignment_epoch": 0, "members": {},
                                         "targets": {}, "current": {}})
        if key.kind == CG_METADATA:
            if value is None:
                state[key.group] = {"epoch": None, "hash": 0, "assignment_epoch": 0, "members": {}, "targets": {},
                                    "current": {}}
            else:
                g["epoch"], g["hash"] = decode_group_metadata_value(value)
        elif key.kind == CG_TARGET_METADATA:
            g["assignment_epoch"] = decode_target_metadata_value(value) if value is not None else 0
        elif key.kind in (CG_MEMBER_METADATA, CG_TARGET_MEMBER, CG_CURRENT_ASSIGNMENT):
            slot = {CG_MEMBER_METADATA: "members", CG_TARGET_MEMBER: "targets", CG_CURRENT_ASSIGNMENT: "current"}[key.kind]
            if value is None:
                g[slot].pop(key.member, None)
            else:
                decode = {CG_MEMBER_METADATA: decode_member_value, CG_TARGET_MEMBER: decode_target_member_value,
                          CG_CURRENT_ASSIGNMENT: decode_current_assignment_value}[key.kind]
                g[slot][key.member] = decode(value)

    def build_consumer_group(self, group_id: str, g: dict) -> ConsumerGroup | None:
        """The group the replayed records of ``group_id`` describe (None when it was deleted);
        every member gets a fresh session timeout, so members that do not come back to this
        coordinator are removed."""
        if g["epoch"] is None:
            return None
        group = ConsumerGroup(group_id, group_epoch=g["epoch"], assignment_epoch=g["assignment_epoch"],
                              metadata_hash=g["hash"])
        for mid, sm in g["members"].items():
            m = ConsumerGroupMember(mid, sm.instance_id, sm.rack_id, sm.client_id, sm.client_host,
                                    list(sm.subscribed_topic_names), sm.subscribed_topic_regex,
                                    sm.rebalance_timeout_ms, sm.server_assignor)
            cur = g["current"].get(mid)
            if cur is not None:
                m.member_epoch, m.previous_member_epoch = cur.member_epoch, cur.previous_member_epoch
                try:
                    m.state = MemberState(cur.state)
                except ValueError:
                    m.state = MemberState.UNKNOWN
                m.assigned = self._topic_names(cur.assigned)
                m.pending_revocation = self._topic_names(cur.pending_revocation)
            group.add_member(m)
            group.hold(m)
            if mid in g["targets"]:
                group.target[mid] = self._topic_names(g["targets"][mid])
        subscription = self._subscription_metadata(group)
        # Topics that changed while no coordinator watched show at the next heartbeat, which
        # bumps the group epoch (and writes it) as for any other change.
        group.subscription_metadata = subscription if _metadata_hash(subscription) == group.metadata_hash else {}
        for m in group.members.values():
            self._schedule_session(group, m)
            self._update_rebalance_timer(group, m)
        return group
