"""SASL/OAUTHBEARER on a 3-broker cluster: every broker checks the provider's signed tokens.

A LocalCluster whose brokers have one SASL_PLAINTEXT listener offering only OAUTHBEARER with
Kafka's ``OAuthBearerValidatorCallbackHandler`` against the stand-in OAuth provider's JWKS
(``oauth_idp.py``). confluent-kafka clients log in with librdkafka's OIDC client-credentials
flow: an admin client creates a replicated topic, an acks=all producer writes to every
partition leader, a consumer group reads everything back through its coordinator, and each
broker alone as bootstrap server accepts the token and refuses an unsigned one.
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from litemq.security.oauthbearer import JWT_VALIDATOR_CLASS
from litemq.testing.cluster import LocalCluster
from litemq.testing.wire import WireClient
from tests.integration.admin_helpers import unique_name
from tests.security.oauth_idp import AUDIENCE, CLIENTS, OAuthProvider, unsecured_token

TIMEOUT_S = 30


@pytest.fixture(scope="module")
def cluster(idp, tmp_path_factory):
    overrides = {"sasl.enabled.mechanisms": "OAUTHBEARER",
                 "listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class": JWT_VALIDATOR_CLASS,
                 "sasl.oauthbearer.jwks.endpoint.url": idp.jwks_url,
                 "sasl.oauthbearer.expected.audience": AUDIENCE, "sasl.oauthbearer.expected.issuer": idp.issuer}
    with LocalCluster(tmp_path_factory.mktemp("oauth-cluster"), 3, overrides=overrides,
                      listeners={"SASL_PLAINTEXT": 0}) as c:
        yield c


def _conf(bootstrap: str, idp: OAuthProvider) -> dict:
    return {"bootstrap.servers": bootstrap, "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER",
            "sasl.oauthbearer.method": "oidc", "sasl.oauthbearer.client.id": "etl-job",
            "sasl.oauthbearer.client.secret": CLIENTS["etl-job"], "sasl.oauthbearer.token.endpoint.url": idp.token_url}


def test_oidc_clients_on_a_replicated_topic(cluster, idp):
    ports = [cluster.node(i).ports["SASL_PLAINTEXT"] for i in cluster.node_ids]
    bootstrap = ",".join(f"127.0.0.1:{p}" for p in ports)
    topic = unique_name("oauth-rf3")
    admin = AdminClient(_conf(bootstrap, idp))
    for fut in admin.create_topics([NewTopic(topic, 6, 3)]).values():
        fut.result(TIMEOUT_S)
    producer = Producer({**_conf(bootstrap, idp), "acks": "all", "enable.idempotence": True})
    delivered = []
    for i in range(300):
        producer.produce(topic, b"%d" % i, partition=i % 6,
                         on_delivery=lambda err, msg: delivered.append(err is None))
    assert producer.flush(TIMEOUT_S) == 0 and delivered == [True] * 300
    consumer = Consumer({**_conf(bootstrap, idp), "group.id": topic, "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    got, deadline = set(), time.monotonic() + TIMEOUT_S
    while len(got) < 300 and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            got.add(int(msg.value()))
    consumer.close()
    assert got == set(range(300))
    for port in ports:  # each broker on its own checks signed tokens and refuses unsigned ones
        for token, accepted in ((idp.token("etl-job"), True), (unsecured_token("etl-job"), False)):
            with WireClient("127.0.0.1", port) as w:
                w.sasl_handshake("OAUTHBEARER")
                answer = w.sasl_authenticate(f"n,,\x01auth=Bearer {token}\x01\x01".encode()).auth_bytes
                assert (answer == b"") == accepted, (port, answer)
