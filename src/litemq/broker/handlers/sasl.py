"""SaslHandshake (17) and SaslAuthenticate (36): SASL authentication of client connections.

Sources: Kafka message schemas SaslHandshakeRequest/Response v0-1 (KIP-43) and
SaslAuthenticateRequest/Response v0-2 (KIP-152; ``SessionLifetimeMs`` v1+, KIP-368); Kafka 3.9
``SaslServerAuthenticator``, ``KafkaChannel`` and ``KafkaApis.handleSaslHandshakeRequest``.

- On a SASL_PLAINTEXT or SASL_SSL listener every connection gets a
  :class:`~litemq.security.sasl.SaslSession` (:func:`new_session`); the connection asks it
  before dispatching any request (``SaslSession.refusal``) and closes on a refusal.
- SaslHandshake v0 and v1, as Kafka 4 advertises them. After a v0 handshake the exchange's
  tokens travel as raw size-prefixed frames without Kafka headers (:func:`authenticate_raw`;
  a failure closes the connection, v0 has no error field). librdkafka before 2.x needs v0 in
  the advertised range to try SASL at all (its ``SaslHandshake`` feature depends on v0), though
  it then uses v1 and SaslAuthenticate, as every current client does. Re-authentication needs v1.
- A failed handshake (UNSUPPORTED_SASL_MECHANISM) or authentication (SASL_AUTHENTICATION_FAILED)
  is answered ``connection.failed.authentication.delay.ms`` after the request, then the
  connection closes (Kafka ``Selector`` delayed close) ``limits.SASL_FAILED_AUTHENTICATION_LINGER_MS``
  after the answer is written (kafka-python drops a response that arrives together with the
  close). Frames after the failing one are not read.
- On PLAINTEXT/SSL listeners, and on an authenticated connection that cannot re-authenticate
  now, both APIs answer ILLEGAL_SASL_STATE and the connection stays open (Kafka ``KafkaApis``).
- Token evaluation (PBKDF2 for PLAIN against SCRAM users) runs in the broker's thread pool; the
  connection reads no further request until it is done, as Kafka's channel is not ready while
  its authenticator runs.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from typing import TYPE_CHECKING, Any, Protocol

from litemq import limits
from litemq.protocol.errors import ErrorCode
from litemq.security.oauthbearer import (JWT_VALIDATOR_CLASS, LEGACY_JWT_VALIDATOR_CLASS, LOGIN_MODULE,
                                         OAUTHBEARER, UNSECURED_VALIDATOR_CLASS, JwksCache, JwtValidator,
                                         UnsecuredJwsValidator, Validator)
from litemq.security.sasl import (PLAIN, SaslAuthenticationException, SaslCredentialsError, SaslSession,
                                  SaslStage, lookup_scram, make_authenticator, parse_jaas_config,
                                  parse_mechanisms, plain_users_from_jaas)

if TYPE_CHECKING:
    from litemq.config import BrokerConfig

log = logging.getLogger(__name__)

SASL_SECURITY_PROTOCOLS = frozenset({"SASL_PLAINTEXT", "SASL_SSL"})

_AUTHENTICATE_AFTER_SUCCESS = "SaslAuthenticate request received after successful authentication"
"""Kafka ``KafkaApis.handleSaslAuthenticateRequest`` message (also sent on non-SASL listeners)."""


def now_ms() -> float:
    """Monotonic milliseconds: SASL session expiry must not follow wall-clock jumps."""
    return time.monotonic() * 1000.0


# ------------------------------------------------------------------ per-listener settings
def _setting(config, listener: str | None, key: str) -> str:
    """``listener.name.<listener>.<key>`` when set, else the broker-wide ``key``."""
    getter = getattr(config, "listener_setting", None)
    if getter is not None:
        return getter(listener, key)
    value = getattr(config, key.replace(".", "_").replace("-", "_"))
    return "" if value is None else str(value)


@functools.lru_cache(maxsize=64)
def _mechanisms(text: str) -> tuple[str, ...]:
    return tuple(parse_mechanisms(text))


@functools.lru_cache(maxsize=64)
def _plain_users(text: str) -> dict[str, str]:
    return plain_users_from_jaas(text)


def enabled_mechanisms(config, listener: str | None) -> tuple[str, ...]:
    """The listener's ``sasl.enabled.mechanisms``. Raises ValueError for an unsupported one."""
    return _mechanisms(_setting(config, listener, "sasl.enabled.mechanisms"))


