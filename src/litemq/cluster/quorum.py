"""The metadata quorum as DescribeQuorum (KIP-595, API 55; KIP-853 v2) describes it: the
``__cluster_metadata`` partition 0 as its Raft leader sees it.

Only the leader knows its followers' progress, so only the leader describes the quorum; any
other broker answers NOT_LEADER_OR_FOLLOWER (Kafka's ``KafkaRaftClient.handleDescribeQuorumRequest``).

Offsets are the metadata Raft log's: a replica's log end offset is its last replicated offset
+ 1, the high watermark the commit index + 1. LiteMQ's Raft leader keeps no fetch clock per
follower; the timestamps come from the brokers' heartbeats to the metadata leader (one every
``broker.heartbeat.interval.ms``): a replica's last fetch is its last heartbeat, its last
caught-up time that heartbeat when its log reached the leader's end (else -1). The leader's own
row has last fetch -1 and caught-up now, as Kafka's schema says.
"""

from __future__ import annotations

import base64
import binascii
import time
import uuid
from typing import Protocol

METADATA_TOPIC = "__cluster_metadata"
METADATA_PARTITION = 0


class QuorumSource(Protocol):
    """What :func:`describe_quorum` reads: a :class:`~litemq.cluster.manager.ClusterManager`."""

    meta: object
    image: object
    loop: object
    node_id: int
    _last_seen: dict[int, float]
    _applied_by: dict[int, int]


def directory_uuid(directory_id: str | None) -> uuid.UUID:
    """A ``directory.id`` (Kafka's 22-character base64 ``Uuid`` text) as a UUID; the zero
    UUID (Kafka's ``Uuid.ZERO_UUID``: unknown) when absent or unreadable."""
    if not directory_id:
        return uuid.UUID(int=0)
    try:
        return uuid.UUID(bytes=base64.urlsafe_b64decode(directory_id + "=="))
    except (binascii.Error, ValueError):
        try:
            return uuid.UUID(directory_id)
        except ValueError:
            return uuid.UUID(int=0)


def directory_id_text(directory_uuid: uuid.UUID) -> str | None:
    """A directory id as the cluster keeps it (Kafka's ``Uuid.toString``: 22 URL-safe base64
    characters), the reverse of :func:`directory_uuid`; None for the zero UUID (unknown)."""
    if directory_uuid.int == 0:
        return None
    return base64.urlsafe_b64encode(directory_uuid.bytes).decode("ascii").rstrip("=")


def describe_quorum(cluster: QuorumSource) -> dict | None:
    """The ``__cluster_metadata``-0 partition entry of a DescribeQuorum response plus its
    ``nodes`` (v2): ``{"partition": {...}, "nodes": [...]}`` with Kafka's field names, JSON-safe
    (it crosses the cluster RPC): ``replica_directory_id`` is UUID text (the zero UUID when
    unknown), timestamps are wall-clock ms; None when this broker is not the metadata leader."""
    node = cluster.meta.node
    if not node.is_leader:
        return None
    now_ms = int(time.time() * 1000)
    loop_now = cluster.loop.time()
    leader_end = node.last_offset + 1
    brokers = cluster.image.brokers

    def heard_ms(n: int) -> int:
        seen = cluster._last_seen.get(n)
        return -1 if seen is None else now_ms - int((loop_now - seen) * 1000)

    def state(n: int, end: int) -> dict:
        row = {"replica_id": n, "replica_directory_id": str(directory_uuid(cluster.image.directory_id_of(n))),
               "log_end_offset": end, "last_fetch_timestamp": -1, "last_caught_up_timestamp": -1}
        if n == cluster.node_id:
            row["last_caught_up_timestamp"] = now_ms
        elif end >= 0:
            row["last_fetch_timestamp"] = heard_ms(n)
            if end >= leader_end:
                row["last_caught_up_timestamp"] = row["last_fetch_timestamp"]
        return row

    voters = sorted(node.voters)
    voter_rows = []
    for v in voters:
        match = node.match_offset(v) if v != cluster.node_id else node.last_offset
        voter_rows.append(state(v, -1 if match is None or match < 0 else match + 1))
    observer_rows = []
    for n in sorted((set(brokers) | set(node.learners)) - set(voters)):
        match = node.match_offset(n)
        if match is None:  # not a Raft learner: how far it applied the log, from its heartbeats
            match = cluster._applied_by.get(n, -1)
        observer_rows.append(state(n, -1 if match < 0 else match + 1))
    nodes = []
    for v in voters:
        b = brokers.get(v)
        if b is not None:
            nodes.append({"node_id": v, "listeners": [{"name": name, "host": host, "port": port}
                                                      for name, (host, port) in sorted(b.endpoints.items())]})
    partition = {"partition_index": METADATA_PARTITION, "error_code": 0, "error_message": None,
                 "leader_id": cluster.node_id, "leader_epoch": node.term, "high_watermark": node.commit_index + 1,
                 "current_voters": voter_rows, "observers": observer_rows}
    return {"partition": partition, "nodes": nodes}
