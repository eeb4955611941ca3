"""Share group APIs (KIP-932, Kafka 4.1 wire versions), answered by the
:class:`~litemq.coordinator.share_coordinator.ShareCoordinator`.

ShareGroupHeartbeat (76) v1, ShareGroupDescribe (77) v1, ShareFetch (78) v1, ShareAcknowledge
(79) v1, DescribeShareGroupOffsets (90) v0, AlterShareGroupOffsets (91) v0,
DeleteShareGroupOffsets (92) v0. Version 2 of ShareFetch/ShareAcknowledge (KIP-1206 acquire modes, KIP-1222 Renew) is in
the vendored schemas but not advertised. ListGroups (type ``share``) and DeleteGroups of share
groups are served in :mod:`litemq.broker.handlers.groups` through the same coordinator.

This module maps topic ids to names and wire shapes to calls; the semantics live in
:mod:`litemq.coordinator.share_coordinator`.

Authorization (Kafka ``KafkaApis``): ShareGroupHeartbeat needs READ on the group and DESCRIBE on
each subscribed topic; ShareGroupDescribe DESCRIBE on the group; ShareFetch and ShareAcknowledge
READ on the group (GROUP_AUTHORIZATION_FAILED for the whole request) and READ on each topic
(TOPIC_AUTHORIZATION_FAILED per partition).
"""

from __future__ import annotations

from litemq.broker.authz import authorize, authorized_names, authorized_operations
from litemq.broker.coordinator_host import BrokerCoordinatorHost
from litemq.broker.handlers.groups import (client_host, described_group, heartbeat_answer, heartbeat_refused,
                                          names_to_ids)
from litemq.coordinator.share_coordinator import PartitionFetch, ShareCoordinator
from litemq.protocol.errors import ErrorCode as E
from litemq.security.acl_operations import AclOperation, ResourceType


def _share(ctx) -> ShareCoordinator:
    return ctx.runtime.share_coordinator


# ---------------------------------------------------------------------- ShareGroupHeartbeat
async def handle_share_group_heartbeat(ctx, req) -> dict:
    names = req.subscribed_topic_names
    refused = heartbeat_refused(ctx, req.group_id, names)
    if refused is not None:
        return refused
    res = await _share(ctx).heartbeat(req.group_id, req.member_id, req.member_epoch, req.rack_id,
                                      list(names) if names is not None else None, ctx.header.client_id or "",
                                      client_host(ctx))
    return heartbeat_answer(ctx, res)


# ---------------------------------------------------------------------- ShareGroupDescribe
def _describe_one(ctx, group_id: str, include_ops: bool) -> dict:
    out, g = described_group(ctx, group_id, _share(ctx).describe)
    if g is None:
        return out
    out.update(group_state=g.state, group_epoch=g.group_epoch, assignment_epoch=g.assignment_epoch,
               assignor_name="simple",
               authorized_operations=authorized_operations(ctx, ResourceType.GROUP, group_id, include_ops),
               members=[{"member_id": m.member_id, "rack_id": m.rack_id, "member_epoch": m.member_epoch,
                         "client_id": m.client_id, "client_host": m.client_host,
                         "subscribed_topic_names": list(m.subscribed_topic_names),
                         "assignment": {"topic_partitions": names_to_ids(ctx, m.assigned, True)}}
                        for m in g.members.values()])
    return out


def handle_share_group_describe(ctx, req) -> dict:
    return {"throttle_time_ms": 0, "groups": [_describe_one(ctx, gid, req.include_authorized_operations)
                                              for gid in req.group_ids]}


# ---------------------------------------------------------------------- ShareFetch / ShareAcknowledge
def _resolve(ctx, topics) -> tuple[dict, set[str]]:
    """topic id -> name (None when unknown), and the names the caller may READ."""
    meta = ctx.runtime.metadata
    ids = {}
    for t in topics:
        info = meta.topic_by_id(t.topic_id)
        ids[t.topic_id] = info.name if info is not None else None
    readable = authorized_names(ctx, AclOperation.READ, ResourceType.TOPIC, [n for n in ids.values() if n])
    return ids, readable


def _partition_out(idx: int, res: PartitionFetch | None, fetch_error: int = E.NONE, ack_error: int | None = None,
                   with_records: bool = True) -> dict:
    out = {"partition_index": idx, "error_code": fetch_error, "error_message": None,
           "acknowledge_error_code": ack_error or E.NONE, "acknowledge_error_message": None,
           "current_leader": {"leader_id": -1, "leader_epoch": -1}}
    if with_records:
        out["records"] = b""
        out["acquired_records"] = []
    if res is not None:
        out["error_code"] = res.error or fetch_error
        if with_records:
            out["records"] = res.records
            out["acquired_records"] = [{"first_offset": f, "last_offset": last, "delivery_count": c}
                                       for f, last, c in res.acquired]
    return out