def plain_users(config, listener: str | None) -> dict[str, str]:
    """SASL/PLAIN users (name -> password) of a listener, from the first JAAS config set among
    ``listener.name.<l>.plain.sasl.jaas.config``, ``plain.sasl.jaas.config``,
    ``listener.name.<l>.sasl.jaas.config``, ``sasl.jaas.config``. Raises ValueError when it is
    malformed or not a PlainLoginModule."""
    for key in ("plain.sasl.jaas.config", "sasl.jaas.config"):
        text = _setting(config, listener, key)
        if text.strip():
            return _plain_users(text)
    return {}


def sasl_listeners(config) -> list[str]:
    """Upper-case names of the SASL_PLAINTEXT/SASL_SSL listeners, in configuration order (none
    for a config without listeners)."""
    specs = getattr(config, "listener_specs", None)
    return [s.name for s in specs() if s.security_protocol in SASL_SECURITY_PROTOCOLS] if specs else []


def plain_user_sets(config) -> list[dict[str, str]]:
    """The JAAS users HTTP Basic auth accepts: the distinct SASL/PLAIN user maps (name ->
    password, :func:`plain_users`) of the SASL listeners that offer PLAIN, in listener order, so
    a password is valid when SASL/PLAIN on one of them accepts it. Without SASL listeners, the
    broker-wide map (``plain.sasl.jaas.config``/``sasl.jaas.config``); never an empty list (SCRAM
    users are checked after each map). Raises ValueError as :func:`plain_users` and
    :func:`enabled_mechanisms`."""
    listeners = sasl_listeners(config)
    if not listeners:
        return [plain_users(config, None)]
    out: list[dict[str, str]] = []
    for listener in listeners:
        users = plain_users(config, listener) if PLAIN in enabled_mechanisms(config, listener) else {}
        if users not in out:
            out.append(users)
    return out


def _mechanism_setting(config, listener: str | None, mechanism: str, key: str) -> str:
    """``listener.name.<l>.<mechanism lower case>.<key>``, else ``listener.name.<l>.<key>``, else
    the broker-wide ``key`` (Kafka's order for per-mechanism SASL settings)."""
    own = getattr(config, "listener_overrides", {}).get((listener or "").upper(), {})
    value = own.get(f"{mechanism.lower()}.{key}")
    return value if value is not None else _setting(config, listener, key)


@functools.lru_cache(maxsize=64)
def _validator(handler_class: str, jaas: str, settings: tuple) -> Validator:
    if jaas.strip():
        (entry,) = parse_jaas_config(jaas)
        if entry.login_module != LOGIN_MODULE:
            raise ValueError(f"JAAS config for OAUTHBEARER names login module {entry.login_module}; "
                             f"expected {LOGIN_MODULE}")
        options = entry.options
    else:
        options = {}
    if handler_class in ("", UNSECURED_VALIDATOR_CLASS):
        return UnsecuredJwsValidator.from_jaas_options(options)
    if handler_class not in (JWT_VALIDATOR_CLASS, LEGACY_JWT_VALIDATOR_CLASS):
        raise ValueError(f"sasl.server.callback.handler.class {handler_class!r} is not supported for OAUTHBEARER "
                         f"(supported: {UNSECURED_VALIDATOR_CLASS}, {JWT_VALIDATOR_CLASS})")
    url, refresh_ms, backoff_ms, audience, issuer, sub, scope, skew_s = settings
    if not url:
        raise ValueError(f"{JWT_VALIDATOR_CLASS} needs sasl.oauthbearer.jwks.endpoint.url")
    jwks = JwksCache(url, int(refresh_ms), retry_backoff_ms=int(backoff_ms),
                     ssl_cafile=options.get("ssl.truststore.location") or None)
    return JwtValidator(jwks, tuple(a.strip() for a in audience.split(",") if a.strip()), issuer.strip(),
                        sub.strip() or "sub", scope.strip() or "scope", int(skew_s))


