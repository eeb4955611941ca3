"""Client metrics (KIP-714) on a 3-broker cluster: a subscription altered through any broker goes
through the metadata log, every broker lists and describes it (a restarted one again from the
log), and a librdkafka producer's pushes reach the /metrics of the broker it pushes to."""

from __future__ import annotations

import time
import urllib.request

import pytest
from confluent_kafka import Producer

from litemq.testing.cluster import LocalCluster, wait_for
from litemq.testing.wire import WireClient

pytestmark = pytest.mark.timeout(300)


def _subscriptions(port: int) -> dict:
    with WireClient("127.0.0.1", port) as w:
        names = [r.name for r in w.request(74, 0, {}).client_metrics_resources]
        if not names:
            return {}
        resp = w.request(32, 4, {"resources": [{"resource_type": 16, "resource_name": n, "configuration_keys": None}
                                               for n in names], "include_synonyms": False,
                                 "include_documentation": False})
    return {r.resource_name: {c.name: c.value for c in r.configs} for r in resp.results}


def test_subscriptions_replicate_and_pushes_reach_the_metrics_endpoint(tmp_path):
    with LocalCluster(tmp_path, 3, overrides={"client.telemetry.enable": "true"}, http=True) as cluster:
        with WireClient("127.0.0.1", cluster.node(2).port) as w:  # any broker takes the change
            resp = w.request(44, 1, {"validate_only": False, "resources": [{
                "resource_type": 16, "resource_name": "producers", "configs": [
                    {"name": "metrics", "config_operation": 0, "value": "org.apache.kafka.producer."},
                    {"name": "interval.ms", "config_operation": 0, "value": "500"}]}]})
        assert resp.responses[0].error_code == 0, resp.responses[0].error_message
        wanted = {"producers": {"metrics": "org.apache.kafka.producer.", "interval.ms": "500"}}
        for node in cluster.node_ids:
            wait_for(lambda node=node: _subscriptions(cluster.node(node).port) == wanted, 15,
                     f"broker {node} does not describe the subscription")

        producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "client.id": "cluster-loader"})
        for i in range(100):
            producer.produce("telemetry-cluster", b"%d" % i)
        assert producer.flush(60) == 0

        def pushed_to() -> list[int]:
            out = []
            for node in cluster.node_ids:
                with urllib.request.urlopen(cluster.http_url(node) + "/metrics", timeout=10) as r:
                    body = r.read().decode()
                if any(line.startswith("org_apache_kafka_producer_record_queue_time_avg{") and
                       'client_id="cluster-loader"' in line for line in body.splitlines()):
                    out.append(node)
            return out

        deadline = time.monotonic() + 30
        nodes: list[int] = []
        while time.monotonic() < deadline and not nodes:
            producer.poll(0.2)
            nodes = pushed_to()
        assert len(nodes) == 1, nodes  # one client instance pushes to one broker at a time
        producer.flush(10)

        cluster.restart(3)  # the subscription comes back from the metadata log
        wait_for(lambda: _subscriptions(cluster.node(3).port) == wanted, 30, "broker 3 lost the subscription")