def _leader_of(ctx, out: dict, name: str | None, idx: int, node_endpoints: dict) -> None:
    """Fill ``current_leader`` (and the leader's endpoint when it is another broker)."""
    runtime = ctx.runtime
    if name is None:
        return
    if runtime.cluster is None:
        p = runtime.replicas.get(name, idx)
        out["current_leader"] = {"leader_id": runtime.config.node_id, "leader_epoch": p.leader_epoch if p else -1}
        return
    leader, epoch = runtime.cluster.leader_of(name, idx)
    out["current_leader"] = {"leader_id": leader, "leader_epoch": epoch}
    if leader >= 0 and leader != runtime.config.node_id and out.get("error_code") == E.NOT_LEADER_OR_FOLLOWER:
        ep = next((b for b in runtime.brokers(ctx.connection.listener_name) if b[0] == leader), None)
        if ep is not None:
            node_endpoints[leader] = {"node_id": ep[0], "host": ep[1], "port": ep[2], "rack": runtime.rack_of(ep[0])}


async def _apply_acks(ctx, share: ShareCoordinator, group_id: str, member_id: str, ids: dict, readable: set[str],
                      topics) -> dict[tuple[bytes, int], int]:
    """Acknowledgements of a request by (topic id bytes, partition) -> error code."""
    results = {}
    for t in topics:
        name = ids.get(t.topic_id)
        for p in t.partitions:
            batches = [(b.first_offset, b.last_offset, list(b.acknowledge_types)) for b in p.acknowledgement_batches]
            if not batches:
                continue
            k = (t.topic_id, p.partition_index)
            if name is None:
                results[k] = E.UNKNOWN_TOPIC_ID
            elif name not in readable:
                results[k] = E.TOPIC_AUTHORIZATION_FAILED
            else:
                results[k] = await share.acknowledge(group_id, member_id, name, p.partition_index, batches)
    return results


def _top_error(code: int, message: str | None = None) -> dict:
    return {"throttle_time_ms": 0, "error_code": code, "error_message": message, "acquisition_lock_timeout_ms": 0,
            "responses": [], "node_endpoints": []}


def _bind_to_connection(ctx, share: ShareCoordinator, session) -> None:
    """A new share session ends when the connection that opened it closes (Kafka 4.1 releases
    the member's acquired records then, not at their lock deadline); one callback per connection."""
    conn = ctx.connection
    session.owner = conn
    callbacks = getattr(conn, "close_callbacks", None)
    if callbacks is not None:
        callbacks["share_sessions"] = lambda: share.connection_closed(conn)


async def handle_share_fetch(ctx, req) -> dict:
    """ShareFetch v1 (KIP-932): acknowledgements first, then records acquired for the member
    from every partition of its share session."""
    share = _share(ctx)
    group_id, member_id = req.group_id or "", req.member_id or ""
    if not authorize(ctx, AclOperation.READ, ResourceType.GROUP, group_id):
        return _top_error(E.GROUP_AUTHORIZATION_FAILED, "Authorization failed.")
    epoch = req.share_session_epoch
    acks_present = any(p.acknowledgement_batches for t in req.topics for p in t.partitions)
    err = E.INVALID_REQUEST if not group_id else share.session_error(group_id, member_id, epoch, acks_present)
    if err:
        return _top_error(err)
    ids, readable = _resolve(ctx, req.topics)
    forgotten_ids, _ = _resolve(ctx, req.forgotten_topics_data)
    ack_results = await _apply_acks(ctx, share, group_id, member_id, ids, readable, req.topics)
    responses: dict[bytes, dict[int, dict]] = {}
    node_endpoints: dict[int, dict] = {}

    def put(topic_id, idx: int, entry: dict) -> None:
        responses.setdefault(topic_id, {})[idx] = entry

    name_to_id = {n: tid for tid, n in ids.items() if n is not None}
    if epoch == -1:
        share.close_session(group_id, member_id)
    else:
        add = []
        for t in req.topics:
            name = ids.get(t.topic_id)
            for p in t.partitions:
                if name is None:
                    put(t.topic_id, p.partition_index, _partition_out(p.partition_index, None, E.UNKNOWN_TOPIC_ID))
                elif name not in readable:
                    put(t.topic_id, p.partition_index,
                        _partition_out(p.partition_index, None, E.TOPIC_AUTHORIZATION_FAILED))
                else:
                    add.append((name, p.partition_index))
        forget = [(forgotten_ids[f.topic_id], i) for f in req.forgotten_topics_data
                  if forgotten_ids.get(f.topic_id) for i in f.partitions]
        session = share.open_session(group_id, member_id, epoch, add, forget)
        if epoch == 0 and session.owner is None:
            _bind_to_connection(ctx, share, session)
        meta = ctx.runtime.metadata
        for name, _ in session.partitions:
            if name not in name_to_id and (info := meta.topics.get(name)) is not None:
                name_to_id[name] = info.topic_id
        results = await share.fetch(session, req.max_wait_ms, req.min_bytes, req.max_bytes,
                                    req.max_records if req.max_records > 0 else 500)
        for (name, idx), res in results.items():
            tid = name_to_id.get(name)
            if tid is None:
                continue
            entry = _partition_out(idx, res)
            _leader_of(ctx, entry, name, idx, node_endpoints)
            if res.error or res.acquired or epoch == 0 or (tid, idx) in ack_results:
                put(tid, idx, entry)
    for (tid, idx), code in ack_results.items():
        entry = responses.get(tid, {}).get(idx)
        if entry is None:
            entry = _partition_out(idx, None)
            _leader_of(ctx, entry, ids.get(tid), idx, node_endpoints)
            put(tid, idx, entry)
        entry["acknowledge_error_code"] = code
    return {"throttle_time_ms": 0, "error_code": E.NONE, "error_message": None,
            "acquisition_lock_timeout_ms": (await share.group_settings(group_id)).record_lock_duration_ms,
            "responses": [{"topic_id": tid, "partitions": list(parts.values())} for tid, parts in responses.items()],
            "node_endpoints": list(node_endpoints.values())}


