"""Fetch (1), ListOffsets (2), OffsetForLeaderEpoch (23).

Sources: FetchRequest/Response v0-17 (KIP-74 response max bytes, KIP-227 incremental fetch
sessions, KIP-320 leader epochs, KIP-516 topic ids v13+),
ListOffsetsRequest/Response v0-9 (KIP-79 by timestamp, KIP-734 max timestamp),
OffsetForLeaderEpochRequest/Response v0-4 (KIP-101, KIP-279).

Fetch returns whole batches as :class:`~litemq.protocol.regions.FileRegion` parts, so the
connection sends them with sendfile. A fetch that has fewer than ``min_bytes`` waits on the
partitions' high watermarks (one future watching them all, no timer polling) for at most
``max_wait_ms``.

Fetch sessions (KIP-227, :mod:`litemq.broker.fetch_sessions`): a Fetch v7+ asking for a session
gets one from the broker's cache; later incremental Fetches of that session name only what
changed, and are answered with only the partitions that have something new, while every partition
of the session is read and waited on.

Fetch from follower (KIP-392): a follower answers a consumer's Fetch v11+ (older versions get
NOT_LEADER_OR_FOLLOWER, as from Kafka) with what it has up to the high watermark it knows (the
last stable offset with read_committed), which may lag the leader's; an offset past its log end
is OFFSET_OUT_OF_RANGE, and a consumer that gets it from a follower goes back to the leader. With
``replica.selector.class`` = Kafka's RackAwareReplicaSelector a leader answers a consumer in
another rack than its own with no records and ``preferred_read_replica`` = an in-sync follower in
the consumer's rack (``rack_id``, the client's ``client.rack``), at once (no long poll), as
Kafka's ``ReplicaManager`` does; :mod:`litemq.replica.selector` chooses. ListOffsets and
OffsetForLeaderEpoch stay leader-only.

Authorization (Kafka ``KafkaApis``): Fetch needs READ on each topic, ListOffsets and
OffsetForLeaderEpoch need DESCRIBE; a refused topic's partitions answer
TOPIC_AUTHORIZATION_FAILED (checked before existence).
"""

from __future__ import annotations

from litemq import limits
from litemq.config import RACK_AWARE_REPLICA_SELECTOR
from litemq.security.acl_operations import AclOperation, ResourceType
from litemq.broker.authz import authorized_names
from litemq.broker.fetch_sessions import QUIET
from litemq.protocol.errors import ErrorCode, KafkaError
from litemq.protocol.regions import RecordsParts
from litemq.replica.selector import NO_PREFERRED_REPLICA, rack_aware_preferred_replica

_EMPTY = b""


def _partition_error(index: int, code: int, p=None) -> dict:
    return {"partition_index": index, "error_code": code,
            "high_watermark": p.kafka_high_watermark if p is not None else -1,
            "last_stable_offset": p.kafka_last_stable_offset if p is not None else -1,
            "log_start_offset": p.kafka_log_start_offset if p is not None else -1,
            "aborted_transactions": None, "preferred_read_replica": -1, "records": _EMPTY}


def _preferred_replicas(runtime, req, v: int, listener_name: str | None):
    """A function (partition, Kafka fetch offset) -> ``preferred_read_replica`` for this Fetch,
    or None when no partition can have one: a request before v11 (no client metadata), a client
    without a rack, or no ``replica.selector.class`` on this broker. Followers are candidates only when they are
    reachable on ``listener_name`` (the connection's listener), as Kafka's metadata cache says."""
    if v < 11 or runtime.config.replica_selector_class != RACK_AWARE_REPLICA_SELECTOR or not req.rack_id:
        return None
    reachable: set[int] | None = None

    def preferred(p, fetch_offset: int) -> int:
        nonlocal reachable
        ends = p.in_sync_follower_log_ends()
        if not ends:
            return NO_PREFERRED_REPLICA
        if reachable is None:
            reachable = {n for n, _, _ in runtime.brokers(listener_name)}
        return rack_aware_preferred_replica(req.rack_id, runtime.config.node_id,
                                            {n: end for n, end in ends.items() if n in reachable},
                                            p.log_offset(fetch_offset), runtime.rack_of)
    return preferred


