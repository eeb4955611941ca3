"""SASL/OAUTHBEARER on the broker: parsing the client's message and validating its token.

Sources: RFC 7628 (the OAUTHBEARER SASL mechanism), KIP-255 (OAUTHBEARER in Kafka, unsecured
JWS validation), KIP-342 (SASL extensions), KIP-368 (session lifetime from the credential),
KIP-768 (validation of signed JWTs against an OAuth/OIDC provider's JWKS); Kafka 4's
``OAuthBearerSaslServer``, ``OAuthBearerClientInitialResponse``,
``OAuthBearerUnsecuredValidatorCallbackHandler``/``OAuthBearerUnsecuredJws``/
``OAuthBearerValidationUtils`` and ``OAuthBearerValidatorCallbackHandler``.

The exchange (:class:`OAuthBearerAuthenticator`):

1. The client sends ``n,[a=AUTHZID],\\x01auth=Bearer TOKEN\\x01[KEY=VALUE\\x01]...\\x01``. A
   message that does not parse fails at once with Kafka's generic credentials message.
2. A valid token completes the exchange (an empty answer). Its principal is ``User:`` + the
   token's principal claim; an authorization id, when given, must equal it.
3. An invalid token is answered (error code NONE) with RFC 7628's JSON error, e.g.
   ``{"status":"invalid_token"}``; the client then sends ``\\x01`` and the exchange fails with
   that JSON as the error message. The reason is only logged: an unauthenticated client learns
   nothing about the broker's settings.

Two validators, chosen as Kafka chooses its ``sasl.server.callback.handler.class``:

- :class:`UnsecuredJwsValidator` (Kafka's default, "not suitable for production"): an unsigned
  JWS (``alg`` ``none``, empty signature) whose principal claim (default ``sub``), ``exp`` and
  optional ``iat`` are checked against the clock, plus required scopes. This is what
  librdkafka's ``sasl.oauthbearer.config=principal=...`` sends.
- :class:`JwtValidator` (KIP-768): a signed JWT (RSA, RSA-PSS, EC or EdDSA; never ``none`` or a
  shared-secret HMAC), verified with a key of the provider's JWKS (:class:`JwksCache`), with
  ``exp`` and ``iat`` required, an optional expected issuer and audience, and a clock skew.

SASL extensions are accepted and kept, as both Kafka validators accept every extension.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import math
import re
import ssl
import threading
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from typing import Any, Callable

import jwt

from litemq import limits

log = logging.getLogger(__name__)

OAUTHBEARER = "OAUTHBEARER"
LOGIN_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
UNSECURED_VALIDATOR_CLASS = ("org.apache.kafka.common.security.oauthbearer.internals.unsecured."
                             "OAuthBearerUnsecuredValidatorCallbackHandler")
JWT_VALIDATOR_CLASS = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
LEGACY_JWT_VALIDATOR_CLASS = ("org.apache.kafka.common.security.oauthbearer.secured."
                              "OAuthBearerValidatorCallbackHandler")
"""Kafka 3.1-3.9's name of :data:`JWT_VALIDATOR_CLASS` (still accepted by Kafka 4 as deprecated)."""

KVSEP = "\x01"
_AUTHZID = re.compile(r"(?:[\x01-\x2b\x2d-\x3c\x3e-\x7f]|=2C|=3D)+")
"""RFC 5801 saslname: ASCII without ``,`` and ``=`` except as the escapes ``=2C``/``=3D``."""
_KEY = re.compile(r"[A-Za-z]+")
_VALUE = re.compile(r"[\x21-\x7E \t\r\n]+")
_AUTH = re.compile(r"(\w+) +([-_.a-zA-Z0-9]+)", re.ASCII)
SIGNED_ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA")
"""JWS algorithms a signed token may use: public-key ones only (Kafka disallows ``none``; LiteMQ
also refuses HMAC, whose "public" JWKS key would be the shared secret)."""


