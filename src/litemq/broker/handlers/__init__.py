"""Request handlers, one module per API family. ``register_all`` wires them into a runtime.

A handler is ``handler(ctx, request) -> body | Awaitable[body] | None`` where ``ctx`` is a
:class:`~litemq.broker.server.RequestContext` and ``body`` a dict (or generated message) that
:mod:`litemq.protocol` encodes at the request's version.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from litemq.broker.broker import BrokerRuntime


def register_all(runtime: "BrokerRuntime") -> None:
    """Register every API this broker serves, with the version ranges it advertises."""
    from litemq.broker.handlers import admin, core, fetch, produce, security_admin

    core.register(runtime)
    produce.register(runtime)
    fetch.register(runtime)
    admin.register(runtime)
    from litemq.broker.handlers import sasl

    sasl.register(runtime)
    security_admin.register(runtime)
    try:
        from litemq.broker.handlers import groups
    except ImportError:  # the group coordinator is optional until it lands
        return
    groups.register(runtime)
    from litemq.broker.handlers import txn

    txn.register(runtime)
