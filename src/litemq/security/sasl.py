"""SASL authentication of one connection, sans I/O (KIP-43, KIP-152, KIP-368).

Mechanisms:

- ``PLAIN`` (RFC 4616): the token is ``authzid NUL authcid NUL passwd``; ``authzid`` must be
  empty or equal to ``authcid`` (Kafka ``PlainSaslServer``). The password is checked against the
  ``user_NAME="PASSWORD"`` options of the listener's JAAS config
  (``org.apache.kafka.common.security.plain.PlainLoginModule``, Kafka
  ``PlainServerCallbackHandler``). A user the JAAS config does not name is checked against its
  SCRAM credentials (``litemq user`` / AlterUserScramCredentials), as Redpanda does, so one user
  store serves both mechanisms; Kafka itself only knows JAAS users for PLAIN.
- ``SCRAM-SHA-256`` / ``SCRAM-SHA-512`` (RFC 5802, RFC 7677, KIP-84): the exchange is run by
  :mod:`scramp` against the stored :class:`~litemq.security.credentials.ScramCredential`.
  Delegation tokens (the ``tokenauth`` extension, KIP-48) are not supported and refused.
- ``OAUTHBEARER`` (RFC 7628, KIP-255, KIP-342, KIP-768): a bearer token checked by an unsecured
  JWS or a signed-JWT validator (:mod:`litemq.security.oauthbearer`). The session lasts until
  the token expires, or ``connections.max.reauth.ms`` if shorter (KIP-368).

:class:`SaslSession` is the per-connection state machine of Kafka's
``SaslServerAuthenticator`` and ``KafkaChannel``: which requests an unauthenticated connection
may send, the handshake, the token exchange, the session lifetime and re-authentication. The
broker edge (``litemq.broker.handlers.sasl``) feeds it requests and a monotonic clock.

Client-visible failure messages are Kafka's: a :class:`SaslAuthenticationException` message is
sent as is; a :class:`SaslCredentialsError` (bad token, unknown SCRAM user, wrong proof) only
says ``Authentication failed during authentication due to invalid credentials with SASL
mechanism M``, so nothing about the user leaks (Kafka ``SaslServerAuthenticator.handleSaslToken``).
"""

from __future__ import annotations

import enum
import hmac
import logging
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import scramp

from litemq import limits
from litemq.security.credentials import SCRAM_MECHANISMS, ScramCredential, salted_password, verify_password
from litemq.security.oauthbearer import (KVSEP, OAUTHBEARER, InitialResponseError, OAuthBearerToken,
                                         TokenValidationError, Validator, parse_initial_response)
from litemq.security.principal import KafkaPrincipal

log = logging.getLogger(__name__)

PLAIN = "PLAIN"
SUPPORTED_MECHANISMS: tuple[str, ...] = (PLAIN, *SCRAM_MECHANISMS, OAUTHBEARER)
"""Mechanisms LiteMQ implements. GSSAPI (Kerberos) is not implemented."""

PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
JAAS_CONTROL_FLAGS = ("required", "requisite", "sufficient", "optional")

SASL_API_KEYS = {18: "API_VERSIONS", 17: "SASL_HANDSHAKE", 36: "SASL_AUTHENTICATE"}
"""The requests an unauthenticated connection on a SASL listener may send (Kafka ``handleKafkaRequest``)."""

MIN_REAUTH_INTERVAL_MS = 1000
"""A connection may start a re-authentication at most once a second (Kafka
``KafkaChannel.MIN_REAUTH_INTERVAL_ONE_SECOND_NANOS``); more often gets ILLEGAL_SASL_STATE."""


# ---------------------------------------------------------------- errors
class SaslAuthenticationException(Exception):
    """Authentication failed; ``str(exc)`` is sent to the client as the error message."""


class SaslCredentialsError(Exception):
    """Authentication failed; ``str(exc)`` is only logged, the client gets Kafka's generic message."""