class TokenValidationError(Exception):
    """The token is not valid. ``str(exc)`` is logged only; the client sees :attr:`status`
    (RFC 7628 section 3.2.2: ``invalid_token``, or ``insufficient_scope`` with :attr:`scope`)."""

    def __init__(self, reason: str, status: str = "invalid_token", scope: str | None = None) -> None:
        super().__init__(reason)
        self.status = status
        self.scope = scope

    def json(self) -> str:
        """Kafka ``OAuthBearerSaslServer.jsonErrorResponse``: ``{"status":"invalid_token"}``."""
        text = f'{{"status":"{self.status}"'
        if self.scope is not None:
            text += f', "scope":"{self.scope}"'
        return text + "}"


class InitialResponseError(ValueError):
    """The client's first message is not RFC 7628's (Kafka ``SaslException``: the client gets
    the generic "invalid credentials" message)."""


@dataclass(frozen=True)
class InitialResponse:
    """RFC 7628 section 3.1 client initial response: the bearer token, the GS2 authorization
    id (``""`` if none) and the SASL extensions (KIP-342, without the reserved ``auth``)."""

    token: str
    authorization_id: str = ""
    extensions: dict[str, str] = field(default_factory=dict)


def parse_initial_response(message: bytes) -> InitialResponse:
    """``n,[a=AUTHZID],\\x01auth=Bearer TOKEN\\x01[KEY=VALUE\\x01]...\\x01`` -> its parts.

    Kafka ``OAuthBearerClientInitialResponse``: keys are letters, values printable ASCII plus
    space, tab, CR and LF, the scheme is ``Bearer`` in any case, the token is base64url
    characters and dots.

    Raises:
        InitialResponseError: anything else (not UTF-8, no GS2 header, no ``auth``, a bad pair).
    """
    try:
        text = message.decode("utf-8")
    except UnicodeDecodeError:
        raise InitialResponseError("Invalid OAUTHBEARER client first message: not UTF-8") from None
    if not text.startswith("n,"):
        raise InitialResponseError("Invalid OAUTHBEARER client first message: no GS2 header 'n,'")
    authz_part, sep, rest = text[2:].partition(",")
    if not sep:
        raise InitialResponseError("Invalid OAUTHBEARER client first message")
    authzid = ""
    if authz_part:
        if not authz_part.startswith("a=") or not _AUTHZID.fullmatch(authz_part[2:]):
            raise InitialResponseError("Invalid OAUTHBEARER client first message: bad authorization id")
        authzid = authz_part[2:].replace("=2C", ",").replace("=3D", "=")
    # rest = \x01 (key=value \x01)* \x01
    body = rest[1:-1]
    if len(rest) < 2 or rest[0] != KVSEP or rest[-1] != KVSEP or (body and body[-1] != KVSEP):
        raise InitialResponseError("Invalid OAUTHBEARER client first message")
    pairs: dict[str, str] = {}
    for item in body.split(KVSEP)[:-1] if body else []:
        key, eq, value = item.partition("=")
        if not eq or not _KEY.fullmatch(key) or not _VALUE.fullmatch(value):
            raise InitialResponseError("Invalid OAUTHBEARER client first message")
        pairs[key] = value
    auth = pairs.pop("auth", None)
    if auth is None:
        raise InitialResponseError("Invalid OAUTHBEARER client first message: 'auth' not specified")
    m = _AUTH.fullmatch(auth)
    if m is None:
        raise InitialResponseError("Invalid OAUTHBEARER client first message: invalid 'auth' format")
    if m.group(1).lower() != "bearer":
        raise InitialResponseError(f"Invalid scheme in OAUTHBEARER client first message: {m.group(1)[:32]}")
    return InitialResponse(m.group(2), authzid, pairs)


@dataclass(frozen=True)
class OAuthBearerToken:
    """A validated token (Kafka ``OAuthBearerToken``): its compact form, principal name, scope,
    expiry (``lifetime_ms``, epoch milliseconds) and issue time (``start_time_ms`` or None)."""

    value: str
    principal_name: str
    scope: frozenset[str]
    lifetime_ms: int
    start_time_ms: int | None
    claims: dict[str, Any]


