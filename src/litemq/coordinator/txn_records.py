"""Record formats of ``__transaction_state``: Kafka's own key/value schemas, byte for byte.

Source: Kafka ``transaction-coordinator/src/main/resources/common/message/``
(``TransactionLogKey``, ``TransactionLogValue``), version 0 (non-flexible), so Kafka's
``TransactionLogMessageFormatter`` and LiteMQ read each other's topics:

=====================  =======  =============================================================
record                 version  fields (strings int16-length UTF-8)
=====================  =======  =============================================================
TransactionLogKey      0        transactionalId string
TransactionLogValue    0        producerId int64, producerEpoch int16, transactionTimeoutMs
                                int32, transactionStatus int8, transactionPartitions
                                [topic string, partitionIds [int32]] (nullable),
                                transactionLastUpdateTimestampMs int64,
                                transactionStartTimestampMs int64
=====================  =======  =============================================================

A ``None`` value (tombstone) removes an expired transactional id; compaction keeps the latest
value per key. Status codes are Kafka's ``TransactionState`` ids.
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass, field

from litemq.coordinator.records import FormatError, _Reader, _w_nstr

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")

TXN_KEY_VERSION = 0
TXN_VALUE_VERSION = 0


class TxnState(enum.IntEnum):
    """Kafka ``TransactionState`` (ids as stored in ``__transaction_state``); ``name_`` is the
    string ListTransactions/DescribeTransactions report (Kafka ``TransactionState.stateName``)."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def state_name(self) -> str:
        return "".join(w.capitalize() for w in self.name.split("_"))


@dataclass(slots=True)
class TxnLogValue:
    """One ``TransactionLogValue``: the durable state of a transactional id."""

    producer_id: int
    producer_epoch: int
    txn_timeout_ms: int
    state: TxnState
    partitions: dict[str, set[int]] = field(default_factory=dict)
    last_update_ms: int = -1
    start_ms: int = -1


def encode_txn_key(transactional_id: str) -> bytes:
    out = bytearray(_I16.pack(TXN_KEY_VERSION))
    _w_nstr(out, transactional_id)
    return bytes(out)


def decode_txn_key(key: bytes) -> str:
    """Raises FormatError for anything but a TransactionLogKey v0."""
    r = _Reader(key)
    version = r.i16()
    if version != TXN_KEY_VERSION:
        raise FormatError(f"unknown TransactionLogKey version {version}")
    return r.str()


def encode_txn_value(v: TxnLogValue) -> bytes:
    out = bytearray(_I16.pack(TXN_VALUE_VERSION))
    out += _I64.pack(v.producer_id)
    out += _I16.pack(v.producer_epoch)
    out += _I32.pack(v.txn_timeout_ms)
    out += _I8.pack(int(v.state))
    out += _I32.pack(len(v.partitions))
    for topic in sorted(v.partitions):
        _w_nstr(out, topic)
        parts = sorted(v.partitions[topic])
        out += _I32.pack(len(parts))
        for p in parts:
            out += _I32.pack(p)
    out += _I64.pack(v.last_update_ms)
    out += _I64.pack(v.start_ms)
    return bytes(out)


def decode_txn_value(value: bytes) -> TxnLogValue:
    """Raises FormatError for a value that is not a TransactionLogValue v0 (or has an unknown status)."""
    r = _Reader(value)
    version = r.i16()
    if version not in (0, 1):
        raise FormatError(f"unknown TransactionLogValue version {version}")
    if version == 1:
        raise FormatError("TransactionLogValue v1 (flexible) is not read by LiteMQ")
    pid, epoch, timeout = r.i64(), r.i16(), r.i32()
    status = _I8.unpack(r._take(1))[0]
    try:
        state = TxnState(status)
    except ValueError:
        raise FormatError(f"unknown transaction status {status}") from None
    partitions: dict[str, set[int]] = {}
    for _ in range(r.array_len()):
        topic = r.str()
        partitions.setdefault(topic, set()).update(r.i32() for _ in range(r.array_len()))
    return TxnLogValue(pid, epoch, timeout, state, partitions, r.i64(), r.i64())