def oauthbearer_validator(config, listener: str | None) -> Validator:
    """The OAUTHBEARER token validator of a listener (one per distinct configuration, so its
    JWKS cache is shared by every connection):

    - ``[listener.name.<l>.oauthbearer.]sasl.server.callback.handler.class`` empty or Kafka's
      unsecured class: :class:`~litemq.security.oauthbearer.UnsecuredJwsValidator` with the
      JAAS options of ``[listener.name.<l>.]oauthbearer.sasl.jaas.config``;
    - Kafka's ``OAuthBearerValidatorCallbackHandler``:
      :class:`~litemq.security.oauthbearer.JwtValidator` with the ``sasl.oauthbearer.*`` settings.

    Raises:
        ValueError: another handler class, a JAAS config of another login module or with a bad
            option, no or a bad JWKS URL.
    """
    handler_class = _mechanism_setting(config, listener, OAUTHBEARER, "sasl.server.callback.handler.class").strip()
    own = getattr(config, "listener_overrides", {}).get((listener or "").upper(), {})
    jaas = own.get("oauthbearer.sasl.jaas.config") or _setting(config, None, "oauthbearer.sasl.jaas.config")
    settings = tuple(_mechanism_setting(config, listener, OAUTHBEARER, f"sasl.oauthbearer.{key}") for key in (
        "jwks.endpoint.url", "jwks.endpoint.refresh.ms", "jwks.endpoint.retry.backoff.ms", "expected.audience",
        "expected.issuer", "sub.claim.name", "scope.claim.name", "clock.skew.seconds"))
    return _validator(handler_class, jaas, settings)


def oauthbearer_validators(config) -> list[Validator]:
    """The distinct OAUTHBEARER validators of the SASL listeners that offer OAUTHBEARER, in
    listener order (HTTP ``Authorization: Bearer`` accepts a token one of them accepts). Raises
    ValueError as :func:`oauthbearer_validator`."""
    out: list[Validator] = []
    for listener in sasl_listeners(config):
        if OAUTHBEARER in enabled_mechanisms(config, listener):
            validator = oauthbearer_validator(config, listener)
            if validator not in out:
                out.append(validator)
    return out


def max_reauth_ms(config, listener: str | None, mechanism: str) -> int:
    """``connections.max.reauth.ms`` for ``mechanism`` on ``listener``: the first set among
    ``listener.name.<l>.<mechanism lower case>.connections.max.reauth.ms``,
    ``listener.name.<l>.connections.max.reauth.ms`` and the broker-wide value (Kafka)."""
    return int(_mechanism_setting(config, listener, mechanism, "connections.max.reauth.ms"))


def validate(config) -> None:
    """Check the SASL settings of every SASL_PLAINTEXT/SASL_SSL listener.

    Raises:
        ValueError: an unsupported mechanism, a malformed JAAS config, a negative per-listener
            ``connections.max.reauth.ms`` (the broker-wide values are checked by
            ``config.SETTING_BOUNDS``).
    """
    for listener in sasl_listeners(config):
        where = f" (listener {listener})"
        try:
            mechanisms = enabled_mechanisms(config, listener)
            if PLAIN in mechanisms:
                plain_users(config, listener)
            if OAUTHBEARER in mechanisms and isinstance(oauthbearer_validator(config, listener),
                                                        UnsecuredJwsValidator):
                log.warning("Listener %s accepts unsecured OAUTHBEARER tokens (no signature; anyone may "
                            "name any principal): for development only. Set "
                            "listener.name.%s.oauthbearer.sasl.server.callback.handler.class=%s and "
                            "sasl.oauthbearer.jwks.endpoint.url for signed tokens (KIP-768)",
                            listener, listener.lower(), JWT_VALIDATOR_CLASS)
            if any(max_reauth_ms(config, listener, m) < 0 for m in mechanisms):
                raise ValueError("connections.max.reauth.ms must be >= 0")
        except ValueError as exc:
            raise ValueError(f"{exc}{where}") from None


