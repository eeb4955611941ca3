"""TLS and SASL for the Spark executors' fast-path reader (:mod:`litemq.spark.wire`).

With these, a secured cluster is read with LiteMQ's own codec and Arrow decoding instead of
the confluent-kafka fallback (about 3-4x slower per core, docs/benchmarks-spark.md). The
client settings are librdkafka's, as in the ``kafka.*`` options:

- ``security.protocol``: ``ssl``, ``sasl_plaintext`` or ``sasl_ssl`` (any case);
- TLS: ``ssl.ca.location`` (PEM; default: the system's CAs), ``ssl.certificate.location`` and
  ``ssl.key.location`` (+ ``ssl.key.password``) for a client certificate,
  ``ssl.endpoint.identification.algorithm`` (``https``, librdkafka's default, checks the
  broker's host name; ``none`` does not);
- SASL (KIP-43, KIP-152): ``sasl.mechanism(s)`` ``PLAIN`` or ``SCRAM-SHA-256/512`` with
  ``sasl.username``/``sasl.password`` (SCRAM by :mod:`scramp`, RFC 5802/7677), or
  ``OAUTHBEARER`` (RFC 7628) with librdkafka's OIDC client-credentials login
  (``sasl.oauthbearer.method=oidc``, ``.client.id``, ``.client.secret``,
  ``.token.endpoint.url``, ``.scope``; KIP-768; ``https.ca.location`` verifies an https token
  endpoint) or its unsecured development tokens (``enable.sasl.oauthbearer.unsecure.jwt=true``,
  ``sasl.oauthbearer.config=principal=...``); ``sasl.oauthbearer.extensions`` (``k=v,k2=v2``,
  KIP-342) go with either.

:func:`security_from_config` returns None for anything else (GSSAPI, a PKCS#12 keystore, an
``oauth_cb``...), and the reader falls back to confluent-kafka, which supports all of it.
A session with a lifetime (KIP-368, e.g. an OAUTHBEARER token's expiry) is not re-authenticated:
the connection is opened again once 90 % of the lifetime has passed.
"""

from __future__ import annotations

import base64
import json
import os
import ssl
import threading
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass, field

SECURITY_SETTINGS = frozenset({
    "sasl.mechanism", "sasl.mechanisms", "sasl.username", "sasl.password", "ssl.ca.location",
    "ssl.certificate.location", "ssl.key.location", "ssl.key.password", "ssl.endpoint.identification.algorithm",
    "enable.sasl.oauthbearer.unsecure.jwt", "sasl.oauthbearer.config", "sasl.oauthbearer.method",
    "sasl.oauthbearer.client.id", "sasl.oauthbearer.client.secret", "sasl.oauthbearer.token.endpoint.url",
    "sasl.oauthbearer.scope", "sasl.oauthbearer.extensions", "https.ca.location",
})
"""Client settings this module understands (librdkafka names)."""
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
TOKEN_FETCH_TIMEOUT_S = 30.0
"""An OIDC token request gives up after this long."""
_TOKEN_REFRESH_FRACTION = 0.8
"""A cached OIDC token is fetched again after this fraction of its lifetime (librdkafka's)."""
_UNSECURED_LIFETIME_S = 3600


class AuthError(Exception):
    """Authentication could not be done: the broker refused it (``code``: its Kafka error code,
    58 SASL_AUTHENTICATION_FAILED, 33 UNSUPPORTED_SASL_MECHANISM...) or a token could not be had."""

    def __init__(self, message: str, code: int = -1) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class Security:
    """What one client configuration asks of a connection (see the module docstring)."""

    tls: bool = False
    mechanism: str | None = None
    username: str = ""
    password: str = ""
    ca_location: str = ""
    certificate_location: str = ""
    key_location: str = ""
    key_password: str = ""
    check_hostname: bool = True
    oauth: dict = field(default_factory=dict)
    https_ca_location: str = ""

    def ssl_context(self) -> ssl.SSLContext:
        """The client TLS context (certificate verification always on; host names per
        ``ssl.endpoint.identification.algorithm``). Raises OSError / ssl.SSLError for bad files."""
        ctx = ssl.create_default_context(cafile=self.ca_location or None)
        ctx.check_hostname = self.check_hostname
        if self.certificate_location:
            ctx.load_cert_chain(self.certificate_location, self.key_location or None, self.key_password or None)
        return ctx

    def oauth_token(self) -> str:
        """An OAUTHBEARER token: a cached OIDC access token (fetched again at 80 % of its
        lifetime) or a fresh unsecured JWS. Raises AuthError."""
        if self.oauth.get("sasl.oauthbearer.method", "").lower() == "oidc":
            return _oidc_token(self.oauth["sasl.oauthbearer.token.endpoint.url"],
                               self.oauth["sasl.oauthbearer.client.id"],
                               self.oauth.get("sasl.oauthbearer.client.secret", ""),
                               self.oauth.get("sasl.oauthbearer.scope", ""), self.https_ca_location)
        return unsecured_jws(self.oauth.get("sasl.oauthbearer.config", ""))

    def oauth_initial_response(self) -> bytes:
        """The OAUTHBEARER client message (RFC 7628 section 3.1): the token and the
        ``sasl.oauthbearer.extensions``. Raises AuthError."""
        return initial_response(self.oauth_token(), self.oauth.get("sasl.oauthbearer.extensions", ""))


