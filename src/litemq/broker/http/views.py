"""What the REST API, the console and ``/metrics`` show: cluster, topics, offsets, groups, records.

Every view is computed on request from the broker's own state and Kafka APIs
(:mod:`litemq.broker.http.inproc`): partition leaders and ISRs as the Metadata handler reports
them, offsets from ListOffsets on each partition's leader, groups from ListGroups on every broker
and DescribeGroups/OffsetFetch on the group's coordinator, records from Fetch on the leader. So
in a cluster any broker answers for the whole cluster, and ACLs apply to the HTTP caller as they
would to a Kafka client (topics it may not DESCRIBE are left out; a READ refused is reported).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from litemq import limits
from litemq.security.acl_operations import AclOperation, ResourceType
from litemq.broker.authz import authorized_names
from litemq.broker.context import RequestContext
from litemq.broker.handlers.core import topic_entry
from litemq.broker.http.inproc import (
    CONSUMER_GROUP_DESCRIBE,
    DESCRIBE_GROUPS,
    DESCRIBE_SHARE_GROUP_OFFSETS,
    FETCH,
    LIST_GROUPS,
    LIST_OFFSETS,
    OFFSET_FETCH,
    SHARE_GROUP_DESCRIBE,
    HttpCaller,
    PeerUnavailable,
    call_api,
)
from litemq.coordinator.coordinator import OFFSETS_TOPIC
from litemq.coordinator.records import FormatError, assignment_partitions
from litemq.metrics import GroupLag
from litemq.protocol import frames
from litemq.protocol.errors import ErrorCode, KafkaError
from litemq.protocol.records import Record, decode_records, iter_batches
from litemq.security.principal import KafkaPrincipal

if TYPE_CHECKING:
    from litemq.broker.http.runtime import HttpRuntime

EARLIEST, LATEST = -2, -1


def describable_topics(runtime: "HttpRuntime", caller: HttpCaller, include_internal: bool = True) -> list:
    """TopicInfo of every topic ``caller`` may DESCRIBE, by name."""
    names = authorized_names(_ctx(runtime, caller), AclOperation.DESCRIBE, ResourceType.TOPIC,
                             runtime.metadata.topics)
    return [info for name, info in sorted(runtime.metadata.topics.items())
            if name in names and (include_internal or not info.internal)]


def may(runtime: "HttpRuntime", caller: HttpCaller, op: AclOperation, rtype: ResourceType, name: str) -> bool:
    """True when ``caller`` may perform ``op`` on the resource (no authorizer: always)."""
    return name in authorized_names(_ctx(runtime, caller), op, rtype, [name])


def _ctx(runtime, caller: HttpCaller) -> RequestContext:
    return RequestContext(frames.RequestHeader(3, 0, 0, "litemq-http"), caller, runtime)


def partitions(runtime: "HttpRuntime", info) -> list[dict]:
    """The Metadata view of a topic's partitions: ``partition_index``, ``leader_id`` (-1: none),
    ``leader_epoch``, ``replica_nodes``, ``isr_nodes``, ``offline_replicas``, ``error_code``."""
    return topic_entry(runtime, info)["partitions"]


def leader_of(runtime: "HttpRuntime", topic: str, index: int) -> int:
    """Node id of the partition's leader as this broker knows it; -1 when none is live."""
    if runtime.cluster is None:
        return runtime.config.node_id if runtime.replicas.get(topic, index) is not None else -1
    return runtime.cluster.leader_of(topic, index)[0]


