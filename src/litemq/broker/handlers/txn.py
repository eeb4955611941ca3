"""Transaction APIs, answered by the :class:`~litemq.coordinator.transaction.TransactionCoordinator`.

InitProducerId (22) v0-5, AddPartitionsToTxn (24) v0-5, AddOffsetsToTxn (25) v0-4, EndTxn (26)
v0-4, WriteTxnMarkers (27) v0-1, TxnOffsetCommit (28) v0-4, DescribeProducers (61) v0,
DescribeTransactions (65) v0, ListTransactions (66) v0-1.

Sources: the Kafka message schemas of those APIs; KIP-98 (transactions), KIP-360 (epoch bump of
idempotent and transactional producers, InitProducerId v3+), KIP-447 (TxnOffsetCommit v3 group
metadata), KIP-588 (PRODUCER_FENCED), KIP-664 (DescribeProducers, ListTransactions,
DescribeTransactions), KIP-890 part 1 (AddPartitionsToTxn v4+ batched and ``verify_only``).

This module only translates versions and checks ACLs; transaction semantics live in
:mod:`litemq.coordinator`.

Authorization (Kafka ``KafkaApis``): InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn
and TxnOffsetCommit need WRITE on the transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED);
an idempotent InitProducerId needs IDEMPOTENT_WRITE on the cluster or WRITE on any topic
(KIP-679; CLUSTER_AUTHORIZATION_FAILED); AddPartitionsToTxn needs WRITE on each topic,
AddOffsetsToTxn and TxnOffsetCommit READ on the group, TxnOffsetCommit READ on each topic;
AddPartitionsToTxn v4+ (broker to broker) needs only CLUSTER_ACTION on the cluster (no
transactional id or topic ACL), WriteTxnMarkers too; DescribeProducers needs READ on the topic;
DescribeTransactions DESCRIBE on the transactional id, and ListTransactions lists only those.
"""

from __future__ import annotations

import logging

from litemq.security.acl_operations import AclOperation, ResourceType
from litemq.broker.authz import authorize, authorize_by_resource_type, authorized_names
from litemq.broker.coordinator_host import BrokerCoordinatorHost
from litemq.broker.handlers.groups import commit_response, committable_offsets
from litemq.coordinator.coordinator import OFFSETS_TOPIC
from litemq.coordinator.records import OffsetAndMetadata
from litemq.coordinator.transaction import TransactionCoordinator, write_markers_local
from litemq.protocol.errors import ErrorCode as E
from litemq.protocol.errors import KafkaError

log = logging.getLogger(__name__)


def _tc(ctx) -> TransactionCoordinator:
    return ctx.runtime.txn_coordinator


def _may_write_txn(ctx, transactional_id: str | None) -> bool:
    return transactional_id is not None and authorize(ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID,
                                                      transactional_id)