# ---------------------------------------------------------------- configuration
def parse_mechanisms(text: str) -> list[str]:
    """``sasl.enabled.mechanisms`` (comma-separated) -> mechanism names, in order, without duplicates.

    Raises:
        ValueError: empty, or a mechanism LiteMQ does not implement (GSSAPI, ...).
    """
    out: list[str] = []
    for item in text.split(","):
        name = item.strip()
        if not name or name in out:
            continue
        if name not in SUPPORTED_MECHANISMS:
            raise ValueError(f"SASL mechanism {name!r} is not supported by LiteMQ (supported: "
                             f"{', '.join(SUPPORTED_MECHANISMS)}; GSSAPI/Kerberos is not)")
        out.append(name)
    if not out:
        raise ValueError("sasl.enabled.mechanisms is empty: no SASL mechanism enabled")
    return out


@dataclass(frozen=True)
class JaasEntry:
    """One login module of a JAAS configuration: ``Class flag key=value ...;``."""

    login_module: str
    control_flag: str
    options: dict[str, str] = field(default_factory=dict)


_JAAS_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f", "a": "\a", "v": "\v"}


def _jaas_tokens(text: str):
    """Tokens of a JAAS config: ('word', s), ('quoted', s), or ('sym', '=' | ';').

    Follows ``java.io.StreamTokenizer`` as Kafka's ``JaasConfig`` sets it up: ``"``-quoted strings
    with backslash escapes, ``//`` and ``/* */`` comments, words of letters, digits and ``_-.$``.
    """
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c.isspace():
            i += 1
        elif text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j + 1
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            if j < 0:
                raise ValueError("unterminated /* comment in JAAS config")
            i = j + 2
        elif c in "=;":
            yield ("sym", c)
            i += 1
        elif c in "\"'":
            quote, i, buf = c, i + 1, []
            while True:
                if i >= n:
                    raise ValueError("unterminated quoted value in JAAS config")
                c = text[i]
                if c == quote:
                    i += 1
                    break
                if c == "\\" and i + 1 < n:
                    nxt = text[i + 1]
                    buf.append(_JAAS_ESCAPES.get(nxt, nxt))
                    i += 2
                    continue
                buf.append(c)
                i += 1
            yield ("quoted", "".join(buf))
        elif c.isalnum() or c in "_-.$":
            j = i
            while j < n and (text[j].isalnum() or text[j] in "_-.$"):
                j += 1
            yield ("word", text[i:j])
            i = j
        else:
            raise ValueError(f"unexpected character {c!r} in JAAS config")


def parse_jaas_config(text: str) -> list[JaasEntry]:
    """Parse a ``sasl.jaas.config`` value (Kafka ``JaasConfig`` syntax).

    ``org.apache.kafka.common.security.plain.PlainLoginModule required username="admin"
    password="admin-secret" user_alice="alice-secret";``

    Raises:
        ValueError: malformed text (the message says where), or not exactly one login module
            (Kafka: "JAAS config property contains N login modules, should be 1 module").
    """
    tokens = list(_jaas_tokens(text))
    entries: list[JaasEntry] = []
    i = 0
    while i < len(tokens):
        kind, module = tokens[i]
        if kind != "word":
            raise ValueError(f"JAAS config: expected a login module class name, found {module!r}")
        if i + 1 >= len(tokens) or tokens[i + 1][0] != "word" or tokens[i + 1][1].lower() not in JAAS_CONTROL_FLAGS:
            raise ValueError(f"JAAS config: login module {module} needs a control flag "
                             f"({'|'.join(JAAS_CONTROL_FLAGS)})")
        flag = tokens[i + 1][1].lower()
        i += 2
        options: dict[str, str] = {}
        while True:
            if i >= len(tokens):
                raise ValueError(f"JAAS config: login module {module} is not terminated by ';'")
            kind, value = tokens[i]
            if (kind, value) == ("sym", ";"):
                i += 1
                break
            if kind != "word":
                raise ValueError(f"JAAS config: expected an option name in {module}, found {value!r}")
            if i + 2 >= len(tokens) or tokens[i + 1] != ("sym", "=") or tokens[i + 2][0] == "sym":
                raise ValueError(f"JAAS config: option {value!r} of {module} needs '=' and a value")
            options[value] = tokens[i + 2][1]
            i += 3
        entries.append(JaasEntry(module, flag, options))
    if len(entries) != 1:
        raise ValueError(f"JAAS config property contains {len(entries)} login modules, should be 1 module")
    return entries


