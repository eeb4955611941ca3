"""Batch and streaming readers of the ``litemq`` Spark source (PySpark Python Data Source API).

Planning (offset lookups) runs on the driver (batch) or in the query's long-lived streaming
source runner process (streaming); ``read()`` runs in executor Python workers on a pickled copy
of the reader, so each :class:`KafkaInputPartition` carries everything a read needs: topic,
partition, offset range ``[start, end)``, client settings, flags. Clients are created inside
``read()``.

``read()`` yields ``pyarrow.RecordBatch``es (schema: :mod:`litemq.spark.arrow_decode`). With
plain-text connections records are fetched with LiteMQ's own protocol codec and decoded
straight into Arrow columns (:mod:`litemq.spark.wire`, :mod:`litemq.spark.arrow_decode`);
otherwise (TLS, SASL, unusual client settings) with a confluent-kafka consumer.

Source: PySpark ``pyspark.sql.datasource`` (``DataSourceReader``, ``DataSourceStreamReader``,
``InputPartition``) and ``pyspark.sql.streaming.datasource`` (``ReadLimit``s,
``SupportsTriggerAvailableNow``); semantics of Spark's Kafka source (``KafkaSource``,
``KafkaMicroBatchStream``, ``KafkaOffsetReader``) as described in the Kafka integration guide.
"""

from __future__ import annotations

import logging
import time
from typing import Iterator

from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    ReadMinRows,
    SupportsTriggerAvailableNow,
)

from litemq.spark import offsets as O
from litemq.spark.options import SourceOptions

log = logging.getLogger("litemq.spark")

ROWS_PER_ARROW_BATCH = 65_536
"""Rows per RecordBatch handed to Spark (bounded memory per task)."""
FETCH_MAX_BYTES = 8 << 20
"""Bytes asked per Fetch request on the fast path."""


class DataLossError(RuntimeError):
    """Offsets planned for a query are gone (retention, deletion, truncation) and
    ``failOnDataLoss`` is true."""


def _data_loss(so_fail: bool, message: str) -> None:
    if so_fail:
        raise DataLossError(
            message + " Some data may have been lost because it is no longer available in the log "
            "(retention, deletion or truncation). If you want the query to continue, skipping the "
            "lost data, set the source option failOnDataLoss to false.")
    log.warning("litemq: %s Skipping the lost data (failOnDataLoss=false).", message)


class KafkaInputPartition(InputPartition):
    """Offsets ``[start, end)`` of one topic-partition (int64, end exclusive) and what a read
    needs. Picklable."""

    def __init__(self, topic: str, partition: int, start: int, end: int, client: dict,
                 include_headers: bool, fail_on_data_loss: bool, read_committed: bool,
                 poll_timeout_ms: int, value_decoder=None) -> None:
        self.value_decoder = value_decoder
        """:class:`~litemq.spark.avro_values.ValueDecoder` (``value.format=avro``) or None."""
        self.topic = topic
        self.partition = partition
        self.start = start
        self.end = end
        self.client = client
        self.include_headers = include_headers
        self.fail_on_data_loss = fail_on_data_loss
        self.read_committed = read_committed
        self.poll_timeout_ms = poll_timeout_ms

    def __repr__(self) -> str:
        return f"KafkaInputPartition({self.topic}-{self.partition} [{self.start}, {self.end}))"


