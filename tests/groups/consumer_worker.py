"""A group consumer process for the group tests: subscribe, process, commit after processing.

    python consumer_worker.py CLIENT BOOTSTRAP TOPIC GROUP EVENTS_FILE [--assignor NAME] [--session-ms N]

CLIENT is ``confluent``, ``confluent-consumer`` (confluent-kafka with ``group.protocol=consumer``,
KIP-848: ``--assignor`` and ``--session-ms`` do not apply), ``kafka-python`` or ``aiokafka``;
``--client-id`` sets confluent-kafka's client id (shown by ConsumerGroupDescribe).
Every event is one JSON line in EVENTS_FILE, flushed at once (the process may be SIGKILLed any time):

- ``{"ev": "start", "t": ...}`` / ``{"ev": "stop", "t": ...}``
- ``{"ev": "assign", "t": ..., "parts": [p...]}`` partitions added to what this process owns
- ``{"ev": "revoke", "t": ..., "parts": [p...]}`` partitions taken away (revoked or lost)
- ``{"ev": "rec", "p": partition, "o": offset}`` a record processed
- ``{"ev": "commit", "t": ..., "offsets": {p: next offset}}`` a commit acknowledged by the broker
- ``{"ev": "commit_failed", "t": ..., "error": "..."}``

Processing = writing the ``rec`` line; right after each batch the processed offsets are
committed synchronously, and again for revoked partitions inside the revoke callback, so
nothing processed is left uncommitted when a partition changes owner.
SIGTERM closes the consumer cleanly (LeaveGroup).
"""

from __future__ import annotations

import argparse
import faulthandler
import json
import logging
import os
import signal
import sys
import time

stop = False


def _on_term(*_):
    global stop
    stop = True


class Events:
    def __init__(self, path: str) -> None:
        self.f = open(path, "a", buffering=1)

    def __call__(self, ev: str, **kw) -> None:
        kw["ev"] = ev
        kw.setdefault("t", time.time())
        self.f.write(json.dumps(kw) + "\n")


def run_confluent(a, log: Events) -> None:
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    conf = {"bootstrap.servers": a.bootstrap, "group.id": a.group, "enable.auto.commit": False,
            "auto.offset.reset": "earliest", "enable.partition.eof": False}
    if a.client == "confluent-consumer":  # KIP-848: the coordinator assigns, heartbeats are its to pace
        conf.update({"group.protocol": "consumer", "topic.metadata.refresh.interval.ms": 1000})
    else:
        conf.update({"session.timeout.ms": a.session_ms, "heartbeat.interval.ms": 500,
                     "max.poll.interval.ms": 20000, "partition.assignment.strategy": a.assignor})
    if a.client_id:
        conf["client.id"] = a.client_id
    if a.instance_id:
        conf["group.instance.id"] = a.instance_id
    c = Consumer(conf)
    processed: dict[int, int] = {}

    def commit(parts) -> None:
        offs = [TopicPartition(a.topic, p, processed[p]) for p in parts if p in processed]
        if not offs:
            return
        try:
            res = c.commit(offsets=offs, asynchronous=False)
            bad = [tp for tp in res or [] if tp.error is not None]
            if bad:
                log("commit_failed", error=str(bad[0].error))
            else:
                log("commit", offsets={tp.partition: tp.offset for tp in offs})
        except KafkaException as exc:
            log("commit_failed", error=str(exc))

    def on_assign(consumer, parts):
        log("assign", parts=sorted(tp.partition for tp in parts))

    def on_revoke(consumer, parts):
        ps = [tp.partition for tp in parts]
        commit(ps)
        for p in ps:
            processed.pop(p, None)
        log("revoke", parts=sorted(ps))

    def on_lost(consumer, parts):
        ps = [tp.partition for tp in parts]
        for p in ps:
            processed.pop(p, None)
        log("revoke", parts=sorted(ps), lost=True)

    c.subscribe([a.topic], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_lost)
    log("start")
    while not stop:
        msgs = c.consume(num_messages=200, timeout=0.2)
        touched = set()
        for m in msgs:
            if m.error():
                continue
            log("rec", p=m.partition(), o=m.offset())
            processed[m.partition()] = m.offset() + 1
            touched.add(m.partition())
        if touched:
            commit(touched)
    c.close()
    log("stop")


