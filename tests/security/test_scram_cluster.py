"""SCRAM users and ACLs changed at runtime reach every broker of a 3-broker cluster (issue 12).

A LocalCluster with one SASL_SSL listener per broker (inter-broker traffic, the RPC port, is
mutual TLS), the StandardAuthorizer and the super user ``admin`` (PLAIN, JAAS). Through broker 1
the super user creates a SCRAM user (SHA-256 and SHA-512, KIP-554) and its ACLs; then that user
authenticates and produces/consumes with each broker alone as bootstrap server. The credentials
and ACLs live in the replicated metadata log, so the other brokers learn them a moment later;
the test waits (bounded) for each broker to accept the user. A user created through broker 3
without ACLs authenticates everywhere and is refused by the authorizer. The user is then deleted
through broker 2 and new connections fail with SASL_AUTHENTICATION_FAILED on every broker.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from confluent_kafka import Consumer, KafkaError, Producer

from litemq.security.acl_operations import AclOperation as O
from litemq.security.acl_operations import ResourceType as R
from litemq.protocol.errors import ErrorCode as E
from litemq.security.acls import AclPermissionType as P
from litemq.testing.cluster import LocalCluster, wait_for
from litemq.testing.wire import WireSaslError
from tests.security.security_helpers import (
    ADMIN_PASSWORD,
    ADMIN_USER,
    AdminWire,
    connect,
    sasl_ssl_overrides,
    scram_upsertion,
)

PROPAGATION_TIMEOUT_S = 20
"""How long a broker may take to apply a metadata change made through another broker."""
CLIENT_TIMEOUT_S = 20
USER, PASSWORD = "carol", "carol-secret"
MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")


@pytest.fixture(scope="module")
def cluster(pki, tmp_path_factory):
    with LocalCluster(tmp_path_factory.mktemp("scram-cluster"), 3, overrides=sasl_ssl_overrides(pki),
                      listeners={"SASL_SSL": 0}) as c:
        yield c


def _ports(cluster) -> dict[int, int]:
    return {i: cluster.node(i).ports["SASL_SSL"] for i in cluster.node_ids}


def _auth_error(port: int, ctx, mechanism: str, user: str, password: str) -> int:
    """0 when ``user`` authenticates on the broker at ``port``, else the SaslAuthenticate error."""
    try:
        connect(port, ctx, user, password, mechanism).close()
        return E.NONE
    except WireSaslError as err:
        return err.error_code


def _ck_conf(port: int, pki, user: str, password: str, errors: list) -> dict:
    return {"bootstrap.servers": f"127.0.0.1:{port}", "security.protocol": "SASL_SSL",
            "ssl.ca.location": str(pki.ca_pem), "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": user,
            "sasl.password": password, "error_cb": errors.append, "log_level": 0}


def _end_offsets(port: int, pki, topic: str) -> list[int]:
    """The partitions' high watermarks, asked by the super user of each partition's leader."""
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient, OffsetSpec

    conf = {**_ck_conf(port, pki, ADMIN_USER, ADMIN_PASSWORD, []), "sasl.mechanism": "PLAIN"}
    admin = AdminClient(conf)  # kept alive until the futures are done
    res = admin.list_offsets({TopicPartition(topic, p): OffsetSpec.latest() for p in range(3)},
                             request_timeout=CLIENT_TIMEOUT_S)
    return [res[tp].result(CLIENT_TIMEOUT_S).offset for tp in sorted(res, key=lambda tp: tp.partition)]


def _produce(conf: dict, topic: str, values: list[bytes]) -> list:
    results = []
    p = Producer({**conf, "acks": "all", "enable.idempotence": True, "message.timeout.ms": CLIENT_TIMEOUT_S * 1000})
    for v in values:
        p.produce(topic, v, on_delivery=lambda err, msg: results.append(err))
    p.flush(CLIENT_TIMEOUT_S + 5)
    p.poll(0.1)
    return results


def _consume(conf: dict, topic: str, group: str, n: int) -> list[bytes]:
    c = Consumer({**conf, "group.id": group, "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe([topic])
    got: list[bytes] = []
    try:
        deadline = time.monotonic() + CLIENT_TIMEOUT_S
        while len(got) < n and time.monotonic() < deadline:
            for m in c.consume(100, 0.5):
                assert m.error() is None, m.error()
                got.append(m.value())
        if got:
            c.commit(asynchronous=False)
    finally:
        c.close()
    return got


def test_scram_user_created_at_runtime_works_on_every_broker_until_deleted(cluster, pki):
    ports, ctx = _ports(cluster), pki.client_context()
    admin1 = AdminWire(ports[1], ctx)
    topic = "scram-cluster"
    admin1.create_topic(topic, partitions=3, replication_factor=3)
    cluster.wait_leaders(topic, 3)

    # before: carol is unknown everywhere
    for port in ports.values():
        assert _auth_error(port, ctx, "SCRAM-SHA-512", USER, PASSWORD) == E.SASL_AUTHENTICATION_FAILED

    # the user and its ACLs, created at runtime through broker 1 only
    admin1.upsert_scram([scram_upsertion(USER, PASSWORD, m) for m in MECHANISMS])
    principal = f"User:{USER}"
    groups = {i: f"scram-cluster-via-{i}" for i in ports}
    admin1.create_acls([(R.TOPIC, topic, principal, O.WRITE, P.ALLOW), (R.TOPIC, topic, principal, O.READ, P.ALLOW)]
                       + [(R.GROUP, g, principal, O.READ, P.ALLOW) for g in groups.values()])

    for i, port in ports.items():
        for m in MECHANISMS:
            wait_for(lambda port=port, m=m: _auth_error(port, ctx, m, USER, PASSWORD) == E.NONE, PROPAGATION_TIMEOUT_S,
                     f"broker {i} does not accept {USER} with {m}")

    # produce and consume with each broker alone as the bootstrap server
    sent: list[bytes] = []
    for i, port in ports.items():
        errors: list = []
        conf = _ck_conf(port, pki, USER, PASSWORD, errors)
        values = [b"via-%d-%d" % (i, k) for k in range(20)]
        results = _produce(conf, topic, values)
        assert results == [None] * len(values), (i, results, errors)
        sent += values
        got = _consume(conf, topic, groups[i], len(sent))
        assert sorted(got) == sorted(sent), (i, len(got), len(sent))
        assert not [e for e in errors if e.code() == KafkaError._AUTHENTICATION], errors

    # a user created through broker 3 without ACLs: authenticated everywhere, authorized nowhere
    admin3 = AdminWire(ports[3], ctx)
    admin3.upsert_scram([scram_upsertion("dave", "dave-secret", "SCRAM-SHA-512")])
    for i, port in ports.items():
        wait_for(lambda port=port: _auth_error(port, ctx, "SCRAM-SHA-512", "dave", "dave-secret") == E.NONE,
                 PROPAGATION_TIMEOUT_S, f"broker {i} does not accept dave")
        with connect(port, ctx, "dave", "dave-secret", "SCRAM-SHA-512") as w:
            r = w.request(3, 12, {"topics": [{"name": topic}], "allow_auto_topic_creation": False})
            assert r.topics[0].error_code == E.TOPIC_AUTHORIZATION_FAILED, (i, E(r.topics[0].error_code).name)

    # deleted through broker 2: new connections fail on every broker
    end_before = _end_offsets(ports[1], pki, topic)
    AdminWire(ports[2], ctx).delete_scram(USER)
    for i, port in ports.items():
        for m in MECHANISMS:
            wait_for(lambda port=port, m=m: _auth_error(port, ctx, m, USER, PASSWORD) == E.SASL_AUTHENTICATION_FAILED,
                     PROPAGATION_TIMEOUT_S, f"broker {i} still accepts the deleted {USER} with {m}")

    def refused_client(item):
        i, port = item
        errors: list = []
        conf = {**_ck_conf(port, pki, USER, PASSWORD, errors), "message.timeout.ms": 4000}
        results = []
        p = Producer(conf)
        p.produce(topic, b"after-delete", on_delivery=lambda err, msg: results.append(err))
        p.flush(10)
        p.poll(0.1)
        return i, results, errors

    with ThreadPoolExecutor(len(ports)) as pool:
        for i, results, errors in pool.map(refused_client, ports.items()):
            assert results and results[0] is not None, (i, results)
            assert any(e.code() == KafkaError._AUTHENTICATION for e in errors), (i, errors)
    assert _end_offsets(ports[1], pki, topic) == end_before
