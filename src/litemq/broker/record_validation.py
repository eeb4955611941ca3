"""Record-level checks and conversions of produced batches (Kafka ``LogValidator``).

The produce hot path appends batches as bytes after header-only checks. Two topic settings need
the records themselves, and only they pay for decoding:

- ``cleanup.policy=compact``: every record needs a key. A batch holding keyless records fails
  whole with INVALID_RECORD and per-record errors (KIP-467), nothing of it is appended.
- ``compression.type`` other than ``producer``: a batch whose codec differs from the topic's is
  decompressed and re-encoded with the topic's codec (``uncompressed`` = codec none), keeping
  producer id, epoch, base sequence, the transactional flag, timestamps, offsets deltas and
  headers; batches already in the topic's codec stay as they came.

Timestamps (:func:`check_timestamps`, every CreateTime topic): a record whose timestamp lies more
than ``message.timestamp.after.max.ms`` (Kafka 4: one hour) after the broker's clock, or more than
``message.timestamp.before.max.ms`` before it, fails its batch with INVALID_TIMESTAMP and
per-record errors. The batch header's ``max_timestamp`` answers the first bound without decoding;
records are decoded only for a batch that breaks it or when the second bound is set.

Sources: Kafka 3.9 ``LogValidator`` (``validateKey``, ``processRecordErrors``,
``buildRecordsAndAssignOffsets``), Kafka 4 ``LogValidator.validateTimestamp`` (KIP-937, defaults
of KIP-1030), ``TopicConfig.COMPRESSION_TYPE_CONFIG`` (``BrokerCompressionType``),
ProduceResponse v8+ ``RecordErrors`` (KIP-467).
"""

from __future__ import annotations

from litemq.protocol.errors import ErrorCode, InvalidRecordError, KafkaError
from litemq.protocol.records import (
    COMPRESSION_GZIP,
    COMPRESSION_LZ4,
    COMPRESSION_NONE,
    COMPRESSION_SNAPPY,
    COMPRESSION_ZSTD,
    NO_TIMESTAMP,
    TIMESTAMP_CREATE_TIME,
    build_batch,
    decode_batch,
    iter_batches,
    record_too_large,
)
from litemq.storage.config import LONG_MAX

TOPIC_COMPRESSION_CODECS: dict[str, int] = {
    "uncompressed": COMPRESSION_NONE,
    "gzip": COMPRESSION_GZIP,
    "snappy": COMPRESSION_SNAPPY,
    "lz4": COMPRESSION_LZ4,
    "zstd": COMPRESSION_ZSTD,
}
"""``compression.type`` values that make the broker (re)compress, -> batch codec id."""

TOPIC_COMPRESSION_TYPES: tuple[str, ...] = ("producer", *TOPIC_COMPRESSION_CODECS)
"""Every valid ``compression.type`` (Kafka ``BrokerCompressionType``); ``producer`` keeps the
producer's codec."""

RECORD_ERRORS_IN_MESSAGE = 3
"""Kafka's error message quotes at most this many record errors (``processRecordErrors``)."""


class RecordValidationError(InvalidRecordError):
    """A batch rejected for per-record reasons (Kafka ``RecordValidationException``).

    ``record_errors``: ``[(batch_index, message)]``, ``batch_index`` the record's position in its
    batch (0-based), for ProduceResponse v8+ ``RecordErrors`` (KIP-467).
    """

    def __init__(self, message: str, record_errors: list[tuple[int, str]]) -> None:
        super().__init__(message, ErrorCode.INVALID_RECORD)
        self.record_errors = record_errors


class TimestampValidationError(KafkaError):
    """Records with timestamps outside the topic's bounds (Kafka ``RecordValidationException``
    around ``InvalidTimestampException``): INVALID_TIMESTAMP, ``record_errors`` as in
    :class:`RecordValidationError`."""

    def __init__(self, message: str, record_errors: list[tuple[int, str]]) -> None:
        super().__init__(message, ErrorCode.INVALID_TIMESTAMP)
        self.record_errors = record_errors