def split_ranges(ranges: list[tuple[str, int, int, int]], min_partitions: int | None,
                 max_records: int | None) -> list[tuple[str, int, int, int]]:
    """Split ``(topic, partition, start, end)`` ranges so that none holds more than
    ``maxRecordsPerPartition`` offsets and there are at least ``minPartitions`` of them
    (largest ranges split first, in proportion to their size, like Spark's KafkaOffsetRangeCalculator)."""
    out = []
    for t, p, s, e in ranges:
        if max_records and e - s > max_records:
            k = -(-(e - s) // max_records)
            out.extend(_even(t, p, s, e, k))
        else:
            out.append((t, p, s, e))
    if min_partitions and len(out) < min_partitions:
        total = sum(e - s for _, _, s, e in out)
        if total > 0:
            res = []
            for t, p, s, e in out:
                k = max(1, round((e - s) * min_partitions / total))
                res.extend(_even(t, p, s, e, min(k, max(e - s, 1))))
            out = res
    return out


def _even(t, p, s, e, k):
    n = e - s
    bounds = [s + (n * i) // k for i in range(k + 1)]
    return [(t, p, bounds[i], bounds[i + 1]) for i in range(k) if bounds[i + 1] > bounds[i]]


def make_partitions(so: SourceOptions, ranges) -> list[KafkaInputPartition]:
    ranges = [r for r in ranges if r[3] > r[2]]
    ranges = split_ranges(ranges, so.min_partitions, so.max_records_per_partition)
    return [KafkaInputPartition(t, p, s, e, so.client, so.include_headers, so.fail_on_data_loss,
                                so.read_committed, so.poll_timeout_ms, so.value_decoder) for t, p, s, e in ranges]


# ------------------------------------------------------------------------------------ reading


def read_partition(part: KafkaInputPartition) -> Iterator:
    """Yield RecordBatches holding exactly the records of ``[part.start, part.end)``
    (control records and, with read_committed, aborted data left out).

    Raises DataLossError (failOnDataLoss=true and offsets gone), TimeoutError (records that
    should exist did not arrive within ``kafkaConsumer.pollTimeoutMs``).
    """
    from litemq.spark import wire

    if part.end <= part.start:
        return
    batches = _read_wire(part) if wire.supports(part.client) else _read_confluent(part)
    decoder = getattr(part, "value_decoder", None)
    for rb in batches:
        yield rb if decoder is None else decoder.decode(rb)


def _read_wire(part: KafkaInputPartition) -> Iterator:
    from litemq.spark.arrow_decode import ColumnBuilder
    from litemq.spark.wire import OFFSET_OUT_OF_RANGE, WireClient, WireError
    from litemq.spark.wire_security import security_from_config

    cb = ColumnBuilder(part.topic, part.partition, part.start, part.end,
                       include_headers=part.include_headers, read_committed=part.read_committed)
    iso = 1 if part.read_committed else 0
    offset = part.start
    deadline = None
    max_bytes = int(part.client.get("max.partition.fetch.bytes", FETCH_MAX_BYTES))
    with WireClient(part.client["bootstrap.servers"], timeout_s=max(part.poll_timeout_ms / 1000, 5),
                    security=security_from_config(part.client)) as wc:
        while offset < part.end:
            try:
                resp = wc.fetch(part.topic, part.partition, offset, max_bytes=max_bytes,
                                max_wait_ms=500, isolation_level=iso)
            except WireError as exc:
                if exc.code != OFFSET_OUT_OF_RANGE:
                    raise
                first = wc.list_offset(part.topic, part.partition, -2)
                last = wc.list_offset(part.topic, part.partition, -1)
                if offset < first:
                    _data_loss(part.fail_on_data_loss,
                               f"Offsets [{offset}, {min(first, part.end)}) of {part.topic}-{part.partition} "
                               f"are gone: the log now starts at {first}.")
                    offset = first
                    cb.start = max(cb.start, first)
                    continue
                _data_loss(part.fail_on_data_loss,
                           f"Offsets [{offset}, {part.end}) of {part.topic}-{part.partition} are gone: "
                           f"the log now ends at {last}.")
                break
            cb.add_aborted(resp.aborted_transactions)
            nxt = cb.add_records(resp.records)
            if nxt > offset:
                offset = nxt
                deadline = None
            else:
                stable = resp.last_stable_offset if iso and resp.last_stable_offset >= 0 else resp.high_watermark
                if stable < offset and resp.log_start_offset >= 0:
                    # the log was truncated below our position
                    _data_loss(part.fail_on_data_loss,
                               f"Offsets [{offset}, {part.end}) of {part.topic}-{part.partition} are gone: "
                               f"the log now ends at {stable}.")
                    break
                if deadline is None:
                    deadline = time.monotonic() + part.poll_timeout_ms / 1000
                elif time.monotonic() > deadline:
                    raise TimeoutError(f"{part.topic}-{part.partition}: no records at offset {offset} after "
                                       f"{part.poll_timeout_ms} ms (kafkaConsumer.pollTimeoutMs); the range "
                                       f"ends at {part.end}, the log at {stable}")
            if len(cb) >= ROWS_PER_ARROW_BATCH or len(cb._buf) >= (32 << 20):
                rb = cb.flush()
                if rb is not None:
                    yield rb
    rb = cb.flush()
    if rb is not None:
        yield rb


def _read_confluent(part: KafkaInputPartition) -> Iterator:
    """Fallback read with a confluent-kafka consumer (any security settings)."""
    import uuid

    import confluent_kafka as ck
    import pyarrow as pa

    from litemq.spark.arrow_decode import ARROW_SCHEMA, ARROW_SCHEMA_HEADERS, HEADERS_TYPE
    from litemq.spark.offsets import _make_client

    cfg = dict(part.client)
    cfg.setdefault("group.id", f"spark-kafka-source-{uuid.uuid4()}")
    cfg.update({"enable.auto.commit": False, "enable.partition.eof": True, "auto.offset.reset": "error",
                "log_level": cfg.get("log_level", 3)})
    c = _make_client(ck.Consumer, cfg)
    cols = _empty_cols()
    offset = part.start
    deadline = time.monotonic() + part.poll_timeout_ms / 1000

    def emit():
        nonlocal cols
        n = len(cols["offset"])
        if not n:
            return None
        arrays = [pa.array(cols["key"], pa.binary()), pa.array(cols["value"], pa.binary()),
                  pa.array([part.topic] * n, pa.string()), pa.array([part.partition] * n, pa.int32()),
                  pa.array(cols["offset"], pa.int64()),
                  pa.array([t * 1000 for t in cols["ts"]], pa.int64()).cast(pa.timestamp("us", tz="UTC")),
                  pa.array(cols["tstype"], pa.int32())]
        schema = ARROW_SCHEMA
        if part.include_headers:
            arrays.append(pa.array(cols["headers"], HEADERS_TYPE))
            schema = ARROW_SCHEMA_HEADERS
        cols = _empty_cols()
        return pa.RecordBatch.from_arrays(arrays, schema=schema)

    try:
        c.assign([ck.TopicPartition(part.topic, part.partition, part.start)])
        done = False
        while not done:
            msgs = c.consume(10_000, 0.5)
            if not msgs and time.monotonic() > deadline:
                raise TimeoutError(f"{part.topic}-{part.partition}: no records at offset {offset} after "
                                   f"{part.poll_timeout_ms} ms (kafkaConsumer.pollTimeoutMs)")
            for m in msgs:
                err = m.error()
                if err is not None:
                    if err.code() == ck.KafkaError._PARTITION_EOF:
                        if m.offset() >= part.end or offset >= part.end:
                            done = True
                            break
                        continue
                    if err.code() == ck.KafkaError._AUTO_OFFSET_RESET:
                        lo, hi = c.get_watermark_offsets(ck.TopicPartition(part.topic, part.partition),
                                                         timeout=30, cached=False)
                        if offset < lo:
                            _data_loss(part.fail_on_data_loss, f"Offsets [{offset}, {min(lo, part.end)}) of "
                                       f"{part.topic}-{part.partition} are gone: the log now starts at {lo}.")
                            offset = lo
                            if offset >= part.end:
                                done = True
                                break
                            c.assign([ck.TopicPartition(part.topic, part.partition, offset)])
                            break
                        _data_loss(part.fail_on_data_loss, f"Offsets [{offset}, {part.end}) of "
                                   f"{part.topic}-{part.partition} are gone: the log now ends at {hi}.")
                        done = True
                        break
                    raise ck.KafkaException(err)
                o = m.offset()
                if o >= part.end:
                    done = True
                    break
                deadline = time.monotonic() + part.poll_timeout_ms / 1000
                offset = o + 1
                if o < part.start:
                    continue
                cols["key"].append(m.key())
                cols["value"].append(m.value())
                cols["offset"].append(o)
                tstype, ts = m.timestamp()
                cols["ts"].append(ts)
                cols["tstype"].append(1 if tstype == ck.TIMESTAMP_LOG_APPEND_TIME else 0)
                if part.include_headers:
                    cols["headers"].append([(k, v) for k, v in (m.headers() or [])])
                if offset >= part.end:
                    done = True
                    break
            if len(cols["offset"]) >= ROWS_PER_ARROW_BATCH:
                yield emit()
        rb = emit()
        if rb is not None:
            yield rb
    finally:
        c.close()


def _empty_cols() -> dict:
    return {"key": [], "value": [], "offset": [], "ts": [], "tstype": [], "headers": []}


# ------------------------------------------------------------------------------- batch reader


class LiteMQBatchReader(DataSourceReader):
    """``spark.read.format("litemq")``: a fixed offset range per partition, resolved once
    (startingOffsets/Timestamp .. endingOffsets/Timestamp) when Spark plans the query."""

    def __init__(self, so: SourceOptions) -> None:
        self.so = so

    def partitions(self):
        so = self.so
        rd = O.OffsetReader(so)
        try:
            tps = rd.topic_partitions()
            wm = rd.watermarks(tps)
            starts = resolve_starting(so, rd, tps, wm)
            ends = resolve_ending(so, rd, tps, wm)
        finally:
            rd.close()
        ranges = []
        for tp in tps:
            s, e = starts[tp], ends[tp]
            if e < s:
                _data_loss(so.fail_on_data_loss,
                           f"{tp[0]}-{tp[1]}: ending offset {e} is before the starting offset {s}.")
                continue
            ranges.append((tp[0], tp[1], s, e))
        parts = make_partitions(so, ranges)
        if not parts:  # Spark wants at least one partition
            parts = [KafkaInputPartition("", 0, 0, 0, so.client, so.include_headers, True, False, 1)]
        return parts

    def read(self, partition):
        return read_partition(partition)


def resolve_starting(so: SourceOptions, rd: O.OffsetReader, tps, wm) -> dict:
    """Concrete start offsets for ``tps`` from startingTimestamp / startingOffsetsByTimestamp /
    startingOffsets (in that precedence, as in Spark). Raises ValueError for a JSON spec that
    misses subscribed partitions or a timestamp with no offset under strategy ``error``."""
    if so.starting_ts is not None:
        if isinstance(so.starting_ts, int):
            wanted = {tp: so.starting_ts for tp in tps}
        else:
            flat = O.flatten(so.starting_ts)
            missing = [tp for tp in tps if tp not in flat]
            if missing:
                raise ValueError(f"startingOffsetsByTimestamp does not cover partitions {missing}")
            wanted = {tp: flat[tp] for tp in tps}
        found = rd.for_times(wanted)
        out = {}
        for tp in tps:
            off = found.get(tp, -1)
            if off < 0:
                if so.starting_ts_strategy == "error":
                    raise ValueError(f"No offset matched the starting timestamp {wanted[tp]} for {tp[0]}-{tp[1]} "
                                     "(set startingOffsetsByTimestampStrategy=latest to start at the end)")
                off = wm[tp][1]
            out[tp] = off
        return out
    spec = so.starting
    if spec == "earliest":
        return {tp: wm[tp][0] for tp in tps}
    if spec == "latest":
        return {tp: wm[tp][1] for tp in tps}
    flat = O.flatten(spec)
    missing = [tp for tp in tps if tp not in flat]
    if missing:
        raise ValueError(f"startingOffsets does not cover partitions {missing}: give an offset "
                         "(or -2 earliest / -1 latest) for every subscribed partition")
    out = {}
    for tp in tps:
        off = flat[tp]
        out[tp] = wm[tp][0] if off == -2 else wm[tp][1] if off == -1 else off
    return out


def resolve_ending(so: SourceOptions, rd: O.OffsetReader, tps, wm) -> dict:
    """Concrete end offsets (exclusive) for a batch query: endingTimestamp /
    endingOffsetsByTimestamp (no match -> latest) / endingOffsets (latest by default)."""
    if so.ending_ts is not None:
        if isinstance(so.ending_ts, int):
            wanted = {tp: so.ending_ts for tp in tps}
        else:
            flat = O.flatten(so.ending_ts)
            wanted = {tp: flat[tp] for tp in tps if tp in flat}
        found = rd.for_times(wanted)
        return {tp: found[tp] if found.get(tp, -1) >= 0 else wm[tp][1] for tp in tps}
    spec = so.ending
    if spec in (None, "latest"):
        return {tp: wm[tp][1] for tp in tps}
    flat = O.flatten(spec)
    missing = [tp for tp in tps if tp not in flat]
    if missing:
        raise ValueError(f"endingOffsets does not cover partitions {missing}")
    return {tp: wm[tp][1] if flat[tp] == -1 else flat[tp] for tp in tps}


# --------------------------------------------------------------------------- streaming reader


class LiteMQStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """``spark.readStream.format("litemq")``.

    Offsets: ``{topic: {"partition": next offset to read}}``. ``initialOffset`` resolves
    startingOffsets / startingTimestamp once (Spark stores it in the checkpoint, so a restart
    continues from the checkpoint, never from the options). ``latestOffset(start, limit)``
    looks at the subscription again every trigger: new partitions and new topics matching
    ``subscribePattern`` join from their earliest offset; ``maxOffsetsPerTrigger`` arrives as
    ``ReadMaxRows`` and bounds the batch; ``minOffsetsPerTrigger`` holds a trigger back (returns
    ``start``) until enough offsets are available or ``maxTriggerDelay`` has passed. With
    ``kafka.isolation.level=read_committed`` the latest offsets are last stable offsets
    (ListOffsets isolation level 1, KIP-98): a batch never includes or waits for records of an
    open transaction.
    """

    def __init__(self, so: SourceOptions) -> None:
        self.so = so
        self._rd = None
        self._target = None  # AvailableNow: {(t, p): offset}
        self._last_trigger = time.monotonic()
        self._latest_seen = None

    def __getstate__(self):
        d = dict(self.__dict__)
        d["_rd"] = None
        return d

    def _reader(self) -> O.OffsetReader:
        if self._rd is None:
            self._rd = O.OffsetReader(self.so)
        return self._rd

    def initialOffset(self) -> dict:
        rd = self._reader()
        tps = rd.topic_partitions()
        wm = rd.watermarks(tps)
        return O.to_json_offsets(O.nest(resolve_starting(self.so, rd, tps, wm)))

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.so.max_offsets_per_trigger:
            return ReadMaxRows(self.so.max_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        rd = self._reader()
        tps = rd.topic_partitions()
        self._target = rd.latest(tps)

    def _current(self, start_flat: dict) -> tuple[dict, dict]:
        """(latest, earliest-of-new-partitions) for every partition of the subscription now."""
        rd = self._reader()
        tps = rd.topic_partitions()
        wm = rd.watermarks(tps)
        latest = {tp: wm[tp][1] for tp in tps}
        new = {tp: wm[tp][0] for tp in tps if tp not in start_flat}
        gone = [tp for tp in start_flat if tp not in latest]
        if gone and self.so.assign is None:
            _data_loss(self.so.fail_on_data_loss, f"Partitions {gone} were deleted.")
        for tp, off in start_flat.items():
            # read_committed: latest is the last stable offset, which an open transaction holds
            # below an offset reached earlier with read_uncommitted: not a loss (a truncated log
            # is still detected by the read, OFFSET_OUT_OF_RANGE)
            if tp in latest and latest[tp] < off and not self.so.read_committed:
                _data_loss(self.so.fail_on_data_loss,
                           f"{tp[0]}-{tp[1]}: the log now ends at {latest[tp]}, before the committed offset {off}.")
        return latest, new

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        start_flat = O.flatten(O.from_json_offsets(start))
        latest, new = self._current(start_flat)
        if self._target is not None:
            latest = {tp: min(off, self._target[tp]) for tp, off in latest.items() if tp in self._target}
            new = {tp: o for tp, o in new.items() if tp in latest}
        begin = dict(start_flat)
        begin.update(new)
        # never go backwards (data loss handled above); keep partitions we no longer see
        end = {tp: max(latest.get(tp, begin[tp]), begin.get(tp, 0)) for tp in set(latest) | set(begin)}
        end = {tp: end[tp] for tp in end if tp in latest or tp in start_flat}
        self._latest_seen = dict(end)
        avail = sum(end[tp] - begin.get(tp, end[tp]) for tp in end)
        so = self.so
        min_rows = so.min_offsets_per_trigger
        if isinstance(limit, ReadMinRows):
            min_rows = limit.min_rows
        if min_rows and self._target is None and 0 < avail < min_rows:
            waited_ms = (time.monotonic() - self._last_trigger) * 1000
            if waited_ms < so.max_trigger_delay_ms:
                return start  # hold the trigger back: not enough data yet
        if isinstance(limit, ReadMaxRows):
            end = O.rate_limit(begin, end, limit.max_rows)
        result = O.to_json_offsets(O.nest(end))
        if result != O.to_json_offsets(O.nest(start_flat)):
            self._last_trigger = time.monotonic()
        return result

    def reportLatestOffset(self):
        return O.to_json_offsets(O.nest(self._latest_seen)) if self._latest_seen else None

    def partitions(self, start: dict, end: dict):
        so = self.so
        s = O.flatten(O.from_json_offsets(start))
        e = O.flatten(O.from_json_offsets(end))
        missing = [tp for tp in e if tp not in s]
        earliest = self._reader().earliest(missing) if missing else {}
        ranges = []
        for tp in sorted(e):
            b = s.get(tp, earliest.get(tp, 0))
            if e[tp] < b:
                _data_loss(so.fail_on_data_loss, f"{tp[0]}-{tp[1]}: end offset {e[tp]} is before start {b}.")
                continue
            ranges.append((tp[0], tp[1], b, e[tp]))
        return make_partitions(so, ranges)

    def read(self, partition):
        return read_partition(partition)

    def commit(self, end: dict) -> None:
        """Nothing to do: progress lives in Spark's checkpoint, not in Kafka consumer groups."""

    def stop(self) -> None:
        if self._rd is not None:
            self._rd.close()
            self._rd = None
