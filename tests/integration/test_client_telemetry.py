"""Client metrics (KIP-714) on a real broker process: subscriptions set with the CLI and
IncrementalAlterConfigs (validated as Kafka validates them, kept across a restart), librdkafka
clients pushing the metrics a subscription matches them for, served on /metrics and gone with
their connection, and PushTelemetry's errors as Kafka answers them."""

from __future__ import annotations

import subprocess
import sys
import time
import urllib.request
import uuid

import cramjam
import pytest
from opentelemetry.proto.common.v1 import common_pb2
from opentelemetry.proto.metrics.v1 import metrics_pb2

from litemq.protocol.errors import ErrorCode as E
from litemq.testing.process import BrokerProcess
from litemq.testing.wire import WireClient

CLIENT_METRICS = 16
TELEMETRY_ON = {"client.telemetry.enable": "true"}


@pytest.fixture
def broker(tmp_path):
    with BrokerProcess(tmp_path / "data", overrides=dict(TELEMETRY_ON), http_port=0) as b:
        yield b


def _alter(w: WireClient, name: str, configs: dict, validate_only: bool = False):
    """IncrementalAlterConfigs of one CLIENT_METRICS resource: SET each value (None: DELETE)."""
    resp = w.request(44, 1, {"validate_only": validate_only, "resources": [{
        "resource_type": CLIENT_METRICS, "resource_name": name,
        "configs": [{"name": k, "config_operation": 1 if v is None else 0, "value": v} for k, v in configs.items()]}]})
    r = resp.responses[0]
    return r.error_code, r.error_message


def _describe(w: WireClient, name: str) -> dict:
    resp = w.request(32, 4, {"resources": [{"resource_type": CLIENT_METRICS, "resource_name": name,
                                            "configuration_keys": None}],
                             "include_synonyms": False, "include_documentation": False})
    r = resp.results[0]
    assert r.error_code == E.NONE, r.error_message
    assert all(c.config_source == 7 for c in r.configs)  # CLIENT_METRICS_CONFIG
    return {c.name: c.value for c in r.configs}


def _listed(w: WireClient) -> list[str]:
    resp = w.request(74, 0, {})
    assert resp.error_code == E.NONE
    return sorted(r.name for r in resp.client_metrics_resources)


def _scrape(broker) -> str:
    with urllib.request.urlopen(broker.http_url + "/metrics", timeout=10) as r:
        return r.read().decode()


def _series(body: str, name: str) -> list[str]:
    return [line for line in body.splitlines() if line.startswith(name + "{")]


def test_telemetry_apis_are_off_by_default_as_in_kafka(broker_proc):
    with WireClient("127.0.0.1", broker_proc.port) as w:
        keys = {k.api_key for k in w.request(18, 3, {"client_software_name": "t", "client_software_version": "1"}).api_keys}
    assert 71 not in keys and 72 not in keys  # Kafka: only with a ClientTelemetry receiver configured
    assert 74 in keys  # ListClientMetricsResources is an admin API


def test_subscriptions_are_validated_like_kafka_and_survive_a_restart(broker):
    with WireClient("127.0.0.1", broker.port) as w:
        assert _alter(w, "producers", {"metrics": "org.apache.kafka.producer., org.apache.kafka.client.",
                                       "interval.ms": "1000", "match": "client_id=app-.*"}) == (E.NONE, None)
        assert _alter(w, "everything", {"metrics": "*"}) == (E.NONE, None)
        assert _alter(w, "dry", {"metrics": "*"}, validate_only=True) == (E.NONE, None)
        refusals = {
            "interval": _alter(w, "bad", {"interval.ms": "50"}),
            "not a number": _alter(w, "bad", {"interval.ms": "soon"}),
            "unknown": _alter(w, "bad", {"metrics.enabled": "true"}),
            "no =": _alter(w, "bad", {"match": "client_id"}),
            "attribute": _alter(w, "bad", {"match": "host=.*"}),
            "regex": _alter(w, "bad", {"match": "client_id=(unclosed"}),
            "empty name": _alter(w, "", {"metrics": "*"}),
        }
        assert refusals == {
            "interval": (E.INVALID_REQUEST, "Invalid value 50 for interval.ms, interval must be between 100 and "
                                            "3600000 (1 hour)"),
            "not a number": (E.INVALID_CONFIG, "Invalid value soon for configuration interval.ms: Not a number of "
                                               "type INT"),
            "unknown": (E.INVALID_REQUEST, "Unknown client metrics configuration: metrics.enabled"),
            "no =": (E.INVALID_CONFIG, "Illegal client matching pattern: client_id"),
            "attribute": (E.INVALID_CONFIG, "Illegal client matching pattern: host=.*"),
            "regex": (E.INVALID_CONFIG, "Illegal client matching pattern: client_id=(unclosed"),
            "empty name": (E.INVALID_REQUEST, "Subscription name can't be empty"),
        }
        assert _listed(w) == ["everything", "producers"]
        assert _describe(w, "producers") == {"metrics": "org.apache.kafka.producer., org.apache.kafka.client.",
                                             "interval.ms": "1000", "match": "client_id=app-.*"}
        assert _describe(w, "unknown") == {}  # as Kafka: an unknown subscription has no configs
        # APPEND to a list config, DELETE of every config removes the subscription
        resp = w.request(44, 1, {"validate_only": False, "resources": [{
            "resource_type": CLIENT_METRICS, "resource_name": "producers",
            "configs": [{"name": "metrics", "config_operation": 2, "value": "org.apache.kafka.consumer."}]}]})
        assert resp.responses[0].error_code == E.NONE
        assert _describe(w, "producers")["metrics"] == ("org.apache.kafka.producer.,org.apache.kafka.client.,"
                                                        "org.apache.kafka.consumer.")
        assert _alter(w, "everything", {"metrics": None}) == (E.NONE, None)
        assert _listed(w) == ["producers"]
    broker.restart()
    with WireClient("127.0.0.1", broker.port) as w:
        assert _listed(w) == ["producers"]
        assert _describe(w, "producers")["interval.ms"] == "1000"


