"""Consumer group APIs, answered by the :class:`~litemq.coordinator.coordinator.GroupCoordinator`.

FindCoordinator (10) v0-6 (v6: KIP-932 share coordinator keys), JoinGroup (11) v0-9, Heartbeat
(12) v0-4, LeaveGroup (13) v0-5, SyncGroup (14) v0-5, DescribeGroups (15) v0-5, ListGroups (16)
v0-5, OffsetCommit (8) v0-9, OffsetFetch (9) v0-9, DeleteGroups (42) v0-2, OffsetDelete (47) v0,
ConsumerGroupHeartbeat (68) v0-1, ConsumerGroupDescribe (69) v0-1.

Sources: the Kafka message schemas of those APIs; KIP-394 (MEMBER_ID_REQUIRED, JoinGroup v4+),
KIP-345 (static membership, batched LeaveGroup v3+), KIP-559 (protocol type/name in JoinGroup
v7+/SyncGroup v5+), KIP-814 (skip_assignment, JoinGroup v9), KIP-447 (require_stable,
OffsetFetch v7+), KIP-709 (multi-group OffsetFetch v8+), KIP-699 (batched FindCoordinator v4+),
KIP-518 (ListGroups states filter v4+), KIP-848 (consumer groups: ConsumerGroupHeartbeat,
ConsumerGroupDescribe, member epochs in OffsetCommit v9 / OffsetFetch v9, ListGroups types filter
v5: ``classic`` or ``consumer``), KIP-229 (DeleteGroups), KIP-496 (OffsetDelete).

Topics travel by id in ConsumerGroupHeartbeat/Describe; the coordinator works with names, so
this module maps between them (an id no topic has is dropped).

This module only translates versions and checks ACLs; all group semantics live in
:mod:`litemq.coordinator`.

Authorization (Kafka ``KafkaApis``): FindCoordinator needs DESCRIBE on the group (transactional
id); JoinGroup, SyncGroup, Heartbeat, LeaveGroup, ConsumerGroupHeartbeat and OffsetCommit READ on the
group (ConsumerGroupHeartbeat also DESCRIBE on each subscribed topic); ConsumerGroupDescribe DESCRIBE;
OffsetFetch and DescribeGroups DESCRIBE on it; DeleteGroups and OffsetDelete DELETE on it
(GROUP_AUTHORIZATION_FAILED otherwise). OffsetCommit and OffsetDelete need READ on each topic
and OffsetFetch DESCRIBE (TOPIC_AUTHORIZATION_FAILED per partition; a fetch of all offsets
leaves the topics out). ListGroups lists every group with DESCRIBE on the cluster, else the
groups the caller may DESCRIBE.
"""

from __future__ import annotations

from litemq.security.acl_operations import AclOperation, ResourceType
from litemq.broker.authz import authorize, authorized_names, authorized_operations
from litemq.broker.coordinator_host import BrokerCoordinatorHost
from litemq.coordinator.coordinator import OFFSETS_TOPIC, GroupCoordinator
from litemq.coordinator.consumer_group import ConsumerGroup
from litemq.coordinator.consumer_group_manager import ConsumerHeartbeat
from litemq.coordinator.group import GroupState
from litemq.coordinator.group_manager import group_type
from litemq.coordinator.transaction import TXN_TOPIC
from litemq.coordinator.records import OffsetAndMetadata
from litemq.coordinator.share_records import SHARE_STATE_TOPIC
from litemq.protocol.errors import ErrorCode as E, KafkaError

INT32_MIN = -(2**31)
KEY_TYPE_GROUP, KEY_TYPE_TRANSACTION, KEY_TYPE_SHARE = 0, 1, 2


def _coord(ctx) -> GroupCoordinator:
    return ctx.runtime.coordinator


def client_host(ctx) -> str:
    peer = getattr(ctx.connection, "peer", "?")
    return "/" + peer.rsplit(":", 1)[0]


