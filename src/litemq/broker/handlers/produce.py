"""Produce (0); InitProducerId (22) is in :mod:`litemq.broker.handlers.txn`.

Sources: ProduceRequest/Response v0-11 (acks 0/1/-1; KIP-98 idempotence fields v3+; KIP-467
record errors v8+), InitProducerIdRequest/Response v0-5 (KIP-98, KIP-360 epoch bump).

A produced records blob is validated from batch headers only and appended as bytes; the
records are decoded only for compacted topics (every record needs a key, as in Kafka) and for
topics whose ``compression.type`` is a codec (batches in another codec are recompressed), see
:mod:`litemq.broker.record_validation`.

Authorization (Kafka ``KafkaApis.handleProduceRequest``): transactional records need WRITE on
the transactional id (else every partition answers TRANSACTIONAL_ID_AUTHORIZATION_FAILED);
each topic needs WRITE (else TOPIC_AUTHORIZATION_FAILED, checked before existence).
"""

from __future__ import annotations

import asyncio
import logging
import time

from litemq.security.acl_operations import AclOperation, ResourceType
from litemq.broker.authz import authorize, authorized_names
from litemq.broker.topic_configs import BROKER_TOPIC_CONFIGS, COMPRESSION_LEVEL_CONFIGS
from litemq.broker.record_validation import TOPIC_COMPRESSION_CODECS, check_timestamps, validate_and_convert
from litemq.limits import RECORD_BATCH_HEADER_BYTES
from litemq.protocol.errors import ErrorCode, KafkaError
from litemq.protocol.records import COMPRESSION_ZSTD, MAGIC_V2, TRANSACTIONAL_FLAG, peek_batch, read_batch_header

log = logging.getLogger(__name__)


def _error(index: int, code: int, message: str | None = None, record_errors=()) -> dict:
    """One partition's failed ProduceResponse entry; ``record_errors`` ``[(batch_index, message)]``
    (KIP-467, sent from v8)."""
    return {"index": index, "error_code": code, "base_offset": -1, "log_append_time_ms": -1,
            "log_start_offset": -1, "error_message": message,
            "record_errors": [{"batch_index": i, "batch_index_error_message": m} for i, m in record_errors]}


def records_rule_error(version: int, records) -> tuple[int, str] | None:
    """Kafka 4's rules for one partition's records in Produce v3+ (``ProduceRequest.validateRecords``),
    from the first batch's header fields only: ``(error code, message)`` or None.

    - no batch at all, a first batch whose magic is not 2 (message formats v0/v1, KIP-724), or
      more than one batch: INVALID_RECORD, with Kafka's messages;
    - ZStandard before v7 (KIP-110): UNSUPPORTED_COMPRESSION_TYPE.

    Produce v0-2 carry message formats v0 and v1 (magic 0/1), which Kafka 4 removed (KIP-724,
    KIP-896; it drops such requests): they are answered UNSUPPORTED_FOR_MESSAGE_FORMAT, which
    clients treat as final, rather than CORRUPT_MESSAGE, which they retry until their
    ``message.timeout.ms``. A blob too short to hold those fields is left to the log append,
    which answers CORRUPT_MESSAGE for broken framing.
    """
    n = 0 if records is None else len(records)
    magic, codec, size = peek_batch(records) if n else (None, None, None)
    if version < 3:
        if magic is not None and magic < MAGIC_V2:
            return (ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT,
                    f"message format v{magic} is not supported: Kafka 4 removed message formats "
                    "v0 and v1 (KIP-724); produce record batches (magic 2, Produce v3 or later)")
        return None
    prefix = f"Produce requests with version {version}"
    if n == 0:
        return ErrorCode.INVALID_RECORD, f"{prefix} must have at least one record batch per partition"
    if magic is None:
        return None
    if magic != MAGIC_V2:
        return ErrorCode.INVALID_RECORD, f"{prefix} are only allowed to contain record batches with magic version 2"
    if size is None:
        return None
    if version < 7 and codec == COMPRESSION_ZSTD:
        return ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, f"{prefix} are not allowed to use ZStandard compression"
    if size < n:
        return ErrorCode.INVALID_RECORD, f"{prefix} are only allowed to contain exactly one record batch per partition"
    return None


