"""``__consumer_offsets`` records of KIP-932 share groups, in Kafka 4.1's formats.

Source: Kafka 4.1 ``group-coordinator/src/main/resources/common/message/ShareGroup*.json``.
Keys are an int16 record type then the group id [and member id] (non-flexible strings, as the
consumer-group keys: :func:`~litemq.coordinator.consumer_group_records.encode_cg_key`); values
an int16 version (0) then flexible fields:

=====  =======================================  =========================================
type   key                                      value v0
=====  =======================================  =========================================
10     ShareGroupMemberMetadataKey (g, member)  RackId?, ClientId, ClientHost,
                                                SubscribedTopicNames []
11     ShareGroupMetadataKey (g)                Epoch int32, MetadataHash int64
12     ShareGroupTargetAssignmentMetadataKey    AssignmentEpoch int32
13     ShareGroupTargetAssignmentMemberKey (+m) TopicPartitions [TopicId uuid, [int32]]
14     ShareGroupCurrentMemberAssignmentKey(+m) MemberEpoch, PreviousMemberEpoch int32,
                                                State int8, AssignedPartitions []
=====  =======================================  =========================================

Types 12 and 13 have the same value layout as the consumer-group types 6 and 7 (their codecs
are reused). Type 9 (ShareGroupPartitionMetadata, gone in 4.1) and type 15
(ShareGroupStatePartitionMetadata: which share-partitions the coordinator initialised through
InitializeShareGroupState) are not written: LiteMQ's share-partition leader initialises a
share-partition's state itself at its first fetch (see ``share_coordinator``). As for consumer
groups, MetadataHash is LiteMQ's own hash of the subscribed topics' names and partition counts.
"""

from __future__ import annotations

from dataclasses import dataclass

from litemq.coordinator.consumer_group_records import (_I16, _I32, _I64, StoredCurrentAssignment,
                                                       TopicIdPartitions, _Flex, decode_current_assignment_value,
                                                       decode_target_member_value, decode_target_metadata_value,
                                                       encode_cg_key, encode_current_assignment_value,
                                                       encode_target_member_value, encode_target_metadata_value,
                                                       write_member_client)

SG_MEMBER_METADATA = 10
SG_METADATA = 11
SG_TARGET_METADATA = 12
SG_TARGET_MEMBER = 13
SG_CURRENT_ASSIGNMENT = 14

__all__ = ["SG_CURRENT_ASSIGNMENT", "SG_MEMBER_METADATA", "SG_METADATA", "SG_TARGET_MEMBER", "SG_TARGET_METADATA",
           "StoredShareMember", "decode_share_current_value", "decode_share_member_value",
           "decode_share_metadata_value", "decode_target_member_value", "decode_target_metadata_value",
           "encode_cg_key", "encode_share_current_value", "encode_share_member_value",
           "encode_share_metadata_value", "encode_target_member_value", "encode_target_metadata_value"]


def encode_share_metadata_value(epoch: int, metadata_hash: int) -> bytes:
    """ShareGroupMetadataValue v0: the group epoch and the subscribed topics' hash."""
    return _I16.pack(0) + _I32.pack(epoch) + _I64.pack(metadata_hash) + b"\x00"


def decode_share_metadata_value(value: bytes) -> tuple[int, int]:
    """(group epoch, metadata hash). Raises FormatError."""
    r = _Flex(value)
    r.version()
    epoch = r.i32()
    h = r.i64()
    r.tagged()
    return epoch, h


@dataclass(slots=True)
class StoredShareMember:
    """ShareGroupMemberMetadataValue."""

    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: list[str]


def encode_share_member_value(m: StoredShareMember) -> bytes:
    out = bytearray(_I16.pack(0))
    write_member_client(out, m.rack_id, m.client_id, m.client_host, m.subscribed_topic_names)
    out.append(0)
    return bytes(out)


def decode_share_member_value(value: bytes) -> StoredShareMember:
    """Raises FormatError."""
    r = _Flex(value)
    r.version()
    rack, cid, host = r.ncstr(), r.cstr(), r.cstr()
    names = [r.cstr() for _ in range(r.count(1))]
    r.tagged()
    return StoredShareMember(rack, cid, host, names)


def encode_share_current_value(member_epoch: int, previous_member_epoch: int, state: int,
                               assigned: TopicIdPartitions) -> bytes:
    """ShareGroupCurrentMemberAssignmentValue v0 (``state``: Kafka ``MemberState`` id, 0 = STABLE)."""
    return encode_current_assignment_value(
        StoredCurrentAssignment(member_epoch, previous_member_epoch, state, assigned, {}), with_pending=False)


def decode_share_current_value(value: bytes) -> tuple[int, int, int, TopicIdPartitions]:
    """(member epoch, previous member epoch, state, assigned partitions by topic id). Raises FormatError."""
    c = decode_current_assignment_value(value, with_pending=False)
    return c.member_epoch, c.previous_member_epoch, c.state, c.assigned