# ---------------------------------------------------------------------- FindCoordinator
def _find_one(ctx, key: str, key_type: int) -> dict:
    runtime = ctx.runtime
    out = {"key": key, "node_id": -1, "host": "", "port": -1, "error_code": E.NONE, "error_message": None}
    listener = ctx.connection.listener_name
    if key_type == KEY_TYPE_TRANSACTION:
        coord = runtime.txn_coordinator
        if not key:
            out.update(error_code=E.INVALID_REQUEST, error_message="empty transactional id")
            return out
        if not authorize(ctx, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, key):
            out.update(error_code=E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, error_message="Authorization failed.")
            return out
    elif key_type == KEY_TYPE_GROUP:
        coord = _coord(ctx)
        if not authorize(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, key):
            out.update(error_code=E.GROUP_AUTHORIZATION_FAILED, error_message="Authorization failed.")
            return out
    elif key_type == KEY_TYPE_SHARE and ctx.version >= 6:
        return _find_share_coordinator(ctx, key, out)
    else:
        out.update(error_code=E.INVALID_REQUEST, error_message=f"unknown coordinator key type {key_type}")
        return out
    if runtime.cluster is not None:
        is_txn = coord is runtime.txn_coordinator
        try:
            coord.ensure_txn_topic() if is_txn else coord.ensure_offsets_topic()
        except Exception:
            out.update(error_code=E.COORDINATOR_NOT_AVAILABLE, error_message="internal topic is being created")
            return out
        return _leader_endpoint(runtime, TXN_TOPIC if is_txn else OFFSETS_TOPIC, coord.partition_for(key or ""),
                                out, listener)
    err = coord.coordinator_error(key) if key_type == KEY_TYPE_TRANSACTION else \
        coord.coordinator_error(key, require_id=False)
    if err:
        out.update(error_code=err, error_message=E(err).name)
        return out
    return _endpoint(runtime, runtime.config.node_id, out, listener)


def _find_share_coordinator(ctx, key: str, out: dict) -> dict:
    """FindCoordinator v6 key type SHARE (KIP-932; sent by brokers, not clients): the leader of
    the ``__share_group_state`` partition of ``group:topicId:partition``. Needs CLUSTER_ACTION
    on the cluster (CLUSTER_AUTHORIZATION_FAILED); a malformed key is INVALID_REQUEST."""
    runtime = ctx.runtime
    if not authorize(ctx, AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER):
        out.update(error_code=E.CLUSTER_AUTHORIZATION_FAILED, error_message="Cluster authorization failed.")
        return out
    try:
        index = runtime.share_coordinator.state_partition_for(key)
    except KafkaError as exc:
        out.update(error_code=exc.code, error_message=str(exc))
        return out
    if runtime.cluster is None:
        return _endpoint(runtime, runtime.config.node_id, out, ctx.connection.listener_name)
    return _leader_endpoint(runtime, SHARE_STATE_TOPIC, index, out, ctx.connection.listener_name)


def handle_find_coordinator(ctx, req) -> dict:
    v = ctx.version
    key_type = req.key_type if v >= 1 else KEY_TYPE_GROUP
    if v >= 4:
        return {"throttle_time_ms": 0, "coordinators": [_find_one(ctx, k, key_type) for k in req.coordinator_keys]}
    one = _find_one(ctx, req.key, key_type)
    del one["key"]
    return {"throttle_time_ms": 0, **one}


def _leader_endpoint(runtime, topic: str, index: int, out: dict, listener_name: str | None) -> dict:
    """``out`` filled with the endpoint of the leader of ``topic``'s partition ``index`` (the
    coordinator of a group, transactional id or share-partition's state), as advertised on the
    listener the request came in on; COORDINATOR_NOT_AVAILABLE without a live leader."""
    leader, _ = runtime.cluster.leader_of(topic, index)
    return _endpoint(runtime, leader, out, listener_name,
                     f"no live leader of {topic}-{index}")


def _endpoint(runtime, node_id: int, out: dict, listener_name: str | None,
              missing: str = "listener not advertised") -> dict:
    endpoint = next((b for b in runtime.brokers(listener_name) if b[0] == node_id), None)
    if endpoint is None:
        out.update(error_code=E.COORDINATOR_NOT_AVAILABLE, error_message=missing)
        return out
    out.update(node_id=endpoint[0], host=endpoint[1], port=endpoint[2])
    return out


# ---------------------------------------------------------------------- JoinGroup / SyncGroup
def _may_read_group(ctx, group_id: str) -> bool:
    return authorize(ctx, AclOperation.READ, ResourceType.GROUP, group_id)


