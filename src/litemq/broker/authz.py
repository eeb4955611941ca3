"""Authorization checks for request handlers (Kafka ``AuthHelper``).

Every handler asks :func:`authorize` before acting on a resource. With no authorizer configured
(``authorizer.class.name`` empty, Kafka's default) every request is allowed.

The identity comes from the connection: ``ctx.connection.principal`` (a
:class:`~litemq.security.principal.KafkaPrincipal`) and ``ctx.connection.client_host``.

Audit log (Kafka's ``kafka.authorizer.logger``, the same logger name): every refused check of
a named resource is logged at INFO, every allowed one at DEBUG, as Kafka's
``StandardAuthorizer`` does: ``Principal = User:bob is Denied operation = WRITE from host =
127.0.0.1 on resource = ResourcePattern(resourceType=TOPIC, name=orders, patternType=LITERAL)
for request = Produce with resourceRefCount = 1``. Filtering a listing (topics a Metadata
request does not name explicitly) logs nothing, as in Kafka.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from litemq.security.acl_operations import (AUTHORIZED_OPERATIONS_OMITTED, AclOperation, ResourceType,
                                          authorized_operations as _all_supported)
from litemq.metrics import request_name
from litemq.security.principal import ANONYMOUS

if TYPE_CHECKING:
    from litemq.broker.context import RequestContext

CLUSTER_RESOURCE_NAME = "kafka-cluster"
"""The one CLUSTER resource's name in ACLs (Kafka ``Resource.CLUSTER_NAME``)."""

audit_log = logging.getLogger("kafka.authorizer.logger")
"""Kafka's authorizer audit logger (its name, so log configurations can single it out)."""


def _audit(ctx: "RequestContext", principal, host: str, operation: AclOperation, resource_type: ResourceType,
           name: str, allowed: bool) -> None:
    level = logging.DEBUG if allowed else logging.INFO
    if not audit_log.isEnabledFor(level):
        return
    header = getattr(ctx, "header", None)
    request = request_name(header.api_key) if header is not None else "unknown"
    audit_log.log(level, "Principal = %s is %s operation = %s from host = %s on resource = "
                  "ResourcePattern(resourceType=%s, name=%s, patternType=LITERAL) for request = %s with "
                  "resourceRefCount = 1", principal, "Allowed" if allowed else "Denied",
                  AclOperation(operation).name, host, ResourceType(resource_type).name, name[:255], request)


def principal_of(ctx: "RequestContext"):
    return getattr(ctx.connection, "principal", ANONYMOUS)


def host_of(ctx: "RequestContext") -> str:
    return getattr(ctx.connection, "client_host", "127.0.0.1")


def authorize(ctx: "RequestContext", operation: AclOperation, resource_type: ResourceType,
              name: str = CLUSTER_RESOURCE_NAME) -> bool:
    """True when the connection's principal may perform ``operation`` on the resource."""
    authorizer = getattr(ctx.runtime, "authorizer", None)
    if authorizer is None:
        return True
    principal, host = principal_of(ctx), host_of(ctx)
    allowed = authorizer.authorize(principal, host, operation, resource_type, name)
    _audit(ctx, principal, host, operation, resource_type, name, allowed)
    return allowed


def authorized_operations(ctx: "RequestContext", resource_type: ResourceType, name: str,
                          requested: bool = True) -> int:
    """KIP-430 bitfield of the operations the caller may perform on the resource."""
    if not requested:
        return AUTHORIZED_OPERATIONS_OMITTED
    authorizer = getattr(ctx.runtime, "authorizer", None)
    if authorizer is None:
        return _all_supported(resource_type)
    return authorizer.authorized_operations(principal_of(ctx), host_of(ctx), resource_type, name)


def authorize_by_resource_type(ctx: "RequestContext", operation: AclOperation, resource_type: ResourceType) -> bool:
    """True when the principal may perform ``operation`` on at least one resource of the type
    (Kafka ``Authorizer.authorizeByResourceType``, KIP-679: WRITE on any topic lets a producer be
    idempotent without IDEMPOTENT_WRITE on the cluster)."""
    authorizer = getattr(ctx.runtime, "authorizer", None)
    if authorizer is None:
        return True
    return authorizer.authorize_by_resource_type(principal_of(ctx), host_of(ctx), operation, resource_type)


def authorized_names(ctx: "RequestContext", operation: AclOperation, resource_type: ResourceType,
                     names) -> set[str]:
    """The subset of ``names`` the principal may perform ``operation`` on."""
    authorizer = getattr(ctx.runtime, "authorizer", None)
    if authorizer is None:
        return set(names)
    principal, host = principal_of(ctx), host_of(ctx)
    return {n for n in set(names) if authorizer.authorize(principal, host, operation, resource_type, n)}
