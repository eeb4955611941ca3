"""MetadataImage records of issue 20: ``set_broker_configs`` (dynamic broker configs per broker and
the cluster-wide default) and the optional ``directory_id`` of ``register_broker``, applied and
carried through a snapshot; the dynamic broker config rules (read-only, unknown, bounds)."""

from __future__ import annotations

import pytest

from litemq.broker import dynamic_config
from litemq.broker.config_types import ConfigSource
from litemq.cluster.image import MetadataImage
from litemq.config import BrokerConfig
from litemq.protocol.errors import ErrorCode, KafkaError


def test_set_broker_configs_and_directory_id_survive_a_snapshot():
    img = MetadataImage()
    assert img.apply({"type": "register_broker", "node_id": 1, "host": "h", "port": 1}).error == 0
    assert img.brokers[1].directory_id is None  # a broker older than meta.properties
    img.apply({"type": "register_broker", "node_id": 2, "host": "h", "port": 2, "directory_id": "AAAAAAAAAAAAAAAAAAAAAQ"})
    r = img.apply({"type": "set_broker_configs", "broker": "", "configs": {"log.retention.ms": "1000"}})
    assert r.error == 0 and r.broker_configs_changed
    img.apply({"type": "set_broker_configs", "broker": "2", "configs": {"log.retention.ms": "5"}})
    assert img.apply({"type": "set_broker_configs", "broker": "x", "configs": {}}).error == ErrorCode.INVALID_REQUEST
    copy = MetadataImage.from_json(img.to_json())
    assert copy.broker_configs == {"": {"log.retention.ms": "1000"}, "2": {"log.retention.ms": "5"}}
    assert copy.brokers[2].directory_id == "AAAAAAAAAAAAAAAAAAAAAQ" and copy.brokers[1].directory_id is None
    # an empty set removes the resource
    copy.apply({"type": "set_broker_configs", "broker": "2", "configs": {}})
    assert copy.broker_configs == {"": {"log.retention.ms": "1000"}}
    # a snapshot written before these fields existed
    old = img.to_json()
    old.pop("broker_configs")
    old["brokers"] = [b[:4] for b in old["brokers"]]
    assert MetadataImage.from_json(old).broker_configs == {}


@pytest.mark.parametrize("configs,code,text", [
    ({"num.partitions": "3"}, ErrorCode.INVALID_REQUEST, "Cannot update these configs dynamically: Set(num.partitions)"),
    ({"log.retention.hours": "3"}, ErrorCode.INVALID_REQUEST, "Cannot update these configs dynamically"),
    ({"no.such": "3"}, ErrorCode.INVALID_CONFIG, "Unknown broker config name(s): no.such"),
    ({"log.segment.bytes": "1048575"}, ErrorCode.INVALID_REQUEST, "value must be at least 1048576"),
    ({"log.cleanup.policy": "bogus"}, ErrorCode.INVALID_REQUEST, "cleanup.policy"),
    ({"log.cleaner.min.cleanable.ratio": "2"}, ErrorCode.INVALID_REQUEST, "min.cleanable.dirty.ratio"),
    ({"leader.replication.throttled.rate": "-1"}, ErrorCode.INVALID_REQUEST, "value must be at least 0"),
    ({"message.max.bytes": "x"}, ErrorCode.INVALID_REQUEST, "message.max.bytes"),
])
def test_dynamic_config_validation(configs, code, text):
    with pytest.raises(KafkaError) as exc:
        dynamic_config.validate("1", configs)
    assert exc.value.code == code and text in str(exc.value)


def test_effective_config_precedence():
    static = BrokerConfig.from_sources(overrides={"log.retention.ms": "7000", "log.segment.bytes": "2097152"})
    per_broker, default = {"log.retention.ms": "5"}, {"log.retention.ms": "1000", "log.cleaner.delete.retention.ms": "9"}
    dynamic_config.validate("", default)
    with pytest.raises(KafkaError):
        dynamic_config.validate("one", {})
    eff = dynamic_config.effective(static, per_broker, default)
    assert eff.log_retention_ms == 5 and eff.log_segment_bytes == 2097152 and static.log_retention_ms == 7000
    logs = dynamic_config.log_config_defaults(eff, per_broker, default)
    assert logs["retention.ms"] == "5" and logs["delete.retention.ms"] == "9" and logs["segment.bytes"] == "2097152"
    src = dynamic_config.source_of
    assert src("log.retention.ms", static, per_broker, default) == ConfigSource.DYNAMIC_BROKER_CONFIG
    assert src("log.retention.ms", static, {}, default) == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
    assert src("log.retention.ms", static, {}, {}) == ConfigSource.STATIC_BROKER_CONFIG
    assert src("log.roll.ms", static, {}, {}) == ConfigSource.DEFAULT_CONFIG
