"""Exactly-once writes of one (writer, partition) per batch: a Kafka transaction that carries
the records *and* a "batch B done" marker, so a replayed batch is recognised and skipped.

Used by the ``litemq`` Spark sink (one :class:`TransactionalBatchWriter` per task: writer id =
streaming query id, partition = Spark partition id) and by the log pipeline's topic outputs
(writer id = the pipeline's query id, partition 0). No pyspark import: the pipeline's local
engine uses it too.

Protocol, per batch ``B`` (int >= 0) of writer ``W`` and partition ``P``:

1. A transactional producer with ``transactional.id = litemq-spark-{W}-{P}``
   (:func:`transactional_id`): stable across restarts, so ``init_transactions()`` fences any
   zombie producer of an earlier attempt (KIP-98 producer epoch bump) and has the coordinator
   abort its open transaction, or waits for its commit to complete.
2. The marker: the committed offset of consumer group ``litemq-spark-sink-{W}-{P}``
   (:func:`marker_group`) on partition 0 of the internal topic :data:`MARKER_TOPIC` (one
   partition, created if missing; no records are ever written to it) is ``last done batch + 1``.
   It is read *after* step 1 with ``isolation.level=read_committed`` (OffsetFetch with
   ``require_stable``, KIP-447). If it is >= ``B + 1`` the batch was committed by an earlier
   attempt and nothing is written.
3. Otherwise ``begin_transaction``; produce every record; ``send_offsets_to_transaction``
   (TxnOffsetCommit of offset ``B + 1`` for the marker group, KIP-98 / KIP-447);
   ``commit_transaction``. Records and marker become visible atomically to ``read_committed``
   consumers. Any error: ``abort_transaction`` (best effort) and the error is raised, so that
   Spark retries the task (its retry fences and aborts whatever is left).

Correctness needs the writer to replay the *same records* for the same ``(W, P, B)`` (true for
a deterministic Spark plan over the same source offsets, and for the pipeline's foreachBatch).

Limits: the marker lives in ``__consumer_offsets`` under an empty group, so it expires with
the broker's ``offsets.retention.minutes`` (Kafka default 7 days) after the last commit; a
query restarted after that could repeat the one batch that was in flight when it stopped.
Transactional ids expire after ``transactional.id.expiration.ms`` (7 days), harmlessly.

Source: KIP-98 (transactions), KIP-447 (producer scalability for exactly-once, require_stable),
confluent-kafka ``Producer.init_transactions`` / ``begin_transaction`` /
``send_offsets_to_transaction`` / ``commit_transaction`` / ``abort_transaction``.
"""

from __future__ import annotations

import logging
import threading
from typing import Callable

log = logging.getLogger("litemq.spark")

MARKER_TOPIC = "__litemq_spark_sink"
"""Internal topic whose partition 0 carries the per-(writer, partition) batch markers as
committed offsets of the marker groups (no records)."""

TRANSACTION_TIMEOUT_MS = 120_000
"""Default ``transaction.timeout.ms`` of the sink's producers (ms): how long the coordinator lets
a transaction stay open before aborting it itself (a crashed query that is not restarted
blocks ``read_committed`` readers of its output topics at most this long). Must be <= the
broker's ``transaction.max.timeout.ms`` (Kafka default 900,000). ``kafka.transaction.timeout.ms``
overrides it."""

CLIENT_CALL_TIMEOUT_S = 60.0
"""Timeout of each transactional call (init, send offsets, commit, abort) and of the marker
lookup (seconds); a call that times out fails the task."""

_ensured: set[tuple[str, str]] = set()
_ensured_lock = threading.Lock()


def transactional_id(writer_id: str, partition_id: int) -> str:
    """``transactional.id`` of partition ``partition_id`` of writer ``writer_id``."""
    return f"litemq-spark-{writer_id}-{partition_id}"


def marker_group(writer_id: str, partition_id: int) -> str:
    """Consumer group whose committed offset on ``MARKER_TOPIC``-0 is the next batch to write."""
    return f"litemq-spark-sink-{writer_id}-{partition_id}"


def ensure_marker_topic(client: dict, topic: str = MARKER_TOPIC) -> None:
    """Create ``topic`` (1 partition, the broker's default replication factor) if missing.

    Once per process and bootstrap list. Raises ``confluent_kafka.KafkaException`` for any
    error other than TOPIC_ALREADY_EXISTS."""
    import confluent_kafka as ck
    from confluent_kafka.admin import AdminClient, NewTopic

    from litemq.spark.offsets import _make_client

    key = (str(client.get("bootstrap.servers")), topic)
    with _ensured_lock:
        if key in _ensured:
            return
    admin = _make_client(AdminClient, {**_connection_settings(client), "log_level": 3})
    fut = admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=-1)],
                              operation_timeout=CLIENT_CALL_TIMEOUT_S)[topic]
    try:
        fut.result(CLIENT_CALL_TIMEOUT_S)
    except ck.KafkaException as exc:
        if exc.args[0].code() != ck.KafkaError.TOPIC_ALREADY_EXISTS:
            raise
    with _ensured_lock:
        _ensured.add(key)


_PRODUCER_ONLY = ("acks", "linger.ms", "batch.size", "batch.num.messages", "compression.type",
                  "compression.codec", "enable.idempotence", "transaction.timeout.ms", "queue.buffering.",
                  "message.send.max.retries", "retries", "delivery.timeout.ms", "message.timeout.ms",
                  "max.in.flight", "partitioner", "sticky.partitioning.linger.ms", "transactional.id")


