"""Partition reassignments in progress (KIP-455) and the replication throttles, as the console
and the REST API show them.

- The moves come from ListPartitionReassignments (API 46) run in process for the HTTP caller
  (:func:`list_reassignments`), so its ACL check applies (DESCRIBE on the cluster) and the
  answer is Kafka's: every partition whose move is in progress with its ``replicas`` (every
  broker hosting a replica during the move, target first), ``adding_replicas`` and
  ``removing_replicas``. The target is the replicas without the removing ones.
- How far each adding replica has caught up is asked of the partition's leader (RPC op
  ``reassignment_progress``, :func:`register_rpc_ops`; this broker's own partitions are read in
  place): the leader's Raft match offset of that replica against its log end, both as Kafka
  offsets (``caught_up_offset``, ``log_end_offset``, ``lag``), and the replica's state in the
  partition's Raft configuration: ``pending`` (not added yet), ``learner`` (catching up),
  ``voter`` (promoted). A leader that does not answer in :data:`limits.HTTP_PEER_TIMEOUT_MS`
  leaves the partition's progress None.
- The throttles (:func:`replication_throttles`) are the dynamic broker configs
  ``leader.replication.throttled.rate`` / ``follower.replication.throttled.rate`` of every
  registered broker (its own value, else the cluster-wide default; unset = Kafka's
  ``Long.MAX_VALUE``, not listed) and the topic configs ``*.replication.throttled.replicas``
  that are set, read from the metadata image. Shown to a caller that may DESCRIBE_CONFIGS the
  cluster (broker configs, as Kafka's DescribeConfigs) and DESCRIBE the topic.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from litemq import limits
from litemq.broker.authz import CLUSTER_RESOURCE_NAME
from litemq.broker.http import views
from litemq.broker.http.inproc import LIST_PARTITION_REASSIGNMENTS, HttpCaller, call_api
from litemq.cluster.throttle import (FOLLOWER_RATE, FOLLOWER_REPLICAS, LEADER_RATE, LEADER_REPLICAS, LONG_MAX,
                                     effective_rate)
from litemq.protocol.errors import ErrorCode
from litemq.security.acl_operations import AclOperation, ResourceType

if TYPE_CHECKING:
    from litemq.broker.http.runtime import HttpRuntime

PENDING, LEARNER, VOTER = "pending", "learner", "voter"
"""States of an adding replica in its partition's Raft configuration (see the module docstring)."""


async def list_reassignments(runtime: "HttpRuntime", caller: HttpCaller,
                             wanted: list[tuple[str, list[int] | None]] | None = None) -> tuple[int, list[dict]]:
    """(error code, moves) of ListPartitionReassignments v0 run here for ``caller``.

    Args:
        wanted: None for every move; else (topic, partition indexes) pairs, None indexes = every
            partition of the topic (REST's ``partitions/-``).
    Returns:
        Kafka's top-level error code (CLUSTER_AUTHORIZATION_FAILED when the caller may not
        DESCRIBE the cluster; moves then empty) and one dict per move, sorted by (topic,
        partition): ``topic``, ``partition``, ``replicas``, ``adding_replicas``,
        ``removing_replicas``, ``target`` (replicas without the removing ones, in order).
    """
    topics = None
    if wanted is not None:
        topics = []
        for name, indexes in wanted:
            info = runtime.metadata.topics.get(name)
            if info is None:
                continue
            topics.append({"name": name, "partition_indexes": list(range(info.num_partitions))
                           if indexes is None else list(indexes)})
        if not topics:
            return 0, []
    resp = await call_api(runtime, LIST_PARTITION_REASSIGNMENTS,
                          {"timeout_ms": limits.HTTP_LEADER_WAIT_MS, "topics": topics}, caller=caller)
    if resp.error_code:
        return int(resp.error_code), []
    out = []
    for t in resp.topics:
        for p in t.partitions:
            removing = list(p.removing_replicas)
            out.append({"topic": t.name, "partition": p.partition_index, "replicas": list(p.replicas),
                        "adding_replicas": list(p.adding_replicas), "removing_replicas": removing,
                        "target": [r for r in p.replicas if r not in removing]})
    out.sort(key=lambda m: (m["topic"], m["partition"]))
    return 0, out


def local_progress(runtime: "HttpRuntime", topic: str, index: int, adding: list[int]) -> dict | None:
    """As the leader of ``topic``-``index``: ``{"leader", "log_end_offset", "replicas": [{"replica",
    "state", "caught_up_offset", "lag"}]}`` for the ``adding`` replicas (Kafka offsets; a
    ``pending`` replica has ``caught_up_offset`` None); None when this broker does not lead it."""
    p = runtime.replicas.get(topic, index) if runtime.replicas is not None else None
    group = getattr(p, "group", None)
    if group is None or not p.is_leader:
        return None
    node = group.node
    end = p.kafka_log_end_offset
    rows = []
    for r in adding:
        match = node.match_offset(r)
        if match is None:
            rows.append({"replica": r, "state": PENDING, "caught_up_offset": None, "lag": None})
            continue
        caught = min(end, max(0, p.kafka_offset(match + 1))) if match >= 0 else 0
        rows.append({"replica": r, "state": VOTER if r in node.voters else LEARNER, "caught_up_offset": caught,
                     "lag": end - caught})
    return {"leader": runtime.config.node_id, "log_end_offset": end, "replicas": rows}