def test_cli_manages_subscriptions(broker):
    def litemq(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "litemq.cli", "client-metrics", *args,
                               "--bootstrap-server", broker.bootstrap_servers],
                              capture_output=True, text=True, timeout=60)

    done = litemq("alter", "--name", "apps", "--metrics", "org.apache.kafka.producer.", "--interval-ms", "500",
                  "--match", "client_software_name=confluent-kafka-python")
    assert done.returncode == 0, done.stderr
    refused = litemq("alter", "--name", "apps", "--interval-ms", "10")
    assert refused.returncode != 0 and "interval must be between 100 and 3600000" in refused.stderr + refused.stdout
    assert litemq("list").stdout.split() == ["apps"]
    shown = litemq("describe", "--name", "apps")
    assert shown.returncode == 0 and "org.apache.kafka.producer." in shown.stdout and "500" in shown.stdout
    assert litemq("alter", "--name", "apps", "--match", "").returncode == 0  # every client now
    with WireClient("127.0.0.1", broker.port) as w:
        assert "match" not in _describe(w, "apps")
    assert litemq("delete", "--name", "apps").returncode == 0
    assert "no client metrics subscriptions" in litemq("list").stdout
    assert litemq("delete", "--name", "apps").returncode != 0


def test_librdkafka_pushes_subscribed_metrics_to_the_metrics_endpoint(broker):
    from confluent_kafka import Consumer, Producer

    with WireClient("127.0.0.1", broker.port) as w:
        assert _alter(w, "etl-producers", {"metrics": "org.apache.kafka.producer.", "interval.ms": "500",
                                           "match": "client_id=etl-.*,client_software_name=confluent-kafka-python"}) \
            == (E.NONE, None)
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "client.id": "etl-loader"})
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "client.id": "dashboard",
                         "group.id": "telemetry-test", "auto.offset.reset": "earliest"})
    consumer.subscribe(["telemetry-events"])
    for i in range(200):
        producer.produce("telemetry-events", b"%d" % i)
    producer.flush(30)
    deadline = time.monotonic() + 30
    queue_time: list[str] = []
    while time.monotonic() < deadline and not queue_time:
        consumer.poll(0.2)
        queue_time = _series(_scrape(broker), "org_apache_kafka_producer_record_queue_time_avg")
    body = _scrape(broker)
    assert queue_time, body[-3000:]
    assert len(queue_time) == 1  # the matched producer only: not the consumer (client id), not other clients
    line = queue_time[0]
    assert 'client_id="etl-loader"' in line and 'client_software_name="confluent-kafka-python"' in line
    assert _series(body, "org_apache_kafka_producer_node_request_latency_avg")[0].count('node_id="1"') == 1
    assert "org_apache_kafka_consumer_" not in body  # the subscription asks for producer metrics only
    assert 'client_id="dashboard"' not in body
    accepted = [line for line in body.splitlines() if line.startswith('litemq_client_telemetry_pushes_total{error="NONE"}')]
    assert accepted and float(accepted[0].split()[-1]) >= 1
    producer.flush(10)
    del producer  # closes its connections: the instance and its series go, as Kafka drops it on disconnect
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and _series(_scrape(broker), "org_apache_kafka_producer_record_queue_time_avg"):
        consumer.poll(0.2)
    assert not _series(_scrape(broker), "org_apache_kafka_producer_record_queue_time_avg")
    consumer.close()