def _connection_settings(client: dict) -> dict:
    """The settings of ``client`` that are not producer-only (for admin clients and consumers)."""
    return {k: v for k, v in client.items() if not k.startswith(_PRODUCER_ONLY)}


class TransactionalBatchWriter:
    """Writes batches of one ``(writer_id, partition_id)`` exactly once (see the module doc).

    Args:
        client: librdkafka settings (``bootstrap.servers``, security...). ``transactional.id``
            must not be in it (it is derived).
        writer_id: stable identity of the writer across restarts (a streaming query id).
        partition_id: Spark partition id (int >= 0), 0 for a single writer.
        marker_topic: the internal marker topic.

    The producer is created and ``init_transactions()``-ed by the first :meth:`write` and
    kept for the next ones (one writer process: the pipeline); after an error it is dropped
    and the next write starts over. :meth:`close` when done. Not thread-safe.
    """

    def __init__(self, client: dict, writer_id: str, partition_id: int, *,
                 marker_topic: str = MARKER_TOPIC) -> None:
        if "transactional.id" in client:
            raise ValueError("transactional.id is derived from the query id and partition; do not set it")
        self.client = dict(client)
        self.writer_id = writer_id
        self.partition_id = int(partition_id)
        self.marker_topic = marker_topic
        self.txn_id = transactional_id(writer_id, partition_id)
        self.group_id = marker_group(writer_id, partition_id)
        self._producer_obj = None
        self._consumer_obj = None

    def _consumer(self):
        import confluent_kafka as ck

        from litemq.spark.offsets import _make_client

        cfg = _connection_settings(self.client)
        cfg.update({"group.id": self.group_id, "isolation.level": "read_committed",
                    "enable.auto.commit": False, "log_level": 3,
                    "client.id": "litemq-spark-sink-marker"})
        return _make_client(ck.Consumer, cfg)

    def _producer(self):
        import confluent_kafka as ck

        from litemq.protocol.partitioner import producer_config
        from litemq.spark.offsets import _make_client

        cfg = producer_config({"acks": "all", "linger.ms": 5, "log_level": 3, "client.id": "litemq-spark-writer",
                               "transaction.timeout.ms": TRANSACTION_TIMEOUT_MS})
        cfg.update(self.client)
        cfg.update({"transactional.id": self.txn_id, "enable.idempotence": True})
        return _make_client(ck.Producer, cfg)

    def committed_batches(self, consumer=None) -> int:
        """Batches recorded as done: the marker group's committed offset (0 if none).
        Raises ``confluent_kafka.KafkaException``."""
        import confluent_kafka as ck

        own = consumer is None
        c = consumer or self._consumer()
        try:
            res = c.committed([ck.TopicPartition(self.marker_topic, 0)], timeout=CLIENT_CALL_TIMEOUT_S)
        finally:
            if own:
                c.close()
        tp = res[0]
        if tp.error is not None:
            raise ck.KafkaException(tp.error)
        return max(tp.offset, 0)

    def write(self, batch_id: int, produce: Callable) -> int | None:
        """Write batch ``batch_id`` (int >= 0) exactly once.

        ``produce(producer, on_delivery)`` sends the batch's records with
        ``producer.produce(..., on_delivery=on_delivery)`` (handling ``BufferError`` by polling)
        and returns how many it sent. It runs inside the transaction.

        Returns the number of records committed, or None if an earlier attempt had already
        committed this batch (nothing written). Raises ``confluent_kafka.KafkaException`` (a
        fenced producer included: another attempt of the same partition took over),
        RuntimeError for a delivery error; the open transaction is aborted first.
        """
        import confluent_kafka as ck

        if batch_id < 0:
            raise ValueError(f"batch id must be >= 0, got {batch_id}")
        in_txn = False
        try:
            if self._producer_obj is None:
                ensure_marker_topic(self.client, self.marker_topic)
                producer = self._producer()
                producer.init_transactions(CLIENT_CALL_TIMEOUT_S)
                self._producer_obj, self._consumer_obj = producer, self._consumer()
            producer, consumer = self._producer_obj, self._consumer_obj
            done = self.committed_batches(consumer)
            if done >= batch_id + 1:
                log.info("litemq: batch %d of %s already committed (marker %d); not written again",
                         batch_id, self.txn_id, done)
                return None
            errors: list = []

            def on_delivery(err, _msg):
                if err is not None and len(errors) < 10:
                    errors.append(err)

            producer.begin_transaction()
            in_txn = True
            sent = produce(producer, on_delivery)
            producer.flush(CLIENT_CALL_TIMEOUT_S)
            if errors:
                raise RuntimeError(f"litemq: writing to Kafka failed: {errors[0]}")
            producer.send_offsets_to_transaction(
                [ck.TopicPartition(self.marker_topic, 0, batch_id + 1)],
                consumer.consumer_group_metadata(), CLIENT_CALL_TIMEOUT_S)
            producer.commit_transaction(CLIENT_CALL_TIMEOUT_S)
            in_txn = False
            return sent
        except BaseException:
            if in_txn:
                try:
                    self._producer_obj.abort_transaction(CLIENT_CALL_TIMEOUT_S)
                except Exception as exc:  # fenced/fatal: the coordinator aborts it on the next init
                    log.warning("litemq: aborting transaction of %s failed: %s", self.txn_id, exc)
            self.close()  # the next write starts over with init_transactions
            raise

    def close(self) -> None:
        """Drop the clients (librdkafka destroys them; nothing is pending after :meth:`write`)."""
        if self._consumer_obj is not None:
            try:
                self._consumer_obj.close()
            except Exception:  # closing must not mask the error being raised
                pass
        self._producer_obj = self._consumer_obj = None