def _no_constant(name: str):
    raise ValueError(f"{name} is not JSON")  # Python's json would accept NaN and Infinity


def _b64url_json(part: str, what: str) -> dict:
    try:
        raw = base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))
        value = json.loads(raw, parse_constant=_no_constant)
    except (binascii.Error, ValueError, RecursionError):
        raise TokenValidationError(f"malformed {what}: not base64url-encoded JSON") from None
    if not isinstance(value, dict):
        raise TokenValidationError(f"malformed {what}: not a JSON object")
    return value


def _number(claims: dict, name: str, required: bool) -> float | None:
    value = claims.get(name)
    if value is None:
        if required:
            raise TokenValidationError(f"No {name} claim in JWT" if name != "exp" else "No expiration time in JWT")
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TokenValidationError(f"The '{name}' claim was not of type Number: {type(value).__name__}")
    try:
        number = float(value)
    except OverflowError:
        number = math.inf
    if not math.isfinite(number) or abs(number) > limits.OAUTHBEARER_MAX_CLAIM_TIME_S:
        raise TokenValidationError(f"The '{name}' claim is out of range: {str(value)[:32]}")
    return number


def _scope(claims: dict, name: str) -> frozenset[str]:
    """Kafka ``OAuthBearerUnsecuredJws.calculateScope``: a string claim is one scope value, a
    list claim is its non-blank items."""
    value = claims.get(name)
    if value is None:
        return frozenset()
    if isinstance(value, str):
        return frozenset([value.strip()]) if value.strip() else frozenset()
    if isinstance(value, list):
        return frozenset(str(v).strip() for v in value if str(v).strip())
    raise TokenValidationError(f"The '{name}' claim was not of type String or List")


def _principal(claims: dict, name: str) -> str:
    value = claims.get(name)
    if value is None:
        raise TokenValidationError(f"Required claim missing: {name}")
    if not isinstance(value, str):
        raise TokenValidationError(f"The '{name}' claim was not of type String: {type(value).__name__}")
    if not value.strip():
        raise TokenValidationError(f"No principal name in JWT claim: {name}")
    return value


def _ms(seconds: float) -> int:
    return round(seconds * 1000)