class SaslRuntime(Protocol):
    """What a new connection's SASL session reads of the broker runtime."""

    config: BrokerConfig
    """``sasl.enabled.mechanisms``, the JAAS PLAIN users, ``connections.max.reauth.ms``."""

    @property
    def metadata(self) -> Any:
        """The cluster metadata: ``scram_credentials`` for SCRAM (see :func:`lookup_scram`)."""


class SaslConnection(Protocol):
    """What :func:`new_session` reads of a new client connection
    (:class:`~litemq.broker.server.Connection` satisfies it structurally; declared here so this
    module does not import the server, which imports it)."""

    @property
    def runtime(self) -> SaslRuntime:
        """The broker runtime the connection belongs to."""

    @property
    def listener_name(self) -> str:
        """The listener (upper case) the connection arrived on."""

    @property
    def security_protocol(self) -> str:
        """That listener's protocol: PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL."""


def new_session(conn: SaslConnection) -> SaslSession | None:
    """The SASL state of a new connection: a :class:`SaslSession` on a SASL_PLAINTEXT/SASL_SSL
    listener, None on PLAINTEXT/SSL ones (``conn.security_protocol``, default PLAINTEXT)."""
    if getattr(conn, "security_protocol", "PLAINTEXT") not in SASL_SECURITY_PROTOCOLS:
        return None
    runtime = conn.runtime
    config = runtime.config
    listener = getattr(conn, "listener_name", None)

    def authenticator(mechanism: str):
        users = plain_users(config, listener) if mechanism == PLAIN else {}
        validator = oauthbearer_validator(config, listener) if mechanism == OAUTHBEARER else None
        return make_authenticator(mechanism, users, functools.partial(lookup_scram, runtime), validator)

    mechanisms = enabled_mechanisms(config, listener)
    return SaslSession(list(mechanisms), {m: max_reauth_ms(config, listener, m) for m in mechanisms}, authenticator)


# ------------------------------------------------------------------ handlers
def _count(conn, outcome: str) -> None:
    """Count an authentication outcome in the broker's metrics (``AUTHENTICATION_OUTCOMES``)."""
    metrics = getattr(conn.runtime, "metrics", None)
    if metrics is not None:
        metrics.on_authentication(getattr(conn, "listener_name", "") or "", outcome)


async def _evaluate(conn, session: SaslSession, token: bytes) -> bytes:
    """One token of the exchange, evaluated on the broker's thread pool; counts and logs a
    failure. Raises SaslAuthenticationException / SaslCredentialsError."""
    runtime = conn.runtime
    try:
        return await runtime.loop.run_in_executor(runtime.executor, session.evaluate, token)
    except (SaslAuthenticationException, SaslCredentialsError) as exc:
        log.info("Failed %s with %s (%s)", session.authentication_text, conn.peer, exc)
        _count(conn, "failed_reauthentication" if session.reauthenticating else "failed_authentication")
        raise


def _complete(conn, session: SaslSession) -> int:
    """After the exchange's last token: the connection's principal; returns the session
    lifetime (ms, 0 = none) for SaslAuthenticate v1+."""
    what = session.authentication_text
    _count(conn, "successful_reauthentication" if session.reauthenticating else "successful_authentication")
    if not session.reauthenticating and not session.client_supports_reauthentication:
        _count(conn, "successful_authentication_no_reauth")
    lifetime_ms = session.finish(now_ms(), time.time() * 1000.0)
    conn.principal = session.principal
    log.debug("Successful %s of %s with %s from %s; session lifetime %d ms", what, session.principal,
              session.mechanism, conn.peer, lifetime_ms)
    return lifetime_ms