def plain_users_from_jaas(text: str | None) -> dict[str, str]:
    """``user_NAME="PASSWORD"`` options of the PlainLoginModule in ``text`` -> {NAME: PASSWORD}.

    Empty or None text gives no users. Raises ValueError as :func:`parse_jaas_config`, or when
    the login module is not Kafka's PlainLoginModule.
    """
    if not text or not text.strip():
        return {}
    (entry,) = parse_jaas_config(text)
    if entry.login_module != PLAIN_LOGIN_MODULE:
        raise ValueError(f"JAAS config for PLAIN names login module {entry.login_module}; "
                         f"expected {PLAIN_LOGIN_MODULE}")
    return {k[len("user_"):]: v for k, v in entry.options.items() if k.startswith("user_") and len(k) > 5}


# ---------------------------------------------------------------- credentials
ScramLookup = Callable[[str, str], "ScramCredential | None"]
"""(username, mechanism) -> the stored credential, or None."""


def lookup_scram(runtime: Any, user: str, mechanism: str) -> ScramCredential | None:
    """The SCRAM credential of ``user`` for ``mechanism`` from the cluster metadata, or None.

    Reads ``runtime.metadata.scram_credentials`` (username -> mechanism -> ScramCredential, kept
    by ClusterMetadata on a single node and by the MetadataImage in a cluster, KIP-554); a
    metadata object without that attribute has no SCRAM users.
    """
    creds = getattr(getattr(runtime, "metadata", None), "scram_credentials", None)
    if not creds:
        return None
    return (creds.get(user) or {}).get(mechanism)


_DUMMY_SALT = b"\0" * 32


def _equal_secret(a: str, b: str) -> bool:
    return hmac.compare_digest(a.encode("utf-8"), b.encode("utf-8"))


# ---------------------------------------------------------------- mechanisms
class Authenticator:
    """One mechanism's server side of one exchange. ``evaluate(token) -> challenge`` until ``complete``.

    ``evaluate`` may derive a password (PBKDF2, milliseconds of CPU): callers off the event loop
    run it in a thread. Raises :class:`SaslAuthenticationException` or :class:`SaslCredentialsError`.
    """

    mechanism: str
    complete: bool = False
    username: str | None = None
    credential_expiration_ms: int | None = None
    """Epoch milliseconds at which the credential expires (an OAUTHBEARER token's ``exp``), else
    None; it bounds the session (Kafka ``CREDENTIAL_LIFETIME_MS_SASL_NEGOTIATED_PROPERTY_KEY``)."""

    def evaluate(self, token: bytes) -> bytes:
        raise NotImplementedError


class PlainAuthenticator(Authenticator):
    """SASL/PLAIN (RFC 4616) against JAAS users, then SCRAM credentials (see module docstring)."""

    mechanism = PLAIN

    def __init__(self, jaas_users: Mapping[str, str], scram_lookup: ScramLookup) -> None:
        self.jaas_users = jaas_users
        self.scram_lookup = scram_lookup

    def evaluate(self, token: bytes) -> bytes:
        if self.complete:
            raise SaslCredentialsError("PLAIN exchange already complete")
        try:
            text = token.decode("utf-8")
        except UnicodeDecodeError:
            raise SaslCredentialsError("Invalid SASL/PLAIN response: not UTF-8") from None
        parts = text.split("\0")
        if len(parts) != 3:
            raise SaslCredentialsError(f"Invalid SASL/PLAIN response: expected 3 tokens, got {len(parts)}")
        authzid, username, password = parts
        if not username:
            raise SaslCredentialsError("Authentication failed: username not specified")
        if not password:
            raise SaslCredentialsError("Authentication failed: password not specified")
        if not self._check(username, password):
            raise SaslAuthenticationException("Authentication failed: Invalid username or password")
        if authzid and authzid != username:
            raise SaslAuthenticationException(
                "Authentication failed: Client requested an authorization id that is different from username")
        self.username = username
        self.complete = True
        return b""

    def _check(self, username: str, password: str) -> bool:
        expected = self.jaas_users.get(username)
        if expected is not None:
            return _equal_secret(password, expected)
        for mechanism in SCRAM_MECHANISMS:
            cred = self.scram_lookup(username, mechanism)
            if cred is not None:
                return verify_password(cred, password)
        # Unknown user: spend about the time of a check so timing does not tell who exists.
        salted_password("SCRAM-SHA-256", password, _DUMMY_SALT, limits.SCRAM_MIN_ITERATIONS)
        return False