def _read_all(runtime, req, v: int, topics, max_bytes: int, readable: set[str], listener_name: str | None,
              session_read: bool = False):
    """One pass over ``topics`` (FetchRequest topics, or a fetch session's): (response topics,
    bytes, answer now, partitions), one response partition per partition, in order. Topics not in
    ``readable`` (READ not authorized) answer TOPIC_AUTHORIZATION_FAILED. "Answer now" (no long
    poll): a partition erred or was sent to its preferred read replica.

    ``session_read`` (an incremental fetch: ``topics`` hold :class:`CachedPartition` objects): a
    partition whose state is what it was when this session last found nothing in it to read or
    tell the consumer (:func:`_quiet_state`) is not read again; its response partition is
    :data:`QUIET`, which the session leaves out of the answer."""
    meta = runtime.metadata
    read_committed = v >= 4 and req.isolation_level == 1
    preferred_of = _preferred_replicas(runtime, req, v, listener_name)
    session_read = session_read and preferred_of is None
    remaining = max_bytes
    total = 0
    error_seen = False
    watched = []
    topics_out = []
    for t in topics:
        if v >= 13:
            info = meta.topic_by_id(t.topic_id)
            name = info.name if info is not None else None
        else:
            name = t.topic
            info = meta.topics.get(name)
        parts_out = []
        for fp in t.partitions:
            idx = fp.partition
            if info is not None and name not in readable:
                parts_out.append(_partition_error(idx, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
                error_seen = True
                continue
            p = runtime.replicas.get(name, idx) if info is not None else None
            if p is None:
                code = ErrorCode.UNKNOWN_TOPIC_ID if (v >= 13 and info is None) else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                if info is not None and runtime.cluster is not None and 0 <= idx < info.num_partitions:
                    code = ErrorCode.NOT_LEADER_OR_FOLLOWER  # another broker hosts it
                parts_out.append(_partition_error(idx, code))
                error_seen = True
                continue
            if session_read:
                state = _quiet_state(p, fp, v, read_committed)
                if fp.quiet == state:
                    watched.append(p)
                    parts_out.append(QUIET)
                    continue
            if not p.is_leader and not (v >= 11 and p.is_follower):  # KIP-392: v11+ may read a follower
                parts_out.append(_partition_error(idx, ErrorCode.NOT_LEADER_OR_FOLLOWER))
                error_seen = True
                continue
            if v >= 9:
                code = p.check_leader_epoch(fp.current_leader_epoch)
                if code:
                    parts_out.append(_partition_error(idx, code, p))
                    error_seen = True
                    continue
            # Offsets in the request and the answer are Kafka's; the log's are Raft offsets in a
            # cluster (Partition.kafka_offset / log_offset translate, issue 19).
            hw = p.high_watermark
            lso = p.last_stable_offset
            # read_committed (KIP-98): nothing at or past the last stable offset is returned.
            visible = lso if read_committed else hw
            if not p.kafka_log_start_offset <= fp.fetch_offset <= p.kafka_log_end_offset:
                parts_out.append(_partition_error(idx, ErrorCode.OFFSET_OUT_OF_RANGE, p))
                error_seen = True
                continue
            if preferred_of is not None and p.is_leader and \
                    (preferred := preferred_of(p, fp.fetch_offset)) != NO_PREFERRED_REPLICA:
                # Kafka skips the read and answers at once: the consumer goes to that replica
                parts_out.append(dict(_partition_error(idx, ErrorCode.NONE, p), preferred_read_replica=preferred))
                error_seen = True
                continue
            offset = p.log_offset(fp.fetch_offset)
            records = _EMPTY
            aborted = None if not read_committed else []
            if offset < visible and remaining > 0:
                limit = min(fp.partition_max_bytes, remaining)
                try:
                    res = p.log.read_for_clients(offset, limit, max_offset=visible, min_one_batch=(total == 0))
                except KafkaError as exc:
                    parts_out.append(_partition_error(idx, exc.code, p))
                    error_seen = True
                    continue
                if res.size:
                    records = RecordsParts(res.regions)
                    total += res.size
                    remaining -= res.size
                    if read_committed:
                        aborted = [{"producer_id": pid, "first_offset": p.kafka_offset(first)}
                                   for pid, first in p.log.collect_aborted_transactions(offset, visible)]
            watched.append(p)
            kafka_hw, kafka_log_start = p.kafka_offset(hw), p.kafka_log_start_offset
            if session_read and offset >= visible and fp.high_watermark == kafka_hw and \
                    fp.sent_log_start_offset == kafka_log_start:
                fp.quiet = state  # nothing to read, nothing the consumer does not know
            parts_out.append({"partition_index": idx, "error_code": ErrorCode.NONE,
                              "high_watermark": kafka_hw, "last_stable_offset": p.kafka_offset(lso),
                              "log_start_offset": kafka_log_start,
                              "aborted_transactions": aborted,
                              "preferred_read_replica": -1, "records": records})
        topics_out.append({"topic": name or "", "topic_id": t.topic_id if v >= 13 else None,
                           "partitions": parts_out})
    return topics_out, total, error_seen, watched


def _quiet_state(p, cached, v: int, read_committed: bool) -> tuple:
    """Everything a read of session partition ``cached`` on replica ``p`` depends on: the same
    tuple means the same answer (KIP-227 incremental fetches skip such partitions). The high
    watermark, log end and log start offsets cover appends, commits, transaction markers,
    truncation, retention and DeleteRecords; the replica object, role and leader epoch cover
    leadership moves and a partition deleted and created again; the request version and isolation
    level what a follower may serve and how far a read may go."""
    return (p, p.log, p.is_leader, p.is_follower, p.leader_epoch, p.high_watermark, p.log.log_end_offset,
            p.log.log_start_offset, cached.fetch_offset, cached.current_leader_epoch, v, read_committed)


def _body(runtime, context, topics_out) -> dict:
    session_id, topics_out = context.finish(topics_out)
    runtime.metrics.on_fetch_response(topics_out)  # kafka_server_brokertopicmetrics_bytesout
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "session_id": session_id, "responses": topics_out}


def handle_fetch(ctx, req):
    runtime = ctx.runtime
    v = ctx.version
    context = runtime.fetch_sessions.new_context(v, req)
    if context.error:
        return {"throttle_time_ms": 0, "error_code": context.error, "session_id": 0, "responses": []}
    topics = context.topics
    max_bytes = min(req.max_bytes if v >= 3 else limits.MAX_FETCH_RESPONSE_BYTES, limits.MAX_FETCH_RESPONSE_BYTES)
    max_bytes = max(max_bytes, 1)
    meta = runtime.metadata
    names = [t.topic for t in topics] if v < 13 else [
        info.name for t in topics if (info := meta.topic_by_id(t.topic_id)) is not None]
    readable = authorized_names(ctx, AclOperation.READ, ResourceType.TOPIC, names)
    listener_name = ctx.connection.listener_name
    session_read = context.kind == "incremental"
    topics_out, total, error_seen, watched = _read_all(runtime, req, v, topics, max_bytes, readable, listener_name,
                                                       session_read)
    max_wait_ms = min(max(req.max_wait_ms, 0), limits.MAX_FETCH_WAIT_MS)
    if total >= req.min_bytes or error_seen or max_wait_ms == 0 or not watched:
        return _body(runtime, context, topics_out)
    return _long_poll(runtime, req, v, context, max_bytes, max_wait_ms, watched, readable, listener_name)


async def _long_poll(runtime, req, v, context, max_bytes, max_wait_ms, watched, readable, listener_name):
    loop = runtime.loop
    deadline = loop.time() + max_wait_ms / 1000
    while True:
        woken = loop.create_future()  # one future for all the partitions: cheap with many of them
        for p in watched:
            p.watch(p.high_watermark + 1, woken)
        await runtime.replicas.wait_any([woken], deadline - loop.time())
        topics_out, total, error_seen, watched = _read_all(runtime, req, v, context.topics, max_bytes, readable,
                                                           listener_name, context.kind == "incremental")
        if total >= req.min_bytes or error_seen or loop.time() >= deadline or not watched:
            return _body(runtime, context, topics_out)


# ---------------------------------------------------------------- ListOffsets
EARLIEST, LATEST, MAX_TIMESTAMP, EARLIEST_LOCAL, LATEST_TIERED = -2, -1, -3, -4, -5


def _list_offset(p, timestamp: int, isolation_level: int) -> tuple[int, int, int]:
    """(Kafka offset, timestamp, leader epoch) for one ListOffsets query; (-1, -1, -1) when no
    record qualifies. With ``isolation_level`` 1 (read_committed) the last stable offset bounds
    the answer. The epoch is Kafka's (``Partition.fetchOffsetForTimestamp`` and
    ``UnifiedLog.fetchOffsetByTimestamp``): the current leader epoch for LATEST, else the
    epoch of the batch found (its partitionLeaderEpoch, from the leader epoch cache: the
    earliest entry for EARLIEST), or the current one at the log end (no batch there yet)."""
    offset, ts = _list_log_offset(p, timestamp, isolation_level)
    if offset < 0:
        return offset, ts, -1
    if timestamp == LATEST or offset >= p.log.log_end_offset:
        epoch = p.leader_epoch
    else:
        epoch = p.log.leader_epoch_cache.epoch_for_offset(offset)
    return p.kafka_offset(offset), ts, epoch


def _list_log_offset(p, timestamp: int, isolation_level: int) -> tuple[int, int]:
    """:func:`_list_offset` in log offsets. Raft-internal batches carry no timestamp (-1), so
    the by-timestamp lookups never land on one."""
    hw = p.last_stable_offset if isolation_level == 1 else p.high_watermark
    if timestamp in (EARLIEST, EARLIEST_LOCAL):
        return p.log_start_offset, -1
    if timestamp == LATEST:
        return hw, -1
    if timestamp == LATEST_TIERED:
        return -1, -1
    if timestamp == MAX_TIMESTAMP:
        found = p.log.max_timestamp_offset()
        if found is None or found[0] >= hw:
            return -1, -1
        return found
    found = p.log.offset_for_timestamp(timestamp)
    if found is None or found[0] >= hw:
        return -1, -1
    return found


def handle_list_offsets(ctx, req) -> dict:
    runtime = ctx.runtime
    v = ctx.version
    topics_out = []
    described = authorized_names(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, (t.name for t in req.topics))
    for t in req.topics:
        parts = []
        for lp in t.partitions:
            p, err = runtime.leader_partition(t.name, lp.partition_index)
            entry = {"partition_index": lp.partition_index, "error_code": ErrorCode.NONE,
                     "old_style_offsets": [], "timestamp": -1, "offset": -1, "leader_epoch": -1}
            if t.name not in described:
                entry["error_code"] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif err:
                entry["error_code"] = err
            elif v >= 4 and (code := p.check_leader_epoch(lp.current_leader_epoch)):
                entry["error_code"] = code
            else:
                offset, ts, epoch = _list_offset(p, lp.timestamp, req.isolation_level if v >= 2 else 0)
                entry.update(offset=offset, timestamp=ts, leader_epoch=epoch)
                if v == 0:
                    entry["old_style_offsets"] = [offset] if offset >= 0 and lp.max_num_offsets > 0 else []
            parts.append(entry)
        topics_out.append({"name": t.name, "partitions": parts})
    return {"throttle_time_ms": 0, "topics": topics_out}


# ---------------------------------------------------------------- OffsetForLeaderEpoch
def handle_offset_for_leader_epoch(ctx, req) -> dict:
    runtime = ctx.runtime
    topics_out = []
    described = authorized_names(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, (t.topic for t in req.topics))
    for t in req.topics:
        parts = []
        for ep in t.partitions:
            p = runtime.replicas.get(t.topic, ep.partition)
            entry = {"error_code": ErrorCode.NONE, "partition": ep.partition, "leader_epoch": -1, "end_offset": -1}
            if t.topic not in described:
                entry["error_code"] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif p is None:
                entry["error_code"] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            elif not p.is_leader:
                entry["error_code"] = ErrorCode.NOT_LEADER_OR_FOLLOWER
            elif ctx.version >= 2 and (code := p.check_leader_epoch(ep.current_leader_epoch)):
                entry["error_code"] = code
            else:
                epoch, end = p.log.leader_epoch_cache.end_offset_for_epoch(ep.leader_epoch, p.log_end_offset)
                entry.update(leader_epoch=epoch, end_offset=p.kafka_offset(end) if end >= 0 else end)
            parts.append(entry)
        topics_out.append({"topic": t.topic, "partitions": parts})
    return {"throttle_time_ms": 0, "topics": topics_out}


def register(runtime) -> None:
    runtime.register(1, handle_fetch)
    runtime.register(2, handle_list_offsets)
    runtime.register(23, handle_offset_for_leader_epoch)
