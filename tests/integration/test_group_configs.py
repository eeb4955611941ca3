"""DescribeConfigs/AlterConfigs/IncrementalAlterConfigs on GROUP config resources (type 32,
Kafka 4.1 group configs: consumer.* and share.*) and unknown resource types, with
confluent-kafka, kafka-python and raw requests. (Their effect on share groups and their
persistence: tests/groups/test_share_group_configs.py.)"""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient

from litemq.protocol.errors import ErrorCode
from litemq.testing.wire import WireClient
from tests.integration.admin_helpers import unique_name


# ====================================================================== GROUP config resources (KIP-848)
def test_describe_group_configs_confluent(shared_broker):
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource, ResourceType

    admin = AdminClient({"bootstrap.servers": shared_broker.bootstrap_servers})
    res = ConfigResource(ResourceType.GROUP, unique_name("never-seen-group"))  # defaults for any group id
    got = admin.describe_configs([res])[res].result(timeout=30)
    default = ConfigSource.DEFAULT_CONFIG.value
    assert {k: (v.value, v.source, v.is_default, v.is_read_only) for k, v in got.items()} == {
        "consumer.session.timeout.ms": ("45000", default, True, False),
        "consumer.heartbeat.interval.ms": ("5000", default, True, False),
        "share.session.timeout.ms": ("45000", default, True, False),
        "share.heartbeat.interval.ms": ("5000", default, True, False),
        "share.record.lock.duration.ms": ("30000", default, True, False),
        "share.auto.offset.reset": ("latest", default, True, False),
        "share.isolation.level": ("read_uncommitted", default, True, False)}

    group = unique_name("g1")
    alter = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry("consumer.session.timeout.ms", "50000", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([alter])[alter].result(timeout=30)
    res = ConfigResource(ResourceType.GROUP, group)
    got = admin.describe_configs([res])[res].result(timeout=30)
    assert (got["consumer.session.timeout.ms"].value, got["consumer.session.timeout.ms"].source) == (
        "50000", ConfigSource.GROUP_CONFIG.value)
    # Kafka's validation: names, types, validators, the broker-level bounds, session > heartbeat
    for name, value, message in [("no.such.config", "1", "Unknown group config name"),
                                 ("consumer.session.timeout.ms", "70000", "less than or equal to "
                                                                          "group.consumer.max.session.timeout.ms"),
                                 ("share.record.lock.duration.ms", "x", "Not a number of type INT"),
                                 ("share.record.lock.duration.ms", "14999", "greater than or equal to "
                                                                            "group.share.min.record.lock.duration.ms"),
                                 ("share.auto.offset.reset", "newest", "String must be one of: latest, earliest"),
                                 ("share.heartbeat.interval.ms", "15000", None)]:
        alter = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
            ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)])
        fut = admin.incremental_alter_configs([alter])[alter]
        if message is None:
            fut.result(timeout=30)
            continue
        with pytest.raises(KafkaException) as exc:
            fut.result(timeout=30)
        assert exc.value.args[0].code() == KafkaError.INVALID_CONFIG
        assert message in exc.value.args[0].str(), (name, value, exc.value.args[0].str())


def test_config_resource_types_raw(shared_broker):
    with WireClient("127.0.0.1", shared_broker.port) as c:
        resp = c.request(32, 4, {"resources": [
            {"resource_type": 32, "resource_name": "g", "configuration_keys": ["consumer.session.timeout.ms"]},
            {"resource_type": 32, "resource_name": "", "configuration_keys": None},
            {"resource_type": 3, "resource_name": "g", "configuration_keys": None},      # the ACL id of GROUP
            {"resource_type": 99, "resource_name": "x", "configuration_keys": None},
            {"resource_type": 2, "resource_name": "no-such-topic-xyz", "configuration_keys": None}],
            "include_synonyms": False, "include_documentation": True})
        r = resp.results
        assert r[0].error_code == 0
        assert [(e.name, e.value, e.config_source, e.config_type) for e in r[0].configs] == [
            ("consumer.session.timeout.ms", "45000", 5, 3)]
        assert r[0].configs[0].documentation
        resp = c.request(32, 1, {"resources": [{"resource_type": 32, "resource_name": "g", "configuration_keys": []}],
                                 "include_synonyms": False})
        assert len(resp.results[0].configs) == 7  # an empty key list means all keys, as in Kafka
        assert [x.error_code for x in r[1:]] == [ErrorCode.INVALID_REQUEST, ErrorCode.INVALID_REQUEST,
                                                  ErrorCode.INVALID_REQUEST, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]
        resp = c.request(44, 1, {"resources": [
            {"resource_type": rt, "resource_name": "g", "configs": [
                {"name": "consumer.session.timeout.ms", "config_operation": 0, "value": "50000"}]}
            for rt in (32, 3, 99)], "validate_only": True})
        assert [x.error_code for x in resp.responses] == [ErrorCode.NONE] + [ErrorCode.INVALID_REQUEST] * 2
        resp = c.request(44, 1, {"resources": [{"resource_type": 32, "resource_name": "g", "configs": [
            {"name": "share.session.timeout.ms", "config_operation": 2, "value": "50000"}]}], "validate_only": False})
        assert resp.responses[0].error_code == ErrorCode.INVALID_CONFIG  # APPEND: not a list config
        resp = c.request(33, 1, {"resources": [{"resource_type": 32, "resource_name": "g", "configs": [
            {"name": "consumer.session.timeout.ms", "value": "0"}]}], "validate_only": True})
        assert resp.responses[0].error_code == ErrorCode.INVALID_CONFIG


def test_group_configs_kafka_python(shared_broker):
    from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=shared_broker.bootstrap_servers)
    try:
        got = admin.describe_configs([ConfigResource(ConfigResourceType.GROUP, "kp-g")], config_filter="all")
        assert got["group"]["kp-g"]["consumer.session.timeout.ms"]["value"] == "45000"
        assert got["group"]["kp-g"]["consumer.heartbeat.interval.ms"]["value"] == "5000"
    finally:
        admin.close()
