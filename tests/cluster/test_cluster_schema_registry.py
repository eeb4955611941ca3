"""The schema registry on a 3-broker cluster: schemas registered through any broker's HTTP port go
through the metadata log, so ids are unique even when brokers register at the same time, every
broker serves the same ids and versions, and a restarted broker has them again from the log."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import pytest
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

from litemq.testing.cluster import LocalCluster, wait_for

pytestmark = pytest.mark.timeout(300)


def _schema(i: int) -> Schema:
    return Schema(json.dumps({"type": "record", "name": f"Event{i}", "fields": [{"name": "n", "type": "long"}]}),
                  "AVRO")


def _state(cluster, node: int) -> dict:
    registry = SchemaRegistryClient({"url": cluster.http_url(node)})
    return {s: [(v, registry.get_version(s, v).schema_id) for v in registry.get_versions(s)]
            for s in registry.get_subjects()}


def test_ids_are_unique_and_every_broker_serves_them(tmp_path):
    with LocalCluster(tmp_path, 3, http=True) as cluster:
        # unrelated record types under one subject: not BACKWARD compatible, so the level goes first
        SchemaRegistryClient({"url": cluster.http_url(1)}).set_compatibility(level="NONE")
        for node in cluster.node_ids:
            wait_for(lambda node=node: SchemaRegistryClient({"url": cluster.http_url(node)}).get_compatibility()
                     == "NONE", 15, f"broker {node} has another compatibility level")

        def register(i: int) -> tuple[int, int]:
            node = cluster.node_ids[i % 3]  # the three brokers at once
            return i, SchemaRegistryClient({"url": cluster.http_url(node)}).register_schema(f"s{i % 4}", _schema(i))

        with ThreadPoolExecutor(6) as pool:
            ids = dict(pool.map(register, range(12)))
        assert sorted(ids.values()) == list(range(1, 13))  # one id per schema, none twice
        wanted = _state(cluster, 1)
        assert sum(len(v) for v in wanted.values()) == 12
        for node in cluster.node_ids[1:]:
            wait_for(lambda node=node: _state(cluster, node) == wanted, 15, f"broker {node} serves other ids")
        again = SchemaRegistryClient({"url": cluster.http_url(3)}).register_schema("s0", _schema(0))
        assert again == ids[0]  # the same schema through another broker: its id

        cluster.restart(2)
        wait_for(lambda: _state(cluster, 2) == wanted, 30, "broker 2 lost the registry")
        registry = SchemaRegistryClient({"url": cluster.http_url(2)})
        assert json.loads(registry.get_schema(ids[5]).schema_str)["name"] == "Event5"


def test_registrations_survive_metadata_leader_sigkills(tmp_path):
    """Schemas registered through every broker while the metadata leader is SIGKILLed twice (and
    restarted): each acknowledged registration keeps its id on every broker and no id is given to
    two schemas (a registration retried after a lost answer gets the id it was given, if any)."""
    import threading
    import time

    overrides = {"broker.heartbeat.interval.ms": "250", "broker.session.timeout.ms": "2500",
                 "raft.election.timeout.ms": "500"}
    with LocalCluster(tmp_path, 3, overrides, http=True) as cluster:
        SchemaRegistryClient({"url": cluster.http_url(1)}).set_compatibility(level="NONE")
        acked: dict[int, int] = {}
        errors: list[str] = []
        done = threading.Event()

        def writer() -> None:  # registers until the kills are over, every broker in turn
            i, attempt = 0, 0
            while not done.is_set():
                node = cluster.node_ids[attempt % 3]
                attempt += 1
                try:
                    client = SchemaRegistryClient({"url": cluster.http_url(node), "timeout": 10, "max.retries": 0})
                    acked[i] = client.register_schema(f"s{i % 5}", _schema(i))
                    i += 1
                except Exception as exc:  # a killed broker, no metadata leader yet: try the next one
                    errors.append(f"{i}@{node}: {type(exc).__name__}")
                time.sleep(0.02)

        thread = threading.Thread(target=writer)
        thread.start()
        try:
            for _ in range(2):
                time.sleep(1.0)
                leader = cluster.metadata_leader()
                cluster.kill(leader)
                time.sleep(1.5)
                cluster.restart(leader)
            time.sleep(1.0)
        finally:
            done.set()
            thread.join(30)
        print(f"{len(acked)} registrations acknowledged, {len(errors)} failed: {errors[:4]}")
        assert errors, "no registration met a killed broker: the kills tested nothing"
        assert len(acked) > 40, len(acked)
        assert len(set(acked.values())) == len(acked)  # one id per schema
        for node in cluster.node_ids:
            def serves_all(node=node) -> bool:
                registry = SchemaRegistryClient({"url": cluster.http_url(node)})
                return all(json.loads(registry.get_schema(sid).schema_str)["name"] == f"Event{i}"
                           for i, sid in acked.items())
            wait_for(serves_all, 30, f"broker {node} does not serve every acknowledged id")
        again = SchemaRegistryClient({"url": cluster.http_url(2)}).register_schema("s7", _schema(7))
        assert again == acked[7]  # the same schema under another subject: its id