def security_from_config(config: dict) -> Security | None:
    """The :class:`Security` of librdkafka-style ``config``, or None when the fast path cannot
    speak it (the reader then falls back to confluent-kafka)."""
    proto = str(config.get("security.protocol", "plaintext")).lower()
    if proto not in ("plaintext", "ssl", "sasl_plaintext", "sasl_ssl"):
        return None
    get = {k: str(v) for k, v in config.items() if k in SECURITY_SETTINGS}
    mechanism = None
    if proto.startswith("sasl"):
        mechanism = (get.get("sasl.mechanism") or get.get("sasl.mechanisms") or "GSSAPI").strip().upper()
        if mechanism not in SASL_MECHANISMS:
            return None
        if mechanism == "OAUTHBEARER":
            oidc = get.get("sasl.oauthbearer.method", "default").lower() == "oidc"
            unsecured = get.get("enable.sasl.oauthbearer.unsecure.jwt", "false").lower() == "true"
            if oidc and not (get.get("sasl.oauthbearer.client.id") and get.get("sasl.oauthbearer.token.endpoint.url")):
                return None
            if not oidc and not (unsecured and "principal=" in get.get("sasl.oauthbearer.config", "")):
                return None
    algorithm = get.get("ssl.endpoint.identification.algorithm", "https").lower()
    if algorithm not in ("https", "none"):
        return None
    return Security(tls=proto.endswith("ssl"), mechanism=mechanism, username=get.get("sasl.username", ""),
                    password=get.get("sasl.password", ""), ca_location=get.get("ssl.ca.location", ""),
                    certificate_location=get.get("ssl.certificate.location", ""),
                    key_location=get.get("ssl.key.location", ""), key_password=get.get("ssl.key.password", ""),
                    check_hostname=algorithm == "https",
                    oauth={k: v for k, v in get.items() if "oauthbearer" in k},
                    https_ca_location=get.get("https.ca.location", ""))


def initial_response(token: str, extensions: str = "") -> bytes:
    """``n,,^Aauth=Bearer TOKEN^A[KEY=VALUE^A]...^A`` with librdkafka's comma-separated
    ``sasl.oauthbearer.extensions`` (``k=v,k2=v2``)."""
    pairs = "".join(f"{item.strip()}\x01" for item in extensions.split(",") if "=" in item)
    return f"n,,\x01auth=Bearer {token}\x01{pairs}\x01".encode()


def _b64(data: dict) -> str:
    return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()


def unsecured_jws(config: str) -> str:
    """librdkafka's unsecured development token from ``sasl.oauthbearer.config``
    (``principal=NAME [scope=a,b] [scopeClaimName=scope] [lifeSeconds=N]``): an unsigned JWS
    (``alg`` none, KIP-255) that Kafka's default OAUTHBEARER validator accepts."""
    opts = dict(item.split("=", 1) for item in config.split() if "=" in item)
    now = time.time()
    claims = {"sub": opts.get("principal", ""), "iat": int(now),
              "exp": int(now) + int(opts.get("lifeSeconds", _UNSECURED_LIFETIME_S))}
    if opts.get("scope"):
        claims[opts.get("scopeClaimName", "scope")] = [s for s in opts["scope"].split(",") if s]
    return f"{_b64({'alg': 'none'})}.{_b64(claims)}."


_tokens: dict[tuple, tuple[str, float]] = {}
_tokens_lock = threading.Lock()


def _oidc_token(endpoint: str, client_id: str, client_secret: str, scope: str, ca_location: str = "") -> str:
    """An access token by the OAuth 2 client-credentials grant (RFC 6749 section 4.4; HTTP
    Basic client authentication, as librdkafka), cached per executor process until 80 % of
    its lifetime (``expires_in``, else the JWT's ``exp``). Raises AuthError."""
    key = (endpoint, client_id, scope)
    now = time.time()
    with _tokens_lock:
        cached = _tokens.get(key)
        if cached is not None and now < cached[1]:
            return cached[0]
    form = {"grant_type": "client_credentials", **({"scope": scope} if scope else {})}
    basic = base64.b64encode(f"{client_id}:{client_secret}".encode()).decode()
    req = urllib.request.Request(endpoint, data=urllib.parse.urlencode(form).encode(), method="POST",
                                 headers={"Authorization": f"Basic {basic}",
                                          "Content-Type": "application/x-www-form-urlencoded",
                                          "Accept": "application/json"})
    context = None
    if endpoint.lower().startswith("https://"):
        ca_file = ca_location if ca_location and not os.path.isdir(ca_location) else None
        ca_dir = ca_location if ca_location and os.path.isdir(ca_location) else None
        context = ssl.create_default_context(cafile=ca_file, capath=ca_dir)
    try:
        with urllib.request.urlopen(req, timeout=TOKEN_FETCH_TIMEOUT_S, context=context) as resp:
            answer = json.loads(resp.read(1 << 20))
        token = answer["access_token"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise AuthError(f"OAUTHBEARER: no token from {endpoint}: {exc}") from None
    lifetime_s = answer.get("expires_in")
    if not isinstance(lifetime_s, (int, float)):
        try:
            payload = token.split(".")[1]
            lifetime_s = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))["exp"] - now
        except (IndexError, ValueError, KeyError, TypeError):
            lifetime_s = 60
    with _tokens_lock:
        _tokens[key] = (token, now + max(0.0, float(lifetime_s)) * _TOKEN_REFRESH_FRACTION)
    return token
