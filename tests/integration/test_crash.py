"""A broker SIGKILLed under an acks=all produce load keeps every acknowledged record (issue 3).

A producer process-independent loop produces with acks=all (idempotent) while the broker
process is SIGKILLed, restarted on the same data dir, and SIGKILLed again; afterwards every
record whose delivery was acknowledged is read back exactly once, in order per partition.
"""

from __future__ import annotations

import threading
import time

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from litemq.testing.cluster import wait_for
from litemq.testing.process import BrokerProcess

ACKS_PER_ROUND = 5000
"""Acknowledgements every partition gets after each (re)start before the next SIGKILL (the load
keeps going at full speed: tens of thousands of records are queued in the producer at each kill)."""


def test_sigkill_during_acks_all_load_loses_no_acked_record(tmp_path):
    broker = BrokerProcess(tmp_path / "data").start()
    bs = broker.bootstrap_servers
    try:
        admin = AdminClient({"bootstrap.servers": bs})
        admin.create_topics([NewTopic("crash", 3, 1)])["crash"].result(timeout=30)
        acked: dict[int, list[int]] = {0: [], 1: [], 2: []}
        lock = threading.Lock()

        def on_delivery(err, msg):
            if err is None:
                with lock:
                    acked[msg.partition()].append(int(msg.value()))

        producer = Producer({"bootstrap.servers": bs, "acks": "all", "enable.idempotence": True,
                             "linger.ms": 2, "message.timeout.ms": 60000, "reconnect.backoff.max.ms": 200})
        stop = threading.Event()

        def produce_loop():
            i = 0
            while not stop.is_set():
                try:
                    producer.produce("crash", key=b"%d" % (i % 31), value=b"%d" % i, on_delivery=on_delivery)
                    i += 1
                except BufferError:
                    pass
                producer.poll(0.0005 if i % 50 == 0 else 0)

        def counts() -> list[int]:
            with lock:
                return [len(acked[p]) for p in range(3)]

        def wait_acks(more: int, what: str) -> None:
            """Until every partition has ``more`` acknowledgements beyond those it has now."""
            start = counts()
            wait_for(lambda: all(n >= s + more for n, s in zip(counts(), start)), 60,
                     lambda: f"{more} more acks per partition {what}: {start} -> {counts()}", interval_s=0.05)

        t = threading.Thread(target=produce_loop, daemon=True)
        t.start()
        for round_ in range(3):
            # the load runs at full speed when the broker dies
            wait_acks(ACKS_PER_ROUND, "before the SIGKILL" if round_ == 0 else f"after restart {round_}")
            broker.kill()
            time.sleep(0.3)
            broker.start()
        wait_acks(ACKS_PER_ROUND, "after the last restart")
        stop.set()
        t.join(30)
        assert producer.flush(60) == 0
        total_acked = sum(len(v) for v in acked.values())
        assert total_acked > 1000, f"only {total_acked} acks: the load did not run"

        consumer = Consumer({"bootstrap.servers": bs, "group.id": "crash-check", "enable.auto.commit": False})
        consumer.assign([TopicPartition("crash", p, OFFSET_BEGINNING) for p in range(3)])
        read: dict[int, list[int]] = {0: [], 1: [], 2: []}
        deadline = time.monotonic() + 60
        while sum(len(v) for v in read.values()) < total_acked and time.monotonic() < deadline:
            for m in consumer.consume(5000, 0.5):
                assert m.error() is None, m.error()
                read[m.partition()].append(int(m.value()))
        time.sleep(0.5)
        for m in consumer.consume(5000, 0.5):
            read[m.partition()].append(int(m.value()))
        consumer.close()
        for p in range(3):
            got = read[p]
            assert len(got) == len(set(got)), f"partition {p}: duplicates after crash recovery"
            missing = set(acked[p]) - set(got)
            assert not missing, f"partition {p}: {len(missing)} acknowledged records lost"
            assert got == sorted(got), f"partition {p}: order broken"
    finally:
        broker.kill()