async def handle_join_group(ctx, req) -> dict:
    v = ctx.version
    if not _may_read_group(ctx, req.group_id):
        return {"throttle_time_ms": 0, "error_code": E.GROUP_AUTHORIZATION_FAILED, "generation_id": -1,
                "protocol_type": None, "protocol_name": None if v >= 7 else "", "leader": "",
                "skip_assignment": False, "member_id": req.member_id, "members": []}
    share = getattr(ctx.runtime, "share_coordinator", None)
    if share is not None and share.group_of(req.group_id) is not None:  # a KIP-932 share group
        return {"throttle_time_ms": 0, "error_code": E.INCONSISTENT_GROUP_PROTOCOL, "generation_id": -1,
                "protocol_type": None, "protocol_name": None if v >= 7 else "", "leader": "",
                "skip_assignment": False, "member_id": req.member_id, "members": []}
    res = await _coord(ctx).join_group(
        req.group_id, req.member_id, req.group_instance_id if v >= 5 else None, ctx.header.client_id or "",
        client_host(ctx), req.session_timeout_ms, req.rebalance_timeout_ms if v >= 1 else req.session_timeout_ms,
        req.protocol_type, [(p.name, bytes(p.metadata)) for p in req.protocols],
        require_known_member_id=v >= 4, supports_skip_assignment=v >= 9)
    protocol_name = res.protocol_name if (v >= 7 or res.protocol_name is not None) else ""
    return {"throttle_time_ms": 0, "error_code": res.error, "generation_id": res.generation,
            "protocol_type": res.protocol_type, "protocol_name": protocol_name, "leader": res.leader,
            "skip_assignment": res.skip_assignment, "member_id": res.member_id,
            "members": res.members if not res.error else []}


async def handle_sync_group(ctx, req) -> dict:
    v = ctx.version
    if not _may_read_group(ctx, req.group_id):
        return {"throttle_time_ms": 0, "error_code": E.GROUP_AUTHORIZATION_FAILED, "protocol_type": None,
                "protocol_name": None, "assignment": b""}
    assignments = {a.member_id: bytes(a.assignment) for a in req.assignments}
    res = await _coord(ctx).sync_group(
        req.group_id, req.generation_id, req.member_id, req.group_instance_id if v >= 3 else None,
        req.protocol_type if v >= 5 else None, req.protocol_name if v >= 5 else None, assignments)
    return {"throttle_time_ms": 0, "error_code": res.error, "protocol_type": res.protocol_type,
            "protocol_name": res.protocol_name, "assignment": res.assignment}


async def handle_heartbeat(ctx, req) -> dict:
    if not _may_read_group(ctx, req.group_id):
        return {"throttle_time_ms": 0, "error_code": E.GROUP_AUTHORIZATION_FAILED}
    err = await _coord(ctx).heartbeat(req.group_id, req.generation_id, req.member_id,
                                      req.group_instance_id if ctx.version >= 3 else None)
    return {"throttle_time_ms": 0, "error_code": err}


async def handle_leave_group(ctx, req) -> dict:
    v = ctx.version
    if not _may_read_group(ctx, req.group_id):
        return {"throttle_time_ms": 0, "error_code": E.GROUP_AUTHORIZATION_FAILED, "members": []}
    if v >= 3:
        leaving = [(m.member_id, m.group_instance_id) for m in req.members]
    else:
        leaving = [(req.member_id, None)]
    top, errors = await _coord(ctx).leave_group(req.group_id, leaving)
    if v < 3:
        return {"throttle_time_ms": 0, "error_code": top or errors[0]}
    return {"throttle_time_ms": 0, "error_code": top,
            "members": [{"member_id": mid, "group_instance_id": iid, "error_code": err}
                        for (mid, iid), err in zip(leaving, errors)] if not top else []}


# ---------------------------------------------------------------------- offsets
def committable_offsets(topics, readable: set[str], to_offset) -> dict[tuple[str, int], OffsetAndMetadata]:
    """OffsetCommit/TxnOffsetCommit: (topic, partition) -> ``to_offset(partition entry)`` for
    the request's partitions of the ``readable`` topics (READ authorized)."""
    return {(t.name, p.partition_index): to_offset(p) for t in topics if t.name in readable for p in t.partitions}