def _scram_unescape(name: str) -> str:
    """RFC 5802 section 5.1 saslname: ``=2C`` -> ``,`` and ``=3D`` -> ``=``."""
    return name.replace("=2C", ",").replace("=3D", "=")


class ScramAuthenticator(Authenticator):
    """SASL/SCRAM-SHA-256/512 (RFC 5802, RFC 7677) with :mod:`scramp` as the server.

    Kafka differences: an unknown user fails at the client-first message (as Kafka's
    ``ScramSaslServer``); SCRAM extensions (``tokenauth``, KIP-48 delegation tokens) are refused;
    a GS2 authzid (``n,a=NAME,``) different from the user fails with Kafka's message and an equal
    one is refused too (scramp accepts only an empty authzid).

    librdkafka before 2.6.1 (Debian's and Ubuntu's packages, confluent-kafka < 2.6.1) sends its
    client nonce twice in its final message: ``r=`` client nonce + the server's nonce (which
    itself starts with the client nonce). Kafka 3.8.1-3.9 accept that (the CVE-2024-56128 fix
    checks that the nonce ends with the server's); Kafka 4 refuses it, locking those clients
    out. LiteMQ accepts exactly that form, nothing looser: the server's whole nonce is still
    required (no replay), and the proof is checked over the message as the client sent it.
    """

    def __init__(self, mechanism: str, scram_lookup: ScramLookup) -> None:
        if mechanism not in SCRAM_MECHANISMS:
            raise ValueError(f"not a SCRAM mechanism: {mechanism!r}")
        self.mechanism = mechanism
        self.scram_lookup = scram_lookup
        self._server = None
        self._client_nonce = ""

    def _auth_fn(self, username: str):
        cred = self.scram_lookup(username, self.mechanism)
        if cred is None:
            return None
        self.username = username
        return cred.salt, cred.stored_key, cred.server_key, cred.iterations

    def evaluate(self, token: bytes) -> bytes:
        try:
            text = token.decode("utf-8")
        except UnicodeDecodeError:
            raise SaslCredentialsError("SCRAM message is not UTF-8") from None
        try:
            if self._server is None:
                self._check_client_first(text)
                self._server = scramp.ScramMechanism(self.mechanism).make_server(self._auth_fn)
                self._server.set_client_first(text)
                return self._server.get_server_first().encode()
            if self.complete:
                raise SaslCredentialsError("SCRAM exchange already complete")
            if self._librdkafka_doubled_nonce(text):  # scramp keeps the nonce as str or its Nonce type
                self._server.nonce = type(self._server.nonce)(self._client_nonce + str(self._server.nonce))
            self._server.set_client_final(text)
            final = self._server.get_server_final().encode()
        except scramp.ScramException as exc:
            raise SaslCredentialsError(f"SCRAM: {exc}") from None
        self.complete = True
        return final

    def _librdkafka_doubled_nonce(self, client_final: str) -> bool:
        """True when the final message's nonce is librdkafka's (< 2.6.1) client nonce + server
        nonce (see the class docstring)."""
        nonce = next((a[2:] for a in client_final.split(",") if a.startswith("r=")), None)
        return bool(self._client_nonce) and nonce == self._client_nonce + str(self._server.nonce)

    def _check_client_first(self, text: str) -> None:
        # gs2-header "n,[a=authzid]," then client-first-bare "n=user,r=nonce[,ext=value...]"
        flag, sep1, rest = text.partition(",")
        authz, sep2, bare = rest.partition(",")
        if not sep1 or not sep2:
            raise SaslCredentialsError("SCRAM client-first message without a GS2 header")
        attrs = bare.split(",")
        names = [a.partition("=")[0] for a in attrs]
        self._client_nonce = next((a[2:] for a in attrs if a.startswith("r=")), "")
        if "tokenauth" in names:
            raise SaslCredentialsError("SCRAM tokenauth extension: delegation tokens are not supported")
        if authz:
            user = next((_scram_unescape(a[2:]) for a in attrs if a.startswith("n=")), "")
            if not authz.startswith("a=") or _scram_unescape(authz[2:]) != user:
                raise SaslAuthenticationException(
                    "Authentication failed: Client requested an authorization id that is different from username")


