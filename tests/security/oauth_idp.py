"""A stand-in OAuth 2 / OIDC provider for the OAUTHBEARER tests (an identity provider is not
something LiteMQ owns; this one does what Keycloak or Okta do for a broker and its clients):

- ``GET /jwks``: its JSON Web Key Set (RFC 7517) with the public keys of its signing keys;
- ``POST /token``: the client-credentials grant (RFC 6749 section 4.4) with HTTP Basic client
  authentication, answering a signed JWT access token whose ``sub`` is the client id (what
  librdkafka's ``sasl.oauthbearer.method=oidc`` calls);
- :meth:`OAuthProvider.token`: the same token, made directly for Python clients' token providers;
- :meth:`OAuthProvider.rotate`: a new signing key with a new ``kid`` (the old one leaves the set).

Also :func:`unsecured_token`, the unsigned JWS of Kafka's default (development) validator.
"""

from __future__ import annotations

import base64
import json
import ssl
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import jwt
from cryptography.hazmat.primitives.asymmetric import ec, rsa

AUDIENCE = "litemq"
CLIENTS = {"etl-job": "etl-secret", "intruder": "intruder-secret"}
"""The test clients the provider knows (client id -> secret)."""


def _b64(data: dict) -> str:
    return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()


def unsecured_token(sub: str = "alice", lifetime_s: float = 60.0, **claims) -> str:
    """An unsecured JWS (``alg`` none, empty signature) as librdkafka's
    ``sasl.oauthbearer.config=principal=...`` makes it; ``claims`` override or add claims
    (``None`` drops one)."""
    now = time.time()
    body = {"sub": sub, "iat": now, "exp": now + lifetime_s, **claims}
    return f"{_b64({'alg': 'none'})}.{_b64({k: v for k, v in body.items() if v is not None})}."


class OAuthProvider:
    """The provider, serving on 127.0.0.1 from a thread (https with a server ``tls`` context).
    ``clients``: client id -> secret."""

    def __init__(self, clients: dict[str, str], lifetime_s: float = 60.0, algorithm: str = "RS256",
                 tls: "ssl.SSLContext | None" = None) -> None:
        self.clients = dict(clients)
        self.lifetime_s = lifetime_s
        self.algorithm = algorithm
        self.jwks_requests = 0
        self.token_requests = 0
        self._generation = 0
        self._lock = threading.Lock()
        self.rotate()
        provider = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def _send(self, status: int, body: dict) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                if self.path != "/jwks":
                    return self._send(404, {"error": "not_found"})
                with provider._lock:
                    provider.jwks_requests += 1
                    keys = list(provider._public_jwks)
                self._send(200, {"keys": keys})

            def do_POST(self):
                length = int(self.headers.get("Content-Length", "0"))
                form = urllib.parse.parse_qs(self.rfile.read(length).decode())
                auth = self.headers.get("Authorization", "")
                client_id = secret = None
                if auth.startswith("Basic "):
                    client_id, _, secret = base64.b64decode(auth[6:]).decode().partition(":")
                if self.path != "/token" or form.get("grant_type") != ["client_credentials"]:
                    return self._send(400, {"error": "unsupported_grant_type"})
                if client_id is None or provider.clients.get(client_id) != secret:
                    return self._send(401, {"error": "invalid_client"})
                with provider._lock:
                    provider.token_requests += 1
                scope = form.get("scope", [""])[0]
                self._send(200, {"access_token": provider.token(client_id, scope=scope or None),
                                 "token_type": "Bearer", "expires_in": int(provider.lifetime_s)})

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        if tls is not None:  # https: a server context with its certificate (``tls``)
            self._server.socket = tls.wrap_socket(self._server.socket, server_side=True)
        scheme = "https" if tls is not None else "http"
        self.url = f"{scheme}://127.0.0.1:{self._server.server_address[1]}"
        self.issuer = self.url
        self._thread = threading.Thread(target=self._server.serve_forever, name="oauth-idp", daemon=True)
        self._thread.start()

    @property
    def jwks_url(self) -> str:
        return f"{self.url}/jwks"

    @property
    def token_url(self) -> str:
        return f"{self.url}/token"

    def rotate(self) -> str:
        """A new signing key (new ``kid``) replaces the current one in the set; returns its kid."""
        key = (rsa.generate_private_key(public_exponent=65537, key_size=2048) if self.algorithm.startswith(("RS", "PS"))
               else ec.generate_private_key(ec.SECP256R1()))
        with self._lock:
            self._generation += 1
            kid = f"key-{self._generation}"
            public = json.loads(jwt.algorithms.get_default_algorithms()[self.algorithm].to_jwk(key.public_key()))
            public.update({"kid": kid, "use": "sig", "alg": self.algorithm})
            self._key, self.kid, self._public_jwks = key, kid, [public]
        return kid

    def token(self, sub: str, lifetime_s: float | None = None, audience: str | None = AUDIENCE,
              issuer: str | None = None, kid: str | None | bool = True, key=None, **claims) -> str:
        """A signed JWT access token for ``sub`` (``kid=False`` leaves the key id out; ``key``
        signs with another private key)."""
        now = time.time()
        body = {"sub": sub, "iat": int(now), "exp": now + (self.lifetime_s if lifetime_s is None else lifetime_s),
                "iss": issuer or self.issuer, "aud": audience, "scope": "kafka", **claims}
        headers = {} if kid is False else {"kid": self.kid if kid is True else kid}
        return jwt.encode({k: v for k, v in body.items() if v is not None}, key or self._key,
                          algorithm=self.algorithm, headers=headers)

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
