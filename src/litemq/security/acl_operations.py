"""Kafka ACL operations and resource types, and the "authorized operations" bitfields.

Metadata v8+ (topic; cluster in v8-v10), DescribeCluster and DescribeGroups v3+ can ask for the
operations the caller may perform on a resource (KIP-430), sent as a 32-bit field with bit
``1 << operation.code`` set per allowed operation, or ``INT32_MIN`` when not requested.

LiteMQ has no authorizer yet, so every operation Kafka supports on a resource type is allowed,
as on a Kafka broker without ``authorizer.class.name``. The future ACL work reuses these tables.

Sources: Kafka 3.9 ``org.apache.kafka.common.acl.AclOperation`` (codes),
``org.apache.kafka.common.resource.ResourceType`` (codes),
``org.apache.kafka.security.authorizer.AclEntry.supportedOperations``,
``AuthHelper.authorizedOperations`` / ``Utils.to32BitField``.
"""

from __future__ import annotations

from enum import IntEnum

AUTHORIZED_OPERATIONS_OMITTED = -(2**31)
"""INT32_MIN: the field's value when the request did not ask for authorized operations."""


class AclOperation(IntEnum):
    """Kafka ``AclOperation`` codes (int8 on the wire)."""

    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14
    TWO_PHASE_COMMIT = 15


class ResourceType(IntEnum):
    """Kafka ACL ``ResourceType`` codes (int8 on the wire; not the ``ConfigResource`` ids)."""

    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


_O = AclOperation
SUPPORTED_OPERATIONS: dict[ResourceType, frozenset[AclOperation]] = {
    ResourceType.TOPIC: frozenset({_O.READ, _O.WRITE, _O.CREATE, _O.DESCRIBE, _O.DELETE, _O.ALTER,
                                   _O.DESCRIBE_CONFIGS, _O.ALTER_CONFIGS}),
    ResourceType.GROUP: frozenset({_O.READ, _O.DESCRIBE, _O.DELETE, _O.DESCRIBE_CONFIGS, _O.ALTER_CONFIGS}),
    ResourceType.CLUSTER: frozenset({_O.CREATE, _O.CLUSTER_ACTION, _O.DESCRIBE_CONFIGS, _O.ALTER_CONFIGS,
                                     _O.IDEMPOTENT_WRITE, _O.ALTER, _O.DESCRIBE}),
    ResourceType.TRANSACTIONAL_ID: frozenset({_O.DESCRIBE, _O.WRITE}),
    ResourceType.DELEGATION_TOKEN: frozenset({_O.DESCRIBE}),
    ResourceType.USER: frozenset({_O.CREATE_TOKENS, _O.DESCRIBE_TOKENS}),
}
"""Operations an ACL can grant per concrete resource type (Kafka 3.9 ``AclEntry.supportedOperations``)."""


def to_bitfield(operations) -> int:
    """32-bit field with bit ``1 << code`` per operation (Kafka ``Utils.to32BitField``)."""
    out = 0
    for op in operations:
        out |= 1 << int(op)
    return out


def authorized_operations(resource_type: ResourceType, requested: bool = True) -> int:
    """The authorized-operations field for a resource of ``resource_type``: with no authorizer,
    every supported operation; :data:`AUTHORIZED_OPERATIONS_OMITTED` when not ``requested``.

    Raises:
        KeyError: ``resource_type`` is not a concrete type (UNKNOWN, ANY).
    """
    if not requested:
        return AUTHORIZED_OPERATIONS_OMITTED
    return to_bitfield(SUPPORTED_OPERATIONS[resource_type])
