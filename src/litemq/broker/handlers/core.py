"""ApiVersions (18), Metadata (3), DescribeCluster (60), DescribeTopicPartitions (75).

Sources: Kafka message schemas ApiVersionsRequest/Response v0-4 (KIP-511),
MetadataRequest/Response v0-13 (v13: the top-level error code of KIP-1102, always NONE here),
DescribeClusterRequest/Response v0-2 (KIP-700, KIP-1073),
DescribeTopicPartitionsRequest/Response v0 (KIP-966); authorized operations (KIP-430) from
:mod:`litemq.broker.authz`.

Authorization (Kafka ``KafkaApis.handleTopicMetadataRequest``): a listing of all topics shows
only those the caller may DESCRIBE; a named topic the caller may not DESCRIBE, or may not
CREATE when it would be auto-created, is TOPIC_AUTHORIZATION_FAILED (whether or not it exists);
DescribeTopicPartitions follows the same rule (DESCRIBE on each topic; it never creates one).
DescribeCluster needs no ACL: as Kafka's ``AuthHelper.computeDescribeClusterResponse`` it always
answers, and the cluster's authorized operations (DescribeCluster, Metadata v8-v10) are 0 for a
caller without DESCRIBE on the cluster.
"""

from __future__ import annotations

import inspect

from litemq.security.acl_operations import AclOperation, ResourceType
from litemq.broker.authz import CLUSTER_RESOURCE_NAME, authorize, authorized_names, authorized_operations
from litemq import limits
from litemq.cluster.metadata import validate_topic_name
from litemq.protocol.errors import ErrorCode, KafkaError


def handle_api_versions(ctx, req) -> dict:
    if ctx.version >= 3 and req.client_software_name and hasattr(ctx.connection, "client_software"):
        # KIP-511; client metrics subscriptions match on it (KIP-714)
        ctx.connection.client_software = (req.client_software_name[:256], (req.client_software_version or "")[:256])
    return ctx.runtime.api_versions_body()


def _cluster_partition_entries(runtime, info, indexes: range | None = None) -> list[dict]:
    cluster = runtime.cluster
    live = {n for n, _, _ in runtime.brokers()}
    out = []
    for i in range(len(info.assignments)) if indexes is None else indexes:
        replicas = info.assignments[i]
        leader, epoch = cluster.leader_of(info.name, i)
        p = runtime.replicas.get(info.name, i)
        if p is not None and p.is_leader:
            isr = p.in_sync_replicas()
        else:
            isr = [r for r in replicas if r in live]
        out.append({
            "error_code": ErrorCode.NONE if leader >= 0 else ErrorCode.LEADER_NOT_AVAILABLE,
            "partition_index": i,
            "leader_id": leader,
            "leader_epoch": epoch,
            "replica_nodes": list(replicas),
            "isr_nodes": isr,
            "offline_replicas": [r for r in replicas if r not in live],
        })
    return out


def _partition_entries(runtime, name: str, count: int, indexes: range | None = None) -> list[dict]:
    """Metadata's partition entries of topic ``name`` (``count`` partitions): every partition,
    or those of ``indexes`` (each in ``[0, count)``)."""
    if runtime.cluster is not None:
        return _cluster_partition_entries(runtime, runtime.metadata.topics[name], indexes)
    node = runtime.config.node_id
    out = []
    for i in range(count) if indexes is None else indexes:
        p = runtime.replicas.get(name, i)
        out.append({
            "error_code": ErrorCode.NONE if p is not None else ErrorCode.LEADER_NOT_AVAILABLE,
            "partition_index": i,
            "leader_id": node if p is not None else -1,
            "leader_epoch": p.leader_epoch if p is not None else -1,
            "replica_nodes": [node],
            "isr_nodes": [node],
            "offline_replicas": [],
        })
    return out


def topic_entry(runtime, info) -> dict:
    return {
        "error_code": ErrorCode.NONE,
        "name": info.name,
        "topic_id": info.topic_id,
        "is_internal": info.internal,
        "partitions": _partition_entries(runtime, info.name, info.num_partitions),
    }


def handle_metadata(ctx, req):
    """Metadata v0-v12 (see :func:`_answer_metadata`); in a cluster, a request naming a topic
    this broker does not know first catches up with the metadata leader (the topic may have
    been created a moment ago through another broker), before answering it unknown or
    auto-creating it."""
    runtime = ctx.runtime
    if ctx.version < 12 and req.topics and any(t.name is None or t.topic_id.int for t in req.topics):
        return _metadata_invalid_request(req)
    if runtime.cluster is not None and req.topics and any(
            t.name is not None and t.name not in runtime.metadata.topics for t in req.topics):
        return _after_catch_up(ctx, req)
    return _answer_metadata(ctx, req)


