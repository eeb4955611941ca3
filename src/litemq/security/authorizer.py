"""The ACL authorizer: Kafka's ``StandardAuthorizer`` semantics over the ACLs in the cluster metadata.

Enabled by a non-empty ``authorizer.class.name`` (any value: LiteMQ has one authorizer, so
Kafka's ``org.apache.kafka.metadata.authorizer.StandardAuthorizer`` works unchanged in a
copied ``server.properties``). Rules, in order (Kafka 3.9 ``StandardAuthorizerData``):

1. a principal listed in ``super.users`` (``User:admin;User:bob``) may do everything;
2. the ACLs whose resource pattern matches the resource are collected: LITERAL with the same
   name, LITERAL ``*``, and PREFIXED with a prefix of the name (KIP-290);
3. of those, an ACL applies when its principal is the caller's or ``User:*``, its host is the
   caller's address or ``*``, and its operation is the requested one or ALL; an ALLOW ACL
   for READ, WRITE, DELETE or ALTER also grants DESCRIBE, one for ALTER_CONFIGS also grants
   DESCRIBE_CONFIGS (a DENY ACL implies nothing);
4. any applicable DENY denies; otherwise any applicable ALLOW allows;
5. otherwise, when *no* ACL matched the resource at all, ``allow.everyone.if.no.acl.found``
   decides (default false); when some did (for other principals or operations), deny.

The live ACL set is read on every call from the metadata (``runtime.metadata.acls``: the single
broker's ``ClusterMetadata`` or the cluster's ``MetadataImage``, which a snapshot may replace),
so an ACL change applies to the next request. Lookups are indexed
(:class:`~litemq.security.acls.AclStore`).
"""

from __future__ import annotations

from collections.abc import Callable

from litemq.security.acl_operations import (
    SUPPORTED_OPERATIONS,
    AclOperation,
    ResourceType,
    to_bitfield,
)
from litemq.security.acls import (
    WILDCARD_HOST,
    WILDCARD_PRINCIPAL,
    WILDCARD_RESOURCE,
    AclBinding,
    AclBindingFilter,
    AclPermissionType,
    AclStore,
    PatternType,
)

_ALL = AclOperation.ALL
_DENY = AclPermissionType.DENY
IMPLIES_DESCRIBE = frozenset({AclOperation.DESCRIBE, AclOperation.READ, AclOperation.WRITE, AclOperation.DELETE,
                              AclOperation.ALTER})
"""Operations whose ALLOW ACL also allows DESCRIBE."""
IMPLIES_DESCRIBE_CONFIGS = frozenset({AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS})
"""Operations whose ALLOW ACL also allows DESCRIBE_CONFIGS."""


def parse_super_users(text: str) -> frozenset[str]:
    """``"User:admin; User:bob"`` -> {"User:admin", "User:bob"} (Kafka splits on ``;``)."""
    return frozenset(p.strip() for p in (text or "").split(";") if p.strip())