def commit_response(topics, readable: set[str], results: dict[tuple[str, int], int], refused: int) -> dict:
    """OffsetCommit/TxnOffsetCommit response: each partition's code from ``results`` (NONE when
    absent), ``refused`` for every partition of a topic not in ``readable``."""
    return {"throttle_time_ms": 0, "topics": [
        {"name": t.name, "partitions": [
            {"partition_index": p.partition_index,
             "error_code": results.get((t.name, p.partition_index), E.NONE) if t.name in readable else refused}
            for p in t.partitions]}
        for t in topics]}


async def handle_offset_commit(ctx, req) -> dict:
    v = ctx.version
    if not _may_read_group(ctx, req.group_id):
        return commit_response(req.topics, set(), {}, E.GROUP_AUTHORIZATION_FAILED)
    readable = authorized_names(ctx, AclOperation.READ, ResourceType.TOPIC, (t.name for t in req.topics))
    offsets = committable_offsets(req.topics, readable, lambda p: OffsetAndMetadata(
        p.committed_offset, p.committed_leader_epoch if v >= 6 else -1, p.committed_metadata,
        p.commit_timestamp if v == 1 else -1))
    results = {} if not offsets and req.topics else await _coord(ctx).commit_offsets(
        req.group_id, req.generation_id_or_member_epoch if v >= 1 else -1, req.member_id if v >= 1 else "",
        req.group_instance_id if v >= 7 else None, req.retention_time_ms if 2 <= v <= 4 else -1, offsets,
        api_version=v)
    return commit_response(req.topics, readable, results, E.TOPIC_AUTHORIZATION_FAILED)


def _offset_topics(entries, v: int) -> list[dict]:
    topics: dict[str, list[dict]] = {}
    for (topic, partition), om, err in entries:
        topics.setdefault(topic, []).append({
            "partition_index": partition,
            "committed_offset": om.offset if om is not None else -1,
            "committed_leader_epoch": om.leader_epoch if om is not None else -1,
            "metadata": om.metadata if om is not None else "",
            "error_code": err})
    return [{"name": name, "partitions": parts} for name, parts in topics.items()]