@dataclass
class UnsecuredJwsValidator:
    """Kafka's default OAUTHBEARER validator (``OAuthBearerUnsecuredValidatorCallbackHandler``,
    KIP-255): for development only, since anyone can write such a token.

    Options are the JAAS options of the listener's OAuthBearerLoginModule:
    ``unsecuredValidatorPrincipalClaimName`` (default ``sub``),
    ``unsecuredValidatorScopeClaimName`` (default ``scope``), ``unsecuredValidatorRequiredScope``
    (space-delimited) and ``unsecuredValidatorAllowableClockSkewMs`` (default 0).
    ``wall_clock_ms`` returns epoch milliseconds.
    """

    principal_claim_name: str = "sub"
    scope_claim_name: str = "scope"
    required_scope: tuple[str, ...] = ()
    allowable_clock_skew_ms: int = 0
    wall_clock_ms: Callable[[], float] = lambda: time.time() * 1000.0

    @classmethod
    def from_jaas_options(cls, options: dict[str, str]) -> "UnsecuredJwsValidator":
        """Raises ValueError for a negative or non-integer clock skew (Kafka
        ``OAuthBearerConfigException``)."""
        skew = options.get("unsecuredValidatorAllowableClockSkewMs", "").strip()
        try:
            skew_ms = int(skew) if skew else 0
        except ValueError:
            raise ValueError(f"unsecuredValidatorAllowableClockSkewMs is not an integer: {skew!r}") from None
        if skew_ms < 0:
            raise ValueError(f"Allowable clock skew millis must not be negative: {skew}")
        return cls(principal_claim_name=options.get("unsecuredValidatorPrincipalClaimName", "").strip() or "sub",
                   scope_claim_name=options.get("unsecuredValidatorScopeClaimName", "").strip() or "scope",
                   required_scope=tuple(options.get("unsecuredValidatorRequiredScope", "").split()),
                   allowable_clock_skew_ms=skew_ms)

    def validate(self, token: str) -> OAuthBearerToken:
        """Raises :class:`TokenValidationError` (Kafka ``OAuthBearerIllegalTokenException``)."""
        if ".." in token:
            raise TokenValidationError("Malformed compact serialization contains '..'")
        parts = token.split(".")
        if len(parts) != 3:
            raise TokenValidationError(
                "Unsecured JWS compact serializations must have 3 dot-separated Base64URL-encoded values")
        header = _b64url_json(parts[0], "JOSE header")
        claims = _b64url_json(parts[1], "JWT claims")
        if header.get("alg") != "none":
            raise TokenValidationError("Unsecured JWS must have 'none' for an algorithm")
        if parts[2]:
            raise TokenValidationError("Unsecured JWS must not contain a digital signature")
        scope = _scope(claims, self.scope_claim_name)
        exp = _number(claims, "exp", required=True)
        principal = _principal(claims, self.principal_claim_name)
        iat = _number(claims, "iat", required=False)
        now = self.wall_clock_ms()
        skew = self.allowable_clock_skew_ms
        if iat is not None and iat * 1000 > now + skew:
            raise TokenValidationError(f"The Issued At value ({iat} seconds) was after the indicated time "
                                       f"({now:.0f} ms) plus allowable clock skew ({skew} ms)")
        if now - skew >= exp * 1000:
            raise TokenValidationError(f"The indicated time ({now:.0f} ms) minus allowable clock skew ({skew} ms) "
                                       f"was on or after the Expiration Time value ({exp} seconds)")
        if iat is not None and exp <= iat:
            raise TokenValidationError(
                f"The Expiration Time time ({exp} seconds) was not after the Issued At time ({iat} seconds)")
        for required in self.required_scope:
            if required not in scope:
                given = str(sorted(scope))[:200]
                raise TokenValidationError(f"The provided scope ({given}) was missing a required scope "
                                           f"({required}). All required scope elements: {list(self.required_scope)}",
                                           status="insufficient_scope", scope=required)
        return OAuthBearerToken(token, principal, scope, _ms(exp), None if iat is None else _ms(iat), claims)


