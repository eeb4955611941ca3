"""Record-level produce validation and conversion (Kafka ``LogValidator``) with real clients:
keyless records on a compacted topic fail their whole batch with per-record errors (KIP-467),
and a topic ``compression.type`` codec makes the broker recompress batches of other codecs."""

from __future__ import annotations

import asyncio
import random
import time

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from litemq.broker.record_validation import validate_and_convert
from litemq.protocol.errors import ErrorCode
from litemq.protocol.records import (
    COMPRESSION_GZIP,
    COMPRESSION_NONE,
    COMPRESSION_ZSTD,
    build_batch,
    decode_batch,
    iter_batches,
)
from litemq.testing.wire import WireClient

READ_TIMEOUT_S = 30.0
BASE_TS_MS = 1_700_000_000_000


def _name(prefix: str) -> str:
    return f"{prefix}-{random.randrange(1 << 30)}"


def _create(bs: str, name: str, configs: dict[str, str], partitions: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": bs})
    admin.create_topics([NewTopic(name, partitions, 1, config=configs)])[name].result(timeout=30)


def _produce_raw(c: WireClient, topic: str, batch: bytes, version: int):
    resp = c.request(0, version, {"transactional_id": None, "acks": -1, "timeout_ms": 10000,
                                  "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}]})
    return resp.responses[0].partition_responses[0]


def _end_offset(c: WireClient, topic: str) -> int:
    resp = c.request(2, 7, {"replica_id": -1, "isolation_level": 0, "topics": [
        {"name": topic, "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}]}]})
    return resp.topics[0].partitions[0].offset


def _fetch_raw(c: WireClient, topic: str) -> bytes:
    """Every stored batch of partition 0, as bytes, by raw Fetch v11."""
    out = b""
    offset = 0
    while offset < _end_offset(c, topic):
        resp = c.request(1, 11, {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 24,
                                 "isolation_level": 0, "session_id": 0, "session_epoch": -1, "rack_id": "",
                                 "forgotten_topics_data": [], "topics": [{"topic": topic, "partitions": [
                                     {"partition": 0, "current_leader_epoch": -1, "fetch_offset": offset,
                                      "log_start_offset": -1, "partition_max_bytes": 1 << 24}]}]})
        part = resp.responses[0].partitions[0]
        assert part.error_code == 0
        data = bytes(part.records or b"")
        batches = list(iter_batches(data, allow_trailing_partial=True))
        assert batches
        end = batches[-1][0] + batches[-1][1].size
        out += data[:end]
        offset = batches[-1][1].next_offset
    return out


# ====================================================================== KIP-467 record errors
def test_keyless_batch_on_compacted_topic_confluent_delivery_error(shared_broker):
    bs = shared_broker.bootstrap_servers
    topic = _name("cmp-nokey")
    _create(bs, topic, {"cleanup.policy": "compact"})
    errors = []
    p = Producer({"bootstrap.servers": bs, "acks": "all", "retries": 0, "linger.ms": 200,
                  "batch.num.messages": 10})
    for i in range(10):
        p.produce(topic, value=b"no key %d" % i, on_delivery=lambda err, msg: errors.append(err))
    p.flush(30)
    assert len(errors) == 10
    assert all(e is not None and e.code() == KafkaError.INVALID_RECORD for e in errors), errors
    with WireClient("127.0.0.1", shared_broker.port) as c:
        assert _end_offset(c, topic) == 0  # nothing of the failed batches was appended


def test_keyless_batch_on_compacted_topic_lists_record_errors(shared_broker):
    bs = shared_broker.bootstrap_servers
    topic = _name("cmp-rec-errors")
    _create(bs, topic, {"cleanup.policy": "compact"})
    with WireClient("127.0.0.1", shared_broker.port) as c:
        for version, codec in ((8, COMPRESSION_NONE), (9, COMPRESSION_GZIP), (11, COMPRESSION_ZSTD)):
            part = _produce_raw(c, topic, build_batch([(None, b"v%d" % i) for i in range(10)], compression=codec),
                                version)
            assert part.error_code == ErrorCode.INVALID_RECORD
            assert [e.batch_index for e in part.record_errors] == list(range(10))
            msg = f"Compacted topic cannot accept message without key in topic partition {topic}-0."
            assert {e.batch_index_error_message for e in part.record_errors} == {msg}
            assert part.error_message.startswith("One or more records have been rejected due to 10 record errors")
            assert part.base_offset == -1
        # keyed and keyless mixed: the whole batch fails, only the keyless ones are listed
        mixed = [(None if i in (2, 5, 7) else b"k%d" % i, b"v") for i in range(9)]
        part = _produce_raw(c, topic, build_batch(mixed), 8)
        assert part.error_code == ErrorCode.INVALID_RECORD
        assert [e.batch_index for e in part.record_errors] == [2, 5, 7]
        part = _produce_raw(c, topic, build_batch(mixed), 7)  # before v8: the error code alone
        assert part.error_code == ErrorCode.INVALID_RECORD
        assert _end_offset(c, topic) == 0
        part = _produce_raw(c, topic, build_batch([(b"k", b"v")]), 8)
        assert (part.error_code, part.base_offset, list(part.record_errors)) == (0, 0, [])
        assert _end_offset(c, topic) == 1


# ====================================================================== compression.type
def _ck_read(bs: str, topic: str, n: int) -> list[tuple[bytes, bytes, int]]:
    c = Consumer({"bootstrap.servers": bs, "group.id": "rd-" + topic, "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    got = []
    deadline = time.monotonic() + READ_TIMEOUT_S
    while len(got) < n and time.monotonic() < deadline:
        for m in c.consume(min(1000, n - len(got)), 0.5):  # returns once the last one came
            assert m.error() is None, m.error()
            got.append((m.key(), m.value(), m.timestamp()[1]))
    c.close()
    return got


def _kp_read(bs: str, topic: str, n: int) -> list[tuple[bytes, bytes, int]]:
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KTP

    c = KafkaConsumer(bootstrap_servers=bs, enable_auto_commit=False, auto_offset_reset="earliest")
    c.assign([KTP(topic, 0)])
    c.seek_to_beginning()
    got = []
    deadline = time.monotonic() + READ_TIMEOUT_S
    while len(got) < n and time.monotonic() < deadline:
        for _tp, msgs in c.poll(timeout_ms=500, max_records=5000).items():
            got += [(m.key, m.value, m.timestamp) for m in msgs]
    c.close()
    return got


def _ak_read(bs: str, topic: str, n: int) -> list[tuple[bytes, bytes, int]]:
    from aiokafka import AIOKafkaConsumer
    from aiokafka import TopicPartition as ATP

    async def run():
        c = AIOKafkaConsumer(bootstrap_servers=bs, enable_auto_commit=False, auto_offset_reset="earliest")
        await c.start()
        got = []
        try:
            c.assign([ATP(topic, 0)])
            await c.seek_to_beginning()
            deadline = time.monotonic() + READ_TIMEOUT_S
            while len(got) < n and time.monotonic() < deadline:
                for _tp, msgs in (await c.getmany(timeout_ms=500, max_records=5000)).items():
                    got += [(m.key, m.value, m.timestamp) for m in msgs]
        finally:
            await c.stop()
        return got

    return asyncio.run(run())


@pytest.mark.parametrize("target,codec_id", [("zstd", COMPRESSION_ZSTD), ("uncompressed", COMPRESSION_NONE)])
def test_topic_compression_type_recompresses(shared_broker, target, codec_id):
    bs = shared_broker.bootstrap_servers
    topic = _name("ct-" + target)
    _create(bs, topic, {"compression.type": target})
    admin = AdminClient({"bootstrap.servers": bs})
    res = ConfigResource("topic", topic)
    assert admin.describe_configs([res])[res].result(timeout=30)["compression.type"].value == target

    want = []
    for codec in ("gzip", "none", "lz4", "snappy", "zstd"):
        p = Producer({"bootstrap.servers": bs, "acks": "all", "enable.idempotence": True,
                      "compression.type": codec, "linger.ms": 20})
        for i in range(50):
            key, value = f"{codec}-{i}".encode(), (f"value {i} " * 20).encode()
            p.produce(topic, key=key, value=value, timestamp=BASE_TS_MS + i, headers=[("h", key)])
            want.append((key, value, BASE_TS_MS + i))
        assert p.flush(30) == 0

    with WireClient("127.0.0.1", shared_broker.port) as c:
        stored = _fetch_raw(c, topic)
    headers = [h for _, h in iter_batches(stored)]
    assert headers and {h.compression for h in headers} == {codec_id}
    assert all(h.producer_id >= 0 and h.base_sequence >= 0 for h in headers)  # idempotence kept
    decoded = [r for pos, _ in iter_batches(stored) for r in decode_batch(stored, pos)[1]]
    assert [r.offset for r in decoded] == list(range(len(want)))
    assert [(r.key, r.value, r.timestamp) for r in decoded] == want
    assert all(r.headers == (("h", r.key),) for r in decoded)

    assert _ck_read(bs, topic, len(want)) == want
    assert _kp_read(bs, topic, len(want)) == want
    assert _ak_read(bs, topic, len(want)) == want


def test_compression_type_values_are_validated(shared_broker):
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry

    bs = shared_broker.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bs})
    bad = _name("ct-bad")
    with pytest.raises(Exception) as exc:
        admin.create_topics([NewTopic(bad, 1, 1, config={"compression.type": "brotli"})])[bad].result(timeout=30)
    assert exc.value.args[0].code() == KafkaError.INVALID_CONFIG
    topic = _name("ct-alter")
    _create(bs, topic, {})
    res = ConfigResource("topic", topic)
    for value in ("producer", "uncompressed", "gzip", "snappy", "lz4", "zstd"):
        alter = ConfigResource("topic", topic, incremental_configs=[
            ConfigEntry("compression.type", value, incremental_operation=AlterConfigOpType.SET)])
        admin.incremental_alter_configs([alter])[alter].result(timeout=30)
        assert admin.describe_configs([res])[res].result(timeout=30)["compression.type"].value == value
    alter = ConfigResource("topic", topic, incremental_configs=[
        ConfigEntry("compression.type", "GZIP2", incremental_operation=AlterConfigOpType.SET)])
    with pytest.raises(Exception) as exc:
        admin.incremental_alter_configs([alter])[alter].result(timeout=30)
    assert exc.value.args[0].code() == KafkaError.INVALID_CONFIG


def test_recompression_keeps_batch_fields():
    """The conversion itself: producer id/epoch/base sequence, the transactional flag, the
    timestamp type, offset deltas and record contents survive a codec change."""
    recs = [(b"k%d" % i, b"v%d" % i, [("h", b"x")], BASE_TS_MS + (i * 7) % 5) for i in range(20)]
    src = build_batch(recs, compression=COMPRESSION_GZIP, producer_id=4242, producer_epoch=3, base_sequence=17,
                      is_transactional=True)
    out = validate_and_convert(bytearray(src), "t-0", compacted=False, codec=COMPRESSION_ZSTD)
    (pos, h), = list(iter_batches(out))
    h0 = next(iter_batches(src))[1]
    assert h.compression == COMPRESSION_ZSTD
    assert (h.producer_id, h.producer_epoch, h.base_sequence, h.is_transactional, h.timestamp_type) == (
        4242, 3, 17, True, 0)
    assert (h.base_timestamp, h.max_timestamp, h.last_offset_delta, h.records_count) == (
        h0.base_timestamp, h0.max_timestamp, h0.last_offset_delta, h0.records_count)
    assert decode_batch(out, pos)[1] == decode_batch(src)[1]
    same = bytearray(src)
    assert validate_and_convert(same, "t-0", compacted=True, codec=COMPRESSION_GZIP) is same  # codec matches


# ====================================================================== timestamps (KIP-937, Kafka 4 defaults)
def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def test_future_timestamp_refused_by_default_confluent(shared_broker):
    """Kafka 4's ``message.timestamp.after.max.ms`` default (one hour, KIP-1030): a record stamped
    two hours ahead fails its delivery with INVALID_TIMESTAMP; 30 minutes ahead and a year back
    are stored with their own timestamps."""
    bs = shared_broker.bootstrap_servers
    topic = _name("ts-default")
    _create(bs, topic, {})
    now = _now_ms()
    results = {}
    p = Producer({"bootstrap.servers": bs, "acks": "all", "retries": 0})
    for label, ts in (("ahead_2h", now + 2 * 3_600_000), ("ahead_30m", now + 1_800_000),
                      ("year_back", now - 365 * 86_400_000)):
        p.produce(topic, key=label.encode(), value=b"v", timestamp=ts,
                  on_delivery=lambda err, msg, label=label: results.__setitem__(label, err))
        p.flush(30)  # one batch per record: each is judged alone
    assert results["ahead_2h"] is not None and results["ahead_2h"].code() == KafkaError.INVALID_TIMESTAMP, results
    assert results["ahead_30m"] is None and results["year_back"] is None, results
    got = sorted(_ck_read(bs, topic, 2), key=lambda r: r[2])
    assert [k for k, _, _ in got] == [b"year_back", b"ahead_30m"]
    assert [ts for _, _, ts in got] == [now - 365 * 86_400_000, now + 1_800_000]


def test_timestamp_bounds_list_record_errors_and_follow_topic_configs(shared_broker):
    """The wire answer as Kafka 4 gives it: INVALID_TIMESTAMP, "One or more records have been
    rejected due to invalid timestamp", one RecordError per offending record (ProduceResponse v8+,
    KIP-467) and nothing of the batch appended; ``message.timestamp.before.max.ms`` bounds the past,
    ``after.max.ms`` can be widened, LogAppendTime topics ignore both, bad values are INVALID_CONFIG
    and Kafka 4's removed ``message.timestamp.difference.max.ms`` is refused."""
    bs = shared_broker.bootstrap_servers
    topic, wide, append_time = _name("ts-wire"), _name("ts-wide"), _name("ts-lat")
    _create(bs, topic, {"message.timestamp.before.max.ms": "600000"})
    _create(bs, wide, {"message.timestamp.after.max.ms": "9223372036854775807"})
    _create(bs, append_time, {"message.timestamp.type": "LogAppendTime"})
    now = _now_ms()
    recs = [(b"k%d" % i, b"v", (), ts) for i, ts in enumerate(
        (now, now + 2 * 3_600_000, now - 3_600_000, now - 60_000, -1))]
    with WireClient("127.0.0.1", shared_broker.port) as c:
        for codec in (COMPRESSION_NONE, COMPRESSION_ZSTD):
            part = _produce_raw(c, topic, build_batch(recs, compression=codec), 9)
            assert part.error_code == ErrorCode.INVALID_TIMESTAMP
            assert part.error_message == "One or more records have been rejected due to invalid timestamp"
            assert [e.batch_index for e in part.record_errors] == [1, 2]  # 2 h ahead, 1 h back (> 10 min)
            assert "is out of range. The timestamp should be within [" in part.record_errors[0].batch_index_error_message
            assert part.base_offset == -1
        assert _end_offset(c, topic) == 0
        ok = _produce_raw(c, topic, build_batch([r for i, r in enumerate(recs) if i not in (1, 2)]), 9)
        assert (ok.error_code, ok.base_offset) == (0, 0)
        assert _end_offset(c, topic) == 3
        for t in (wide, append_time):  # no upper bound / the broker's clock stamps the batch
            part = _produce_raw(c, t, build_batch(recs), 9)
            assert (part.error_code, part.base_offset) == (0, 0), t
    admin = AdminClient({"bootstrap.servers": bs})
    for bad in ({"message.timestamp.after.max.ms": "-1"}, {"message.timestamp.before.max.ms": "x"},
                {"message.timestamp.difference.max.ms": "1000"}):
        name = _name("ts-bad")
        fut = admin.create_topics([NewTopic(name, 1, 1, config=bad)])[name]
        with pytest.raises(Exception) as exc_info:
            fut.result(timeout=30)
        assert exc_info.value.args[0].code() == KafkaError.INVALID_CONFIG, bad
    res = ConfigResource("topic", topic)
    described = admin.describe_configs([res])[res].result(timeout=30)
    assert described["message.timestamp.after.max.ms"].value == "3600000"
    assert described["message.timestamp.before.max.ms"].value == "600000"
    assert "message.timestamp.difference.max.ms" not in described


def test_check_timestamps_reads_headers_only_within_bounds():
    """A batch within the default bounds is judged from its header: a batch whose records could
    not be decoded (its record bytes garbled behind a header that still parses) passes untouched,
    while the same garbling in a batch that breaks the bound is decoded and reported corrupt."""
    from litemq.broker.record_validation import check_timestamps
    from litemq.storage.config import LONG_MAX
    from litemq.protocol.errors import CorruptRecordError

    now = _now_ms()
    good = bytearray(build_batch([(b"k", b"v", (), now)]))
    check_timestamps(good, now, LONG_MAX, 3_600_000)
    garbled = bytearray(good)
    garbled[-3:] = b"\xff\xff\xff"  # the record's bytes (the CRC no longer matches)
    check_timestamps(garbled, now, LONG_MAX, 3_600_000)  # header only: max_timestamp is fine
    with pytest.raises(CorruptRecordError):
        check_timestamps(garbled, now - 2 * 3_600_000, LONG_MAX, 3_600_000)


def test_broker_default_of_the_timestamp_bounds_is_dynamic(tmp_path):
    """``log.message.timestamp.after.max.ms`` is the broker-wide default of the topic config,
    changed without a restart (Kafka ``DynamicLogConfig``); a topic's own value still wins."""
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry

    from litemq.testing.process import BrokerProcess

    with BrokerProcess(tmp_path / "data") as b:
        bs = b.bootstrap_servers
        follows, own = _name("ts-follows"), _name("ts-own")
        _create(bs, follows, {})
        _create(bs, own, {"message.timestamp.after.max.ms": "3600000"})
        admin = AdminClient({"bootstrap.servers": bs})
        res = ConfigResource("broker", "1", incremental_configs=[ConfigEntry(
            "log.message.timestamp.after.max.ms", "86400000", incremental_operation=AlterConfigOpType.SET)])
        admin.incremental_alter_configs([res])[res].result(30)
        topic_res = ConfigResource("topic", follows)
        entry = admin.describe_configs([topic_res])[topic_res].result(30)["message.timestamp.after.max.ms"]
        assert entry.value == "86400000"
        ahead = [(b"k", b"v", (), _now_ms() + 2 * 3_600_000)]
        with WireClient("127.0.0.1", b.port) as c:
            assert _produce_raw(c, follows, build_batch(ahead), 9).error_code == 0
            assert _produce_raw(c, own, build_batch(ahead), 9).error_code == ErrorCode.INVALID_TIMESTAMP


@pytest.mark.parametrize("configs", [{"compression.type": "gzip"}, {"cleanup.policy": "compact"}],
                         ids=["recompressed", "compacted"])
def test_max_message_bytes_holds_for_the_batch_as_sent(shared_broker, configs):
    """A batch over max.message.bytes is MESSAGE_TOO_LARGE even where the broker recompresses
    or compacts it to fewer bytes (Kafka checks the batch as sent, then what it makes of it);
    it was accepted when recompression shrank it below the limit."""
    bs = shared_broker.bootstrap_servers
    topic = _name("big")
    _create(bs, topic, {"max.message.bytes": "200000", **configs})
    errors = []
    p = Producer({"bootstrap.servers": bs, "acks": "all", "compression.type": "none", "linger.ms": 0,
                  "message.max.bytes": 1_000_000})
    for size in (400_000, 1000):  # one batch each
        p.produce(topic, key=b"k", value=b"a" * size, on_delivery=lambda err, _m: errors.append(err))
        assert p.flush(30) == 0
    assert [e.code() if e else None for e in errors] == [KafkaError.MSG_SIZE_TOO_LARGE, None], errors
