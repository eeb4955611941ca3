"""Client quotas on a 3-broker cluster: an AlterClientQuotas sent to any broker goes through the
metadata log, every broker describes and enforces it (each on its own traffic, as Kafka's
brokers do), and a restarted broker has it again from the log."""

from __future__ import annotations

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from litemq.protocol.records import build_batch
from litemq.testing.cluster import LocalCluster, wait_for
from litemq.testing.wire import WireClient

pytestmark = pytest.mark.timeout(300)


def _quotas(port: int) -> dict:
    with WireClient("127.0.0.1", port) as w:
        resp = w.request(48, 1, {"components": [], "strict": False})
    assert resp.error_code == 0
    return {tuple((e.entity_type, e.entity_name) for e in entry.entity): {v.key: v.value for v in entry.values}
            for entry in resp.entries}


def test_quotas_replicate_and_every_broker_enforces_them(tmp_path):
    with LocalCluster(tmp_path, 3) as cluster:
        with WireClient("127.0.0.1", cluster.node(2).port) as w:  # any broker takes the change
            resp = w.request(49, 1, {"validate_only": False, "entries": [
                {"entity": [{"entity_type": "client-id", "entity_name": "capped"}],
                 "ops": [{"key": "producer_byte_rate", "value": 10000.0, "remove": False}]}]})
        assert [e.error_code for e in resp.entries] == [0]
        # NaN and infinities: INVALID_REQUEST on a broker that forwards the change to the metadata
        # leader (JSON cannot carry them; the broker closed the connection, found by fuzzing
        # test_every_request_answered against a cluster) as on the leader itself
        leader_id = cluster.metadata_leader()
        for node in (leader_id, next(n for n in cluster.node_ids if n != leader_id)):
            with WireClient("127.0.0.1", cluster.node(node).port) as w:
                resp = w.request(49, 1, {"validate_only": False, "entries": [
                    {"entity": [{"entity_type": "client-id", "entity_name": f"odd-{i}"}],
                     "ops": [{"key": "request_percentage", "value": value, "remove": False}]}
                    for i, value in enumerate((float("inf"), float("nan"), float("-inf")))]})
            assert [(e.error_code, e.error_message) for e in resp.entries] == [
                (42, f"Configuration request_percentage must be a non-negative number, not {text}")
                for text in ("inf", "nan", "-inf")], node
        wanted = {(("client-id", "capped"),): {"producer_byte_rate": 10000.0}}
        for node in cluster.node_ids:
            wait_for(lambda node=node: _quotas(cluster.node(node).port) == wanted, 15,
                     f"broker {node} does not describe the quota")

        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        admin.create_topics([NewTopic("capped-topic", 3, 3)], operation_timeout=15)["capped-topic"].result(30)
        cluster.wait_leaders("capped-topic", 3)
        for index in range(3):  # whichever broker leads a partition throttles a producer over the quota
            leader = cluster.leader_of("capped-topic", index)
            with WireClient("127.0.0.1", cluster.node(leader).port) as w:
                resp = w.request(0, 9, {"transactional_id": None, "acks": -1, "timeout_ms": 10000, "topic_data": [
                    {"name": "capped-topic", "partition_data": [
                        {"index": index, "records": build_batch([(None, b"q" * 300_000)])}]}]}, client_id="capped")
            answer = resp.responses[0].partition_responses[0]
            assert answer.error_code == 0, answer
            assert 19_000 < resp.throttle_time_ms < 21_000, (leader, resp.throttle_time_ms)

        cluster.restart(3)  # the quota comes back from the metadata log
        wait_for(lambda: _quotas(cluster.node(3).port) == wanted, 30, "broker 3 lost the quota")