class OAuthBearerAuthenticator(Authenticator):
    """SASL/OAUTHBEARER (RFC 7628) as Kafka's ``OAuthBearerSaslServer``: one client message with
    the token; an invalid token is answered with RFC 7628's JSON error and fails when the client
    acknowledges it with ``\\x01`` (see :mod:`litemq.security.oauthbearer`).

    Attributes after success: ``username`` (the token's principal), ``token``
    (:class:`~litemq.security.oauthbearer.OAuthBearerToken`), ``extensions`` (KIP-342 SASL
    extensions, all accepted as by both Kafka validators), ``credential_expiration_ms``.
    """

    mechanism = OAUTHBEARER

    def __init__(self, validator: Validator) -> None:
        self.validator = validator
        self.error_json: str | None = None
        self.token: OAuthBearerToken | None = None
        self.extensions: dict[str, str] = {}

    def evaluate(self, token: bytes) -> bytes:
        if self.complete:
            raise SaslCredentialsError("OAUTHBEARER exchange already complete")
        if token == KVSEP.encode() and self.error_json is not None:
            raise SaslAuthenticationException(self.error_json)
        self.error_json = None
        try:
            first = parse_initial_response(token)
        except InitialResponseError as exc:
            raise SaslCredentialsError(str(exc)) from None
        try:
            valid = self.validator.validate(first.token)
        except TokenValidationError as exc:
            log.info("OAUTHBEARER token rejected (%s): %s", exc.status, exc)
            self.error_json = exc.json()
            return self.error_json.encode()
        if first.authorization_id and first.authorization_id != valid.principal_name:
            raise SaslAuthenticationException(
                f"Authentication failed: Client requested an authorization id ({first.authorization_id}) "
                f"that is different from the token's principal name ({valid.principal_name})")
        self.token = valid
        self.extensions = first.extensions
        self.username = valid.principal_name
        self.credential_expiration_ms = valid.lifetime_ms
        self.complete = True
        return b""


def make_authenticator(mechanism: str, jaas_users: Mapping[str, str], scram_lookup: ScramLookup,
                       oauthbearer_validator: Validator | None = None) -> Authenticator:
    """A fresh server-side authenticator for ``mechanism`` (one of :data:`SUPPORTED_MECHANISMS`;
    OAUTHBEARER needs ``oauthbearer_validator``)."""
    if mechanism == PLAIN:
        return PlainAuthenticator(jaas_users, scram_lookup)
    if mechanism == OAUTHBEARER:
        if oauthbearer_validator is None:
            raise ValueError("OAUTHBEARER needs a token validator")
        return OAuthBearerAuthenticator(oauthbearer_validator)
    return ScramAuthenticator(mechanism, scram_lookup)


# ---------------------------------------------------------------- per-connection state
class SaslStage(enum.Enum):
    HANDSHAKE = "handshake"
    """Not authenticated, no mechanism chosen: ApiVersions and SaslHandshake only."""
    AUTHENTICATE = "authenticate"
    """Mechanism chosen (first authentication or re-authentication): SaslAuthenticate only."""
    COMPLETE = "complete"
    """Authenticated: every request, until the session expires (KIP-368)."""
    FAILED = "failed"
    """Authentication failed: the failure is answered, then the connection closes."""