def check_timestamps(records, now_ms: int, before_max_ms: int, after_max_ms: int) -> None:
    """Check the record timestamps of one partition's produced records blob against the broker
    clock ``now_ms``: none may be more than ``after_max_ms`` after it or ``before_max_ms`` before
    it (a topic with ``message.timestamp.type=CreateTime``; records without a timestamp, -1, and
    control batches pass). ``before_max_ms`` >= 2**63 - 1 means no lower bound.

    Raises:
        TimestampValidationError: INVALID_TIMESTAMP with one ``(batch_index, message)`` per
            offending record of the first failing batch, as Kafka 4 answers.
        CorruptRecordError, InvalidRecordError: from decoding a batch that needs its records.
    """
    lower_bound = before_max_ms < LONG_MAX  # Kafka's default, Long.MAX_VALUE: no lower bound
    for pos, h in iter_batches(records):
        if h.is_control or h.timestamp_type != TIMESTAMP_CREATE_TIME:
            continue
        if not lower_bound and h.max_timestamp - now_ms <= after_max_ms:
            continue  # the header answers: no record is later than the batch's max timestamp
        _, recs = decode_batch(records, pos)
        errors = []
        for i, r in enumerate(recs):
            if r.timestamp == NO_TIMESTAMP:
                continue
            diff = r.timestamp - now_ms
            if diff > after_max_ms or -diff > before_max_ms:
                errors.append((i, f"Timestamp {r.timestamp} of message with offset {r.offset} is out of range. "
                                  f"The timestamp should be within [{now_ms - before_max_ms}, "
                                  f"{now_ms + after_max_ms}]"))
        if errors:
            raise TimestampValidationError("One or more records have been rejected due to invalid timestamp",
                                           errors)


def target_codec(compression_type: str | None) -> int | None:
    """The codec id the broker stores batches in for topic config ``compression.type``; None for
    ``producer`` (or unset): batches stay as the producer compressed them.

    Raises:
        ValueError: not one of :data:`TOPIC_COMPRESSION_TYPES`.
    """
    if compression_type is None or compression_type == "producer":
        return None
    try:
        return TOPIC_COMPRESSION_CODECS[compression_type]
    except KeyError:
        raise ValueError(f"compression.type: {compression_type!r} is not one of "
                         f"{', '.join(TOPIC_COMPRESSION_TYPES)}") from None


def validate_and_convert(records: bytearray, topic_partition: str, *, compacted: bool,
                         codec: int | None, level: int | None = None,
                         max_batch_bytes: int | None = None) -> bytearray:
    """Check keys (``compacted``) and recompress to ``codec`` (None = keep) the batches of one
    partition's produced records blob, at compression ``level`` (the topic's
    ``compression.<codec>.level``, KIP-390; None or gzip's -1: the codec's default). A batch
    already in ``codec`` is kept as it is, whatever its level (as in Kafka). Each batch as sent
    is held to ``max_batch_bytes`` (``max.message.bytes``) first: the log checks only what
    recompression makes of it (Kafka's ``UnifiedLog.analyzeAndValidateRecords``, then
    ``LogValidator``).

    Returns ``records`` itself when nothing changed, else a new bytearray of the converted
    batches (header fields as produced; the log assigns offsets afterwards).

    Raises:
        RecordTooLargeError: a batch over ``max_batch_bytes`` (MESSAGE_TOO_LARGE).
        RecordValidationError: keyless records on a compacted topic (INVALID_RECORD, with every
            offending record's index in its batch), checked per batch like Kafka.
        CorruptRecordError, InvalidRecordError, UnsupportedCompressionError: from decoding
            (framing, CRC, decompression bounds of ``limits.py``).
    """
    if not compacted and codec is None:
        return records
    parts: list = []
    changed = False
    mv = memoryview(records)
    for pos, h in iter_batches(mv):
        if max_batch_bytes is not None and h.size > max_batch_bytes:
            raise record_too_large(h.size, max_batch_bytes)
        recompress = codec is not None and h.compression != codec and not h.is_control
        if not (compacted or recompress):
            parts.append(mv[pos:pos + h.size])
            continue
        _, recs = decode_batch(mv, pos)
        if compacted and not h.is_control:
            message = f"Compacted topic cannot accept message without key in topic partition {topic_partition}."
            errors = [(i, message) for i, r in enumerate(recs) if r.key is None]
            if errors:
                shown = ", ".join(f"RecordError(batchIndex={i}, message='{m}')"
                                  for i, m in errors[:RECORD_ERRORS_IN_MESSAGE])
                raise RecordValidationError(
                    f"One or more records have been rejected due to {len(errors)} record errors in total, "
                    f"and only showing the first three errors at most: [{shown}]", errors)
        if not recompress:
            parts.append(mv[pos:pos + h.size])
            continue
        parts.append(build_batch(
            recs, base_offset=h.base_offset, partition_leader_epoch=h.partition_leader_epoch,
            compression=codec, timestamp_type=h.timestamp_type, producer_id=h.producer_id,
            producer_epoch=h.producer_epoch, base_sequence=h.base_sequence,
            is_transactional=h.is_transactional,
            base_timestamp=h.base_timestamp if h.timestamp_type == TIMESTAMP_CREATE_TIME and recs else None,
            last_offset_delta=h.last_offset_delta, compression_level=level))
        changed = True
    if not changed:
        return records
    return bytearray(b"".join(parts))
