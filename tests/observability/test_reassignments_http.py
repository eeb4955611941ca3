"""Partition reassignments in progress on the HTTP port of a cluster grown from 3 to 4 brokers
(broker 4 joined as an observer): a move onto broker 4 kept open (broker 4 SIGSTOPped, as
tests/cluster/test_decommission_rebalance.py does) is listed by the REST API in Confluent's
``KafkaReassignment`` shape (cluster, topic and partition paths) and by the console's JSON and
page (headless Chromium) with its target, leader and the replication throttles set; the brokers
table shows each broker's metadata-quorum role, rack and liveness. Resumed, broker 4 catches up
under the throttle, which the console shows as a learner part of the way to the leader's log
end; once the move completes it is gone from all of them."""

from __future__ import annotations

import json

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource
from kafka import KafkaAdminClient
from kafka.structs import TopicPartition

from litemq.testing.cluster import LocalCluster, wait_for
from tests.cluster.test_reassignment import OVERRIDES, _bootstrap, _create, _pause_joiner
from tests.observability.helpers import dom_tables, get_json, http
from tests.observability.test_console import _chromium

pytestmark = [pytest.mark.timeout(180)]

TOPIC = "moving"
RECORDS = 12
VALUE = b"v" * 100_000
RATE = 300_000  # bytes/s: the 1.2 MB move takes about 4 s, long enough to watch it


