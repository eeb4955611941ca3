"""``__consumer_offsets`` records of KIP-848 consumer groups, in Kafka 4.1's formats.

Source: Kafka ``group-coordinator/src/main/resources/common/message/`` (4.1). A key is an int16
record type then the non-flexible key fields; a value is an int16 version (0) then the
flexible (KIP-482: compact strings/arrays, tagged fields) value fields:

=====  ==========================================  ======================================
type   key (group string [, member string])        value v0
=====  ==========================================  ======================================
3      ConsumerGroupMetadataKey (group)            Epoch int32; tag 0: MetadataHash int64
5      ConsumerGroupMemberMetadataKey (+ member)   InstanceId?, RackId?, ClientId,
                                                   ClientHost, SubscribedTopicNames [],
                                                   SubscribedTopicRegex?,
                                                   RebalanceTimeoutMs int32, ServerAssignor?
6      ConsumerGroupTargetAssignmentMetadataKey    AssignmentEpoch int32
7      ConsumerGroupTargetAssignmentMemberKey (+m) TopicPartitions [TopicId uuid, [int32]]
8      ConsumerGroupCurrentMemberAssignmentKey(+m) MemberEpoch, PreviousMemberEpoch int32,
                                                   State int8, AssignedPartitions [],
                                                   PartitionsPendingRevocation []
=====  ==========================================  ======================================

Partitions are named by topic id, as in Kafka; the caller maps ids to names. LiteMQ's
MetadataHash is its own hash of the subscribed topics' names and partition counts (Kafka hashes
ids, names, partitions and racks): a Kafka broker that reads it would only rebalance once.
Type 4 (ConsumerGroupPartitionMetadata, deprecated in 4.1) is neither written nor needed.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from litemq.coordinator.records import (_I16, _I32, _I64, FormatError, GroupKey, OffsetKey, _Reader, _w_nstr,
                                        decode_key)
from litemq.protocol import primitives as P
from litemq.protocol.errors import DecodeError

CG_METADATA = 3
CG_MEMBER_METADATA = 5
CG_TARGET_METADATA = 6
CG_TARGET_MEMBER = 7
CG_CURRENT_ASSIGNMENT = 8
CONSUMER_GROUP_KEY_TYPES = frozenset({3, 4, 5, 6, 7, 8})
SHARE_GROUP_KEY_TYPES = frozenset(range(9, 16))
"""KIP-932 share-group records (9..15, Kafka 4.1; encoded in
:mod:`litemq.coordinator.share_group_records`): same key layout, group [+ member]."""
_WITH_MEMBER = frozenset({CG_MEMBER_METADATA, CG_TARGET_MEMBER, CG_CURRENT_ASSIGNMENT, 10, 13, 14})

TopicIdPartitions = dict[uuid.UUID, list[int]]


@dataclass(frozen=True, slots=True)
class ConsumerGroupKey:
    """A consumer-group (3..8) or share-group (9..15) record key: ``kind`` is the record type."""

    kind: int
    group: str
    member: str | None = None


def encode_cg_key(kind: int, group: str, member: str | None = None) -> bytes:
    out = bytearray(_I16.pack(kind))
    _w_nstr(out, group)
    if kind in _WITH_MEMBER:
        _w_nstr(out, member or "")
    return bytes(out)


def decode_any_key(key: bytes) -> OffsetKey | GroupKey | ConsumerGroupKey:
    """Any ``__consumer_offsets`` key LiteMQ knows: :func:`~litemq.coordinator.records.decode_key`'s
    classic keys, or a consumer-group (types 3..8) or share-group (9..15) key. Raises FormatError
    otherwise."""
    r = _Reader(key)
    kind = r.i16()
    if kind not in CONSUMER_GROUP_KEY_TYPES and kind not in SHARE_GROUP_KEY_TYPES:
        return decode_key(key)
    group = r.str()
    return ConsumerGroupKey(kind, group, r.str() if kind in _WITH_MEMBER else None)


# ------------------------------------------------------------------ flexible value codec
def _w_tp(out: bytearray, parts: TopicIdPartitions) -> None:
    P.write_uvarint(out, len(parts) + 1)
    for tid in sorted(parts, key=str):
        out += P.uuid_bytes(tid)
        ps = sorted(parts[tid])
        P.write_uvarint(out, len(ps) + 1)
        for p in ps:
            out += _I32.pack(p)
        out.append(0)  # tagged fields


class _Flex:
    """Reads a flexible value; every failure is a FormatError."""

    def __init__(self, buf: bytes) -> None:
        self.buf = memoryview(buf)
        self.pos = 0
        self.end = len(buf)

    def _fixed(self, s) -> int:
        if self.pos + s.size > self.end:
            raise FormatError("value too short")
        v = s.unpack_from(self.buf, self.pos)[0]
        self.pos += s.size
        return v

    def i8(self) -> int:
        if self.pos >= self.end:
            raise FormatError("value too short")
        v = self.buf[self.pos]
        self.pos += 1
        return v - 256 if v > 127 else v

    def i32(self) -> int:
        return self._fixed(_I32)

    def i64(self) -> int:
        return self._fixed(_I64)

    def _call(self, fn, *args):
        try:
            v, self.pos = fn(self.buf, self.pos, *args)
        except (DecodeError, IndexError, UnicodeDecodeError) as exc:
            raise FormatError(str(exc)) from None
        return v

    def cstr(self) -> str:
        return self._call(P.read_cstr, self.end)

    def ncstr(self) -> str | None:
        return self._call(P.read_ncstr, self.end)

    def count(self, min_elem: int) -> int:
        return max(self._call(P.read_ccount, self.end, min_elem, False), 0)

    def tagged(self) -> dict[int, bytes]:
        try:
            n, self.pos = P.read_uvarint(self.buf, self.pos)
            out = {}
            for _ in range(min(n, 64)):
                tag, self.pos = P.read_uvarint(self.buf, self.pos)
                size, self.pos = P.read_uvarint(self.buf, self.pos)
                if self.pos + size > self.end:
                    raise FormatError("tagged field past the end")
                out[tag] = bytes(self.buf[self.pos:self.pos + size])
                self.pos += size
            return out
        except (DecodeError, IndexError) as exc:
            raise FormatError(str(exc)) from None

    def uuid(self) -> uuid.UUID:
        if self.pos + 16 > self.end:
            raise FormatError("value too short")
        raw = bytes(self.buf[self.pos:self.pos + 16])
        self.pos += 16
        return uuid.UUID(bytes=raw)

    def tps(self) -> TopicIdPartitions:
        out: TopicIdPartitions = {}
        for _ in range(self.count(18)):
            tid = self.uuid()
            out[tid] = [self.i32() for _ in range(self.count(4))]
            self.tagged()
        return out

    def version(self) -> None:
        v = self._fixed(_I16)
        if v != 0:
            raise FormatError(f"unknown consumer group record value version {v}")


def encode_group_metadata_value(epoch: int, metadata_hash: int) -> bytes:
    out = bytearray(_I16.pack(0))
    out += _I32.pack(epoch)
    out.append(1)  # one tagged field: tag 0, MetadataHash int64
    out.append(0)
    out.append(8)
    out += _I64.pack(metadata_hash)
    return bytes(out)


def decode_group_metadata_value(value: bytes) -> tuple[int, int]:
    """(group epoch, metadata hash)."""
    r = _Flex(value)
    r.version()
    epoch = r.i32()
    tags = r.tagged()
    h = tags.get(0)
    return epoch, (_I64.unpack(h)[0] if h is not None and len(h) == 8 else 0)


@dataclass(slots=True)
class StoredConsumerMember:
    """ConsumerGroupMemberMetadataValue."""

    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: list[str]
    subscribed_topic_regex: str | None
    rebalance_timeout_ms: int
    server_assignor: str | None


def write_member_client(out: bytearray, rack_id: str | None, client_id: str, client_host: str,
                        subscribed_topic_names: list[str]) -> None:
    """RackId?, ClientId, ClientHost, SubscribedTopicNames: the fields a consumer-group and a
    share-group member metadata value share, in that order."""
    P.write_ncstr(out, rack_id)
    P.write_cstr(out, client_id)
    P.write_cstr(out, client_host)
    P.write_uvarint(out, len(subscribed_topic_names) + 1)
    for t in subscribed_topic_names:
        P.write_cstr(out, t)


def encode_member_value(m: StoredConsumerMember) -> bytes:
    out = bytearray(_I16.pack(0))
    P.write_ncstr(out, m.instance_id)
    write_member_client(out, m.rack_id, m.client_id, m.client_host, m.subscribed_topic_names)
    P.write_ncstr(out, m.subscribed_topic_regex)
    out += _I32.pack(m.rebalance_timeout_ms)
    P.write_ncstr(out, m.server_assignor)
    out.append(0)
    return bytes(out)


def decode_member_value(value: bytes) -> StoredConsumerMember:
    r = _Flex(value)
    r.version()
    iid, rack, cid, host = r.ncstr(), r.ncstr(), r.cstr(), r.cstr()
    names = [r.cstr() for _ in range(r.count(1))]
    regex = r.ncstr()
    rto = r.i32()
    assignor = r.ncstr()
    r.tagged()
    return StoredConsumerMember(iid, rack, cid, host, names, regex, rto, assignor)


def encode_target_metadata_value(assignment_epoch: int) -> bytes:
    return _I16.pack(0) + _I32.pack(assignment_epoch) + b"\x00"


def decode_target_metadata_value(value: bytes) -> int:
    r = _Flex(value)
    r.version()
    return r.i32()


def encode_target_member_value(parts: TopicIdPartitions) -> bytes:
    out = bytearray(_I16.pack(0))
    _w_tp(out, parts)
    out.append(0)
    return bytes(out)


def decode_target_member_value(value: bytes) -> TopicIdPartitions:
    r = _Flex(value)
    r.version()
    out = r.tps()
    r.tagged()
    return out


@dataclass(slots=True)
class StoredCurrentAssignment:
    """ConsumerGroupCurrentMemberAssignmentValue."""

    member_epoch: int
    previous_member_epoch: int
    state: int
    assigned: TopicIdPartitions
    pending_revocation: TopicIdPartitions


def encode_current_assignment_value(c: StoredCurrentAssignment, with_pending: bool = True) -> bytes:
    """ConsumerGroupCurrentMemberAssignmentValue; ``with_pending=False``: the share-group form
    (ShareGroupCurrentMemberAssignmentValue has no PartitionsPendingRevocation)."""
    out = bytearray(_I16.pack(0))
    out += _I32.pack(c.member_epoch)
    out += _I32.pack(c.previous_member_epoch)
    out += bytes([c.state & 0xFF])
    _w_tp(out, c.assigned)
    if with_pending:
        _w_tp(out, c.pending_revocation)
    out.append(0)
    return bytes(out)


def decode_current_assignment_value(value: bytes, with_pending: bool = True) -> StoredCurrentAssignment:
    """Raises FormatError; ``with_pending`` as in :func:`encode_current_assignment_value`."""
    r = _Flex(value)
    r.version()
    epoch, prev, state = r.i32(), r.i32(), r.i8()
    assigned = r.tps()
    pending = r.tps() if with_pending else {}
    r.tagged()
    return StoredCurrentAssignment(epoch, prev, state, assigned, pending)