def run_kafka_python(a, log: Events) -> None:
    from kafka import KafkaConsumer, TopicPartition
    from kafka.consumer.subscription_state import ConsumerRebalanceListener
    from kafka.structs import OffsetAndMetadata

    # kafka-python logs its joins, assignments and coordinator changes at INFO: the test's diagnostics
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(threadName)s %(name)s %(levelname)s %(message)s")
    processed: dict[int, int] = {}
    c = KafkaConsumer(bootstrap_servers=a.bootstrap, group_id=a.group, enable_auto_commit=False,
                      auto_offset_reset="earliest", session_timeout_ms=a.session_ms, heartbeat_interval_ms=500,
                      max_poll_interval_ms=20000, group_instance_id=a.instance_id or None)
    # A group leader that computes the assignment before its metadata holds the new topic assigns
    # nothing; kafka-python then depends on a later metadata refresh to rejoin (a client-side race
    # seen once: the member stalled after that). The tests are about the broker's group protocol,
    # so the member subscribes once it knows the topic's partitions, as a long-running consumer would.
    deadline = time.monotonic() + 30
    while not c.partitions_for_topic(a.topic) and time.monotonic() < deadline:
        time.sleep(0.1)

    def commit(parts) -> None:
        offs = {TopicPartition(a.topic, p): OffsetAndMetadata(processed[p], "", -1) for p in parts if p in processed}
        if not offs:
            return
        try:
            c.commit(offs)
            log("commit", offsets={tp.partition: om.offset for tp, om in offs.items()})
        except Exception as exc:  # CommitFailedError and friends
            log("commit_failed", error=repr(exc))

    class Listener(ConsumerRebalanceListener):
        def on_partitions_revoked(self, revoked):
            ps = [tp.partition for tp in revoked]
            commit(ps)
            for p in ps:
                processed.pop(p, None)
            log("revoke", parts=sorted(ps))

        def on_partitions_assigned(self, assigned):
            log("assign", parts=sorted(tp.partition for tp in assigned))

    c.subscribe([a.topic], listener=Listener())
    log("start")
    while not stop:
        batch = c.poll(timeout_ms=200, max_records=200)
        touched = set()
        for tp, msgs in batch.items():
            for m in msgs:
                log("rec", p=m.partition, o=m.offset)
                processed[m.partition] = m.offset + 1
                touched.add(m.partition)
        if touched:
            commit(touched)
    c.close()
    log("stop")


def run_aiokafka(a, log: Events) -> None:
    import asyncio

    from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener, TopicPartition

    async def main() -> None:
        processed: dict[int, int] = {}
        c = AIOKafkaConsumer(bootstrap_servers=a.bootstrap, group_id=a.group, enable_auto_commit=False,
                             auto_offset_reset="earliest", session_timeout_ms=a.session_ms,
                             heartbeat_interval_ms=500, max_poll_interval_ms=20000)

        async def commit(parts) -> None:
            offs = {TopicPartition(a.topic, p): processed[p] for p in parts if p in processed}
            if not offs:
                return
            try:
                await c.commit(offs)
                log("commit", offsets={tp.partition: o for tp, o in offs.items()})
            except Exception as exc:
                log("commit_failed", error=repr(exc))

        class Listener(ConsumerRebalanceListener):
            async def on_partitions_revoked(self, revoked):
                ps = [tp.partition for tp in revoked]
                await commit(ps)
                for p in ps:
                    processed.pop(p, None)
                log("revoke", parts=sorted(ps))

            async def on_partitions_assigned(self, assigned):
                log("assign", parts=sorted(tp.partition for tp in assigned))

        c.subscribe([a.topic], listener=Listener())
        await c.start()
        log("start")
        try:
            while not stop:
                batch = await c.getmany(timeout_ms=200, max_records=200)
                touched = set()
                for tp, msgs in batch.items():
                    for m in msgs:
                        log("rec", p=m.partition, o=m.offset)
                        processed[m.partition] = m.offset + 1
                        touched.add(m.partition)
                if touched:
                    await commit(touched)
        finally:
            await c.stop()
        log("stop")

    asyncio.run(main())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("client", choices=["confluent", "confluent-consumer", "kafka-python", "aiokafka"])
    ap.add_argument("bootstrap")
    ap.add_argument("topic")
    ap.add_argument("group")
    ap.add_argument("events")
    ap.add_argument("--assignor", default="range")
    ap.add_argument("--session-ms", type=int, default=6000)
    ap.add_argument("--instance-id", default=None)
    ap.add_argument("--client-id", default=None)
    a = ap.parse_args()
    signal.signal(signal.SIGTERM, _on_term)
    faulthandler.register(signal.SIGUSR1, all_threads=True)  # stacks to stderr (the worker's .log) on demand
    log = Events(a.events)
    log("boot", pid=os.getpid())
    {"confluent": run_confluent, "confluent-consumer": run_confluent, "kafka-python": run_kafka_python,
     "aiokafka": run_aiokafka}[a.client](a, log)


if __name__ == "__main__":
    sys.exit(main())
