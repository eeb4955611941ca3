"""Listeners and TLS: an SSL listener next to PLAINTEXT on one broker, real clients over TLS,
per-listener advertised endpoints, ``ssl.client.auth=required``, plaintext clients on a TLS port,
a >1 MiB fetch over TLS (the sendfile fallback), startup errors, and a 3-broker cluster whose
broker-to-broker traffic is mutual TLS.
"""

from __future__ import annotations

import asyncio
import datetime
import hashlib
import os
import ssl
import subprocess
import sys
import time
import uuid

import pytest
import trustme

from litemq.config import BrokerConfig
from litemq.protocol import frames
from litemq.protocol.records import decode_records
from litemq.security.tls import subject_rfc2253
from litemq.testing.cluster import HOST, LocalCluster, wait_for
from litemq.testing.process import BrokerProcess
from litemq.testing.wire import WireClient

LISTENERS = {"PLAINTEXT": 0, "SSL": 0, "MTLS": 0}
"""MTLS is a second SSL listener (listener.security.protocol.map) whose own
``listener.name.mtls.ssl.client.auth=required`` asks every client for a certificate."""
API_VERSIONS_V3 = {"client_software_name": "tls-test", "client_software_version": "1"}
READ_TIMEOUT_S = 30


@pytest.fixture(scope="module")
def tls_broker(pki, tmp_path_factory):
    overrides = {**pki.broker_overrides(), "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL,MTLS:SSL",
                 "listener.name.mtls.ssl.client.auth": "required"}
    with BrokerProcess(tmp_path_factory.mktemp("tls") / "data", listeners=LISTENERS, overrides=overrides) as bp:
        yield bp


