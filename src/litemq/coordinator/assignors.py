"""Server-side partition assignors of KIP-848 groups (Kafka ``group.consumer.assignors``).

Pure functions over plain data: no asyncio, no I/O, no group objects, so any group type that
computes a *target assignment* on the coordinator (consumer groups, KIP-848; share groups,
KIP-932, could add their own assignor here) can use them.

Input shapes:

- ``members``: member id -> :class:`MemberSubscription` (the topic names the member's
  subscription resolves to, and its rack).
- ``topics``: topic name -> number of partitions, for every subscribed topic that exists.
- ``current``: member id -> {topic: partitions}, the previous target assignment (stickiness).

Output: member id -> {topic: frozenset of partitions}; every member of ``members`` is present
(possibly with an empty dict); a partition goes to at most one member.

Sources: Kafka ``org.apache.kafka.coordinator.group.assignor.UniformAssignor`` (sticky and
balanced: homogeneous subscriptions give every member ``P // N`` or ``P // N + 1`` partitions)
and ``RangeAssignor`` (per topic, contiguous ranges in member id order: co-partitioning). Racks
are carried but not used (Kafka's rack-aware placement is left out).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

Assignment = dict[str, frozenset[int]]
"""Topic name -> partitions of one member."""


@dataclass(frozen=True, slots=True)
class MemberSubscription:
    """What one member subscribes to, resolved to topic names (regexes already matched)."""

    topics: frozenset[str]
    rack_id: str | None = None


class PartitionAssignor(Protocol):
    """A server-side assignor: ``name`` as clients send it in ``ServerAssignor``."""

    name: str

    def assign(self, members: dict[str, MemberSubscription], topics: dict[str, int],
               current: dict[str, Assignment]) -> dict[str, Assignment]:
        """The new target assignment (see the module docstring for the shapes)."""


def _as_assignment(tps: set[tuple[str, int]]) -> Assignment:
    out: dict[str, set[int]] = {}
    for t, p in tps:
        out.setdefault(t, set()).add(p)
    return {t: frozenset(ps) for t, ps in out.items()}


class UniformAssignor:
    """Kafka's ``uniform`` assignor: balanced by partition count and sticky.

    1. every member keeps the partitions of its previous target that still exist and that it
       still subscribes to (each partition once);
    2. each unassigned partition goes to the subscribed member with the fewest partitions;
    3. while a member has two or more partitions more than another member subscribed to one of
       them, one such partition moves (the only moves made, so only what must move moves).
    """

    name = "uniform"

    def assign(self, members: dict[str, MemberSubscription], topics: dict[str, int],
               current: dict[str, Assignment]) -> dict[str, Assignment]:
        ids = sorted(members)
        owned: dict[str, set[tuple[str, int]]] = {m: set() for m in ids}
        owner: dict[tuple[str, int], str] = {}
        for m in ids:
            subs = members[m].topics
            for t, parts in sorted(current.get(m, {}).items()):
                if t not in subs or t not in topics:
                    continue
                for p in sorted(parts):
                    if 0 <= p < topics[t] and (t, p) not in owner:
                        owner[(t, p)] = m
                        owned[m].add((t, p))
        subscribers: dict[str, list[str]] = {}
        for m in ids:
            for t in members[m].topics:
                if t in topics:
                    subscribers.setdefault(t, []).append(m)
        for t in sorted(subscribers):
            for p in range(topics[t]):
                if (t, p) in owner:
                    continue
                m = min(subscribers[t], key=lambda x: (len(owned[x]), x))
                owner[(t, p)] = m
                owned[m].add((t, p))
        self._balance(ids, members, owned)
        return {m: _as_assignment(owned[m]) for m in ids}

    @staticmethod
    def _balance(ids: list[str], members: dict[str, MemberSubscription],
                 owned: dict[str, set[tuple[str, int]]]) -> None:
        for _ in range(sum(len(v) for v in owned.values()) + 1):
            moved = False
            for src in sorted(ids, key=lambda x: (-len(owned[x]), x)):
                for dst in sorted(ids, key=lambda x: (len(owned[x]), x)):
                    if len(owned[src]) - len(owned[dst]) <= 1:
                        break
                    subs = members[dst].topics
                    tp = next((tp for tp in sorted(owned[src], reverse=True) if tp[0] in subs), None)
                    if tp is not None:
                        owned[src].discard(tp)
                        owned[dst].add(tp)
                        moved = True
                        break
                if moved:
                    break
            if not moved:
                return


class RangeAssignor:
    """Kafka's ``range`` assignor: for each topic, its subscribers in member id order get
    contiguous ranges, the first ``P % N`` one partition more (co-partitioned topics line up)."""

    name = "range"

    def assign(self, members: dict[str, MemberSubscription], topics: dict[str, int],
               current: dict[str, Assignment]) -> dict[str, Assignment]:
        out: dict[str, dict[str, frozenset[int]]] = {m: {} for m in sorted(members)}
        for t in sorted(topics):
            subs = sorted(m for m in members if t in members[m].topics)
            if not subs:
                continue
            quota, extra = divmod(topics[t], len(subs))
            start = 0
            for i, m in enumerate(subs):
                n = quota + (1 if i < extra else 0)
                if n:
                    out[m][t] = frozenset(range(start, start + n))
                start += n
        return out


class SimpleAssignor:
    """The share-group assignor (KIP-932, Kafka 4.1 ``SimpleAssignor``; ``group.share.assignors``).

    Partitions of a share group may be assigned to several members at once. With at least as
    many partitions as members, each partition goes to one member, balanced and sticky (the
    ``uniform`` rules). With more members than partitions, every member gets one partition and
    each partition is shared by ``ceil(members / partitions)`` members at most: a member keeps
    its current partition while that partition is under its share, else it gets the least
    shared partition it subscribes to (ties: lowest topic, partition). So every member has
    something to consume and records of a partition are spread over its members.
    """

    name = "simple"

    def assign(self, members: dict[str, MemberSubscription], topics: dict[str, int],
               current: dict[str, Assignment]) -> dict[str, Assignment]:
        parts = sorted((t, p) for t, n in topics.items() if any(t in m.topics for m in members.values())
                       for p in range(n))
        if not parts:  # nothing subscribed exists (yet): every member waits with an empty assignment
            return {m: {} for m in members}
        if len(parts) >= len(members):
            return UniformAssignor().assign(members, topics, current)
        load = {tp: 0 for tp in parts}
        share = -(-len(members) // len(parts))
        out: dict[str, Assignment] = {}
        todo = []
        for m in sorted(members):
            subs = members[m].topics
            kept = next(((t, p) for t, ps in sorted(current.get(m, {}).items()) for p in sorted(ps)
                         if (t, p) in load and t in subs and load[(t, p)] < share), None)
            if kept is not None:
                load[kept] += 1
                out[m] = {kept[0]: frozenset((kept[1],))}
            else:
                todo.append(m)
        for m in todo:
            cands = [tp for tp in parts if tp[0] in members[m].topics]
            if not cands:
                out[m] = {}
                continue
            tp = min(cands, key=lambda x: (load[x], x))
            load[tp] += 1
            out[m] = {tp[0]: frozenset((tp[1],))}
        return out


ASSIGNORS: dict[str, PartitionAssignor] = {a.name: a for a in (UniformAssignor(), RangeAssignor())}
"""Every server-side assignor LiteMQ has, by name (``group.consumer.assignors`` picks among them)."""


def configured_assignors(setting: str) -> list[str]:
    """``group.consumer.assignors`` (comma separated names or Kafka class names) -> names, in
    order; the first is the default.

    Raises:
        ValueError: an empty list or an unknown assignor.
    """
    aliases = {"org.apache.kafka.coordinator.group.assignor.UniformAssignor": "uniform",
               "org.apache.kafka.coordinator.group.assignor.RangeAssignor": "range"}
    names = [aliases.get(s.strip(), s.strip().lower()) for s in setting.split(",") if s.strip()]
    if not names:
        raise ValueError("group.consumer.assignors: at least one assignor is needed")
    unknown = [n for n in names if n not in ASSIGNORS]
    if unknown:
        raise ValueError(f"group.consumer.assignors: unknown assignor(s) {', '.join(unknown)} "
                         f"(known: {', '.join(ASSIGNORS)})")
    return names