def _metadata_invalid_request(req) -> dict:
    """Metadata v10-11 may carry topic ids and null names on the wire, but Kafka serves lookups
    by id only from v12: ``KafkaApis.handleTopicMetadataRequest`` refuses such a request
    (InvalidRequestException "Topic name can not be null" / "Topic IDs are not supported"), and
    ``MetadataRequest.getErrorResponse`` answers every topic INVALID_REQUEST, a null name as ""."""
    return {"throttle_time_ms": 0, "brokers": [], "cluster_id": None, "controller_id": -1,
            "topics": [{"error_code": ErrorCode.INVALID_REQUEST, "name": t.name if t.name is not None else "",
                        "topic_id": t.topic_id, "is_internal": False, "partitions": []} for t in req.topics]}


async def _after_catch_up(ctx, req) -> dict:
    await ctx.runtime.cluster.refresh_leaders(limits.METADATA_LEADER_REFRESH_WAIT_MS / 1000)
    out = _answer_metadata(ctx, req)
    return await out if inspect.isawaitable(out) else out


def _answer_metadata(ctx, req):
    """Metadata v0-v12. In a cluster, a partition this broker knows no leader of, or a named
    topic it does not know, makes it ask the metadata leader for the current leaders and its
    commit index first and catch up to it (bounded by ``limits.METADATA_LEADER_REFRESH_WAIT_MS``),
    so a topic another broker just created is not answered unknown or leaderless (a Kafka
    broker names the leaders from the records that created the partition)."""
    runtime = ctx.runtime
    v = ctx.version
    meta = runtime.metadata
    topics_out = []
    if req.topics is None or (v == 0 and not req.topics):
        visible = authorized_names(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, meta.topics)
        for info in list(meta.topics.values()):
            if info.name in visible:
                topics_out.append(topic_entry(runtime, info))
    else:
        allow_create = req.allow_auto_topic_creation if v >= 4 else True
        may_create_any = None
        for t in req.topics:
            name = t.name
            if name is None:  # v10+: lookup by topic id
                info = meta.topic_by_id(t.topic_id)
                if info is None or not authorize(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, info.name):
                    code = ErrorCode.UNKNOWN_TOPIC_ID if info is None else ErrorCode.TOPIC_AUTHORIZATION_FAILED
                    topics_out.append({"error_code": code, "name": None, "topic_id": t.topic_id, "partitions": []})
                    continue
            else:
                if not authorize(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, name):
                    topics_out.append({"error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED, "name": name,
                                       "partitions": []})
                    continue
                info = meta.topics.get(name)
            if info is None and allow_create and runtime.config.auto_create_topics_enable:
                if may_create_any is None:
                    may_create_any = authorize(ctx, AclOperation.CREATE, ResourceType.CLUSTER)
                if not may_create_any and not authorize(ctx, AclOperation.CREATE, ResourceType.TOPIC, name):
                    topics_out.append({"error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED, "name": name,
                                       "partitions": []})
                    continue
            if info is None and allow_create:
                try:
                    info = runtime.maybe_auto_create(name)
                except KafkaError as exc:
                    topics_out.append({"error_code": exc.code, "name": name, "partitions": []})
                    continue
                if info is None and runtime.cluster is not None and runtime.config.auto_create_topics_enable:
                    topics_out.append({"error_code": ErrorCode.LEADER_NOT_AVAILABLE, "name": name,
                                       "partitions": []})
                    continue
            if info is None:
                topics_out.append({"error_code": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "name": name,
                                   "partitions": []})
                continue
            topics_out.append(topic_entry(runtime, info))
    if runtime.cluster is not None and _leaderless(topics_out):
        return _after_leader_refresh(ctx, req, topics_out)
    return _metadata_body(ctx, req, topics_out)


async def _after_leader_refresh(ctx, req, topics_out: list[dict]) -> dict:
    runtime = ctx.runtime
    await runtime.cluster.refresh_leaders(limits.METADATA_LEADER_REFRESH_WAIT_MS / 1000)
    return _metadata_body(ctx, req, [_refreshed(runtime, t) for t in topics_out])


