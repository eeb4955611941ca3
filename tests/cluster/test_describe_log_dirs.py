"""DescribeLogDirs (35) across a 3-broker cluster, through kafka-python's ``describe_log_dirs``
(one request per broker): each broker reports the replicas it hosts - an RF 3 partition on all
three, an RF 1 partition on its one broker - with the same size on every replica once they
caught up (followers hold the leader's bytes, Raft's own batches included), and no offset lag."""

from __future__ import annotations

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kafka.admin import KafkaAdminClient

from litemq.testing.cluster import LocalCluster, wait_for


def _sizes(kadmin: KafkaAdminClient, topics: list[str]) -> dict[tuple[str, int], dict[int, tuple[int, int]]]:
    """(topic, partition) -> broker -> (partition size, offset lag)."""
    out: dict = {}
    for b in kadmin.describe_log_dirs(topic_partitions=topics):
        for d in b["log_dirs"]:
            assert d["error_code"] == 0, d
            for t in d["topics"]:
                for p in t["partitions"]:
                    out.setdefault((t["name"], p["partition_index"]), {})[b["broker"]] = (
                        p["partition_size"], p["offset_lag"])
    return out


def test_describe_log_dirs_on_every_broker(tmp_path):
    with LocalCluster(tmp_path, 3) as cluster:
        bs = cluster.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": bs})
        futures = admin.create_topics([NewTopic("rf3", 2, 3), NewTopic("rf1", 1, replica_assignment=[[2]])])
        for f in futures.values():
            f.result(30)
        cluster.wait_leaders("rf3", 2)
        cluster.wait_leaders("rf1", 1)
        p = Producer({"bootstrap.servers": bs, "acks": "all", "linger.ms": 0})
        for i in range(200):
            p.produce("rf3", b"v" * 300, partition=i % 2)
            p.produce("rf1", b"w" * 300)
        assert p.flush(30) == 0

        kadmin = KafkaAdminClient(bootstrap_servers=bs)
        try:
            def settled():
                s = _sizes(kadmin, ["rf3", "rf1"])
                rf3_same = all(len(s.get(("rf3", i), {})) == 3 and len(set(s[("rf3", i)].values())) == 1
                               for i in range(2))
                return s if rf3_same else None
            sizes = wait_for(settled, 30, "every replica of rf3 reports the same size")
        finally:
            kadmin.close()
        for i in range(2):
            [(size, lag)] = set(sizes[("rf3", i)].values())
            assert size > 100 * 300 and lag == 0, sizes
        assert set(sizes[("rf1", 0)]) == {2}, sizes  # only on its one replica
        assert sizes[("rf1", 0)][2][0] > 200 * 300