class JwksCache:
    """The JSON Web Key Set of an OAuth/OIDC provider (KIP-768 ``sasl.oauthbearer.jwks.endpoint.url``).

    Args:
        url: ``https://``, ``http://`` or ``file:`` URL of the JWKS document (RFC 7517).
        refresh_ms: ``sasl.oauthbearer.jwks.endpoint.refresh.ms``: keys older than this are
            fetched again (in the background; the known keys stay in use meanwhile).
        retry_backoff_ms: ``sasl.oauthbearer.jwks.endpoint.retry.backoff.ms``: fetch attempts
            start at least this far apart.
        missing_key_refresh_ms: a token whose ``kid`` is not in the set fetches the set again at
            most this often (``limits.OAUTHBEARER_JWKS_MISSING_KEY_REFRESH_MS``), so tokens with
            made-up key ids cannot make the broker hammer the provider.
        clock_ms: monotonic milliseconds.
        ssl_cafile: PEM CA bundle that verifies an https provider (Kafka: the ``ssl.truststore.
            location`` option of the OAUTHBEARER JAAS config); None: the system's CAs.

    Raises ValueError for a URL that is not https, http or file, or an unreadable CA bundle.

    Thread-safe: token evaluation runs on the broker's small I/O thread pool, so a slow provider
    must not hold its threads. One fetch at a time runs on its own daemon thread (timeout
    ``limits.OAUTHBEARER_JWKS_FETCH_TIMEOUT_MS``, at most ``limits.OAUTHBEARER_JWKS_MAX_BYTES``
    read); a caller without a key for its token waits for it at most
    ``limits.OAUTHBEARER_JWKS_WAIT_MS``. A failed fetch keeps the keys already known.
    """

    def __init__(self, url: str, refresh_ms: int, retry_backoff_ms: int = 100,
                 missing_key_refresh_ms: int | None = None,
                 clock_ms: Callable[[], float] = lambda: time.monotonic() * 1000.0,
                 ssl_cafile: str | None = None) -> None:
        scheme = urllib.parse.urlsplit(url).scheme.lower()
        if scheme not in ("https", "http", "file"):
            raise ValueError(f"sasl.oauthbearer.jwks.endpoint.url must be an https, http or file URL: {url!r}")
        self._ssl_context = None
        if scheme == "https":
            try:
                self._ssl_context = ssl.create_default_context(cafile=ssl_cafile or None)
            except (OSError, ssl.SSLError) as exc:
                raise ValueError(f"OAUTHBEARER ssl.truststore.location {ssl_cafile!r}: {exc}") from None
        self.url = url
        self.refresh_ms = refresh_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.missing_key_refresh_ms = (limits.OAUTHBEARER_JWKS_MISSING_KEY_REFRESH_MS
                                       if missing_key_refresh_ms is None else missing_key_refresh_ms)
        self.clock_ms = clock_ms
        self._lock = threading.Lock()
        self._keys: dict[str | None, jwt.PyJWK] = {}
        self._fetched_ms: float | None = None
        self._attempt_ms: float | None = None
        self._done = threading.Event()
        self._done.set()  # no fetch in flight
        self.fetches = 0

    def _download(self) -> dict[str | None, jwt.PyJWK] | None:
        """The signing keys of the set by ``kid``, or None (logged) when the fetch failed."""
        try:
            with urllib.request.urlopen(self.url, timeout=limits.OAUTHBEARER_JWKS_FETCH_TIMEOUT_MS / 1000,
                                        context=self._ssl_context) as resp:
                raw = resp.read(limits.OAUTHBEARER_JWKS_MAX_BYTES + 1)
            if len(raw) > limits.OAUTHBEARER_JWKS_MAX_BYTES:
                raise ValueError(f"JWKS larger than {limits.OAUTHBEARER_JWKS_MAX_BYTES} bytes")
            document = json.loads(raw)
        except (OSError, ValueError) as exc:
            log.warning("Could not fetch the JWKS from %s (%s); keeping the %d keys known", self.url, exc,
                        len(self._keys))
            return None
        keys: dict[str | None, jwt.PyJWK] = {}
        for entry in document.get("keys", []) if isinstance(document, dict) else []:
            if not isinstance(entry, dict) or entry.get("use", "sig") != "sig":
                continue
            try:
                keys[entry.get("kid")] = jwt.PyJWK(entry)
            except jwt.PyJWTError as exc:  # an unusable key does not spoil the others
                log.debug("JWKS %s: key %r skipped (%s)", self.url, entry.get("kid"), exc)
        return keys

    def _fetch(self, attempt_ms: float, done: threading.Event) -> None:
        try:
            keys = self._download()
            if keys is not None:
                with self._lock:
                    self._keys = keys
                    self._fetched_ms = attempt_ms
        finally:
            done.set()

    def prefetch(self) -> None:
        """Start fetching the key set now (on its own thread) unless a fetch is in flight: a
        broker calls it at start, so its first logins find the keys (Kafka fetches them when
        its validator is configured)."""
        with self._lock:
            if self._done.is_set() and self._fetched_ms is None:
                self._start_fetch(self.clock_ms())

    def _start_fetch(self, now: float) -> None:
        """Under the lock: one fetch on its own daemon thread."""
        self._attempt_ms = now
        self.fetches += 1
        self._done = threading.Event()
        threading.Thread(target=self._fetch, args=(now, self._done), name="litemq-jwks", daemon=True).start()

    def key_for(self, kid: str | None, algorithm: str) -> jwt.PyJWK:
        """The verification key for a token header's ``kid`` and ``alg``. Without a ``kid``, the
        one key of the set that fits the algorithm.

        Raises:
            TokenValidationError: no such key, even after fetching the set again (when allowed).
        """
        with self._lock:
            now = self.clock_ms()
            key = self._select(kid, algorithm)
            since_attempt = None if self._attempt_ms is None else now - self._attempt_ms
            stale = self._fetched_ms is None or now - self._fetched_ms >= self.refresh_ms
            wanted = ((stale and (since_attempt is None or since_attempt >= self.retry_backoff_ms))
                      or (key is None and (since_attempt is None or since_attempt >= self.missing_key_refresh_ms)))
            if wanted and self._done.is_set():
                self._start_fetch(now)
            done = self._done
        if key is None and not done.is_set():
            done.wait(limits.OAUTHBEARER_JWKS_WAIT_MS / 1000)
            with self._lock:
                key = self._select(kid, algorithm)
        if key is None:
            raise TokenValidationError(
                f"No key in the JWKS at {self.url} for kid {str(kid)[:64]!r} and alg {algorithm}")
        return key

    def _select(self, kid: str | None, algorithm: str) -> jwt.PyJWK | None:
        if kid is not None:
            return self._keys.get(kid)
        fitting = [k for k in self._keys.values() if _fits(k, algorithm)]
        return fitting[0] if len(fitting) == 1 else None


