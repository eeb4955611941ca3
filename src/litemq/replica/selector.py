"""Which replica a consumer should fetch a partition from (KIP-392, fetch from follower).

A partition's leader asks this when it answers a consumer's Fetch (v11+, which carries the
consumer's ``client.rack`` as ``rack_id``) on a broker with ``replica.selector.class`` set to
Kafka's ``org.apache.kafka.common.replica.RackAwareReplicaSelector``. The answer goes back as the
partition's ``preferred_read_replica``; the consumer then fetches from that replica until it
errs, and comes back to the leader.

Rules (Kafka ``RackAwareReplicaSelector.select`` over the replicas
``ReplicaManager.findPreferredReadReplica`` offers it):

- the candidates are the leader and the followers that are in sync, have a log end offset at or
  past the fetch offset, and are reachable on the client's listener (``Node.noNode()``, which
  matches no rack, otherwise);
- a client without a rack, or in the leader's rack, or in a rack no candidate is in: the leader
  (no preferred replica, -1 on the wire);
- otherwise the most caught-up candidate in the client's rack (highest log end offset; Kafka's
  comparator then prefers the most recently caught up and then the highest broker id: LiteMQ
  takes the highest broker id).

Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

__all__ = ["NO_PREFERRED_REPLICA", "rack_aware_preferred_replica"]

NO_PREFERRED_REPLICA = -1
"""``preferred_read_replica`` when the leader itself should serve (FetchResponse v11+)."""


def rack_aware_preferred_replica(client_rack: str | None, leader_id: int, follower_log_ends: Mapping[int, int],
                                 fetch_offset: int, rack_of: Callable[[int], str | None]) -> int:
    """The ``preferred_read_replica`` for one partition (see the module docstring).

    Args:
        client_rack: the Fetch request's ``rack_id`` ("" or None: the client has none).
        leader_id: the partition's leader (this broker).
        follower_log_ends: node id -> log end offset of each in-sync follower reachable on the
            client's listener (any offsets, as long as ``fetch_offset`` is in the same ones).
        fetch_offset: the offset the consumer fetches from.
        rack_of: node id -> its ``broker.rack`` (None: no rack).

    Returns:
        a follower's node id, or :data:`NO_PREFERRED_REPLICA` (-1) when the leader should serve.
    """
    if not client_rack or rack_of(leader_id) == client_rack:
        return NO_PREFERRED_REPLICA
    same_rack = [(end, node) for node, end in follower_log_ends.items()
                 if node != leader_id and end >= fetch_offset and rack_of(node) == client_rack]
    if not same_rack:
        return NO_PREFERRED_REPLICA
    return max(same_rack)[1]
