"""The HTTP port of every broker of a 3-broker cluster: REST produce and reads go to the partition
leader whichever broker is asked, group lag is answered by any broker, ``/metrics`` shows Raft
elections and leader changes, one active controller, each group's lag once (on its coordinator),
every series docs/grafana-dashboard.json queries, and under-replicated partitions and ISR shrinks
after a broker is killed."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from litemq.testing.cluster import LocalCluster, wait_for
from tests.observability.helpers import get_json, post_json, scrape

DASHBOARD = Path(__file__).resolve().parents[2] / "docs" / "grafana-dashboard.json"
TOPIC = "ct"
GROUP = "cg"


def test_http_port_on_every_broker_of_a_cluster(tmp_path):
    with LocalCluster(tmp_path, 3, http=True) as cluster:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        for fut in admin.create_topics([NewTopic(TOPIC, 3, 3)]).values():
            fut.result(20)
        leaders = cluster.wait_leaders(TOPIC, 3)
        ids = cluster.node_ids
        cid = get_json(cluster.http_url(1) + "/v3/clusters")["data"][0]["cluster_id"]

        def url(node: int) -> str:
            return f"{cluster.http_url(node)}/v3/clusters/{cid}"

        # produce through a broker that is not the leader, read through the third one
        first: dict[int, int] = {}
        for p, leader in leaders.items():
            others = [n for n in ids if n != leader]
            status, report = post_json(f"{url(others[0])}/topics/{TOPIC}/records", {
                "partition_id": p, "key": {"type": "STRING", "data": f"k{p}"}, "value": {"type": "STRING", "data": f"v{p}"}})
            assert status == 200 and report["partition_id"] == p, report
            first[p] = report["offset"]
            page = get_json(f"{url(others[1])}/topics/{TOPIC}/partitions/{p}/records?offset=0")
            assert [(r["offset"], r["value"]["data"]) for r in page["data"]] == [(first[p], f"v{p}")]
        parts = get_json(f"{url(ids[0])}/topics/{TOPIC}/partitions")["data"]
        assert {p["partition_id"]: p["leader_id"] for p in parts} == leaders
        assert all(p["high_watermark"] == first[p["partition_id"]] + 1 and sorted(p["replica_ids"]) == ids
                   for p in parts)
        brokers = get_json(f"{url(ids[2])}/brokers")["data"]
        assert sorted(b["broker_id"] for b in brokers) == ids
        # a broker's configs are asked of that broker, replicas come from metadata, from any broker
        for node in ids:
            own = get_json(f"{url(ids[0])}/brokers/{node}/configs/node.id")
            assert (own["broker_id"], own["value"]) == (node, str(node)), own
            replicas = get_json(f"{url(node)}/topics/{TOPIC}/partitions/0/replicas")["data"]
            assert sorted(r["broker_id"] for r in replicas) == ids
            assert [r["broker_id"] for r in replicas if r["is_leader"]] == [leaders[0]]

        # a group committed before each partition's record: lag 1 per partition, from any broker
        c = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": GROUP, "enable.auto.commit": False})
        c.commit(offsets=[TopicPartition(TOPIC, p, first[p]) for p in range(3)], asynchronous=False)
        c.close()
        for node in ids:
            lags = get_json(f"{url(node)}/consumer-groups/{GROUP}/lags")["data"]
            assert sorted((x["partition_id"], x["current_offset"], x["lag"]) for x in lags) == [
                (p, first[p], 1) for p in range(3)]
        counters = get_json(cluster.http_url(ids[0]) + "/console/api/throughput")
        assert counters["brokers"] == ids and counters["topics"][TOPIC]["messages_in"] == 3
        again = get_json(cluster.http_url(ids[0]) + "/console/api/throughput")  # rates from the 2nd sample on
        assert again["rates"]["topics"][TOPIC] == {"bytes_in": 0.0, "bytes_out": 0.0, "messages_in": 0.0}, again

        scrapes = {n: scrape(cluster.http_url(n)) for n in ids}
        assert sum(m.get1("kafka_controller_kafkacontroller_activecontrollercount") for m in scrapes.values()) == 1
        controller = {m.get1("kafka_server_raft_metrics_current_leader") for m in scrapes.values()}
        assert len(controller) == 1 and controller.pop() in ids
        assert sum(m.get1("litemq_raft_elections_total", group_type="metadata") for m in scrapes.values()) >= 1
        assert sum(m.get1("litemq_raft_elections_total", group_type="partition") for m in scrapes.values()) >= 3
        assert all(m.get1("litemq_raft_leader_changes_total", group_type="metadata") >= 1 for m in scrapes.values())
        lag_by_broker = {n: m.total("kafka_consumergroup_lag", consumergroup=GROUP) for n, m in scrapes.items()}
        assert sorted(lag_by_broker.values()) == [0, 0, 3], lag_by_broker  # only the coordinator exports it
        assert sum(m.get1("kafka_server_brokertopicmetrics_messagesin_total", topic=TOPIC) or 0
                   for m in scrapes.values()) == 3
        assert sum(m.get1("kafka_server_replicamanager_underreplicatedpartitions") for m in scrapes.values()) == 0

        # every series the Grafana dashboard queries is exported
        exprs = [t["expr"] for panel in json.loads(DASHBOARD.read_text())["panels"] for t in panel.get("targets", [])]
        wanted = {name for e in exprs for name in re.findall(r"\b((?:kafka|litemq|process)_[a-z0-9_]+)", e)}
        exported = {name for m in scrapes.values() for name, _ in m}
        assert wanted and wanted <= exported, sorted(wanted - exported)

        # kill a broker that is not the controller: the leaders' ISRs shrink
        victim = next(n for n in ids if n != scrapes[ids[0]].get1("kafka_server_raft_metrics_current_leader"))
        live = [n for n in ids if n != victim]
        shrinks_before = sum(scrapes[n].get1("kafka_server_replicamanager_isrshrinks_total") for n in live)
        cluster.kill(victim)
        started = time.monotonic()

        def degraded():
            now = {n: scrape(cluster.http_url(n)) for n in live}
            under = sum(m.get1("kafka_server_replicamanager_underreplicatedpartitions") for m in now.values())
            shrinks = sum(m.get1("kafka_server_replicamanager_isrshrinks_total") for m in now.values())
            offline = sum(m.get1("kafka_controller_kafkacontroller_offlinepartitionscount") for m in now.values())
            return under > 0 and shrinks > shrinks_before and offline == 0
        wait_for(degraded, 20, "no under-replicated partitions / ISR shrinks reported after a broker died")
        assert time.monotonic() - started < 20

        def shown_down():  # after broker.session.timeout.ms (3 s) the metadata leader fences it
            overview = get_json(cluster.http_url(live[0]) + "/console/api/overview")
            return {b["broker_id"]: b["live"] for b in overview["brokers"]}[victim] is False
        wait_for(shown_down, 15, f"the console still shows broker {victim} live")
