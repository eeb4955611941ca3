"""Client metrics (KIP-714): GetTelemetrySubscriptions (71), PushTelemetry (72),
ListClientMetricsResources (74).

GetTelemetrySubscriptions and PushTelemetry are served (and advertised) only with
``client.telemetry.enable=true``; they need no ACL, as in Kafka. The work is done by
:class:`~litemq.broker.client_telemetry.ClientTelemetryManager`, given the client's attributes
(client id, the software name and version its ApiVersions v3+ told, source address and port).
ListClientMetricsResources lists the subscription names (the CLIENT_METRICS config resources,
:mod:`litemq.security.client_metrics`); it needs DESCRIBE_CONFIGS on the cluster
(CLUSTER_AUTHORIZATION_FAILED otherwise).

Sources: KIP-714; Kafka 4.x ``KafkaApis.handleGetTelemetrySubscriptionsRequest``,
``handlePushTelemetryRequest``, ``handleListClientMetricsResources``.
"""

from __future__ import annotations

from litemq.broker.authz import authorize
from litemq.protocol.errors import ErrorCode
from litemq.security.acl_operations import AclOperation, ResourceType
from litemq.security.client_metrics import (
    CLIENT_ID,
    CLIENT_SOFTWARE_NAME,
    CLIENT_SOFTWARE_VERSION,
    CLIENT_SOURCE_ADDRESS,
    CLIENT_SOURCE_PORT,
)


def client_attributes(ctx) -> dict[str, str | None]:
    """What client metrics subscriptions match on, from the request and its connection."""
    conn = ctx.connection
    name, version = getattr(conn, "client_software", None) or (None, None)
    peer = str(getattr(conn, "peer", ""))
    return {CLIENT_ID: ctx.client_id or "", CLIENT_SOFTWARE_NAME: name, CLIENT_SOFTWARE_VERSION: version,
            CLIENT_SOURCE_ADDRESS: getattr(conn, "client_host", None),
            CLIENT_SOURCE_PORT: peer.rsplit(":", 1)[1] if ":" in peer else None}


def handle_get_telemetry_subscriptions(ctx, req) -> dict:
    return ctx.runtime.client_telemetry.get_subscriptions(req.client_instance_id, client_attributes(ctx),
                                                          ctx.connection)


def handle_push_telemetry(ctx, req) -> dict:
    return ctx.runtime.client_telemetry.push(req, client_attributes(ctx), ctx.connection)


def handle_list_client_metrics_resources(ctx, req) -> dict:
    if not authorize(ctx, AclOperation.DESCRIBE_CONFIGS, ResourceType.CLUSTER):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                "client_metrics_resources": []}
    names = sorted(ctx.runtime.metadata.client_metrics.subscriptions)
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE,
            "client_metrics_resources": [{"name": n} for n in names]}


def register(runtime) -> None:
    if getattr(runtime, "client_telemetry", None) is not None:
        runtime.register(71, handle_get_telemetry_subscriptions)
        runtime.register(72, handle_push_telemetry)
    runtime.register(74, handle_list_client_metrics_resources)
