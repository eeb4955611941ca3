"""A KIP-848 consumer group's state and the member reconciliation rules (Kafka ``ConsumerGroup``,
``ConsumerGroupMember``, ``CurrentAssignmentBuilder``).

Epochs:

- the **group epoch** goes up whenever the group's membership or subscriptions change (a member
  joins or leaves, a subscription or the partitions of a subscribed topic change);
- the **assignment epoch** is the group epoch the current *target assignment* was computed for;
- each member has a **member epoch**: the assignment epoch it has reconciled to. A member moves
  to a newer epoch only once it has revoked what it must give up, and a partition is given to
  its new owner only once its previous owner no longer holds it (it is *unreleased* until then).

Group states (``ConsumerGroupDescribe``'s ``GroupState``): Empty (no members), Assigning
(group epoch > assignment epoch), Reconciling (a member is not at the assignment epoch or has
partitions to revoke or receive), Stable, Dead (removed).

Pure state: no asyncio, no I/O. :mod:`litemq.coordinator.consumer_group_manager` drives it and
owns the timers (held on members as opaque attributes). Topics are named; topic ids are the
handlers' and records' business.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, Callable

from litemq.coordinator.assignors import Assignment
from litemq.coordinator.group import now_ms
from litemq.coordinator.records import OffsetAndMetadata

LEAVE_GROUP_MEMBER_EPOCH = -1
"""MemberEpoch of a heartbeat that leaves the group (KIP-848)."""
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2
"""MemberEpoch of a static member's heartbeat that leaves for now and will rejoin (KIP-848); the
member keeps its partitions until its session times out or its instance id rejoins."""


class MemberState(enum.IntEnum):
    """Kafka ``MemberState`` (the value is the ``State`` of a CurrentMemberAssignment record)."""

    STABLE = 0
    UNREVOKED_PARTITIONS = 1
    UNRELEASED_PARTITIONS = 2
    UNKNOWN = 127


class ConsumerGroupState(enum.Enum):
    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(eq=False)
class ConsumerGroupMember:
    """One member (Kafka ``ConsumerGroupMember``): its subscription and where it is in reconciling."""

    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: list[str] = field(default_factory=list)
    subscribed_topic_regex: str | None = None
    rebalance_timeout_ms: int = -1
    server_assignor: str | None = None
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: MemberState = MemberState.STABLE
    assigned: Assignment = field(default_factory=dict)
    """Partitions the member may use now (sent to it)."""
    pending_revocation: Assignment = field(default_factory=dict)
    """Partitions it still holds and must give up before it moves to a newer epoch."""
    # Driven by the manager: the session and rebalance (revocation) timers.
    session_timer: Any = None
    rebalance_timer: Any = None
    regex_authorized: frozenset[str] | None = None
    """Topics matching ``subscribed_topic_regex`` that the member's principal may DESCRIBE, as
    of its last heartbeat (Kafka 4.1 filters regex matches by the member's ACLs); None: no
    authorizer, or not known yet (a member reloaded from the log until it heartbeats)."""

    @property
    def is_static(self) -> bool:
        return self.instance_id is not None

    def owned_partitions(self) -> set[tuple[str, int]]:
        """Every partition this member holds (assigned or pending revocation)."""
        return {(t, p) for a in (self.assigned, self.pending_revocation) for t, ps in a.items() for p in ps}


def _sub(a: set[int] | frozenset[int], b: set[int] | frozenset[int]) -> frozenset[int]:
    return frozenset(a) - frozenset(b)


def _owns_any(owned: Assignment | None, partitions: Assignment) -> bool:
    """Whether the member's reported ``owned`` partitions (None: not reported, assume yes) still
    include any of ``partitions``."""
    if owned is None:
        return True
    return any(owned.get(t, frozenset()) & ps for t, ps in partitions.items())


def reconcile(member: ConsumerGroupMember, target_epoch: int, target: Assignment, owned: Assignment | None,
              owner_of: Callable[[str, int], str | None]) -> None:
    """Move ``member`` towards ``target`` (its part of the target assignment of ``target_epoch``),
    in place (Kafka ``CurrentAssignmentBuilder.build``).

    ``owned`` is what the member reported holding in this heartbeat (None when it did not say);
    ``owner_of(topic, partition)`` is the member currently holding a partition (None if free).

    - STABLE at an older epoch, or UNRELEASED_PARTITIONS: compute the next assignment.
    - UNREVOKED_PARTITIONS: wait until ``owned`` no longer has any partition pending
      revocation; then move to ``min(epoch + 1, target_epoch)`` and compute the next assignment.
    """
    if member.state is MemberState.STABLE:
        if member.member_epoch != target_epoch:
            _next_assignment(member, member.member_epoch, target_epoch, target, owner_of)
    elif member.state is MemberState.UNREVOKED_PARTITIONS:
        if not _owns_any(owned, member.pending_revocation):
            _next_assignment(member, min(member.member_epoch + 1, target_epoch), target_epoch, target, owner_of)
    elif member.state is MemberState.UNRELEASED_PARTITIONS:
        _next_assignment(member, member.member_epoch, target_epoch, target, owner_of)


def _set_epoch(member: ConsumerGroupMember, epoch: int) -> None:
    if epoch != member.member_epoch:
        member.previous_member_epoch = member.member_epoch
        member.member_epoch = epoch


def _next_assignment(member: ConsumerGroupMember, member_epoch: int, target_epoch: int, target: Assignment,
                     owner_of: Callable[[str, int], str | None]) -> None:
    """Kafka ``CurrentAssignmentBuilder.computeNextAssignment``."""
    new_assigned: dict[str, frozenset[int]] = {}
    revoke: dict[str, frozenset[int]] = {}
    to_assign: dict[str, frozenset[int]] = {}
    unreleased = False
    for t in sorted(set(target) | set(member.assigned)):
        want = target.get(t, frozenset())
        have = member.assigned.get(t, frozenset())
        keep = frozenset(have & want)
        gone = _sub(have, keep)
        new = {p for p in _sub(want, keep) if owner_of(t, p) in (None, member.member_id)}
        if len(new) != len(_sub(want, keep)):
            unreleased = True
        if keep:
            new_assigned[t] = keep
        if gone:
            revoke[t] = gone
        if new:
            to_assign[t] = frozenset(new)
    if revoke:
        member.state = MemberState.UNREVOKED_PARTITIONS
        _set_epoch(member, member_epoch)
        member.assigned = new_assigned
        member.pending_revocation = revoke
        return
    for t, ps in to_assign.items():
        new_assigned[t] = new_assigned.get(t, frozenset()) | ps
    member.state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
    _set_epoch(member, target_epoch)
    member.assigned = new_assigned
    member.pending_revocation = {}


@dataclass(eq=False)
class ConsumerGroup:
    """One KIP-848 consumer group (Kafka ``ConsumerGroup``): members, epochs, target assignment,
    current partition owners and committed offsets (the offsets fields are those of the classic
    :class:`~litemq.coordinator.group.GroupMetadata`, so the offsets manager serves both)."""

    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ConsumerGroupMember] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)  # instance id -> member id
    target: dict[str, Assignment] = field(default_factory=dict)  # member id -> target assignment
    owners: dict[tuple[str, int], str] = field(default_factory=dict)  # partition -> member holding it
    subscription_metadata: dict[str, int] = field(default_factory=dict)  # topic -> partitions
    metadata_hash: int = 0
    dead: bool = False
    state_timestamp_ms: int = field(default_factory=now_ms)
    # Committed offsets, as GroupMetadata's.
    offsets: dict[tuple[str, int], tuple[OffsetAndMetadata, int]] = field(default_factory=dict)
    pending_commits: dict[tuple[str, int], int] = field(default_factory=dict)
    pending_txn_offsets: dict[int, dict[tuple[str, int], tuple[OffsetAndMetadata, int]]] = field(default_factory=dict)
    pending_members: dict[str, Any] = field(default_factory=dict)  # always empty (classic KIP-394 only)

    group_type = "consumer"
    protocol_type = "consumer"

    # ------------------------------------------------------------------ state
    @property
    def state(self) -> ConsumerGroupState:
        if self.dead:
            return ConsumerGroupState.DEAD
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.group_epoch > self.assignment_epoch:
            return ConsumerGroupState.ASSIGNING
        for m in self.members.values():
            if m.member_epoch != self.assignment_epoch or m.state is not MemberState.STABLE:
                if m.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                    return ConsumerGroupState.RECONCILING
        return ConsumerGroupState.STABLE

    def is_(self, state: enum.Enum) -> bool:
        """Whether the state has the name of ``state`` (a ConsumerGroupState, or a classic
        GroupState: Empty, Stable and Dead mean the same for both group types)."""
        return self.state.value == state.value

    # ------------------------------------------------------------------ members
    def add_member(self, member: ConsumerGroupMember) -> None:
        self.members[member.member_id] = member
        if member.instance_id is not None:
            self.static_members[member.instance_id] = member.member_id

    def remove_member(self, member_id: str) -> ConsumerGroupMember | None:
        """Forget a member, its target assignment and the partitions it holds."""
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        if member.instance_id is not None and self.static_members.get(member.instance_id) == member_id:
            del self.static_members[member.instance_id]
        self.target.pop(member_id, None)
        self.release(member)
        if not self.members:
            self.state_timestamp_ms = now_ms()
        return member

    def release(self, member: ConsumerGroupMember) -> None:
        """Drop ``member`` as the holder of every partition it holds."""
        for tp in member.owned_partitions():
            if self.owners.get(tp) == member.member_id:
                del self.owners[tp]

    def hold(self, member: ConsumerGroupMember) -> None:
        """Record ``member`` as the holder of every partition it holds (after :meth:`release`)."""
        for tp in member.owned_partitions():
            self.owners[tp] = member.member_id

    def owner_of(self, topic: str, partition: int) -> str | None:
        return self.owners.get((topic, partition))

    def static_member(self, instance_id: str | None) -> ConsumerGroupMember | None:
        member_id = self.static_members.get(instance_id) if instance_id is not None else None
        return self.members.get(member_id) if member_id is not None else None

    def subscribed_topics(self) -> set[str]:
        """Topics the members subscribe to, regexes resolved (for offset expiry and OffsetDelete)."""
        return set(self.subscription_metadata)

    def preferred_assignor(self, default: str, allowed: list[str]) -> str:
        """The server assignor most members asked for (ties: the first configured), else ``default``."""
        votes: dict[str, int] = {}
        for m in self.members.values():
            if m.server_assignor in allowed:
                votes[m.server_assignor] = votes.get(m.server_assignor, 0) + 1
        if not votes:
            return default
        return max(allowed, key=lambda a: (votes.get(a, 0), -allowed.index(a)))
