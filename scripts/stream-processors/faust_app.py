"""A Faust (faust-streaming) worker with a table and exactly-once processing against a LiteMQ
broker or cluster (tests/integration/test_stream_processors.py).

The input topic is created with 3 partitions (a Faust table's changelog must have as many as its
source) and filled by a plain producer; the worker counts records per key in a table (changelog
topic ``faust-counter-counts-changelog``) and sends each count to an output topic, with aiokafka's
transactional producers (one per input partition). Once every record is processed, prints one JSON
line with the table and the number of output records committed, and exits.

Environment: BS (bootstrap servers), RF (replication factor, default 1), N (records, default 1000),
FAUST_WEB_PORT (the worker's web port, default 6066).
Run as ``python faust_app.py worker -l warn``.
"""

from __future__ import annotations

import json
import os
import threading
import time

import faust
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

BS = os.environ["BS"]
RF = int(os.environ.get("RF", "1"))
N = int(os.environ.get("N", "1000"))
IN, OUT = "faust-in", "faust-out"

if __name__ == "__main__":
    admin = AdminClient({"bootstrap.servers": BS})  # kept referenced until the topic is created
    admin.create_topics([NewTopic(IN, 3, RF)])[IN].result(30)
    p = Producer({"bootstrap.servers": BS, "enable.idempotence": True})
    for i in range(N):
        p.produce(IN, key=f"k{i % 5}".encode(), value=b"x")
    assert p.flush(60) == 0

app = faust.App("faust-counter", broker="kafka://" + BS, store="memory://", topic_partitions=3,
                topic_replication_factor=RF, processing_guarantee="exactly_once", web_enabled=False,
                # the worker binds its web port even so: one of its own, so two workers can run at once
                web_host="127.0.0.1", web_port=int(os.environ.get("FAUST_WEB_PORT", "6066")),
                datadir=os.environ.get("FAUST_DATADIR", "/tmp/faust-counter"))
source = app.topic(IN, key_serializer="raw", value_serializer="raw")
sink = app.topic(OUT, key_serializer="raw", value_serializer="raw")
counts = app.Table("counts", default=int, partitions=3, key_type=str)
processed = {"n": 0}


@app.agent(source)
async def count(stream):
    async for key, _value in stream.items():
        name = key.decode()
        counts[name] += 1
        processed["n"] += 1
        await sink.send(key=key, value=str(counts[name]).encode())


def report() -> None:
    """Once the output topic holds N committed records (Faust commits its transactions every
    ``broker_commit_every``/``commit_interval``), print the result and exit."""
    c = Consumer({"bootstrap.servers": BS, "group.id": "faust-check", "auto.offset.reset": "earliest",
                  "isolation.level": "read_committed"})
    c.subscribe([OUT])
    committed, deadline = 0, time.monotonic() + 120
    while committed < N and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            committed += 1
    print(json.dumps({"processed": processed["n"], "committed_outputs": committed,
                      "counts": dict(counts.items())}), flush=True)
    os._exit(0)


@app.timer(interval=0.5)
async def done() -> None:
    if processed["n"] >= N and not processed.get("reporting"):
        processed["reporting"] = True
        threading.Thread(target=report, daemon=True).start()


if __name__ == "__main__":
    app.main()