async def authenticate_raw(conn, token: bytes) -> bytes | None:
    """One raw token after SaslHandshake v0 (KIP-43's original framing: a size-prefixed token,
    no Kafka header, no error field): returns the server's token, to be sent size-prefixed,
    or None when authentication failed, which the connection answers by closing after
    ``connection.failed.authentication.delay.ms`` (Kafka: a v0 client learns of a failure only
    by the close)."""
    session: SaslSession = conn.sasl_session
    try:
        out = await _evaluate(conn, session, token)
    except (SaslAuthenticationException, SaslCredentialsError):
        await asyncio.sleep(conn.runtime.config.connection_failed_authentication_delay_ms / 1000.0)
        return None
    if session.exchange_complete:
        _complete(conn, session)
    return out


async def _fail(ctx, body: dict) -> dict:
    """Answer ``body`` after the failed-authentication delay, then close the connection (the
    caller has called ``hold_requests``: nothing after the failing request is read)."""
    conn = ctx.connection
    await asyncio.sleep(ctx.runtime.config.connection_failed_authentication_delay_ms / 1000.0)
    conn.close_after_responses(limits.SASL_FAILED_AUTHENTICATION_LINGER_MS / 1000.0)
    return body


def handle_sasl_handshake(ctx, req):
    session: SaslSession | None = getattr(ctx.connection, "sasl_session", None)
    now = now_ms()
    if session is None or (session.stage is SaslStage.COMPLETE and not session.can_reauthenticate(now)) \
            or (session.stage is SaslStage.COMPLETE and ctx.version == 0):  # re-authentication needs v1
        return {"error_code": ErrorCode.ILLEGAL_SASL_STATE, "mechanisms": []}
    if session.handshake(req.mechanism, now, ctx.version):
        return {"error_code": ErrorCode.NONE, "mechanisms": session.enabled_mechanisms}
    log.info("Failed %s with %s (Unsupported SASL mechanism %r)", session.authentication_text,
             ctx.connection.peer, req.mechanism[:64])
    _count(ctx.connection, "failed_reauthentication" if session.reauthenticating else "failed_authentication")
    ctx.connection.hold_requests()
    return _fail(ctx, {"error_code": ErrorCode.UNSUPPORTED_SASL_MECHANISM, "mechanisms": session.enabled_mechanisms})


def handle_sasl_authenticate(ctx, req):
    session: SaslSession | None = getattr(ctx.connection, "sasl_session", None)
    if session is None or session.stage is not SaslStage.AUTHENTICATE:
        return {"error_code": ErrorCode.ILLEGAL_SASL_STATE, "error_message": _AUTHENTICATE_AFTER_SUCCESS,
                "auth_bytes": b""}
    # Read no further request until this step is decided (synchronously: the coroutine below
    # only starts on the next loop turn, after the connection has parsed what it buffered).
    ctx.connection.hold_requests()
    # Kafka ReauthInfo.connectedClientSupportsReauthentication: any SaslAuthenticate v1+
    session.client_supports_reauthentication |= ctx.version > 0
    return _authenticate(ctx, session, bytes(req.auth_bytes))


async def _authenticate(ctx, session: SaslSession, token: bytes) -> dict:
    conn = ctx.connection
    try:
        out = await _evaluate(conn, session, token)
    except (SaslAuthenticationException, SaslCredentialsError) as exc:
        return await _fail(ctx, {"error_code": ErrorCode.SASL_AUTHENTICATION_FAILED,
                                 "error_message": session.failure_message(exc), "auth_bytes": b""})
    body = {"error_code": ErrorCode.NONE, "error_message": None, "auth_bytes": out}
    if session.exchange_complete:
        lifetime_ms = _complete(conn, session)
        if ctx.version >= 1:
            body["session_lifetime_ms"] = lifetime_ms
    conn.release_requests()
    return body


def register(runtime) -> None:
    """Serve SaslHandshake v0-1 and SaslAuthenticate v0-2; check the SASL settings first."""
    validate(runtime.config)
    for validator in oauthbearer_validators(runtime.config):
        if isinstance(validator, JwtValidator):
            validator.jwks.prefetch()
    runtime.register(17, handle_sasl_handshake)
    runtime.register(36, handle_sasl_authenticate)