async def handle_share_acknowledge(ctx, req) -> dict:
    """ShareAcknowledge v1 (KIP-932): acknowledgements outside a fetch (commit_sync/async,
    close). Epoch 0 is INVALID_SHARE_SESSION_EPOCH (a session must exist); -1 also closes it."""
    share = _share(ctx)
    group_id, member_id = req.group_id or "", req.member_id or ""
    if not authorize(ctx, AclOperation.READ, ResourceType.GROUP, group_id):
        return _top_error(E.GROUP_AUTHORIZATION_FAILED, "Authorization failed.")
    epoch = req.share_session_epoch
    if not group_id or not member_id:
        return _top_error(E.INVALID_REQUEST)
    if epoch == 0:
        return _top_error(E.INVALID_SHARE_SESSION_EPOCH)
    err = share.session_error(group_id, member_id, epoch, False)
    if err:
        return _top_error(err)
    ids, readable = _resolve(ctx, req.topics)
    ack_results = await _apply_acks(ctx, share, group_id, member_id, ids, readable, req.topics)
    if epoch == -1:
        share.close_session(group_id, member_id)
    else:
        share.open_session(group_id, member_id, epoch, [], [])
    node_endpoints: dict[int, dict] = {}
    responses: dict[bytes, list[dict]] = {}
    for (tid, idx), code in ack_results.items():
        entry = _partition_out(idx, None, with_records=False)
        entry.pop("acknowledge_error_code")
        entry.pop("acknowledge_error_message")
        entry["error_code"] = code
        _leader_of(ctx, entry, ids.get(tid), idx, node_endpoints)
        responses.setdefault(tid, []).append(entry)
    return {"throttle_time_ms": 0, "error_code": E.NONE, "error_message": None,
            "responses": [{"topic_id": tid, "partitions": parts} for tid, parts in responses.items()],
            "node_endpoints": list(node_endpoints.values())}


# ---------------------------------------------------------------------- admin: share-group offsets
async def handle_describe_share_group_offsets(ctx, req) -> dict:
    """DescribeShareGroupOffsets v0: each share-partition's start offset (-1 without state)."""
    share = _share(ctx)
    meta = ctx.runtime.metadata
    groups_out = []
    for g in req.groups:
        entry = {"group_id": g.group_id, "topics": [], "error_code": E.NONE, "error_message": None}
        groups_out.append(entry)
        if not authorize(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, g.group_id):
            entry.update(error_code=E.GROUP_AUTHORIZATION_FAILED, error_message="Authorization failed.")
            continue
        wanted = None if g.topics is None else {t.topic_name: list(t.partitions) for t in g.topics}
        err, result = await share.describe_offsets(g.group_id, wanted)
        if err:
            entry["error_code"] = err
            continue
        described = authorized_names(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, list(result))
        for name, parts in result.items():
            info = meta.topics.get(name)
            entry["topics"].append({"topic_name": name, "topic_id": info.topic_id if info else None, "partitions": [
                {"partition_index": i, "start_offset": so if name in described else -1,
                 "leader_epoch": le, "error_code": code if name in described else E.TOPIC_AUTHORIZATION_FAILED,
                 "error_message": None} for i, (so, le, code) in sorted(parts.items())]})
    return {"throttle_time_ms": 0, "groups": groups_out}


