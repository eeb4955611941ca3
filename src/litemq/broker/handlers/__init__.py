"""Request handlers, one module per API family. ``register_all`` wires them into a runtime.

A handler is ``handler(ctx, request) -> body | Awaitable[body] | None`` where ``ctx`` is a
:class:`~litemq.broker.context.RequestContext` and ``body`` a dict (or generated message) that
:mod:`litemq.protocol` encodes at the request's version.
"""

from __future__ import annotations

from typing import Any, Callable, Protocol


class HandlerRegistry(Protocol):
    """Where handlers are registered: the broker runtime (``BrokerRuntime.register``). Typed here
    so this package does not import ``broker.py``, which imports it; each handler reaches the
    runtime's state through its request context (``ctx.runtime``)."""

    def register(self, api_key: int, handler: Callable[..., Any], min_version: int | None = None,
                 max_version: int | None = None) -> None:
        """Serve ``api_key`` with ``handler``; advertise ``[min_version, max_version]`` clipped to
        the schema's range (the schema's full range when None)."""


def register_all(runtime: HandlerRegistry) -> None:
    """Register every API this broker serves, with the version ranges it advertises (and create
    the group and transaction coordinators, which the group and txn modules own)."""
    from litemq.broker.handlers import admin, core, fetch, produce, quorum, reassign, security_admin, telemetry

    core.register(runtime)
    produce.register(runtime)
    fetch.register(runtime)
    admin.register(runtime)
    reassign.register(runtime)
    quorum.register(runtime)
    from litemq.broker.handlers import sasl

    sasl.register(runtime)
    security_admin.register(runtime)
    telemetry.register(runtime)
    try:
        from litemq.broker.handlers import groups
    except ImportError:  # the group coordinator is optional until it lands
        return
    groups.register(runtime)
    from litemq.broker.handlers import share, txn

    share.register(runtime)

    txn.register(runtime)