def _topic(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _ck_ssl(bp, pki, **extra) -> dict:
    return {"bootstrap.servers": bp.bootstrap("SSL"), "security.protocol": "SSL", "ssl.ca.location": str(pki.ca_pem),
            **extra}


def _ck_read(conf: dict, topic: str, n: int) -> list[bytes]:
    """Read ``n`` values of ``topic`` through a consumer group (FindCoordinator, JoinGroup, ...)."""
    from confluent_kafka import Consumer

    c = Consumer({**conf, "group.id": "g-" + topic, "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe([topic])
    got: list[bytes] = []
    deadline = time.monotonic() + READ_TIMEOUT_S
    while len(got) < n and time.monotonic() < deadline:
        for m in c.consume(min(500, n - len(got)), 0.5):  # returns once the last one came
            assert m.error() is None, m.error()
            got.append(m.value())
    c.close()
    return got


# ------------------------------------------------------------------ clients over SSL
def test_confluent_kafka_over_ssl(tls_broker, pki):
    from confluent_kafka import Producer

    topic, values = _topic("ck"), [b"ck-%d" % i for i in range(300)]
    p = Producer(_ck_ssl(tls_broker, pki, acks="all"))
    for v in values:
        p.produce(topic, v)
    assert p.flush(30) == 0
    assert _ck_read(_ck_ssl(tls_broker, pki), topic, len(values)) == values


def test_kafka_python_over_ssl(tls_broker, pki):
    from kafka import KafkaConsumer, KafkaProducer

    ssl_args = {"bootstrap_servers": tls_broker.bootstrap("SSL"), "security_protocol": "SSL",
                "ssl_cafile": str(pki.ca_pem)}
    topic, values = _topic("kp"), [b"kp-%d" % i for i in range(300)]
    producer = KafkaProducer(acks="all", **ssl_args)
    for f in [producer.send(topic, v) for v in values]:
        f.get(timeout=30)
    producer.close()
    consumer = KafkaConsumer(topic, group_id="g-" + topic, auto_offset_reset="earliest", enable_auto_commit=False,
                             **ssl_args)
    got: list[bytes] = []
    deadline = time.monotonic() + READ_TIMEOUT_S
    while len(got) < len(values) and time.monotonic() < deadline:
        for _tp, msgs in consumer.poll(timeout_ms=500).items():
            got += [m.value for m in msgs]
    consumer.close()
    assert got == values


def test_aiokafka_over_ssl(tls_broker, pki):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.helpers import create_ssl_context

    topic, values = _topic("ak"), [b"ak-%d" % i for i in range(300)]

    async def run() -> list[bytes]:
        ssl_args = {"bootstrap_servers": tls_broker.bootstrap("SSL"), "security_protocol": "SSL",
                    "ssl_context": create_ssl_context(cafile=str(pki.ca_pem))}
        producer = AIOKafkaProducer(acks="all", **ssl_args)
        await producer.start()
        try:
            await asyncio.gather(*[await producer.send(topic, v) for v in values])
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(topic, group_id="g-" + topic, auto_offset_reset="earliest",
                                    enable_auto_commit=False, **ssl_args)
        await consumer.start()
        got: list[bytes] = []
        try:
            deadline = time.monotonic() + READ_TIMEOUT_S
            while len(got) < len(values) and time.monotonic() < deadline:
                for _tp, msgs in (await consumer.getmany(timeout_ms=500)).items():
                    got += [m.value for m in msgs]
        finally:
            await consumer.stop()
        return got

    assert asyncio.run(run()) == values


# ------------------------------------------------------------------ advertised endpoints
def test_each_listener_advertises_its_own_port(tls_broker, pki):
    """Metadata, DescribeCluster and FindCoordinator answer the host/port of the listener the
    request came in on (Kafka's behaviour), so a client stays on its protocol."""
    contexts = {"PLAINTEXT": None, "SSL": pki.client_context(), "MTLS": pki.client_context(with_cert=True)}
    for name, ctx in contexts.items():
        port = tls_broker.ports[name]
        w = WireClient(HOST, port, ssl_context=ctx)
        try:
            md = w.request(3, 12, {"topics": None, "allow_auto_topic_creation": False,
                                   "include_topic_authorized_operations": False})
            assert [(b.node_id, b.host, b.port) for b in md.brokers] == [(1, HOST, port)], name
            dc = w.request(60, 0, {"include_cluster_authorized_operations": False})
            assert (dc.error_code, [(b.host, b.port) for b in dc.brokers]) == (0, [(HOST, port)]), name
            deadline = time.monotonic() + 15
            while True:  # the first FindCoordinator creates __consumer_offsets
                fc = w.request(10, 4, {"key_type": 0, "coordinator_keys": ["group-" + name]}).coordinators[0]
                if fc.error_code == 0 or time.monotonic() > deadline:
                    break
                time.sleep(0.1)
            assert (fc.error_code, fc.host, fc.port) == (0, HOST, port), name
        finally:
            w.close()


def test_listener_and_advertised_config():
    cfg = BrokerConfig.from_sources(overrides={
        "listeners": "PLAINTEXT://127.0.0.1:9092,ssl://:9093,INTERNAL://10.0.0.5:0",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL,INTERNAL:SASL_SSL",
        "advertised.listeners": "PLAINTEXT://broker1.example:19092,SSL://broker1.example:19093",
        "inter.broker.listener.name": "ssl", "ssl.keystore.location": "/k.pem",
        "listener.name.internal.ssl.client.auth": "required"})
    assert [(s.name, s.host, s.port, s.security_protocol) for s in cfg.listener_specs()] == [
        ("PLAINTEXT", "127.0.0.1", 9092, "PLAINTEXT"), ("SSL", "", 9093, "SSL"), ("INTERNAL", "10.0.0.5", 0, "SASL_SSL")]
    assert cfg.advertised_endpoints() == {"PLAINTEXT": ("broker1.example", 19092), "SSL": ("broker1.example", 19093)}
    assert cfg.inter_broker_listener() == ("SSL", "SSL") and cfg.inter_broker_tls
    assert cfg.listener_setting("INTERNAL", "ssl.client.auth") == "required"
    assert cfg.listener_setting("SSL", "ssl.client.auth") == "none"
    cfg.validate()
    legacy = BrokerConfig.from_sources(listen_host="127.0.0.1", listen_port=0)
    assert [(s.name, s.port) for s in legacy.listener_specs()] == [("PLAINTEXT", 0)]
    assert not legacy.inter_broker_tls


@pytest.mark.parametrize("settings, message", [
    ({"listeners": "PLAINTEXT://:9092,PLAINTEXT://:9093"}, "each listener must have a different name"),
    ({"listeners": "PLAINTEXT://:9092,SSL://:9092", "ssl.keystore.location": "/k"},
     "each listener must have a different port"),
    ({"listeners": "CLIENTS://:9092"}, "no security protocol defined for listener CLIENTS"),
    ({"listener.security.protocol.map": "PLAINTEXT:TLS"}, "unknown security protocol 'TLS'"),
    ({"listeners": "SSL://:9093"}, "ssl.keystore.location is required"),
    ({"listeners": "SSL://:9093", "ssl.keystore.location": "/k", "ssl.keystore.type": "JKS"}, "ssl.keystore.type"),
    ({"listeners": "SSL://:9093", "ssl.keystore.location": "/k", "ssl.client.auth": "maybe"}, "ssl.client.auth"),
    ({"listeners": "PLAINTEXT://0.0.0.0:9092"}, "nonroutable meta-address"),
    ({"advertised.listeners": "SSL://h:1"}, "advertised.listeners: listener SSL is not one of listeners"),
    ({"security.inter.broker.protocol": "SSL"}, "must be a listener name defined in advertised.listeners"),
    ({"security.inter.broker.protocol": "SSL", "inter.broker.listener.name": "SSL"}, "Only one of"),
    ({"listener.name.ssl.ssl.no.such.setting": "x"}, "listener.name.ssl.ssl.no.such.setting"),
])
def test_bad_listener_settings_name_the_setting(settings, message):
    with pytest.raises(ValueError, match=message):
        BrokerConfig.from_sources(overrides=settings).validate()


def test_serve_refuses_ssl_listener_without_keystore(tmp_path):
    res = subprocess.run([sys.executable, "-m", "litemq.cli", "serve", "--data-dir", str(tmp_path / "d"),
                          "-o", "listeners=PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0"],
                         capture_output=True, text=True, timeout=60)
    err = " ".join(res.stderr.split())  # rich wraps the line at the terminal width
    assert res.returncode == 1
    assert "error: cannot start broker: ssl.keystore.location is required by the SSL listener SSL" in err
    assert "Traceback" not in err
    res = subprocess.run([sys.executable, "-m", "litemq.cli", "serve", "--data-dir", str(tmp_path / "d"),
                          "-o", "listeners=SSL://127.0.0.1:0", "-o", f"ssl.keystore.location={tmp_path / 'none.pem'}"],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 1 and "ssl.keystore.location: cannot read" in " ".join(res.stderr.split()), res.stderr


# ------------------------------------------------------------------ client authentication
def test_client_certificate_required(tls_broker, pki, tmp_path):
    port = tls_broker.ports["MTLS"]

    def api_versions(ctx):
        w = WireClient(HOST, port, ssl_context=ctx)
        try:
            return w.request(18, 3, API_VERSIONS_V3).error_code
        finally:
            w.close()

    # no certificate: refused (with TLS 1.3 the client learns it at its first read)
    with pytest.raises((ssl.SSLError, ConnectionError)):
        api_versions(pki.client_context())
    # a certificate from a CA the broker does not trust: refused
    stranger = trustme.CA().issue_cert("mallory.client.test", common_name="mallory")
    stranger.cert_chain_pems[0].write_to_path(str(tmp_path / "m.pem"))
    stranger.private_key_pem.write_to_path(str(tmp_path / "m.key"))
    ctx = pki.client_context()
    ctx.load_cert_chain(str(tmp_path / "m.pem"), str(tmp_path / "m.key"))
    with pytest.raises((ssl.SSLError, ConnectionError)):
        api_versions(ctx)
    # the CA-signed client certificate: served
    assert api_versions(pki.client_context(with_cert=True)) == 0
    # and a real client with ssl.certificate.location / ssl.key.location
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": tls_broker.bootstrap("MTLS"), "security.protocol": "SSL",
                         "ssl.ca.location": str(pki.ca_pem), "ssl.certificate.location": str(pki.client_pem),
                         "ssl.key.location": str(pki.client_key)})
    md = admin.list_topics(timeout=15)
    assert [(b.host, b.port) for b in md.brokers.values()] == [(HOST, port)]
    # the plain SSL listener (ssl.client.auth=none) still serves clients without a certificate
    w = WireClient(HOST, tls_broker.ports["SSL"], ssl_context=pki.client_context())
    assert w.request(18, 3, API_VERSIONS_V3).error_code == 0
    w.close()
    log = tls_broker.log_path.read_text()
    assert "on listener MTLS: TLS handshake failed" in log


def test_certificate_subject_as_kafka_principal_name(pki):
    """The principal name is the subject DN as Java's X500Principal.getName() prints it."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    def der(name):
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.timezone.utc)
        cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
                .serial_number(1).not_valid_before(now).not_valid_after(now + datetime.timedelta(days=1))
                .sign(key, hashes.SHA256()))
        return cert.public_bytes(serialization.Encoding.DER)

    pem = pki.client_pem.read_bytes()
    assert subject_rfc2253(ssl.PEM_cert_to_DER_cert(pem.decode())) == pki.client_dn == "CN=client,OU=test,O=LiteMQ"
    a = x509.NameAttribute
    # last RDN first; ,=+<>#;"\ escaped, leading/trailing blanks escaped; non-keyword types as OID=#hex
    name = x509.Name([a(NameOID.COUNTRY_NAME, "DE"), a(NameOID.EMAIL_ADDRESS, "a@b.c"),
                      a(NameOID.COMMON_NAME, ' x,y=z+#"; ')])
    assert subject_rfc2253(der(name)) == r'CN=\ x\,y\=z\+\#\"\;\ ,1.2.840.113549.1.9.1=#16056140622e63,C=DE'
    multi = x509.Name([x509.RelativeDistinguishedName([a(NameOID.COMMON_NAME, "a"), a(NameOID.USER_ID, "u")])])
    assert subject_rfc2253(der(multi)) == "CN=a+UID=u"


# ------------------------------------------------------------------ bad clients, big fetches
def test_plaintext_client_on_ssl_port_is_disconnected(tls_broker, pki):
    good = WireClient(HOST, tls_broker.ports["SSL"], ssl_context=pki.client_context())
    try:
        assert good.request(18, 3, API_VERSIONS_V3).error_code == 0
        bad = WireClient(HOST, tls_broker.ports["SSL"])  # no TLS
        bad.send_raw(frames.encode_request(18, 3, 1, "plaintext", API_VERSIONS_V3))
        assert bad.is_closed_by_peer(), "the broker kept a plaintext connection on its SSL listener"
        bad.close()
        assert good.request(18, 3, API_VERSIONS_V3).error_code == 0  # other clients keep being served
        plain = WireClient(HOST, tls_broker.ports["PLAINTEXT"])
        assert plain.request(18, 3, API_VERSIONS_V3).error_code == 0
        plain.close()
    finally:
        good.close()
    assert "on listener SSL: TLS handshake failed" in tls_broker.log_path.read_text()


def _produce_incompressible(broker, topic: str, count: int, size: int, flush_timeout_s: float) -> list[bytes]:
    """``count`` random values of ``size`` bytes produced (acks=all) over PLAINTEXT, all
    delivered within ``flush_timeout_s``; returns them."""
    from confluent_kafka import Producer

    values = [os.urandom(size) for _ in range(count)]
    p = Producer({"bootstrap.servers": broker.bootstrap("PLAINTEXT"), "acks": "all",
                  "message.max.bytes": 2_000_000, "linger.ms": 20})
    for v in values:
        p.produce(topic, v)
    assert p.flush(flush_timeout_s) == 0
    return values


def _fetch_from_start(topic: str, max_bytes: int) -> dict:
    """Fetch v11 body: partition 0 of ``topic`` from offset 0, at most ``max_bytes``."""
    return {"replica_id": -1, "max_wait_ms": 500, "min_bytes": 1, "max_bytes": max_bytes, "isolation_level": 0,
            "session_id": 0, "session_epoch": -1, "rack_id": "", "forgotten_topics_data": [],
            "topics": [{"topic": topic, "partitions": [{"partition": 0, "current_leader_epoch": -1,
                                                        "fetch_offset": 0, "log_start_offset": -1,
                                                        "partition_max_bytes": max_bytes}]}]}


def _assert_same_values(records: bytes, values: list[bytes]) -> None:
    got = [r.value for r in decode_records(records)]  # CRC-checked
    assert [hashlib.sha256(v).digest() for v in got] == [hashlib.sha256(v).digest() for v in values]


def test_fetch_larger_than_one_mib_over_ssl(tls_broker, pki):
    """A Fetch answer of several MiB goes out through the TLS transport (asyncio's sendfile
    falls back to read+write there) byte for byte."""
    topic = _topic("big")
    values = _produce_incompressible(tls_broker, topic, 40, 100 * 1024, 30)  # 4 MiB
    w = WireClient(HOST, tls_broker.ports["SSL"], ssl_context=pki.client_context(), timeout_s=30)
    try:
        resp = w.request(1, 11, _fetch_from_start(topic, 16 << 20))
    finally:
        w.close()
    part = resp.responses[0].partitions[0]
    assert part.error_code == 0 and len(part.records) > 1 << 20
    _assert_same_values(part.records, values)
    # and a real consumer over SSL with large fetches
    read = _ck_read(_ck_ssl(tls_broker, pki, **{"max.partition.fetch.bytes": 8 << 20, "fetch.max.bytes": 16 << 20}),
                    topic, len(values))
    assert read == values


def test_fetch_larger_than_the_write_buffer_to_a_slow_reader_over_ssl(tls_broker, pki):
    """A 40 MiB Fetch answer to a client that reads only after a pause overflows the TLS
    transport's write buffer (pause_writing); the broker resumes when the client reads and the
    whole answer arrives (the region writer waits for resume_writing, it must be woken)."""
    topic = _topic("slow-reader")
    values = _produce_incompressible(tls_broker, topic, 80, 512 * 1024, 60)  # 40 MiB
    w = WireClient(HOST, tls_broker.ports["SSL"], ssl_context=pki.client_context(), timeout_s=60)
    try:
        w.send_raw(frames.encode_request(1, 11, 7, "slow-reader", _fetch_from_start(topic, 48 << 20)))
        time.sleep(2.0)  # the broker fills the socket and its write buffer, then pauses
        corr, resp = frames.decode_response(1, 11, w.read_frame())
    finally:
        w.close()
    part = resp.responses[0].partitions[0]
    assert corr == 7 and part.error_code == 0
    _assert_same_values(part.records, values)


def test_embedded_broker_with_ssl_listener(pki, tmp_path):
    import litemq
    from kafka import KafkaAdminClient

    with litemq.Broker(data_dir=tmp_path / "d", listeners={"PLAINTEXT": 0, "SSL": 0},
                       overrides=pki.broker_overrides()) as broker:
        assert set(broker.ports) == {"PLAINTEXT", "SSL"} and broker.bootstrap_servers == broker.bootstrap("PLAINTEXT")
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap("SSL"), security_protocol="SSL",
                                 ssl_cafile=str(pki.ca_pem))
        try:
            brokers = admin.describe_cluster()["brokers"]
        finally:
            admin.close()
        assert [(b["host"], b["port"]) for b in brokers] == [(HOST, broker.ports["SSL"])]


# ------------------------------------------------------------------ inter-broker TLS
def test_cluster_with_inter_broker_tls_replicates(tmp_path, pki):
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    from litemq.cluster.codec import rpc_call

    overrides = {**pki.broker_overrides(), "security.inter.broker.protocol": "SSL"}
    with LocalCluster(tmp_path, 3, overrides=overrides, listeners={"PLAINTEXT": 0, "SSL": 0}) as cluster:
        assert cluster.rpc_ssl is not None  # the harness itself asks status over mutual TLS
        with pytest.raises(OSError):  # a plaintext tool is refused by the RPC port
            rpc_call(HOST, cluster.rpc_ports[1], {"op": "status"}, timeout_s=3)
        conf = {"bootstrap.servers": cluster.bootstrap("SSL"), "security.protocol": "SSL",
                "ssl.ca.location": str(pki.ca_pem)}
        admin = AdminClient(conf)
        topic = _topic("repl")
        admin.create_topics([NewTopic(topic, 2, 3, config={"min.insync.replicas": "2"})])[topic].result(timeout=30)
        cluster.wait_leaders(topic, 2)
        md = admin.list_topics(timeout=15)
        assert {b.id: (b.host, b.port) for b in md.brokers.values()} == {
            i: (HOST, cluster.node(i).ports["SSL"]) for i in cluster.node_ids}
        values = [b"r-%d" % i for i in range(200)]
        p = Producer({**conf, "acks": "all", "enable.idempotence": True})
        for v in values:
            p.produce(topic, v, key=v)
        assert p.flush(30) == 0
        assert sorted(_ck_read(conf, topic, len(values))) == sorted(values)
        # every replica gets the records over the TLS RPC connections (Raft appends)
        leo = cluster.statuses()[1]
        total = {x["partition"]: x["log_end_offset"] for x in leo["partitions"] if x["topic"] == topic}

        def replicated():
            ends = [(x["partition"], x["log_end_offset"]) for st in cluster.statuses().values()
                    for x in st["partitions"] if x["topic"] == topic]
            return len(ends) == 6 and all(end == total[p] for p, end in ends)

        wait_for(replicated, 15, lambda: f"replicas of {topic} differ: {cluster.statuses()}")
        assert sum(total.values()) >= len(values)
        plain = AdminClient({"bootstrap.servers": cluster.bootstrap("PLAINTEXT")}).list_topics(timeout=15)
        assert {b.id: b.port for b in plain.brokers.values()} == {
            i: cluster.node(i).ports["PLAINTEXT"] for i in cluster.node_ids}
