"""SASL authentication end to end (KIP-43, KIP-152, KIP-368): one broker process with PLAINTEXT,
SASL_PLAINTEXT and SASL_SSL listeners, SASL/PLAIN users from the listener's JAAS config, SCRAM
users created with AlterUserScramCredentials, ``connections.max.reauth.ms=2000``.

confluent-kafka, kafka-python and aiokafka authenticate with PLAIN and SCRAM-SHA-256/512 and get
their own authentication error for a wrong password; raw requests check Kafka's error codes,
what an unauthenticated connection may send, the session lifetime, re-authentication and the
closing of expired sessions; librdkafka keeps producing and consuming across several session
expiries by re-authenticating.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
import struct
import subprocess
import time

import pytest
import scramp
from aiokafka.conn import create_conn
from aiokafka.errors import SaslAuthenticationFailed
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient, ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion
from kafka import KafkaConsumer, KafkaProducer

from litemq.broker.handlers.sasl import validate as validate_sasl_settings
from litemq.config import BrokerConfig
from litemq.protocol.errors import ErrorCode
from litemq.security.sasl import SaslSession, SaslStage, parse_jaas_config, plain_users_from_jaas
from litemq.testing.process import BrokerProcess
from litemq.testing.wire import WireClient, WireSaslError
from tests.integration.admin_helpers import unique_name
from tests.security.security_helpers import produce_and_consume_for

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
        'password="admin-secret" user_admin="admin-secret" user_alice="alice-secret" user_quoted="a\\"b\\\\c";')
SCRAM_USER, SCRAM_PASSWORD = "carol", "carol-secret"
REAUTH_MS = 2000
TIMEOUT_S = 20
PLAIN_FAILED = "Authentication failed: Invalid username or password"


def _generic_failure(mechanism: str, what: str = "authentication") -> str:
    return f"Authentication failed during {what} due to invalid credentials with SASL mechanism {mechanism}"


@pytest.fixture(scope="module")
def broker(tmp_path_factory, pki):
    overrides = {**pki.broker_overrides(),
                 "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
                 "listener.name.sasl_ssl.plain.sasl.jaas.config": JAAS,
                 "connections.max.reauth.ms": str(REAUTH_MS)}
    with BrokerProcess(tmp_path_factory.mktemp("sasl") / "data", overrides=overrides,
                       listeners={"PLAINTEXT": 0, "SASL_PLAINTEXT": 0, "SASL_SSL": 0},
                       extra_args=["--log-level", "DEBUG"]) as proc:
        admin = AdminClient({"bootstrap.servers": proc.bootstrap("PLAINTEXT")})
        for mech, iterations in ((ScramMechanism.SCRAM_SHA_256, 4096), (ScramMechanism.SCRAM_SHA_512, 8192)):
            upsert = UserScramCredentialUpsertion(SCRAM_USER, ScramCredentialInfo(mech, iterations),
                                                  SCRAM_PASSWORD.encode())
            for fut in admin.alter_user_scram_credentials([upsert]).values():
                fut.result(TIMEOUT_S)
        yield proc


def _wire(broker, listener="SASL_PLAINTEXT", ssl_context=None) -> WireClient:
    return WireClient("127.0.0.1", broker.ports[listener], ssl_context=ssl_context)


def _metadata_ok(w: WireClient) -> bool:
    return len(w.request(3, 1, {"topics": None}).brokers) == 1


CREDENTIALS = [("PLAIN", "alice", "alice-secret"), ("SCRAM-SHA-256", SCRAM_USER, SCRAM_PASSWORD),
               ("SCRAM-SHA-512", SCRAM_USER, SCRAM_PASSWORD), ("PLAIN", SCRAM_USER, SCRAM_PASSWORD)]
"""(mechanism, user, password): a JAAS user, the SCRAM user with both SCRAM mechanisms, and the
SCRAM user over PLAIN (LiteMQ checks PLAIN passwords against SCRAM credentials too)."""


# ------------------------------------------------------------------ sans-I/O pieces
def test_jaas_config_parsing():
    assert plain_users_from_jaas(JAAS) == {"admin": "admin-secret", "alice": "alice-secret", "quoted": 'a"b\\c'}
    (entry,) = parse_jaas_config("x.Y required /* c */ a=b // d\n c=\"d e\";")
    assert (entry.login_module, entry.control_flag, entry.options) == ("x.Y", "required", {"a": "b", "c": "d e"})
    for bad in ("x.Y required a=b", "x.Y a=b;", "x.Y required a=;", "a required; b required;", 'x required a="b;'):
        with pytest.raises(ValueError):
            parse_jaas_config(bad)
    with pytest.raises(ValueError, match="PlainLoginModule"):
        plain_users_from_jaas("org.apache.kafka.common.security.scram.ScramLoginModule required;")


def test_bad_sasl_settings_stop_the_broker():
    for settings, message in [({"sasl.enabled.mechanisms": "PLAIN,GSSAPI"}, "GSSAPI/Kerberos"),
                              ({"sasl.enabled.mechanisms": " , "}, "no SASL mechanism enabled"),
                              ({"sasl.jaas.config": "x required a"}, "needs '=' and a value"),
                              ({"listener.name.sasl_plaintext.plain.connections.max.reauth.ms": "-1"},
                               "connections.max.reauth.ms")]:
        cfg = BrokerConfig.from_sources(overrides={"listeners": "SASL_PLAINTEXT://127.0.0.1:0", **settings})
        with pytest.raises(ValueError, match=message):
            validate_sasl_settings(cfg)


def test_session_gating_rules():
    s = SaslSession(["PLAIN"], 1000, lambda m: None)
    assert s.refusal(18, 0) is None and s.refusal(17, 0) is None
    assert "during SASL handshake" in s.refusal(3, 0) and "during SASL handshake" in s.refusal(36, 0)
    s.stage = SaslStage.AUTHENTICATE
    assert s.refusal(36, 0) is None and "during SASL authentication" in s.refusal(18, 0)
    s.stage, s.session_expiry_ms = SaslStage.COMPLETE, 1000.0
    assert s.refusal(3, 999) is None
    assert "expired" in s.refusal(3, 1000) and "expired" in s.refusal(18, 1000)
    assert s.refusal(17, 1000) is None  # a SaslHandshake starts the re-authentication
    s.last_reauth_start_ms = 500.0  # at most one re-authentication start per second
    assert "expired" in s.refusal(17, 1000)


# ------------------------------------------------------------------ real clients
def _confluent_conf(broker, mechanism, user, password, listener="SASL_PLAINTEXT", pki=None) -> dict:
    conf = {"bootstrap.servers": broker.bootstrap(listener), "security.protocol": listener,
            "sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": password}
    if pki is not None:
        conf["ssl.ca.location"] = str(pki.ca_pem)
    return conf


@pytest.mark.parametrize("mechanism,user,password", CREDENTIALS)
def test_confluent_kafka_authenticates(broker, mechanism, user, password):
    topic = unique_name("sasl-ck")
    p = Producer(_confluent_conf(broker, mechanism, user, password))
    delivered = []
    p.produce(topic, b"v", on_delivery=lambda err, msg: delivered.append(err))
    assert p.flush(TIMEOUT_S) == 0
    assert delivered == [None]


def test_confluent_kafka_sasl_ssl(broker, pki):
    topic = unique_name("sasl-ssl")
    for mechanism, user, password in CREDENTIALS[:2]:
        p = Producer(_confluent_conf(broker, mechanism, user, password, "SASL_SSL", pki))
        p.produce(topic, b"v")
        assert p.flush(TIMEOUT_S) == 0
    with _wire(broker, "SASL_SSL", pki.client_context()) as w:
        assert w.sasl_scram("SCRAM-SHA-512", SCRAM_USER, SCRAM_PASSWORD).error_code == 0
        assert _metadata_ok(w)


def test_kafka_python_authenticates(broker):
    topic = unique_name("sasl-kp")
    for mechanism, user, password in CREDENTIALS:
        kw = dict(bootstrap_servers=broker.bootstrap("SASL_PLAINTEXT"), security_protocol="SASL_PLAINTEXT",
                  sasl_mechanism=mechanism, sasl_plain_username=user, sasl_plain_password=password)
        producer = KafkaProducer(**kw)
        producer.send(topic, b"kp").get(TIMEOUT_S)
        producer.close()
    consumer = KafkaConsumer(topic, auto_offset_reset="earliest", consumer_timeout_ms=10_000, **kw)
    got = []
    for m in consumer:  # stops after 10 s without a record
        got.append(m.value)
        if len(got) == len(CREDENTIALS):
            break
    parts = list(consumer.assignment())
    ends = consumer.end_offsets(parts)
    assert parts and all(consumer.position(tp) == ends[tp] for tp in parts), (parts, ends)  # nothing more
    assert got == [b"kp"] * len(CREDENTIALS)
    consumer.close()


def test_aiokafka_authenticates(broker):
    async def run():
        from aiokafka import AIOKafkaProducer

        topic = unique_name("sasl-aio")
        for mechanism, user, password in CREDENTIALS:
            producer = AIOKafkaProducer(
                bootstrap_servers=broker.bootstrap("SASL_PLAINTEXT"), security_protocol="SASL_PLAINTEXT",
                sasl_mechanism=mechanism, sasl_plain_username=user, sasl_plain_password=password)
            await producer.start()
            try:
                await producer.send_and_wait(topic, b"aio")
            finally:
                await producer.stop()

    asyncio.run(run())


def test_wrong_password_is_each_clients_authentication_error(broker, caplog):
    errors = []
    p = Producer({**_confluent_conf(broker, "SCRAM-SHA-256", SCRAM_USER, "wrong"),
                  "error_cb": errors.append})
    deadline = time.monotonic() + TIMEOUT_S
    while not any(e.code() == KafkaError._AUTHENTICATION for e in errors) and time.monotonic() < deadline:
        p.poll(0.1)
    auth = [e for e in errors if e.code() == KafkaError._AUTHENTICATION]
    assert auth and _generic_failure("SCRAM-SHA-256") in auth[0].str()

    with caplog.at_level(logging.WARNING, logger="kafka"):
        with pytest.raises(Exception):
            KafkaProducer(bootstrap_servers=broker.bootstrap("SASL_PLAINTEXT"), security_protocol="SASL_PLAINTEXT",
                          sasl_mechanism="PLAIN", sasl_plain_username="alice", sasl_plain_password="wrong",
                          bootstrap_timeout_ms=2000)
    assert "SaslAuthenticationFailedError" in caplog.text and PLAIN_FAILED in caplog.text

    async def aiokafka_connect():
        await create_conn("127.0.0.1", broker.ports["SASL_PLAINTEXT"], security_protocol="SASL_PLAINTEXT",
                          sasl_mechanism="SCRAM-SHA-512", sasl_plain_username="nobody", sasl_plain_password="x")

    with pytest.raises(SaslAuthenticationFailed, match=_generic_failure("SCRAM-SHA-512")):
        asyncio.run(aiokafka_connect())


# ------------------------------------------------------------------ the wire
def test_unauthenticated_requests_close_the_connection(broker):
    with _wire(broker) as w:  # Metadata before authenticating
        with pytest.raises(ConnectionError):
            w.request(3, 1, {"topics": None})
    with _wire(broker) as w:  # ApiVersions is allowed, SaslAuthenticate before the handshake is not
        keys = {k.api_key: (k.min_version, k.max_version) for k in w.request(18, 3, {}).api_keys}
        assert keys[17] == (0, 1) and keys[36] == (0, 2)
        with pytest.raises(ConnectionError):
            w.request(36, 2, {"auth_bytes": b"\0alice\0alice-secret"})
    with _wire(broker) as w:  # a frame larger than Kafka's sasl.server.max.receive.size
        w.send_raw(struct.pack(">i", 600 * 1024) + b"\0" * 1024)
        assert w.is_closed_by_peer()
    with _wire(broker) as w:  # during the exchange only SaslAuthenticate
        w.sasl_handshake("SCRAM-SHA-256")
        with pytest.raises(ConnectionError):
            w.request(18, 0, {})


def test_handshake_errors(broker):
    with _wire(broker) as w:
        resp = w.request(17, 1, {"mechanism": "GSSAPI"})
        assert resp.error_code == ErrorCode.UNSUPPORTED_SASL_MECHANISM
        assert list(resp.mechanisms) == ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
        assert w.is_closed_by_peer()
    with _wire(broker, "PLAINTEXT") as w:  # SASL APIs on a listener without SASL (Kafka KafkaApis)
        assert w.request(17, 1, {"mechanism": "PLAIN"}).error_code == ErrorCode.ILLEGAL_SASL_STATE
        resp = w.request(36, 2, {"auth_bytes": b"x"})
        assert resp.error_code == ErrorCode.ILLEGAL_SASL_STATE
        assert resp.error_message == "SaslAuthenticate request received after successful authentication"
        assert _metadata_ok(w)


@pytest.mark.parametrize("mechanism,user,password,message", [
    ("PLAIN", "alice", "wrong", PLAIN_FAILED),
    ("PLAIN", "nobody", "x", PLAIN_FAILED),
    ("SCRAM-SHA-256", SCRAM_USER, "wrong", _generic_failure("SCRAM-SHA-256")),
    ("SCRAM-SHA-512", "nobody", "x", _generic_failure("SCRAM-SHA-512")),
])
def test_failed_authentication_answers_then_closes(broker, mechanism, user, password, message):
    with _wire(broker) as w:
        start = time.monotonic()
        with pytest.raises(WireSaslError) as err:
            if mechanism == "PLAIN":
                w.sasl_plain(user, password)
            else:
                w.sasl_scram(mechanism, user, password)
        assert time.monotonic() - start >= 0.09  # connection.failed.authentication.delay.ms=100
        assert (err.value.error_code, err.value.error_message) == (ErrorCode.SASL_AUTHENTICATION_FAILED, message)
        assert w.is_closed_by_peer()


def test_malformed_tokens_fail_authentication(broker):
    cases = [("PLAIN", b"bob\0alice\0alice-secret",
              "Authentication failed: Client requested an authorization id that is different from username"),
             ("PLAIN", b"\0alice\0", _generic_failure("PLAIN")),
             ("PLAIN", b"\xff\xfe", _generic_failure("PLAIN")),
             ("SCRAM-SHA-256", b"n,,n=carol,r=abc,tokenauth=true", _generic_failure("SCRAM-SHA-256")),
             ("SCRAM-SHA-256", b"garbage", _generic_failure("SCRAM-SHA-256"))]
    for mechanism, token, message in cases:
        with _wire(broker) as w:
            w.sasl_handshake(mechanism)
            resp = w.request(36, 2, {"auth_bytes": token})
            assert (resp.error_code, resp.error_message) == (ErrorCode.SASL_AUTHENTICATION_FAILED, message), token
            assert w.is_closed_by_peer()


def test_success_sets_session_lifetime_and_later_sasl_requests_are_illegal(broker):
    with _wire(broker) as w:
        assert w.sasl_plain("quoted", 'a"b\\c', authzid="quoted").session_lifetime_ms == REAUTH_MS
        assert _metadata_ok(w)
        resp = w.request(36, 2, {"auth_bytes": b"x"})
        assert resp.error_code == ErrorCode.ILLEGAL_SASL_STATE
        assert _metadata_ok(w)
    with _wire(broker) as w:  # SaslAuthenticate v0 (no session_lifetime_ms field)
        client = scramp.ScramClient(["SCRAM-SHA-256"], SCRAM_USER, SCRAM_PASSWORD)
        w.sasl_handshake("SCRAM-SHA-256")
        first = w.sasl_authenticate(client.get_client_first().encode(), version=0)
        client.set_server_first(first.auth_bytes.decode())
        final = w.sasl_authenticate(client.get_client_final().encode(), version=0)
        client.set_server_final(final.auth_bytes.decode())  # the server proved it knows the key
        assert _metadata_ok(w)


def test_expired_session_is_closed_and_reauthentication_renews_it(broker):
    with _wire(broker) as expiring, _wire(broker) as renewing:
        expiring.sasl_plain("alice", "alice-secret")
        renewing.sasl_scram("SCRAM-SHA-256", SCRAM_USER, SCRAM_PASSWORD)
        time.sleep(REAUTH_MS / 1000 * 0.6)
        assert renewing.sasl_scram("SCRAM-SHA-256", SCRAM_USER, SCRAM_PASSWORD).session_lifetime_ms == REAUTH_MS
        time.sleep(REAUTH_MS / 1000 * 0.6)  # past the first session's end, inside the renewed one
        assert _metadata_ok(renewing)
        with pytest.raises(ConnectionError):
            _metadata_ok(expiring)
    with _wire(broker) as w:  # an expired session may still re-authenticate
        w.sasl_plain("alice", "alice-secret")
        time.sleep(REAUTH_MS / 1000 + 0.2)
        w.sasl_plain("alice", "alice-secret")
        assert _metadata_ok(w)


def test_reauthentication_must_keep_principal_and_mechanism(broker):
    with _wire(broker) as w:
        w.sasl_plain("alice", "alice-secret")
        with pytest.raises(WireSaslError) as err:
            w.sasl_scram("SCRAM-SHA-256", SCRAM_USER, SCRAM_PASSWORD)
        assert err.value.error_message == ("SASL mechanism 'SCRAM-SHA-256' requested by client is not supported "
                                           "for re-authentication of mechanism 'PLAIN'")
        assert w.is_closed_by_peer()
    with _wire(broker) as w:
        w.sasl_plain("alice", "alice-secret")
        with pytest.raises(WireSaslError) as err:
            w.sasl_plain("admin", "admin-secret")
        assert err.value.error_message == "Cannot change principals during re-authentication from User.alice: User.admin"
        assert w.is_closed_by_peer()
    with _wire(broker) as w:  # a second handshake within a second of the last one is refused
        w.sasl_plain("alice", "alice-secret")
        w.sasl_plain("alice", "alice-secret")
        assert w.request(17, 1, {"mechanism": "PLAIN"}).error_code == ErrorCode.ILLEGAL_SASL_STATE
        assert _metadata_ok(w)


def test_librdkafka_reauthenticates_across_session_expiries(broker):
    topic = unique_name("reauth")
    log_start = broker.log_path.stat().st_size
    conf = _confluent_conf(broker, "SCRAM-SHA-512", SCRAM_USER, SCRAM_PASSWORD)
    sent, received, errors = produce_and_consume_for(conf, topic, 3.5 * REAUTH_MS / 1000, TIMEOUT_S)
    assert received == sent and errors == []
    log = broker.log_path.read_bytes()[log_start:].decode(errors="replace")
    reauths = log.count(f"Successful re-authentication of User:{SCRAM_USER} with SCRAM-SHA-512")
    assert reauths >= 3, log[-3000:]
    assert "SASL session of" not in log  # no connection closed for an expired session



def _raw_token(w: WireClient, token: bytes) -> bytes:
    """One SASL token after SaslHandshake v0: sent and answered as raw size-prefixed frames."""
    w.send_raw(struct.pack(">i", len(token)) + token)
    return w.read_frame()


def test_handshake_v0_exchanges_raw_tokens(broker):
    """SaslHandshake v0 (advertised 0-1 as by Kafka 4; librdkafka 2.0 needs v0 in the range to
    attempt SASL): the tokens then travel without Kafka headers; success gives a normal session,
    a failure closes the connection without an answer (v0 has no error field)."""
    with _wire(broker) as w:
        assert w.request(17, 0, {"mechanism": "PLAIN"}).error_code == ErrorCode.NONE
        assert _raw_token(w, b"\0alice\0alice-secret") == b""
        assert _metadata_ok(w)
        assert w.request(17, 0, {"mechanism": "PLAIN"}).error_code == ErrorCode.ILLEGAL_SASL_STATE  # no v0 re-auth
    with _wire(broker) as w:  # SCRAM: two raw round trips, and the server's proof checks out
        assert w.request(17, 0, {"mechanism": "SCRAM-SHA-256"}).error_code == ErrorCode.NONE
        client = scramp.ScramClient(["SCRAM-SHA-256"], SCRAM_USER, SCRAM_PASSWORD)
        client.set_server_first(_raw_token(w, client.get_client_first().encode()).decode())
        client.set_server_final(_raw_token(w, client.get_client_final().encode()).decode())
        assert _metadata_ok(w)
    with _wire(broker) as w:
        w.request(17, 0, {"mechanism": "PLAIN"})
        w.send_raw(struct.pack(">i", 19) + b"\0alice\0wrong-secret")
        assert w.is_closed_by_peer()


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is not installed (CI installs it with apt-get)")
@pytest.mark.parametrize("mechanism,user,password", CREDENTIALS)
def test_kcat_authenticates(broker, mechanism, user, password):
    """Debian's kcat (librdkafka 2.0.2) attempts SASL only when the broker's SaslHandshake range
    includes v0 (its feature map), then uses v1 and SaslAuthenticate. Its SCRAM sends the client
    nonce twice in the final message (librdkafka's bug before 2.6.1), which LiteMQ accepts as
    Kafka 3.8.1-3.9 do (Kafka 4 refuses it)."""
    topic = unique_name("sasl-kcat")
    auth = ["-b", broker.bootstrap("SASL_PLAINTEXT"), "-X", "security.protocol=SASL_PLAINTEXT",
            "-X", f"sasl.mechanisms={mechanism}", "-X", f"sasl.username={user}", "-X", f"sasl.password={password}"]
    subprocess.run(["kcat", "-P", "-t", topic, *auth], input=b"one\ntwo\n", check=True, timeout=60)
    out = subprocess.run(["kcat", "-C", "-t", topic, "-o", "beginning", "-e", "-q", *auth],
                         capture_output=True, check=True, timeout=60).stdout
    assert out.split() == [b"one", b"two"]


def test_scram_final_nonce_must_hold_the_servers_whole_nonce(broker):
    """The accepted librdkafka form is exactly client nonce + server nonce; a final message
    that drops or alters any of the server's nonce still fails (RFC 5802, CVE-2024-56128)."""
    for mangle in (lambda c, s: c, lambda c, s: s[:-1], lambda c, s: "x" + s, lambda c, s: c + c + s,
                   lambda c, s: s + c):
        with _wire(broker) as w:
            client = scramp.ScramClient(["SCRAM-SHA-256"], SCRAM_USER, SCRAM_PASSWORD)
            w.sasl_handshake("SCRAM-SHA-256")
            first = client.get_client_first()
            server_first = w.sasl_authenticate(first.encode()).auth_bytes.decode()
            client.set_server_first(server_first)
            c_nonce = first.split("r=", 1)[1]
            s_nonce = server_first.split("r=", 1)[1].split(",", 1)[0]
            final = client.get_client_final().replace(f"r={s_nonce}", f"r={mangle(c_nonce, s_nonce)}")
            with pytest.raises(WireSaslError):
                w.sasl_authenticate(final.encode())
