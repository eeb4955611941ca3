"""DescribeConfigs answers each entry's type (KIP-569, v3+) and a broker's ``listeners`` and
``advertised.listeners`` (read-only, with where they were set), as Kafka does: found by
kafka-python's own integration suite (scripts/kafka-python-suite.sh), which reads
``retention.bytes`` as LONG and ``advertised.listeners`` of a broker."""

from __future__ import annotations

import random

from confluent_kafka.admin import AdminClient, NewTopic
from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient

from litemq.testing.process import BrokerProcess, free_port
from litemq.testing.wire import WireClient


def _describe(bootstrap: str, rtype: ConfigResourceType, name: str) -> dict:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        found = admin.describe_configs([ConfigResource(rtype, name)], config_filter="all")
    finally:
        admin.close()
    [(_, entries)] = found[rtype.name.lower()].items()
    return entries


def test_topic_and_broker_config_entries_carry_kafkas_types(shared_broker):
    bs = shared_broker.bootstrap_servers
    topic = f"types-{random.randrange(1 << 30)}"
    admin = AdminClient({"bootstrap.servers": bs})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(timeout=30)

    entries = _describe(bs, ConfigResourceType.TOPIC, topic)
    types = {name: e["config_type"] for name, e in entries.items()}
    assert {name for name, t in types.items() if t == "UNKNOWN"} == set()
    assert {k: types[k] for k in ("retention.bytes", "retention.ms", "segment.bytes", "cleanup.policy",
                                  "min.cleanable.dirty.ratio", "unclean.leader.election.enable",
                                  "compression.type")} == {
        "retention.bytes": "LONG", "retention.ms": "LONG", "segment.bytes": "INT", "cleanup.policy": "LIST",
        "min.cleanable.dirty.ratio": "DOUBLE", "unclean.leader.election.enable": "BOOLEAN",
        "compression.type": "STRING"}
    assert entries["retention.bytes"]["value"] == "-1" and entries["retention.bytes"]["config_source"] == "DEFAULT_CONFIG"

    broker = _describe(bs, ConfigResourceType.BROKER, "1")
    assert {name for name, e in broker.items() if e["config_type"] == "UNKNOWN"} == set()
    assert broker["log.retention.ms"]["config_type"] == "LONG" and broker["num.partitions"]["config_type"] == "INT"
    listeners, advertised = broker["listeners"], broker["advertised.listeners"]
    assert listeners["value"] == f"PLAINTEXT://127.0.0.1:{shared_broker.port}"
    assert advertised["value"] == f"PLAINTEXT://127.0.0.1:{shared_broker.port}"
    assert listeners["read_only"] is True and advertised["read_only"] is True
    assert listeners["config_type"] == "STRING" and advertised["is_sensitive"] is False
    assert advertised["config_source"] == "DEFAULT_CONFIG"  # not set: the listener's, as Kafka


def test_advertised_listeners_set_at_start_are_a_static_broker_config(tmp_path):
    port = free_port()
    adv = f"PLAINTEXT://localhost:{port}"
    with BrokerProcess(tmp_path / "data", port=port, overrides={"advertised.listeners": adv}) as broker:
        entries = _describe(broker.bootstrap_servers, ConfigResourceType.BROKER, "1")
        assert entries["advertised.listeners"]["value"] == adv
        assert entries["advertised.listeners"]["config_source"] == "STATIC_BROKER_CONFIG"
        assert entries["listeners"]["config_source"] == "STATIC_BROKER_CONFIG"  # --listen host:port
        with WireClient("127.0.0.1", port) as w:  # configuration_keys: only the one asked for
            res = w.request(32, 4, {"resources": [{"resource_type": 4, "resource_name": "1",
                                                   "configuration_keys": ["advertised.listeners"]}],
                                    "include_synonyms": True, "include_documentation": False})
        [r] = res.results
        assert [(c.name, c.value, c.config_type, [s.source for s in c.synonyms]) for c in r.configs] == [
            ("advertised.listeners", adv, 2, [4])]


def test_broker_id_and_node_id_name_their_own_synonyms(tmp_path):
    """Kafka copies ``node.id`` to ``broker.id`` (KafkaConfig.populateSynonyms), so each entry's
    synonyms carry its own name: the value given at start, then the default."""
    port = free_port()
    with BrokerProcess(tmp_path / "data", port=port, extra_args=["--node-id", "7"]) as broker:
        with WireClient("127.0.0.1", broker.port) as w:
            res = w.request(32, 4, {"resources": [{"resource_type": 4, "resource_name": "7",
                                                   "configuration_keys": ["broker.id", "node.id"]}],
                                    "include_synonyms": True, "include_documentation": False})
    [r] = res.results
    assert [(c.name, c.value, c.config_source, [(s.name, s.value, s.source) for s in c.synonyms])
            for c in r.configs] == [("broker.id", "7", 4, [("broker.id", "7", 4), ("broker.id", "1", 5)]),
                                    ("node.id", "7", 4, [("node.id", "7", 4), ("node.id", "1", 5)])]
