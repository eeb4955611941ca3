"""ACL bindings, binding filters and the indexed ACL set kept in the cluster metadata.

An ACL binding (KIP-11, KIP-290 prefixed patterns) is a resource pattern
``(resource_type, resource_name, pattern_type)`` plus an access control entry
``(principal, host, operation, permission_type)``:

- ``pattern_type`` LITERAL (3) matches the name exactly; the literal name ``*`` matches every
  resource of the type. PREFIXED (4) matches every name starting with ``resource_name``.
- ``principal`` is ``User:alice`` or ``User:*`` (every principal); ``host`` an IP address or
  ``*``.
- ``permission_type`` DENY (2) or ALLOW (3).

Filters (DescribeAcls, DeleteAcls) use ANY (1) for "any value" in the enum fields, null for
"any value" in the string fields, and the pattern type MATCH (2) for "every pattern that
matches this resource name" (literal, wildcard and prefixed).

Sources: Kafka 3.9 ``org.apache.kafka.common.acl.{AclBinding, AclBindingFilter,
AccessControlEntryFilter, AclPermissionType}``, ``org.apache.kafka.common.resource.{PatternType,
ResourcePatternFilter}``, ``org.apache.kafka.controller.AclControlManager.validateNewAcl``,
``kafka.server.AclApis.handleCreateAcls``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from enum import IntEnum

from litemq.security.acl_operations import (
    SUPPORTED_OPERATIONS,
    AclOperation,
    ResourceType,
)
from litemq.protocol.errors import ErrorCode, KafkaError
from litemq.security.principal import KafkaPrincipal

WILDCARD_RESOURCE = "*"
"""The literal resource name matching every resource of its type (``ResourcePattern.WILDCARD_RESOURCE``)."""
WILDCARD_HOST = "*"
WILDCARD_PRINCIPAL = "User:*"
CLUSTER_RESOURCE_NAME = "kafka-cluster"
"""The only valid name of a CLUSTER resource (``Resource.CLUSTER_NAME``)."""


class PatternType(IntEnum):
    """Kafka ``PatternType`` codes (int8 on the wire, KIP-290)."""

    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclPermissionType(IntEnum):
    """Kafka ``AclPermissionType`` codes (int8 on the wire)."""

    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


def _code(enum_cls, value):
    """``enum_cls(value)``, or its UNKNOWN member for a code Kafka does not define (``fromCode``)."""
    try:
        return enum_cls(int(value))
    except (TypeError, ValueError):
        return enum_cls.UNKNOWN


@dataclass(frozen=True, slots=True)
class AclBinding:
    """One ACL. Build from the wire with :meth:`from_row` and check with :func:`validate_binding`."""

    resource_type: ResourceType
    resource_name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: AclOperation
    permission_type: AclPermissionType

    def to_row(self) -> list:
        """JSON form in metadata records: ``[rtype, name, pattern, principal, host, op, perm]``."""
        return _to_row(self)

    @classmethod
    def from_row(cls, row) -> AclBinding:
        """Inverse of :meth:`to_row`; unknown codes become UNKNOWN (then :func:`validate_binding` fails).

        Raises:
            ValueError: not a list of 7 items, or a name/principal/host that is not a string.
        """
        return cls(*_from_row(row, "ACL binding", nullable=False))


def _to_row(x) -> list:
    return [int(x.resource_type), x.resource_name, int(x.pattern_type), x.principal, x.host, int(x.operation),
            int(x.permission_type)]


def _from_row(row, what: str, nullable: bool) -> tuple:
    if not isinstance(row, (list, tuple)) or len(row) != 7:
        raise ValueError(f"{what} must be a list of 7 items, got {row!r}")
    rtype, name, pattern, principal, host, op, perm = row
    for value in (name, principal, host):
        if not isinstance(value, str) and not (nullable and value is None):
            raise ValueError(f"{what}: resource name, principal and host must be strings, got {value!r}")
    return (_code(ResourceType, rtype), name, _code(PatternType, pattern), principal, host, _code(AclOperation, op),
            _code(AclPermissionType, perm))


def validate_binding(b: AclBinding) -> None:
    """Kafka's checks of a new ACL (``AclControlManager.validateNewAcl`` and
    ``AclApis.handleCreateAcls``), plus LiteMQ's: the principal must be ``TYPE:NAME`` and the
    operation must be ALL or one the resource type supports (``AclEntry.supportedOperations``;
    Kafka stores such an ACL but it can never grant anything).

    Raises:
        KafkaError(INVALID_REQUEST): the reason in the message.
    """
    def bad(msg: str) -> KafkaError:
        return KafkaError(msg, ErrorCode.INVALID_REQUEST)

    if b.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
        raise bad(f"Invalid resourceType {b.resource_type.name}")
    if b.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        raise bad(f"Invalid patternType {b.pattern_type.name}")
    if b.operation in (AclOperation.UNKNOWN, AclOperation.ANY):
        raise bad(f"Invalid operation {b.operation.name}")
    if b.permission_type not in (AclPermissionType.DENY, AclPermissionType.ALLOW):
        raise bad(f"Invalid permissionType {b.permission_type.name}")
    if not b.resource_name:
        raise bad("Resource name should not be empty")
    if b.resource_type == ResourceType.CLUSTER and b.resource_name != CLUSTER_RESOURCE_NAME:
        raise bad(f"The only valid name for the CLUSTER resource is {CLUSTER_RESOURCE_NAME}")
    if b.operation != AclOperation.ALL and b.operation not in SUPPORTED_OPERATIONS[b.resource_type]:
        supported = ", ".join(sorted(op.name for op in SUPPORTED_OPERATIONS[b.resource_type]))
        raise bad(f"ResourceType {b.resource_type.name} only supports operations ALL, {supported}")
    try:
        KafkaPrincipal.parse(b.principal)
    except ValueError as exc:
        raise bad(str(exc)) from None


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    """A DescribeAcls / DeleteAcls filter; ``None`` strings and ANY codes match everything."""

    resource_type: ResourceType
    resource_name: str | None
    pattern_type: PatternType
    principal: str | None
    host: str | None
    operation: AclOperation
    permission_type: AclPermissionType

    def to_row(self) -> list:
        return _to_row(self)

    @classmethod
    def from_row(cls, row) -> AclBindingFilter:
        """Raises ValueError: not 7 items, or a non-null string field that is not a string."""
        return cls(*_from_row(row, "ACL filter", nullable=True))

    def is_unknown(self) -> bool:
        """True when a field is UNKNOWN: such a filter is rejected (INVALID_REQUEST)."""
        return UNKNOWN_CODE in (self.resource_type, self.pattern_type, self.operation, self.permission_type)

    def matches(self, b: AclBinding) -> bool:
        """Kafka ``AclBindingFilter.matches`` (``ResourcePatternFilter`` + ``AccessControlEntryFilter``)."""
        if self.resource_type != ResourceType.ANY and self.resource_type != b.resource_type:
            return False
        pt = self.pattern_type
        if pt not in (PatternType.ANY, PatternType.MATCH) and pt != b.pattern_type:
            return False
        name = self.resource_name
        if name is not None:
            if pt == PatternType.ANY or pt == b.pattern_type:
                if name != b.resource_name:
                    return False
            elif b.pattern_type == PatternType.LITERAL:  # MATCH
                if name != b.resource_name and b.resource_name != WILDCARD_RESOURCE:
                    return False
            elif not name.startswith(b.resource_name):  # MATCH against a PREFIXED pattern
                return False
        if self.principal is not None and self.principal != b.principal:
            return False
        if self.host is not None and self.host != b.host:
            return False
        if self.operation != AclOperation.ANY and self.operation != b.operation:
            return False
        return self.permission_type == AclPermissionType.ANY or self.permission_type == b.permission_type


UNKNOWN_CODE = 0
"""UNKNOWN is 0 in every ACL enum."""

ANY_FILTER = AclBindingFilter(ResourceType.ANY, None, PatternType.ANY, None, None, AclOperation.ANY,
                              AclPermissionType.ANY)
"""Matches every binding (``AclBindingFilter.ANY``)."""


class AclStore:
    """The ACL set of a cluster, indexed for the authorizer (every request asks it).

    - literal bindings by ``(resource_type, name)`` (the wildcard ``*`` is one such name);
    - prefixed bindings by resource type, then prefix, with the distinct prefix lengths kept
      per resource type, so the prefixes of a name are found with one dict lookup per length.

    :meth:`matching` is O(number of distinct prefix lengths + matches). Insertion order is kept
    (DescribeAcls answers in it). Mutations happen on the event-loop thread only.
    """

    def __init__(self) -> None:
        self._all: dict[AclBinding, None] = {}
        self._literal: dict[tuple[int, str], list[AclBinding]] = {}
        self._prefixed: dict[int, dict[str, list[AclBinding]]] = {}
        self._prefix_lengths: dict[int, dict[int, int]] = {}  # rtype -> length -> count of prefixes
        self._sorted_lengths: dict[int, tuple[int, ...]] = {}

    def __len__(self) -> int:
        return len(self._all)

    def __iter__(self) -> Iterator[AclBinding]:
        return iter(list(self._all))

    def __contains__(self, b: AclBinding) -> bool:
        return b in self._all

    def add(self, b: AclBinding) -> bool:
        """Add ``b``; False when it was already there."""
        if b in self._all:
            return False
        self._all[b] = None
        rt = int(b.resource_type)
        if b.pattern_type == PatternType.PREFIXED:
            by_prefix = self._prefixed.setdefault(rt, {})
            bucket = by_prefix.get(b.resource_name)
            if bucket is None:
                bucket = by_prefix[b.resource_name] = []
                lengths = self._prefix_lengths.setdefault(rt, {})
                lengths[len(b.resource_name)] = lengths.get(len(b.resource_name), 0) + 1
                self._sorted_lengths[rt] = tuple(sorted(lengths))
            bucket.append(b)
        else:
            self._literal.setdefault((rt, b.resource_name), []).append(b)
        return True

    def remove(self, b: AclBinding) -> bool:
        """Remove ``b``; False when it was not there."""
        if b not in self._all:
            return False
        del self._all[b]
        rt = int(b.resource_type)
        if b.pattern_type == PatternType.PREFIXED:
            by_prefix = self._prefixed[rt]
            bucket = by_prefix[b.resource_name]
            bucket.remove(b)
            if not bucket:
                del by_prefix[b.resource_name]
                lengths = self._prefix_lengths[rt]
                n = len(b.resource_name)
                lengths[n] -= 1
                if not lengths[n]:
                    del lengths[n]
                    self._sorted_lengths[rt] = tuple(sorted(lengths))
        else:
            key = (rt, b.resource_name)
            bucket = self._literal[key]
            bucket.remove(b)
            if not bucket:
                del self._literal[key]
        return True

    def matching(self, resource_type: int, name: str) -> list[AclBinding]:
        """Every binding whose resource pattern matches the resource ``(resource_type, name)``:
        literal ``name``, literal ``*``, and every prefix of ``name`` (Kafka
        ``StandardAuthorizerData.findAclRule``)."""
        rt = int(resource_type)
        out: list[AclBinding] = []
        lit = self._literal.get((rt, name))
        if lit:
            out.extend(lit)
        if name != WILDCARD_RESOURCE:
            wild = self._literal.get((rt, WILDCARD_RESOURCE))
            if wild:
                out.extend(wild)
        lengths = self._sorted_lengths.get(rt)
        if lengths:
            by_prefix = self._prefixed[rt]
            n = len(name)
            for length in lengths:
                if length > n:
                    break
                bucket = by_prefix.get(name[:length])
                if bucket:
                    out.extend(bucket)
        return out

    def of_type(self, resource_type: int) -> list[AclBinding]:
        """Every binding on resources of ``resource_type`` (``authorizeByResourceType``)."""
        rt = int(resource_type)
        return [b for b in self._all if b.resource_type == rt]

    def select(self, flt: AclBindingFilter) -> list[AclBinding]:
        """Bindings matching ``flt``, in insertion order."""
        return [b for b in self._all if flt.matches(b)]

    # ------------------------------------------------------------ persistence
    def to_json(self) -> list[list]:
        return [b.to_row() for b in self._all]

    @classmethod
    def from_json(cls, rows: Iterable) -> AclStore:
        store = cls()
        for row in rows or ():
            store.add(AclBinding.from_row(row))
        return store
