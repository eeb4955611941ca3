"""The streaming reader's offset logic driven directly (no Spark): admission control,
minOffsetsPerTrigger + maxTriggerDelay, AvailableNow target, new partitions and topics,
data loss. Real broker."""

from __future__ import annotations

import time
import uuid

import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

from litemq.spark.options import parse_source_options
from litemq.spark.reader import DataLossError, LiteMQStreamReader, read_partition


def _reader(broker, **opts):
    o = {"kafka.bootstrap.servers": broker.bootstrap_servers, "startingoffsets": "earliest"}
    o.update({k.lower(): v for k, v in opts.items()})
    return LiteMQStreamReader(parse_source_options(o, streaming=True))


def _total(off):
    return sum(sum(p.values()) for p in off.values())


def test_max_rows_bounds_each_step_and_reaches_the_end(broker):
    topic = broker.create_topic(partitions=3)
    broker.produce(topic, 1000)
    r = _reader(broker, subscribe=topic, maxOffsetsPerTrigger="128")
    assert r.getDefaultReadLimit() == ReadMaxRows(128)
    start = r.initialOffset()
    assert start == {topic: {"0": 0, "1": 0, "2": 0}}
    steps = 0
    while True:
        end = r.latestOffset(start, r.getDefaultReadLimit())
        if end == start:
            break
        assert 0 < _total(end) - _total(start) <= 128
        start = end
        steps += 1
    assert _total(start) == 1000 and steps == 8
    r.stop()


def test_min_offsets_per_trigger_waits_for_data_or_delay(broker):
    topic = broker.create_topic(partitions=1)
    r = _reader(broker, subscribe=topic, minOffsetsPerTrigger="100", maxTriggerDelay="2s")
    start = r.initialOffset()
    broker.produce(topic, 30)
    assert r.latestOffset(start, ReadAllAvailable()) == start  # 30 < 100: held back
    broker.produce(topic, 80, start=30)
    end = r.latestOffset(start, ReadAllAvailable())
    assert _total(end) == 110
    broker.produce(topic, 5, start=110)
    assert r.latestOffset(end, ReadAllAvailable()) == end
    time.sleep(2.2)  # maxTriggerDelay passed: fire with what there is
    assert _total(r.latestOffset(end, ReadAllAvailable())) == 115
    r.stop()


def test_available_now_pins_the_target(broker):
    topic = broker.create_topic(partitions=2)
    broker.produce(topic, 100)
    r = _reader(broker, subscribe=topic, maxOffsetsPerTrigger="60")
    start = r.initialOffset()
    r.prepareForTriggerAvailableNow()
    broker.produce(topic, 100, start=100)  # after the target: must not be read
    seen = 0
    while True:
        end = r.latestOffset(start, ReadMaxRows(60))
        if end == start:
            break
        seen += _total(end) - _total(start)
        start = end
    assert seen == 100
    r.stop()


def test_new_partitions_and_new_matching_topics_start_at_earliest(broker):
    prefix = f"p{uuid.uuid4().hex[:6]}"
    a = broker.create_topic(f"{prefix}-a", partitions=1)
    broker.produce(a, 10)
    r = _reader(broker, subscribePattern=f"{prefix}-.*")
    start = r.initialOffset()
    assert start == {a: {"0": 0}}
    broker.add_partitions(a, 2)
    broker.produce(a, 7, partition=1)
    b = broker.create_topic(f"{prefix}-b", partitions=1)
    broker.produce(b, 5)
    broker.create_topic(f"other-{prefix}-c", partitions=1)  # does not match the whole pattern
    end = r.latestOffset(start, ReadAllAvailable())
    assert end == {a: {"0": 10, "1": 7}, b: {"0": 5}}
    parts = r.partitions(start, end)
    assert sorted((p.topic, p.partition, p.start, p.end) for p in parts) == [
        (a, 0, 0, 10), (a, 1, 0, 7), (b, 0, 0, 5)]
    rows = sum(rb.num_rows for p in parts for rb in read_partition(p))
    assert rows == 22
    r.stop()


@pytest.mark.parametrize("fail", [True, False])
def test_data_loss(broker, fail):
    import confluent_kafka as ck
    from confluent_kafka.admin import AdminClient

    topic = broker.create_topic(partitions=1)
    broker.produce(topic, 100)
    r = _reader(broker, subscribe=topic, failOnDataLoss=str(fail).lower())
    start = r.initialOffset()
    end = r.latestOffset(start, ReadAllAvailable())
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    res = admin.delete_records([ck.TopicPartition(topic, 0, 40)])
    for f in res.values():
        f.result(30)
    (part,) = r.partitions(start, end)
    if fail:
        with pytest.raises(DataLossError, match="failOnDataLoss"):
            list(read_partition(part))
    else:
        offsets = [o for rb in read_partition(part) for o in rb.column("offset").to_pylist()]
        assert offsets == list(range(40, 100))
    r.stop()