async def find_leader(runtime: "HttpRuntime", topic: str, index: int) -> int:
    """:func:`leader_of`, waiting up to :data:`limits.HTTP_LEADER_WAIT_MS` while none is known
    (what a Kafka client does with a metadata refresh and a retry backoff); -1 after that."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + limits.HTTP_LEADER_WAIT_MS / 1000
    while True:
        leader = leader_of(runtime, topic, index)
        if leader >= 0 or loop.time() >= deadline:
            return leader
        await asyncio.sleep(0.05)


def brokers(runtime: "HttpRuntime") -> list[dict]:
    """Every registered broker: ``broker_id``, ``host``, ``port`` (first advertised listener),
    ``live``, ``controller`` (the metadata leader), ``rack`` (``broker.rack`` or None),
    ``quorum_role`` (``voter``: a voter of the metadata quorum as this broker's metadata log
    has it; ``observer``: any other broker, e.g. one that joined with ``--join``, KIP-853)."""
    controller = runtime.controller_id()
    if runtime.cluster is None:
        host, port = runtime.advertised()
        return [{"broker_id": runtime.config.node_id, "host": host, "port": port, "live": True, "controller": True,
                 "rack": runtime.config.broker_rack, "quorum_role": "voter"}]
    live = {n for n, _, _ in runtime.brokers()}
    meta = getattr(runtime.cluster, "meta", None)
    voters = meta.node.voters if meta is not None else frozenset()
    out = []
    for nid in runtime.registered_broker_ids():
        b = runtime.metadata.brokers[nid]
        out.append({"broker_id": nid, "host": b.host, "port": b.port, "live": nid in live, "controller": nid == controller,
                    "rack": runtime.rack_of(nid), "quorum_role": "voter" if nid in voters else "observer"})
    return out


# ------------------------------------------------------------------ offsets
async def list_offsets(runtime: "HttpRuntime", caller: HttpCaller, tps: list[tuple[str, int]], timestamp: int,
                       isolation_level: int = 0, wait: bool = False) -> dict[tuple[str, int], tuple[int, int, int]]:
    """ListOffsets on each partition's leader: (topic, partition) -> (error code, offset,
    timestamp). ``timestamp``: -2 earliest, -1 latest (the high watermark, or the last stable
    offset with ``isolation_level`` 1), or a time in ms (first offset at or after it; offset -1
    when there is none). A leader that is unknown (after :func:`find_leader` with ``wait``) or
    does not answer gives LEADER_NOT_AVAILABLE / REQUEST_TIMED_OUT."""
    by_leader: dict[int, list[tuple[str, int]]] = {}
    out: dict[tuple[str, int], tuple[int, int, int]] = {}
    if wait:
        found = await asyncio.gather(*(find_leader(runtime, *tp) for tp in tps))
    else:
        found = [leader_of(runtime, *tp) for tp in tps]
    for tp, leader in zip(tps, found):
        if leader < 0:
            out[tp] = (ErrorCode.LEADER_NOT_AVAILABLE, -1, -1)
        else:
            by_leader.setdefault(leader, []).append(tp)

    async def ask(leader: int, group: list[tuple[str, int]]) -> None:
        topics: dict[str, list[dict]] = {}
        for t, p in group:
            topics.setdefault(t, []).append({"partition_index": p, "timestamp": timestamp})
        body = {"replica_id": -1, "isolation_level": isolation_level,
                "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}
        try:
            resp = await call_api(runtime, LIST_OFFSETS, body, node_id=leader, caller=caller)
        except PeerUnavailable:
            for tp in group:
                out[tp] = (ErrorCode.REQUEST_TIMED_OUT, -1, -1)
            return
        for t in resp.topics:
            for p in t.partitions:
                out[(t.name, p.partition_index)] = (p.error_code, p.offset, p.timestamp)

    await asyncio.gather(*(ask(leader, group) for leader, group in by_leader.items()))
    return out


async def partition_offsets(runtime: "HttpRuntime", caller: HttpCaller, tps: list[tuple[str, int]],
                            wait: bool = False) -> dict[tuple[str, int], dict]:
    """(topic, partition) -> ``{"log_start_offset", "high_watermark", "last_stable_offset",
    "error_code"}`` from the partition leaders (offsets -1 when unknown; ``wait``: see
    :func:`list_offsets`)."""
    start, end, stable = await asyncio.gather(list_offsets(runtime, caller, tps, EARLIEST, wait=wait),
                                              list_offsets(runtime, caller, tps, LATEST, wait=wait),
                                              list_offsets(runtime, caller, tps, LATEST, isolation_level=1, wait=wait))
    out = {}
    for tp in tps:
        err = start[tp][0] or end[tp][0] or stable[tp][0]
        out[tp] = {"log_start_offset": start[tp][1], "high_watermark": end[tp][1],
                   "last_stable_offset": stable[tp][1], "error_code": int(err)}
    return out


# ------------------------------------------------------------------ groups
def coordinator_of(runtime: "HttpRuntime", group_id: str) -> int:
    """Node id of ``group_id``'s coordinator (the leader of its ``__consumer_offsets``
    partition); -1 when unknown."""
    if runtime.cluster is None:
        return runtime.config.node_id
    coord = runtime.coordinator
    if coord is None:
        return -1
    return runtime.cluster.leader_of(OFFSETS_TOPIC, coord.partition_for(group_id))[0]


async def list_groups(runtime: "HttpRuntime", caller: HttpCaller) -> list[dict]:
    """Every group of every live broker the caller may DESCRIBE: ``group_id``, ``protocol_type``,
    ``state``, ``coordinator`` (node id)."""
    nodes = [runtime.config.node_id] if runtime.cluster is None else [b["broker_id"] for b in brokers(runtime) if b["live"]]

    async def ask(node: int):
        try:
            return node, await call_api(runtime, LIST_GROUPS, {"states_filter": []}, node_id=node, caller=caller)
        except PeerUnavailable:
            return node, None

    out: dict[str, dict] = {}
    for node, resp in await asyncio.gather(*(ask(n) for n in nodes)):
        if resp is None or resp.error_code:
            continue
        for g in resp.groups:
            out[g.group_id] = {"group_id": g.group_id, "protocol_type": g.protocol_type,
                               "state": g.group_state, "coordinator": node}
    return [out[k] for k in sorted(out)]


async def describe_group(runtime: "HttpRuntime", caller: HttpCaller, group_id: str) -> dict:
    """One group as its coordinator describes it (DescribeGroups + OffsetFetch) with lag.

    Returns ``{"group_id", "state", "protocol_type", "protocol", "coordinator", "error_code",
    "members": [{"member_id", "client_id", "client_host", "instance_id", "assignment":
    {topic: [partitions]}}], "offsets": [{"topic", "partition", "current_offset",
    "log_end_offset", "lag", "consumer_id", "client_id"}]}`` (lag -1 when the end is unknown).
    """
    coord = coordinator_of(runtime, group_id)
    base = {"group_id": group_id, "state": "Unknown", "protocol_type": "", "protocol": "", "coordinator": coord,
            "members": [], "offsets": [], "error_code": 0}
    if coord < 0:
        return dict(base, error_code=int(ErrorCode.COORDINATOR_NOT_AVAILABLE))
    try:
        desc, fetched = await asyncio.gather(
            call_api(runtime, DESCRIBE_GROUPS, {"groups": [group_id]}, node_id=coord, caller=caller),
            call_api(runtime, OFFSET_FETCH, {"group_id": group_id, "topics": None}, node_id=coord, caller=caller))
    except PeerUnavailable:
        return dict(base, error_code=int(ErrorCode.COORDINATOR_NOT_AVAILABLE))
    g = desc.groups[0]
    if g.error_code:
        return dict(base, error_code=int(g.error_code))
    owner: dict[tuple[str, int], dict] = {}
    members = []
    for m in g.members:
        try:
            assigned = assignment_partitions(bytes(m.member_assignment or b"")) if g.protocol_type == "consumer" else {}
        except FormatError:
            assigned = {}
        entry = {"member_id": m.member_id, "client_id": m.client_id, "client_host": m.client_host,
                 "instance_id": m.group_instance_id, "assignment": assigned}
        members.append(entry)
        for t, ps in assigned.items():
            for p in ps:
                owner[(t, p)] = entry
    rows = []
    if not fetched.error_code:
        for t in fetched.topics:
            for p in t.partitions:
                if p.error_code or p.committed_offset < 0:
                    continue
                rows.append((t.name, p.partition_index, p.committed_offset))
    if g.group_state == "Dead" and not g.members:  # no classic group: a KIP-848 or a share group?
        other = await _describe_consumer_group(runtime, caller, group_id, coord, base, rows)
        if other is None and not rows:
            other = await _describe_share_group(runtime, caller, group_id, coord, base)
        if other is not None:
            return other
    offsets = await _lag_rows(runtime, caller, group_id, rows, owner)
    return dict(base, state=g.group_state, protocol_type=g.protocol_type, protocol=g.protocol_data,
                members=members, offsets=offsets)


async def _lag_rows(runtime: "HttpRuntime", caller: HttpCaller, group_id: str, rows: list[tuple[str, int, int]],
                    owner: dict[tuple[str, int], dict]) -> list[dict]:
    """The ``offsets`` of :func:`describe_group`: (topic, partition, offset) rows with the log end
    offset, the lag and the member owning the partition (``owner``)."""
    ends = await list_offsets(runtime, caller, [(t, p) for t, p, _ in rows], LATEST) if rows else {}
    offsets = []
    for t, p, committed in sorted(rows):
        err, end, _ = ends.get((t, p), (ErrorCode.UNKNOWN_SERVER_ERROR, -1, -1))
        lag = GroupLag(group_id, t, p, committed, end if not err else -1)
        m = owner.get((t, p))
        offsets.append({"topic": t, "partition": p, "current_offset": committed, "log_end_offset": lag.end_offset,
                        "lag": lag.lag, "consumer_id": m["member_id"] if m else "",
                        "client_id": m["client_id"] if m else "", "instance_id": m["instance_id"] if m else None})
    return offsets


async def _describe_consumer_group(runtime: "HttpRuntime", caller: HttpCaller, group_id: str, coord: int,
                                   base: dict, rows: list[tuple[str, int, int]]) -> dict | None:
    """:func:`describe_group` of a KIP-848 consumer group (ConsumerGroupDescribe on its
    coordinator; Kafka 4's DescribeGroups describes it as Dead): protocol type ``consumer``, the
    assignor as the protocol, the members with their current partitions, and the committed
    offsets ``rows`` with lag; None when ``group_id`` is no consumer group."""
    try:
        desc = await call_api(runtime, CONSUMER_GROUP_DESCRIBE,
                              {"group_ids": [group_id], "include_authorized_operations": False},
                              node_id=coord, caller=caller)
    except PeerUnavailable:
        return None
    g = desc.groups[0]
    if g.error_code:
        return None
    owner: dict[tuple[str, int], dict] = {}
    members = []
    for m in g.members:
        entry = {"member_id": m.member_id, "client_id": m.client_id, "client_host": m.client_host,
                 "instance_id": m.instance_id,
                 "assignment": {tp.topic_name: sorted(tp.partitions) for tp in m.assignment.topic_partitions}}
        members.append(entry)
        for t, ps in entry["assignment"].items():
            for p in ps:
                owner[(t, p)] = entry
    offsets = await _lag_rows(runtime, caller, group_id, rows, owner)
    return dict(base, state=g.group_state, protocol_type="consumer", protocol=g.assignor_name, members=members,
                offsets=offsets)


async def _describe_share_group(runtime: "HttpRuntime", caller: HttpCaller, group_id: str, coord: int,
                                base: dict) -> dict | None:
    """:func:`describe_group` of a KIP-932 share group (ShareGroupDescribe and
    DescribeShareGroupOffsets on its coordinator): protocol type ``share``, the members and their
    partitions, and per share-partition the start offset (SPSO) as ``current_offset`` with the
    lag behind the log end; None when ``group_id`` is no share group."""
    try:
        desc, starts = await asyncio.gather(
            call_api(runtime, SHARE_GROUP_DESCRIBE, {"group_ids": [group_id], "include_authorized_operations": False},
                     node_id=coord, caller=caller),
            call_api(runtime, DESCRIBE_SHARE_GROUP_OFFSETS, {"groups": [{"group_id": group_id, "topics": None}]},
                     node_id=coord, caller=caller))
    except PeerUnavailable:
        return None
    g = desc.groups[0]
    if g.error_code:
        return None
    members = [{"member_id": m.member_id, "client_id": m.client_id, "client_host": m.client_host, "instance_id": None,
                "assignment": {tp.topic_name: sorted(tp.partitions) for tp in m.assignment.topic_partitions}}
               for m in g.members]
    sg = starts.groups[0]
    rows = [] if sg.error_code else [(t.topic_name, p.partition_index, p.start_offset) for t in sg.topics
                                     for p in t.partitions if not p.error_code and p.start_offset >= 0]
    offsets = await _lag_rows(runtime, caller, group_id, rows, {})
    counts = await _share_partition_counts(runtime, group_id)
    for o in offsets:
        o["in_flight"], o["acquired"] = counts.get((o["topic"], o["partition"]), (0, 0))
    return dict(base, state=g.group_state, protocol_type="share", protocol=g.assignor_name, members=members,
                offsets=offsets)


async def _share_partition_counts(runtime: "HttpRuntime", group_id: str) -> dict[tuple[str, int], tuple[int, int]]:
    """(topic, partition) -> (in-flight offsets, acquired records) of a share group's
    share-partitions, from every broker that answers (each reports those it leads; broker RPC op
    ``share_partition_counts``)."""
    share = getattr(runtime, "share_coordinator", None)
    out = {(t, i): (n, a) for t, i, n, a in share.partition_counts(group_id)} if share is not None else {}
    if runtime.cluster is None:
        return out
    peers = [b[0] for b in runtime.brokers() if b[0] != runtime.config.node_id]

    async def ask(node: int) -> dict:
        try:
            return await runtime.cluster.transport.rpc(node, {"op": "share_partition_counts", "group": group_id},
                                                       limits.HTTP_PEER_TIMEOUT_MS / 1000)
        except (TimeoutError, ConnectionError, OSError):
            return {}

    for res in await asyncio.gather(*(ask(n) for n in peers)):
        for row in res.get("partitions", []) if isinstance(res, dict) else []:
            try:
                t, i, n, a = row
                out[(str(t), int(i))] = (int(n), int(a))
            except (TypeError, ValueError):
                continue
    return out


async def refresh_group_lag(runtime: "HttpRuntime") -> None:
    """Fill ``runtime.metrics.group_lag``/``group_members`` for the groups this broker
    coordinates (each broker exports its own groups, so a sum over brokers counts each once).
    End offsets come from the partition leaders; runs with the broker's own authority."""
    coord = runtime.coordinator
    metrics = runtime.metrics
    if coord is None:
        metrics.group_lag, metrics.group_members = [], {}
        return
    committed: list[tuple[str, str, int, int]] = []
    members: dict[str, int] = {}
    for gid, group in list(coord.groups.items()):
        if group.state.value.lower() == "dead":
            continue
        members[gid] = len(group.members)
        for (topic, part), (om, _) in list(group.offsets.items()):
            committed.append((gid, topic, part, om.offset))
    tps = sorted({(t, p) for _, t, p, _ in committed})
    ends: dict[tuple[str, int], tuple[int, int, int]] = {}
    local = {}
    for tp in tps:
        p = runtime.replicas.get(*tp)
        if p is not None and p.is_leader:
            local[tp] = (0, p.kafka_high_watermark, -1)
    rest = [tp for tp in tps if tp not in local]
    if rest:
        ends = await list_offsets(runtime, HttpCaller(runtime, _BROKER_PRINCIPAL), rest, LATEST)
    ends.update(local)
    rows = []
    for gid, topic, part, offset in committed:
        err, end, _ = ends.get((topic, part), (1, -1, -1))
        rows.append(GroupLag(gid, topic, part, offset, end if not err else -1))
    metrics.group_lag, metrics.group_members = rows, members


_BROKER_PRINCIPAL = KafkaPrincipal("User", "litemq-broker")
"""Principal of the broker's own lag queries. Only reaches a handler's ACL check on another
broker; with an authorizer configured, list it in ``super.users`` to export lag of partitions
led elsewhere (its metrics otherwise report the end offset as unknown)."""


# ------------------------------------------------------------------ records
class ReadResult:
    """Records read from one partition: ``records`` (decoded, control batches skipped),
    ``next_offset`` (where to continue), ``high_watermark``, ``log_start_offset``,
    ``error_code`` (Kafka's; 0 when fine)."""

    __slots__ = ("error_code", "high_watermark", "log_start_offset", "next_offset", "records")

    def __init__(self, records: list[Record], next_offset: int, high_watermark: int, log_start_offset: int,
                 error_code: int = 0) -> None:
        self.records, self.next_offset = records, next_offset
        self.high_watermark, self.log_start_offset, self.error_code = high_watermark, log_start_offset, error_code


async def read_records(runtime: "HttpRuntime", caller: HttpCaller, topic: str, partition: int, offset: int,
                       max_count: int) -> ReadResult:
    """Up to ``max_count`` records of ``topic``-``partition`` from ``offset`` (Fetch on the leader,
    no waiting; several fetches until ``max_count`` records or the high watermark).

    Reads read_uncommitted, as a browser should: records of aborted transactions are shown;
    control batches (transaction markers, Raft leader changes) are skipped.

    Raises:
        PeerUnavailable: the leader is another broker that did not answer.
    """
    leader = await find_leader(runtime, topic, partition)
    if leader < 0:
        return ReadResult([], offset, -1, -1, ErrorCode.LEADER_NOT_AVAILABLE)
    records: list[Record] = []
    hw = lso = -1
    position = offset
    moved_leader = False
    for _ in range(limits.HTTP_MAX_CONSUME_RECORDS):  # every round moves on or stops
        body = {"max_wait_ms": 0, "min_bytes": 1, "max_bytes": limits.HTTP_MAX_CONSUME_BYTES,
                "isolation_level": 0,
                "topics": [{"topic": topic, "partitions": [{"partition": partition, "fetch_offset": position,
                                                            "partition_max_bytes": limits.HTTP_MAX_CONSUME_BYTES}]}]}
        resp = await call_api(runtime, FETCH, body, node_id=leader, caller=caller)
        if resp.error_code:
            return ReadResult(records, position, hw, lso, resp.error_code)
        p = resp.responses[0].partitions[0]
        hw, lso = p.high_watermark, p.log_start_offset
        if p.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER and not moved_leader:
            moved_leader = True  # this broker's view of the leader was stale: ask again once
            await asyncio.sleep(0.05)
            leader = await find_leader(runtime, topic, partition)
            continue
        if p.error_code:
            return ReadResult(records, position, hw, lso, p.error_code)
        data = p.records
        if not data:
            break
        moved = position
        try:
            for r in decode_records(data, skip_control=True):
                moved = r.offset + 1
                if r.offset < position:
                    continue
                records.append(r)
                if len(records) >= max_count:
                    return ReadResult(records, r.offset + 1, hw, lso)
        except KafkaError as exc:
            return ReadResult(records, position, hw, lso, exc.code)
        moved = max(moved, _batches_end(data))
        if moved <= position:
            break
        position = moved
        if position >= hw:
            break
    return ReadResult(records, position, hw, lso)


def _batches_end(data) -> int:
    """Offset after the last batch of a records blob (control batches included)."""
    end = -1
    for _, h in iter_batches(memoryview(data)):
        end = h.base_offset + h.last_offset_delta + 1
    return end