def _metrics_data(delta_requests: int) -> bytes:
    """A MetricsData with one gauge and one monotonic delta sum, as librdkafka encodes them."""
    md = metrics_pb2.MetricsData()
    rm = md.resource_metrics.add()
    rm.resource.attributes.add(key="client.rack", value=common_pb2.AnyValue(string_value="r1"))
    sm = rm.scope_metrics.add()
    gauge = sm.metrics.add(name="org.apache.kafka.producer.record.queue.time.avg")
    gauge.gauge.data_points.add(as_double=2.5)
    total = sm.metrics.add(name="org.apache.kafka.producer.connection.creation.total")
    total.sum.is_monotonic = True
    total.sum.aggregation_temporality = 1  # delta
    p = total.sum.data_points.add(as_int=delta_requests)
    p.attributes.add(key="node.id", value=common_pb2.AnyValue(int_value=1))
    reserved = sm.metrics.add(name="litemq.broker.info")  # the broker's own name: dropped
    reserved.gauge.data_points.add(as_double=9)
    return md.SerializeToString()


def test_push_telemetry_answers_as_kafka(broker):
    with WireClient("127.0.0.1", broker.port) as w:
        assert _alter(w, "all", {"metrics": "*", "interval.ms": "100"}) == (E.NONE, None)
        w.request(18, 3, {"client_software_name": "wire-test", "client_software_version": "1.0"}, client_id="raw")
        sub = w.request(71, 0, {"client_instance_id": None}, client_id="raw")
        assert sub.error_code == E.NONE
        assert sub.client_instance_id not in (None, uuid.UUID(int=0))
        assert sub.requested_metrics == ["*"] and sub.push_interval_ms == 100 and sub.delta_temporality
        assert sub.accepted_compression_types == [4, 3, 1, 2] and sub.telemetry_max_bytes == 1_048_576
        again = w.request(71, 0, {"client_instance_id": sub.client_instance_id}, client_id="raw")
        assert again.error_code == E.THROTTLING_QUOTA_EXCEEDED  # before the push interval

        def push(payload: bytes, compression: int = 0, subscription_id: int | None = None,
                 instance=sub.client_instance_id, terminating: bool = False) -> int:
            time.sleep(0.12)  # one push interval
            return w.request(72, 0, {"client_instance_id": instance, "terminating": terminating,
                                     "subscription_id": sub.subscription_id if subscription_id is None else subscription_id,
                                     "compression_type": compression, "metrics": payload}, client_id="raw").error_code

        assert push(bytes(cramjam.zstd.compress(_metrics_data(5))), compression=4) == E.NONE
        assert push(bytes(cramjam.gzip.compress(_metrics_data(3))), compression=1) == E.NONE
        body = _scrape(broker)
        total = _series(body, "org_apache_kafka_producer_connection_creation_total")
        assert len(total) == 1 and total[0].endswith(" 8.0"), total  # deltas added up: 5 + 3
        assert 'node_id="1"' in total[0] and 'client_rack="r1"' in total[0] and 'client_id="raw"' in total[0]
        assert 'client_software_name="wire-test"' in total[0] and 'client_software_version="1.0"' in total[0]
        assert _series(body, "org_apache_kafka_producer_record_queue_time_avg")[0].endswith(" 2.5")
        assert "# TYPE org_apache_kafka_producer_connection_creation_total counter" in body
        assert len([line for line in body.splitlines() if line.startswith("litemq_broker_info")]) == 1
        w.request(72, 0, {"client_instance_id": sub.client_instance_id, "terminating": False,
                          "subscription_id": sub.subscription_id, "compression_type": 0, "metrics": b""},
                  client_id="raw")  # on time or not, another push right after it is too early
        errors = {
            "too early": w.request(72, 0, {"client_instance_id": sub.client_instance_id, "terminating": False,
                                           "subscription_id": sub.subscription_id, "compression_type": 0,
                                           "metrics": b""}, client_id="raw").error_code,
            "subscription": push(b"", subscription_id=sub.subscription_id ^ 1),
            "codec": push(b"", compression=9),
            "unreadable": push(b"\xff\xff\xff\xff not protobuf"),
            "corrupt zstd": push(b"\x28\xb5\x2f\xfd garbage", compression=4),
            "too large": push(b"\0" * (1_048_576 + 1)),
            "zero id": push(b"", instance=None),
        }
        assert errors == {"too early": E.THROTTLING_QUOTA_EXCEEDED, "subscription": E.UNKNOWN_SUBSCRIPTION_ID,
                          "codec": E.UNSUPPORTED_COMPRESSION_TYPE, "unreadable": E.INVALID_RECORD,
                          "corrupt zstd": E.INVALID_RECORD, "too large": E.TELEMETRY_TOO_LARGE,
                          "zero id": E.INVALID_REQUEST}
        assert push(b"", terminating=True) == E.NONE
        assert push(b"") == E.INVALID_REQUEST  # nothing after a terminating push
        # a changed subscription is handed out at once, with a new subscription id
        assert _alter(w, "all", {"metrics": "org.apache.kafka.consumer.", "interval.ms": "200"}) == (E.NONE, None)
        fresh = w.request(71, 0, {"client_instance_id": None}, client_id="raw")
        assert fresh.requested_metrics == ["org.apache.kafka.consumer."] and fresh.push_interval_ms == 200
        assert w.request(18, 0, {}).error_code == E.NONE  # the broker still serves the connection
