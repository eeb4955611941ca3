"""A consumer group's state (Kafka ``GroupMetadata`` / ``MemberMetadata``, classic protocol).

States and transitions (Kafka ``GroupState``)::

    Empty ------------------> PreparingRebalance <------------------------+
      ^   (a member joins)       |      ^                                  |
      |                          |      | (join/leave/expiry/new protocol) |
      | (all members gone)       v      |                                  |
      +------------------- CompletingRebalance --(leader's SyncGroup)--> Stable
                                                                          |
    Dead: removed (DeleteGroups, expiry of an empty group's offsets)  <---+

- **Empty**: no members; committed offsets may exist (and expire after
  ``offsets.retention.minutes``). Simple (assign-mode) consumers commit only here.
- **PreparingRebalance**: waiting for every known member to (re)send JoinGroup, for at most
  the largest rebalance timeout of the members; members that have not rejoined by then are
  removed (dynamic ones) and the next generation begins.
- **CompletingRebalance**: the generation is chosen (JoinGroup responses sent, the leader got
  all members' metadata); waiting for the leader's SyncGroup with the assignment.
- **Stable**: every member has its assignment; heartbeats keep members alive.

This module is pure state: no asyncio, no I/O. :mod:`litemq.coordinator.coordinator` drives
it and owns timers and futures (held on the member objects as opaque attributes).
"""

from __future__ import annotations

import enum
import time
from dataclasses import dataclass, field
from typing import Any

from litemq.coordinator.records import (OffsetAndMetadata, StoredGroup, StoredMember, FormatError,
                                        subscription_topics)


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


_VALID_PREVIOUS = {
    GroupState.PREPARING_REBALANCE: {GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY},
    GroupState.COMPLETING_REBALANCE: {GroupState.PREPARING_REBALANCE},
    GroupState.STABLE: {GroupState.COMPLETING_REBALANCE},
    GroupState.EMPTY: {GroupState.PREPARING_REBALANCE},
    GroupState.DEAD: {GroupState.STABLE, GroupState.PREPARING_REBALANCE, GroupState.COMPLETING_REBALANCE,
                      GroupState.EMPTY, GroupState.DEAD},
}


def now_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass(eq=False)
class MemberMetadata:
    """One member (Kafka ``MemberMetadata``). ``protocols`` is [(name, metadata)] in the
    member's order of preference."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    is_new: bool = False
    # Driven by the coordinator: the pending JoinGroup / SyncGroup futures and the session timer.
    join_future: Any = None
    sync_future: Any = None
    heartbeat_timer: Any = None
    join_version: int = 0

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    @property
    def awaiting_join(self) -> bool:
        return self.join_future is not None

    @property
    def awaiting_sync(self) -> bool:
        return self.sync_future is not None

    def metadata_for(self, protocol: str | None) -> bytes:
        for name, md in self.protocols:
            if name == protocol:
                return md
        return b""

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        """Same protocols with the same metadata, in the same order (Kafka ``matches``)."""
        return self.protocols == protocols

    def vote(self, candidates: set[str]) -> str:
        """This member's first preferred protocol among ``candidates``."""
        for name, _ in self.protocols:
            if name in candidates:
                return name
        raise ValueError("member supports none of the candidate protocols")


