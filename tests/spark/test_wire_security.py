"""The Spark executors' fast-path reader (``litemq.spark.wire``) on secured listeners: TLS and
SASL PLAIN, SCRAM-SHA-256/512 and OAUTHBEARER (librdkafka's unsecured tokens and its OIDC
client-credentials login against the stand-in OAuth provider), with librdkafka's setting names.

One broker process with SASL_SSL (server certificate from a trustme CA), SASL_PLAINTEXT and an
OAUTHBEARER listener checking signed tokens. For each configuration: ``supports`` keeps the fast
path, and the reader fetches records written by confluent-kafka (same offsets and values).
Configurations the fast path cannot speak still fall back; refused logins raise AuthError with
the broker's error code; a session with a lifetime is replaced by a new connection.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import trustme
from confluent_kafka import Producer

from litemq.protocol.records import decode_records
from litemq.security.oauthbearer import JWT_VALIDATOR_CLASS
from litemq.spark.wire import WireClient, supports
from litemq.spark.wire_security import AuthError, security_from_config
from litemq.testing.process import BrokerProcess
from litemq.testing.wire import WireClient as RawClient
from tests.security.oauth_idp import AUDIENCE, CLIENTS, OAuthProvider
from tests.security.security_helpers import scram_upsertion

USER, PASSWORD = "reader", "reader-secret"
TOPIC = "secured"
N = 50


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    d: Path = tmp_path_factory.mktemp("wire-sec")
    ca = trustme.CA()
    ca.cert_pem.write_to_path(str(d / "ca.pem"))
    ca.issue_cert("127.0.0.1", "localhost").private_key_and_cert_chain_pem.write_to_path(str(d / "server.pem"))
    idp = OAuthProvider(CLIENTS)
    overrides = {
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,"
                                          "SIGNED:SASL_PLAINTEXT",
        "ssl.keystore.location": str(d / "server.pem"), "ssl.truststore.location": str(d / "ca.pem"),
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER",
        "plain.sasl.jaas.config": f'org.apache.kafka.common.security.plain.PlainLoginModule required '
                                  f'user_{USER}="{PASSWORD}";',
        "listener.name.signed.oauthbearer.sasl.server.callback.handler.class": JWT_VALIDATOR_CLASS,
        "listener.name.signed.sasl.oauthbearer.jwks.endpoint.url": idp.jwks_url,
        "sasl.oauthbearer.expected.audience": AUDIENCE,
    }
    with BrokerProcess(d / "data", overrides=overrides,
                       listeners={"PLAINTEXT": 0, "SASL_SSL": 0, "SASL_PLAINTEXT": 0, "SIGNED": 0}) as broker:
        with RawClient("127.0.0.1", broker.ports["PLAINTEXT"]) as admin:
            for m in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
                resp = admin.request(51, 0, {"deletions": [], "upsertions": [scram_upsertion(USER, PASSWORD, m, 4096)]})
                assert resp.results[0].error_code == 0
        producer = Producer({"bootstrap.servers": broker.bootstrap("PLAINTEXT")})
        for i in range(N):
            producer.produce(TOPIC, b"v%d" % i, partition=0)
        assert producer.flush(20) == 0
        yield broker, d, idp
    idp.close()


def _configs(broker, d, idp) -> dict[str, dict]:
    tls = {"ssl.ca.location": str(d / "ca.pem")}
    sasl_ssl = {"bootstrap.servers": broker.bootstrap("SASL_SSL"), "security.protocol": "SASL_SSL", **tls}
    sasl = {"bootstrap.servers": broker.bootstrap("SASL_PLAINTEXT"), "security.protocol": "sasl_plaintext"}
    return {
        "PLAIN over TLS": {**sasl_ssl, "sasl.mechanism": "PLAIN", "sasl.username": USER, "sasl.password": PASSWORD},
        "SCRAM-SHA-256 over TLS": {**sasl_ssl, "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": USER,
                                   "sasl.password": PASSWORD},
        "SCRAM-SHA-512": {**sasl, "sasl.mechanisms": "SCRAM-SHA-512", "sasl.username": USER, "sasl.password": PASSWORD},
        "OAUTHBEARER unsecured": {**sasl, "sasl.mechanism": "OAUTHBEARER", "enable.sasl.oauthbearer.unsecure.jwt": "true",
                                  "sasl.oauthbearer.config": "principal=reader scope=kafka lifeSeconds=60"},
        "OAUTHBEARER OIDC": {"bootstrap.servers": broker.bootstrap("SIGNED"), "security.protocol": "SASL_PLAINTEXT",
                             "sasl.mechanism": "OAUTHBEARER", "sasl.oauthbearer.method": "oidc",
                             "sasl.oauthbearer.client.id": "etl-job",
                             "sasl.oauthbearer.client.secret": CLIENTS["etl-job"],
                             "sasl.oauthbearer.token.endpoint.url": idp.token_url},
    }


def _values(client: WireClient) -> list[bytes]:
    part = client.fetch(TOPIC, 0, 0)
    return [r.value for r in decode_records(bytes(part.records), skip_control=True)]


def test_fast_path_reads_through_tls_and_every_sasl_mechanism(setup):
    broker, d, idp = setup
    for name, conf in _configs(broker, d, idp).items():
        assert supports(conf), name
        with WireClient(conf["bootstrap.servers"], timeout_s=10, security=security_from_config(conf)) as client:
            assert _values(client) == [b"v%d" % i for i in range(N)], name
            assert client.list_offset(TOPIC, 0, -1) == N


def test_what_the_fast_path_cannot_speak_falls_back(setup):
    broker, d, idp = setup
    base = {"bootstrap.servers": broker.bootstrap("SASL_PLAINTEXT"), "security.protocol": "SASL_PLAINTEXT"}
    for conf in ({**base, "sasl.mechanism": "GSSAPI"}, {**base},  # librdkafka's default mechanism is GSSAPI
                 {**base, "sasl.mechanism": "OAUTHBEARER"},  # a token from an oauth_cb
                 {**base, "sasl.mechanism": "PLAIN", "ssl.keystore.location": "/x.p12"},
                 {"bootstrap.servers": "h:1", "security.protocol": "SSL", "ssl.endpoint.identification.algorithm": "x"}):
        assert not supports(conf), conf


def test_refused_logins_raise_auth_error_with_the_brokers_code(setup):
    broker, d, idp = setup
    configs = _configs(broker, d, idp)
    wrong = {**configs["SCRAM-SHA-512"], "sasl.password": "wrong"}
    unsigned = {**configs["OAUTHBEARER unsecured"], "bootstrap.servers": broker.bootstrap("SIGNED")}
    for conf, code in ((wrong, 58), (unsigned, 58)):
        with WireClient(conf["bootstrap.servers"], timeout_s=10, security=security_from_config(conf)) as client:
            with pytest.raises(AuthError) as err:
                client.fetch(TOPIC, 0, 0)
            assert err.value.code == code


def test_a_session_with_a_lifetime_is_replaced_before_it_ends(setup):
    broker, d, idp = setup
    conf = {**_configs(broker, d, idp)["OAUTHBEARER unsecured"],
            "sasl.oauthbearer.config": "principal=reader scope=kafka lifeSeconds=2"}
    log_start = broker.log_path.stat().st_size
    with WireClient(conf["bootstrap.servers"], timeout_s=10, security=security_from_config(conf)) as client:
        assert len(_values(client)) == N
        first = dict(client._conns)
        time.sleep(2.2)  # past the token's expiry: the broker would close the old connection
        assert len(_values(client)) == N
        leader = client._leaders[(TOPIC, 0)]
        assert client._conns[leader] is not first[leader]  # a new connection, with a new token
    log = broker.log_path.read_bytes()[log_start:].decode(errors="replace")
    assert "SASL session of User:reader expired" not in log  # replaced before the broker had to close it


def test_oidc_over_https_with_extensions(setup, tmp_path):
    """``https.ca.location`` verifies an https token endpoint (librdkafka's setting), and
    ``sasl.oauthbearer.extensions`` travel in the client message as KIP-342 extensions."""
    import ssl as ssl_mod

    from litemq.security.oauthbearer import parse_initial_response
    from litemq.spark.wire_security import initial_response

    broker, d, idp = setup
    ca = trustme.CA()
    ca.cert_pem.write_to_path(str(tmp_path / "idp-ca.pem"))
    server_tls = ssl_mod.SSLContext(ssl_mod.PROTOCOL_TLS_SERVER)
    ca.issue_cert("127.0.0.1").configure_cert(server_tls)
    https_idp = OAuthProvider(CLIENTS, tls=server_tls)
    https_idp._key, https_idp.kid = idp._key, idp.kid  # same signing key as the broker's provider
    try:
        conf = {**_configs(broker, d, idp)["OAUTHBEARER OIDC"], "sasl.oauthbearer.token.endpoint.url":
                https_idp.token_url, "https.ca.location": str(tmp_path / "idp-ca.pem"),
                "sasl.oauthbearer.extensions": "traceId=abc,logicalCluster=lkc-1"}
        assert supports(conf)
        with WireClient(conf["bootstrap.servers"], timeout_s=10, security=security_from_config(conf)) as client:
            assert len(_values(client)) == N
        assert https_idp.token_requests == 1
        first = parse_initial_response(initial_response("t.k.n", conf["sasl.oauthbearer.extensions"]))
        assert first.extensions == {"traceId": "abc", "logicalCluster": "lkc-1"}
        untrusted = {**conf, "https.ca.location": str(d / "ca.pem"),  # the broker's CA, not the provider's
                     "sasl.oauthbearer.client.id": "intruder", "sasl.oauthbearer.client.secret": CLIENTS["intruder"]}
        with WireClient(conf["bootstrap.servers"], timeout_s=10, security=security_from_config(untrusted)) as client:
            with pytest.raises(AuthError, match="no token from"):
                client.fetch(TOPIC, 0, 0)
    finally:
        https_idp.close()