def _append_one(runtime, topic: str, index: int, records, acks: int, version: int, guard=None):
    """Append one partition's records; returns (response dict, partition, next offset | None).
    ``guard``: the partition's KIP-890 :class:`~litemq.storage.producer_state.VerificationGuard`
    taken before verifying (None when no verification ran)."""
    info = runtime.metadata.topics.get(topic)
    if info is None or not 0 <= index < info.num_partitions:
        return _error(index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), None, None
    if info.internal:  # __consumer_offsets, __transaction_state: written by the coordinators only
        return _error(index, ErrorCode.INVALID_TOPIC_EXCEPTION, "cannot produce to an internal topic"), None, None
    p = runtime.replicas.get(topic, index)
    if p is None:
        return _error(index, ErrorCode.NOT_LEADER_OR_FOLLOWER), None, None
    rule = records_rule_error(version, records)
    if rule is not None:
        return _error(index, *rule), None, None
    if records is None or len(records) == 0:
        return _error(index, ErrorCode.CORRUPT_MESSAGE, "empty records"), None, None
    if acks == -1:
        mir = int(info.configs.get("min.insync.replicas", runtime.config.min_insync_replicas))
        if p.is_leader and mir > p.in_sync_count():
            return _error(index, ErrorCode.NOT_ENOUGH_REPLICAS,
                          f"min.insync.replicas={mir} but only {p.in_sync_count()} replica(s) in sync"), None, None
    try:
        cfg = p.log.config
        if not cfg.log_append_time:  # header-only unless a batch breaks the bounds (record_validation)
            check_timestamps(records, time.time_ns() // 1_000_000, cfg.message_timestamp_before_max_ms,
                             cfg.message_timestamp_after_max_ms)
        compression_type = info.configs.get("compression.type", "producer")
        codec = TOPIC_COMPRESSION_CODECS.get(compression_type)
        if cfg.compact or codec is not None:  # the only paths that decode records
            level_config = COMPRESSION_LEVEL_CONFIGS.get(compression_type)
            level = int(info.configs.get(level_config, BROKER_TOPIC_CONFIGS[level_config])) if level_config else None
            records = validate_and_convert(records, f"{topic}-{index}", compacted=cfg.compact, codec=codec,
                                           level=level, max_batch_bytes=cfg.max_message_bytes)
        ai = p.append(records, verification_guard=guard)
    except KafkaError as exc:
        log.info("produce to %s-%d rejected: %s", topic, index, exc)
        return _error(index, exc.code, str(exc), getattr(exc, "record_errors", ())), None, None
    if not ai.duplicate:
        runtime.metrics.on_produce(topic, len(records), ai.last_offset - ai.first_offset + 1)
    resp = {"index": index, "error_code": ErrorCode.NONE, "base_offset": p.kafka_offset(ai.first_offset),
            "log_append_time_ms": ai.log_append_time_ms, "log_start_offset": p.kafka_log_start_offset,
            "record_errors": [], "error_message": None}
    return resp, p, ai.last_offset + 1


def _refuse_all(req, code: int, message: str | None = None) -> dict:
    responses = [{"name": t.name, "partition_responses": [_error(pd.index, code, message) for pd in t.partition_data]}
                 for t in req.topic_data]
    return {"responses": responses, "throttle_time_ms": 0}


def handle_produce(ctx, req, guards: dict | None = None):
    """Produce (0) without verification; ``guards``: ``{(topic, partition): VerificationGuard}``
    of the partitions verified by :func:`_verify_then_produce` (KIP-890), presented to the
    log's append."""
    runtime = ctx.runtime
    acks = req.acks
    if acks not in (0, 1, -1):
        return _refuse_all(req, ErrorCode.INVALID_REQUIRED_ACKS)
    responses = []
    waits: list[tuple[dict, object, int]] = []
    writable = authorized_names(ctx, AclOperation.WRITE, ResourceType.TOPIC, (t.name for t in req.topic_data))
    for t in req.topic_data:
        parts = []
        if t.name not in writable:
            responses.append({"name": t.name, "partition_responses": [
                _error(pd.index, ErrorCode.TOPIC_AUTHORIZATION_FAILED) for pd in t.partition_data]})
            continue
        for pd in t.partition_data:
            resp, p, next_offset = _append_one(runtime, t.name, pd.index, pd.records, acks, ctx.version,
                                               guards.get((t.name, pd.index)) if guards else None)
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


