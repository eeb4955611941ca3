"""Record formats of ``__consumer_offsets``: Kafka's own key/value schemas, byte for byte.

Source: Kafka ``group-coordinator/src/main/resources/common/message/`` (``OffsetCommitKey``,
``OffsetCommitValue``, ``GroupMetadataKey``, ``GroupMetadataValue``), the non-flexible
versions, so Kafka's ``kafka-console-consumer --formatter ...OffsetsMessageFormatter`` and
LiteMQ read each other's topics. Every key and value starts with an int16 version:

=========================  ========  ======================================================
record                     version   fields (strings int16-length UTF-8, bytes int32-length)
=========================  ========  ======================================================
OffsetCommitKey            0, 1      group string, topic string, partition int32
GroupMetadataKey           2         group string
OffsetCommitValue          0         offset int64, metadata string, commitTimestamp int64
OffsetCommitValue          1         + expireTimestamp int64 (written when a v2-v4 OffsetCommit
                                     carries retention_time_ms)
OffsetCommitValue          2         offset, metadata, commitTimestamp
OffsetCommitValue          3         offset int64, leaderEpoch int32, metadata string,
                                     commitTimestamp int64 (what LiteMQ writes otherwise)
GroupMetadataValue         0..3      protocolType string, generation int32, protocol string?,
                                     leader string?, currentStateTimestamp int64 (v2+),
                                     members [memberId, groupInstanceId? (v3+), clientId,
                                     clientHost, rebalanceTimeout int32 (v1+), sessionTimeout
                                     int32, subscription bytes, assignment bytes]
=========================  ========  ======================================================

A value of ``None`` (tombstone) deletes the key: an offset removed by OffsetDelete/expiry, or
a group removed by DeleteGroups/expiry. Compaction keeps the latest record per key.

Also here: the parts of the *consumer* embedded protocol (``ConsumerProtocolSubscription``,
``ConsumerProtocolAssignment``, KIP-429) the coordinator reads to learn a group's subscribed
topics (OffsetDelete's GROUP_SUBSCRIBED_TO_TOPIC, KIP-496 expiry) and tools use to show
assignments.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")

OFFSET_KEY_VERSION = 1
GROUP_KEY_VERSION = 2
OFFSET_VALUE_VERSION = 3
OFFSET_VALUE_VERSION_WITH_EXPIRE = 1
GROUP_VALUE_VERSION = 3


class FormatError(ValueError):
    """A ``__consumer_offsets`` key or value that does not parse."""


# ------------------------------------------------------------------ primitive codec
class _Reader:
    __slots__ = ("buf", "pos")

    def __init__(self, buf: bytes) -> None:
        self.buf = memoryview(buf)
        self.pos = 0

    def _take(self, n: int) -> memoryview:
        if n < 0 or self.pos + n > len(self.buf):
            raise FormatError(f"need {n} bytes at {self.pos}, have {len(self.buf) - self.pos}")
        out = self.buf[self.pos:self.pos + n]
        self.pos += n
        return out

    def i16(self) -> int:
        return _I16.unpack(self._take(2))[0]

    def i32(self) -> int:
        return _I32.unpack(self._take(4))[0]

    def i64(self) -> int:
        return _I64.unpack(self._take(8))[0]

    def nstr(self) -> str | None:
        n = self.i16()
        if n == -1:
            return None
        try:
            return bytes(self._take(n)).decode()
        except UnicodeDecodeError as exc:
            raise FormatError(str(exc)) from None

    def str(self) -> str:
        s = self.nstr()
        if s is None:
            raise FormatError("null string in a non-nullable field")
        return s

    def nbytes(self) -> bytes | None:
        n = self.i32()
        return None if n == -1 else bytes(self._take(n))

    def array_len(self) -> int:
        n = self.i32()
        if n < -1 or n > len(self.buf) - self.pos:
            raise FormatError(f"array of {n} elements in {len(self.buf) - self.pos} bytes")
        return max(n, 0)


def _w_nstr(out: bytearray, s: str | None) -> None:
    if s is None:
        out += _I16.pack(-1)
    else:
        b = s.encode()
        out += _I16.pack(len(b))
        out += b


def _w_nbytes(out: bytearray, b: bytes | None) -> None:
    if b is None:
        out += _I32.pack(-1)
    else:
        out += _I32.pack(len(b))
        out += b


# ------------------------------------------------------------------ keys
@dataclass(frozen=True, slots=True)
class OffsetKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class GroupKey:
    group: str


def encode_offset_key(group: str, topic: str, partition: int) -> bytes:
    out = bytearray(_I16.pack(OFFSET_KEY_VERSION))
    _w_nstr(out, group)
    _w_nstr(out, topic)
    out += _I32.pack(partition)
    return bytes(out)


def encode_group_key(group: str) -> bytes:
    out = bytearray(_I16.pack(GROUP_KEY_VERSION))
    _w_nstr(out, group)
    return bytes(out)


def decode_key(key: bytes) -> OffsetKey | GroupKey:
    """Raises FormatError for anything but an OffsetCommitKey v0/1 or GroupMetadataKey v2."""
    r = _Reader(key)
    version = r.i16()
    if version in (0, 1):
        return OffsetKey(r.str(), r.str(), r.i32())
    if version == 2:
        return GroupKey(r.str())
    raise FormatError(f"unknown __consumer_offsets key version {version}")


# ------------------------------------------------------------------ offset values
@dataclass(slots=True)
class OffsetAndMetadata:
    """A committed offset (Kafka ``OffsetAndMetadata``). Timestamps in ms since the epoch."""

    offset: int
    leader_epoch: int = -1
    metadata: str = ""
    commit_timestamp_ms: int = -1
    expire_timestamp_ms: int | None = None


def encode_offset_value(o: OffsetAndMetadata) -> bytes:
    """OffsetCommitValue v1 when an explicit expire timestamp is set (v2-4 commits), else v3."""
    if o.expire_timestamp_ms is not None:
        out = bytearray(_I16.pack(OFFSET_VALUE_VERSION_WITH_EXPIRE))
        out += _I64.pack(o.offset)
        _w_nstr(out, o.metadata)
        out += _I64.pack(o.commit_timestamp_ms)
        out += _I64.pack(o.expire_timestamp_ms)
        return bytes(out)
    out = bytearray(_I16.pack(OFFSET_VALUE_VERSION))
    out += _I64.pack(o.offset)
    out += _I32.pack(o.leader_epoch)
    _w_nstr(out, o.metadata)
    out += _I64.pack(o.commit_timestamp_ms)
    return bytes(out)


def decode_offset_value(value: bytes) -> OffsetAndMetadata:
    r = _Reader(value)
    version = r.i16()
    if version in (0, 2):
        return OffsetAndMetadata(r.i64(), -1, r.nstr() or "", r.i64())
    if version == 1:
        off, md, ts, exp = r.i64(), r.nstr() or "", r.i64(), r.i64()
        return OffsetAndMetadata(off, -1, md, ts, exp)
    if version == 3:
        return OffsetAndMetadata(r.i64(), r.i32(), r.nstr() or "", r.i64())
    raise FormatError(f"unknown OffsetCommitValue version {version}")


# ------------------------------------------------------------------ group values
@dataclass(slots=True)
class StoredMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes


@dataclass(slots=True)
class StoredGroup:
    """GroupMetadataValue: a group's generation, protocol, leader and members."""

    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp_ms: int
    members: list[StoredMember] = field(default_factory=list)