async def handle_alter_share_group_offsets(ctx, req) -> dict:
    """AlterShareGroupOffsets v0: reset an empty share group's share-partitions to start offsets
    (READ on the group and on each topic, as Kafka)."""
    share = _share(ctx)
    meta = ctx.runtime.metadata

    def answer(codes: dict[str, dict[int, int]], default: int = E.NONE) -> dict:
        return {"throttle_time_ms": 0, "responses": [
            {"topic_name": t.topic_name, "topic_id": (meta.topics[t.topic_name].topic_id
                                                       if t.topic_name in meta.topics else None),
             "partitions": [{"partition_index": p.partition_index,
                             "error_code": codes.get(t.topic_name, {}).get(p.partition_index, default),
                             "error_message": None} for p in t.partitions]} for t in req.topics]}

    if not authorize(ctx, AclOperation.READ, ResourceType.GROUP, req.group_id):
        return answer({}, E.GROUP_AUTHORIZATION_FAILED)
    readable = authorized_names(ctx, AclOperation.READ, ResourceType.TOPIC, [t.topic_name for t in req.topics])
    wanted = {t.topic_name: [(p.partition_index, p.start_offset) for p in t.partitions]
              for t in req.topics if t.topic_name in readable}
    err, codes = await share.alter_offsets(req.group_id, wanted)
    if err:
        return answer({}, err)
    for t in req.topics:
        if t.topic_name not in readable:
            codes[t.topic_name] = {p.partition_index: E.TOPIC_AUTHORIZATION_FAILED for p in t.partitions}
    return answer(codes)


async def handle_delete_share_group_offsets(ctx, req) -> dict:
    """DeleteShareGroupOffsets v0: forget an empty share group's state of whole topics (DELETE
    on the group, READ on each topic, as Kafka)."""
    meta = ctx.runtime.metadata

    def top(code: int) -> dict:
        return {"throttle_time_ms": 0, "error_code": code, "error_message": None, "responses": []}

    if not authorize(ctx, AclOperation.DELETE, ResourceType.GROUP, req.group_id):
        return top(E.GROUP_AUTHORIZATION_FAILED)
    names = [t.topic_name for t in req.topics]
    readable = authorized_names(ctx, AclOperation.READ, ResourceType.TOPIC, names)
    err, codes = await _share(ctx).delete_offsets(req.group_id, [n for n in names if n in readable])
    if err:
        return top(err)
    responses = []
    for name in names:
        info = meta.topics.get(name)
        if name not in readable or info is None:
            code = E.TOPIC_AUTHORIZATION_FAILED if name not in readable else E.UNKNOWN_TOPIC_OR_PARTITION
            responses.append({"topic_name": name, "topic_id": None, "partitions": [
                {"partition_index": -1, "error_code": code, "error_message": None}]})
            continue
        responses.append({"topic_name": name, "topic_id": info.topic_id, "partitions": [
            {"partition_index": i, "error_code": c, "error_message": None} for i, c in sorted(codes[name].items())]})
    return {"throttle_time_ms": 0, "error_code": E.NONE, "error_message": None, "responses": responses}


async def _serve_counts(share: ShareCoordinator, req: dict) -> dict:
    """Broker RPC op ``share_partition_counts``: ``{"group"}`` -> ``{"partitions": [[topic,
    partition, in flight, acquired], ...]}`` of the share-partitions led here."""
    return {"partitions": [list(row) for row in share.partition_counts(str(req.get("group", "")))]}


def register(runtime) -> None:
    """Create the share coordinator next to the group coordinator and register the APIs."""
    share = ShareCoordinator(BrokerCoordinatorHost(runtime), runtime.coordinator)
    runtime.share_coordinator = share
    if runtime.cluster is not None:
        runtime.cluster.rpc_ops["share_state"] = lambda peer_id, req: share.serve_state_rpc(req)
        runtime.cluster.rpc_ops["share_partition_counts"] = lambda peer_id, req: _serve_counts(share, req)
    runtime.register(76, handle_share_group_heartbeat, 1, 1)
    runtime.register(77, handle_share_group_describe, 1, 1)
    runtime.register(78, handle_share_fetch, 1, 1)
    runtime.register(79, handle_share_acknowledge, 1, 1)
    runtime.register(90, handle_describe_share_group_offsets, 0, 0)
    runtime.register(91, handle_alter_share_group_offsets, 0, 0)
    runtime.register(92, handle_delete_share_group_offsets, 0, 0)
