"""aiokafka and kafka-python against a 3-broker cluster while a partition leader is SIGKILLed:
aiokafka's idempotent acks=all producer keeps going (its own retries through the new leader),
every acknowledged record is read back at exactly the offset the producer was told, by an
aiokafka consumer group and by kafka-python, and each partition's offsets are dense from 0
(Kafka offsets: no Raft batch takes one, issue 19)."""

from __future__ import annotations

import asyncio
import time

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from kafka import KafkaConsumer, TopicPartition

from litemq.testing.cluster import LocalCluster

OVERRIDES = {"broker.heartbeat.interval.ms": "250", "broker.session.timeout.ms": "2500"}
TOPIC, PARTITIONS, N, KILL_AT = "pyclients", 3, 3000, 1000


async def _produce(cluster: LocalCluster) -> tuple[dict[int, tuple[int, int]], int]:
    bs = cluster.bootstrap_servers
    admin = AIOKafkaAdminClient(bootstrap_servers=bs)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3)])
    finally:
        await admin.close()
    cluster.wait_leaders(TOPIC, PARTITIONS)
    producer = AIOKafkaProducer(bootstrap_servers=bs, acks="all", enable_idempotence=True,
                                request_timeout_ms=15000, retry_backoff_ms=200)
    await producer.start()
    acked: dict[int, tuple[int, int]] = {}
    killed = -1
    try:
        for i in range(N):
            if i == KILL_AT:
                killed = cluster.leader_of(TOPIC, 0)
                cluster.kill(killed)
            md = await producer.send_and_wait(TOPIC, b"v%d" % i, partition=i % PARTITIONS)
            acked[i] = (md.partition, md.offset)
    finally:
        await producer.stop()
    return acked, killed


async def _consume_group(bs: str, n: int) -> dict[int, tuple[int, int]]:
    consumer = AIOKafkaConsumer(TOPIC, bootstrap_servers=bs, group_id="pyclients-g", auto_offset_reset="earliest",
                                enable_auto_commit=False)
    await consumer.start()
    got: dict[int, tuple[int, int]] = {}
    try:
        deadline = time.monotonic() + 60
        while len(got) < n and time.monotonic() < deadline:
            for msgs in (await consumer.getmany(timeout_ms=1000)).values():
                for m in msgs:
                    got[int(m.value[1:])] = (m.partition, m.offset)
        await consumer.commit()
    finally:
        await consumer.stop()
    return got


def test_aiokafka_and_kafka_python_across_a_leader_sigkill(tmp_path):
    with LocalCluster(tmp_path, 3, OVERRIDES) as cluster:
        acked, killed = asyncio.run(_produce(cluster))
        assert len(acked) == N and killed > 0
        for p in range(PARTITIONS):
            offsets = sorted(o for q, o in acked.values() if q == p)
            assert offsets == list(range(N // PARTITIONS)), f"partition {p}: offsets not 0..{N // PARTITIONS - 1}"

        got = asyncio.run(_consume_group(cluster.bootstrap_servers, N))
        assert got == acked, f"{sum(got.get(i) != acked[i] for i in acked)} records not read at their acked offset"

        cluster.restart(killed)  # the old leader catches up as a follower; kafka-python reads from the leaders
        kc = KafkaConsumer(bootstrap_servers=cluster.bootstrap_servers, enable_auto_commit=False,
                           consumer_timeout_ms=5000)
        try:
            kc.assign([TopicPartition(TOPIC, p) for p in range(PARTITIONS)])
            kc.seek_to_beginning()
            read = {int(m.value[1:]): (m.partition, m.offset) for m in kc}
        finally:
            kc.close()
        assert read == acked
        # the aiokafka group's commit, seen through kafka-python
        gc = KafkaConsumer(bootstrap_servers=cluster.bootstrap_servers, group_id="pyclients-g",
                           enable_auto_commit=False)
        try:
            committed = {p: gc.committed(TopicPartition(TOPIC, p)) for p in range(PARTITIONS)}
        finally:
            gc.close()
        assert committed == {p: N // PARTITIONS for p in range(PARTITIONS)}
