"""Batch and streaming writers of the ``litemq`` Spark sink.

Input columns, as in Spark's Kafka sink: ``value`` (string or binary, required; with
``value.format=avro`` a struct, written in the schema registry's wire format with the schema of
``value.subject``, default ``<topic>-value``, version ``value.schema.version``, default the
latest: :class:`~litemq.spark.avro_values.ValueEncoder`), ``key``
(string or binary, optional), ``topic`` (string; required unless the ``topic`` option is set,
which overrides it), ``partition`` (int, optional: else a keyed row goes where Kafka's Java
client puts the key, murmur2 as in :mod:`litemq.protocol.partitioner`, and an unkeyed one to any
partition), ``headers`` (array<struct<key string, value binary>>, optional).

Exactly-once (option ``exactlyOnce``, default true): each task writes its rows in one Kafka
transaction together with a "batch B of (query, partition) done" marker
(:mod:`litemq.spark.transactional`): ``transactional.id = litemq-spark-{query id}-{partition
id}``, marker = committed offset ``B + 1`` of group ``litemq-spark-sink-{query id}-{partition
id}`` on ``__litemq_spark_sink``-0. A task of a replayed micro-batch (restart from the
checkpoint after a crash, task retry) first fences the earlier attempt, then finds the marker
and writes nothing if the batch was committed. ``read_committed`` consumers then see every row
exactly once. This relies on Spark replaying the same rows to the same partition ids for the
same batch id (a deterministic plan over the same source offsets). ``df.write`` uses the same
path with a random id per write job and batch id 0: a retried task never duplicates rows of an
attempt that committed, and a failed attempt's rows are aborted (per task, not per job).

``exactlyOnce=false``: each task writes with its own idempotent producer
(``enable.idempotence=true``, ``acks=all``) and flushes before reporting success
(at-least-once: a replayed batch is written again).

Either way each record carries two headers naming its origin: ``litemq.spark.query.id`` (the
streaming query id, stable across restarts from the same checkpoint; ``batch`` for
``df.write``) and ``litemq.spark.batch.id`` (the micro-batch id, decimal; ``-1`` for
``df.write``). ``kafka.*`` options override producer settings, except ``transactional.id``
(refused) and ``enable.idempotence`` (always true). Spark does not tell ``write()`` its batch
id; it is read from the task's local properties (``streaming.sql.batchId``,
``sql.streaming.queryId``), which Spark's MicroBatchExecution sets for every micro-batch job,
and the partition id from ``TaskContext.partitionId()``.

Source: PySpark ``DataSourceArrowWriter``, ``DataSourceStreamArrowWriter``; Spark Kafka
integration guide, "Writing Data to Kafka"; KIP-98 (transactions).
"""

from __future__ import annotations

import itertools
import logging
import uuid
from dataclasses import dataclass

from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)

from litemq.spark.options import OptionError, _bool, client_config

log = logging.getLogger("litemq.spark")

QUERY_ID_HEADER = "litemq.spark.query.id"
BATCH_ID_HEADER = "litemq.spark.batch.id"


@dataclass
class WriteResult(WriterCommitMessage):
    """What one task wrote: ``rows`` records acknowledged (committed, with exactly-once) by the
    brokers; ``skipped`` when an earlier attempt had already committed this batch."""

    rows: int
    query_id: str
    batch_id: int
    skipped: bool = False


