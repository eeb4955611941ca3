"""``log.page.cache.retain.bytes`` on a 3-broker cluster: the followers of an RF 3 partition, which
write Raft appends, keep only the tail of their logs in the OS page cache once fsynced, and the
leader, which appends produced batches (and reads its log back for a follower that fell behind,
which the OS may keep), keeps at most half of its log; every record is still read back in order
from offset 0 (the older bytes now come from the disk). Residency is read with mincore(2);
DescribeConfigs shows the setting as a read-only static broker config."""

from __future__ import annotations

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from litemq.testing.cluster import LocalCluster, wait_for
from litemq.testing.page_cache import resident_bytes

MIB = 1024 * 1024
RETAIN_BYTES = MIB
SLACK_BYTES = 2 * MIB  # the cache folio holding the window's first byte may stay (at most 2 MiB)
RECORDS = 12_000
VALUE_BYTES = 1024


def test_replicas_keep_only_the_tail_cached(tmp_path):
    with LocalCluster(tmp_path, 3, overrides={"log.page.cache.retain.bytes": str(RETAIN_BYTES)}) as cluster:
        bs = cluster.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": bs})
        admin.create_topics([NewTopic("t", 1, 3)])["t"].result(30)
        cluster.wait_leaders("t", 1)
        p = Producer({"bootstrap.servers": bs, "acks": "all", "linger.ms": 5, "enable.idempotence": True})
        for i in range(RECORDS):
            p.produce("t", i.to_bytes(4, "big") + bytes(VALUE_BYTES - 4))
            if i % 1000 == 999:
                p.poll(0)
        assert p.flush(60) == 0

        leader = cluster.leader_of("t", 0)

        def cached() -> dict[int, tuple[int, int]] | None:
            """node -> (log bytes, resident bytes) once every replica holds every record and has
            dropped what it fsynced (a follower may still be a Raft append behind). A follower
            reads nothing of its log; the leader reads its log for a follower that fell behind,
            and what it read back is the OS's to keep, so it is held to a looser bound."""
            out = {}
            for node in cluster.node_ids:
                logs = sorted((cluster.brokers[node].data_dir / "t-0").glob("*.log"))
                out[node] = (sum(f.stat().st_size for f in logs), sum(resident_bytes(f) for f in logs))
            ok = all(size > RECORDS * VALUE_BYTES
                     and resident <= (size // 2 if node == leader else RETAIN_BYTES + SLACK_BYTES)
                     for node, (size, resident) in out.items())
            return out if ok else None

        wait_for(cached, 30, "every replica holds the records and keeps only the tail cached")
        for node in cluster.node_ids:  # a read-only static setting, as kafka-configs.sh shows it
            res = ConfigResource("BROKER", str(node))
            entry = admin.describe_configs([res])[res].result(30)["log.page.cache.retain.bytes"]
            assert (entry.value, entry.is_read_only, entry.source) == (str(RETAIN_BYTES), True, 4), entry

        c = Consumer({"bootstrap.servers": bs, "group.id": "g", "auto.offset.reset": "earliest",
                      "enable.auto.commit": False})
        c.subscribe(["t"])
        got: list[tuple[int, int]] = []
        while len(got) < RECORDS:
            m = c.poll(10)
            assert m is not None, f"only {len(got)} of {RECORDS} records read back"
            assert m.error() is None, m.error()
            got.append((m.offset(), int.from_bytes(m.value()[:4], "big")))
        c.close()
        assert got == [(i, i) for i in range(RECORDS)]
