"""SASL/OAUTHBEARER end to end (RFC 7628, KIP-255, KIP-342, KIP-368, KIP-768).

One broker process with three listeners: PLAINTEXT (set-up), UNSECURED (SASL_PLAINTEXT with
Kafka's default validator of unsigned tokens, a required scope) and SIGNED (SASL_PLAINTEXT with
Kafka's ``OAuthBearerValidatorCallbackHandler``: signed JWTs checked against the JWKS of the
stand-in OAuth provider of ``oauth_idp.py``, with an expected audience and issuer). ACLs deny
``User:mallory`` and the client id ``intruder`` a topic, so the tests see that the token's
principal is the one the authorizer judges.

- confluent-kafka (librdkafka's own unsecured tokens, its OIDC client-credentials flow, and an
  ``oauth_cb``), kafka-python and aiokafka (token providers) produce and consume;
- raw requests check the exchange: RFC 7628's JSON error and the ``\\x01`` that ends it, Kafka's
  messages, the session lifetime bounded by the token's expiry, closing at expiry, and
  re-authentication with a new token of the same principal;
- the signed listener refuses unsigned tokens, other keys, other audiences and issuers, and
  follows a key rotation of the provider;
- the validators' rules and the message parser are tested on their own, the parser also
  against arbitrary bytes (Hypothesis).
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import shutil
import struct
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.admin import AclBinding, AclOperation, AclPermissionType, AdminClient, NewTopic, \
    ResourcePatternType, ResourceType
from hypothesis import given, settings, strategies as st
from kafka import KafkaConsumer, KafkaProducer
from kafka.net.sasl.oauth import AbstractTokenProvider

from litemq.broker.handlers.sasl import validate as validate_sasl_settings
from litemq.config import BrokerConfig
from litemq.protocol.errors import ErrorCode
from litemq.security.oauthbearer import (JWT_VALIDATOR_CLASS, InitialResponseError, JwksCache, JwtValidator,
                                         TokenValidationError, UnsecuredJwsValidator, parse_initial_response)
from litemq.testing.process import BrokerProcess
from litemq.testing.wire import WireClient, WireSaslError
from tests.integration.admin_helpers import unique_name
from tests.security.oauth_idp import AUDIENCE, CLIENTS, OAuthProvider, unsecured_token
from tests.security.security_helpers import produce_and_consume_for

TIMEOUT_S = 20
REQUIRED_SCOPE = "kafka"
GUARDED = "guarded"
GENERIC_FAILURE = "Authentication failed during authentication due to invalid credentials with SASL mechanism OAUTHBEARER"
INVALID_TOKEN = '{"status":"invalid_token"}'


def _message(token: str, authzid: str = "", **extensions) -> bytes:
    ext = "".join(f"{k}={v}\x01" for k, v in extensions.items())
    return f"n,{'a=' + authzid if authzid else ''},\x01auth=Bearer {token}\x01{ext}\x01".encode()


@pytest.fixture(scope="module")
def broker(tmp_path_factory, idp):
    overrides = {
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,UNSECURED:SASL_PLAINTEXT,SIGNED:SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "OAUTHBEARER,PLAIN",
        "listener.name.unsecured.oauthbearer.sasl.jaas.config":
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
            f'unsecuredValidatorRequiredScope="{REQUIRED_SCOPE}";',
        "listener.name.signed.oauthbearer.sasl.server.callback.handler.class": JWT_VALIDATOR_CLASS,
        "listener.name.signed.sasl.oauthbearer.jwks.endpoint.url": idp.jwks_url,
        "sasl.oauthbearer.expected.audience": f"other,{AUDIENCE}",
        "sasl.oauthbearer.expected.issuer": idp.issuer,
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "allow.everyone.if.no.acl.found": "true",
    }
    with BrokerProcess(tmp_path_factory.mktemp("oauth") / "data", overrides=overrides,
                       listeners={"PLAINTEXT": 0, "UNSECURED": 0, "SIGNED": 0}, http_port=0,
                       extra_args=["--log-level", "DEBUG"]) as proc:
        deadline = time.monotonic() + 10  # the broker fetches the provider's keys at start
        while idp.jwks_requests == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert idp.jwks_requests == 1
        admin = AdminClient({"bootstrap.servers": proc.bootstrap("PLAINTEXT")})
        for fut in admin.create_topics([NewTopic(GUARDED, 1, 1)]).values():
            fut.result(TIMEOUT_S)
        denials = [AclBinding(ResourceType.TOPIC, GUARDED, ResourcePatternType.LITERAL, f"User:{who}", "*",
                              AclOperation.ALL, AclPermissionType.DENY) for who in ("mallory", "intruder")]
        allow = AclBinding(ResourceType.TOPIC, GUARDED, ResourcePatternType.LITERAL, "User:*", "*",
                           AclOperation.ALL, AclPermissionType.ALLOW)
        for fut in admin.create_acls([*denials, allow]).values():
            fut.result(TIMEOUT_S)
        yield proc


def _wire(broker, listener="UNSECURED") -> WireClient:
    return WireClient("127.0.0.1", broker.ports[listener])


def _metadata_ok(w: WireClient) -> bool:
    return len(w.request(3, 1, {"topics": None}).brokers) == 1


def _authenticate(w: WireClient, token: str, version: int = 2, **kw):
    w.sasl_handshake("OAUTHBEARER")
    return w.sasl_authenticate(_message(token, **kw), version)


def _authentication_counts(broker) -> dict[tuple[str, str], float]:
    """Kafka's socket-server authentication counters of the broker's /metrics:
    {(outcome, listener): count}."""
    with urllib.request.urlopen(broker.http_url + "/metrics", timeout=10) as resp:
        text = resp.read().decode()
    out = {}
    prefix = "kafka_server_socket_server_metrics_"
    for line in text.splitlines():
        if line.startswith(prefix) and "_total{" in line:
            name, _, rest = line[len(prefix):].partition("_total{")
            listener = rest.split('listener="', 1)[1].split('"', 1)[0]
            out[(name, listener)] = float(rest.rsplit(" ", 1)[1])
    return out


def _produce_result(conf: dict, topic: str) -> list:
    """Delivery errors (None = delivered) of one record produced with confluent-kafka ``conf``."""
    results = []
    producer = Producer(conf)
    producer.produce(topic, b"v", on_delivery=lambda err, msg: results.append(err))
    producer.flush(TIMEOUT_S)
    return results


# ------------------------------------------------------------------ the pieces on their own
def test_initial_response_parsing():
    first = parse_initial_response(_message("a.b.c", authzid="al=2Cice", traceId="x y", kafka="1"))
    assert (first.token, first.authorization_id, first.extensions) == ("a.b.c", "al,ice",
                                                                        {"traceId": "x y", "kafka": "1"})
    assert parse_initial_response(b"n,,\x01auth=bearer tok\x01\x01").token == "tok"  # scheme in any case
    bad = [b"", b"n,,", b"n,,\x01\x01", b"p=x,,\x01auth=Bearer t\x01\x01", b"n,,\x01auth=Basic dXNlcg\x01\x01",
           b"n,,\x01auth=Bearer t\x01", b"n,,\x01auth=Bearer t\x01k1=v\x01\x01", b"n,,\x01auth=Bearer t\x01k=\x01\x01",
           b"n,,\x01auth=Bearer t/\x01\x01", b"n,a=x,y,\x01auth=Bearer t\x01\x01", b"\xff\xfe"]
    for message in bad:
        with pytest.raises(InitialResponseError):
            parse_initial_response(message)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200) | st.builds(lambda parts: "\x01".join(parts).encode(),
                                             st.lists(st.sampled_from(["n,,", "auth=Bearer t.k", "a=b", "", "n,a=u,",
                                                                       "k=v", "auth=x"]), max_size=6)))
def test_initial_response_parser_only_raises_its_own_error(message):
    try:
        first = parse_initial_response(message)
    except InitialResponseError:
        return
    assert message.startswith(b"n,") and first.token and "auth" not in first.extensions


@settings(max_examples=100, deadline=None)
@given(token=st.from_regex(r"[-_.a-zA-Z0-9]{1,40}", fullmatch=True),
       authzid=st.from_regex(r"[a-z]{0,8}", fullmatch=True),
       extensions=st.dictionaries(st.from_regex(r"[A-Za-z]{1,6}", fullmatch=True).filter(lambda k: k != "auth"),
                                  st.from_regex(r"[\x21-\x7e ]{1,10}", fullmatch=True), max_size=3))
def test_initial_response_round_trips(token, authzid, extensions):
    first = parse_initial_response(_message(token, authzid=authzid, **extensions))
    assert (first.token, first.authorization_id, first.extensions) == (token, authzid, extensions)


_JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.integers(min_value=10**300) |
                     st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=8),
                     lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
                     max_leaves=8)
_CLAIM_NAMES = st.sampled_from(["sub", "exp", "iat", "nbf", "scope", "aud", "iss", "kid"])


def _b64_part(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).rstrip(b"=").decode()


@settings(max_examples=200, deadline=None)
@given(claims=st.dictionaries(_CLAIM_NAMES, _JSON, max_size=6), header=st.dictionaries(st.sampled_from(["alg", "kid"]),
       _JSON, max_size=2), depth=st.integers(0, 3000), raw=st.text(max_size=60))
def test_validators_refuse_any_bad_token_with_their_own_error(idp, tmp_path_factory, claims, header, depth, raw):
    """Whatever a client sends as a token (claims of any JSON type, NaN, huge numbers, deep
    nesting, garbage), the validators answer a token or TokenValidationError, never another
    exception (it would close the connection without Kafka's answer)."""
    jwks_file = tmp_path_factory.getbasetemp() / "fuzz-jwks.json"
    jwks_file.write_text(json.dumps({"keys": idp._public_jwks}))
    unsecured = UnsecuredJwsValidator()
    signed = JwtValidator(JwksCache(jwks_file.as_uri(), refresh_ms=3_600_000))
    nested = "[" * depth + "]" * depth
    candidates = [raw, f"{_b64_part(json.dumps({'alg': 'none', **header}))}.{_b64_part(json.dumps(claims))}.",
                  f"{_b64_part(json.dumps({'alg': 'none'}))}.{_b64_part(nested)}.",
                  __import__("jwt").encode({"sub": "x"}, idp._key, algorithm="RS256", headers={"kid": idp.kid})
                  .split(".")[0] + "." + _b64_part(json.dumps(claims)) + ".c2ln"]
    try:
        candidates.append(__import__("jwt").encode(claims, idp._key, algorithm="RS256", headers={"kid": idp.kid}))
    except (TypeError, ValueError, OverflowError):
        pass  # PyJWT refuses to sign it; the broker never sees such a token from a real provider
    for token in candidates:
        for validator in (unsecured, signed):
            try:
                validator.validate(token)
            except TokenValidationError:
                pass


def test_unsecured_validator_rules():
    now_ms = time.time() * 1000
    v = UnsecuredJwsValidator(required_scope=("kafka",), allowable_clock_skew_ms=0)
    ok = v.validate(unsecured_token("alice", scope=["kafka", "x"], iat=now_ms / 1000, exp=now_ms / 1000 + 60))
    assert (ok.principal_name, ok.scope, ok.lifetime_ms) == ("alice", {"kafka", "x"}, round(now_ms + 60_000))
    assert v.validate(unsecured_token("bob", scope="kafka")).scope == {"kafka"}  # a string is one scope value
    cases = {
        "expired": unsecured_token(scope="kafka", exp=now_ms / 1000 - 1),
        "no exp": unsecured_token(scope="kafka", exp=None),
        "exp not a number": unsecured_token(scope="kafka", exp="soon"),
        "issued in the future": unsecured_token(scope="kafka", iat=now_ms / 1000 + 5),
        "no principal": unsecured_token(scope="kafka", sub=None),
        "blank principal": unsecured_token(" ", scope="kafka"),
        "signed": unsecured_token(scope="kafka") + "c2ln",
        "two parts": unsecured_token(scope="kafka")[:-1],
        "not json": "e30.bm90IGpzb24.",
        "alg not none": base64.urlsafe_b64encode(b'{"alg":"RS256"}').decode().rstrip("=")
        + unsecured_token(scope="kafka")[unsecured_token().index("."):],
    }
    for name, token in cases.items():
        with pytest.raises(TokenValidationError) as err:
            v.validate(token)
        assert err.value.json() == INVALID_TOKEN, name
    with pytest.raises(TokenValidationError) as err:
        v.validate(unsecured_token(scope=["other"]))
    assert err.value.json() == '{"status":"insufficient_scope", "scope":"kafka"}'
    skewed = UnsecuredJwsValidator(allowable_clock_skew_ms=5000)
    assert skewed.validate(unsecured_token(exp=now_ms / 1000 - 2, iat=now_ms / 1000 - 9)).principal_name == "alice"
    custom = UnsecuredJwsValidator.from_jaas_options({"unsecuredValidatorPrincipalClaimName": "client_id"})
    assert custom.validate(unsecured_token(client_id="svc")).principal_name == "svc"
    with pytest.raises(ValueError):
        UnsecuredJwsValidator.from_jaas_options({"unsecuredValidatorAllowableClockSkewMs": "-1"})


def test_jwt_validator_rules(tmp_path, idp):
    jwks_file = tmp_path / "jwks.json"
    now = [0.0]
    jwks_file.write_text(json.dumps({"keys": idp._public_jwks}))
    cache = JwksCache(jwks_file.as_uri(), refresh_ms=3_600_000, missing_key_refresh_ms=10_000, clock_ms=lambda: now[0])
    v = JwtValidator(cache, expected_audience=(AUDIENCE,), expected_issuer=idp.issuer, clock_skew_s=0)
    assert v.validate(idp.token("etl-job")).principal_name == "etl-job"
    assert v.validate(idp.token("etl-job", kid=False)).principal_name == "etl-job"  # the set's one key
    other_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    refused = {
        "other key": idp.token("etl-job", key=other_key),
        "expired": idp.token("etl-job", lifetime_s=-5),
        "other audience": idp.token("etl-job", audience="someone-else"),
        "no audience": idp.token("etl-job", audience=None),
        "other issuer": idp.token("etl-job", issuer="https://evil.example"),
        "no iat": idp.token("etl-job", iat=None),
        "unsigned": unsecured_token("etl-job", aud=AUDIENCE, iss=idp.issuer),
        "hmac": __import__("jwt").encode({"sub": "x", "exp": time.time() + 60, "iat": time.time(), "aud": AUDIENCE},
                                         "secret", algorithm="HS256"),
        "not a jwt": "abc",
    }
    for name, token in refused.items():
        with pytest.raises(TokenValidationError):
            v.validate(token)
        assert name
    assert cache.fetches == 1  # every key id above was known, or the token was refused before
    # The provider rotates its key. A token with an unknown key id fetches the set again, at
    # most once per missing_key_refresh_ms (the first fetch was at 0 ms).
    old_kid = idp.kid
    idp.rotate()
    fresh = idp.token("etl-job")
    for at_ms, fetches in ((5_000, 1), (10_000, 2), (15_000, 2)):  # the file does not hold it yet
        now[0] = at_ms
        with pytest.raises(TokenValidationError):
            v.validate(fresh)
        assert cache.fetches == fetches, at_ms
    jwks_file.write_text(json.dumps({"keys": idp._public_jwks}))
    with pytest.raises(TokenValidationError):
        v.validate(fresh)
    assert cache.fetches == 2
    now[0] = 20_000
    assert v.validate(fresh).principal_name == "etl-job"
    assert cache.fetches == 3 and old_kid != idp.kid
    with pytest.raises(TokenValidationError):  # the old key left the set with the fetch
        v.validate(idp.token("etl-job", kid=old_kid))


def test_a_hanging_provider_holds_a_thread_at_most_the_wait_bound():
    """A provider that accepts the connection and never answers: a token waits at most
    limits.OAUTHBEARER_JWKS_WAIT_MS for the key set and is refused; callers meanwhile start no
    second fetch (one in flight, on its own thread)."""
    import socket
    import threading

    from litemq import limits

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    try:
        cache = JwksCache(f"http://127.0.0.1:{server.getsockname()[1]}/jwks", refresh_ms=3_600_000)
        v = JwtValidator(cache)
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        signed = __import__("jwt").encode({"sub": "x", "iat": int(time.time()), "exp": time.time() + 60}, key,
                                          algorithm="RS256", headers={"kid": "k1"})
        timings = []

        def attempt():
            started = time.monotonic()
            with pytest.raises(TokenValidationError):
                v.validate(signed)
            timings.append(time.monotonic() - started)

        threads = [threading.Thread(target=attempt) for _ in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        bound_s = limits.OAUTHBEARER_JWKS_WAIT_MS / 1000
        assert len(timings) == 3 and all(bound_s * 0.9 <= t < bound_s + 1.0 for t in timings), timings
        assert cache.fetches == 1
    finally:
        server.close()


def test_https_provider_is_verified_against_the_configured_ca(pki):
    """An https JWKS endpoint: verified with the JAAS option ``ssl.truststore.location`` (PEM);
    with the system's CAs, the test CA's certificate is refused and so is every token."""
    import ssl

    from litemq.broker.handlers.sasl import oauthbearer_validator

    server_tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_tls.load_cert_chain(str(pki.server_pem))
    provider = OAuthProvider(CLIENTS, tls=server_tls)
    try:
        base = {"listeners": "SASL_SSL://127.0.0.1:0", "sasl.enabled.mechanisms": "OAUTHBEARER",
                "listener.name.sasl_ssl.oauthbearer.sasl.server.callback.handler.class": JWT_VALIDATOR_CLASS,
                "sasl.oauthbearer.jwks.endpoint.url": provider.jwks_url}
        trusting = oauthbearer_validator(BrokerConfig.from_sources(overrides={
            **base, "listener.name.sasl_ssl.oauthbearer.sasl.jaas.config":
                "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
                f'ssl.truststore.location="{pki.ca_pem}";'}), "SASL_SSL")
        assert trusting.validate(provider.token("etl-job")).principal_name == "etl-job"
        untrusting = oauthbearer_validator(BrokerConfig.from_sources(overrides=base), "SASL_SSL")
        with pytest.raises(TokenValidationError):
            untrusting.validate(provider.token("etl-job"))
        assert provider.jwks_requests == 1  # the refused handshake never reached the provider
    finally:
        provider.close()


def test_bad_oauthbearer_settings_stop_the_broker():
    base = {"listeners": "SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms": "OAUTHBEARER"}
    validate_sasl_settings(BrokerConfig.from_sources(overrides=base))  # the unsecured default is valid
    bad = [
        {"listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class": "com.example.Custom"},
        {"listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class": JWT_VALIDATOR_CLASS},
        {"listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class": JWT_VALIDATOR_CLASS,
         "sasl.oauthbearer.jwks.endpoint.url": "ftp://idp/jwks"},
        {"listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config":
            'org.apache.kafka.common.security.plain.PlainLoginModule required user_a="b";'},
        {"oauthbearer.sasl.jaas.config": "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule "
                                         'required unsecuredValidatorAllowableClockSkewMs="soon";'},
        {"listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class": JWT_VALIDATOR_CLASS,
         "sasl.oauthbearer.jwks.endpoint.url": "https://idp.example/jwks",
         "oauthbearer.sasl.jaas.config": "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule "
                                         'required ssl.truststore.location="/nonexistent/ca.pem";'},
    ]
    for extra in bad:
        with pytest.raises(ValueError):
            validate_sasl_settings(BrokerConfig.from_sources(overrides={**base, **extra}))


# ------------------------------------------------------------------ the exchange on the wire
def test_valid_token_session_lasts_until_the_token_expires(broker):
    with _wire(broker) as w:
        resp = _authenticate(w, unsecured_token("alice", lifetime_s=30, scope="kafka"))
        assert resp.auth_bytes == b"" and 28_000 <= resp.session_lifetime_ms <= 30_000
        assert _metadata_ok(w)
        assert w.request(36, 2, {"auth_bytes": b"x"}).error_code == ErrorCode.ILLEGAL_SASL_STATE
    with _wire(broker) as w:  # expires: the next request closes the connection; a new token renews
        assert _authenticate(w, unsecured_token("alice", lifetime_s=1.5, scope="kafka")).session_lifetime_ms <= 1500
        time.sleep(1.1)
        assert _authenticate(w, unsecured_token("alice", lifetime_s=30, scope="kafka")).session_lifetime_ms > 28_000
        time.sleep(0.6)
        assert _metadata_ok(w)
    before = _authentication_counts(broker)
    with _wire(broker) as w:
        _authenticate(w, unsecured_token("alice", lifetime_s=1.0, scope="kafka"))
        time.sleep(1.2)
        with pytest.raises(ConnectionError):
            _metadata_ok(w)
    after = _authentication_counts(broker)
    key = ("expired_connections_killed", "UNSECURED")
    assert after.get(key, 0) == before.get(key, 0) + 1
    assert after[("successful_authentication", "UNSECURED")] == before[("successful_authentication", "UNSECURED")] + 1


def test_invalid_token_gets_the_json_error_then_fails_on_the_clients_ack(broker):
    failed = _authentication_counts(broker).get(("failed_authentication", "UNSECURED"), 0)
    with _wire(broker) as w:
        resp = _authenticate(w, unsecured_token("alice", lifetime_s=-1, scope="kafka"))
        assert resp.error_code == ErrorCode.NONE and resp.auth_bytes == INVALID_TOKEN.encode()
        with pytest.raises(WireSaslError) as err:
            w.sasl_authenticate(b"\x01")
        assert (err.value.error_code, err.value.error_message) == (ErrorCode.SASL_AUTHENTICATION_FAILED, INVALID_TOKEN)
        assert w.is_closed_by_peer()
    assert _authentication_counts(broker)[("failed_authentication", "UNSECURED")] == failed + 1
    with _wire(broker) as w:  # a missing required scope says which
        resp = _authenticate(w, unsecured_token("alice", scope="other"))
        assert json.loads(resp.auth_bytes) == {"status": "insufficient_scope", "scope": REQUIRED_SCOPE}
        # the client may try again with another token instead of acknowledging
        assert w.sasl_authenticate(_message(unsecured_token("alice", scope="kafka"))).auth_bytes == b""
        assert _metadata_ok(w)


def test_malformed_messages_and_foreign_authorization_ids_fail(broker):
    for message in (b"n,,\x01auth=Bearer\x01\x01", b"garbage", b"\x01"):
        with _wire(broker) as w:
            w.sasl_handshake("OAUTHBEARER")
            with pytest.raises(WireSaslError) as err:
                w.sasl_authenticate(message)
            assert err.value.error_message == GENERIC_FAILURE
            assert w.is_closed_by_peer()
    with _wire(broker) as w:
        with pytest.raises(WireSaslError) as err:
            _authenticate(w, unsecured_token("alice", scope="kafka"), authzid="admin")
        assert err.value.error_message == ("Authentication failed: Client requested an authorization id (admin) that "
                                           "is different from the token's principal name (alice)")
    with _wire(broker) as w:  # an equal authorization id and extensions are accepted
        assert _authenticate(w, unsecured_token("alice", scope="kafka"), authzid="alice", traceId="t1").error_code == 0
        assert _metadata_ok(w)


def test_reauthentication_needs_the_same_principal(broker):
    with _wire(broker) as w:
        _authenticate(w, unsecured_token("alice", lifetime_s=30, scope="kafka"))
        with pytest.raises(WireSaslError) as err:
            _authenticate(w, unsecured_token("mallory", lifetime_s=30, scope="kafka"))
        assert err.value.error_message == "Cannot change principals during re-authentication from User.alice: User.mallory"


def test_signed_listener_refuses_what_is_not_the_providers(broker, idp):
    refused = [unsecured_token("etl-job", aud=AUDIENCE, iss=idp.issuer),
               idp.token("etl-job", key=rsa.generate_private_key(public_exponent=65537, key_size=2048)),
               idp.token("etl-job", audience="someone-else"), idp.token("etl-job", issuer="http://evil.example")]
    for token in refused:
        with _wire(broker, "SIGNED") as w:
            assert _authenticate(w, token).auth_bytes == INVALID_TOKEN.encode()
    with _wire(broker, "SIGNED") as w:
        assert 58_000 <= _authenticate(w, idp.token("etl-job")).session_lifetime_ms <= 60_000
        assert _metadata_ok(w)


def test_signed_listener_follows_a_key_rotation(broker, idp):
    with _wire(broker, "SIGNED") as w:
        _authenticate(w, idp.token("etl-job"))
    fetched = idp.jwks_requests
    idp.rotate()
    # A new key id fetches the provider's set again, if the last fetch is 10 s old
    # (limits.OAUTHBEARER_JWKS_MISSING_KEY_REFRESH_MS); earlier tokens are refused meanwhile.
    deadline = time.monotonic() + 15
    while True:
        with _wire(broker, "SIGNED") as w:
            if _authenticate(w, idp.token("etl-job")).auth_bytes == b"":
                assert _metadata_ok(w)
                break
        assert time.monotonic() < deadline
        time.sleep(0.5)
    assert idp.jwks_requests == fetched + 1


# ------------------------------------------------------------------ real clients
def test_confluent_kafka_unsecured_tokens_and_acls(broker):
    def conf(principal: str, scope: str = REQUIRED_SCOPE) -> dict:
        return {"bootstrap.servers": broker.bootstrap("UNSECURED"), "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "OAUTHBEARER", "enable.sasl.oauthbearer.unsecure.jwt": True,
                "sasl.oauthbearer.config": f"principal={principal} scope={scope}"}

    topic = unique_name("oauth-ck")
    assert _produce_result(conf("alice"), topic) == [None]
    assert _produce_result(conf("alice"), GUARDED) == [None]
    log_start = broker.log_path.stat().st_size
    denied = _produce_result(conf("mallory"), GUARDED)
    assert len(denied) == 1 and denied[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    log = broker.log_path.read_bytes()[log_start:].decode(errors="replace")  # Kafka's authorizer audit line
    assert ("INFO kafka.authorizer.logger: Principal = User:mallory is Denied operation = DESCRIBE from host = "
            "127.0.0.1 on resource = ResourcePattern(resourceType=TOPIC, name=guarded, patternType=LITERAL) for "
            "request = Metadata with resourceRefCount = 1") in log, log[-2000:]
    errors = []
    producer = Producer({**conf("alice", scope="other"), "error_cb": errors.append, "message.timeout.ms": 3000})
    producer.produce(topic, b"never")
    producer.flush(5)
    assert any(e.code() == KafkaError._AUTHENTICATION and '"insufficient_scope"' in e.str() for e in errors), errors
    consumer = Consumer({**conf("alice"), "group.id": topic, "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    deadline, got = time.monotonic() + TIMEOUT_S, None
    while got is None and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        got = msg.value() if msg is not None and msg.error() is None else None
    consumer.close()
    assert got == b"v"


def test_confluent_kafka_oidc_client_credentials(broker, idp):
    def conf(client_id: str) -> dict:
        return {"bootstrap.servers": broker.bootstrap("SIGNED"), "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "OAUTHBEARER", "sasl.oauthbearer.method": "oidc",
                "sasl.oauthbearer.client.id": client_id, "sasl.oauthbearer.client.secret": CLIENTS[client_id],
                "sasl.oauthbearer.token.endpoint.url": idp.token_url, "sasl.oauthbearer.scope": "kafka"}

    asked = idp.token_requests
    topic = unique_name("oauth-oidc")
    assert _produce_result(conf("etl-job"), topic) == [None]
    assert _produce_result(conf("etl-job"), GUARDED) == [None]
    denied = _produce_result(conf("intruder"), GUARDED)
    assert len(denied) == 1 and denied[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert idp.token_requests >= asked + 3  # each producer fetched its token from the provider


def test_librdkafka_reauthenticates_with_fresh_tokens(broker, idp):
    # librdkafka asks for a new token at 80 % of its lifetime and re-authenticates a connection
    # at 90 % of its session; a shorter lifetime leaves too little time between the two on a
    # loaded machine (a re-authentication with the old token gets a session too short to renew).
    lifetime_s = 10.0
    tokens = []

    def oauth_cb(config):
        token = idp.token("etl-job", lifetime_s=lifetime_s)
        tokens.append(token)
        return token, time.time() + lifetime_s

    topic = unique_name("oauth-reauth")
    log_start = broker.log_path.stat().st_size
    conf = {"bootstrap.servers": broker.bootstrap("SIGNED"), "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "OAUTHBEARER", "oauth_cb": oauth_cb}
    sent, received, errors = produce_and_consume_for(conf, topic, 2.2 * lifetime_s, TIMEOUT_S)
    assert received == sent and errors == []
    log = broker.log_path.read_bytes()[log_start:].decode(errors="replace")
    reauths = log.count("Successful re-authentication of User:etl-job with OAUTHBEARER")
    assert reauths >= 2, log[-3000:]
    assert _authentication_counts(broker)[("successful_reauthentication", "SIGNED")] >= reauths
    assert "SASL session of" not in log  # no connection was closed for an expired session
    assert len(tokens) >= 3


class _TokenProvider(AbstractTokenProvider):
    def __init__(self, make):
        super().__init__()
        self.make = make

    def token(self):
        return self.make()

    def extensions(self):
        return {"traceId": "kafka-python"}


def test_kafka_python_token_provider(broker, idp):
    topic = unique_name("oauth-kp")
    for listener, make in (("UNSECURED", lambda: unsecured_token("alice", scope="kafka")),
                           ("SIGNED", lambda: idp.token("etl-job"))):
        kw = dict(bootstrap_servers=broker.bootstrap(listener), security_protocol="SASL_PLAINTEXT",
                  sasl_mechanism="OAUTHBEARER", sasl_oauth_token_provider=_TokenProvider(make))
        producer = KafkaProducer(**kw)
        producer.send(topic, listener.encode()).get(TIMEOUT_S)
        producer.close()
    consumer = KafkaConsumer(topic, auto_offset_reset="earliest", consumer_timeout_ms=10_000, **kw)
    got = []
    for m in consumer:
        got.append(m.value)
        if len(got) == 2:
            break
    consumer.close()
    assert sorted(got) == [b"SIGNED", b"UNSECURED"]


def test_aiokafka_token_provider(broker, idp):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.abc import AbstractTokenProvider as AioTokenProvider
    from aiokafka.errors import KafkaError as AioKafkaError

    class Provider(AioTokenProvider):
        def __init__(self, sub):
            self.sub = sub

        async def token(self):
            return idp.token(self.sub)

    async def run():
        topic = unique_name("oauth-aio")
        kw = dict(bootstrap_servers=broker.bootstrap("SIGNED"), security_protocol="SASL_PLAINTEXT",
                  sasl_mechanism="OAUTHBEARER")
        producer = AIOKafkaProducer(sasl_oauth_token_provider=Provider("etl-job"), **kw)
        await producer.start()
        try:
            await producer.send_and_wait(topic, b"aio")
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(topic, auto_offset_reset="earliest",
                                    sasl_oauth_token_provider=Provider("etl-job"), **kw)
        await consumer.start()
        try:
            msg = await asyncio.wait_for(consumer.getone(), TIMEOUT_S)
        finally:
            await consumer.stop()
        assert msg.value == b"aio"
        intruder = AIOKafkaProducer(sasl_oauth_token_provider=Provider("intruder"), **kw)
        await intruder.start()
        try:
            with pytest.raises(AioKafkaError):
                await intruder.send_and_wait(GUARDED, b"no")
        finally:
            await intruder.stop()

    asyncio.run(run())


def test_cli_takes_a_java_clients_oauthbearer_settings(broker, idp, tmp_path):
    """``--command-config`` files written for Kafka's Java tools: the OIDC client-credentials
    login and the unsecured login are translated to librdkafka's settings."""
    topic = unique_name("oauth-cli")
    oidc = tmp_path / "oidc.properties"
    oidc.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=OAUTHBEARER\n"
                    f"sasl.oauthbearer.token.endpoint.url={idp.token_url}\n"
                    "sasl.login.callback.handler.class=org.apache.kafka.common.security.oauthbearer."
                    "OAuthBearerLoginCallbackHandler\n"
                    "sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
                    f'clientId="etl-job" clientSecret="{CLIENTS["etl-job"]}" scope="kafka";\n')
    unsecured = tmp_path / "unsecured.properties"
    unsecured.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=OAUTHBEARER\n"
                         "sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule "
                         'required unsecuredLoginStringClaim_sub="alice" unsecuredLoginListClaim_scope=",kafka,x";\n')
    env = {k: v for k, v in os.environ.items() if k != "LITEMQ_CLIENT_CONFIG"}
    for conf, listener, value in ((oidc, "SIGNED", "from-oidc"), (unsecured, "UNSECURED", "from-unsecured")):
        res = subprocess.run([sys.executable, "-m", "litemq.cli", "produce", topic, "--command-config", str(conf),
                              "-b", broker.bootstrap(listener)], input=value + "\n", capture_output=True, text=True,
                             env=env, timeout=60, check=False)
        assert res.returncode == 0, res.stderr
    consumer = Consumer({"bootstrap.servers": broker.bootstrap("PLAINTEXT"), "group.id": topic,
                         "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    got, deadline = [], time.monotonic() + TIMEOUT_S
    while len(got) < 2 and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            got.append(msg.value())
    consumer.close()
    assert sorted(got) == [b"from-oidc", b"from-unsecured"]


def _http_get(broker, path: str, token: str | None) -> tuple[int, dict, object]:
    headers = {} if token is None else {"Authorization": f"Bearer {token}"}
    req = urllib.request.Request(broker.http_url + path, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=TIMEOUT_S) as resp:
            return resp.status, resp.headers, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers, json.loads(exc.read())


def test_http_port_takes_bearer_tokens(broker, idp):
    """``Authorization: Bearer`` on the REST API (RFC 6750): a token either listener's validator
    accepts; its principal is the one the ACLs judge; a bad token gets 401 and a Bearer challenge."""
    status, _, clusters = _http_get(broker, "/v3/clusters", idp.token("etl-job"))
    assert status == 200
    path = f"/v3/clusters/{clusters['data'][0]['cluster_id']}/topics/{GUARDED}"
    for token, expected in ((idp.token("etl-job"), 200), (unsecured_token("alice", scope="kafka"), 200),
                            (idp.token("intruder"), 404), (unsecured_token("mallory", scope="kafka"), 404)):
        # a topic its caller may not describe is hidden, as Kafka's Metadata hides it
        status, _, body = _http_get(broker, path, token)
        assert status == expected, body
    for bad in (idp.token("etl-job", lifetime_s=-60), unsecured_token("alice", scope="other"), "not-a-token"):
        status, headers, body = _http_get(broker, path, bad)
        assert status == 401 and body["message"] == "Authentication failed: invalid bearer token"
        assert 'Bearer realm="LiteMQ", error="invalid_token"' in headers.get_all("WWW-Authenticate")


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is not installed (CI installs it with apt-get)")
def test_kcat_unsecured_tokens(broker):
    """Debian's kcat (librdkafka 2.0) with its own unsecured tokens: produce, then consume."""
    topic = unique_name("oauth-kcat")
    auth = ["-b", broker.bootstrap("UNSECURED"), "-X", "security.protocol=SASL_PLAINTEXT",
            "-X", "sasl.mechanism=OAUTHBEARER", "-X", "enable.sasl.oauthbearer.unsecure.jwt=true",
            "-X", f"sasl.oauthbearer.config=principal=alice scope={REQUIRED_SCOPE}"]
    subprocess.run(["kcat", "-P", "-t", topic, *auth], input=b"a\nb\nc\n", check=True, timeout=60)
    out = subprocess.run(["kcat", "-C", "-t", topic, "-o", "beginning", "-e", "-q", *auth],
                         capture_output=True, check=True, timeout=60).stdout
    assert out.split() == [b"a", b"b", b"c"]
    refused = subprocess.run(["kcat", "-L", *auth[:-1], "sasl.oauthbearer.config=principal=alice scope=other",
                              "-m", "5"], capture_output=True, timeout=60)
    assert refused.returncode != 0 and b"insufficient_scope" in refused.stderr


def test_clients_that_cannot_reauthenticate_are_counted(broker):
    """Kafka's successful-authentication-no-reauth: SaslAuthenticate v0, or raw tokens after
    SaslHandshake v0, cannot re-authenticate (KIP-368); v1+ can."""
    key = ("successful_authentication_no_reauth", "UNSECURED")
    before = _authentication_counts(broker).get(key, 0)
    token = unsecured_token("alice", scope="kafka")
    with _wire(broker) as w:
        assert _authenticate(w, token, version=0).auth_bytes == b""
        assert _metadata_ok(w)
    with _wire(broker) as w:
        assert w.request(17, 0, {"mechanism": "OAUTHBEARER"}).error_code == ErrorCode.NONE
        w.send_raw(struct.pack(">i", len(_message(token))) + _message(token))
        assert w.read_frame() == b""
        assert _metadata_ok(w)
    with _wire(broker) as w:
        _authenticate(w, token, version=1)
    assert _authentication_counts(broker)[key] == before + 2
