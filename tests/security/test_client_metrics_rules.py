"""Client metrics subscriptions (KIP-714) as Kafka evaluates them: which subscriptions match a
client, the metrics and interval it is handed, its subscription id, the pacing of its requests,
and how long the broker keeps a client instance (pure: the store, the receiver, a test clock)."""

from __future__ import annotations

import uuid

import pytest

from litemq import limits
from litemq.broker.client_telemetry import ClientInstance, ClientTelemetryManager, prometheus_name
from litemq.protocol.errors import ErrorCode, KafkaError
from litemq.security import client_metrics as cm


class _State:
    def __init__(self) -> None:
        self.client_metrics = cm.ClientMetricsStore()


def _set(state: _State, name: str, **configs: str) -> None:
    rec, _ = cm.plan(state, {"name": name, "configs": {k.replace("_", "."): v for k, v in configs.items()}})
    assert rec is not None
    cm.apply(state, rec)


APP = {cm.CLIENT_ID: "etl-1", cm.CLIENT_SOFTWARE_NAME: "confluent-kafka-python",
       cm.CLIENT_SOFTWARE_VERSION: "2.16.1", cm.CLIENT_SOURCE_ADDRESS: "127.0.0.1", cm.CLIENT_SOURCE_PORT: "50000"}


def test_a_client_gets_the_union_of_the_matching_subscriptions_and_their_lowest_interval():
    state = _State()
    _set(state, "producers", metrics="org.apache.kafka.producer.", interval_ms="5000", match="client_id=etl-.*")
    _set(state, "python", metrics="org.apache.kafka.client.", interval_ms="2000",
         match="client_software_name=confluent-kafka-python, client_software_version=2\\..*")
    _set(state, "java", metrics="*", interval_ms="100", match="client_software_name=apache-kafka-java")
    _set(state, "partial", metrics="*", match="client_id=etl")  # a full match is needed: etl-1 is not etl
    inst = ClientInstance(uuid.uuid4(), APP)
    inst.evaluate(state.client_metrics)
    assert inst.metrics == ["org.apache.kafka.client.", "org.apache.kafka.producer."]
    assert inst.push_interval_ms == 2000
    _set(state, "everyone", metrics="*")  # no match config: every client; '*' alone stands for all
    inst.evaluate(state.client_metrics)
    assert inst.metrics == ["*"] and inst.push_interval_ms == 2000
    nobody = ClientInstance(uuid.uuid4(), {cm.CLIENT_ID: "x"})  # no software name: the java/python ones miss
    _set(state, "everyone", metrics="")  # still a subscription (default interval), asking for no metric
    nobody.evaluate(state.client_metrics)
    assert nobody.metrics == [] and nobody.push_interval_ms == cm.INTERVAL_MS_DEFAULT


def test_subscription_id_changes_with_the_subscription_and_the_instance():
    state = _State()
    _set(state, "a", metrics="org.apache.kafka.producer.", interval_ms="1000")
    one, two = ClientInstance(uuid.uuid4(), APP), ClientInstance(uuid.uuid4(), APP)
    one.evaluate(state.client_metrics)
    two.evaluate(state.client_metrics)
    first = one.subscription_id
    assert -(2**31) <= first < 2**31 and first != two.subscription_id
    _set(state, "a", metrics="org.apache.kafka.producer.", interval_ms="2000")
    one.evaluate(state.client_metrics)
    assert one.subscription_id != first


def test_requests_are_paced_by_the_push_interval():
    inst = ClientInstance(uuid.uuid4(), APP)
    inst.push_interval_ms = 1000
    assert inst.may_get(0)
    assert inst.may_push(10)  # the first push after a GetTelemetrySubscriptions, whenever it comes
    assert not inst.may_push(500) and not inst.may_get(900)
    assert inst.may_push(1010)
    assert inst.may_get(2010) and inst.may_push(2020)


def test_the_store_bounds_and_its_changes():
    state = _State()
    generation = state.client_metrics.generation
    _set(state, "a", metrics="*")
    assert state.client_metrics.generation != generation
    rec, _ = cm.plan(state, {"name": "a", "configs": {"metrics": "*"}})
    assert rec is None  # nothing changes
    rec, _ = cm.plan(state, {"name": "b", "configs": {"metrics": "*"}, "validate_only": True})
    assert rec is None and "b" not in state.client_metrics.subscriptions
    with pytest.raises(KafkaError) as err:
        cm.plan(state, {"name": "x" * (limits.MAX_CLIENT_METRICS_NAME_CHARS + 1), "configs": {"metrics": "*"}})
    assert err.value.code == ErrorCode.INVALID_REQUEST
    copy = cm.ClientMetricsStore.from_json(state.client_metrics.to_json())
    assert copy.subscriptions == {"a": {"metrics": "*"}} and copy.generation != state.client_metrics.generation
    cm.apply(state, {"type": "alter_client_metrics", "name": "a", "configs": {}})
    assert len(state.client_metrics) == 0


def test_instances_expire_and_are_bounded():
    state = _State()
    _set(state, "a", metrics="*", interval_ms="100")
    now = [0.0]
    manager = ClientTelemetryManager(lambda: state.client_metrics, 1024, clock_ms=lambda: now[0])
    first = manager.get_subscriptions(None, APP)["client_instance_id"]
    now[0] = limits.CLIENT_TELEMETRY_INSTANCE_EXPIRY_MS - 1
    manager.get_subscriptions(None, APP)
    assert first in manager.instances
    now[0] = limits.CLIENT_TELEMETRY_INSTANCE_EXPIRY_MS + 1  # the first was last heard of a minute ago
    manager.get_subscriptions(None, APP)
    assert first not in manager.instances and len(manager.instances) == 2
    for _ in range(limits.MAX_CLIENT_TELEMETRY_INSTANCES + 5):
        manager.get_subscriptions(None, APP)
    assert len(manager.instances) == limits.MAX_CLIENT_TELEMETRY_INSTANCES


def test_prometheus_names():
    assert prometheus_name("org.apache.kafka.producer.node.request.latency.avg") == \
        "org_apache_kafka_producer_node_request_latency_avg"
    assert prometheus_name("1st-metric") == "_1st_metric"