def _await_commit(body: dict, waits, timeout_ms: int) -> asyncio.Future:
    """acks=all: a future of the response ``body``, completed once every partition's high
    watermark covers its append, or after ``timeout_ms`` with REQUEST_TIMED_OUT on the
    partitions still waiting (a KafkaError of a waiter, e.g. a lost leadership, becomes that
    partition's error code). Plain callbacks on the waiters' futures and one timer: no task
    and no ``asyncio.wait`` per request (the produce path's per-request cost)."""
    futures = [p.waiter(off) for _, p, off in waits]
    loop = futures[0].get_loop()
    out = loop.create_future()
    left = [sum(1 for f in futures if not f.done())]

    def finish() -> None:
        if out.done():
            return
        timer.cancel()
        for (resp, _p, _off), fut in zip(waits, futures):
            if not fut.done():
                fut.cancel()
                resp.update(error_code=ErrorCode.REQUEST_TIMED_OUT, error_message="not committed within timeout_ms")
            elif fut.cancelled():  # nothing cancels a waiter today; never report it committed
                resp.update(error_code=ErrorCode.NOT_LEADER_OR_FOLLOWER, error_message="commit wait cancelled")
            elif fut.exception() is not None:
                exc = fut.exception()
                resp.update(error_code=getattr(exc, "code", ErrorCode.KAFKA_STORAGE_ERROR), error_message=str(exc))
        out.set_result(body)

    def one_done(_fut: asyncio.Future) -> None:
        left[0] -= 1
        if left[0] == 0:
            finish()

    timer = loop.call_later(max(timeout_ms, 0) / 1000, finish)
    if left[0] == 0:
        finish()
    else:
        for fut in futures:
            if not fut.done():
                fut.add_done_callback(one_done)
    return out


# ---------------------------------------------------------------- transactional produce (KIP-890 part 1)
_VERIFY_RETRIABLE = (ErrorCode.CONCURRENT_TRANSACTIONS, ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE,
                     ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.REQUEST_TIMED_OUT)


def _unverified_transactional(runtime, req) -> list[tuple[str, int, int, int]]:
    """(topic, partition, producer id, epoch) of each partition whose records open a transaction
    the partition has not seen yet (its first transactional batch): those need the
    coordinator's word that the partition was added to the transaction."""
    out = []
    for t in req.topic_data:
        for pd in t.partition_data:
            records = pd.records
            if records is None or len(records) < RECORD_BATCH_HEADER_BYTES:
                continue
            try:
                h = read_batch_header(records, 0)
            except KafkaError:
                continue  # the append reports it
            if not h.is_transactional or h.is_control or h.producer_id < 0:
                continue
            p = runtime.replicas.get(t.name, pd.index)
            entry = p.log.producer_state.entry(h.producer_id) if p is not None else None
            if entry is None or entry.epoch != h.producer_epoch or entry.current_txn_first_offset is None:
                out.append((t.name, pd.index, h.producer_id, h.producer_epoch))
    return out


