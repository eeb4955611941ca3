"""Batch and streaming writers of the ``litemq`` Spark sink.

Input columns, as in Spark's Kafka sink: ``value`` (string or binary, required), ``key``
(string or binary, optional), ``topic`` (string; required unless the ``topic`` option is set,
which overrides it), ``partition`` (int, optional: else the client's partitioner), ``headers``
(array<struct<key string, value binary>>, optional).

Every task writes with its own idempotent producer (``enable.idempotence=true``, ``acks=all``;
``kafka.*`` options override other producer settings) and flushes before reporting success, so
a retried task re-sends its rows at most once per retry and the broker drops duplicates
within one producer session. Each record carries two headers naming its origin, so that
downstream readers can deduplicate rows re-sent when Spark replays a batch after a failure:
``litemq.spark.query.id`` (the streaming query id, stable across restarts from the same
checkpoint; ``batch`` for ``df.write``) and ``litemq.spark.batch.id`` (the micro-batch id,
decimal; ``-1`` for ``df.write``). Spark does not tell ``write()`` its batch id; it is read from
the task's local properties (``streaming.sql.batchId``, ``sql.streaming.queryId``), which
Spark's MicroBatchExecution sets for every micro-batch job.

Source: PySpark ``DataSourceArrowWriter``, ``DataSourceStreamArrowWriter``; Spark Kafka
integration guide, "Writing Data to Kafka".
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)

from litemq.spark.options import OptionError, client_config

log = logging.getLogger("litemq.spark")

QUERY_ID_HEADER = "litemq.spark.query.id"
BATCH_ID_HEADER = "litemq.spark.batch.id"


@dataclass
class WriteResult(WriterCommitMessage):
    """What one task wrote: ``rows`` records acknowledged by the brokers."""

    rows: int
    query_id: str
    batch_id: int


class _WriterBase:
    def __init__(self, options: dict, schema) -> None:
        o = {k.lower(): v for k, v in options.items()}
        self.client = client_config(o, sink=True)
        self.topic = o.get("topic")
        names = [f.name.lower() for f in schema.fields]
        if "value" not in names:
            raise OptionError("the DataFrame written to litemq needs a value column (string or binary)")
        if self.topic is None and "topic" not in names:
            raise OptionError("topic option required when no topic attribute is present in the DataFrame; "
                              "set the option topic or add a topic column")
        self.streaming = False

    def _task_ids(self) -> tuple[str, int]:
        if not self.streaming:
            return "batch", -1
        try:
            from pyspark import TaskContext

            tc = TaskContext.get()
            qid = tc.getLocalProperty("sql.streaming.queryId") if tc else None
            bid = tc.getLocalProperty("streaming.sql.batchId") if tc else None
            return qid or "unknown", int(bid) if bid is not None else -1
        except Exception:  # never fail a write over provenance headers
            return "unknown", -1

    def write(self, iterator) -> WriteResult:
        import confluent_kafka as ck

        from litemq.spark.offsets import _make_client

        qid, bid = self._task_ids()
        prov = [(QUERY_ID_HEADER, qid.encode()), (BATCH_ID_HEADER, str(bid).encode())]
        cfg = {"enable.idempotence": True, "acks": "all", "linger.ms": 5, "log_level": 3,
               "client.id": "litemq-spark-writer"}
        cfg.update(self.client)
        producer = _make_client(ck.Producer, cfg)
        errors: list = []
        sent = 0

        def on_delivery(err, msg):
            if err is not None and len(errors) < 10:
                errors.append(err)

        for rb in iterator:
            n = rb.num_rows
            if n == 0:
                continue
            cols = {name.lower(): rb.column(i) for i, name in enumerate(rb.schema.names)}
            values = _bytes_list(cols["value"])
            keys = _bytes_list(cols["key"]) if "key" in cols else [None] * n
            if self.topic is not None:
                topics = [self.topic] * n
            else:
                topics = cols["topic"].to_pylist()
            parts = cols["partition"].to_pylist() if "partition" in cols else None
            headers = cols["headers"].to_pylist() if "headers" in cols else None
            produce = producer.produce
            for i in range(n):
                t = topics[i]
                if t is None:
                    raise ValueError("null topic in a row written to litemq (set the topic option or column)")
                h = prov
                if headers is not None and headers[i]:
                    h = [(x["key"], x["value"]) for x in headers[i]] + prov
                kwargs = {"value": values[i], "key": keys[i], "headers": h, "on_delivery": on_delivery}
                if parts is not None and parts[i] is not None:
                    kwargs["partition"] = parts[i]
                while True:
                    try:
                        produce(t, **kwargs)
                        break
                    except BufferError:
                        producer.poll(0.05)
                sent += 1
            producer.poll(0)
            if errors:
                break
        left = producer.flush(300)
        if errors:
            raise RuntimeError(f"litemq: writing to Kafka failed: {errors[0]}")
        if left:
            raise TimeoutError(f"litemq: {left} records not acknowledged after 300 s")
        return WriteResult(sent, qid, bid)


def _bytes_list(col) -> list:
    import pyarrow as pa

    if pa.types.is_string(col.type) or pa.types.is_large_string(col.type):
        col = col.cast(pa.binary())
    return col.to_pylist()


class LiteMQBatchWriter(_WriterBase, DataSourceArrowWriter):
    """``df.write.format("litemq")``: each task writes its rows; nothing to do on commit."""

    def commit(self, messages) -> None:
        total = sum(m.rows for m in messages if m is not None)
        log.info("litemq: wrote %d records", total)

    def abort(self, messages) -> None:
        log.warning("litemq: write aborted; records already acknowledged stay in the topic")


class LiteMQStreamWriter(_WriterBase, DataSourceStreamArrowWriter):
    """``df.writeStream.format("litemq")``: at-least-once (idempotent producer per task, and
    provenance headers naming query id and batch id for downstream deduplication)."""

    def __init__(self, options: dict, schema) -> None:
        super().__init__(options, schema)
        self.streaming = True

    def commit(self, messages, batchId: int) -> None:
        pass

    def abort(self, messages, batchId: int) -> None:
        log.warning("litemq: micro-batch %s aborted; it will be written again when replayed", batchId)
