"""Writing to an internal topic (``__consumer_offsets``, ``__transaction_state``) and waiting
until the write is committed: what both coordinators need from the replica manager.

Source: Kafka ``GroupMetadataManager.storeOffsets``/``TransactionStateManager.appendTransactionToLog``
(append with acks=all, wait for the high watermark, map storage errors to coordinator errors).
"""

from __future__ import annotations

import asyncio
import logging

from typing import Callable, TypeVar

from litemq.protocol.errors import ErrorCode as E
from litemq.protocol.errors import KafkaError
from litemq.protocol.records import decode_batch, iter_batches

log = logging.getLogger(__name__)

K = TypeVar("K")
V = TypeVar("V")

LOAD_READ_BYTES = 1024 * 1024
"""Bytes read from the log per step when a coordinator replays its internal partition."""


def storage_error_to_coordinator_error(code: int) -> int:
    """Kafka's mapping of append errors to the errors a coordinator answers with."""
    if code in (E.UNKNOWN_TOPIC_OR_PARTITION, E.NOT_ENOUGH_REPLICAS, E.NOT_ENOUGH_REPLICAS_AFTER_APPEND):
        return E.COORDINATOR_NOT_AVAILABLE
    if code in (E.NOT_LEADER_OR_FOLLOWER, E.KAFKA_STORAGE_ERROR):
        return E.NOT_COORDINATOR
    if code in (E.MESSAGE_TOO_LARGE, E.RECORD_LIST_TOO_LARGE, E.INVALID_FETCH_SIZE):
        return E.INVALID_COMMIT_OFFSET_SIZE
    return code


async def append_committed(partition, batch: bytes, timeout_s: float, **append_kwargs) -> tuple[int, int]:
    """Append one record ``batch`` to ``partition`` (a hosted :class:`Partition`, or None) as
    leader and wait until the high watermark covers it.

    Returns ``(error code, base offset)``; the error is already mapped with
    :func:`storage_error_to_coordinator_error` (NOT_COORDINATOR when ``partition`` is None or
    not led here, REQUEST_TIMED_OUT when not committed within ``timeout_s``).
    """
    if partition is None:
        return E.NOT_COORDINATOR, -1
    try:
        info = partition.append(bytearray(batch), **append_kwargs)
    except KafkaError as exc:
        log.warning("append to %s-%d failed: %s", partition.topic, partition.index, exc)
        return storage_error_to_coordinator_error(exc.code), -1
    fut = partition.waiter(info.last_offset + 1)
    try:
        await asyncio.wait_for(fut, timeout_s)
    except asyncio.TimeoutError:
        return E.REQUEST_TIMED_OUT, -1
    except KafkaError as exc:
        return storage_error_to_coordinator_error(exc.code), -1
    return E.NONE, info.first_offset


def replay_committed(partition):
    """Every batch of ``partition`` from its log start offset to its high watermark, as
    ``(BatchHeader, records)`` with the batch's records decoded (control batches too), for a
    coordinator loading its state (Kafka ``GroupMetadataManager.doLoadGroupsAndOffsets``,
    ``TransactionStateManager.loadTransactionMetadata``). Reads ``LOAD_READ_BYTES`` at a time."""
    pos, hw = partition.log_start_offset, partition.high_watermark
    while pos < hw:
        data = memoryview(partition.log.read_bytes(pos, LOAD_READ_BYTES, max_offset=hw))
        if not data:
            break
        for bpos, h in iter_batches(data, allow_trailing_partial=True):
            if h.next_offset <= pos:
                continue
            yield h, [r for r in decode_batch(data, bpos)[1] if r.offset >= pos]
            pos = h.next_offset


def replay_latest(partition, decode_key: Callable[[bytes], K], decode_value: Callable[[bytes], V],
                  skip: type[Exception]) -> dict[K, V | None]:
    """The latest value of every key of a compacted internal partition (None: a tombstone),
    from :func:`replay_committed`; control batches are skipped and a record whose key or value
    raises ``skip`` is logged (the first three) and left out."""
    latest: dict[K, V | None] = {}
    bad = 0
    for h, records in replay_committed(partition):
        if h.is_control:
            continue
        for rec in records:
            if rec.key is None:
                continue
            try:
                latest[decode_key(rec.key)] = None if rec.value is None else decode_value(rec.value)
            except skip as exc:
                bad += 1
                if bad <= 3:
                    log.warning("%s-%d offset %d: skipping undecodable record: %s", partition.topic,
                                partition.index, rec.offset, exc)
    return latest
