"""DescribeConfigs/AlterConfigs on GROUP config resources (type 32, KIP-848 group configs) and
unknown resource types, with confluent-kafka, kafka-python and raw requests."""

from __future__ import annotations

from confluent_kafka import KafkaError
from confluent_kafka.admin import AdminClient

from litemq.protocol.errors import ErrorCode
from litemq.testing.wire import WireClient
from tests.integration.admin_helpers import error_code, unique_name


# ====================================================================== GROUP config resources (KIP-848)
def test_describe_group_configs_confluent(shared_broker):
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource, ResourceType

    admin = AdminClient({"bootstrap.servers": shared_broker.bootstrap_servers})
    res = ConfigResource(ResourceType.GROUP, unique_name("never-seen-group"))  # defaults for any group id
    got = admin.describe_configs([res])[res].result(timeout=30)
    assert {k: (v.value, v.source, v.is_default, v.is_read_only) for k, v in got.items()} == {
        "consumer.session.timeout.ms": ("45000", ConfigSource.DEFAULT_CONFIG.value, True, False),
        "consumer.heartbeat.interval.ms": ("5000", ConfigSource.DEFAULT_CONFIG.value, True, False)}

    alter = ConfigResource(ResourceType.GROUP, "g1", incremental_configs=[
        ConfigEntry("consumer.session.timeout.ms", "50000", incremental_operation=AlterConfigOpType.SET)])
    assert error_code(admin.incremental_alter_configs([alter])[alter]) == KafkaError.INVALID_REQUEST
    alter = ConfigResource(ResourceType.GROUP, "g1", incremental_configs=[
        ConfigEntry("no.such.config", "1", incremental_operation=AlterConfigOpType.SET)])
    assert error_code(admin.incremental_alter_configs([alter])[alter]) == KafkaError.INVALID_CONFIG


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
        assert len(resp.results[0].configs) == 2  # an empty key list means all keys, as in Kafka
        assert [x.error_code for x in r[1:]] == [ErrorCode.INVALID_REQUEST, ErrorCode.INVALID_REQUEST,
                                                  ErrorCode.INVALID_REQUEST, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]
        resp = c.request(44, 1, {"resources": [
            {"resource_type": rt, "resource_name": "g", "configs": [
                {"name": "consumer.session.timeout.ms", "config_operation": 0, "value": "50000"}]}
            for rt in (32, 3, 99)], "validate_only": False})
        assert [x.error_code for x in resp.responses] == [ErrorCode.INVALID_REQUEST] * 3
        assert "not supported" in resp.responses[0].error_message
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
