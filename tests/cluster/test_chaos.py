"""Random faults under load on a 3-broker cluster: for 30 s, every 0.5-2.5 s one of SIGKILL a
broker, SIGSTOP one, or heal (SIGCONT the paused, restart the killed), at most one broker down
at a time, while an idempotent acks=all producer writes sequenced records to 6 partitions of an
RF 3 topic. Afterwards every acknowledged record is read back exactly once at the offset its
producer was told (in its partition and in order where librdkafka acknowledged it without an
offset), and each partition's offsets are dense from 0 (issue 19: no Raft batch takes
a Kafka offset). The fault sequence comes from a seed (``LITEMQ_CHAOS_SEED`` to replay one; a
failure names it)."""

from __future__ import annotations

import os
import random
import threading
import time

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from litemq.testing.cluster import LocalCluster

OVERRIDES = {"broker.heartbeat.interval.ms": "250", "broker.session.timeout.ms": "2500"}
TOPIC, PARTITIONS, CHAOS_S = "chaos", 6, 30.0


def _faults(cluster: LocalCluster, rng: random.Random, seconds: float) -> list[tuple[str, int]]:
    events: list[tuple[str, int]] = []
    down: set[int] = set()
    paused: set[int] = set()
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        time.sleep(rng.uniform(0.5, 2.5))
        action = rng.choice(["kill", "pause", "heal"])
        healthy = not down and not paused
        if action == "kill" and healthy:
            n = rng.choice(cluster.node_ids)
            cluster.kill(n)
            down.add(n)
        elif action == "pause" and healthy:
            n = rng.choice(cluster.node_ids)
            cluster.pause(n)
            paused.add(n)
        else:
            action = "heal"
            n = 0
            for p in list(paused):
                cluster.resume(p)
                paused.discard(p)
            for d in list(down):
                cluster.restart(d)
                down.discard(d)
        events.append((action, n))
    for p in paused:
        cluster.resume(p)
    for d in down:
        cluster.restart(d)
    return events


def test_random_kills_and_pauses_lose_no_acknowledged_record(tmp_path):
    seed = int(os.environ.get("LITEMQ_CHAOS_SEED", random.randrange(1 << 30)))
    rng = random.Random(seed)
    with LocalCluster(tmp_path, 3, OVERRIDES) as cluster:
        bs = cluster.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": bs})
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3)])[TOPIC].result(30)
        cluster.wait_leaders(TOPIC, PARTITIONS)
        acked: dict[int, tuple[int, int]] = {}
        failed: list[str] = []
        stop = threading.Event()
        produced = [0]

        def on_delivery(err, msg) -> None:
            if err is None:
                acked[int(msg.value())] = (msg.partition(), msg.offset())
            else:
                failed.append(err.name())

        def produce() -> None:
            p = Producer({"bootstrap.servers": bs, "acks": "all", "enable.idempotence": True, "linger.ms": 2,
                          "message.timeout.ms": 60000, "log_level": 0})
            i = 0
            while not stop.is_set():
                try:
                    p.produce(TOPIC, str(i).encode(), partition=i % PARTITIONS, on_delivery=on_delivery)
                    i += 1
                except BufferError:
                    p.poll(0.05)
                    continue
                if i % 50 == 0:
                    p.poll(0)
                    time.sleep(0.01)
            produced[0] = i
            assert p.flush(90) == 0

        writer = threading.Thread(target=produce, daemon=True)
        writer.start()
        try:
            events = _faults(cluster, rng, CHAOS_S)
        finally:
            stop.set()
            writer.join(120)
        what = f"seed {seed}, faults {events}"
        assert not failed and len(acked) == produced[0] > 10_000, f"{what}: {len(failed)} failed: {failed[:5]}"

        cluster.wait_leaders(TOPIC, PARTITIONS)
        consumer = Consumer({"bootstrap.servers": bs, "group.id": "chaos-read", "enable.auto.commit": False,
                             "log_level": 0})
        consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
        got: dict[int, tuple[int, int]] = {}
        duplicates = 0
        deadline = time.monotonic() + 60
        try:
            while len(got) < len(acked) and time.monotonic() < deadline:
                for m in consumer.consume(1000, 1.0):
                    if m.error() is None:
                        k = int(m.value())
                        duplicates += k in got
                        got[k] = (m.partition(), m.offset())
        finally:
            consumer.close()
        assert duplicates == 0, f"{what}: {duplicates} records read twice"
        # librdkafka acknowledges the records of a batch whose own answer was lost (a leader killed
        # or paused) once a later batch of the idempotent producer is acknowledged, and then knows
        # no offset for them (offset None): those are checked by partition and by their order
        missing = [k for k in acked if k not in got]
        moved = [k for k in acked if k in got and got[k] != acked[k] and acked[k][1] is not None]
        elsewhere = [k for k in acked if k in got and got[k][0] != acked[k][0]]
        assert not missing and not moved and not elsewhere and len(got) == len(acked), (
            f"{what}: {len(missing)} acked records missing, {len(moved)} at another offset, "
            f"{len(elsewhere)} in another partition, {len(got) - len(acked) + len(missing)} never acked")
        for p in range(PARTITIONS):
            in_order = [k for k, _ in sorted(((k, o) for k, (q, o) in got.items() if q == p), key=lambda x: x[1])]
            offsets = sorted(o for q, o in got.values() if q == p)
            assert offsets == list(range(len(offsets))), f"{what}: partition {p} offsets not dense from 0"
            assert in_order == sorted(in_order), f"{what}: partition {p} holds its records out of order"
        unknown = sum(o is None for _, o in acked.values())
        print(f"\nseed {seed}: {len(acked)} records acked ({unknown} without an offset) and read back across "
              f"{len(events)} faults")
