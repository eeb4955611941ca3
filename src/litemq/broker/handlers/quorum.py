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
and, as in Kafka (its heartbeats then fail), the running process does not register again until it
restarts.

AddRaftVoter (API 80, v0) and RemoveRaftVoter (API 81, v0), KIP-853, change the metadata
group's voters one at a time through the cluster (``ClusterManager.add_voter`` /
``remove_voter``: a new voter joins as a learner and is promoted once caught up). The checks
before it, in Kafka's order (``KafkaRaftClient.handleAddVoterRequest`` /
``handleRemoveVoterRequest``): a non-null ClusterId other than this cluster's is
INCONSISTENT_CLUSTER_ID; a negative voter id or the zero directory id is INVALID_REQUEST ("Add
voter request didn't include a valid voter"). The request's Listeners are not required (Kafka's
controller requires them): LiteMQ reaches a voter at the endpoints it registered. The change
itself answers DUPLICATE_VOTER, VOTER_NOT_FOUND, INVALID_REQUEST or REQUEST_TIMED_OUT as the
cluster raises them. A single broker (no cluster) has a static quorum of one voter, itself,
which is what a Kafka quorum with ``kraft.version`` 0 is: UNSUPPORTED_VERSION ("Cluster doesn't
support adding voter because the kraft.version feature is 0"). AddRaftVoter waits at most its
TimeoutMs (``limits.VOTER_CHANGE_TIMEOUT_MS`` when not positive, at most
``limits.VOTER_CHANGE_MAX_TIMEOUT_MS``), RemoveRaftVoter ``limits.VOTER_CHANGE_TIMEOUT_MS``.

Authorization (Kafka ``KafkaApis``/``ControllerApis``): DESCRIBE on the cluster for
DescribeQuorum, ALTER on the cluster for UnregisterBroker, AddRaftVoter and RemoveRaftVoter;
refused: CLUSTER_AUTHORIZATION_FAILED at the top level.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid

from litemq import limits
from litemq.broker.authz import authorize
from litemq.cluster.quorum import (METADATA_PARTITION, METADATA_TOPIC, directory_uuid, describe_quorum,
                                   directory_id_text)
from litemq.protocol.errors import ErrorCode, KafkaError
from litemq.security.acl_operations import AclOperation, ResourceType

log = logging.getLogger(__name__)

_DENIED = "Authorization failed."


def _answer(error_code: int, message: str | None, partitions: list[dict], nodes: list[dict]) -> dict:
    return {"error_code": int(error_code), "error_message": message,
            "topics": [{"topic_name": METADATA_TOPIC, "partitions": partitions}] if partitions else [],
            "nodes": nodes}


def _single_broker_quorum(runtime) -> dict:
    """A broker without a cluster: one voter, itself, every record committed at once."""
    identity = getattr(runtime, "identity", None)  # the data dir's meta.properties
    directory = directory_uuid(identity.directory_id if identity is not None else None)
    me = {"replica_id": runtime.config.node_id, "replica_directory_id": str(directory), "log_end_offset": 0,
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


def _voter_answer(error_code: int, message: str | None) -> dict:
    return {"throttle_time_ms": 0, "error_code": int(error_code), "error_message": message}


async def _change_voters(ctx, req, verb: str, timeout_s: float) -> dict:
    """AddRaftVoter / RemoveRaftVoter (``verb`` "adding" / "removing"): the checks of the module
    docstring, then ``ClusterManager.add_voter`` / ``remove_voter(node_id, directory_id,
    timeout_s)``; every failure is an answer (a dict of the response schema)."""
    runtime = ctx.runtime
    if not authorize(ctx, AclOperation.ALTER, ResourceType.CLUSTER):
        return _voter_answer(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, _DENIED)
    ours = runtime.metadata.cluster_id
    if req.cluster_id is not None and req.cluster_id != ours:  # Kafka's hasValidClusterId
        return _voter_answer(ErrorCode.INCONSISTENT_CLUSTER_ID,
                             f'The given id "{req.cluster_id}" doesn\'t match the cluster id "{ours}"')
    directory_id = directory_id_text(req.voter_directory_id)
    if req.voter_id < 0 or directory_id is None:
        request = "Add" if verb == "adding" else "Remove"
        return _voter_answer(ErrorCode.INVALID_REQUEST, f"{request} voter request didn't include a valid voter")
    if runtime.cluster is None:
        return _voter_answer(ErrorCode.UNSUPPORTED_VERSION,
                             f"Cluster doesn't support {verb} voter because the kraft.version feature is 0 (a "
                             "single broker is a static quorum of one voter, itself; run a cluster to change voters)")
    change = runtime.cluster.add_voter if verb == "adding" else runtime.cluster.remove_voter
    try:
        await change(int(req.voter_id), directory_id, timeout_s)
    except KafkaError as exc:
        return _voter_answer(exc.code, str(exc))
    except (ConnectionError, asyncio.TimeoutError) as exc:
        return _voter_answer(ErrorCode.REQUEST_TIMED_OUT, f"{verb} voter {req.voter_id} did not complete: {exc!r}")
    except Exception as exc:  # noqa: BLE001 - never leave the request unanswered
        log.exception("%s voter %d failed", verb, req.voter_id)
        return _voter_answer(ErrorCode.UNKNOWN_SERVER_ERROR, f"{verb} voter {req.voter_id} failed: {exc!r}")
    return _voter_answer(ErrorCode.NONE, None)


async def handle_add_raft_voter(ctx, req) -> dict:
    """AddRaftVoter v0 (KIP-853): make observer ``voter_id`` a voter of the metadata group."""
    timeout_ms = req.timeout_ms if req.timeout_ms > 0 else limits.VOTER_CHANGE_TIMEOUT_MS
    return await _change_voters(ctx, req, "adding", min(timeout_ms, limits.VOTER_CHANGE_MAX_TIMEOUT_MS) / 1000)


async def handle_remove_raft_voter(ctx, req) -> dict:
    """RemoveRaftVoter v0 (KIP-853): remove voter ``voter_id`` from the metadata group."""
    return await _change_voters(ctx, req, "removing", limits.VOTER_CHANGE_TIMEOUT_MS / 1000)


def register(runtime) -> None:
    if runtime.cluster is not None:
        cluster = runtime.cluster
        cluster.rpc_ops["describe_quorum"] = lambda peer_id, req: _serve_describe_quorum(cluster)
    runtime.register(55, handle_describe_quorum)
    runtime.register(64, handle_unregister_broker)
    runtime.register(80, handle_add_raft_voter)
    runtime.register(81, handle_remove_raft_voter)
