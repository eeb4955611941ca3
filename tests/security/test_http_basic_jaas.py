"""HTTP Basic auth (RFC 7617) against the SASL/PLAIN users of the broker's listeners, whichever
JAAS key form configures them (issue 17).

A user accepted by SASL/PLAIN on some Kafka listener is accepted by ``Authorization: Basic`` on
the HTTP port, and no other JAAS user is: Kafka's per-listener and per-mechanism key
``listener.name.<l>.plain.sasl.jaas.config``, the per-listener ``listener.name.<l>.sasl.jaas.config``,
the broker-wide ``sasl.jaas.config`` and LiteMQ's ``plain.sasl.jaas.config``. Each broker is a
real process with a SASL_SSL listener (and no anonymous listener, so anonymous HTTP gets 401);
the Kafka port is checked with confluent-kafka and with raw SaslAuthenticate requests.
"""

from __future__ import annotations

import base64
import json
import urllib.error
import urllib.request

import pytest
from confluent_kafka.admin import AdminClient

from litemq.testing.process import BrokerProcess
from litemq.testing.wire import WireSaslError
from tests.observability.helpers import http
from tests.security.security_helpers import connect

LOGIN = "org.apache.kafka.common.security.plain.PlainLoginModule required"
TIMEOUT_S = 20


def _jaas(**users: str) -> str:
    return f"{LOGIN} " + " ".join(f'user_{u}="{p}"' for u, p in users.items()) + ";"


def _basic(broker: BrokerProcess, user: str, password: str) -> tuple[int, dict]:
    """(status, JSON answer) of ``GET /v3/clusters`` with Basic ``user:password``."""
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    req = urllib.request.Request(broker.http_url + "/v3/clusters", headers={"Authorization": "Basic " + token})
    try:
        with urllib.request.urlopen(req, timeout=TIMEOUT_S) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def _kafka_sasl_ok(broker: BrokerProcess, pki, listener: str, user: str, password: str) -> bool:
    """True when SASL/PLAIN as ``user`` succeeds on ``listener`` (raw SaslHandshake +
    SaslAuthenticate), False on SASL_AUTHENTICATION_FAILED."""
    ctx = pki.client_context() if listener == "SASL_SSL" else None
    try:
        connect(broker.ports[listener], ctx, user, password).close()
    except WireSaslError:
        return False
    return True


def _admin_lists_topics(broker: BrokerProcess, pki, user: str, password: str) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap("SASL_SSL"), "security.protocol": "SASL_SSL",
                         "ssl.ca.location": str(pki.ca_pem), "sasl.mechanism": "PLAIN",
                         "sasl.username": user, "sasl.password": password})
    assert admin.list_topics(timeout=TIMEOUT_S).brokers


@pytest.mark.parametrize("key", ["listener.name.sasl_ssl.plain.sasl.jaas.config",
                                 "listener.name.sasl_ssl.sasl.jaas.config",
                                 "sasl.jaas.config",
                                 "plain.sasl.jaas.config"])
def test_basic_auth_accepts_the_plain_users_of_each_jaas_key_form(tmp_path, pki, key):
    overrides = {**pki.broker_overrides(), key: _jaas(admin="admin-secret")}
    with BrokerProcess(tmp_path / "data", http_port=0, overrides=overrides, listeners={"SASL_SSL": 0}) as broker:
        status, answer = _basic(broker, "admin", "admin-secret")
        assert status == 200, answer
        assert answer["data"][0]["cluster_id"]
        for user, password in (("admin", "wrong"), ("nobody", "admin-secret")):
            status, answer = _basic(broker, user, password)
            assert status == 401 and answer["error_code"] == 401, (user, answer)
        assert http("GET", broker.http_url + "/v3/clusters")[0] == 401  # every listener is SASL
        # the same user and passwords on the Kafka port
        _admin_lists_topics(broker, pki, "admin", "admin-secret")
        assert _kafka_sasl_ok(broker, pki, "SASL_SSL", "admin", "admin-secret")
        assert not _kafka_sasl_ok(broker, pki, "SASL_SSL", "admin", "wrong")


def test_basic_auth_takes_the_users_of_every_plain_listener_and_no_other(tmp_path, pki):
    """Two SASL listeners with their own users: each listener's users pass Basic auth; the
    broker-wide JAAS config that neither listener uses (both have their own), and a listener
    whose PLAIN is disabled, give no HTTP user, as they give no Kafka one."""
    overrides = {**pki.broker_overrides(),
                 "listener.name.sasl_ssl.plain.sasl.jaas.config": _jaas(admin="admin-secret"),
                 "listener.name.sasl_plaintext.plain.sasl.jaas.config": _jaas(alice="alice-secret"),
                 "listener.name.scram_only.plain.sasl.jaas.config": _jaas(mallory="mallory-secret"),
                 "listener.name.scram_only.sasl.enabled.mechanisms": "SCRAM-SHA-256",
                 "plain.sasl.jaas.config": _jaas(ghost="ghost-secret"),
                 "listener.security.protocol.map": "SASL_SSL:SASL_SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,"
                                                   "SCRAM_ONLY:SASL_PLAINTEXT"}
    with BrokerProcess(tmp_path / "data", http_port=0, overrides=overrides,
                       listeners={"SASL_SSL": 0, "SASL_PLAINTEXT": 0, "SCRAM_ONLY": 0}) as broker:
        assert _basic(broker, "admin", "admin-secret")[0] == 200
        assert _basic(broker, "alice", "alice-secret")[0] == 200
        assert _basic(broker, "alice", "admin-secret")[0] == 401
        assert _basic(broker, "ghost", "ghost-secret")[0] == 401
        assert _basic(broker, "mallory", "mallory-secret")[0] == 401
        assert _kafka_sasl_ok(broker, pki, "SASL_SSL", "admin", "admin-secret")
        assert _kafka_sasl_ok(broker, pki, "SASL_PLAINTEXT", "alice", "alice-secret")
        assert not _kafka_sasl_ok(broker, pki, "SASL_SSL", "alice", "alice-secret")
        assert not _kafka_sasl_ok(broker, pki, "SASL_SSL", "ghost", "ghost-secret")
        assert not _kafka_sasl_ok(broker, pki, "SASL_PLAINTEXT", "ghost", "ghost-secret")