class StandardAuthorizer:
    """Authorizes (principal, host, operation, resource) against the live ACL set.

    Args:
        acls: returns the current :class:`AclStore` (called on every check).
        super_users: principals as ``User:name`` strings.
        allow_everyone_if_no_acl_found: the answer when no ACL matches the resource.
    """

    def __init__(self, acls: Callable[[], AclStore], super_users: frozenset[str] = frozenset(),
                 allow_everyone_if_no_acl_found: bool = False) -> None:
        self._acls = acls
        self.super_users = frozenset(super_users)
        self.allow_everyone_if_no_acl_found = bool(allow_everyone_if_no_acl_found)

    # ------------------------------------------------------------ checks
    def authorize(self, principal, host: str, operation: AclOperation, resource_type: ResourceType,
                  name: str) -> bool:
        """True when ``principal`` (a KafkaPrincipal or ``"User:x"``) connecting from ``host``
        may perform ``operation`` on the resource ``(resource_type, name)`` (rules in the module
        docstring)."""
        p = str(principal)
        if p in self.super_users:
            return True
        return self._decide(self._acls().matching(resource_type, name), p, host, operation)

    def authorized_operations(self, principal, host: str, resource_type: ResourceType, name: str) -> int:
        """KIP-430 bitfield (bit ``1 << code``) of the operations Kafka supports on the resource
        type that the caller may perform on the resource (Kafka ``AuthHelper.authorizedOperations``)."""
        supported = SUPPORTED_OPERATIONS[ResourceType(resource_type)]
        p = str(principal)
        if p in self.super_users:
            return to_bitfield(supported)
        matching = self._acls().matching(resource_type, name)
        return to_bitfield(op for op in supported if self._decide(matching, p, host, op))

    def authorize_by_resource_type(self, principal, host: str, operation: AclOperation,
                                   resource_type: ResourceType) -> bool:
        """True when the caller may perform ``operation`` on at least one resource of the type
        (Kafka ``Authorizer.authorizeByResourceType``, KIP-679): allowed on an arbitrary name
        (super users, no ACLs with allow.everyone), or an ALLOW ACL for the operation (or ALL)
        on a pattern that no DENY ACL covers (a literal or wildcard DENY of the same name, a
        DENY prefix of the allowed name; a wildcard DENY denies all).

        Raises:
            ValueError: ``operation`` or ``resource_type`` is ANY or UNKNOWN.
        """
        if operation in (AclOperation.ANY, AclOperation.UNKNOWN) or \
                resource_type in (ResourceType.ANY, ResourceType.UNKNOWN):
            raise ValueError(f"authorize_by_resource_type needs a concrete operation and resource type, "
                             f"got {operation!r} on {resource_type!r}")
        if self.authorize(principal, host, operation, resource_type, "hardcode"):
            return True
        p = str(principal)
        deny: dict[PatternType, set[str]] = {PatternType.LITERAL: set(), PatternType.PREFIXED: set()}
        allow: dict[PatternType, set[str]] = {PatternType.LITERAL: set(), PatternType.PREFIXED: set()}
        wildcard_allow = False
        for b in self._acls().of_type(resource_type):
            if b.host != host and b.host != WILDCARD_HOST:
                continue
            if b.principal != p and b.principal != WILDCARD_PRINCIPAL:
                continue
            if b.operation != operation and b.operation != _ALL:
                continue
            if b.permission_type == _DENY:
                if b.pattern_type == PatternType.LITERAL and b.resource_name == WILDCARD_RESOURCE:
                    return False
                deny[b.pattern_type].add(b.resource_name)
            elif b.pattern_type == PatternType.LITERAL and b.resource_name == WILDCARD_RESOURCE:
                wildcard_allow = True
            else:
                allow[b.pattern_type].add(b.resource_name)
        if wildcard_allow:
            return True
        denied_prefixes = deny[PatternType.PREFIXED]
        for pattern_type, names in allow.items():
            for name in names:
                if pattern_type == PatternType.LITERAL and name in deny[PatternType.LITERAL]:
                    continue
                if not any(name[:i] in denied_prefixes for i in range(1, len(name) + 1)):
                    return True
        return False

    def acls(self, flt: AclBindingFilter) -> list[AclBinding]:
        """The bindings matching ``flt`` (DescribeAcls)."""
        return self._acls().select(flt)

    # ------------------------------------------------------------ rule
    def _decide(self, matching: list[AclBinding], principal: str, host: str, operation: AclOperation) -> bool:
        allowed = False
        for acl in matching:
            if acl.principal != principal and acl.principal != WILDCARD_PRINCIPAL:
                continue
            if acl.host != host and acl.host != WILDCARD_HOST:
                continue
            op = acl.operation
            if acl.permission_type == _DENY:
                if op == operation or op == _ALL:
                    return False
            elif not allowed:
                allowed = (op == operation or op == _ALL
                           or (operation == AclOperation.DESCRIBE and op in IMPLIES_DESCRIBE)
                           or (operation == AclOperation.DESCRIBE_CONFIGS and op in IMPLIES_DESCRIBE_CONFIGS))
        if allowed:
            return True
        return not matching and self.allow_everyone_if_no_acl_found


def create_authorizer(runtime) -> StandardAuthorizer | None:
    """The authorizer of a broker runtime: None unless ``authorizer.class.name`` is set.

    The ACLs come from ``runtime.metadata.acls`` at every check (the metadata object can be
    replaced by a snapshot in cluster mode).
    """
    cfg = runtime.config
    if not (cfg.authorizer_class_name or "").strip():
        return None
    return StandardAuthorizer(lambda: runtime.metadata.acls, parse_super_users(cfg.super_users),
                              cfg.allow_everyone_if_no_acl_found)


Authorizer = StandardAuthorizer
"""The authorizer interface the broker's ``authz`` helper calls."""