def _set(admin: AdminClient, rtype: str, name: str, key: str, value: str) -> None:
    res = ConfigResource(rtype, name, incremental_configs=[
        ConfigEntry(key, value, incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([res])[res].result(30)


def test_reassignment_in_progress_on_rest_and_console(tmp_path):
    racks = {1: "rack-a", 2: "rack-b", 3: "rack-a", 4: "rack-b"}
    with LocalCluster(tmp_path, 3, OVERRIDES, http=True,
                      node_overrides={n: {"broker.rack": racks[n]} for n in (1, 2, 3)}) as cluster:
        cluster.add_broker(4, overrides={"broker.rack": racks[4]})  # an observer (--join)
        bs = _bootstrap(cluster, 4)
        _create(bs, TOPIC, [[1, 2, 3]])
        cluster.wait_leaders(TOPIC, 1)
        p = Producer({"bootstrap.servers": bs, "acks": "all", "message.max.bytes": 1_000_000})
        for _ in range(RECORDS):
            p.produce(TOPIC, VALUE, partition=0)
        assert p.flush(30) == 0
        admin = AdminClient({"bootstrap.servers": bs})
        for n in (1, 2, 3):  # every broker that may lead the partition
            _set(admin, "broker", str(n), "leader.replication.throttled.rate", str(RATE))
        _set(admin, "topic", TOPIC, "leader.replication.throttled.replicas", "0:1,0:2,0:3")

        _pause_joiner(cluster, 4)
        kadmin = KafkaAdminClient(bootstrap_servers=bs, request_timeout_ms=30000)
        try:
            assert kadmin.alter_partition_reassignments({TopicPartition(TOPIC, 0): [4, 2, 3]}) == \
                {TopicPartition(TOPIC, 0): None}
        finally:
            kadmin.close()
        node = cluster.metadata_leader()
        assert node != 4
        cid = get_json(cluster.http_url(node) + "/v3/clusters")["data"][0]["cluster_id"]
        url = f"{cluster.http_url(node)}/v3/clusters/{cid}"

        # REST: the cluster-wide, per-topic and per-partition resources list the move
        listing = get_json(get_json(url)["partition_reassignments"]["related"])
        assert listing["kind"] == "KafkaReassignmentList"
        [move] = listing["data"]
        assert move["kind"] == "KafkaReassignment" and move["cluster_id"] == cid
        assert (move["topic_name"], move["partition_id"]) == (TOPIC, 0)
        assert move["adding_replicas"] == [4] and move["removing_replicas"] == [1]
        assert move["target_replica_ids"] == [4, 2, 3] and sorted(move["replica_ids"]) == [1, 2, 3, 4]
        assert move["metadata"]["self"] == f"{url}/topics/{TOPIC}/partitions/0/reassignment"
        assert move["metadata"]["resource_name"] == f"crn:///kafka={cid}/topic={TOPIC}/partition=0/reassignment"
        assert get_json(f"{url}/topics/{TOPIC}/partitions/-/reassignment")["data"] == [move]
        assert get_json(get_json(f"{url}/topics/{TOPIC}/partitions/0")["reassignment"]["related"]) == move
        # Kafka's replication factor during the move: the replicas minus the one being added
        assert get_json(f"{url}/topics/{TOPIC}")["replication_factor"] == 3

        # console JSON: target, leader, the adding replica behind the leader's log end, throttles
        leader = cluster.leader_of(TOPIC, 0)
        for n in (1, 2, 3):  # any live broker answers for the cluster
            view = get_json(cluster.http_url(n) + "/console/api/reassignments")
            [m] = view["reassignments"]
            assert (m["topic"], m["partition"], m["target"], m["adding_replicas"], m["removing_replicas"]) == (
                TOPIC, 0, [4, 2, 3], [4], [1]), m
            assert m["leader"] == leader and m["progress"]["leader"] == leader
            assert m["progress"]["log_end_offset"] == RECORDS
            [row] = m["progress"]["replicas"]
            assert row["replica"] == 4 and row["state"] in ("pending", "learner"), row
            assert row["caught_up_offset"] is None or row["caught_up_offset"] + row["lag"] == RECORDS
            assert row["lag"] is None or row["lag"] > 0  # broker 4 is stopped: it has not caught up
            assert view["throttles"] == {
                "brokers": [{"broker_id": n, "leader_rate_bytes_per_s": RATE, "follower_rate_bytes_per_s": None}
                            for n in (1, 2, 3)],
                "topics": [{"topic": TOPIC, "leader_replicas": "0:1,0:2,0:3", "follower_replicas": ""}]}
        overview = get_json(cluster.http_url(node) + "/console/api/overview")
        assert [t["replication_factor"] for t in overview["topics"] if t["name"] == TOPIC] == [3]
        brokers = {b["broker_id"]: b for b in overview["brokers"]}
        assert {n: (b["quorum_role"], b["rack"], b["live"]) for n, b in brokers.items()} == {
            1: ("voter", "rack-a", True), 2: ("voter", "rack-b", True), 3: ("voter", "rack-a", True),
            4: ("observer", "rack-b", False)}

        # the console page, after its JavaScript ran
        dumped = _chromium(tmp_path, cluster.http_url(node) + "/console/?refresh_ms=700", "--dump-dom")
        assert dumped.returncode == 0, dumped.stderr[-2000:]
        dom = dom_tables(dumped.stdout)
        assert dom.body_attrs.get("data-reassignments-loaded") == "1", dumped.stdout[:3000]
        [shown] = dom.tables["reassignments"][1:]
        assert shown[:7] == [TOPIC, "0", str(leader), ", ".join(map(str, move["replica_ids"])), "4, 2, 3", "4", "1"]
        assert shown[7].startswith("4: ")
        assert dom.tables["throttles"][1:] == [[f"broker {n}", "293.0 KiB/s", "–"] for n in (1, 2, 3)] + [
            [f"topic {TOPIC} (throttled replicas)", "0:1,0:2,0:3", "–"]]
        rows = {r[0]: r for r in dom.tables["brokers"][1:]}
        assert {n: rows[str(n)][2:5] for n in racks} == {
            1: ["rack-a", "live", "voter"], 2: ["rack-b", "live", "voter"], 3: ["rack-a", "live", "voter"],
            4: ["rack-b", "down", "observer"]}

        # broker 4 runs again: a learner catching up under the throttle, part of the way there
        cluster.resume(4)

        def partway():
            [m] = get_json(cluster.http_url(node) + "/console/api/reassignments")["reassignments"] or [None]
            row = m and m["progress"] and m["progress"]["replicas"][0]
            return row if row and row["state"] == "learner" and 0 < row["caught_up_offset"] < RECORDS else None
        row = wait_for(partway, 30, "broker 4 shown as a learner part of the way to the log end", interval_s=0.1)
        assert row["replica"] == 4 and row["caught_up_offset"] + row["lag"] == RECORDS, row

        # the move completes: gone everywhere
        wait_for(lambda: get_json(f"{url}/topics/-/partitions/-/reassignment")["data"] == [], 60,
                 "the move onto broker 4 completes", interval_s=0.5)
        assert get_json(cluster.http_url(2) + "/console/api/reassignments")["reassignments"] == []
        status, _, body = http("GET", f"{url}/topics/{TOPIC}/partitions/0/reassignment")
        assert status == 404 and json.loads(body)["error_code"] == 404, body
        dumped = _chromium(tmp_path, cluster.http_url(node) + "/console/?refresh_ms=700", "--dump-dom")
        assert dom_tables(dumped.stdout).tables["reassignments"][1:] == [["No partition reassignment in progress."]]