class _WriterBase:
    def __init__(self, options: dict, schema) -> None:
        o = {k.lower(): v for k, v in options.items()}
        self.client = client_config(o, sink=True)
        if "transactional.id" in self.client:
            raise OptionError("Kafka option 'kafka.transactional.id' is not supported: with exactlyOnce=true "
                              "it is derived from the query id and the partition (litemq-spark-<query>-<partition>)")
        self.exactly_once = _bool(o, "exactlyOnce", True)
        self.topic = o.get("topic")
        self.value_encoder = _value_encoder(o, self.topic)
        names = [f.name.lower() for f in schema.fields]
        if "value" not in names:
            raise OptionError("the DataFrame written to litemq needs a value column (string or binary)")
        if self.topic is None and "topic" not in names:
            raise OptionError("topic option required when no topic attribute is present in the DataFrame; "
                              "set the option topic or add a topic column")
        _check_column_types(schema, avro_value=self.value_encoder is not None)
        self.streaming = False
        self.write_id = uuid.uuid4().hex  # df.write: one id per write job (made on the driver)

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
        qid, bid = self._task_ids()
        prov = [(QUERY_ID_HEADER, qid.encode()), (BATCH_ID_HEADER, str(bid).encode())]
        if not self.exactly_once:
            return self._write_at_least_once(iterator, qid, bid, prov)
        from pyspark import TaskContext

        from litemq.spark.transactional import TransactionalBatchWriter

        if self.streaming:
            if qid == "unknown" or bid < 0:
                raise RuntimeError("litemq: exactlyOnce needs the task's streaming query id and batch id "
                                   "(local properties sql.streaming.queryId / streaming.sql.batchId), which "
                                   "this task does not have; set the option exactlyOnce to false")
            writer_id, batch = qid, bid
        else:
            writer_id, batch = f"write-{self.write_id}", 0
        it = iter(iterator)
        first = next((rb for rb in it if rb.num_rows), None)
        if first is None:  # nothing to write: no transaction, no marker needed
            return WriteResult(0, qid, bid)
        tw = TransactionalBatchWriter(self.client, writer_id, TaskContext.get().partitionId())
        try:
            sent = tw.write(batch, lambda producer, on_delivery: self._produce_all(
                producer, itertools.chain([first], it), prov, on_delivery, lambda: False))
        finally:
            tw.close()
        if sent is None:
            return WriteResult(0, qid, bid, skipped=True)
        return WriteResult(sent, qid, bid)

    def _write_at_least_once(self, iterator, qid: str, bid: int, prov: list) -> WriteResult:
        import confluent_kafka as ck

        from litemq.protocol.partitioner import producer_config
        from litemq.spark.offsets import _make_client

        cfg = producer_config({"enable.idempotence": True, "acks": "all", "linger.ms": 5, "log_level": 3,
                               "client.id": "litemq-spark-writer"})
        cfg.update(self.client)
        producer = _make_client(ck.Producer, cfg)
        errors: list = []

        def on_delivery(err, msg):
            if err is not None and len(errors) < 10:
                errors.append(err)

        sent = self._produce_all(producer, iterator, prov, on_delivery, lambda: bool(errors))
        left = producer.flush(300)
        if errors:
            raise RuntimeError(f"litemq: writing to Kafka failed: {errors[0]}")
        if left:
            raise TimeoutError(f"litemq: {left} records not acknowledged after 300 s")
        return WriteResult(sent, qid, bid)

    def _produce_all(self, producer, iterator, prov: list, on_delivery, failed) -> int:
        """Send every row of the Arrow ``iterator``; returns the number sent. Stops early when
        ``failed()`` is true (checked after each RecordBatch)."""
        sent = 0
        for rb in iterator:
            n = rb.num_rows
            if n == 0:
                continue
            cols = {name.lower(): rb.column(i) for i, name in enumerate(rb.schema.names)}
            values = _bytes_list(cols["value"]) if self.value_encoder is None else \
                self.value_encoder.encode_column(cols["value"])
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
            if failed():
                break
        return sent


def _check_column_types(schema, avro_value: bool) -> None:
    """At planning time, Spark's Kafka sink checks (``KafkaWriter.validateQuery``): ``value``
    and ``key`` string or binary (``value`` any type Avro encodes with ``value.format=avro``),
    ``topic`` string. Raises OptionError naming the column and its type."""
    from pyspark.sql.types import BinaryType, StringType

    for f in schema.fields:
        name = f.name.lower()
        if (name == "key" or (name == "value" and not avro_value)) and not isinstance(f.dataType, (StringType,
                                                                                                   BinaryType)):
            raise OptionError(f"{name} attribute type must be a string or binary, not {f.dataType.simpleString()}")
        if name == "topic" and not isinstance(f.dataType, StringType):
            raise OptionError(f"topic attribute type must be a string, not {f.dataType.simpleString()}")


def _value_encoder(o: dict, topic: str | None):
    """The :class:`~litemq.spark.avro_values.ValueEncoder` of ``value.format=avro`` (the
    subject's schema fetched from the registry now, on the driver), else None."""
    from litemq.spark.options import avro_value_options

    avro_opts = avro_value_options({**o, "subscribe": topic or ""})
    if avro_opts is None:
        return None
    from litemq.spark.avro_values import RegistryClient, ValueEncoder

    registry = RegistryClient(avro_opts.url, avro_opts.user_info, avro_opts.bearer_token, avro_opts.ssl_ca_location)
    schema_id, text, refs = registry.version(avro_opts.subject, avro_opts.version)
    return ValueEncoder(schema_id, text, refs)


def _bytes_list(col) -> list:
    import pyarrow as pa

    if pa.types.is_string(col.type) or pa.types.is_large_string(col.type):
        col = col.cast(pa.binary())
    return col.to_pylist()


class LiteMQBatchWriter(_WriterBase, DataSourceArrowWriter):
    """``df.write.format("litemq")``: each task writes its rows (one transaction per task with
    ``exactlyOnce=true``); nothing to do on commit."""

    def commit(self, messages) -> None:
        total = sum(m.rows for m in messages if m is not None)
        log.info("litemq: wrote %d records", total)

    def abort(self, messages) -> None:
        log.warning("litemq: write aborted; records of tasks that committed stay in the topic")


class LiteMQStreamWriter(_WriterBase, DataSourceStreamArrowWriter):
    """``df.writeStream.format("litemq")``: exactly-once per micro-batch for ``read_committed``
    readers (one transaction per task, skipped when the batch's marker says it was committed;
    see the module doc); with ``exactlyOnce=false`` at-least-once (idempotent producer per
    task). Provenance headers name query id and batch id either way."""

    def __init__(self, options: dict, schema) -> None:
        super().__init__(options, schema)
        self.streaming = True

    def commit(self, messages, batchId: int) -> None:
        """Nothing to do: every task committed its own transaction (or wrote at-least-once)."""
        skipped = sum(1 for m in messages if m is not None and m.skipped)
        if skipped:
            log.info("litemq: micro-batch %s: %d task(s) found their rows already committed by an earlier "
                     "attempt", batchId, skipped)

    def abort(self, messages, batchId: int) -> None:
        log.warning("litemq: micro-batch %s aborted; tasks that committed stay committed, the others' "
                    "transactions were aborted; the batch is completed when replayed", batchId)
