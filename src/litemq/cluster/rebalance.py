"""Replica plans for removing a broker and for evening out replicas (issue 20): the pure part of
``litemq broker decommission`` and ``litemq cluster rebalance``, as Redpanda's decommission and
Cruise Control's replica-distribution goal do it, executed through AlterPartitionReassignments
(KIP-455) by the CLI.

An assignment is ``{(topic, partition): [replica, ...]}`` (first = preferred leader). A plan is
the same shape holding only the partitions whose replica list changes.

- :func:`decommission_plan`: every replica on the leaving broker goes to the least loaded live
  broker not already a replica, preferring one in a rack the partition does not use yet (racks
  registered, KIP-36); it takes the leaving broker's position in the list, so a partition it
  led is led by the newcomer (preferred leader). The replication factor is kept.
- :func:`rebalance_plan`: while the most loaded live broker holds 2 or more replicas more than
  the least loaded, one replica moves from the former to the latter (minimal moves: only
  partitions on over-loaded brokers move, each move narrows the spread); then preferred leaders
  (first replicas) are evened out by reordering replica lists (a reorder moves no data).

Pure: no I/O, no clock, no randomness.
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["PlanError", "decommission_plan", "rebalance_plan", "replica_counts"]

Assignment = dict[tuple[str, int], list[int]]


class PlanError(ValueError):
    """No plan is possible (e.g. fewer live brokers than a partition's replication factor)."""


def replica_counts(assignment: Mapping[tuple[str, int], list[int]], brokers) -> dict[int, int]:
    """broker id -> replicas it holds in ``assignment`` (every broker of ``brokers``, 0 if none)."""
    counts = {b: 0 for b in brokers}
    for replicas in assignment.values():
        for r in replicas:
            if r in counts:
                counts[r] += 1
    return counts


def _rack(racks: Mapping[int, str | None], b: int) -> str | None:
    return racks.get(b)


def _pick(candidates, replicas: list[int], counts: dict[int, int], racks: Mapping[int, str | None]) -> int:
    """The candidate whose rack the other ``replicas`` do not use (if racks are known), then the
    least loaded, then the lowest id."""
    used = {_rack(racks, r) for r in replicas}
    return min(candidates, key=lambda b: (_rack(racks, b) is not None and _rack(racks, b) in used, counts[b], b))


def decommission_plan(assignment: Mapping[tuple[str, int], list[int]], leaving: int, live,
                      racks: Mapping[int, str | None] | None = None) -> Assignment:
    """The moves that take every replica off broker ``leaving``, onto the other ``live`` brokers.

    Args:
        assignment: (topic, partition) -> current replicas.
        leaving: the broker id to empty.
        live: ids of the live (registered, unfenced) brokers; ``leaving`` may be among them.
        racks: broker id -> rack (``broker.rack``) or None.

    Returns:
        (topic, partition) -> new replicas, for the partitions with a replica on ``leaving``.

    Raises:
        PlanError: a partition's replication factor exceeds the live brokers other than ``leaving``.
    """
    racks = racks or {}
    others = sorted(set(live) - {leaving})
    counts = replica_counts(assignment, others)
    plan: Assignment = {}
    short = []
    for key in sorted(assignment):
        replicas = list(assignment[key])
        if leaving not in replicas:
            continue
        if len(replicas) > len(others):
            short.append(f"{key[0]}-{key[1]} (replication factor {len(replicas)})")
            continue
        rest = [r for r in replicas if r != leaving]
        candidates = [b for b in others if b not in replicas]
        if not candidates:  # a replica on a broker that is not live: not enough live ones
            short.append(f"{key[0]}-{key[1]} (replicas {replicas})")
            continue
        new = _pick(candidates, rest, counts, racks)
        counts[new] += 1
        plan[key] = [new if r == leaving else r for r in replicas]
    if short:
        raise PlanError(f"moving every replica off broker {leaving} would leave fewer live brokers "
                        f"({len(others)}: {others}) than these partitions need: {', '.join(short)}")
    return plan


def rebalance_plan(assignment: Mapping[tuple[str, int], list[int]], live,
                   racks: Mapping[int, str | None] | None = None) -> Assignment:
    """The moves (and reorders) that spread replicas, then preferred leaders, evenly over ``live``.

    Replicas on brokers that are not live are left where they are (not counted). A move never
    puts two replicas of a partition on one broker and, with racks, never lowers the number of
    racks a partition spans.

    Returns:
        (topic, partition) -> new replicas, for the partitions that change (empty: balanced).
    """
    racks = racks or {}
    brokers = sorted(set(live))
    current: Assignment = {k: list(v) for k, v in assignment.items()}
    if not brokers:
        return {}
    counts = replica_counts(current, brokers)
    while True:
        moved = False
        for src in sorted(brokers, key=lambda b: (-counts[b], b)):
            for dst in sorted(brokers, key=lambda b: (counts[b], b)):
                if counts[src] - counts[dst] < 2:
                    break
                key = _movable(current, src, dst, racks)
                if key is None:
                    continue
                current[key] = [dst if r == src else r for r in current[key]]
                counts[src] -= 1
                counts[dst] += 1
                moved = True
                break
            if moved:
                break
        if not moved:
            break
    _even_leaders(current, brokers)
    return {k: v for k, v in current.items() if v != list(assignment[k])}


def _movable(current: Assignment, src: int, dst: int, racks: Mapping[int, str | None]) -> tuple[str, int] | None:
    for key in sorted(current):
        replicas = current[key]
        if src in replicas and dst not in replicas and _rack_ok(replicas, src, dst, racks):
            return key
    return None


def _rack_ok(replicas: list[int], src: int, dst: int, racks: Mapping[int, str | None]) -> bool:
    """Whether replacing ``src`` by ``dst`` keeps as many distinct racks (KIP-36)."""
    after = [dst if r == src else r for r in replicas]
    return len({_rack(racks, r) for r in after}) >= len({_rack(racks, r) for r in replicas})


def _even_leaders(current: Assignment, brokers: list[int]) -> None:
    """Reorders replica lists (in place) so first replicas spread evenly over ``brokers``."""
    leads = {b: 0 for b in brokers}
    for replicas in current.values():
        if replicas and replicas[0] in leads:
            leads[replicas[0]] += 1
    for _ in range(len(current) * len(brokers) + 1):
        src = max(brokers, key=lambda b: (leads[b], -b))
        dst = min(brokers, key=lambda b: (leads[b], b))
        if leads[src] - leads[dst] < 2:
            return
        key = next((k for k in sorted(current) if current[k] and current[k][0] == src and dst in current[k]), None)
        if key is None:
            return
        replicas = current[key]
        replicas.remove(dst)
        current[key] = [dst] + replicas
        leads[src] -= 1
        leads[dst] += 1