async def _serve_progress(runtime: "HttpRuntime", peer_id: int, req: dict) -> dict:
    """RPC op ``reassignment_progress`` ``{"partitions": [[topic, index, [adding...]], ...]}``:
    :func:`local_progress` of each, ``{"partitions": [[topic, index, progress or None], ...]}``."""
    out = []
    try:
        for topic, index, adding in list(req.get("partitions") or []):
            out.append([str(topic), int(index), local_progress(runtime, str(topic), int(index),
                                                               [int(r) for r in adding])])
    except (TypeError, ValueError) as exc:
        return {"error": ErrorCode.INVALID_REQUEST, "message": f"bad reassignment_progress request: {exc}"}
    return {"partitions": out}


def register_rpc_ops(runtime: "HttpRuntime") -> None:
    """Offer op ``reassignment_progress`` on this broker's RPC port (cluster mode)."""
    if runtime.cluster is not None:
        runtime.cluster.rpc_ops["reassignment_progress"] = lambda peer, req: _serve_progress(runtime, peer, req)


async def reassignment_progress(runtime: "HttpRuntime", moves: list[dict]) -> dict[tuple[str, int], dict | None]:
    """(topic, partition) -> :func:`local_progress` of each of ``moves`` (as
    :func:`list_reassignments` gives them) from its leader; None when no leader is known or it
    did not answer."""
    out: dict[tuple[str, int], dict | None] = {(m["topic"], m["partition"]): None for m in moves}
    by_leader: dict[int, list[list]] = {}
    me = runtime.config.node_id
    for m in moves:
        leader = views.leader_of(runtime, m["topic"], m["partition"])
        if leader == me:
            out[(m["topic"], m["partition"])] = local_progress(runtime, m["topic"], m["partition"],
                                                               m["adding_replicas"])
        elif leader >= 0 and runtime.cluster is not None:
            by_leader.setdefault(leader, []).append([m["topic"], m["partition"], m["adding_replicas"]])

    async def ask(leader: int, parts: list[list]) -> None:
        try:
            res = await runtime.cluster.transport.rpc(leader, {"op": "reassignment_progress", "partitions": parts},
                                                      limits.HTTP_PEER_TIMEOUT_MS / 1000)
        except (TimeoutError, ConnectionError, OSError):
            return
        for row in res.get("partitions", []) if isinstance(res, dict) else []:
            try:
                topic, index, progress = row
                key = (str(topic), int(index))
            except (TypeError, ValueError):
                continue
            if key in out and isinstance(progress, dict):
                out[key] = progress

    await asyncio.gather(*(ask(leader, parts) for leader, parts in by_leader.items()))
    return out


def replication_throttles(runtime: "HttpRuntime", caller: HttpCaller) -> dict:
    """The throttles in effect: ``{"brokers": [{"broker_id", "leader_rate_bytes_per_s",
    "follower_rate_bytes_per_s"}], "topics": [{"topic", "leader_replicas", "follower_replicas"}]}``:
    brokers with at least one rate set (None for the other), topics with at least one replicas
    config set (``""`` for the other). Empty lists when nothing is throttled, or for brokers when
    the caller may not DESCRIBE_CONFIGS the cluster."""
    configs = getattr(runtime.metadata, "broker_configs", None) or {}
    brokers = []
    if views.may(runtime, caller, AclOperation.DESCRIBE_CONFIGS, ResourceType.CLUSTER, CLUSTER_RESOURCE_NAME):
        for nid in runtime.registered_broker_ids():
            leader, follower = (effective_rate(configs, nid, name) for name in (LEADER_RATE, FOLLOWER_RATE))
            if leader != LONG_MAX or follower != LONG_MAX:
                brokers.append({"broker_id": nid, "leader_rate_bytes_per_s": None if leader == LONG_MAX else leader,
                                "follower_rate_bytes_per_s": None if follower == LONG_MAX else follower})
    topics = []
    for info in views.describable_topics(runtime, caller):
        leader, follower = (str(info.configs.get(name, "") or "") for name in (LEADER_REPLICAS, FOLLOWER_REPLICAS))
        if leader or follower:
            topics.append({"topic": info.name, "leader_replicas": leader, "follower_replicas": follower})
    return {"brokers": brokers, "topics": topics}
