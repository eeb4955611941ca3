"""TLS client certificates as Kafka principals under the authorizer (issue 12).

One SSL listener with ``ssl.client.auth=required`` and the StandardAuthorizer. A client's
principal is ``User:`` + its certificate's subject DN as Java's ``X500Principal.getName()``
prints it (Kafka ``ssl.principal.mapping.rules=DEFAULT``), e.g. ``User:CN=client,OU=test,O=LiteMQ``;
the super user is a certificate too. A client gets access only through ACLs naming exactly
that DN: another certificate of the same CA, the bare CN, or the DN spelled with spaces
(``CN=client, OU=test, O=LiteMQ``) get nothing.
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from litemq.security.acl_operations import AclOperation as O
from litemq.security.acl_operations import ResourceType as R
from litemq.protocol.errors import ErrorCode as E
from litemq.security.acls import AclPermissionType as P
from litemq.testing.process import BrokerProcess
from litemq.testing.wire import WireClient
from tests.security.security_helpers import (
    STANDARD_AUTHORIZER,
    AdminWire,
    one_record_batch,
)

TIMEOUT_S = 20


@pytest.fixture(scope="module")
def mtls(pki, tmp_path_factory):
    admin_cert, admin_key, admin_dn = pki.issue_client("admin", "ops")
    other_cert, other_key, other_dn = pki.issue_client("other")
    overrides = {**pki.broker_overrides(client_auth="required"), "inter.broker.listener.name": "SSL",
                 "authorizer.class.name": STANDARD_AUTHORIZER, "super.users": f"User:{admin_dn}"}
    with BrokerProcess(tmp_path_factory.mktemp("mtls") / "data", listeners={"SSL": 0}, overrides=overrides) as bp:
        ctx = pki.client_context()
        ctx.load_cert_chain(str(admin_cert), str(admin_key))
        admin = AdminWire(bp.ports["SSL"], ctx, user=None)  # the admin certificate, no SASL
        yield {"bp": bp, "admin": admin, "admin_files": (admin_cert, admin_key),
               "other": (other_cert, other_key, other_dn)}
        admin.close()


def _conf(bp, pki, cert=None, key=None) -> dict:
    return {"bootstrap.servers": bp.bootstrap("SSL"), "security.protocol": "SSL", "ssl.ca.location": str(pki.ca_pem),
            "ssl.certificate.location": str(cert or pki.client_pem), "ssl.key.location": str(key or pki.client_key),
            "log_level": 0}


def _produce(conf: dict, topic: str) -> KafkaError | None:
    results = []
    p = Producer({**conf, "message.timeout.ms": 10000})
    p.produce(topic, b"mtls", on_delivery=lambda err, msg: results.append(err))
    p.flush(TIMEOUT_S)
    assert results, "no delivery report"
    return results[0]


def _consume_one(conf: dict, topic: str, group: str):
    c = Consumer({**conf, "group.id": group, "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe([topic])
    try:
        deadline = time.monotonic() + TIMEOUT_S
        while time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                return m.error()
            c.commit(message=m, asynchronous=False)
            return m.value()
        return None
    finally:
        c.close()


def test_admin_certificate_is_the_super_user(mtls, pki):
    admin: AdminWire = mtls["admin"]
    admin.create_topic("mtls-admin")
    assert admin.produce("mtls-admin") == 0
    # the admin's DN as a super user works through a real client too
    a = AdminClient(_conf(mtls["bp"], pki, *mtls["admin_files"]))
    a.create_topics([NewTopic("mtls-admin-2", 1, 1)])["mtls-admin-2"].result(TIMEOUT_S)
    assert admin.partitions("mtls-admin-2") == 1


def test_client_certificate_principal_needs_an_acl_naming_its_dn(mtls, pki):
    bp, admin = mtls["bp"], mtls["admin"]
    topic, group = "mtls-orders", "mtls-orders-readers"
    admin.create_topic(topic)
    conf = _conf(bp, pki)
    principal = "User:" + pki.client_dn
    assert principal == "User:CN=client,OU=test,O=LiteMQ"

    # no ACL: refused with Kafka's code, nothing appended
    err = _produce(conf, topic)
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, err
    assert admin.offsets(topic) == (0, 0)

    # ACLs naming something close to the DN but not it do not apply
    near_misses = ["User:CN=client", "User:CN=client, OU=test, O=LiteMQ", "User:client",
                   "User:" + mtls["other"][2], "User:cn=client,ou=test,o=LiteMQ"]
    admin.create_acls([(R.TOPIC, topic, p, O.WRITE, P.ALLOW) for p in near_misses])
    err = _produce(conf, topic)
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, err
    assert admin.offsets(topic) == (0, 0)

    # the ACLs naming exactly the DN grant produce and consume with a group
    admin.create_acls([(R.TOPIC, topic, principal, O.WRITE, P.ALLOW), (R.TOPIC, topic, principal, O.READ, P.ALLOW),
                       (R.GROUP, group, principal, O.READ, P.ALLOW)])
    assert _produce(conf, topic) is None
    assert admin.offsets(topic) == (0, 1)
    assert _consume_one(conf, topic, group) == b"mtls"
    assert admin.committed(group, topic) == 1

    # another certificate of the same CA has only what names its own DN: the WRITE above (one of
    # the client's near misses), not the client's READ and group ACLs
    other_cert, other_key, _ = mtls["other"]
    other = _conf(bp, pki, other_cert, other_key)
    assert _produce(other, topic) is None
    assert admin.offsets(topic) == (0, 2)
    err = _consume_one(other, topic, group)
    assert isinstance(err, KafkaError) and err.code() == KafkaError.GROUP_AUTHORIZATION_FAILED, err
    assert admin.committed(group, topic) == 1


def test_deny_on_the_dn_beats_allow(mtls, pki):
    bp, admin = mtls["bp"], mtls["admin"]
    topic = "mtls-denied"
    admin.create_topic(topic)
    principal = "User:" + pki.client_dn
    admin.create_acls([(R.TOPIC, topic, principal, O.ALL, P.ALLOW), (R.TOPIC, topic, principal, O.WRITE, P.DENY)])
    err = _produce(_conf(bp, pki), topic)
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, err
    assert admin.offsets(topic) == (0, 0)
    # the raw answer carries Kafka's code; DESCRIBE (from ALL) still shows the topic
    ctx = pki.client_context(with_cert=True)
    with WireClient("127.0.0.1", bp.ports["SSL"], ssl_context=ctx) as w:
        r = w.request(3, 12, {"topics": [{"name": topic}], "allow_auto_topic_creation": False})
        assert r.topics[0].error_code == E.NONE
        r = w.request(0, 9, {"acks": -1, "timeout_ms": 10000, "topic_data": [
            {"name": topic, "partition_data": [{"index": 0, "records": one_record_batch(b"raw")}]}]})
        assert r.responses[0].partition_responses[0].error_code == E.TOPIC_AUTHORIZATION_FAILED

