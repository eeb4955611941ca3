"""Fetch sessions (KIP-227) through faults: a kafka-python consumer, which fetches through
incremental sessions by default, reads a 6-partition RF 3 topic on 3 brokers while an acks=all
producer writes to it and partition leaders are SIGKILLed (twice) and SIGSTOPped (once). Its
sessions on a dead or paused broker end with it; it moves each partition to the new leader and
opens sessions there. Every acknowledged record is read once, at the offset the producer was
told, and each partition's records arrive in offset order; a consumer started afterwards reads
them all again."""

from __future__ import annotations

import threading
import time
import urllib.request

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer, TopicPartition

from litemq.testing.cluster import LocalCluster

OVERRIDES = {"broker.heartbeat.interval.ms": "250", "broker.session.timeout.ms": "2500"}
TOPIC, PARTITIONS = "sessions-faults", 6


def _sessions(cluster: LocalCluster, node_id: int) -> float:
    with urllib.request.urlopen(cluster.http_url(node_id) + "/metrics", timeout=10) as r:
        for line in r.read().decode().splitlines():
            if line.startswith("kafka_server_fetchsessioncache_numincrementalfetchsessions "):
                return float(line.split()[1])
    raise AssertionError("no fetch session metric")


def test_a_session_consumer_reads_every_acked_record_across_leader_kills(tmp_path):
    with LocalCluster(tmp_path, 3, OVERRIDES, http=True) as cluster:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3)])[TOPIC].result(timeout=30)
        cluster.wait_leaders(TOPIC, PARTITIONS)
        acked: dict[bytes, tuple[int, int]] = {}
        stop = threading.Event()

        def on_delivery(err, msg):
            if err is None:
                acked[msg.value()] = (msg.partition(), msg.offset())

        def produce():
            producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all",
                                 "enable.idempotence": True, "linger.ms": 5, "message.timeout.ms": 60000})
            i = 0
            while not stop.is_set():
                producer.produce(TOPIC, f"v{i}".encode(), partition=i % PARTITIONS, on_delivery=on_delivery)
                producer.poll(0)
                i += 1
                time.sleep(0.002)
            assert producer.flush(90) == 0

        got: dict[bytes, tuple[int, int]] = {}
        duplicates: list[bytes] = []
        out_of_order: list[tuple[int, int, int]] = []
        done_reading = threading.Event()
        seen_sessions = []

        def consume():
            consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap_servers, enable_auto_commit=False,
                                     fetch_max_wait_ms=200, request_timeout_ms=10000, metadata_max_age_ms=2000,
                                     max_partition_fetch_bytes=512)  # small reads: records wait behind
            # unchanged high watermarks, which an incremental answer must still carry
            consumer.assign([TopicPartition(TOPIC, p) for p in range(PARTITIONS)])
            consumer.seek_to_beginning()
            last = {p: -1 for p in range(PARTITIONS)}
            try:
                while not done_reading.is_set():
                    for tp, records in consumer.poll(timeout_ms=200).items():
                        for r in records:
                            if r.offset <= last[tp.partition]:
                                out_of_order.append((tp.partition, last[tp.partition], r.offset))
                            last[tp.partition] = r.offset
                            if r.value in got:
                                duplicates.append(r.value)
                            got[r.value] = (tp.partition, r.offset)
            finally:
                consumer.close()

        threads = [threading.Thread(target=produce), threading.Thread(target=consume)]
        for t in threads:
            t.start()
        try:
            time.sleep(3)
            seen_sessions.append(sum(_sessions(cluster, n) for n in cluster.live_ids()))
            for _ in range(2):
                victim = cluster.leader_of(TOPIC, 0)
                cluster.kill(victim)
                time.sleep(4)
                cluster.restart(victim)
                time.sleep(2)
            paused = cluster.leader_of(TOPIC, 1)
            cluster.pause(paused)
            time.sleep(5)
            cluster.resume(paused)
            time.sleep(3)
            seen_sessions.append(sum(_sessions(cluster, n) for n in cluster.live_ids()))
        finally:
            stop.set()
            threads[0].join(120)
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and any(got.get(v) != at for v, at in list(acked.items())):
                time.sleep(0.5)
            done_reading.set()
            threads[1].join(30)
        assert len(acked) > 3000
        missing = [v for v, at in acked.items() if got.get(v) != at]
        assert not missing, f"{len(missing)} acknowledged records not read at their offset, e.g. {missing[:3]}"
        assert not duplicates and not out_of_order, (duplicates[:3], out_of_order[:3])
        assert min(seen_sessions) >= 1, seen_sessions  # the consumer fetched through sessions

        # Once the brokers are quiet, a new consumer reads it all again in small reads: now no
        # high watermark moves, so only the records themselves put a partition in an answer.
        again: dict[bytes, tuple[int, int]] = {}
        consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap_servers, enable_auto_commit=False,
                                 fetch_max_wait_ms=200, max_partition_fetch_bytes=512)
        try:
            consumer.assign([TopicPartition(TOPIC, p) for p in range(PARTITIONS)])
            consumer.seek_to_beginning()
            deadline = time.monotonic() + 60
            while len(again) < len(got) and time.monotonic() < deadline:
                for tp, records in consumer.poll(timeout_ms=200).items():
                    again.update((r.value, (tp.partition, r.offset)) for r in records)
        finally:
            consumer.close()
        assert again == got
