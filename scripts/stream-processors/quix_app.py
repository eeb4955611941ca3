"""A stateful Quix Streams application with exactly-once processing against a LiteMQ broker
or cluster, run twice (tests/integration/test_stream_processors.py).

Run 1 counts the records of each key of an input topic (state in RocksDB, its changelog topic
created by Quix Streams with ``cleanup.policy=compact``) and writes each new count to an output
topic in the same transaction as its input offsets. More records are produced, and run 2 starts
with an empty state directory, so it must first restore the counts from the changelog topic,
then go on counting. Prints one JSON line: the final counts read back with read_committed.

Environment: BS (bootstrap servers), RF (replication factor of the topics, default 1),
N (records per run, default 1000), KEYS (default 5).
"""

from __future__ import annotations

import json
import os
import tempfile
import threading
import time

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from quixstreams import Application

BS = os.environ["BS"]
RF = int(os.environ.get("RF", "1"))
N = int(os.environ.get("N", "1000"))
KEYS = int(os.environ.get("KEYS", "5"))
IN, OUT, GROUP = "quix-in", "quix-out", "quix-counter"


def produce(n: int) -> None:
    p = Producer({"bootstrap.servers": BS, "enable.idempotence": True})
    for i in range(n):
        p.produce(IN, key=f"k{i % KEYS}", value=json.dumps({"i": i}))
    assert p.flush(60) == 0


def run(expect_outputs: int) -> dict[str, int]:
    """Run the application until ``expect_outputs`` counts are readable (read_committed)."""
    app = Application(broker_address=BS, consumer_group=GROUP, auto_offset_reset="earliest",
                      processing_guarantee="exactly-once", state_dir=tempfile.mkdtemp(), loglevel="WARNING",
                      topic_create_timeout=60)
    src = app.topic(IN, value_deserializer="json")
    out = app.topic(OUT, value_serializer="json")

    def count(_value, state):
        c = state.get("count", 0) + 1
        state.set("count", c)
        return {"count": c}

    app.dataframe(src).apply(count, stateful=True).to_topic(out)
    latest: dict[str, int] = {}

    def watch() -> None:
        c = Consumer({"bootstrap.servers": BS, "group.id": f"quix-check-{time.time()}",
                      "auto.offset.reset": "earliest", "isolation.level": "read_committed"})
        c.subscribe([OUT])
        seen, deadline = 0, time.monotonic() + 120
        while seen < expect_outputs and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None or m.error():
                continue
            seen += 1
            key = m.key().decode()
            latest[key] = max(latest.get(key, 0), json.loads(m.value())["count"])
        c.close()
        app.stop()

    threading.Thread(target=watch, daemon=True).start()
    app.run()
    return latest


def main() -> None:
    admin = AdminClient({"bootstrap.servers": BS})
    admin.create_topics([NewTopic(IN, 3, RF)])[IN].result(30)
    produce(N)
    first = run(N)
    produce(N)
    second = run(2 * N)
    print(json.dumps({"first": first, "second": second}))


if __name__ == "__main__":
    main()
