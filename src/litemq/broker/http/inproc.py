"""Kafka API calls made by the HTTP layer: in process, or on another broker over the RPC port.

The REST API and the console never open a Kafka client connection. A call is one Kafka request
body (a dict, Kafka schema field names in snake_case) run through the broker's own handler for
that API, exactly as if it had arrived on a listener: the request is encoded and decoded with the
generated codec, the handler checks ACLs against the HTTP caller's principal, and the response is
encoded and decoded back into a message object. When the request belongs on another broker (the
partition leader, the group coordinator), the encoded request goes there over the broker RPC
port (op ``api``, :func:`register_rpc_ops`) and that broker runs its handler the same way.

Only the read/produce APIs the HTTP layer needs may be forwarded (:data:`FORWARDABLE_APIS`).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
from typing import TYPE_CHECKING, Any

from litemq import limits
from litemq.broker.context import RequestContext
from litemq.protocol import frames
from litemq.protocol.errors import DecodeError, ErrorCode
from litemq.protocol.messages import request_spec, response_spec
from litemq.security.principal import ANONYMOUS, KafkaPrincipal

if TYPE_CHECKING:
    from litemq.broker.http.runtime import HttpRuntime

PRODUCE, FETCH, LIST_OFFSETS, OFFSET_FETCH, DESCRIBE_GROUPS, LIST_GROUPS = 0, 1, 2, 9, 15, 16
SHARE_GROUP_DESCRIBE, DESCRIBE_SHARE_GROUP_OFFSETS = 77, 90
CONSUMER_GROUP_DESCRIBE = 69
DESCRIBE_ACLS, DESCRIBE_CONFIGS = 29, 32
LIST_PARTITION_REASSIGNMENTS = 46
VERSIONS = {PRODUCE: 9, FETCH: 12, LIST_OFFSETS: 7, OFFSET_FETCH: 7, DESCRIBE_GROUPS: 5, LIST_GROUPS: 4,
            SHARE_GROUP_DESCRIBE: 1, DESCRIBE_SHARE_GROUP_OFFSETS: 0, LIST_PARTITION_REASSIGNMENTS: 0,
            CONSUMER_GROUP_DESCRIBE: 0, DESCRIBE_ACLS: 3, DESCRIBE_CONFIGS: 4}
"""The version the HTTP layer uses of each API (the newest without topic ids / group batches)."""
FORWARDABLE_APIS = frozenset(VERSIONS)
"""APIs another broker may ask this one to run for an HTTP caller (op ``api``)."""
CLIENT_ID = "litemq-http"


class PeerUnavailable(Exception):
    """The broker that must answer (leader, coordinator) is unknown, down or did not answer."""


class HttpCaller:
    """Stands in for a client connection in the handler context of an HTTP request: who is
    asking (``principal``, ``client_host``) for the ACL checks, and the listener whose
    endpoints answers name (the broker's first listener)."""

    security_protocol = "PLAINTEXT"
    peer = "http"

    def __init__(self, runtime: "HttpRuntime", principal: KafkaPrincipal = ANONYMOUS,
                 client_host: str = "127.0.0.1") -> None:
        self.principal = principal
        self.client_host = client_host
        self.listener_name = runtime.listeners[0].name


async def call_api(runtime: "HttpRuntime", api_key: int, body: dict, *, node_id: int | None = None,
                   caller: HttpCaller | None = None) -> Any:
    """Run one Kafka request on broker ``node_id`` (None or this broker: in process).

    Args:
        api_key: one of :data:`FORWARDABLE_APIS`, sent at :data:`VERSIONS` ``[api_key]``.
        body: the request body as a dict (Kafka field names, snake_case).
        caller: who asks (principal and host for ACLs); ``User:ANONYMOUS`` by default.
    Returns:
        the decoded response message (attribute access, Kafka field names), or None for an
        acks=0 produce.
    Raises:
        PeerUnavailable: ``node_id`` is another broker that is not connected or did not answer
            within :data:`limits.HTTP_PEER_TIMEOUT_MS`, or answered an error.
        ValueError: ``body`` does not encode at that version.
    """
    caller = caller or HttpCaller(runtime)
    version = VERSIONS[api_key]
    request = request_spec(api_key).encode(body, version)
    if node_id is None or node_id == runtime.config.node_id or runtime.cluster is None:
        raw = await run_local(runtime, api_key, version, request, caller)
    else:
        raw = await _forward(runtime, node_id, api_key, version, request, caller)
    if raw is None:
        return None
    msg, _ = response_spec(api_key).decode(raw, version)
    return msg


async def run_local(runtime: "HttpRuntime", api_key: int, version: int, request: bytes,
                    caller: HttpCaller) -> bytes | None:
    """Decode ``request`` and run this broker's handler for it; the encoded response body.

    Raises:
        DecodeError: ``request`` is not a valid body of that API version.
    """
    msg, _ = request_spec(api_key).decode(request, version)
    header = frames.RequestHeader(api_key, version, 0, CLIENT_ID)
    result = runtime.handlers[api_key](RequestContext(header, caller, runtime), msg)
    if asyncio.isfuture(result) or asyncio.iscoroutine(result):  # produce acks=all answers a future
        result = await result
    if result is None:
        return None
    return response_spec(api_key).encode(result, version)


async def _forward(runtime, node_id: int, api_key: int, version: int, request: bytes, caller: HttpCaller) -> bytes | None:
    req = {"op": "api", "api_key": api_key, "version": version, "request": base64.b64encode(request).decode(),
           "principal": str(caller.principal), "client_host": caller.client_host}
    try:
        res = await runtime.cluster.transport.rpc(node_id, req, limits.HTTP_PEER_TIMEOUT_MS / 1000)
    except (TimeoutError, ConnectionError, OSError) as exc:
        raise PeerUnavailable(f"broker {node_id} did not answer: {str(exc) or type(exc).__name__}") from None
    if not isinstance(res, dict) or "error" in res:
        raise PeerUnavailable(f"broker {node_id} refused the request: {res.get('message') if isinstance(res, dict) else res}")
    response = res.get("response")
    if response is None:
        return None
    try:
        return base64.b64decode(response, validate=True)
    except (binascii.Error, TypeError, ValueError):
        raise PeerUnavailable(f"broker {node_id} sent an undecodable answer") from None


async def _serve_api(runtime: "HttpRuntime", peer_id: int, req: dict) -> dict:
    """RPC op ``api``: run a forwarded HTTP-layer request here (see the module docstring)."""
    try:
        api_key, version = int(req["api_key"]), int(req["version"])
        if api_key not in FORWARDABLE_APIS or version != VERSIONS[api_key]:
            raise ValueError(f"api {api_key} v{version} cannot be forwarded")
        encoded = str(req["request"])
        if len(encoded) > limits.MAX_RPC_JSON_BYTES:
            raise ValueError("request too large")
        request = base64.b64decode(encoded, validate=True)
        caller = HttpCaller(runtime, KafkaPrincipal.parse(str(req.get("principal") or ANONYMOUS)),
                            str(req.get("client_host") or "?")[:256])
        raw = await run_local(runtime, api_key, version, request, caller)
    except (KeyError, TypeError, ValueError, binascii.Error, DecodeError) as exc:
        return {"error": ErrorCode.INVALID_REQUEST, "message": f"bad api request from broker {peer_id}: {exc}"}
    return {"response": None if raw is None else base64.b64encode(raw).decode()}


async def _serve_counters(runtime: "HttpRuntime", peer_id: int, req: dict) -> dict:
    """RPC op ``http_counters``: this broker's cumulative traffic counters (console charts)."""
    return runtime.metrics.throughput()


def register_rpc_ops(runtime: "HttpRuntime") -> None:
    """Offer ops ``api`` and ``http_counters`` on this broker's RPC port (cluster mode)."""
    if runtime.cluster is None:
        return
    runtime.cluster.rpc_ops["api"] = lambda peer, req: _serve_api(runtime, peer, req)
    runtime.cluster.rpc_ops["http_counters"] = lambda peer, req: _serve_counters(runtime, peer, req)


async def peer_counters(runtime: "HttpRuntime") -> dict[int, dict]:
    """Node id -> :meth:`BrokerMetrics.throughput` of every live broker that answers in time."""
    out = {runtime.config.node_id: runtime.metrics.throughput()}
    cluster = runtime.cluster
    if cluster is None:
        return out
    peers = [n for n in sorted(cluster.live_brokers) if n != runtime.config.node_id]

    async def ask(n: int):
        try:
            return n, await cluster.transport.rpc(n, {"op": "http_counters"}, limits.HTTP_PEER_TIMEOUT_MS / 1000)
        except (TimeoutError, ConnectionError, OSError):
            return n, None

    for n, res in await asyncio.gather(*(ask(n) for n in peers)):
        if isinstance(res, dict) and "error" not in res:
            out[n] = res
    return out