def encode_group_value(g: StoredGroup) -> bytes:
    out = bytearray(_I16.pack(GROUP_VALUE_VERSION))
    _w_nstr(out, g.protocol_type)
    out += _I32.pack(g.generation)
    _w_nstr(out, g.protocol)
    _w_nstr(out, g.leader)
    out += _I64.pack(g.current_state_timestamp_ms)
    out += _I32.pack(len(g.members))
    for m in g.members:
        _w_nstr(out, m.member_id)
        _w_nstr(out, m.group_instance_id)
        _w_nstr(out, m.client_id)
        _w_nstr(out, m.client_host)
        out += _I32.pack(m.rebalance_timeout_ms)
        out += _I32.pack(m.session_timeout_ms)
        _w_nbytes(out, m.subscription)
        _w_nbytes(out, m.assignment)
    return bytes(out)


def decode_group_value(value: bytes) -> StoredGroup:
    r = _Reader(value)
    version = r.i16()
    if not 0 <= version <= 3:
        raise FormatError(f"unknown GroupMetadataValue version {version}")
    g = StoredGroup(r.str(), r.i32(), r.nstr(), r.nstr(), -1)
    if version >= 2:
        g.current_state_timestamp_ms = r.i64()
    for _ in range(r.array_len()):
        member_id = r.str()
        instance_id = r.nstr() if version >= 3 else None
        client_id, client_host = r.str(), r.str()
        rebalance_timeout = r.i32() if version >= 1 else -1
        session_timeout = r.i32()
        if version == 0:
            rebalance_timeout = session_timeout
        g.members.append(StoredMember(member_id, instance_id, client_id, client_host, rebalance_timeout,
                                      session_timeout, r.nbytes() or b"", r.nbytes() or b""))
    return g


# ------------------------------------------------------------------ consumer embedded protocol
def subscription_topics(metadata: bytes) -> set[str]:
    """Topics of a ``ConsumerProtocolSubscription`` (v0-3): version int16, topics [string], ...

    Raises FormatError when the bytes are not a consumer subscription.
    """
    r = _Reader(metadata)
    if r.i16() < 0:
        raise FormatError("negative ConsumerProtocolSubscription version")
    return {r.str() for _ in range(r.array_len())}


def assignment_partitions(assignment: bytes) -> dict[str, list[int]]:
    """Partitions of a ``ConsumerProtocolAssignment`` (v0-3): version, [topic, [int32]], ..."""
    if not assignment:
        return {}
    r = _Reader(assignment)
    if r.i16() < 0:
        raise FormatError("negative ConsumerProtocolAssignment version")
    out: dict[str, list[int]] = {}
    for _ in range(r.array_len()):
        topic = r.str()
        out.setdefault(topic, []).extend(r.i32() for _ in range(r.array_len()))
    return out


def java_string_hash(s: str) -> int:
    """Java's ``String.hashCode`` (over UTF-16 code units, int32 wrap-around)."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def partition_for(group_id: str, num_partitions: int) -> int:
    """Kafka's ``Utils.abs(groupId.hashCode) % offsets.topic.num.partitions``."""
    h = java_string_hash(group_id)
    return (0 if h == -(1 << 31) else abs(h)) % num_partitions
