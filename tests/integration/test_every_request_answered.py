"""Never let a request go unanswered: well-formed requests of every API and version the broker
advertises, with random field values drawn from the Kafka message schemas (the codec's own
Hypothesis strategy), each get a response with their correlation id, and the broker keeps
serving. Random bodies of random API keys (broken framing) are ``test_bad_input``'s; this file
covers what decodes but carries values no client sends: null names, zero or unknown ids, empty
or huge counts, negative indexes.

Waits are capped (fields named ``*timeout_ms``, ``*wait_ms``, ``*interval_ms`` below 300 ms) and
Produce asks for acks 1 or -1, since a Kafka broker also holds a long poll until its timeout and
never answers acks=0."""

from __future__ import annotations

import socket

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from litemq.protocol import frames
from litemq.protocol.messages import request_spec
from litemq.testing.process import BrokerProcess
from litemq.testing.wire import WireClient
from tests.protocol.test_codec_roundtrip import struct_strategy

API_VERSIONS_V3 = {"client_software_name": "answered", "client_software_version": "1"}
WAIT_CAP_MS = 300
ANSWER_TIMEOUT_S = 20.0


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    # a JoinGroup v0-3 of a new group waits the initial rebalance delay (Kafka: 3 s)
    # client telemetry on: GetTelemetrySubscriptions and PushTelemetry (KIP-714) are advertised too
    with BrokerProcess(tmp_path_factory.mktemp("answered") / "data",
                       overrides={"group.initial.rebalance.delay.ms": "0", "client.telemetry.enable": "true"}) as b:
        yield b


@pytest.fixture(scope="module")
def advertised(broker) -> list[tuple[int, int]]:
    with WireClient("127.0.0.1", broker.port) as w:
        keys = w.request(18, 3, API_VERSIONS_V3).api_keys
    return [(k.api_key, v) for k in keys for v in range(k.min_version, k.max_version + 1)]


_strategies: dict = {}


def _body(api_key: int, version: int):
    if (api_key, version) not in _strategies:
        _strategies[(api_key, version)] = struct_strategy(request_spec(api_key)._msg.root, version)
    return _strategies[(api_key, version)]


def _capped(value, name: str = ""):
    if isinstance(value, dict):
        return {k: _capped(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return [_capped(v, name) for v in value]
    if isinstance(value, int) and not isinstance(value, bool) and name.endswith(("timeout_ms", "wait_ms", "interval_ms")):
        return value % WAIT_CAP_MS
    return value


def _ask(port: int, api_key: int, version: int, body: dict):
    """Send one request on a fresh connection; the decoded response (ConnectionError/timeout
    when the broker closed the connection or did not answer)."""
    with WireClient("127.0.0.1", port, timeout_s=ANSWER_TIMEOUT_S) as w:
        w.send_raw(frames.encode_request(api_key, version, 7, "answered", body))
        corr, msg = frames.decode_response(api_key, version, w.read_frame())
    assert corr == 7
    return msg


def draw_and_ask(data, broker: BrokerProcess, advertised: list[tuple[int, int]], where: str = "") -> None:
    """Draw one of the ``advertised`` (api key, version) pairs and a body for it, send it to
    ``broker`` and fail the test unless it is answered and the broker lives on."""
    api_key, version = data.draw(st.sampled_from(advertised), label="api")
    body = _capped(data.draw(_body(api_key, version), label="body"))
    if api_key == 0:
        body["acks"] = data.draw(st.sampled_from([1, -1]), label="acks")
    try:
        _ask(broker.port, api_key, version, body)
    except (ConnectionError, socket.timeout) as exc:
        pytest.fail(f"{where}api {api_key} v{version} not answered ({exc}): {body!r}"[:2000])
    assert broker.alive()


@settings(max_examples=1500, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_every_well_formed_request_is_answered(broker, advertised, data):
    draw_and_ask(data, broker, advertised)


def test_metadata_v10_v11_with_topic_ids_is_invalid_request(broker):
    """Found by the test above: Metadata v10-11 carry topic ids and null names on the wire but
    Kafka serves lookups by id only from v12; it answers every topic INVALID_REQUEST (a null name
    as ""), where LiteMQ failed to encode its answer and closed the connection."""
    import uuid

    topics = [{"name": None, "topic_id": uuid.UUID(int=5)}, {"name": "t", "topic_id": uuid.UUID(int=0)}]
    for version in (10, 11):
        r = _ask(broker.port, 3, version, {"topics": topics, "allow_auto_topic_creation": False})
        assert [(t.name, t.error_code) for t in r.topics] == [("", 42), ("t", 42)]
    r = _ask(broker.port, 3, 12, {"topics": topics, "allow_auto_topic_creation": False})
    assert [(t.name, t.error_code) for t in r.topics] == [(None, 100), ("t", 3)]  # UNKNOWN_TOPIC_ID, _OR_PARTITION
