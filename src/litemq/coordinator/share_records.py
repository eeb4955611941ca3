"""Records of the internal topic ``__share_group_state`` (KIP-932 durable share state).

One record per share-partition write, keyed by (group id, topic id, partition), so the
compacted topic keeps the latest state of each share-partition; a tombstone (no value) deletes
it (DeleteGroups of a share group).

The fields are those of Kafka's ``ShareSnapshotKey`` (record type 0) and
``ShareSnapshotValue`` (``SnapshotEpoch``, ``StateEpoch``, ``LeaderEpoch``, ``StartOffset``,
``CreateTimestamp``, ``WriteTimestamp``, ``StateBatches`` of ``FirstOffset``, ``LastOffset``,
``DeliveryState``, ``DeliveryCount``), written with the classic (non-flexible) encoding:
big-endian ints, int16-length strings, int32-length arrays. LiteMQ writes full snapshots only
(Kafka also writes ``ShareUpdate`` deltas between snapshots).
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass, field

from litemq.coordinator.records import FormatError
from litemq.coordinator.share_partition import StateBatch

SHARE_STATE_TOPIC = "__share_group_state"
SNAPSHOT_KEY_TYPE = 0
_VALUE_HEAD = struct.Struct(">hiiiqqqi")
_BATCH = struct.Struct(">qqbh")


@dataclass(frozen=True, slots=True)
class ShareStateKey:
    """A share-partition: group id, topic id, partition index."""

    group_id: str
    topic_id: uuid.UUID
    partition: int

    def coordinator_key(self) -> str:
        """Kafka ``SharePartitionKey.asCoordinatorKey``: ``group:topicId:partition`` (hashed to
        pick the ``__share_group_state`` partition)."""
        return f"{self.group_id}:{self.topic_id}:{self.partition}"


@dataclass(slots=True)
class ShareSnapshot:
    """A share-partition's durable state (see the module docstring)."""

    start_offset: int
    state_epoch: int = 0
    leader_epoch: int = -1
    snapshot_epoch: int = 0
    create_timestamp_ms: int = 0
    write_timestamp_ms: int = 0
    batches: list[StateBatch] = field(default_factory=list)


def encode_key(key: ShareStateKey) -> bytes:
    g = key.group_id.encode()
    return struct.pack(">hh", SNAPSHOT_KEY_TYPE, len(g)) + g + key.topic_id.bytes + struct.pack(">i", key.partition)


def decode_key(data: bytes) -> ShareStateKey:
    """Raises FormatError for a key this module did not write."""
    try:
        kind, n = struct.unpack_from(">hh", data, 0)
        if kind != SNAPSHOT_KEY_TYPE or n < 0 or len(data) != 4 + n + 16 + 4:
            raise FormatError(f"not a ShareSnapshotKey (type {kind})")
        group = bytes(data[4:4 + n]).decode()
        tid = uuid.UUID(bytes=bytes(data[4 + n:20 + n]))
        (part,) = struct.unpack_from(">i", data, 20 + n)
    except (struct.error, UnicodeDecodeError) as exc:
        raise FormatError(f"bad ShareSnapshotKey: {exc}") from None
    return ShareStateKey(group, tid, part)


def encode_value(s: ShareSnapshot) -> bytes:
    out = [_VALUE_HEAD.pack(0, s.snapshot_epoch, s.state_epoch, s.leader_epoch, s.start_offset,
                            s.create_timestamp_ms, s.write_timestamp_ms, len(s.batches))]
    out += [_BATCH.pack(b.first_offset, b.last_offset, b.state, b.delivery_count) for b in s.batches]
    return b"".join(out)


def decode_value(data: bytes) -> ShareSnapshot:
    """Raises FormatError for a value this module did not write."""
    try:
        version, snap, state_epoch, leader_epoch, start, created, written, n = _VALUE_HEAD.unpack_from(data, 0)
        if version != 0 or n < 0 or len(data) != _VALUE_HEAD.size + n * _BATCH.size:
            raise FormatError(f"bad ShareSnapshotValue (version {version}, {n} batches, {len(data)} bytes)")
        batches = [StateBatch(*_BATCH.unpack_from(data, _VALUE_HEAD.size + i * _BATCH.size)) for i in range(n)]
    except struct.error as exc:
        raise FormatError(f"bad ShareSnapshotValue: {exc}") from None
    return ShareSnapshot(start, state_epoch, leader_epoch, snap, created, written, batches)
