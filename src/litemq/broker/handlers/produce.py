"""Produce (0) and InitProducerId (22).

Sources: ProduceRequest/Response v0-11 (acks 0/1/-1; KIP-98 idempotence fields v3+; KIP-467
record errors v8+), InitProducerIdRequest/Response v0-5 (KIP-98, KIP-360 epoch bump).

A produced records blob is validated from batch headers only and appended as bytes; the
records are decoded only for compacted topics (every record needs a key, as in Kafka).
"""

from __future__ import annotations

import asyncio
import logging

from litemq.protocol.errors import ErrorCode, KafkaError
from litemq.protocol.records import decode_records

log = logging.getLogger(__name__)


def _error(index: int, code: int, message: str | None = None) -> dict:
    return {"index": index, "error_code": code, "base_offset": -1, "log_append_time_ms": -1,
            "log_start_offset": -1, "record_errors": [], "error_message": message}


def _append_one(runtime, topic: str, index: int, records, acks: int):
    """Append one partition's records; returns (response dict, partition, next offset | None)."""
    info = runtime.metadata.topics.get(topic)
    if info is None or not 0 <= index < info.num_partitions:
        return _error(index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), None, None
    if info.internal and topic == "__consumer_offsets":
        return _error(index, ErrorCode.INVALID_TOPIC_EXCEPTION, "cannot produce to an internal topic"), None, None
    p = runtime.replicas.get(topic, index)
    if p is None:
        return _error(index, ErrorCode.NOT_LEADER_OR_FOLLOWER), None, None
    if records is None or len(records) == 0:
        return _error(index, ErrorCode.CORRUPT_MESSAGE, "empty records"), None, None
    if acks == -1:
        mir = int(info.configs.get("min.insync.replicas", runtime.config.min_insync_replicas))
        if p.is_leader and mir > p.in_sync_count():
            return _error(index, ErrorCode.NOT_ENOUGH_REPLICAS,
                          f"min.insync.replicas={mir} but only {p.in_sync_count()} replica(s) in sync"), None, None
    try:
        if p.log.config.compact:
            for rec in decode_records(records):
                if rec.key is None:
                    raise KafkaError("compacted topic requires a key on every record", ErrorCode.INVALID_RECORD)
        ai = p.append(records)
    except KafkaError as exc:
        if exc.code not in (ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, ErrorCode.DUPLICATE_SEQUENCE_NUMBER):
            log.info("produce to %s-%d rejected: %s", topic, index, exc)
        return _error(index, exc.code, str(exc)), None, None
    resp = {"index": index, "error_code": ErrorCode.NONE, "base_offset": ai.first_offset,
            "log_append_time_ms": ai.log_append_time_ms, "log_start_offset": p.log_start_offset,
            "record_errors": [], "error_message": None}
    return resp, p, ai.last_offset + 1


def handle_produce(ctx, req):
    runtime = ctx.runtime
    acks = req.acks
    if acks not in (0, 1, -1):
        responses = [{"name": t.name, "partition_responses": [
            _error(pd.index, ErrorCode.INVALID_REQUIRED_ACKS) for pd in t.partition_data]}
            for t in req.topic_data]
        return {"responses": responses, "throttle_time_ms": 0}
    responses = []
    waits: list[tuple[dict, object, int]] = []
    for t in req.topic_data:
        parts = []
        for pd in t.partition_data:
            resp, p, next_offset = _append_one(runtime, t.name, pd.index, pd.records, acks)
            parts.append(resp)
            if acks == -1 and p is not None:
                waits.append((resp, p, next_offset))
        responses.append({"name": t.name, "partition_responses": parts})
    body = {"responses": responses, "throttle_time_ms": 0}
    if acks == 0:
        return None
    if not waits or all(p.high_watermark >= off for _, p, off in waits):
        return body
    return _await_commit(body, waits, req.timeout_ms)


async def _await_commit(body: dict, waits, timeout_ms: int) -> dict:
    """acks=all: answer once every partition's high watermark covers its append."""
    futures = [p.waiter(off) for _, p, off in waits]
    done, pending = await asyncio.wait(futures, timeout=max(timeout_ms, 0) / 1000)
    for (resp, _p, _off), fut in zip(waits, futures):
        if fut in pending:
            fut.cancel()
            resp.update(error_code=ErrorCode.REQUEST_TIMED_OUT, error_message="not committed within timeout_ms")
        elif fut.exception() is not None:
            exc = fut.exception()
            resp.update(error_code=getattr(exc, "code", ErrorCode.KAFKA_STORAGE_ERROR), error_message=str(exc))
    return body


async def handle_init_producer_id(ctx, req) -> dict:
    runtime = ctx.runtime
    if req.transactional_id is not None:
        # Transactions (KIP-98 transaction coordinator) are not implemented yet: say so clearly.
        return {"throttle_time_ms": 0, "error_code": ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                "producer_id": -1, "producer_epoch": -1}
    if ctx.version >= 3 and req.producer_id >= 0:
        # KIP-360: an idempotent producer asks for its epoch to be bumped.
        epoch = req.producer_epoch + 1
        if epoch <= 32767:
            return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE,
                    "producer_id": req.producer_id, "producer_epoch": epoch}
    try:
        pid = await runtime.allocate_producer_id()
    except KafkaError as exc:
        return {"throttle_time_ms": 0, "error_code": ErrorCode.COORDINATOR_NOT_AVAILABLE
                if exc.code == ErrorCode.REQUEST_TIMED_OUT else exc.code, "producer_id": -1, "producer_epoch": -1}
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "producer_id": pid, "producer_epoch": 0}


def register(runtime) -> None:
    runtime.register(0, handle_produce)
    runtime.register(22, handle_init_producer_id)