@dataclass(eq=False)
class GroupMetadata:
    """One group (Kafka ``GroupMetadata``): membership, generation, protocol, offsets."""

    group_id: str
    state: GroupState = GroupState.EMPTY
    state_timestamp_ms: int = field(default_factory=now_ms)
    generation: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    members: dict[str, MemberMetadata] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)  # group instance id -> member id
    pending_members: dict[str, Any] = field(default_factory=dict)  # member id -> expiry timer
    new_member_added: bool = False
    # Committed offsets: (topic, partition) -> (OffsetAndMetadata, offset of its record)
    offsets: dict[tuple[str, int], tuple[OffsetAndMetadata, int]] = field(default_factory=dict)
    pending_commits: dict[tuple[str, int], int] = field(default_factory=dict)
    # TxnOffsetCommits of transactions not yet ended: producer id -> tp -> (offset, record offset)
    pending_txn_offsets: dict[int, dict[tuple[str, int], tuple[OffsetAndMetadata, int]]] = field(default_factory=dict)
    join_timer: Any = None
    join_deadline: float = 0.0
    initial_join_deadline: float = 0.0

    # ------------------------------------------------------------------ state
    def is_(self, state: GroupState) -> bool:
        return self.state is state

    def transition_to(self, state: GroupState) -> None:
        if self.state not in _VALID_PREVIOUS[state]:
            raise AssertionError(f"group {self.group_id}: illegal transition {self.state.value} -> {state.value}")
        self.state = state
        self.state_timestamp_ms = now_ms()

    # ------------------------------------------------------------------ members
    def add(self, member: MemberMetadata) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        self.members[member.member_id] = member
        if member.is_static:
            self.static_members[member.group_instance_id] = member.member_id
        if self.leader_id is None:
            self.leader_id = member.member_id

    def remove(self, member_id: str) -> MemberMetadata | None:
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        if member.is_static and self.static_members.get(member.group_instance_id) == member_id:
            del self.static_members[member.group_instance_id]
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        return member

    def replace_static_member(self, instance_id: str, old_id: str, new_id: str) -> MemberMetadata:
        """KIP-345: a static member rejoined with an unknown member id: it takes over."""
        member = self.members.pop(old_id)
        member.member_id = new_id
        self.members[new_id] = member
        self.static_members[instance_id] = new_id
        if self.leader_id == old_id:
            self.leader_id = new_id
        return member

    def static_member_id(self, instance_id: str | None) -> str | None:
        return None if instance_id is None else self.static_members.get(instance_id)

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    @property
    def awaiting_join_count(self) -> int:
        return sum(1 for m in self.members.values() if m.awaiting_join)

    def has_all_members_joined(self) -> bool:
        return len(self.members) == self.awaiting_join_count and not self.pending_members

    def not_yet_rejoined(self) -> list[MemberMetadata]:
        return [m for m in self.members.values() if not m.awaiting_join]

    def max_rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def maybe_elect_new_joined_leader(self) -> bool:
        """Keep a leader that rejoined, else pick any member that did (Kafka, KIP-345)."""
        leader = self.members.get(self.leader_id) if self.leader_id else None
        if leader is not None and leader.awaiting_join:
            return True
        for m in self.members.values():
            if m.awaiting_join:
                self.leader_id = m.member_id
                return True
        return False

    # ------------------------------------------------------------------ protocols
    def candidate_protocols(self) -> set[str]:
        sets = [{name for name, _ in m.protocols} for m in self.members.values()]
        return set.intersection(*sets) if sets else set()

    def supports_protocols(self, protocol_type: str, protocols: list[tuple[str, bytes]]) -> bool:
        """JoinGroup compatibility (Kafka ``supportsProtocols``)."""
        names = {n for n, _ in protocols}
        if not self.members:
            return bool(protocol_type) and bool(names)
        return protocol_type == self.protocol_type and bool(names & self.candidate_protocols())

    def select_protocol(self) -> str:
        """The candidate protocol most members prefer (ties: the first most-voted in member order)."""
        candidates = self.candidate_protocols()
        votes: dict[str, int] = {}
        for m in self.members.values():
            v = m.vote(candidates)
            votes[v] = votes.get(v, 0) + 1
        return max(votes, key=lambda k: votes[k])

    def init_next_generation(self) -> None:
        """Bump the generation; CompletingRebalance with the chosen protocol, or Empty."""
        self.generation += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.transition_to(GroupState.COMPLETING_REBALANCE)
        else:
            self.protocol_name = None
            self.transition_to(GroupState.EMPTY)
        self.new_member_added = False

    def subscribed_topics(self) -> set[str] | None:
        """Topics the members subscribe to (consumer protocol), None when not knowable."""
        if self.protocol_type != "consumer" or not self.protocol_name or not self.members:
            return None
        topics: set[str] = set()
        try:
            for m in self.members.values():
                topics |= subscription_topics(m.metadata_for(self.protocol_name))
        except FormatError:
            return None
        return topics

    def current_member_metadata(self) -> list[dict]:
        """The JoinGroup response's member list (for the leader)."""
        return [{"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                 "metadata": m.metadata_for(self.protocol_name)} for m in self.members.values()]

    # ------------------------------------------------------------------ persistence
    def to_stored(self) -> StoredGroup:
        return StoredGroup(
            protocol_type=self.protocol_type or "", generation=self.generation, protocol=self.protocol_name,
            leader=self.leader_id, current_state_timestamp_ms=self.state_timestamp_ms,
            members=[StoredMember(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                                  m.rebalance_timeout_ms, m.session_timeout_ms,
                                  m.metadata_for(self.protocol_name), m.assignment)
                     for m in self.members.values()])

    def load_stored(self, g: StoredGroup) -> None:
        """Restore membership from a GroupMetadataValue: Empty without members, else Stable."""
        self.protocol_type = g.protocol_type or None
        self.generation = g.generation
        self.protocol_name = g.protocol
        self.leader_id = g.leader
        self.members = {}
        self.static_members = {}
        for sm in g.members:
            m = MemberMetadata(sm.member_id, sm.group_instance_id, sm.client_id, sm.client_host,
                               sm.rebalance_timeout_ms, sm.session_timeout_ms, g.protocol_type,
                               [(g.protocol or "", sm.subscription)], sm.assignment)
            self.members[m.member_id] = m
            if m.is_static:
                self.static_members[m.group_instance_id] = m.member_id
        self.state = GroupState.STABLE if self.members else GroupState.EMPTY
        self.state_timestamp_ms = g.current_state_timestamp_ms if g.current_state_timestamp_ms >= 0 else now_ms()
        if self.leader_id not in self.members:
            self.leader_id = next(iter(self.members), None)