class SaslSession:
    """KIP-43/KIP-368 state of one connection on a SASL_PLAINTEXT or SASL_SSL listener.

    Args:
        enabled_mechanisms: the listener's ``sasl.enabled.mechanisms``.
        max_reauth_ms: ``connections.max.reauth.ms``, one value or one per mechanism (Kafka
            ``connectionsMaxReauthMsByMechanism``); > 0 gives sessions that long, after which the
            client must re-authenticate on the same connection (0 = sessions never expire).
        make_authenticator: mechanism -> a fresh :class:`Authenticator`.

    Times (``now_ms``) are monotonic milliseconds supplied by the caller.
    """

    def __init__(self, enabled_mechanisms: list[str], max_reauth_ms: int | Mapping[str, int],
                 make_authenticator: Callable[[str], Authenticator]) -> None:
        self.enabled_mechanisms = list(enabled_mechanisms)
        self.max_reauth_ms = max_reauth_ms
        self._make_authenticator = make_authenticator
        self.stage = SaslStage.HANDSHAKE
        self.mechanism: str | None = None
        self.authenticator: Authenticator | None = None
        self.principal: KafkaPrincipal | None = None
        self.session_expiry_ms: float | None = None
        self.reauthenticating = False
        self.last_reauth_start_ms: float | None = None
        self.bad_reauth_mechanism: str | None = None
        self.successful_authentications = 0
        self.client_supports_reauthentication = False
        """True once the client sent a SaslAuthenticate v1+ (KIP-368; only counted in metrics)."""
        self.raw_tokens = False
        """True after a SaslHandshake v0: the exchange's tokens arrive as raw size-prefixed frames,
        not SaslAuthenticate requests (KIP-43; Kafka ``enableKafkaSaslAuthenticateHeaders``)."""

    # ------------------------------------------------------------ gating
    @property
    def authenticated(self) -> bool:
        """True between a successful authentication and the start of a re-authentication."""
        return self.stage is SaslStage.COMPLETE

    def session_expired(self, now_ms: float) -> bool:
        return self.session_expiry_ms is not None and now_ms >= self.session_expiry_ms

    def can_reauthenticate(self, now_ms: float) -> bool:
        """True when a SaslHandshake now starts a re-authentication (Kafka
        ``KafkaChannel.maybeBeginServerReauthentication``): authenticated, the session has an
        expiry, and no re-authentication started in the last second."""
        return (self.stage is SaslStage.COMPLETE and self.session_expiry_ms is not None
                and (self.last_reauth_start_ms is None
                     or now_ms - self.last_reauth_start_ms >= MIN_REAUTH_INTERVAL_MS))

    def refusal(self, api_key: int, now_ms: float) -> str | None:
        """None when a request of ``api_key`` may be processed now, else why the connection closes.

        Kafka: before the handshake only ApiVersions and SaslHandshake (``InvalidRequestException``
        "Unexpected Kafka request of type K during SASL handshake"); during the token exchange only
        SaslAuthenticate; after the session expired only a SaslHandshake that starts a
        re-authentication (``SocketServer`` "Disconnecting expired channel").
        """
        stage = self.stage
        if stage is SaslStage.COMPLETE:
            if not self.session_expired(now_ms):
                return None
            if api_key == 17 and self.can_reauthenticate(now_ms):
                return None
            return (f"SASL session of {self.principal} expired; request api_key={api_key} "
                    f"without re-authentication (KIP-368)")
        if stage is SaslStage.HANDSHAKE:
            if api_key in (17, 18):
                return None
            return f"Unexpected Kafka request of type {_api_name(api_key)} during SASL handshake."
        if stage is SaslStage.AUTHENTICATE:
            if api_key == 36:
                return None
            return f"Unexpected Kafka request of type {_api_name(api_key)} during SASL authentication."
        return "request after a failed SASL authentication"

    # ------------------------------------------------------------ handshake
    def handshake(self, mechanism: str, now_ms: float, version: int = 1) -> bool:
        """Process SaslHandshake(``mechanism``) in HANDSHAKE stage or as a re-authentication start.

        Returns True when the mechanism is enabled (answer NONE; next come SaslAuthenticate
        requests, or raw tokens after a ``version`` 0 handshake). False means UNSUPPORTED_SASL_MECHANISM: the stage is FAILED and the caller
        answers, then closes. A re-authentication asking for another enabled mechanism is
        answered NONE and fails at its first SaslAuthenticate (Kafka ``REAUTH_BAD_MECHANISM``).
        """
        if self.stage is SaslStage.COMPLETE:
            self.reauthenticating = True
            self.last_reauth_start_ms = now_ms
        if mechanism not in self.enabled_mechanisms:
            self.stage = SaslStage.FAILED
            return False
        self.bad_reauth_mechanism = None
        if self.reauthenticating and mechanism != self.mechanism:
            self.bad_reauth_mechanism = mechanism
        else:
            self.mechanism = mechanism
            self.authenticator = self._make_authenticator(mechanism)
        self.stage = SaslStage.AUTHENTICATE
        self.raw_tokens = version == 0
        return True

    @property
    def expects_raw_token(self) -> bool:
        """True when the connection's next frame is a raw SASL token (after SaslHandshake v0)."""
        return self.raw_tokens and self.stage is SaslStage.AUTHENTICATE

    # ------------------------------------------------------------ token exchange
    def evaluate(self, token: bytes) -> bytes:
        """One SaslAuthenticate token -> the server's token. Thread-safe to call off the loop.

        Raises:
            SaslAuthenticationException / SaslCredentialsError: authentication failed; the stage
                is FAILED (use :meth:`failure_message` for the client's error message).
        """
        try:
            if self.bad_reauth_mechanism is not None:
                raise SaslAuthenticationException(
                    f"SASL mechanism '{self.bad_reauth_mechanism}' requested by client is not supported "
                    f"for re-authentication of mechanism '{self.mechanism}'")
            if len(token) > limits.MAX_SASL_TOKEN_BYTES:
                raise SaslAuthenticationException("Failing SASL authentication due to invalid receive size")
            out = self.authenticator.evaluate(token)
            if self.authenticator.complete and self.reauthenticating:
                principal = KafkaPrincipal("User", self.authenticator.username)
                if principal != self.principal:
                    raise SaslAuthenticationException(
                        f"Cannot change principals during re-authentication from "
                        f"{self.principal.principal_type}.{self.principal.name}: "
                        f"{principal.principal_type}.{principal.name}")
            return out
        except (SaslAuthenticationException, SaslCredentialsError):
            self.stage = SaslStage.FAILED
            raise

    def failure_message(self, exc: Exception) -> str:
        """The error message a SaslAuthenticate failure carries to the client (Kafka's wording)."""
        if isinstance(exc, SaslAuthenticationException):
            return str(exc)
        return (f"Authentication failed during {self.authentication_text} due to invalid credentials "
                f"with SASL mechanism {self.mechanism}")

    @property
    def authentication_text(self) -> str:
        return "re-authentication" if self.reauthenticating else "authentication"

    @property
    def exchange_complete(self) -> bool:
        return self.authenticator is not None and self.authenticator.complete

    def finish(self, now_ms: float, wall_clock_ms: float) -> int:
        """Complete the (re-)authentication after the last token; returns the session lifetime in
        ms for SaslAuthenticate v1+ (0 = no expiry, unless the credential already expired).

        Kafka ``ReauthInfo.calcCompletionTimesAndReturnSessionLifetimeMs``: the session lasts
        ``connections.max.reauth.ms`` (when > 0), or until the credential expires (an OAUTHBEARER
        token's ``exp``, measured against ``wall_clock_ms``, epoch ms), whichever comes first.
        ``now_ms`` is the monotonic clock the session's expiry is kept in.
        """
        self.principal = KafkaPrincipal("User", self.authenticator.username)
        self.stage = SaslStage.COMPLETE
        self.reauthenticating = False
        self.raw_tokens = False
        self.successful_authentications += 1
        max_reauth_ms = self.max_reauth_ms if isinstance(self.max_reauth_ms, int) \
            else self.max_reauth_ms.get(self.mechanism, 0)
        credential_expiration_ms = self.authenticator.credential_expiration_ms
        if credential_expiration_ms is None and max_reauth_ms <= 0:
            self.session_expiry_ms = None
            return 0
        if credential_expiration_ms is None:
            lifetime_ms = max_reauth_ms
        elif max_reauth_ms <= 0:
            lifetime_ms = max(0, int(credential_expiration_ms - wall_clock_ms))
        else:
            lifetime_ms = max(0, int(min(credential_expiration_ms - wall_clock_ms, max_reauth_ms)))
        self.session_expiry_ms = now_ms + lifetime_ms
        return lifetime_ms


def _api_name(api_key: int) -> str:
    return SASL_API_KEYS.get(api_key, f"api_key={api_key}")