async def _verify_then_produce(ctx, req, unverified):
    """Ask the transaction coordinator about each partition (all at once), refuse those not in
    the transaction (INVALID_TXN_STATE; INVALID_PRODUCER_EPOCH for a fenced producer;
    NOT_ENOUGH_REPLICAS, retriable, while the coordinator is busy or moving), produce the rest.

    KIP-890 part 1 (Kafka ``ReplicaManager.appendRecords`` with ``VerificationGuard``): before
    asking, each partition's log takes a verification guard for the producer; the append
    presents it. A COMMIT/ABORT marker (or another transactional batch) of the producer appended
    while the coordinator answered clears the guard, and the log refuses the batch
    (INVALID_TXN_STATE) instead of appending it after the marker, where it would open a
    transaction the coordinator no longer knows: the LSO stuck below the high watermark, and
    the producer's next commit making the aborted records visible to read_committed readers.
    Partitions not needing verification (their transaction is ongoing) pass no guard: should
    their transaction end meanwhile, their batch is refused the same way."""
    runtime = ctx.runtime
    refused: dict[tuple[str, int], int] = {}
    guards = {}
    for topic, index, pid, epoch in unverified:
        p = runtime.replicas.get(topic, index)
        if p is not None:
            guard = p.log.maybe_start_transaction_verification(pid, epoch)
            if guard is not None:
                guards[(topic, index)] = guard
    if len(unverified) == 1:
        topic, index, pid, epoch = unverified[0]
        errors = [await runtime.verify_transaction(req.transactional_id, pid, epoch, topic, index)]
    else:
        errors = await asyncio.gather(*(runtime.verify_transaction(req.transactional_id, pid, epoch, topic, index)
                                        for topic, index, pid, epoch in unverified))
    for (topic, index, pid, epoch), err in zip(unverified, errors):
        if err in _VERIFY_RETRIABLE:
            err = ErrorCode.NOT_ENOUGH_REPLICAS
        elif err == ErrorCode.PRODUCER_FENCED:
            err = ErrorCode.INVALID_PRODUCER_EPOCH
        elif err == ErrorCode.INVALID_PRODUCER_ID_MAPPING:
            err = ErrorCode.INVALID_TXN_STATE
        if err:
            log.info("transactional produce of producer %d to %s-%d refused: %s", pid, topic, index, ErrorCode(err).name)
            refused[(topic, index)] = err
    order = [(t.name, [pd.index for pd in t.partition_data]) for t in req.topic_data]
    for t in req.topic_data:
        t.partition_data = [pd for pd in t.partition_data if (t.name, pd.index) not in refused]
    body = handle_produce(ctx, req, guards)
    if isinstance(body, asyncio.Future):
        body = await body
    if body is None:
        return None
    got = {(r["name"], pr["index"]): pr for r in body["responses"] for pr in r["partition_responses"]}
    body["responses"] = [{"name": name, "partition_responses": [
        got.get((name, i)) or _error(i, refused[(name, i)], "partition not in the transaction") for i in indexes]}
        for name, indexes in order]
    return body


_MAGIC_POS, _ATTRIBUTES_LOW_POS = 16, 22
"""Byte positions in a record batch header: magic; the low byte of the int16 attributes."""


def _has_transactional_records(req) -> bool:
    """Kafka ``ProduceRequest.hasTransactionalRecords``: a partition's first batch is transactional
    (magic 2, attributes bit 4; read from two header bytes, not a parsed header: this runs for
    every produce request)."""
    for t in req.topic_data:
        for pd in t.partition_data:
            records = pd.records
            if records is not None and len(records) >= RECORD_BATCH_HEADER_BYTES \
                    and records[_MAGIC_POS] == MAGIC_V2 and records[_ATTRIBUTES_LOW_POS] & TRANSACTIONAL_FLAG:
                return True
    return False


def handle_produce_checked(ctx, req):
    """Produce (0): transactional records first pass KIP-890 verification (whatever ``acks``),
    then :func:`handle_produce`. Transactional records need a transactional id the principal may
    write (Kafka ``KafkaApis.handleProduceRequest``: else the whole request is
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED): a transactional batch that no coordinator knows of
    would open a transaction nobody ends, and hold the last stable offset for good."""
    if ctx.version >= 3 and (req.transactional_id is not None or _has_transactional_records(req)):
        if req.transactional_id is None or not authorize(
                ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, req.transactional_id):
            return None if req.acks == 0 else _refuse_all(req, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        unverified = _unverified_transactional(ctx.runtime, req)
        if unverified:
            return _verify_then_produce(ctx, req, unverified)
    return handle_produce(ctx, req)


def register(runtime) -> None:
    runtime.register(0, handle_produce_checked)
