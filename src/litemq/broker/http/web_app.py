"""The aiohttp application of the broker's HTTP port (:mod:`litemq.broker.http.app` starts it).

Imported only by a broker whose ``http.listen`` is on, so a broker without an HTTP port does not
load aiohttp. ``build_app`` wires ``/metrics``, the console, the REST API and the schema registry
behind one middleware that authenticates (``Authorization: Basic`` or ``Bearer``, :func:`authenticate`), turns
errors under ``/v3``, ``/console/api`` and the registry's paths into JSON and counts every answer
in the HTTP metrics.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import logging
from typing import TYPE_CHECKING

from aiohttp import web

from litemq import limits
from litemq.broker.handlers.sasl import oauthbearer_validators, plain_user_sets
from litemq.broker.http import views
from litemq.broker.http.console import Console
from litemq.broker.http.rest import RUNTIME_KEY, RestApi, RestError
from litemq.broker.http.schema_registry_api import PATH_PREFIXES as REGISTRY_PATHS
from litemq.broker.http.schema_registry_api import SchemaRegistryApi
from litemq.metrics import CONTENT_TYPE
from litemq.security.oauthbearer import TokenValidationError
from litemq.security.principal import KafkaPrincipal
from litemq.security.sasl import (
    PlainAuthenticator,
    SaslAuthenticationException,
    SaslCredentialsError,
    lookup_scram,
)

if TYPE_CHECKING:
    from litemq.broker.http.runtime import HttpRuntime

log = logging.getLogger(__name__)


async def authenticate(runtime: "HttpRuntime", header: str | None) -> KafkaPrincipal | None:
    """The principal an ``Authorization`` header proves: None without a Basic or Bearer header.

    ``Bearer`` (RFC 6750): an OAuth token, accepted when one of the OAUTHBEARER validators of the
    SASL listeners accepts it (:func:`oauthbearer_validators`); the principal is the token's, as
    on the Kafka port. It is checked on every request, so an expired token stops working at once.

    The user and password are checked as a SASL/PLAIN exchange (RFC 4616) is, once per distinct
    PLAIN JAAS user map of the listeners (:func:`plain_user_sets`): against its users, then SCRAM
    credentials (PBKDF2 in the broker's thread pool); one listener accepting is enough.

    Raises:
        RestError(401): a malformed Basic header, a wrong user name or password, a Bearer token
            no validator accepts or a broker with no OAUTHBEARER listener.
    """
    if header and header[:7].lower() == "bearer ":
        return await _authenticate_bearer(runtime, header[7:].strip())
    if not header or header[:6].lower() != "basic ":
        return None
    try:
        user, sep, password = base64.b64decode(header[6:].strip(), validate=True).decode("utf-8").partition(":")
    except (binascii.Error, ValueError):
        raise RestError(401, "Authorization: Basic needs base64 of user:password") from None
    if not sep or not user or "\0" in user or "\0" in password:
        raise RestError(401, "Authorization: Basic needs base64 of user:password")
    try:
        user_sets = plain_user_sets(runtime.config)
    except ValueError:
        user_sets = [{}]
    token = f"\0{user}\0{password}".encode()

    def check() -> bool:
        for users in user_sets:
            auth = PlainAuthenticator(users, lambda name, mechanism: lookup_scram(runtime, name, mechanism))
            try:
                auth.evaluate(token)
            except (SaslAuthenticationException, SaslCredentialsError):
                continue
            return True
        return False

    if not await asyncio.get_running_loop().run_in_executor(runtime.executor, check):
        raise RestError(401, "Authentication failed: Invalid username or password")
    return KafkaPrincipal("User", user)


async def _authenticate_bearer(runtime: "HttpRuntime", token: str) -> KafkaPrincipal:
    try:
        validators = oauthbearer_validators(runtime.config)
    except ValueError:
        validators = []
    if not validators:
        raise RestError(401, "Authorization: Bearer needs a listener offering SASL/OAUTHBEARER; this broker has none")

    def check() -> str | None:
        for validator in validators:
            try:
                return validator.validate(token).principal_name
            except TokenValidationError as exc:
                log.info("HTTP bearer token rejected (%s): %s", exc.status, exc)
        return None

    name = await asyncio.get_running_loop().run_in_executor(runtime.executor, check)
    if name is None:
        raise RestError(401, "Authentication failed: invalid bearer token")
    return KafkaPrincipal("User", name)


def build_app(runtime: "HttpRuntime", anonymous_allowed: bool) -> web.Application:
    """The application: ``/metrics``, the console, the REST API (see :mod:`litemq.broker.http.app`).
    ``anonymous_allowed`` False: the REST and console data endpoints need Basic auth."""
    handlers = _Handlers(runtime, anonymous_allowed)
    app = web.Application(client_max_size=limits.HTTP_MAX_REQUEST_BODY_BYTES, middlewares=[handlers.middleware])
    app[RUNTIME_KEY] = runtime
    app.add_routes([web.get("/metrics", handlers.metrics)])
    app.add_routes(Console(runtime).routes())
    app.add_routes(RestApi(runtime).routes())
    app.add_routes(SchemaRegistryApi(runtime).routes())
    return app


class _Handlers:
    """``/metrics`` and the middleware of one broker's application."""

    def __init__(self, runtime: "HttpRuntime", anonymous_allowed: bool) -> None:
        self.runtime = runtime
        self.anonymous_allowed = anonymous_allowed

    async def metrics(self, request: web.Request) -> web.Response:
        await views.refresh_group_lag(self.runtime)
        return web.Response(body=self.runtime.metrics.render(), headers={"Content-Type": CONTENT_TYPE})

    @web.middleware
    async def middleware(self, request: web.Request, handler):
        route = request.match_info.route.resource
        template = route.canonical if route is not None else "other"
        json_errors = request.path.startswith(("/v3", "/console/api", *REGISTRY_PATHS))
        try:
            principal = await authenticate(self.runtime, request.headers.get("Authorization"))
            if principal is not None:
                request["principal"] = principal
            elif json_errors and not self.anonymous_allowed:
                raise RestError(401, "this broker's Kafka listeners require authentication: send "
                                     "Authorization: Basic (a SASL/PLAIN or SCRAM user) or Bearer (an "
                                     "OAuth token, with a SASL/OAUTHBEARER listener)")
            response = await handler(request)
        except RestError as exc:
            response = exc.response()
            if exc.status == 401:
                response.headers["WWW-Authenticate"] = 'Basic realm="LiteMQ", charset="UTF-8"'
                if (request.headers.get("Authorization") or "")[:7].lower() == "bearer ":
                    response.headers.add("WWW-Authenticate", 'Bearer realm="LiteMQ", error="invalid_token"')
        except web.HTTPException as exc:
            if not json_errors or exc.status < 400:
                self.runtime.metrics.on_http(request.method, template, exc.status)
                raise
            response = web.json_response({"error_code": exc.status, "message": exc.reason}, status=exc.status)
        except Exception as exc:  # a handler bug must not take the broker down
            log.exception("HTTP %s %s failed", request.method, request.path)
            response = web.json_response({"error_code": 500, "message": f"internal error: {exc}"}, status=500)
        self.runtime.metrics.on_http(request.method, template, response.status)
        return response
