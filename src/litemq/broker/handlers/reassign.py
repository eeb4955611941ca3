"""Partition reassignment (KIP-455): AlterPartitionReassignments (45) and
ListPartitionReassignments (46), version 0 (the only one in Kafka's schemas).

Any broker answers: AlterPartitionReassignments is forwarded to the metadata leader, one
partition at a time, as the other admin changes (KIP-590), and answered once each
``change_partition`` record is committed and applied here (the move itself then runs in the
partition's Raft group: :mod:`litemq.cluster.reassignment`). ListPartitionReassignments first
catches up with the metadata leader's commit index (a read index), then lists the moves in
progress from the metadata image.

Authorization (Kafka ``KafkaApis``): ALTER on the cluster for Alter, DESCRIBE on the cluster for
List; refused: CLUSTER_AUTHORIZATION_FAILED at the top level (and, for Alter, on every
partition, as Kafka's ``AlterPartitionReassignmentsRequest.getErrorResponse``).

On a single broker (no cluster) every partition's only replica is this broker: a target of
exactly it succeeds with nothing to do, any other broker is INVALID_REPLICA_ASSIGNMENT, a
cancel is NO_REASSIGNMENT_IN_PROGRESS and nothing is ever listed.
"""

from __future__ import annotations

import asyncio

from litemq.broker.authz import authorize
from litemq.cluster.image import check_replica_list
from litemq.cluster.reassignment import listed_reassignments
from litemq.protocol.errors import ErrorCode, KafkaError
from litemq.security.acl_operations import AclOperation, ResourceType

LIST_CATCH_UP_MAX_MS = 500
"""ListPartitionReassignments waits at most this long (within its timeout) to catch up with the
metadata leader before answering from the local image."""

_DENIED = "Authorization failed."


def _single_broker_reassign(runtime, topic: str, index: int, replicas: list[int] | None) -> None:
    info = runtime.metadata.topics.get(topic)
    if info is None or not 0 <= index < info.num_partitions:
        raise KafkaError(f"unknown topic or partition {topic}-{index}", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    if replicas is None:
        raise KafkaError(f"No ongoing reassignment for partition {topic}-{index}.",
                         ErrorCode.NO_REASSIGNMENT_IN_PROGRESS)
    brokers = runtime.registered_broker_ids()
    check_replica_list(replicas, brokers, brokers, index)  # only this broker is registered


async def handle_alter_partition_reassignments(ctx, req) -> dict:
    runtime = ctx.runtime
    if not authorize(ctx, AclOperation.ALTER, ResourceType.CLUSTER):
        code = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        return {"throttle_time_ms": 0, "error_code": code, "error_message": _DENIED, "responses": [
            {"name": t.name, "partitions": [{"partition_index": p.partition_index, "error_code": code,
                                             "error_message": _DENIED} for p in t.partitions]}
            for t in req.topics]}
    deadline = runtime.loop.time() + req.timeout_ms / 1000
    cluster = runtime.cluster

    async def one(topic: str, index: int, replicas) -> tuple[int, str | None]:
        replicas = None if replicas is None else [int(r) for r in replicas]
        try:
            if cluster is None:
                _single_broker_reassign(runtime, topic, index, replicas)
            else:
                await cluster.admin("reassign_partition", timeout_s=deadline - runtime.loop.time(),
                                    name=topic, partition=index, replicas=replicas)
        except KafkaError as exc:
            return exc.code, str(exc)
        return ErrorCode.NONE, None

    responses = []
    for t in req.topics:
        codes = await asyncio.gather(*(one(t.name, p.partition_index, p.replicas) for p in t.partitions))
        responses.append({"name": t.name, "partitions": [
            {"partition_index": p.partition_index, "error_code": int(code), "error_message": msg}
            for p, (code, msg) in zip(t.partitions, codes)]})
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": None, "responses": responses}


async def handle_list_partition_reassignments(ctx, req) -> dict:
    runtime = ctx.runtime
    if not authorize(ctx, AclOperation.DESCRIBE, ResourceType.CLUSTER):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                "error_message": _DENIED, "topics": []}
    cluster = runtime.cluster
    topics: list[dict] = []
    if cluster is not None:
        await cluster.refresh_leaders(min(max(req.timeout_ms, 0), LIST_CATCH_UP_MAX_MS) / 1000)
        wanted = None if req.topics is None else [(t.name, list(t.partition_indexes)) for t in req.topics]
        topics = listed_reassignments(cluster.image, wanted)
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": None, "topics": topics}


def register(runtime) -> None:
    runtime.register(45, handle_alter_partition_reassignments)
    runtime.register(46, handle_list_partition_reassignments)