async def _fetch_group(ctx, group_id: str, topics, require_stable: bool, v: int, member_id: str | None = None,
                 member_epoch: int = -1) -> tuple[int, list[dict]]:
    wanted = None if topics is None else [(t.name, i) for t in topics for i in t.partition_indexes]
    if not authorize(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
        err = E.GROUP_AUTHORIZATION_FAILED
    else:
        err, entries = await _coord(ctx).fetch_offsets(group_id, wanted, require_stable, member_id, member_epoch)
    if err:
        if v < 2 and wanted:  # v0-1 have no group-level error: put it on every partition
            return err, _offset_topics([(tp, None, err) for tp in wanted], v)
        return err, []
    visible = authorized_names(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, (tp[0] for tp, _, _ in entries))
    if wanted is None:  # all of the group's offsets: leave out the topics the caller may not see
        entries = [e for e in entries if e[0][0] in visible]
    else:
        entries = [e if e[0][0] in visible else (e[0], None, E.TOPIC_AUTHORIZATION_FAILED) for e in entries]
    return E.NONE, _offset_topics(entries, v)


async def handle_offset_fetch(ctx, req) -> dict:
    v = ctx.version
    require_stable = req.require_stable if v >= 7 else False
    if v >= 8:
        groups = []
        for g in req.groups:
            err, topics = await _fetch_group(ctx, g.group_id, g.topics, require_stable, v,
                                       g.member_id if v >= 9 else None, g.member_epoch if v >= 9 else -1)
            groups.append({"group_id": g.group_id, "topics": topics, "error_code": err})
        return {"throttle_time_ms": 0, "groups": groups}
    topics = req.topics if v >= 2 else (req.topics or [])
    err, out = await _fetch_group(ctx, req.group_id, topics, require_stable, v)
    return {"throttle_time_ms": 0, "topics": out, "error_code": err}


# ---------------------------------------------------------------------- admin
def handle_list_groups(ctx, req) -> dict:
    v = ctx.version
    states = {s.lower() for s in req.states_filter} if v >= 4 else set()
    types = {t.lower() for t in req.types_filter} if v >= 5 else set()
    groups = [{"group_id": g.group_id, "protocol_type": g.protocol_type or "", "group_state": g.state.value,
               "group_type": group_type(g)} for g in _coord(ctx).list_groups(states, types)]
    share = getattr(ctx.runtime, "share_coordinator", None)
    if share is not None and (not types or "share" in types):
        # KIP-932 share groups: protocol type "share", states Empty/Stable.
        groups += [{"group_id": g.group_id, "protocol_type": "share", "group_state": g.state,
                    "group_type": "share"} for g in share.list_groups(states)]
    if not authorize(ctx, AclOperation.DESCRIBE, ResourceType.CLUSTER):
        visible = authorized_names(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, (g["group_id"] for g in groups))
        groups = [g for g in groups if g["group_id"] in visible]
    return {"throttle_time_ms": 0, "error_code": E.NONE, "groups": groups}


def _describe(ctx, group_id: str, include_ops: bool) -> dict:
    ops = authorized_operations(ctx, ResourceType.GROUP, group_id, include_ops)
    out = {"error_code": E.NONE, "error_message": None, "group_id": group_id, "group_state": GroupState.DEAD.value,
           "protocol_type": "",
           "protocol_data": "", "members": [], "authorized_operations": ops}
    if not authorize(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
        out.update(error_code=E.GROUP_AUTHORIZATION_FAILED, group_state="", authorized_operations=INT32_MIN)
        return out
    err, g = _coord(ctx).describe_group(group_id)
    if err:
        out.update(error_code=err, group_state="")
        return out
    share = getattr(ctx.runtime, "share_coordinator", None)
    if isinstance(g, ConsumerGroup) or (g is None and share is not None and share.group_of(group_id) is not None):
        # Kafka 4 (KIP-1043): a KIP-848 consumer group or a share group is no classic group;
        # DescribeGroups v6 says so, v0-5 describe it as Dead (ConsumerGroupDescribe and
        # ShareGroupDescribe describe them).
        if ctx.version >= 6:
            out.update(error_code=E.GROUP_ID_NOT_FOUND, error_message=f"Group {group_id} is not a classic group.")
        return out
    if g is None:
        if ctx.version >= 6:  # KIP-1043: an unknown group is an error from v6 on (Dead before)
            out.update(error_code=E.GROUP_ID_NOT_FOUND, error_message=f"Group {group_id} not found.")
        return out
    stable = g.is_(GroupState.STABLE)
    out.update(group_state=g.state.value, protocol_type=g.protocol_type or "",
               protocol_data=(g.protocol_name or "") if stable else "",
               members=[{"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                         "client_id": m.client_id, "client_host": m.client_host,
                         "member_metadata": m.metadata_for(g.protocol_name) if stable else b"",
                         "member_assignment": m.assignment if stable else b""}
                        for m in g.members.values()])
    return out


def handle_describe_groups(ctx, req) -> dict:
    include_ops = req.include_authorized_operations if ctx.version >= 3 else False
    return {"throttle_time_ms": 0, "groups": [_describe(ctx, gid, include_ops) for gid in req.groups]}


async def handle_delete_groups(ctx, req) -> dict:
    names = list(req.groups_names)
    deletable = authorized_names(ctx, AclOperation.DELETE, ResourceType.GROUP, names)
    share = getattr(ctx.runtime, "share_coordinator", None)
    shared = {g for g in names if g in deletable and share is not None and share.group_of(g) is not None}
    results = await _coord(ctx).delete_groups([g for g in names if g in deletable and g not in shared])
    for g in shared:  # KIP-932: a share group and its share-partition state
        results[g] = await share.delete_group(g)
    results.update({g: E.GROUP_AUTHORIZATION_FAILED for g in names if g not in deletable})
    return {"throttle_time_ms": 0,
            "results": [{"group_id": gid, "error_code": results.get(gid, E.NONE)} for gid in req.groups_names]}


async def handle_offset_delete(ctx, req) -> dict:
    if not authorize(ctx, AclOperation.DELETE, ResourceType.GROUP, req.group_id):
        return {"error_code": E.GROUP_AUTHORIZATION_FAILED, "throttle_time_ms": 0, "topics": []}
    topics_meta = ctx.runtime.metadata.topics
    readable = authorized_names(ctx, AclOperation.READ, ResourceType.TOPIC, (t.name for t in req.topics))
    wanted, unknown, refused = [], [], []
    for t in req.topics:
        info = topics_meta.get(t.name)
        for p in t.partitions:
            ok = info is not None and 0 <= p.partition_index < info.num_partitions
            if t.name not in readable:
                refused.append((t.name, p.partition_index))
            else:
                (wanted if ok else unknown).append((t.name, p.partition_index))
    err, results = await _coord(ctx).delete_offsets(req.group_id, wanted)
    if err:
        return {"error_code": err, "throttle_time_ms": 0, "topics": []}
    for tp in unknown:
        results[tp] = E.UNKNOWN_TOPIC_OR_PARTITION
    for tp in refused:
        results[tp] = E.TOPIC_AUTHORIZATION_FAILED
    return {"error_code": E.NONE, "throttle_time_ms": 0, "topics": [
        {"name": t.name, "partitions": [{"partition_index": p.partition_index,
                                         "error_code": results.get((t.name, p.partition_index), E.NONE)}
                                        for p in t.partitions]} for t in req.topics]}


# ---------------------------------------------------------------------- KIP-848
def _ids_to_names(ctx, topic_partitions) -> dict[str, frozenset[int]] | None:
    if topic_partitions is None:
        return None
    meta = ctx.runtime.metadata
    out: dict[str, frozenset[int]] = {}
    for tp in topic_partitions:
        info = meta.topic_by_id(tp.topic_id)
        if info is not None:
            out[info.name] = out.get(info.name, frozenset()) | frozenset(tp.partitions)
    return out


def names_to_ids(ctx, assignment: dict[str, frozenset[int]], with_names: bool = False) -> list[dict]:
    topics = ctx.runtime.metadata.topics
    out = []
    for name in sorted(assignment):
        info = topics.get(name)
        if info is None or not assignment[name]:
            continue
        entry = {"topic_id": info.topic_id, "partitions": sorted(assignment[name])}
        if with_names:
            entry["topic_name"] = name
        out.append(entry)
    return out


def heartbeat_failure(code: int, message: str | None = None) -> dict:
    """A Consumer/ShareGroupHeartbeat response carrying only an error."""
    return {"throttle_time_ms": 0, "error_code": code, "error_message": message, "member_id": None,
            "member_epoch": -1, "heartbeat_interval_ms": 0, "assignment": None}


def heartbeat_refused(ctx, group_id: str, names) -> dict | None:
    """The answer to a Consumer/ShareGroupHeartbeat the caller may not send (READ on the group,
    DESCRIBE on each subscribed topic name), or None."""
    if not _may_read_group(ctx, group_id):
        return heartbeat_failure(E.GROUP_AUTHORIZATION_FAILED, "Authorization failed.")
    if names:
        visible = authorized_names(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, names)
        if len(visible) != len(set(names)):
            return heartbeat_failure(E.TOPIC_AUTHORIZATION_FAILED, "Authorization failed.")
    return None


async def handle_consumer_group_heartbeat(ctx, req) -> dict:
    """ConsumerGroupHeartbeat v0-1 (KIP-848)."""
    names = req.subscribed_topic_names
    refused = heartbeat_refused(ctx, req.group_id, names)
    if refused is not None:
        return refused
    share = getattr(ctx.runtime, "share_coordinator", None)
    if share is not None and share.group_of(req.group_id) is not None:
        return heartbeat_failure(E.GROUP_ID_NOT_FOUND, f"Group {req.group_id} is not a consumer group.")
    res = await _coord(ctx).consumer_group_heartbeat(ConsumerHeartbeat(
        group_id=req.group_id, member_id=req.member_id, member_epoch=req.member_epoch, instance_id=req.instance_id,
        rack_id=req.rack_id, rebalance_timeout_ms=req.rebalance_timeout_ms,
        subscribed_topic_names=list(names) if names is not None else None,
        subscribed_topic_regex=req.subscribed_topic_regex if ctx.version >= 1 else None,
        server_assignor=req.server_assignor, owned=_ids_to_names(ctx, req.topic_partitions),
        client_id=ctx.header.client_id or "", client_host=client_host(ctx), version=ctx.version,
        describable=None if ctx.runtime.authorizer is None else  # Kafka 4.1: regex matches filtered by ACLs
        (lambda topics: authorized_names(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, topics))))
    return heartbeat_answer(ctx, res)


def heartbeat_answer(ctx, res) -> dict:
    """The Consumer/ShareGroupHeartbeat response for a coordinator result ``res`` (error, or
    member id, epoch, heartbeat interval and assignment as topic names)."""
    if res.error:
        return heartbeat_failure(res.error, res.error_message)
    return {"throttle_time_ms": 0, "error_code": E.NONE, "error_message": None, "member_id": res.member_id,
            "member_epoch": res.member_epoch, "heartbeat_interval_ms": res.heartbeat_interval_ms,
            "assignment": None if res.assignment is None else
            {"topic_partitions": names_to_ids(ctx, res.assignment)}}


def described_group(ctx, group_id: str, lookup) -> tuple[dict, object | None]:
    """The Consumer/ShareGroupDescribe entry of ``group_id`` before its details: DESCRIBE on
    the group (else GROUP_AUTHORIZATION_FAILED), then ``lookup(group_id) -> (error, message,
    group)``. Returns the entry and the group (None when the entry carries an error)."""
    out = {"error_code": E.NONE, "error_message": None, "group_id": group_id, "group_state": "",
           "group_epoch": -1, "assignment_epoch": -1, "assignor_name": "", "members": [],
           "authorized_operations": INT32_MIN}
    if not authorize(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
        out.update(error_code=E.GROUP_AUTHORIZATION_FAILED, error_message="Authorization failed.")
        return out, None
    err, msg, g = lookup(group_id)
    if err:
        out.update(error_code=err, error_message=msg)
        return out, None
    return out, g


def _describe_consumer_group(ctx, group_id: str, include_ops: bool) -> dict:
    coord = _coord(ctx)
    out, g = described_group(ctx, group_id, coord.consumer_group_describe)
    if g is None:
        return out
    out.update(group_state=g.state.value, group_epoch=g.group_epoch, assignment_epoch=g.assignment_epoch,
               assignor_name=coord.consumer_group_assignor(g),
               authorized_operations=authorized_operations(ctx, ResourceType.GROUP, group_id, include_ops),
               members=[{"member_id": m.member_id, "instance_id": m.instance_id, "rack_id": m.rack_id,
                         "member_epoch": m.member_epoch, "client_id": m.client_id, "client_host": m.client_host,
                         "subscribed_topic_names": list(m.subscribed_topic_names),
                         "subscribed_topic_regex": m.subscribed_topic_regex,
                         "assignment": {"topic_partitions": names_to_ids(ctx, m.assigned, True)},
                         "target_assignment": {"topic_partitions": names_to_ids(ctx, g.target.get(m.member_id, {}),
                                                                                 True)},
                         "member_type": 1}
                        for m in g.members.values()])
    return out


def handle_consumer_group_describe(ctx, req) -> dict:
    """ConsumerGroupDescribe v0-1 (KIP-848): GROUP_ID_NOT_FOUND for classic groups, as Kafka
    (clients then describe them with DescribeGroups)."""
    return {"throttle_time_ms": 0, "groups": [_describe_consumer_group(ctx, gid, req.include_authorized_operations)
                                              for gid in req.group_ids]}


def register(runtime) -> None:
    """Create the coordinator (loading ``__consumer_offsets``) and register the group APIs."""
    coordinator = GroupCoordinator(BrokerCoordinatorHost(runtime))
    runtime.coordinator = coordinator
    coordinator.start()
    runtime.register(10, handle_find_coordinator, 0, 6)
    runtime.register(11, handle_join_group, 0, 9)
    runtime.register(12, handle_heartbeat, 0, 4)
    runtime.register(13, handle_leave_group, 0, 5)
    runtime.register(14, handle_sync_group, 0, 5)
    runtime.register(15, handle_describe_groups, 0, 6)
    runtime.register(16, handle_list_groups, 0, 5)
    runtime.register(8, handle_offset_commit, 0, 9)
    runtime.register(9, handle_offset_fetch, 0, 9)
    runtime.register(42, handle_delete_groups, 0, 2)
    runtime.register(47, handle_offset_delete, 0, 0)
    runtime.register(68, handle_consumer_group_heartbeat, 0, 1)
    runtime.register(69, handle_consumer_group_describe, 0, 1)
