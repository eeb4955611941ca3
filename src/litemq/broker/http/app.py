"""The broker's HTTP port: ``/metrics``, the web console and the REST API, on the broker's loop.

:class:`HttpServer` is an aiohttp application (:mod:`litemq.broker.http.web_app`, loaded only
when ``http.listen`` is on) started and stopped with its
:class:`~litemq.broker.broker.BrokerRuntime` (``http.listen``, ``litemq serve --http-listen``).
It shares the broker's event loop, so handlers read broker state directly, and Kafka requests it
makes run through the broker's handlers (:mod:`litemq.broker.http.inproc`).

- ``GET /metrics``: Prometheus text (:mod:`litemq.metrics`); group lag is refreshed first.
- ``/`` and ``/console/``: the web console (:mod:`litemq.broker.http.console`).
- ``/v3/...``: REST Proxy v3 style API (:mod:`litemq.broker.http.rest`).

Requests are ``User:ANONYMOUS`` for the ACLs, or, with an ``Authorization: Basic`` header (RFC
7617), the user whose password it proves: a user SASL/PLAIN on some Kafka listener accepts (the
listener's JAAS config in any key form, ``listener.name.<l>.plain.sasl.jaas.config`` first, see
:func:`~litemq.broker.handlers.sasl.plain_user_sets`) or a SCRAM user (KIP-554 credentials),
checked as a SASL/PLAIN exchange would be; a wrong password answers 401. Errors under ``/v3`` and
``/console/api`` are JSON ``{"error_code", "message"}``; a bug in a handler answers 500 with one
log line and the broker keeps serving.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from litemq.broker.http import reassignments
from litemq.broker.http.inproc import register_rpc_ops
from litemq.config import DEFAULT_HTTP_LISTEN, DEFAULT_HTTP_PORT, parse_host_port
from litemq.security.tls import http_server_context

if TYPE_CHECKING:
    from aiohttp import web

    from litemq.broker.http.runtime import HttpRuntime

log = logging.getLogger(__name__)

DISABLED_VALUES = ("", "off", "none", "false", "disabled")
"""``http.listen`` values that turn the HTTP port off."""


def parse_http_listen(text: str) -> tuple[str, int] | None:
    """``http.listen`` -> (host, port), or None when it is off.

    Raises:
        ValueError: naming ``http.listen``, when the value is not ``HOST:PORT`` (port 0..65535).
    """
    value = (text or "").strip()
    if value.lower() in DISABLED_VALUES:
        return None
    try:
        return parse_host_port(value, DEFAULT_HTTP_PORT)
    except ValueError as exc:
        raise ValueError(f"http.listen: bad value {value!r} ({exc}); expected HOST:PORT or off") from None


def anonymous_kafka_access(config) -> bool:
    """True when some Kafka listener accepts a client without credentials: PLAINTEXT, or SSL
    whose ``ssl.client.auth`` is not ``required``."""
    for spec in config.listener_specs():
        if spec.security_protocol == "PLAINTEXT":
            return True
        if spec.security_protocol == "SSL" and \
                config.listener_setting(spec.name, "ssl.client.auth").lower() != "required":
            return True
    return False


class HttpServer:
    """One broker's HTTP port (see the module docstring).

    Attributes:
        endpoint: (host, port) to bind, None when ``http.listen`` is off.
        port: the bound port after :meth:`start` (None when off or not bound).

    Raises:
        ValueError: a malformed ``http.listen``; ``http.ssl.enabled`` without a usable keystore.
    """

    def __init__(self, runtime: "HttpRuntime") -> None:
        self.runtime = runtime
        self.endpoint = parse_http_listen(runtime.config.http_listen)
        self._default = runtime.config.http_listen.strip() == DEFAULT_HTTP_LISTEN
        self.anonymous_allowed = anonymous_kafka_access(runtime.config)
        """False when no Kafka listener lets an unauthenticated client in (all SASL, or SSL with
        required client certificates): then the REST and console data endpoints need Basic auth
        too, so the HTTP port is no way around the listeners' authentication."""
        self.ssl_context = http_server_context(runtime.config)
        """HTTPS when ``http.ssl.enabled`` (the broker's keystore), else None (plain HTTP)."""
        self.port: int | None = None
        self._runner: web.AppRunner | None = None

    @property
    def url(self) -> str | None:
        """``http://host:port`` (``https://`` with ``http.ssl.enabled``) of the running HTTP
        port, else None."""
        if self.port is None:
            return None
        host = self.endpoint[0] or "127.0.0.1"
        if host in ("0.0.0.0", "::"):
            host = "127.0.0.1"
        scheme = "https" if self.ssl_context is not None else "http"
        return f"{scheme}://[{host}]:{self.port}" if ":" in host else f"{scheme}://{host}:{self.port}"

    async def start(self) -> None:
        """Bind and serve (nothing when off). A busy *default* address logs a warning and leaves
        the port off; any other bind failure raises OSError naming ``http.listen``."""
        register_rpc_ops(self.runtime)
        reassignments.register_rpc_ops(self.runtime)
        if self.endpoint is None:
            return
        from aiohttp import web  # only a broker that serves HTTP loads aiohttp (~0.2 s of CPU)

        from litemq.broker.http.web_app import build_app

        host, port = self.endpoint
        runner = web.AppRunner(build_app(self.runtime, self.anonymous_allowed), access_log=None,
                               handle_signals=False)
        await runner.setup()
        site = web.TCPSite(runner, host or None, port, reuse_address=True, backlog=128,
                           ssl_context=self.ssl_context)
        try:
            await site.start()
        except OSError as exc:
            await runner.cleanup()
            if self._default:
                log.warning("HTTP port off: cannot bind the default http.listen %s (%s); set http.listen "
                            "(--http-listen HOST:PORT, or off) for /metrics, the console and the REST API",
                            DEFAULT_HTTP_LISTEN, exc.strerror or exc)
                return
            raise OSError(exc.errno, f"http.listen {host}:{port}: {exc.strerror or exc}") from None
        self._runner = runner
        self.port = runner.addresses[0][1]
        self.runtime.metrics.start()
        log.info("HTTP port on %s: /metrics, console %s/console/, REST API %s/v3/clusters", self.url, self.url,
                 self.url)

    async def stop(self) -> None:
        self.runtime.metrics.stop()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