# ---------------------------------------------------------------------- InitProducerId
async def handle_init_producer_id(ctx, req) -> dict:
    runtime = ctx.runtime
    v = ctx.version
    pid_in = req.producer_id if v >= 3 else -1
    epoch_in = req.producer_epoch if v >= 3 else -1

    def body(err: int, pid: int = -1, epoch: int = -1) -> dict:
        return {"throttle_time_ms": 0, "error_code": err, "producer_id": pid, "producer_epoch": epoch}

    if req.transactional_id is not None:
        if not _may_write_txn(ctx, req.transactional_id):
            return body(E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        return body(*await _tc(ctx).init_producer_id(req.transactional_id, req.transaction_timeout_ms,
                                                      pid_in, epoch_in))
    if not (authorize(ctx, AclOperation.IDEMPOTENT_WRITE, ResourceType.CLUSTER)
            or authorize_by_resource_type(ctx, AclOperation.WRITE, ResourceType.TOPIC)):
        return body(E.CLUSTER_AUTHORIZATION_FAILED)
    if pid_in >= 0:
        # KIP-360: an idempotent producer asks for its epoch to be bumped.
        epoch = epoch_in + 1
        if epoch <= 32767:
            return body(E.NONE, pid_in, epoch)
    try:
        pid = await runtime.allocate_producer_id()
    except KafkaError as exc:
        return body(E.COORDINATOR_NOT_AVAILABLE if exc.code == E.REQUEST_TIMED_OUT else exc.code)
    return body(E.NONE, pid, 0)


# ---------------------------------------------------------------------- AddPartitionsToTxn
def _unknown_partitions(runtime, topics: dict[str, set[int]]) -> set[tuple[str, int]]:
    out = set()
    for name, parts in topics.items():
        info = runtime.metadata.topics.get(name)
        for i in parts:
            if info is None or not 0 <= i < info.num_partitions:
                out.add((name, i))
    return out


def _topic_results(topics: dict[str, set[int]], code_of) -> list[dict]:
    return [{"name": name, "results_by_partition": [{"partition_index": i, "partition_error_code": code_of(name, i)}
                                                    for i in sorted(parts)]}
            for name, parts in topics.items()]


async def _add_one(ctx, transactional_id: str, producer_id: int, producer_epoch: int, topics: dict[str, set[int]],
                   verify_only: bool, from_broker: bool = False) -> list[dict]:
    """One transaction of AddPartitionsToTxn: per-partition results (Kafka answers one error
    for all, except UNKNOWN_TOPIC_OR_PARTITION with OPERATION_NOT_ATTEMPTED for the others).

    ``from_broker`` (v4+, authorized by CLUSTER_ACTION): no transactional id or topic WRITE
    check, as Kafka's ``KafkaApis.handleAddPartitionsToTxnRequest`` (KIP-890)."""
    if not from_broker and not _may_write_txn(ctx, transactional_id):
        return _topic_results(topics, lambda t, i: E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    writable = set(topics) if from_broker else authorized_names(ctx, AclOperation.WRITE, ResourceType.TOPIC, topics)
    if len(writable) < len(topics):
        return _topic_results(topics, lambda t, i: E.OPERATION_NOT_ATTEMPTED if t in writable
                              else E.TOPIC_AUTHORIZATION_FAILED)
    unknown = _unknown_partitions(ctx.runtime, topics)
    if unknown:
        return _topic_results(topics, lambda t, i: E.UNKNOWN_TOPIC_OR_PARTITION if (t, i) in unknown
                              else E.OPERATION_NOT_ATTEMPTED)
    if verify_only:
        err = _tc(ctx).verify(transactional_id, producer_id, producer_epoch, topics)
    else:
        err = await _tc(ctx).add_partitions(transactional_id, producer_id, producer_epoch, topics)
    return _topic_results(topics, lambda t, i: err)


def _topics_of(items) -> dict[str, set[int]]:
    out: dict[str, set[int]] = {}
    for t in items:
        out.setdefault(t.name, set()).update(t.partitions)
    return out


async def handle_add_partitions_to_txn(ctx, req) -> dict:
    v = ctx.version
    if v <= 3:
        results = await _add_one(ctx, req.v3_and_below_transactional_id, req.v3_and_below_producer_id,
                                 req.v3_and_below_producer_epoch, _topics_of(req.v3_and_below_topics), False)
        return {"throttle_time_ms": 0, "results_by_topic_v3_and_below": results}
    if not authorize(ctx, AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER):
        return {"throttle_time_ms": 0, "error_code": E.CLUSTER_AUTHORIZATION_FAILED, "results_by_transaction": []}
    out = []
    for txn in req.transactions:
        results = await _add_one(ctx, txn.transactional_id, txn.producer_id, txn.producer_epoch,
                                 _topics_of(txn.topics), txn.verify_only, from_broker=True)
        out.append({"transactional_id": txn.transactional_id, "topic_results": results})
    return {"throttle_time_ms": 0, "error_code": E.NONE, "results_by_transaction": out}


# ---------------------------------------------------------------------- AddOffsetsToTxn / EndTxn
async def handle_add_offsets_to_txn(ctx, req) -> dict:
    coord = ctx.runtime.coordinator
    if not _may_write_txn(ctx, req.transactional_id):
        return {"throttle_time_ms": 0, "error_code": E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED}
    if not authorize(ctx, AclOperation.READ, ResourceType.GROUP, req.group_id):
        return {"throttle_time_ms": 0, "error_code": E.GROUP_AUTHORIZATION_FAILED}
    if not req.group_id:
        return {"throttle_time_ms": 0, "error_code": E.INVALID_GROUP_ID}
    try:
        coord.ensure_offsets_topic()
    except KafkaError:
        return {"throttle_time_ms": 0, "error_code": E.COORDINATOR_NOT_AVAILABLE}
    err = await _tc(ctx).add_partitions(req.transactional_id, req.producer_id, req.producer_epoch,
                                        {OFFSETS_TOPIC: {coord.partition_for(req.group_id)}})
    return {"throttle_time_ms": 0, "error_code": err}


async def handle_end_txn(ctx, req) -> dict:
    if not _may_write_txn(ctx, req.transactional_id):
        return {"throttle_time_ms": 0, "error_code": E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED}
    err = await _tc(ctx).end_txn(req.transactional_id, req.producer_id, req.producer_epoch, req.committed)
    if err == E.PRODUCER_FENCED and ctx.version < 2:
        err = E.INVALID_PRODUCER_EPOCH  # PRODUCER_FENCED exists from EndTxn v2 (KIP-588)
    return {"throttle_time_ms": 0, "error_code": err}


# ---------------------------------------------------------------------- WriteTxnMarkers
async def handle_write_txn_markers(ctx, req) -> dict:
    out = []
    allowed = authorize(ctx, AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER)
    for m in req.markers:
        tps = [(t.name, i) for t in m.topics for i in t.partition_indexes]
        errors = {tp: E.CLUSTER_AUTHORIZATION_FAILED for tp in tps} if not allowed else await write_markers_local(
            _tc(ctx).host, m.producer_id, m.producer_epoch, m.transaction_result, m.coordinator_epoch, tps)
        topics: dict[str, list[dict]] = {}
        for name, i in tps:
            topics.setdefault(name, []).append({"partition_index": i, "error_code": errors[(name, i)]})
        out.append({"producer_id": m.producer_id,
                    "topics": [{"name": n, "partitions": ps} for n, ps in topics.items()]})
    return {"markers": out}


# ---------------------------------------------------------------------- TxnOffsetCommit
async def handle_txn_offset_commit(ctx, req) -> dict:
    v = ctx.version
    if not _may_write_txn(ctx, req.transactional_id):
        refused = E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    elif not authorize(ctx, AclOperation.READ, ResourceType.GROUP, req.group_id):
        refused = E.GROUP_AUTHORIZATION_FAILED
    else:
        refused = E.NONE
    readable = authorized_names(ctx, AclOperation.READ, ResourceType.TOPIC, (t.name for t in req.topics)) \
        if not refused else set()
    offsets = committable_offsets(req.topics, readable, lambda p: OffsetAndMetadata(
        p.committed_offset, p.committed_leader_epoch if v >= 2 else -1, p.committed_metadata))
    results = {} if not offsets else await ctx.runtime.coordinator.commit_txn_offsets(
        req.transactional_id, req.group_id, req.producer_id, req.producer_epoch,
        req.generation_id if v >= 3 else -1, req.member_id if v >= 3 else "",
        req.group_instance_id if v >= 3 else None, offsets)
    if v < 2:
        results = {tp: (E.INVALID_PRODUCER_EPOCH if e == E.PRODUCER_FENCED else e) for tp, e in results.items()}
    return commit_response(req.topics, readable, results, refused or E.TOPIC_AUTHORIZATION_FAILED)


# ---------------------------------------------------------------------- describe / list
def handle_list_transactions(ctx, req) -> dict:
    from litemq.coordinator.txn_records import TxnState

    known = {s.state_name for s in TxnState}
    states = set(req.state_filters)
    unknown = sorted(states - known)
    duration = req.duration_filter if ctx.version >= 1 else -1
    txns = _tc(ctx).list_transactions(states & known, set(req.producer_id_filters), duration) \
        if not (states and not states & known) else []
    visible = authorized_names(ctx, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID,
                               (m.transactional_id for m in txns))
    txns = [m for m in txns if m.transactional_id in visible]
    return {"throttle_time_ms": 0, "error_code": E.NONE, "unknown_state_filters": unknown,
            "transaction_states": [{"transactional_id": m.transactional_id, "producer_id": m.producer_id,
                                    "transaction_state": m.state.state_name} for m in txns]}


def handle_describe_transactions(ctx, req) -> dict:
    tc = _tc(ctx)
    out = []
    for tid in req.transactional_ids:
        entry = {"error_code": E.NONE, "transactional_id": tid, "transaction_state": "", "transaction_timeout_ms": 0,
                 "transaction_start_time_ms": -1, "producer_id": -1, "producer_epoch": -1, "topics": []}
        err = tc.coordinator_error(tid)
        if not authorize(ctx, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, tid):
            err = E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        meta = tc.txns.get(tid) if not err else None
        if err:
            entry["error_code"] = err
        elif meta is None:
            entry["error_code"] = E.TRANSACTIONAL_ID_NOT_FOUND
        else:
            entry.update(transaction_state=meta.state.state_name, transaction_timeout_ms=meta.txn_timeout_ms,
                         transaction_start_time_ms=meta.start_ms, producer_id=meta.producer_id,
                         producer_epoch=meta.producer_epoch,
                         topics=[{"topic": t, "partitions": sorted(ps)} for t, ps in sorted(meta.partitions.items())])
        out.append(entry)
    return {"throttle_time_ms": 0, "transaction_states": out}


def handle_describe_producers(ctx, req) -> dict:
    runtime = ctx.runtime
    topics_out = []
    readable = authorized_names(ctx, AclOperation.READ, ResourceType.TOPIC, (t.name for t in req.topics))
    for t in req.topics:
        parts = []
        for i in t.partition_indexes:
            p = runtime.replicas.get(t.name, i)
            entry = {"partition_index": i, "error_code": E.NONE, "error_message": None, "active_producers": []}
            if t.name not in readable:
                entry["error_code"] = E.TOPIC_AUTHORIZATION_FAILED
            elif p is None:
                entry["error_code"] = (E.NOT_LEADER_OR_FOLLOWER if t.name in runtime.metadata.topics
                                       else E.UNKNOWN_TOPIC_OR_PARTITION)
            elif not p.is_leader:
                entry["error_code"] = E.NOT_LEADER_OR_FOLLOWER
            else:
                for e in list(p.log.producer_state.producers.values()):
                    entry["active_producers"].append({
                        "producer_id": e.producer_id, "producer_epoch": e.epoch, "last_sequence": e.last_seq,
                        "last_timestamp": e.batches[-1].timestamp if e.batches else -1,
                        "coordinator_epoch": getattr(e, "coordinator_epoch", -1),
                        "current_txn_start_offset": p.kafka_offset(e.current_txn_first_offset)
                        if getattr(e, "current_txn_first_offset", None) is not None else -1})
            parts.append(entry)
        topics_out.append({"name": t.name, "partitions": parts})
    return {"throttle_time_ms": 0, "topics": topics_out}


def register(runtime) -> None:
    """Create the transaction coordinator (loading ``__transaction_state``) and register its APIs."""
    tc = TransactionCoordinator(BrokerCoordinatorHost(runtime))
    runtime.txn_coordinator = tc
    tc.start()
    runtime.register(22, handle_init_producer_id)
    runtime.register(24, handle_add_partitions_to_txn)
    runtime.register(25, handle_add_offsets_to_txn)
    runtime.register(26, handle_end_txn)
    runtime.register(27, handle_write_txn_markers)
    runtime.register(28, handle_txn_offset_commit)
    runtime.register(61, handle_describe_producers)
    runtime.register(65, handle_describe_transactions)
    runtime.register(66, handle_list_transactions)


# ---------------------------------------------------------------------- broker-to-broker RPC
async def _serve_txn_rpc(runtime, op: str, req: dict) -> dict:
    """A transaction coordinator elsewhere asks this broker to write markers to partitions it
    leads (``write_txn_markers``, WriteTxnMarkers), or a partition leader asks this
    coordinator whether a partition is in a transaction (``verify_txn``, KIP-890
    verification). Answers ``{"error": code}`` / ``{"errors": [code per partition]}``."""
    try:
        if op == "verify_txn":
            tc = runtime.txn_coordinator
            err = tc.coordinator_error(str(req["transactional_id"]))
            if not err:
                err = tc.verify(str(req["transactional_id"]), int(req["producer_id"]), int(req["producer_epoch"]),
                                {str(req["topic"]): {int(req["partition"])}})
            return {"error": int(err)}
        tps = [(str(t), int(i)) for t, i in req["partitions"]]
        errors = await write_markers_local(BrokerCoordinatorHost(runtime), int(req["producer_id"]),
                                           int(req["producer_epoch"]), bool(req["commit"]),
                                           int(req["coordinator_epoch"]), tps)
        return {"errors": [int(errors[tp]) for tp in tps]}
    except (KeyError, TypeError, ValueError) as exc:
        return {"error": E.INVALID_REQUEST, "message": f"bad {op} request: {exc}"}


def register_rpc_ops(runtime) -> None:
    """Serve the transaction RPC ops ``write_txn_markers`` and ``verify_txn`` on the cluster's
    broker RPC port (the cluster manager answers only brokers' calls to them)."""
    for op in ("write_txn_markers", "verify_txn"):
        runtime.cluster.rpc_ops[op] = lambda peer_id, req, op=op: _serve_txn_rpc(runtime, op, req)
