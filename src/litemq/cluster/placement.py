"""Rack-aware replica placement (KIP-36): the replicas of a new partition in distinct racks.

When the live brokers registered racks (``broker.rack``), CreateTopics and CreatePartitions
without a manual assignment place each partition's replicas in as many different racks as
possible, as Kafka does: with a replication factor up to the number of racks every replica is
in its own rack, above it every rack holds one. Leaders (first replicas) still go round robin,
over the brokers interleaved by rack (Kafka ``AdminUtils.getRackAlternatedBrokerList``: racks
in name order, one broker of each in turn, each rack's brokers in id order), so consecutive
partitions start in different racks too. Brokers without a rack count as one more rack (as
KRaft's ``StripedReplicaPlacer`` treats them; ZooKeeper-era Kafka refused the mix). Without any
rack this is :func:`~litemq.cluster.image.assign_replicas` exactly.

Pure: no I/O, no clock, no randomness (every broker must compute the same record).
"""

from __future__ import annotations

from collections.abc import Mapping

from litemq.cluster.image import assign_replicas
from litemq.protocol.errors import ErrorCode, KafkaError

__all__ = ["rack_alternated", "assign_replicas_rack_aware"]


def rack_alternated(broker_ids, racks: Mapping[int, str | None]) -> list[int]:
    """``broker_ids`` interleaved by rack: ``{1: a, 2: a, 3: b, 4: c}`` -> ``[1, 3, 4, 2]``."""
    by_rack: dict[str, list[int]] = {}
    for b in sorted(broker_ids):
        by_rack.setdefault(_rack_key(racks.get(b)), []).append(b)
    groups = [by_rack[r] for r in sorted(by_rack)]
    out: list[int] = []
    for i in range(max((len(g) for g in groups), default=0)):
        out.extend(g[i] for g in groups if i < len(g))
    return out


def _rack_key(rack: str | None) -> str:
    return "\0" if rack is None else "r" + rack  # brokers without a rack: one group, sorted first


def assign_replicas_rack_aware(broker_ids, racks: Mapping[int, str | None], num_partitions: int,
                               replication_factor: int, start: int) -> list[list[int]]:
    """Replica lists of ``num_partitions`` new partitions (first = preferred leader) over
    ``broker_ids`` whose racks are ``racks`` (node id -> rack or None); ``start`` rotates the
    leaders as in :func:`~litemq.cluster.image.assign_replicas`.

    Raises:
        KafkaError(INVALID_REPLICATION_FACTOR): more replicas than brokers, or fewer than 1.
    """
    ids = sorted(broker_ids)
    if all(racks.get(b) is None for b in ids):
        return assign_replicas(ids, num_partitions, replication_factor, start)
    n = len(ids)
    if not 1 <= replication_factor <= n:
        raise KafkaError(f"replication factor {replication_factor} is larger than the {n} available broker(s)",
                         ErrorCode.INVALID_REPLICATION_FACTOR)
    arranged = rack_alternated(ids, racks)
    out = []
    for i in range(num_partitions):
        first = (start + i) % n
        candidates = [arranged[(first + k) % n] for k in range(n)]
        chosen: list[int] = []
        used: set[str] = set()
        for b in candidates:  # one replica per rack first
            if len(chosen) < replication_factor and _rack_key(racks.get(b)) not in used:
                chosen.append(b)
                used.add(_rack_key(racks.get(b)))
        for b in candidates:  # more replicas than racks: the rest in the same order
            if len(chosen) < replication_factor and b not in chosen:
                chosen.append(b)
        out.append(chosen)
    return out