_KTY_OF_ALG = {"RS": "RSA", "PS": "RSA", "ES": "EC", "Ed": "OKP"}


def _fits(key: jwt.PyJWK, algorithm: str) -> bool:
    return key.key_type == _KTY_OF_ALG.get(algorithm[:2]) and getattr(key, "algorithm_name", algorithm) in (
        algorithm, None, "")


@dataclass
class JwtValidator:
    """Kafka's ``OAuthBearerValidatorCallbackHandler`` (KIP-768): a signed JWT from an OAuth/OIDC
    provider.

    Settings (Kafka's names): ``sasl.oauthbearer.jwks.endpoint.url`` (:class:`JwksCache`),
    ``sasl.oauthbearer.expected.audience`` (the token's ``aud`` must hold one of them; empty: not
    checked), ``sasl.oauthbearer.expected.issuer`` (``iss`` must equal it; empty: not checked),
    ``sasl.oauthbearer.sub.claim.name`` (the principal, default ``sub``),
    ``sasl.oauthbearer.scope.claim.name`` (default ``scope``) and
    ``sasl.oauthbearer.clock.skew.seconds`` (default 30). ``exp`` and ``iat`` are required.
    """

    jwks: JwksCache
    expected_audience: tuple[str, ...] = ()
    expected_issuer: str = ""
    sub_claim_name: str = "sub"
    scope_claim_name: str = "scope"
    clock_skew_s: int = 30

    def validate(self, token: str) -> OAuthBearerToken:
        """Raises :class:`TokenValidationError`."""
        try:
            header = jwt.get_unverified_header(token)
        except (jwt.PyJWTError, ValueError, RecursionError) as exc:
            raise TokenValidationError(f"malformed JWT: {str(exc)[:200]}") from None
        algorithm = header.get("alg")
        if algorithm not in SIGNED_ALGORITHMS:
            raise TokenValidationError(f"JWT algorithm {str(algorithm)[:32]!r} is not allowed (allowed: "
                                       f"{', '.join(SIGNED_ALGORITHMS)})")
        kid = header.get("kid")
        key = self.jwks.key_for(kid if isinstance(kid, str) else None, algorithm)
        try:
            claims = jwt.decode(token, key=key.key, algorithms=[algorithm],
                                audience=list(self.expected_audience) or None,
                                issuer=self.expected_issuer or None, leeway=self.clock_skew_s,
                                options={"require": ["exp", "iat"], "verify_aud": bool(self.expected_audience)})
        except (jwt.PyJWTError, ValueError, TypeError, OverflowError, RecursionError) as exc:
            # PyJWT lets int() of a NaN or infinite exp/iat/nbf through as ValueError/OverflowError
            raise TokenValidationError(f"JWT rejected: {str(exc)[:200]}") from None
        principal = _principal(claims, self.sub_claim_name)
        exp = _number(claims, "exp", required=True)
        iat = _number(claims, "iat", required=True)
        return OAuthBearerToken(token, principal, _scope(claims, self.scope_claim_name), _ms(exp), _ms(iat), claims)


Validator = UnsecuredJwsValidator | JwtValidator
