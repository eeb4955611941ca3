"""The metadata quorum's admin APIs: DescribeQuorum (KIP-595, API 55, v0-v2: KIP-853 adds
directory ids and the voters' listeners) and UnregisterBroker (KIP-631, API 64, v0).

DescribeQuorum describes ``__cluster_metadata`` partition 0 (:mod:`litemq.cluster.quorum`).
Only the metadata leader knows the followers' progress: any other broker forwards the request
to it (cluster RPC ``describe_quorum``), as Kafka's brokers forward DescribeQuorum to the active
controller (``KafkaApis``: ``forwardToController``). When no leader is known or it does not
answer within ``limits.DESCRIBE_QUORUM_FORWARD_MS``, the answer is the Raft one
(``KafkaRaftClient.handleDescribeQuorumRequest`` on a controller that is not the leader):
NOT_LEADER_OR_FOLLOWER on the partition (LiteMQ fills in the leader it knows, -1 if none, and
its epoch). A request naming anything but that one partition is UNKNOWN_TOPIC_OR_PARTITION on
each partition it names. A single broker (no cluster) is its own quorum: one voter, itself.

UnregisterBroker removes a broker's registration with an ``unregister_broker`` metadata record
(through the metadata leader, KIP-590 forwarding) and answers once it is applied here:
BROKER_ID_NOT_REGISTERED for an id that is not registered. As Kafka's controller
(``ReplicationControlManager.unregisterBroker``) a live broker is not refused: it is removed,
and its next heartbeat registers it again.

Authorization (Kafka ``KafkaApis``): DESCRIBE on the cluster for DescribeQuorum, ALTER on the
cluster for UnregisterBroker; refused: CLUSTER_AUTHORIZATION_FAILED at the top level.
"""

from __future__ import annotations

import asyncio
import time
import uuid

from litemq import limits
from litemq.broker.authz import authorize
from litemq.cluster.quorum import METADATA_PARTITION, METADATA_TOPIC, describe_quorum
from litemq.protocol.errors import ErrorCode, KafkaError
from litemq.security.acl_operations import AclOperation, ResourceType

_DENIED = "Authorization failed."


def _answer(error_code: int, message: str | None, partitions: list[dict], nodes: list[dict]) -> dict:
    return {"error_code": int(error_code), "error_message": message,
            "topics": [{"topic_name": METADATA_TOPIC, "partitions": partitions}] if partitions else [],
            "nodes": nodes}


def _single_broker_quorum(runtime) -> dict:
    """A broker without a cluster: one voter, itself, every record committed at once."""
    me = {"replica_id": runtime.config.node_id, "replica_directory_id": str(uuid.UUID(int=0)), "log_end_offset": 0,
          "last_fetch_timestamp": -1, "last_caught_up_timestamp": int(time.time() * 1000)}
    partition = {"partition_index": METADATA_PARTITION, "error_code": 0, "error_message": None,
                 "leader_id": runtime.config.node_id, "leader_epoch": 0, "high_watermark": 0,
                 "current_voters": [me], "observers": []}
    return {"partition": partition, "nodes": []}


def _to_wire(view: dict) -> dict:
    """The JSON view of :func:`~litemq.cluster.quorum.describe_quorum` with UUID directory ids."""
    part = dict(view["partition"])
    for key in ("current_voters", "observers"):
        part[key] = [{**row, "replica_directory_id": uuid.UUID(row["replica_directory_id"])} for row in part[key]]
    return {"partition": part, "nodes": view["nodes"]}


async def _leader_view(cluster) -> dict | None:
    """The metadata leader's quorum view: this broker's own when it leads, else asked of the
    leader it knows; None when none is known or it did not answer in time."""
    view = describe_quorum(cluster)
    leader = cluster.meta.node.leader_id
    if view is not None or leader is None or leader == cluster.node_id:
        return view
    try:
        reply = await cluster.transport.rpc(leader, {"op": "describe_quorum"},
                                            limits.DESCRIBE_QUORUM_FORWARD_MS / 1000)
    except (ConnectionError, asyncio.TimeoutError):
        return None
    return reply if "partition" in reply else None


async def _serve_describe_quorum(cluster) -> dict:
    """RPC ``describe_quorum``: this broker's view if it is the metadata leader."""
    view = describe_quorum(cluster)
    return view if view is not None else {"error": int(ErrorCode.NOT_LEADER_OR_FOLLOWER),
                                          "message": "not the metadata leader"}


async def handle_describe_quorum(ctx, req) -> dict:
    runtime = ctx.runtime
    if not authorize(ctx, AclOperation.DESCRIBE, ResourceType.CLUSTER):
        return _answer(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, _DENIED, [], [])
    named = [(t.topic_name, p.partition_index) for t in req.topics for p in t.partitions]
    if named != [(METADATA_TOPIC, METADATA_PARTITION)]:  # Kafka's hasValidTopicPartition
        return {"error_code": 0, "error_message": None, "nodes": [], "topics": [
            {"topic_name": t.topic_name, "partitions": [
                {"partition_index": p.partition_index, "error_code": int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
                 "error_message": None, "leader_id": -1, "leader_epoch": -1, "high_watermark": -1,
                 "current_voters": [], "observers": []} for p in t.partitions]} for t in req.topics]}
    cluster = runtime.cluster
    view = _single_broker_quorum(runtime) if cluster is None else await _leader_view(cluster)
    if view is None:
        node = cluster.meta.node
        leader = -1 if node.leader_id is None else node.leader_id
        return _answer(0, None, [{"partition_index": METADATA_PARTITION,
                                  "error_code": int(ErrorCode.NOT_LEADER_OR_FOLLOWER),
                                  "error_message": f"this broker is not the metadata leader (leader: {leader})",
                                  "leader_id": leader, "leader_epoch": node.term, "high_watermark": -1,
                                  "current_voters": [], "observers": []}], [])
    view = _to_wire(view)
    return _answer(0, None, [view["partition"]], view["nodes"])


async def handle_unregister_broker(ctx, req) -> dict:
    runtime = ctx.runtime
    if not authorize(ctx, AclOperation.ALTER, ResourceType.CLUSTER):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "error_message": _DENIED}
    cluster = runtime.cluster
    broker_id = int(req.broker_id)
    try:
        if cluster is None:  # the only broker is this one, registered as long as it runs
            if broker_id != runtime.config.node_id:
                raise KafkaError(f"Broker ID {broker_id} is not currently registered",
                                 ErrorCode.BROKER_ID_NOT_REGISTERED)
        else:
            await cluster.admin("unregister_broker", node_id=broker_id)
    except KafkaError as exc:
        return {"throttle_time_ms": 0, "error_code": int(exc.code), "error_message": str(exc)}
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": None}


def register(runtime) -> None:
    if runtime.cluster is not None:
        cluster = runtime.cluster
        cluster.rpc_ops["describe_quorum"] = lambda peer_id, req: _serve_describe_quorum(cluster)
    runtime.register(55, handle_describe_quorum)
    runtime.register(64, handle_unregister_broker)