def _metadata_body(ctx, req, topics_out: list[dict]) -> dict:
    runtime = ctx.runtime
    v = ctx.version
    # KIP-430: v8+ topic, v8-v10 cluster authorized operations, INT32_MIN unless asked for
    want_topic_ops = v >= 8 and req.include_topic_authorized_operations
    for t in topics_out:
        t["topic_authorized_operations"] = authorized_operations(
            ctx, ResourceType.TOPIC, t["name"], want_topic_ops and t["error_code"] != ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    return {
        "throttle_time_ms": 0,
        "brokers": [{"node_id": n, "host": h, "port": p, "rack": runtime.rack_of(n)}
                    for n, h, p in runtime.brokers(ctx.connection.listener_name)],
        "cluster_id": runtime.metadata.cluster_id,
        "controller_id": runtime.controller_id(),
        "topics": topics_out,
        "cluster_authorized_operations": cluster_authorized_operations(
            ctx, 8 <= v <= 10 and req.include_cluster_authorized_operations),
    }


def _leaderless(topics_out: list[dict]) -> bool:
    return any(p["error_code"] == ErrorCode.LEADER_NOT_AVAILABLE
               for t in topics_out if t["error_code"] == ErrorCode.NONE for p in t["partitions"])


def _refreshed(runtime, entry: dict) -> dict:
    """``entry`` again from the current metadata (a topic deleted meanwhile keeps its entry)."""
    info = runtime.metadata.topics.get(entry["name"]) if entry["error_code"] == ErrorCode.NONE else None
    return topic_entry(runtime, info) if info is not None else entry


def cluster_authorized_operations(ctx, requested: bool) -> int:
    """KIP-430 cluster operations field: INT32_MIN when not ``requested``, 0 without DESCRIBE on
    the cluster, else every operation the caller may perform on it (Kafka ``KafkaApis``/``AuthHelper``)."""
    if requested and not authorize(ctx, AclOperation.DESCRIBE, ResourceType.CLUSTER):
        return 0
    return authorized_operations(ctx, ResourceType.CLUSTER, CLUSTER_RESOURCE_NAME, requested)


def handle_describe_cluster(ctx, req) -> dict:
    """DescribeCluster v0-2 (KIP-700; v2, KIP-1073: ``include_fenced_brokers`` adds the registered
    brokers that are not live, with ``is_fenced`` true, as Kafka lists the brokers its controller
    fenced; every other broker has ``is_fenced`` false)."""
    runtime = ctx.runtime
    listener = ctx.connection.listener_name
    found = [(*ep, False) for ep in runtime.brokers(listener)]
    if ctx.version >= 2 and req.include_fenced_brokers and runtime.cluster is not None:
        found = sorted(found + [(*ep, True) for ep in runtime.cluster.fenced_broker_endpoints(listener)])
    brokers = [{"broker_id": n, "host": h, "port": p, "rack": runtime.rack_of(n), "is_fenced": fenced}
               for n, h, p, fenced in found]
    return {
        "throttle_time_ms": 0,
        "error_code": ErrorCode.NONE,
        "error_message": None,
        "endpoint_type": 1,
        "cluster_id": runtime.metadata.cluster_id,
        "controller_id": runtime.controller_id(),
        "brokers": brokers,
        "cluster_authorized_operations": cluster_authorized_operations(ctx, req.include_cluster_authorized_operations),
    }


def handle_describe_topic_partitions(ctx, req):
    """DescribeTopicPartitions v0 (KIP-966; message schema DescribeTopicPartitionsRequest/Response
    v0, Kafka 3.8+): Metadata's topic and partition entries, paged by partition count.

    Request: ``topics`` (names; empty: every topic the caller may DESCRIBE), ``response_partition_limit``
    (capped at ``limits.DESCRIBE_TOPIC_PARTITIONS_MAX_PARTITIONS``, Kafka's
    ``max.request.partition.size.limit``), ``cursor`` (None, or ``topic_name`` + ``partition_index``
    to start from). Response: ``topics`` sorted by name, from the cursor's topic on (which starts
    at the cursor's partition index, every later topic at 0), each ``{error_code, name, topic_id,
    is_internal, partitions, topic_authorized_operations}`` with partitions ``{error_code,
    partition_index, leader_id, leader_epoch, replica_nodes, isr_nodes, eligible_leader_replicas,
    last_known_elr, offline_replicas}``; ``next_cursor`` names the first partition left out once
    the limit is reached (a topic left out whole: its partition 0), else None.

    As Kafka 4's ``DescribeTopicPartitionsRequestHandler`` and ``KRaftMetadataCache.describeTopicResponse``:

    - a cursor whose topic is not among the named topics: INVALID_REQUEST for every named topic
      and nothing else (Kafka's InvalidRequestException "topic list should contain the cursor
      topic", answered by ``DescribeTopicPartitionsRequest.getErrorResponse``);
    - a named topic the caller may not DESCRIBE: TOPIC_AUTHORIZATION_FAILED, with no id, after the
      others (whether it exists is not disclosed); a listing of all topics leaves such topics out;
    - a named topic that does not exist: UNKNOWN_TOPIC_OR_PARTITION (INVALID_TOPIC_EXCEPTION for
      an illegal name), no partitions; it takes nothing of the limit, but once the limit is taken
      the next cursor may name it (partition 0), as any topic that was not reached;
    - a cursor past a topic's last partition gives that topic with no partitions; a negative
      limit gives no topic and no cursor; a limit of 0 only the cursor (Kafka does the same);
    - a partition's error code is always NONE (Kafka sets none here, unlike Metadata's
      LEADER_NOT_AVAILABLE): a partition without a live leader has ``leader_id`` -1;
    - eligible leader replicas and last known ELR (KIP-966) are empty lists: a LiteMQ partition is
      a Raft group, whose leader is elected among its voters, so it has no ELR;
    - ``topic_authorized_operations`` is always filled (KIP-430 bitfield; Kafka's request has no
      flag for it), INT32_MIN on a TOPIC_AUTHORIZATION_FAILED entry.

    In a cluster, an answer with an unknown topic or a leaderless partition is made again after
    catching up with the metadata leader, as Metadata does (``limits.METADATA_LEADER_REFRESH_WAIT_MS``).
    """
    runtime = ctx.runtime
    body = _describe_topic_partitions(ctx, req)
    if runtime.cluster is not None and _describe_needs_refresh(body):
        return _describe_topic_partitions_after_refresh(ctx, req)
    return body


async def _describe_topic_partitions_after_refresh(ctx, req) -> dict:
    await ctx.runtime.cluster.refresh_leaders(limits.METADATA_LEADER_REFRESH_WAIT_MS / 1000)
    return _describe_topic_partitions(ctx, req)


def _describe_needs_refresh(body: dict) -> bool:
    return any(t["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
               or any(p["leader_id"] < 0 for p in t["partitions"]) for t in body["topics"])


def _describe_topic_partitions(ctx, req) -> dict:
    runtime = ctx.runtime
    meta = runtime.metadata
    cursor = req.cursor
    cursor_topic = cursor.topic_name if cursor is not None else ""
    list_all = not req.topics
    if list_all:
        names = {n for n in meta.topics if n >= cursor_topic}
    else:
        names = {t.name for t in req.topics if t.name >= cursor_topic}
        if cursor is not None and cursor_topic not in names:
            return {"throttle_time_ms": 0, "next_cursor": None,
                    "topics": [{"error_code": ErrorCode.INVALID_REQUEST, "name": t.name, "is_internal": False,
                                "partitions": []} for t in req.topics]}
    allowed = authorized_names(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, names)
    remaining = min(limits.DESCRIBE_TOPIC_PARTITIONS_MAX_PARTITIONS, req.response_partition_limit)
    topics_out: list[dict] = []
    next_cursor = None
    for name in sorted(allowed):
        if remaining == 0:  # the previous topics took the whole limit: this one starts the next page
            next_cursor = {"topic_name": name, "partition_index": 0}
            break
        if remaining < 0:  # a negative limit (Kafka: nothing is described, and no cursor)
            continue
        info = meta.topics.get(name)
        if info is None:
            if not list_all:
                topics_out.append(_unknown_topic_entry(name))
            continue
        count = len(info.assignments) if runtime.cluster is not None else info.num_partitions
        start = cursor.partition_index if cursor is not None and name == cursor_topic else 0
        end = min(count, start + remaining)
        partitions = [_describe_partition_entry(p) for p in
                      _partition_entries(runtime, name, count, range(max(start, 0), max(end, 0)))]
        topics_out.append({"error_code": ErrorCode.NONE, "name": name, "topic_id": info.topic_id,
                           "is_internal": info.internal, "partitions": partitions})
        if end < count:
            next_cursor = {"topic_name": name, "partition_index": end}
            break
        remaining -= len(partitions)
    for t in topics_out:
        t["topic_authorized_operations"] = authorized_operations(ctx, ResourceType.TOPIC, t["name"])
    if not list_all:
        topics_out += [{"error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED, "name": name, "is_internal": False,
                        "partitions": []} for name in sorted(names - allowed)]
    return {"throttle_time_ms": 0, "topics": topics_out, "next_cursor": next_cursor}


def _unknown_topic_entry(name: str) -> dict:
    try:
        validate_topic_name(name)
        code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    except KafkaError as exc:
        code = exc.code
    return {"error_code": code, "name": name, "is_internal": False, "partitions": []}


def _describe_partition_entry(entry: dict) -> dict:
    """A Metadata partition entry as DescribeTopicPartitions answers it (no error code, no ELR)."""
    return {**entry, "error_code": ErrorCode.NONE, "eligible_leader_replicas": [], "last_known_elr": []}


def register(runtime) -> None:
    runtime.register(18, handle_api_versions)
    runtime.register(3, handle_metadata)
    runtime.register(60, handle_describe_cluster)
    runtime.register(75, handle_describe_topic_partitions)
